// SPDX-License-Identifier: GPL-2.0
//! [`SetOnce`]: a value published once, then read lock-free from any
//! context (process and softirq), and taken back only with exclusive
//! access. This is how a connection's RDMA resources, created in the CM
//! handler, become visible to completion handlers without a lock.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::error::code::EBUSY;
use kernel::prelude::*;

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const SET: u8 = 2;

/// A slot written at most once through `&self`.
pub(crate) struct SetOnce<T> {
    state: AtomicU8,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value is written once before `state` becomes SET (release)
// and only read after observing SET (acquire); `T: Send + Sync` makes the
// shared reads and the hand-over between threads sound.
unsafe impl<T: Send + Sync> Sync for SetOnce<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SetOnce<T> {}

impl<T> SetOnce<T> {
    pub(crate) const fn new() -> Self {
        SetOnce {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(None),
        }
    }

    /// Publishes `v`; fails with `EBUSY` (returning nothing) if already set.
    pub(crate) fn set(&self, v: T) -> Result {
        if self
            .state
            .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: the WRITING state excludes every other writer and every
        // reader (readers only look after SET).
        unsafe { *self.value.get() = Some(v) };
        self.state.store(SET, Ordering::Release);
        Ok(())
    }

    pub(crate) fn get(&self) -> Option<&T> {
        if self.state.load(Ordering::Acquire) == SET {
            // SAFETY: SET is final until `take` (which needs `&mut self`),
            // and the value was fully written before SET was stored.
            unsafe { (*self.value.get()).as_ref() }
        } else {
            None
        }
    }

    /// Takes the value back (exclusive access: no reader can exist).
    pub(crate) fn take(&mut self) -> Option<T> {
        *self.state.get_mut() = EMPTY;
        self.value.get_mut().take()
    }
}
