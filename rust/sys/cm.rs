// SPDX-License-Identifier: GPL-2.0
//! rdma_cm: the connection manager id, its event handler trait and the QP
//! it owns.
//!
//! Contexts: rdma_cm calls the handler in process context (its work queue)
//! holding the id's handler mutex, one event at a time; the handler may
//! sleep and allocate with GFP_KERNEL. `rdma_destroy_id` waits for a
//! running handler, so after [`CmId`] is dropped no handler runs.

use super::bindings as b;
use super::verbs::{Cq, Device, Pd, QpRef};
use core::ptr::NonNull;
use kernel::error::code::ENOMEM;
use kernel::prelude::*;

/// The RDMA CM events iser-rs distinguishes (`enum rdma_cm_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmEventKind {
    AddrResolved,
    AddrError,
    RouteResolved,
    RouteError,
    ConnectError,
    Unreachable,
    Rejected,
    Established,
    Disconnected,
    DeviceRemoval,
    AddrChange,
    TimewaitExit,
    Other(u32),
}

impl CmEventKind {
    fn from_raw(e: u32) -> Self {
        match e {
            b::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED => Self::AddrResolved,
            b::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_ERROR => Self::AddrError,
            b::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED => Self::RouteResolved,
            b::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_ERROR => Self::RouteError,
            b::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_ERROR => Self::ConnectError,
            b::rdma_cm_event_type_RDMA_CM_EVENT_UNREACHABLE => Self::Unreachable,
            b::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED => Self::Rejected,
            b::rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED => Self::Established,
            b::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED => Self::Disconnected,
            b::rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL => Self::DeviceRemoval,
            b::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_CHANGE => Self::AddrChange,
            b::rdma_cm_event_type_RDMA_CM_EVENT_TIMEWAIT_EXIT => Self::TimewaitExit,
            other => Self::Other(other),
        }
    }
}

/// One CM event, borrowed for the handler call.
pub(crate) struct CmEvent<'a> {
    pub(crate) kind: CmEventKind,
    /// The event's status (for REJECTED: the reject reason).
    pub(crate) status: i32,
    /// Connection private data (ESTABLISHED/REJECTED), as sent by the peer
    /// (rdma_cm may pad it).
    pub(crate) private_data: Option<&'a [u8]>,
}

/// Receives the events of one [`CmId`].
pub(crate) trait CmHandler: Sync {
    /// Handles one event on `id`. Process context, may sleep.
    ///
    /// Returning the [`CmId`] of `id` hands it to rdma_cm, which destroys
    /// it once the handler has returned (the only way to destroy an id
    /// from its own handler: `rdma_destroy_id` would wait for the handler).
    /// The owner must have destroyed the id's QP and let go of every
    /// other use of the id before. Any other id returned is dropped
    /// (destroyed) normally.
    fn cm_event(&self, id: CmIdRef, ev: &CmEvent<'_>) -> Option<KBox<CmId>>;
}

/// The id as the handler may use it (no destroy).
#[derive(Clone, Copy)]
pub(crate) struct CmIdRef(NonNull<b::rdma_cm_id>);

/// # Safety
/// Only called by rdma_cm for an id created by [`CmId::new`], with a live
/// event; the id's context is the `T` given there.
unsafe extern "C" fn cm_handler_trampoline<T: CmHandler>(
    id: *mut b::rdma_cm_id,
    ev: *mut b::rdma_cm_event,
) -> kernel::ffi::c_int {
    // SAFETY: rdma_cm passes a live id and event; `context` is the `T`
    // given to `CmId::new`, alive until the id is destroyed (its contract).
    unsafe {
        let ev = &*ev;
        let owner = &*((*id).context as *const T);
        let kind = CmEventKind::from_raw(ev.event);
        let conn = &ev.param.conn;
        let private_data = if matches!(kind, CmEventKind::Established | CmEventKind::Rejected)
            && !conn.private_data.is_null()
            && conn.private_data_len > 0
        {
            Some(core::slice::from_raw_parts(
                conn.private_data.cast::<u8>(),
                conn.private_data_len as usize,
            ))
        } else {
            None
        };
        let ev = CmEvent {
            kind,
            status: ev.status,
            private_data,
        };
        let handed_back = owner.cm_event(CmIdRef(NonNull::new_unchecked(id)), &ev);
        match handed_back {
            Some(owned) if owned.id.as_ptr() == id => {
                // rdma_cm destroys the id when we return non-zero: the
                // owner gave it up, so its `Drop` must not destroy it
                // again (the box itself is freed).
                core::mem::forget(KBox::into_inner(owned));
                1
            }
            // Not this id (or none): its owner destroys it.
            _ => 0,
        }
    }
}

/// An `rdma_cm_id` (RC, port space TCP) with handler `T`; destroyed on drop.
///
/// Invariant: the `T` passed to `new` outlives this value.
pub(crate) struct CmId {
    id: NonNull<b::rdma_cm_id>,
}

// SAFETY: rdma_cm ids are used from any process context; rdma_cm locks.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl CmId {
    /// # Safety
    /// `ctx` must stay valid until the returned id is dropped.
    pub(crate) unsafe fn new<T: CmHandler>(ctx: *const T) -> Result<Self> {
        // SAFETY: the trampoline matches the handler type; `ctx` validity
        // is the caller's promise.
        let id = unsafe { b::iser_rs_create_id(Some(cm_handler_trampoline::<T>), ctx as *mut _) };
        Ok(CmId {
            id: super::from_err_ptr(id)?,
        })
    }

    pub(crate) fn as_ref(&self) -> CmIdRef {
        CmIdRef(self.id)
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: created in `new`; waits for a running handler, after which
        // rdma_cm no longer uses the context.
        unsafe { b::rdma_destroy_id(self.id.as_ptr()) };
    }
}

impl CmIdRef {
    /// Disconnects (sends DREQ); the QP moves to error. Process context:
    /// sleeps on rdma_cm's mutexes (never call it under an RCU guard).
    pub(crate) fn disconnect(self) {
        // SAFETY: live id; disconnecting an unconnected id just fails.
        let _ = unsafe { b::rdma_disconnect(self.0.as_ptr()) };
    }

    /// Destroys the QP created by [`CmIdRef::create_qp`], if any. Process
    /// context (sleeps). Callers serialise it (the driver's teardown lock):
    /// the NULL check and the destroy are not atomic.
    pub(crate) fn destroy_qp(self) {
        // SAFETY: live id; rdma_destroy_qp does not tolerate
        // `id->qp == NULL`, so check first.
        unsafe {
            if !(*self.0.as_ptr()).qp.is_null() {
                b::rdma_destroy_qp(self.0.as_ptr());
            }
        }
    }

    /// Starts address resolution of `dst` (a `sockaddr_in`/`sockaddr_in6`
    /// from iscsid); ends in ADDR_RESOLVED or ADDR_ERROR. Process context.
    pub(crate) fn resolve_addr(self, dst: &super::iscsi::SockAddr<'_>, timeout_ms: u32) -> Result {
        let dst = dst.as_ptr();
        // SAFETY: live id; `dst` is valid (the `SockAddr` invariant), and
        // rdma_resolve_addr copies it.
        kernel::error::to_result(unsafe {
            b::rdma_resolve_addr(
                self.0.as_ptr(),
                core::ptr::null_mut(),
                dst,
                timeout_ms as usize,
            )
        })
    }

    pub(crate) fn resolve_route(self, timeout_ms: u32) -> Result {
        // SAFETY: live id (called from its handler or its owner).
        kernel::error::to_result(unsafe {
            b::rdma_resolve_route(self.0.as_ptr(), timeout_ms as usize)
        })
    }

    /// The device the id is bound to (after ADDR_RESOLVED).
    pub(crate) fn device(self) -> Option<Device> {
        // SAFETY: the device stays bound to the id until the id is
        // destroyed or DEVICE_REMOVAL is handled.
        unsafe { Device::from_raw((*self.0.as_ptr()).device) }
    }

    /// Creates the RC QP on `pd` with both queues on `cq`, able to send
    /// `max_inline_data` bytes inline (0: none; the device may refuse),
    /// with `max_send_sge` SGEs per send work request.
    pub(crate) fn create_qp(
        self,
        pd: &Pd,
        cq: &Cq,
        max_send_wr: u32,
        max_send_sge: u32,
        max_recv_wr: u32,
        max_inline_data: u32,
    ) -> Result<QpRef> {
        let mut attr = b::ib_qp_init_attr {
            send_cq: cq.as_ptr(),
            recv_cq: cq.as_ptr(),
            cap: b::ib_qp_cap {
                max_send_wr,
                max_recv_wr,
                max_send_sge,
                max_recv_sge: super::verbs::RECV_SGE_MAX as u32,
                max_inline_data,
                ..Default::default()
            },
            sq_sig_type: b::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: b::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: live id, PD and CQ; `attr` is read during the call.
        kernel::error::to_result(unsafe {
            b::rdma_create_qp(self.0.as_ptr(), pd.as_ptr(), &mut attr)
        })?;
        // SAFETY: rdma_create_qp succeeded, so `id->qp` is the new QP,
        // live until `CmId::destroy_qp`.
        unsafe { QpRef::from_raw((*self.0.as_ptr()).qp) }.ok_or(ENOMEM)
    }

    /// Connects with `private_data`; `responder_resources` is the IRD the
    /// initiator's QP grants the target's RDMA Reads.
    pub(crate) fn connect(self, private_data: &[u8], responder_resources: u8) -> Result {
        let mut p = b::rdma_conn_param {
            private_data: private_data.as_ptr().cast(),
            private_data_len: private_data.len() as u8,
            responder_resources,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 6,
            ..Default::default()
        };
        // SAFETY: called from the id's handler (the `_locked` variant);
        // `p` and the private data live across the call.
        kernel::error::to_result(unsafe { b::rdma_connect_locked(self.0.as_ptr(), &mut p) })
    }

    /// The destination address (for `get_ep_param`).
    pub(crate) fn dst_addr(self) -> super::iscsi::DstAddr {
        // SAFETY: the route lives in the id.
        unsafe { core::ptr::addr_of_mut!((*self.0.as_ptr()).route.addr.dst_addr).cast() }
    }
}
