// SPDX-License-Identifier: GPL-2.0
//! [`DelayedWork`]: a delayed work item embedded in a pinned owner, run
//! on system_percpu_wq (process context) through the owner's
//! [`DelayedWorkHandler`]. The 6.12 kernel crate's work items are
//! enqueued by handing over an `Arc` or a box; this one stays in its owner
//! and is cancelled when it drops.

use super::bindings as b;
use super::rcu::BhOff;
use core::marker::PhantomData;
use kernel::prelude::*;
use kernel::types::Opaque;

/// What a [`DelayedWork`] embedded in `Self` runs.
pub(crate) trait DelayedWorkHandler: Sized + Sync {
    /// Runs in process context, at most once at a time per item.
    fn run(this: &Self);
}

/// Where an owner keeps its [`DelayedWork`]; implemented by
/// [`impl_has_delayed_work!`].
///
/// # Safety
///
/// `OFFSET` is the byte offset in `Self` of a field of type
/// `DelayedWork<Self>`.
pub(crate) unsafe trait HasDelayedWork: DelayedWorkHandler {
    /// Offset of the `DelayedWork<Self>` field.
    const OFFSET: usize;
}

/// Implements [`HasDelayedWork`] for `$owner`, whose field `$field` is a
/// `DelayedWork<$owner>`.
macro_rules! impl_has_delayed_work {
    ($owner:ty, $field:ident) => {
        // SAFETY: the offset is that of `$field`, and the field's type is
        // checked below.
        unsafe impl $crate::sys::work::HasDelayedWork for $owner {
            const OFFSET: usize = {
                // Type check: the field is a `DelayedWork<$owner>`.
                let _: fn(&$owner) -> &$crate::sys::work::DelayedWork<$owner> = |o| &o.$field;
                core::mem::offset_of!($owner, $field)
            };
        }
    };
}
pub(crate) use impl_has_delayed_work;

/// A `struct delayed_work` inside its owner `T`.
///
/// # Invariants
///
/// `dw` was initialised in place by [`DelayedWork::new`] with
/// [`run_tr::<T>`] as its function, and the item lives inside a pinned `T`
/// at `T::OFFSET`. It is never pending or running once dropped: the drop
/// cancels it and waits, and the owner puts it first among its fields, so
/// it is dropped (cancelled) before anything the handler reads.
#[pin_data(PinnedDrop)]
#[repr(C)]
pub(crate) struct DelayedWork<T> {
    #[pin]
    dw: Opaque<b::delayed_work>,
    _owner: PhantomData<T>,
}

// SAFETY: the C work item is meant to be queued and cancelled from any
// thread; the handler gets `&T` only, and `T: Sync`.
unsafe impl<T: Sync> Sync for DelayedWork<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Send for DelayedWork<T> {}

impl<T: HasDelayedWork> DelayedWork<T> {
    /// A work item that runs `T::run` on its owner.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `p` is the item's final, pinned place; INIT_DELAYED_WORK
            // initialises it completely.
            dw <- Opaque::ffi_init(|p| unsafe { b::iser_rs_delayed_work_init(p, Some(run_tr::<T>)) }),
            _owner: PhantomData,
        })
    }

    /// Runs the handler `delay_ms` from now (0: as soon as possible), or
    /// at the time already set if the item is pending for an earlier one
    /// (the earliest wins, best effort: a run may come a jiffy late or
    /// early, so a handler serving several deadlines checks each and
    /// schedules again for what is left). Any context.
    pub(crate) fn schedule(&self, delay_ms: u32) {
        // SAFETY: initialised (type invariant); queueing is allowed from
        // any context.
        unsafe { b::iser_rs_delayed_work_queue(self.dw.get(), delay_ms) };
    }

    /// Cancels the item and waits for a running handler. Process context;
    /// the caller holds nothing the handler takes.
    pub(crate) fn cancel_sync(&self) {
        // SAFETY: initialised (type invariant).
        unsafe { b::iser_rs_delayed_work_cancel_sync(self.dw.get()) };
    }
}

#[pinned_drop]
impl<T> PinnedDrop for DelayedWork<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: initialised (type invariant); dropping happens in process
        // context (the owner's teardown).
        unsafe { b::iser_rs_delayed_work_cancel_sync(self.dw.get()) };
    }
}

/// The work function of every `DelayedWork<T>`.
///
/// # Safety
///
/// Called by the workqueue with the `work_struct` of a `DelayedWork<T>`
/// made by [`DelayedWork::new`].
unsafe extern "C" fn run_tr<T: HasDelayedWork>(work: *mut b::work_struct) {
    // `work` is the `work` member of the item's `delayed_work` (caller),
    // which is the first field of the `#[repr(C)]` `DelayedWork<T>` at
    // `T::OFFSET` in a live owner: the owner cancels the item (waiting for
    // this call) before it is dropped.
    // SAFETY: per the above, the pointer arithmetic lands on a live `T`.
    let owner = unsafe {
        let dw = b::iser_rs_to_delayed_work(work);
        &*dw.cast::<u8>().sub(T::OFFSET).cast::<T>()
    };
    T::run(owner);
}

/// Runs `f` with bottom halves disabled on this CPU (process context), as
/// code written for softirq context expects (libiscsi's back_lock is taken
/// with a plain spin_lock on its receive path), handing it the token that
/// says so.
pub(crate) fn with_bh_disabled<R>(f: impl for<'a> FnOnce(BhOff<'a>) -> R) -> R {
    // SAFETY: only disables bottom halves; re-enabled below.
    unsafe { b::iser_rs_local_bh_disable() };
    // SAFETY: bottom halves are off from the call above until the enable
    // below, and the token's lifetime is the closure call's (higher-ranked:
    // `f` cannot keep it, and `R` cannot name it).
    let r = f(unsafe { BhOff::new_unchecked() });
    // SAFETY: pairs with the disable above, on the same CPU (no sleeping
    // in between: `f` runs with BH off).
    unsafe { b::iser_rs_local_bh_enable() };
    r
}
