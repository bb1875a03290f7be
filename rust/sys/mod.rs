// SPDX-License-Identifier: GPL-2.0
//! The wrapper layer: every `unsafe` of iser-rs lives below this module.
//!
//! Each submodule owns one C API and exposes it as safe Rust types whose
//! invariants carry the C rules (lifetimes, contexts, ownership). C callback
//! tables are traits here, bridged by `extern "C"` trampolines.
//!
//! - [`iscsi`]: scsi_transport_iscsi + libiscsi (transport table, host, tasks).
//! - [`verbs`]: ib_core PD, CQ, MR, DMA buffers, work requests, completions.
//! - [`cm`]: rdma_cm ids, their event handler and QP.
//! - [`params`]: module parameters and the live-object counters.
//! - [`bhlock`]: `BhSpinLock`, a spinlock that disables bottom halves.
//! - [`pool`]: `IndexPool`, lock-free index allocation with reservations.
//! - [`rcu`]: `RcuSlot`, a value readable from any context and revocable
//!   (RCU) from process context.
//! - [`work`]: `DelayedWork`, a delayed work item inside its owner, and
//!   running softirq-context code from process context.

/// Runs `f` in a NOIO allocation scope: every allocation of this task in
/// `f` (ours and the C callees') behaves as GFP_NOIO, so reclaim never
/// waits for I/O that may need the connection being set up (a reconnect
/// with swap or the root file system on an iSER disk). Process context;
/// scopes nest.
pub(crate) fn with_noio<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: only sets a flag of the current task; restored below.
    let flags = unsafe { bindings::iser_rs_noio_save() };
    let r = f();
    // SAFETY: the flags of the matching save, on the same task.
    unsafe { bindings::iser_rs_noio_restore(flags) };
    r
}

/// The test-only post-failure injection point: while it lives, debugfs
/// `fail_iser_rs_post/` (the kernel's fault-injection knobs) can make
/// `ib_post_send`/`ib_post_recv` calls of this module fail with ENOMEM,
/// posting nothing. Off until a test sets its probability; absent on a
/// kernel without `CONFIG_FAULT_INJECTION_DEBUG_FS`. One per module.
pub(crate) struct PostFaultInjection(());

impl PostFaultInjection {
    /// Creates the debugfs attribute (module init; a failure leaves
    /// injection off and is not an error).
    pub(crate) fn new() -> Self {
        // SAFETY: called once, from module init, before any post.
        unsafe { bindings::iser_rs_fault_init() };
        PostFaultInjection(())
    }
}

impl Drop for PostFaultInjection {
    fn drop(&mut self) {
        // SAFETY: the attribute of `new`; module exit, after the transport
        // is unregistered, so no post is running.
        unsafe { bindings::iser_rs_fault_exit() };
    }
}

pub(crate) mod bhlock;
pub(crate) mod bindings;
pub(crate) mod cm;
pub(crate) mod iscsi;
pub(crate) mod params;
pub(crate) mod pool;
pub(crate) mod rcu;
pub(crate) mod verbs;
pub(crate) mod work;

/// A pointer returned by a C allocator that answers NULL or `ERR_PTR()` on
/// failure, as a `NonNull` or the error (the `kernel` crate's
/// `from_err_ptr`, plus NULL as ENOMEM).
pub(crate) fn from_err_ptr<T>(p: *mut T) -> kernel::error::Result<core::ptr::NonNull<T>> {
    core::ptr::NonNull::new(kernel::error::from_err_ptr(p)?).ok_or(kernel::error::code::ENOMEM)
}

/// Errno values the `kernel` crate of 6.12 does not name.
pub(crate) mod errno {
    use super::bindings as b;
    use kernel::error::Error;

    macro_rules! errnos {
        ($($name:ident),*) => {$(
            #[allow(non_snake_case)]
            pub(crate) fn $name() -> Error {
                Error::from_errno(-(b::$name as i32))
            }
        )*};
    }
    errnos!(
        ENOTCONN,
        ETIMEDOUT,
        ECONNREFUSED,
        EHOSTUNREACH,
        ENOBUFS,
        EPROTO,
        ENOSYS,
        ECONNABORTED,
        ECONNRESET
    );
}
