// SPDX-License-Identifier: GPL-2.0
//! scsi_transport_iscsi + libiscsi: the transport table, the SCSI host
//! template, and typed handles over libiscsi's session, connection and
//! task objects.
//!
//! [`TransportOps`] is the Rust face of `struct iscsi_transport`.
//! [`Registration`] fills the C table with trampolines for one
//! implementation (plus libiscsi's generic helpers, used as ib_iser uses
//! them) and unregisters on drop.
//!
//! Object model (all allocated by libiscsi):
//! - `iscsi_endpoint.dd_data` holds one pointer: the driver's endpoint
//!   object `T::Ep`, boxed and pinned, owned by the endpoint from
//!   `ep_connect` to `ep_disconnect`.
//! - `iscsi_conn.dd_data` holds one pointer to the bound `T::Ep` (set at
//!   bind; cleared at stop, or at `ep_disconnect` when — as
//!   scsi_transport_iscsi does on a connection error and at logout — the
//!   endpoint goes first), so task callbacks find their connection and never
//!   a freed one. Accessed atomically.
//! - `iscsi_task.dd_data` holds a `T::TaskData` behind two flags (written,
//!   in use), zero-filled by libiscsi: written at the task's first use,
//!   reset at each later one, never dropped (`TaskSlot`).
//!
//! `send_pdu` brackets libiscsi's: it waits for a Login/Text Response
//! delivery in progress (the session's back_lock) and hands the driver the
//! calling task ([`SendPduCaller`], a `task_struct` reference) as it
//! returns.

use super::bindings as b;
use super::errno::{ENOSYS, ENOTCONN};
use super::rcu::BhOff;
use core::ffi::c_void;
use core::pin::Pin;
use core::ptr::NonNull;
use kernel::c_str;
use kernel::error::code::{EEXIST, EINVAL, ENOMEM};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::types::ForeignOwnable;
use kernel::ThisModule;

/// Transport capabilities (`CAP_*` of scsi_transport_iscsi.h) as declared
/// to iscsid: the same as ib_iser's.
pub(crate) const CAPS: u32 = b::CAP_RECOVERY_L0 | b::CAP_MULTI_R2T | b::CAP_TEXT_NEGO;

/// Largest BHS libiscsi builds into a task's header buffer.
pub(crate) const BHS_LEN: usize = 48;

/// The task index a raw ITT libiscsi built names (its `get_itt`: the
/// session age sits above `ISCSI_ITT_MASK`); the same as
/// [`Task::index`] of the task that sent it. A target may send any ITT:
/// the caller bounds the index, and libiscsi still checks the age.
#[inline]
pub(crate) const fn itt_index(itt: u32) -> u32 {
    itt & b::ISCSI_ITT_MASK
}

/// `enum iscsi_err` values the driver reports.
pub(crate) use b::iscsi_err as IscsiErr;

/// An iSCSI parameter as iscsid sets it (`enum iscsi_param`).
pub(crate) type Param = b::iscsi_param;
use b::{
    iscsi_param_ISCSI_PARAM_CONN_ADDRESS as PARAM_CONN_ADDRESS,
    iscsi_param_ISCSI_PARAM_CONN_PORT as PARAM_CONN_PORT,
};

/// The operations of the `iser` transport.
///
/// Callbacks run in process context (iscsid's netlink requests, libiscsi's
/// xmit work, SCSI error handling) unless a method says otherwise.
pub(crate) trait TransportOps: 'static {
    /// The per-endpoint object (one RDMA connection).
    type Ep: Sync + 'static;
    /// Per-task transport data, kept in `task->dd_data`: made by
    /// `new_task` at the task's first use and reset by `reuse_task` at
    /// each later one (`alloc_pdu`). It is never dropped: libiscsi frees
    /// the task's memory with the session, so `cleanup_task` must leave
    /// nothing in it that needs dropping (a resource left there would
    /// leak; the next `reuse_task` drops it).
    type TaskData: 'static;

    /// Starts connecting to `dst`. Blocking or not, the result is polled
    /// with [`TransportOps::ep_poll`].
    fn ep_connect(dst: &SockAddr<'_>) -> Result<Pin<KBox<Self::Ep>>>;
    /// Waits up to `timeout_ms` for the connection: Ok(true) connected,
    /// Ok(false) not yet, Err on failure.
    fn ep_poll(ep: &Self::Ep, timeout_ms: u32) -> Result<bool>;
    /// Tears the connection down; the endpoint is freed by dropping `ep`.
    fn ep_disconnect(ep: Pin<KBox<Self::Ep>>);
    /// The libiscsi connection bound to `ep`, if any (see `bind`).
    fn ep_bound_conn(ep: &Self::Ep) -> Option<Conn>;
    /// Calls `f` with the target's address (for the address parameters,
    /// `ISCSI_PARAM_CONN_ADDRESS/PORT`) while the CM id it lives in is
    /// sure to live; None once the id is gone (torn down, or destroyed by
    /// rdma_cm on device removal). `f` does not sleep.
    fn ep_with_dst_addr(ep: &Self::Ep, f: &mut dyn FnMut(DstAddr) -> i32) -> Option<i32>;
    /// Limits for a new session on `ep`: (can_queue, sg_tablesize,
    /// max_sectors, virt_boundary_mask, dma parent device).
    fn session_limits(ep: &Self::Ep, cmds_max: u16) -> Result<HostLimits>;
    /// Binds the iSCSI connection to the endpoint's RDMA connection.
    fn bind(ep: &Self::Ep, conn: Conn, cmds_max: u16) -> Result;
    /// Full feature phase begins (`start_conn`).
    fn start(ep: &Self::Ep) -> Result;
    /// Stops the RDMA side before libiscsi fails the tasks (`stop_conn`).
    fn stop(ep: &Self::Ep);
    /// Refuses a parameter iSER cannot honour; Ok lets libiscsi store it.
    fn check_param(param: Param, value: &[u8]) -> Result;
    /// Fills connection statistics.
    fn stats(ep: &Self::Ep, stats: &mut Stats<'_>);
    /// A `send_pdu` call (a Login or Text request from iscsid/iscsiadm)
    /// begins on the endpoint's connection; the request is transmitted
    /// (`xmit_task`) before [`TransportOps::send_pdu_returning`]. Process
    /// context; must not sleep.
    fn send_pdu_begin(ep: &Self::Ep);
    /// That `send_pdu` call is returning; the netlink reply that tells its
    /// caller the request went out follows. `caller` is the task making
    /// the call, which has queued that reply once it slept (see
    /// [`SendPduCaller::has_slept`]). Process context; must not sleep.
    fn send_pdu_returning(ep: &Self::Ep, caller: SendPduCaller);
    /// Transmits a task (`xmit_task`).
    fn xmit_task(ep: &Self::Ep, task: Task<'_, Self::TaskData>) -> Result;
    /// Releases a task's transport resources (`cleanup_task`). Process or
    /// softirq context, under the session's back_lock (`iscsi_free_task`'s
    /// rule), so with bottom halves off ([`Task::bh`]). From its
    /// return the task's data is out of use (`Task::data` answers `None`)
    /// until `reuse_task` resets it for the task's next use.
    fn cleanup_task(ep: Option<&Self::Ep>, task: Task<'_, Self::TaskData>);
    /// Fresh task data for the first use of a task of `ep`'s connection
    /// (`alloc_pdu`).
    fn new_task(ep: &Self::Ep) -> Self::TaskData;
    /// Resets the data of a task used before, after its `cleanup_task`,
    /// for its next use (`alloc_pdu`): to what `new_task` makes, but for
    /// what libiscsi rewrites itself (the header it builds).
    fn reuse_task(ep: &Self::Ep, data: &mut Self::TaskData);
    /// The header buffer libiscsi builds the BHS into (`alloc_pdu`).
    fn task_hdr(data: &mut Self::TaskData) -> *mut u8;
}

/// Custom statistics a connection can show (`ISCSI_STATS_CUSTOM_MAX`):
/// `Stats` drops any past it.
pub(crate) const CUSTOM_STATS_MAX: usize = b::ISCSI_STATS_CUSTOM_MAX as usize;

/// `ISCSI_ERR_CONN_FAILED`: the connection is gone.
pub(crate) const ERR_CONN_FAILED: IscsiErr = b::iscsi_err_ISCSI_ERR_CONN_FAILED;

/// Limits a session's SCSI host takes from its first connection.
pub(crate) struct HostLimits {
    pub(crate) can_queue: u16,
    pub(crate) sg_tablesize: u16,
    pub(crate) max_sectors: u32,
    pub(crate) virt_boundary_mask: u64,
    pub(crate) dma_dev: *mut b::device,
}

/// A destination socket address from iscsid. Invariant: points to a valid
/// `sockaddr_in`/`sockaddr_in6` for as long as the handle exists; only the
/// `ep_connect` trampoline makes one, and the handle cannot be copied out
/// of that call's borrow.
pub(crate) struct SockAddr<'a>(*mut b::sockaddr, core::marker::PhantomData<&'a ()>);

impl SockAddr<'_> {
    pub(crate) fn as_ptr(&self) -> *mut b::sockaddr {
        self.0
    }
}

/// An `iscsi_conn` handle.
#[derive(Clone, Copy)]
pub(crate) struct Conn(NonNull<b::iscsi_conn>);

// SAFETY: libiscsi connections are shared between process and softirq
// context by design; the methods below only call libiscsi's own entry points.
unsafe impl Send for Conn {}
// SAFETY: as above.
unsafe impl Sync for Conn {}

impl Conn {
    /// Hands a received PDU (`hdr`: the 48-byte BHS followed by AHS,
    /// `data`: the data segment) to libiscsi. Returns the iSCSI error
    /// libiscsi reports.
    ///
    /// `_bh`: bottom halves are off. libiscsi's receive entry point takes
    /// the session's back_lock with a plain `spin_lock` (it expects
    /// softirq context), and may release tasks under it: `cleanup_task`
    /// then runs with bottom halves off only because they already were,
    /// which [`Task`]'s invariant (and so its [`Task::bh`]) relies on.
    pub(crate) fn complete_pdu(
        self,
        _bh: BhOff<'_>,
        hdr: &[u8],
        data: &[u8],
    ) -> Result<(), IscsiErr> {
        if hdr.len() < BHS_LEN {
            return Err(b::iscsi_err_ISCSI_ERR_PROTO);
        }
        // The connection is bound and live (the caller holds it through the
        // endpoint, cleared before libiscsi frees it).
        // SAFETY: live connection (above); `hdr` holds a full BHS, `data`
        // the data segment; libiscsi only reads both despite its prototype.
        let rc = unsafe {
            b::iscsi_complete_pdu(
                self.0.as_ptr(),
                hdr.as_ptr().cast_mut().cast(),
                if data.is_empty() {
                    core::ptr::null_mut()
                } else {
                    data.as_ptr().cast_mut().cast()
                },
                data.len() as i32,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(rc as IscsiErr)
        }
    }

    /// Reports a connection failure to libiscsi/iscsid (any context but
    /// `xmit_task`, see [`Task::fail_conn_in_xmit`]).
    pub(crate) fn failure(self, err: IscsiErr) {
        // SAFETY: as in `complete_pdu`.
        unsafe { b::iscsi_conn_failure(self.0.as_ptr(), err) };
    }

    /// The most unsolicited Data-Out PDUs one write of at most `max_bytes`
    /// may need under the negotiated keys. libiscsi's rule
    /// (`iscsi_prep_scsi_cmd_pdu`): unless InitialR2T=Yes, the first
    /// `min(FirstBurstLength, length)` bytes go unsolicited, of which
    /// ImmediateData=Yes sends `min(FirstBurstLength,
    /// MaxXmitDataSegmentLength, length)` with the command; the rest goes
    /// in Data-Out PDUs of MaxXmitDataSegmentLength. So at most
    /// `ceil(min(FirstBurstLength, max_bytes) / MaxXmitDataSegmentLength)`,
    /// less the one the immediate data takes. Meaningful once iscsid has
    /// set the keys (`start_conn`).
    pub(crate) fn unsol_pdus_max(self, max_bytes: u32) -> u32 {
        // SAFETY: plain field reads of a live bound connection and of its
        // session, which outlives it.
        let (r2t, imm, burst, seg) = unsafe {
            let conn = self.0.as_ptr();
            let session = (*conn).session;
            (
                (*session).initial_r2t_en,
                (*session).imm_data_en,
                (*session).first_burst,
                (*conn).max_xmit_dlength,
            )
        };
        if r2t != 0 {
            return 0;
        }
        // A zero segment length is not negotiable (512 is the least); the
        // shim's per-task count takes it as one PDU, and so does this.
        let pdus = match seg {
            0 => return 1,
            seg => burst.min(max_bytes).div_ceil(seg),
        };
        if imm != 0 {
            pdus.saturating_sub(1)
        } else {
            pdus
        }
    }

    /// Whether the task is the connection's login task.
    pub(crate) fn is_login_task<D>(self, task: &Task<'_, D>) -> bool {
        // SAFETY: reading a pointer field of a live connection.
        unsafe { (*self.0.as_ptr()).login_task == task.raw.as_ptr() }
    }

    /// Runs `f` on the task with initiator task tag `itt` (raw, as on the
    /// wire) if it is an active SCSI command task of this connection, with
    /// the session's back_lock held: libiscsi cleans tasks up
    /// (`cleanup_task`) under the same lock, so the task and its transport
    /// data stay this command's until `f` returns. `f` must not call into
    /// libiscsi (it takes back_lock itself, or frwd_lock, which nests
    /// outside it): it returns what the caller does after the unlock.
    pub(crate) fn with_ctask<D, R>(self, itt: u32, f: impl FnOnce(Option<Task<'_, D>>) -> R) -> R {
        // SAFETY: bound, live connection (as in `complete_pdu`); the lock
        // is released below on every path.
        unsafe { b::iser_rs_back_lock(self.0.as_ptr()) };
        // SAFETY: libiscsi validates the ITT (age and index) itself; the
        // back_lock is held, as iscsi_itt_to_ctask wants.
        let t = unsafe { b::iscsi_itt_to_ctask(self.0.as_ptr(), itt) };
        let r = f(NonNull::new(t).map(|raw| Task {
            raw,
            _p: core::marker::PhantomData,
        }));
        // SAFETY: taken above by this thread.
        unsafe { b::iser_rs_back_unlock(self.0.as_ptr()) };
        r
    }
}

impl Conn {
    /// Runs `f` on the transport data of every task of this connection's
    /// session that is in use (from `alloc_pdu` to `cleanup_task`), with
    /// the session's frwd_lock and back_lock held: libiscsi allocates
    /// tasks and calls `alloc_pdu`/`xmit_task` under the first (the host
    /// has no xmit workqueue: `xmit_can_sleep` is false), completes
    /// them and calls `cleanup_task` under the second, so no task changes
    /// hands and no callback touches its data meanwhile. Process context,
    /// not inside a libiscsi callback (it would hold one of the locks);
    /// `f` must not sleep or call into libiscsi.
    pub(crate) fn for_each_task_data<D>(self, mut f: impl FnMut(&mut D)) {
        // Live: bound, or unbound by an `ep_disconnect` still running
        // (libiscsi frees it only after that returns).
        // SAFETY: a live connection (above); released below, the caller
        // holds neither lock.
        unsafe { b::iser_rs_tasks_lock(self.0.as_ptr()) };
        let mut i = 0;
        loop {
            // SAFETY: the session's task locks are held; the shim answers
            // NULL from index cmds_max on (libiscsi allocates every task
            // below it at session setup).
            let t = unsafe { b::iser_rs_session_task(self.0.as_ptr(), i) };
            let Some(raw) = NonNull::new(t) else { break };
            let mut task = Task::<D> {
                raw,
                _p: core::marker::PhantomData,
            };
            if let Some(d) = task.data() {
                f(d);
            }
            i += 1;
        }
        // SAFETY: taken above by this thread.
        unsafe { b::iser_rs_tasks_unlock(self.0.as_ptr()) };
    }
}

/// A connection slot published to completion handlers: set at bind,
/// cleared by the endpoint's teardown (`ep_disconnect`, before the QP is
/// drained), read from any context.
pub(crate) struct ConnSlot(core::sync::atomic::AtomicPtr<b::iscsi_conn>);

impl ConnSlot {
    pub(crate) const fn new() -> Self {
        ConnSlot(core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()))
    }

    pub(crate) fn set(&self, c: Conn) {
        self.0
            .store(c.0.as_ptr(), core::sync::atomic::Ordering::Release);
    }

    pub(crate) fn clear(&self) {
        self.0
            .store(core::ptr::null_mut(), core::sync::atomic::Ordering::Release);
    }

    /// The bound connection. libiscsi frees it only after `stop_conn` and
    /// `ep_disconnect`, both of which quiesce every user of the slot first.
    pub(crate) fn get(&self) -> Option<Conn> {
        NonNull::new(self.0.load(core::sync::atomic::Ordering::Acquire)).map(Conn)
    }
}

/// What `task->dd_data` holds: zero-filled by libiscsi, which reads as
/// "not initialised" (`init == false`) and "not in use".
#[repr(C)]
struct TaskSlot<D> {
    /// `data` was written (at the task's first `alloc_pdu`); it stays
    /// written for the task's life.
    init: bool,
    /// Between `alloc_pdu` and `cleanup_task`: the data belongs to the
    /// task's current PDU.
    // INVARIANT: `live` implies `init`.
    live: bool,
    data: core::mem::MaybeUninit<D>,
}

/// An `iscsi_task` handle with its transport data of type `D`.
///
/// # Invariants
///
/// Bottom halves are disabled on this CPU for all of `'a`. Every maker runs
/// under a lock of the task's session taken with them off: `alloc_pdu` and
/// `xmit_task` under frwd_lock (`iscsi_queuecommand` and
/// `iscsi_send_mgmt_task`: this host has no xmit workqueue, the only path
/// that calls `xmit_task` unlocked), `cleanup_task` under back_lock
/// (`iscsi_free_task`'s rule: every libiscsi path takes it with
/// `spin_lock_bh`, or with `spin_lock` on its receive path, which this
/// module enters only through [`Conn::complete_pdu`] and so with bottom
/// halves off), `with_ctask` and
/// `for_each_task_data` under the locks they take themselves. `'a` is the
/// callback's own (a higher-ranked lifetime of `TransportOps`' methods).
pub(crate) struct Task<'a, D> {
    raw: NonNull<b::iscsi_task>,
    _p: core::marker::PhantomData<&'a mut D>,
}

/// What a task carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskKind {
    /// Login, NOP-Out, Text, TMF, Logout: a control PDU with optional data.
    Mgmt,
    /// A SCSI command.
    Scsi,
}

/// Data direction of a SCSI command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    None,
    ToDevice,
    FromDevice,
}

impl<'a, D> Task<'a, D> {
    /// The bottom-half-disabled region the task is handed in, for
    /// [`RcuSlot::get_bh`](super::rcu::RcuSlot::get_bh).
    #[inline]
    pub(crate) fn bh(&self) -> BhOff<'a> {
        // SAFETY: bottom halves are off for all of `'a` (type invariant).
        unsafe { BhOff::new_unchecked() }
    }

    pub(crate) fn kind(&self) -> TaskKind {
        // SAFETY: live task (libiscsi holds it across the callback).
        if unsafe { (*self.raw.as_ptr()).sc.is_null() } {
            TaskKind::Mgmt
        } else {
            TaskKind::Scsi
        }
    }

    fn slot(&mut self) -> &mut TaskSlot<D> {
        // SAFETY: `dd_data` points to a zero-filled area of
        // size_of::<TaskSlot<D>>() (session setup); a zero `init` is a valid
        // `bool` and `data` is `MaybeUninit`.
        unsafe { &mut *((*self.raw.as_ptr()).dd_data.cast::<TaskSlot<D>>()) }
    }

    /// The task's transport data. Every task the driver sees in a
    /// callback other than `alloc_pdu`/`cleanup_task` went through
    /// `alloc_pdu`; a task that did not is answered with `None`.
    pub(crate) fn data(&mut self) -> Option<&mut D> {
        let slot = self.slot();
        if slot.live {
            // SAFETY: `live` implies `init` (the type's invariant), which is
            // set only after `data` was written.
            Some(unsafe { slot.data.assume_init_mut() })
        } else {
            None
        }
    }

    /// Puts the data in use for the task's next PDU: `new` at the first
    /// use, else `reuse` of the data the last use left (step 21: no
    /// rewrite of all of it). Returns it.
    fn begin_use(&mut self, new: impl FnOnce() -> D, reuse: impl FnOnce(&mut D)) -> &mut D {
        let slot = self.slot();
        if slot.init {
            // SAFETY: `init` is set only after `data` was written.
            reuse(unsafe { slot.data.assume_init_mut() });
        } else {
            slot.data.write(new());
            slot.init = true;
        }
        // INVARIANT: `init` is set on both branches.
        slot.live = true;
        // SAFETY: as above.
        unsafe { slot.data.assume_init_mut() }
    }

    /// Takes the data out of use (`cleanup_task`); it stays written for
    /// `begin_use` to reset.
    fn end_use(&mut self) {
        self.slot().live = false;
    }

    /// DMA-maps the SCSI command's data for `dev`.
    pub(crate) fn map_sg(
        &self,
        dev: super::verbs::Device,
        dir: Dir,
    ) -> Result<super::verbs::MappedSg> {
        // SAFETY: only called for SCSI tasks, whose `sc` is live; the
        // fields are what scsi_sglist()/scsi_sg_count() read.
        let (sg, nents) = unsafe {
            let sc = (*self.raw.as_ptr()).sc;
            ((*sc).sdb.table.sgl, (*sc).sdb.table.nents)
        };
        // SAFETY: the SG list belongs to the SCSI command, which stays
        // alive until libiscsi frees the task, after `cleanup_task` (where
        // the driver drops the mapping).
        unsafe { super::verbs::MappedSg::map(dev, sg, nents, dir == Dir::ToDevice) }
    }

    /// The task's index in its session (libiscsi's `task->itt`, set once
    /// at session setup: `0..cmds_max`, fixed for the session's life; the
    /// ITT on the wire adds the session's age to it).
    pub(crate) fn index(&self) -> Option<u32> {
        // SAFETY: plain field read of a live task.
        u32::try_from(unsafe { (*self.raw.as_ptr()).itt }).ok()
    }

    /// libiscsi completed the task normally (`ISCSI_TASK_COMPLETED`): a
    /// response reached it, or it was never sent. Read in `cleanup_task`,
    /// which libiscsi calls after it set the final state, under its
    /// back_lock.
    pub(crate) fn completed(&self) -> bool {
        // SAFETY: plain field read of a live task.
        let state = unsafe { (*self.raw.as_ptr()).state };
        u32::try_from(state).is_ok_and(|s| s == b::ISCSI_TASK_COMPLETED)
    }

    /// The BHS libiscsi built, as bytes.
    pub(crate) fn hdr_len(&self) -> usize {
        // SAFETY: plain field read of a live task.
        unsafe { (*self.raw.as_ptr()).hdr_len as usize }
    }

    /// The management PDU payload (login/text keys, NOP data).
    pub(crate) fn mgmt_data(&self) -> &[u8] {
        // SAFETY: for mgmt tasks `data`/`data_count` describe libiscsi's
        // payload buffer, valid while the task is being transmitted.
        unsafe {
            let t = &*self.raw.as_ptr();
            if t.data.is_null() || t.data_count == 0 {
                &[]
            } else {
                core::slice::from_raw_parts(t.data.cast_const(), t.data_count as usize)
            }
        }
    }

    pub(crate) fn conn(&self) -> Conn {
        // SAFETY: a task always belongs to a live connection.
        Conn(unsafe { NonNull::new_unchecked((*self.raw.as_ptr()).conn) })
    }

    /// SCSI command data: direction and total length (`scsi_bufflen()`),
    /// read from the command's fields (no call).
    pub(crate) fn scsi_data(&self) -> (Dir, u32) {
        // SAFETY: only called for SCSI tasks, whose `sc` is live.
        unsafe {
            let sc = (*self.raw.as_ptr()).sc;
            let dir = match (*sc).sc_data_direction {
                b::dma_data_direction_DMA_TO_DEVICE => Dir::ToDevice,
                b::dma_data_direction_DMA_FROM_DEVICE => Dir::FromDevice,
                _ => Dir::None,
            };
            (dir, (*sc).sdb.length)
        }
    }

    /// Immediate data bytes libiscsi put in the command PDU.
    pub(crate) fn imm_count(&self) -> u32 {
        // SAFETY: plain field read.
        unsafe { (*self.raw.as_ptr()).imm_count }
    }

    /// Total unsolicited data (immediate + unsolicited Data-Out).
    pub(crate) fn unsol_len(&self) -> u32 {
        // SAFETY: plain field reads.
        unsafe { (*self.raw.as_ptr()).imm_count + (*self.raw.as_ptr()).unsol_r2t.data_length }
    }

    /// Unsolicited Data-Out bytes a write still has to send: libiscsi's
    /// `iscsi_task_has_unsol_data` for a write only, read in place (step
    /// 20). `iscsi_prep_scsi_cmd_pdu` resets `unsol_r2t` for a write only,
    /// so a read inherits what the task's previous command left there:
    /// after a write whose unsolicited Data-Out could not all be posted
    /// (the connection failed), the next read on the same task would seem
    /// to have Data-Out to send (case 054 found it).
    fn unsol_bytes_left(&self) -> u32 {
        // SAFETY: a live task; `sc`, when set, is its live command. The
        // fields are written by libiscsi under the session's frwd_lock,
        // which it holds across `xmit_task`, the only caller.
        unsafe {
            let t = self.raw.as_ptr();
            let sc = (*t).sc;
            if sc.is_null() || (*sc).sc_data_direction != b::dma_data_direction_DMA_TO_DEVICE {
                return 0;
            }
            let r2t = &(*t).unsol_r2t;
            // `sent` is an `int` compared as unsigned, as in C.
            r2t.data_length.saturating_sub(r2t.sent as u32)
        }
    }

    /// Whether unsolicited Data-Out remains to be sent.
    pub(crate) fn has_unsol_data(&self) -> bool {
        self.unsol_bytes_left() > 0
    }

    /// Unsolicited Data-Out PDUs still to send (each at most the
    /// connection's MaxXmitDataSegmentLength, as `prep_unsol_data_out`
    /// cuts them).
    pub(crate) fn unsol_pdus_left(&self) -> u32 {
        let left = self.unsol_bytes_left();
        if left == 0 {
            return 0;
        }
        // SAFETY: a task handed to `xmit_task` is bound to its live
        // connection; a plain field read.
        let seg = unsafe { (*(*self.raw.as_ptr()).conn).max_xmit_dlength };
        if seg == 0 {
            1
        } else {
            left.div_ceil(seg)
        }
    }

    /// Reports a connection failure from inside `xmit_task`, where
    /// libiscsi holds the session's frwd_lock and `Conn::failure` (which
    /// takes it) would spin forever with BH off. The caller then returns
    /// success to libiscsi if the command PDU is already on the wire: an
    /// error would make libiscsi hand its CmdSN out again.
    pub(crate) fn fail_conn_in_xmit(&self, err: IscsiErr) {
        // SAFETY: a task handed to `xmit_task` is bound to its live
        // connection, and libiscsi holds the session's frwd_lock for the
        // whole call (the shim asserts it under lockdep).
        unsafe { b::iser_rs_conn_failure_frwd_locked((*self.raw.as_ptr()).conn, err as i32) };
    }

    /// Accounts the unsolicited Data-Out last built by
    /// `prep_unsol_data_out` as posted (libiscsi leaves advancing
    /// `unsol_r2t.sent` to the transport).
    pub(crate) fn unsol_data_out_posted(&mut self) {
        // SAFETY: live task; only `xmit_task` (frwd_lock held) touches
        // `unsol_r2t`.
        unsafe { b::iser_rs_task_unsol_data_out_posted(self.raw.as_ptr()) };
    }

    /// Builds the next unsolicited Data-Out BHS into `hdr`; returns
    /// (offset, length) of its payload in the command's data.
    pub(crate) fn prep_unsol_data_out(&mut self, hdr: &mut [u8; BHS_LEN]) -> (u32, u32) {
        // libiscsi advances `unsol_r2t.datasn`; the caller advances `sent`
        // once the PDU is posted (`unsol_data_out_posted`).
        // SAFETY: live task; `hdr` is a 48-byte buffer, the size of `struct iscsi_data`.
        unsafe {
            let t = self.raw.as_ptr();
            let r2t = core::ptr::addr_of_mut!((*t).unsol_r2t);
            b::iscsi_prep_data_out_pdu(t, r2t, hdr.as_mut_ptr().cast());
            let h = &*(hdr.as_ptr().cast::<b::iscsi_data>());
            let len = u32::from_be_bytes([0, h.dlength[0], h.dlength[1], h.dlength[2]]);
            (u32::from_be(h.offset), len)
        }
    }
}

/// A registered iSCSI transport; unregisters on drop.
///
/// Invariant: `table` and `sht` stay at fixed heap addresses for as long as
/// the registration lives; `transport` is the template returned for them.
pub(crate) struct Registration {
    table: KBox<b::iscsi_transport>,
    _sht: KBox<b::scsi_host_template>,
}

// SAFETY: the C tables are immutable after registration.
unsafe impl Send for Registration {}
// SAFETY: as above.
unsafe impl Sync for Registration {}

/// The registered tables the trampolines need: set once at module init and
/// never cleared (no trampoline runs after `iscsi_unregister_transport`,
/// and the module cannot be unloaded while a session holds it).
struct Globals {
    table: *mut b::iscsi_transport,
    sht: *const b::scsi_host_template,
    template: *mut b::scsi_transport_template,
}
static mut GLOBAL_TABLES: Globals = Globals {
    table: core::ptr::null_mut(),
    sht: core::ptr::null(),
    template: core::ptr::null_mut(),
};

fn globals() -> &'static Globals {
    // SAFETY: written once in `Registration::new` before the transport is
    // visible to iscsid and cleared only after it is unregistered; every
    // reader is a transport callback, which runs in between.
    unsafe { &*core::ptr::addr_of!(GLOBAL_TABLES) }
}

fn err_ptr<T>(e: Error) -> *mut T {
    e.to_errno() as isize as *mut T
}

/// The pointer of `ForeignOwnable` is `*const c_void` on 6.12 and
/// `*mut c_void` on later kernels (7.3); an endpoint's `dd_data` keeps it
/// as `*mut c_void`, and this converts to whichever the kernel takes.
trait ForeignPtr {
    fn into_mut(self) -> *mut c_void;
    fn from_mut(p: *mut c_void) -> Self;
}

impl ForeignPtr for *const c_void {
    fn into_mut(self) -> *mut c_void {
        self.cast_mut()
    }
    fn from_mut(p: *mut c_void) -> Self {
        p.cast_const()
    }
}

impl ForeignPtr for *mut c_void {
    fn into_mut(self) -> *mut c_void {
        self
    }
    fn from_mut(p: *mut c_void) -> Self {
        p
    }
}

/// Where an endpoint keeps its `T::Ep` (the `ForeignOwnable` pointer of
/// its `Pin<KBox<T::Ep>>`).
///
/// # Safety
/// `ep` must be an endpoint of ours (created by `iscsi_create_endpoint`
/// with one pointer of `dd_data`).
unsafe fn ep_data(ep: *mut b::iscsi_endpoint) -> *mut *mut c_void {
    // SAFETY: per the caller.
    unsafe { (*ep).dd_data.cast::<*mut c_void>() }
}

/// # Safety
/// `ep` must be an endpoint created by `ep_connect_tr::<T>`.
unsafe fn ep_of<T: TransportOps>(ep: *mut b::iscsi_endpoint) -> &'static T::Ep {
    // SAFETY: `ep` is ours (caller): its `dd_data` holds one pointer.
    let foreign = unsafe { *ep_data(ep) };
    // SAFETY: per the caller, `foreign` is what `ep_connect_tr` made with
    // `into_foreign`, which `ep_disconnect_tr` takes back with
    // `from_foreign` after the last callback on `ep`.
    let obj = unsafe { Pin::<KBox<T::Ep>>::borrow(ForeignPtr::from_mut(foreign)) };
    obj.get_ref()
}

/// # Safety
/// `conn` must be a live libiscsi connection of this transport.
unsafe fn conn_ep<T: TransportOps>(conn: *mut b::iscsi_conn) -> Option<&'static T::Ep> {
    // The slot (`dd_data`, one pointer sized at `create_conn`) is written at
    // bind and cleared at stop, or when the endpoint is disconnected first,
    // while the endpoint is alive; every access is atomic.
    // SAFETY: `conn` is live (caller), and a non-null slot value points to
    // a live endpoint by the rule above.
    unsafe {
        let slot = ep_slot::<T>(conn)?;
        let ep = slot.load(core::sync::atomic::Ordering::Acquire);
        if ep.is_null() {
            None
        } else {
            Some(&*ep)
        }
    }
}

/// The connection's endpoint slot (`conn->dd_data`), as an atomic.
///
/// # Safety
/// `conn` must be a live connection of this transport.
unsafe fn ep_slot<'a, T: TransportOps>(
    conn: *mut b::iscsi_conn,
) -> Option<&'a core::sync::atomic::AtomicPtr<T::Ep>> {
    // SAFETY: per the caller; the slot is pointer-sized and aligned
    // (kzalloc'ed by libiscsi with the size we gave), and an `AtomicPtr`
    // has the layout of a pointer.
    unsafe {
        let slot = (*conn).dd_data as *const core::sync::atomic::AtomicPtr<T::Ep>;
        slot.as_ref()
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn ep_connect_tr<T: TransportOps>(
    _shost: *mut b::Scsi_Host,
    dst: *mut b::sockaddr,
    _non_blocking: kernel::ffi::c_int,
) -> *mut b::iscsi_endpoint {
    // SAFETY: one pointer of endpoint data.
    let ep = unsafe { b::iscsi_create_endpoint(core::mem::size_of::<*mut c_void>() as i32) };
    if ep.is_null() {
        return err_ptr(ENOMEM);
    }
    match T::ep_connect(&SockAddr(dst, core::marker::PhantomData)) {
        Ok(obj) => {
            // Turned back into the box in `ep_disconnect_tr`.
            let foreign = obj.into_foreign().into_mut();
            // SAFETY: `dd_data` has room for one pointer (size above).
            unsafe { *ep_data(ep) = foreign };
            ep
        }
        Err(e) => {
            // SAFETY: created above, not published anywhere.
            unsafe { b::iscsi_destroy_endpoint(ep) };
            err_ptr(e)
        }
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn ep_poll_tr<T: TransportOps>(
    ep: *mut b::iscsi_endpoint,
    timeout_ms: i32,
) -> i32 {
    // SAFETY: iscsid passes an endpoint of ours.
    let obj = unsafe { ep_of::<T>(ep) };
    match T::ep_poll(obj, timeout_ms.max(0) as u32) {
        Ok(true) => 1,
        Ok(false) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn ep_disconnect_tr<T: TransportOps>(ep: *mut b::iscsi_endpoint) {
    // SAFETY: `ep` is ours (the callback contract): its `dd_data` holds
    // one pointer.
    let foreign = unsafe { *ep_data(ep) };
    // SAFETY: `foreign` was made by `into_foreign` in `ep_connect_tr` and
    // is reclaimed exactly once, here: iscsid's last call on `ep`.
    let obj = unsafe { Pin::<KBox<T::Ep>>::from_foreign(ForeignPtr::from_mut(foreign)) };
    // scsi_transport_iscsi disconnects a bound endpoint before `stop_conn`
    // (after `unbind_conn`, so no xmit runs): the connection must forget
    // it now, or `stop_conn` and `cleanup_task` would find a freed one.
    if let Some(c) = T::ep_bound_conn(&obj) {
        let me: *mut T::Ep = core::ptr::addr_of!(*obj).cast_mut();
        // SAFETY: a bound connection is live until after `stop_conn`.
        if let Some(slot) = unsafe { ep_slot::<T>(c.0.as_ptr()) } {
            let _ = slot.compare_exchange(
                me,
                core::ptr::null_mut(),
                core::sync::atomic::Ordering::AcqRel,
                core::sync::atomic::Ordering::Acquire,
            );
        }
    }
    // `get_stats` reads the endpoint through the slot inside an RCU
    // read-side section, and nothing serialises it with this call (it runs
    // under the netlink mutex, a disconnect from the connection-error work
    // does not): wait for any such reader before the object goes.
    super::rcu::synchronize();
    T::ep_disconnect(obj);
    // SAFETY: the endpoint is ours and no longer referenced.
    unsafe { b::iscsi_destroy_endpoint(ep) };
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn get_ep_param_tr<T: TransportOps>(
    ep: *mut b::iscsi_endpoint,
    param: Param,
    buf: *mut kernel::ffi::c_char,
) -> i32 {
    match param {
        PARAM_CONN_ADDRESS | PARAM_CONN_PORT => {
            // SAFETY: our endpoint.
            let obj = unsafe { ep_of::<T>(ep) };
            T::ep_with_dst_addr(obj, &mut |addr| {
                // SAFETY: `addr` is valid for this call (`ep_with_dst_addr`);
                // `buf` is a PAGE_SIZE sysfs buffer; formatting does not
                // sleep.
                unsafe { b::iscsi_conn_get_addr_param(addr.cast(), param, buf) }
            })
            .unwrap_or(ENOTCONN().to_errno())
        }
        _ => ENOSYS().to_errno(),
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn create_session_tr<T: TransportOps>(
    ep: *mut b::iscsi_endpoint,
    cmds_max: u16,
    qdepth: u16,
    initial_cmdsn: u32,
) -> *mut b::iscsi_cls_session {
    if ep.is_null() {
        pr_err!("create_session: no endpoint (iscsid too old)\n");
        return core::ptr::null_mut();
    }
    // SAFETY: our endpoint.
    let obj = unsafe { ep_of::<T>(ep) };
    let lim = match T::session_limits(obj, cmds_max) {
        Ok(l) => l,
        Err(_) => return core::ptr::null_mut(),
    };
    let g = globals();
    // SAFETY: the template is registered and lives as long as the module.
    unsafe {
        let shost = b::iscsi_host_alloc(g.sht, 0, false);
        if shost.is_null() {
            return core::ptr::null_mut();
        }
        (*shost).transportt = g.template;
        (*shost).cmd_per_lun = qdepth as i16;
        (*shost).max_lun = u64::from(b::iser_rs_max_lun);
        (*shost).max_id = 0;
        (*shost).max_channel = 0;
        (*shost).max_cmd_len = 16;
        (*shost).can_queue = i32::from(lim.can_queue);
        (*shost).sg_tablesize = lim.sg_tablesize;
        (*shost).max_sectors = lim.max_sectors;
        (*shost).virt_boundary_mask = lim.virt_boundary_mask as usize;
        if b::iscsi_host_add(shost, lim.dma_dev) != 0 {
            b::iscsi_host_free(shost);
            return core::ptr::null_mut();
        }
        let s = b::iscsi_session_setup(
            g.table,
            shost,
            lim.can_queue,
            0,
            core::mem::size_of::<TaskSlot<T::TaskData>>() as i32,
            initial_cmdsn,
            0,
        );
        if s.is_null() {
            b::iscsi_host_remove(shost, false);
            b::iscsi_host_free(shost);
        }
        s
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn destroy_session_tr(s: *mut b::iscsi_cls_session) {
    // SAFETY: a session made by `create_session_tr`; the order is the one
    // ib_iser uses (session, then its host).
    unsafe {
        let shost = b::iser_rs_cls_session_to_shost(s);
        b::iscsi_session_teardown(s);
        b::iscsi_host_remove(shost, false);
        b::iscsi_host_free(shost);
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn create_conn_tr(
    s: *mut b::iscsi_cls_session,
    cid: u32,
) -> *mut b::iscsi_cls_conn {
    // SAFETY: a live session; one pointer slot of connection data.
    unsafe { b::iscsi_conn_setup(s, core::mem::size_of::<*const ()>() as i32, cid) }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn bind_conn_tr<T: TransportOps>(
    s: *mut b::iscsi_cls_session,
    cls_conn: *mut b::iscsi_cls_conn,
    eph: u64,
    is_leading: i32,
) -> i32 {
    // SAFETY: live session and connection from iscsid's request.
    unsafe {
        let rc = b::iscsi_conn_bind(s, cls_conn, is_leading);
        if rc != 0 {
            return rc;
        }
        let ep = b::iscsi_lookup_endpoint(eph);
        if ep.is_null() {
            pr_err!("bind_conn: no endpoint for handle {}\n", eph);
            return EINVAL.to_errno();
        }
        let obj = ep_of::<T>(ep);
        let conn = (*cls_conn).dd_data.cast::<b::iscsi_conn>();
        let cmds_max = (*(*conn).session).cmds_max as u16;
        let rc = match T::bind(obj, Conn(NonNull::new_unchecked(conn)), cmds_max) {
            Ok(()) => {
                if let Some(slot) = ep_slot::<T>(conn) {
                    slot.store(
                        core::ptr::addr_of!(*obj).cast_mut(),
                        core::sync::atomic::Ordering::Release,
                    );
                }
                0
            }
            Err(e) => e.to_errno(),
        };
        b::iscsi_put_endpoint(ep);
        rc
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn start_conn_tr<T: TransportOps>(cls_conn: *mut b::iscsi_cls_conn) -> i32 {
    // SAFETY: live bound connection.
    unsafe {
        let conn = (*cls_conn).dd_data.cast::<b::iscsi_conn>();
        if let Some(ep) = conn_ep::<T>(conn) {
            if let Err(e) = T::start(ep) {
                return e.to_errno();
            }
        }
        b::iscsi_conn_start(cls_conn)
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn stop_conn_tr<T: TransportOps>(cls_conn: *mut b::iscsi_cls_conn, flag: i32) {
    // SAFETY: live connection. The RDMA side is stopped (QP flushed) before
    // libiscsi fails the tasks, so no failed task's memory is still open to
    // the target; then the connection forgets its endpoint.
    unsafe {
        let conn = (*cls_conn).dd_data.cast::<b::iscsi_conn>();
        if let Some(ep) = conn_ep::<T>(conn) {
            T::stop(ep);
        }
        b::iscsi_conn_stop(cls_conn, flag);
        if let Some(slot) = ep_slot::<T>(conn) {
            slot.store(core::ptr::null_mut(), core::sync::atomic::Ordering::Release);
        }
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn set_param_tr<T: TransportOps>(
    cls_conn: *mut b::iscsi_cls_conn,
    param: Param,
    buf: *mut kernel::ffi::c_char,
    buflen: i32,
) -> i32 {
    // SAFETY: `buf` holds `buflen` bytes (a NUL-terminated value).
    let value = unsafe { core::slice::from_raw_parts(buf.cast_const(), buflen.max(0) as usize) };
    let value = value.split(|&c| c == 0).next().unwrap_or(&[]);
    if let Err(e) = T::check_param(param, value) {
        return e.to_errno();
    }
    // SAFETY: forwarding iscsid's own arguments.
    unsafe { b::iscsi_set_param(cls_conn, param, buf, buflen) }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn get_stats_tr<T: TransportOps>(
    cls_conn: *mut b::iscsi_cls_conn,
    stats: *mut b::iscsi_stats,
) {
    // SAFETY: live connection; `stats` is a buffer sized for
    // ISCSI_STATS_CUSTOM_MAX custom entries.
    unsafe {
        let conn = (*cls_conn).dd_data.cast::<b::iscsi_conn>();
        let c = &*conn;
        let s = &mut *stats;
        s.txdata_octets = c.txdata_octets;
        s.rxdata_octets = c.rxdata_octets;
        s.scsicmd_pdus = c.scsicmd_pdus_cnt;
        s.dataout_pdus = c.dataout_pdus_cnt;
        s.scsirsp_pdus = c.scsirsp_pdus_cnt;
        s.datain_pdus = c.datain_pdus_cnt;
        s.r2t_pdus = c.r2t_pdus_cnt;
        s.tmfcmd_pdus = c.tmfcmd_pdus_cnt;
        s.tmfrsp_pdus = c.tmfrsp_pdus_cnt as u32;
        // The endpoint may be disconnected concurrently (see
        // `ep_disconnect_tr`, which clears the slot, then waits out RCU
        // readers before freeing it).
        super::rcu::read_section(|| {
            if let Some(ep) = conn_ep::<T>(conn) {
                T::stats(ep, &mut Stats(s));
            }
        });
    }
}

/// `send_pdu`: libiscsi's, between the transport's begin and end hooks.
///
/// # Safety
///
/// Called by scsi_transport_iscsi with a live connection of this transport
/// and the PDU's header and data buffers.
unsafe extern "C" fn send_pdu_tr<T: TransportOps>(
    cls_conn: *mut b::iscsi_cls_conn,
    hdr: *mut b::iscsi_hdr,
    data: *mut kernel::ffi::c_char,
    data_size: u32,
) -> core::ffi::c_int {
    // SAFETY: live connection (caller); its `dd_data` is libiscsi's conn.
    let conn = unsafe { (*cls_conn).dd_data.cast::<b::iscsi_conn>() };
    // The endpoint is read inside an RCU read-side section, as `get_stats`
    // does (see `ep_disconnect_tr`); the hooks do not sleep.
    let hook = |f: &dyn Fn(&T::Ep)| {
        super::rcu::read_section(|| {
            // SAFETY: live connection (caller).
            if let Some(ep) = unsafe { conn_ep::<T>(conn) } {
                f(ep);
            }
        })
    };
    hook(&T::send_pdu_begin);
    // libiscsi delivers a Login or Text Response (iscsi_complete_pdu) under
    // the session's back_lock in two steps: to iscsid/iscsiadm
    // (iscsi_recv_pdu), then it frees the login task (iscsi_complete_task).
    // A caller woken by the first step whose next request reaches
    // iscsi_conn_send_pdu before the second finds the login task busy
    // ("Login/Text in progress"), and the call fails (case 069 on Debian's
    // kernel; iscsiadm then starts the discovery over). Taking and
    // releasing the back_lock here waits for a delivery in progress.
    // SAFETY: live connection (caller), bound to its session since
    // conn_create; the netlink caller holds only mutexes (no spinlock, not
    // the back_lock); the lock is released at once, by this thread.
    unsafe {
        b::iser_rs_back_lock(conn);
        b::iser_rs_back_unlock(conn);
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { b::iscsi_conn_send_pdu(cls_conn, hdr, data, data_size) };
    let delay = super::params::param_inject_send_pdu_delay_ms();
    if delay > 0 {
        // Process context: scsi_transport_iscsi's netlink handler, holding
        // only mutexes.
        super::params::msleep(delay);
    }
    hook(&|ep| T::send_pdu_returning(ep, SendPduCaller::current()));
    let busy = super::params::param_inject_send_pdu_busy_ms();
    if busy > 0 {
        // The caller's CPU taken away between the end hook and the netlink
        // reply (case 069), without a sleep.
        super::params::mdelay(busy);
    }
    rc
}

/// The task making a `send_pdu` call (iscsid or iscsiadm), held by
/// reference. scsi_transport_iscsi queues the call's netlink reply after
/// the transport returns, without sleeping in between; so once that task
/// has slept, the reply is queued on its socket ahead of anything
/// multicast from then on. (On PREEMPT_RT a wait for a sleeping spinlock
/// also counts as a voluntary switch: there this can answer early.)
///
/// # Invariants
///
/// `task` holds a task reference taken by `current` and dropped by `drop`.
pub(crate) struct SendPduCaller {
    task: *mut b::task_struct,
    nvcsw: kernel::ffi::c_ulong,
}

// SAFETY: a task reference may be read and dropped from any thread.
unsafe impl Send for SendPduCaller {}
// SAFETY: `has_slept` only reads the task's fields with READ_ONCE.
unsafe impl Sync for SendPduCaller {}

impl SendPduCaller {
    /// The calling task, and its voluntary switch count now.
    fn current() -> Self {
        let mut nvcsw = 0;
        // SAFETY: `nvcsw` is a valid out pointer; the helper takes a
        // reference on `current`, dropped in `drop`.
        let task = unsafe { b::iser_rs_current_task_get(&mut nvcsw) };
        // INVARIANT: `task` was just referenced.
        Self { task, nvcsw }
    }

    /// Whether the task slept since the call returned (or is asleep, or
    /// gone): then the call's netlink reply has been queued. A task the
    /// scheduler preempted, or whose vCPU the host does not run, has not.
    pub(crate) fn has_slept(&self) -> bool {
        // SAFETY: `task` is referenced (type invariant).
        unsafe { b::iser_rs_task_slept_since(self.task, self.nvcsw) }
    }
}

impl Drop for SendPduCaller {
    fn drop(&mut self) {
        // SAFETY: drops the reference `current` took (type invariant),
        // once.
        unsafe { b::iser_rs_task_put(self.task) };
    }
}

/// A target address as the CM id holds it (`struct sockaddr *`), handed
/// through the driver to libiscsi's formatter without being read there.
pub(crate) type DstAddr = *mut b::sockaddr;

/// The statistics buffer of one `get_stats` call.
pub(crate) struct Stats<'a>(&'a mut b::iscsi_stats);

impl Stats<'_> {
    /// Fills custom statistic `i` (name at most 63 bytes).
    pub(crate) fn set_custom(&mut self, i: usize, name: &str, value: u64) {
        set_custom_stat(self.0, i, name, value)
    }
}

/// Fills custom statistic `i` of `stats` (name at most 63 bytes).
fn set_custom_stat(stats: &mut b::iscsi_stats, i: usize, name: &str, value: u64) {
    // SAFETY: `stats` comes from libiscsi's get_stats buffer (the only
    // way to a `Stats`), which holds ISCSI_STATS_CUSTOM_MAX entries after
    // the fixed fields.
    let custom = unsafe { stats.custom.as_mut_slice(CUSTOM_STATS_MAX) };
    if let Some(c) = custom.get_mut(i) {
        let n = name.len().min(c.desc.len() - 1);
        for (d, s) in c.desc.iter_mut().zip(name.as_bytes()[..n].iter()) {
            *d = *s;
        }
        c.desc[n] = 0;
        c.value = value;
        stats.custom_length = stats.custom_length.max(i as u32 + 1);
    }
}

/// Runs a task operation (`xmit_task`) for libiscsi: finds
/// the endpoint of the task's connection and maps the result to an errno.
///
/// # Safety
/// `task` is a live task of a connection of this transport, as libiscsi
/// passes it to a transport callback, and stays live for the call.
unsafe fn task_op<T: TransportOps>(
    task: *mut b::iscsi_task,
    op: fn(&T::Ep, Task<'_, T::TaskData>) -> Result,
) -> i32 {
    // SAFETY: the caller guarantees `task` is live (so is its `conn`, which
    // libiscsi holds for the task's lifetime), and non-null.
    let (conn, raw) = unsafe { ((*task).conn, NonNull::new_unchecked(task)) };
    // SAFETY: `conn` belongs to this transport (caller's contract).
    let Some(ep) = (unsafe { conn_ep::<T>(conn) }) else {
        return ENOTCONN().to_errno();
    };
    let t = Task {
        raw,
        _p: core::marker::PhantomData,
    };
    match op(ep, t) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn xmit_task_tr<T: TransportOps>(task: *mut b::iscsi_task) -> i32 {
    // SAFETY: libiscsi passes a live task of a bound connection of this
    // transport (the function's contract is `task_op`'s).
    unsafe { task_op::<T>(task, T::xmit_task) }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn cleanup_task_tr<T: TransportOps>(task: *mut b::iscsi_task) {
    // SAFETY: libiscsi passes a live task of a connection of this
    // transport; the endpoint may already be unbound.
    unsafe {
        let ep = conn_ep::<T>((*task).conn);
        let mut t = Task::<T::TaskData> {
            raw: NonNull::new_unchecked(task),
            _p: core::marker::PhantomData,
        };
        if t.data().is_some() {
            T::cleanup_task(
                ep,
                Task {
                    raw: t.raw,
                    _p: core::marker::PhantomData,
                },
            );
            t.end_use();
        }
    }
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn alloc_pdu_tr<T: TransportOps>(task: *mut b::iscsi_task, _opcode: u8) -> i32 {
    // SAFETY: live task of a live connection; its header buffer lives in
    // its own dd_data, which stays put while the task exists.
    unsafe {
        let Some(ep) = conn_ep::<T>((*task).conn) else {
            return ENOTCONN().to_errno();
        };
        let mut t = Task::<T::TaskData> {
            raw: NonNull::new_unchecked(task),
            _p: core::marker::PhantomData,
        };
        let d = t.begin_use(|| T::new_task(ep), |d| T::reuse_task(ep, d));
        let hdr = T::task_hdr(d);
        (*task).hdr = hdr.cast();
        (*task).hdr_max = BHS_LEN as u16;
    }
    0
}

/// # Safety
/// Only called by scsi_transport_iscsi/libiscsi through the transport
/// table, with object pointers that are live for the call and belong to
/// this transport (the `iscsi_transport` callback contract).
unsafe extern "C" fn attr_is_visible_tr(param_type: i32, param: i32) -> b::umode_t {
    // Same set as ib_iser: everything iscsid shows for a session of ours.
    let visible = match param_type as u32 {
        b::iscsi_param_type_ISCSI_HOST_PARAM => matches!(
            param as u32,
            b::iscsi_host_param_ISCSI_HOST_PARAM_NETDEV_NAME
                | b::iscsi_host_param_ISCSI_HOST_PARAM_HWADDRESS
                | b::iscsi_host_param_ISCSI_HOST_PARAM_INITIATOR_NAME
        ),
        b::iscsi_param_type_ISCSI_PARAM => matches!(
            param as u32,
            b::iscsi_param_ISCSI_PARAM_MAX_RECV_DLENGTH
                | b::iscsi_param_ISCSI_PARAM_MAX_XMIT_DLENGTH
                | b::iscsi_param_ISCSI_PARAM_HDRDGST_EN
                | b::iscsi_param_ISCSI_PARAM_DATADGST_EN
                | b::iscsi_param_ISCSI_PARAM_CONN_ADDRESS
                | b::iscsi_param_ISCSI_PARAM_CONN_PORT
                | b::iscsi_param_ISCSI_PARAM_EXP_STATSN
                | b::iscsi_param_ISCSI_PARAM_PERSISTENT_ADDRESS
                | b::iscsi_param_ISCSI_PARAM_PERSISTENT_PORT
                | b::iscsi_param_ISCSI_PARAM_PING_TMO
                | b::iscsi_param_ISCSI_PARAM_RECV_TMO
                | b::iscsi_param_ISCSI_PARAM_INITIAL_R2T_EN
                | b::iscsi_param_ISCSI_PARAM_MAX_R2T
                | b::iscsi_param_ISCSI_PARAM_IMM_DATA_EN
                | b::iscsi_param_ISCSI_PARAM_FIRST_BURST
                | b::iscsi_param_ISCSI_PARAM_MAX_BURST
                | b::iscsi_param_ISCSI_PARAM_PDU_INORDER_EN
                | b::iscsi_param_ISCSI_PARAM_DATASEQ_INORDER_EN
                | b::iscsi_param_ISCSI_PARAM_TARGET_NAME
                | b::iscsi_param_ISCSI_PARAM_TPGT
                | b::iscsi_param_ISCSI_PARAM_USERNAME
                | b::iscsi_param_ISCSI_PARAM_PASSWORD
                | b::iscsi_param_ISCSI_PARAM_USERNAME_IN
                | b::iscsi_param_ISCSI_PARAM_PASSWORD_IN
                | b::iscsi_param_ISCSI_PARAM_FAST_ABORT
                | b::iscsi_param_ISCSI_PARAM_ABORT_TMO
                | b::iscsi_param_ISCSI_PARAM_LU_RESET_TMO
                | b::iscsi_param_ISCSI_PARAM_TGT_RESET_TMO
                | b::iscsi_param_ISCSI_PARAM_IFACE_NAME
                | b::iscsi_param_ISCSI_PARAM_INITIATOR_NAME
                | b::iscsi_param_ISCSI_PARAM_DISCOVERY_SESS
        ),
        _ => false,
    };
    if visible {
        0o444
    } else {
        0
    }
}

impl Registration {
    /// Registers transport `name` with operations `T`.
    ///
    /// Fails with `EEXIST` (and says so) when another module, such as the
    /// C `ib_iser`, already registered a transport of that name.
    pub(crate) fn new<T: TransportOps>(
        module: &'static ThisModule,
        name: &'static CStr,
    ) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string that lives forever.
        if unsafe { b::iser_rs_transport_name_taken(name.as_char_ptr()) } {
            pr_err!("iSCSI transport \"{}\" is already registered (is ib_iser loaded? rmmod ib_iser first)\n", name);
            return Err(EEXIST);
        }
        let mut sht = KBox::new(b::scsi_host_template::default(), GFP_KERNEL)?;
        sht.module = module.as_ptr().cast();
        sht.name = c_str!("iSCSI Initiator over iSER (iser-rs)").as_char_ptr();
        sht.proc_name = c_str!("iscsi_iser").as_char_ptr();
        sht.queuecommand = Some(b::iscsi_queuecommand);
        sht.change_queue_depth = Some(b::scsi_change_queue_depth);
        sht.sg_tablesize = 128;
        sht.cmd_per_lun = 128;
        sht.eh_timed_out = Some(b::iscsi_eh_cmd_timed_out);
        sht.eh_abort_handler = Some(b::iscsi_eh_abort);
        sht.eh_device_reset_handler = Some(b::iscsi_eh_device_reset);
        sht.eh_target_reset_handler = Some(b::iscsi_eh_recover_target);
        sht.target_alloc = Some(b::iscsi_target_alloc);
        sht.this_id = -1;
        sht.set_track_queue_depth(1);
        sht.cmd_size = core::mem::size_of::<b::iscsi_cmd>() as u32;

        let mut table = KBox::new(b::iscsi_transport::default(), GFP_KERNEL)?;
        table.owner = module.as_ptr().cast();
        table.name = name.as_char_ptr().cast_mut();
        table.caps = CAPS;
        table.create_session = Some(create_session_tr::<T>);
        table.destroy_session = Some(destroy_session_tr);
        table.create_conn = Some(create_conn_tr);
        table.bind_conn = Some(bind_conn_tr::<T>);
        table.unbind_conn = Some(b::iscsi_conn_unbind);
        table.destroy_conn = Some(b::iscsi_conn_teardown);
        table.attr_is_visible = Some(attr_is_visible_tr);
        table.set_param = Some(set_param_tr::<T>);
        table.get_conn_param = Some(b::iscsi_conn_get_param);
        table.get_ep_param = Some(get_ep_param_tr::<T>);
        table.get_session_param = Some(b::iscsi_session_get_param);
        table.start_conn = Some(start_conn_tr::<T>);
        table.stop_conn = Some(stop_conn_tr::<T>);
        table.get_host_param = Some(b::iscsi_host_get_param);
        table.set_host_param = Some(b::iscsi_host_set_param);
        table.send_pdu = Some(send_pdu_tr::<T>);
        table.get_stats = Some(get_stats_tr::<T>);
        // No `init_task`: libiscsi calls it only if set (6.12 and 7.3,
        // `iscsi_prep_scsi_cmd_pdu` and `iscsi_prep_mgmt_task`), and
        // `alloc_pdu` prepares everything a task needs.
        table.xmit_task = Some(xmit_task_tr::<T>);
        table.cleanup_task = Some(cleanup_task_tr::<T>);
        table.alloc_pdu = Some(alloc_pdu_tr::<T>);
        table.session_recovery_timedout = Some(b::iscsi_session_recovery_timedout);
        table.ep_connect = Some(ep_connect_tr::<T>);
        table.ep_poll = Some(ep_poll_tr::<T>);
        table.ep_disconnect = Some(ep_disconnect_tr::<T>);

        // SAFETY: single writer at module init, before registration makes
        // the transport reachable (see `globals`).
        unsafe {
            GLOBAL_TABLES.table = &mut *table;
            GLOBAL_TABLES.sht = &*sht;
        }
        // SAFETY: `table` is a fully initialised transport table at a stable
        // heap address that outlives the registration (freed only after
        // `iscsi_unregister_transport` in `Drop`).
        let template = unsafe { b::iscsi_register_transport(&mut *table) };
        if template.is_null() {
            pr_err!("iscsi_register_transport(\"{}\") failed\n", name);
            return Err(EINVAL);
        }
        // SAFETY: as above; iscsid cannot create a session before the
        // netlink round trip that follows registration.
        unsafe { GLOBAL_TABLES.template = template };
        Ok(Self { table, _sht: sht })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: the table was registered in `new` and not unregistered
        // since; afterwards scsi_transport_iscsi holds no pointer to it.
        unsafe { b::iscsi_unregister_transport(&mut *self.table) };
    }
}
