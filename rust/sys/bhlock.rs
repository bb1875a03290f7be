// SPDX-License-Identifier: GPL-2.0
//! [`BhSpinLock`]: a spinlock that disables bottom halves while held
//! (`spin_lock_bh`), for state shared between process context and softirq
//! completion handlers. The 6.12 `kernel` crate's `SpinLock` does not
//! disable bottom halves, so a softirq interrupting its holder on the same
//! CPU would deadlock; this one cannot.
//!
//! The `spinlock_t` is allocated by the C part (so it never moves while
//! lockdep knows it) and freed on drop.

use super::bindings as b;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use kernel::prelude::*;

/// `T` guarded by a BH-disabling spinlock.
///
/// # Invariants
///
/// `lock` points to a spinlock initialised by the C part in `new` and
/// freed only in `drop`; `data` is only reached with that lock held.
pub(crate) struct BhSpinLock<T> {
    lock: NonNull<b::spinlock_t>,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is only reached through `with`, which holds the lock, so
// sharing the lock between threads only ever hands `&mut T` to one of them;
// `T: Send` lets that thread be any thread.
unsafe impl<T: Send> Sync for BhSpinLock<T> {}
// SAFETY: the spinlock is a plain heap object usable from any thread.
unsafe impl<T: Send> Send for BhSpinLock<T> {}

impl<T> BhSpinLock<T> {
    /// Allocates and initialises the lock (process context, may sleep).
    pub(crate) fn new(v: T) -> Result<Self> {
        // SAFETY: allocation plus `spin_lock_init`; NULL on failure.
        let lock = NonNull::new(unsafe { b::iser_rs_bh_lock_new() }).ok_or(ENOMEM)?;
        // INVARIANT: `lock` was just allocated and initialised.
        Ok(BhSpinLock {
            lock,
            data: UnsafeCell::new(v),
        })
    }

    /// Runs `f` with the lock held and bottom halves disabled. `f` must not
    /// sleep, and must not take this lock again.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the lock was initialised in `new` and lives as long as
        // `self`.
        unsafe { b::iser_rs_spin_lock_bh(self.lock.as_ptr()) };
        // SAFETY: the lock is held: this is the only reference to `data`
        // until the unlock below.
        let r = f(unsafe { &mut *self.data.get() });
        // SAFETY: locked above by this thread.
        unsafe { b::iser_rs_spin_unlock_bh(self.lock.as_ptr()) };
        r
    }
}

impl<T> Drop for BhSpinLock<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nobody holds the lock; allocated in `new`.
        unsafe { b::iser_rs_bh_lock_free(self.lock.as_ptr()) };
    }
}
