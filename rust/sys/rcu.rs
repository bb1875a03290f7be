// SPDX-License-Identifier: GPL-2.0
//! [`RcuSlot`]: a boxed value published once and revocable from process
//! context while other contexts (xmit under libiscsi's lock, completion
//! handlers in softirq, task cleanup) may be reading it.
//!
//! Readers hold an RCU read-side critical section for as long as their
//! [`RcuGuard`] lives (they must not sleep meanwhile); `revoke` unpublishes
//! the value, waits for every reader with `synchronize_rcu`, and drops it in
//! the revoker's (process) context. This is how a connection's RDMA
//! resources are freed while the device is being removed, before rdma_cm
//! and ib_core tear the device down.
//!
//! Where bottom halves are already off (a completion handler in softirq,
//! a libiscsi callback under a `spin_lock_bh` lock, code inside
//! `work::with_bh_disabled`), a [`BhOff`] token
//! stands in for the read-side section: [`RcuSlot::get_bh`] reads the slot
//! without `rcu_read_lock`, which on the hot path cost a pair of calls
//! into the C shim per callback (issue 18).

use super::bindings as b;
use core::marker::PhantomData;
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::error::code::EBUSY;
use kernel::prelude::*;

/// A slot holding at most one `KBox<T>`.
///
/// # Invariants
///
/// The pointer is null or came from `KBox::into_raw` in `set`; it is
/// turned back into a box only after it was swapped out of the slot and an
/// RCU grace period passed (`take`, `revoke`, drop), so a reader inside an
/// RCU read-side section never sees the box freed.
pub(crate) struct RcuSlot<T> {
    ptr: AtomicPtr<T>,
}

// SAFETY: readers get `&T` from any thread (`T: Sync`); the value is
// dropped by whichever thread revokes it (`T: Send`).
unsafe impl<T: Send + Sync> Sync for RcuSlot<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for RcuSlot<T> {}

/// Read access to the value of an [`RcuSlot`]; an RCU read-side critical
/// section until dropped: never sleep while holding one.
pub(crate) struct RcuGuard<'a, T> {
    val: &'a T,
}

impl<T> core::ops::Deref for RcuGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.val
    }
}

impl<T> Drop for RcuGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: pairs with the rcu_read_lock taken in `RcuSlot::get`.
        unsafe { b::iser_rs_rcu_read_unlock() };
    }
}

/// Proof that bottom halves stay disabled on this CPU for `'a`: softirq
/// context (a completion handler), code under a lock taken with
/// `spin_lock_bh` (a libiscsi callback under its frwd_lock or back_lock),
/// or code inside `local_bh_disable` (`work::with_bh_disabled`).
/// Such a region is an RCU read-side critical section for
/// `synchronize_rcu` (Linux 5.0 and later, where the RCU flavours were
/// consolidated: "regions of code across which interrupts, preemption,
/// or softirqs have been disabled also serve as RCU read-side critical
/// sections", `synchronize_rcu`'s kernel-doc), so a value read from an
/// [`RcuSlot`] under it lives as long as the token. Not `Send`: the
/// region is this CPU's.
#[derive(Clone, Copy)]
pub(crate) struct BhOff<'a>(PhantomData<(&'a (), *mut ())>);

impl BhOff<'_> {
    /// A token for the calling region. On a kernel with lockdep (the
    /// debug kernel) it warns once if bottom halves are on.
    ///
    /// # Safety
    ///
    /// Bottom halves are disabled on this CPU for all of the token's
    /// lifetime, which the caller ties to that region (a callback's
    /// arguments, never a stored value).
    #[inline]
    pub(crate) unsafe fn new_unchecked() -> Self {
        #[cfg(CONFIG_PROVE_LOCKING)]
        // SAFETY: only reads this CPU's preempt count.
        unsafe {
            b::iser_rs_assert_bh_off()
        };
        BhOff(PhantomData)
    }
}

impl<T> RcuSlot<T> {
    pub(crate) const fn new() -> Self {
        RcuSlot {
            ptr: AtomicPtr::new(null_mut()),
        }
    }

    /// Publishes `v`; fails with `EBUSY` (dropping `v`) if a value is set.
    pub(crate) fn set(&self, v: KBox<T>) -> Result {
        let p = KBox::into_raw(v);
        if self
            .ptr
            .compare_exchange(null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `p` came from `KBox::into_raw` above and was not
            // published.
            drop(unsafe { KBox::from_raw(p) });
            return Err(EBUSY);
        }
        Ok(())
    }

    /// The value, if published and not revoked.
    pub(crate) fn get(&self) -> Option<RcuGuard<'_, T>> {
        // SAFETY: plain RCU read lock; released by the guard or below.
        unsafe { b::iser_rs_rcu_read_lock() };
        match NonNull::new(self.ptr.load(Ordering::Acquire)) {
            Some(p) => {
                // A published pointer stays valid until `revoke`'s
                // synchronize_rcu has waited out every read-side section
                // that could have loaded it; this one lasts as long as the
                // guard, which borrows `self`.
                // SAFETY: `p` was published and this RCU section holds it.
                let val = unsafe { p.as_ref() };
                Some(RcuGuard { val })
            }
            None => {
                // SAFETY: taken above.
                unsafe { b::iser_rs_rcu_read_unlock() };
                None
            }
        }
    }

    /// The value, if published and not revoked, for as long as the
    /// bottom-half-disabled region `_bh` proves: `revoke` and `take` wait
    /// for that region with `synchronize_rcu` as for a read-side section
    /// ([`BhOff`]). No call into the C shim.
    #[inline]
    pub(crate) fn get_bh<'a>(&'a self, _bh: BhOff<'a>) -> Option<&'a T> {
        let p = NonNull::new(self.ptr.load(Ordering::Acquire))?;
        // `p` was published (type invariant) and stays valid until a `take`
        // that unpublished it has waited out a grace period; the region
        // `_bh` proves is one that grace period waits for.
        // SAFETY: per the above, valid for `'a`, which the reference keeps.
        let value = unsafe { p.as_ref() };
        Some(value)
    }

    /// Unpublishes and drops the value after all readers are gone.
    /// Process context (sleeps). Returns whether there was a value.
    pub(crate) fn revoke(&self) -> bool {
        self.take().is_some()
    }

    /// Unpublishes the value and returns it once all readers are gone, so
    /// that the caller can tear down what the readers used (a QP) before
    /// dropping it. Process context (sleeps).
    pub(crate) fn take(&self) -> Option<KBox<T>> {
        let p = self.ptr.swap(null_mut(), Ordering::AcqRel);
        if p.is_null() {
            return None;
        }
        // SAFETY: may sleep; callers are in process context.
        unsafe { b::iser_rs_synchronize_rcu() };
        // SAFETY: `p` came from `KBox::into_raw` in `set`, is no longer
        // published, and no reader can still hold it (grace period over).
        Some(unsafe { KBox::from_raw(p) })
    }
}

impl<T> Drop for RcuSlot<T> {
    fn drop(&mut self) {
        let p = *self.ptr.get_mut();
        if !p.is_null() {
            // SAFETY: `&mut self`: no reader guard borrows the slot any
            // more; `p` came from `KBox::into_raw` in `set`.
            drop(unsafe { KBox::from_raw(p) });
        }
    }
}

/// Waits for every RCU read-side section that started before the call.
/// Process context (sleeps).
pub(crate) fn synchronize() {
    // SAFETY: may sleep; callers are in process context.
    unsafe { b::iser_rs_synchronize_rcu() };
}

/// Runs `f` inside an RCU read-side section (no sleeping in `f`).
pub(crate) fn read_section<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: plain RCU read lock, released below.
    unsafe { b::iser_rs_rcu_read_lock() };
    let r = f();
    // SAFETY: taken above by this thread.
    unsafe { b::iser_rs_rcu_read_unlock() };
    r
}
