// SPDX-License-Identifier: GPL-2.0
//! Per-command state ([`IserTask`]) and the rules that decide when a
//! response may reach libiscsi: a SCSI Response's STags invalidated
//! (remotely or by a local invalidation, `inv_done`) and the last Send
//! that read its pages completed (`data_sent`); a successful TMF
//! Response's covered STags invalidated and its request's Send completed;
//! and `cleanup_task`, which returns a released command's MRs and held
//! receive buffer.
//!
//! The STag rules themselves live in `proto::task::TaskStags`; this file
//! only executes them: register → advertise → (remote- or locally-)
//! invalidated → completable. A response whose command still has a valid
//! STag is held back, with its receive buffer, until the local
//! invalidation completes: **no command completes to SCSI while one of its
//! STags is valid.** One case skips the task: a read whose SendInvSE
//! alone completes it (`TaskStags::settles_remotely`) is armed on its MR
//! before its post, and the receive path settles that response there by
//! one compare-and-swap (`MrSlot::settle_remote`); the task's own rules
//! and `cleanup` take the mark back, and read it as the STag's death.
//!
//! Contexts: responses and invalidation completions in softirq (the
//! connection's one CQ); `cleanup` from libiscsi in either process context
//! or softirq, under its back_lock. Nothing that calls into libiscsi runs
//! under the back_lock (`Then`).

use super::conn::IserConn;
use super::resources::{InvDesc, OnWire, RemoteSettle, Resources, SendMet, TmfInvDesc, NO_HELD};
use crate::proto;
use crate::proto::task::{MeetTaken, TaskStags};
use crate::sys::iscsi::{Conn, Task, BHS_LEN};
use crate::sys::rcu::BhOff;
use crate::sys::verbs::{CqeHandler, MappedSg, Wc, WithCqe};
use core::sync::atomic::Ordering;
use kernel::prelude::*;

/// Transport data of one libiscsi task (lives in `task->dd_data`, made
/// at the task's first use and reset by `alloc_pdu` at every later one).
#[repr(C)]
pub(crate) struct IserTask {
    pub(crate) bhs: [u8; BHS_LEN],
    /// Names this command among all sent on the connection (0: none): a
    /// local invalidation's completion completes the response only if the
    /// task still carries the cookie it was posted for.
    pub(crate) cookie: u64,
    pub(crate) stags: Option<TaskStags>,
    /// MR pool slots: [read, write].
    pub(crate) mrs: [Option<u16>; 2],
    /// Registered for local access only (fully unsolicited write).
    pub(crate) local_only: bool,
    /// Where the Sends of this command's data (immediate and unsolicited
    /// Data-Out) find it: (base address, lkey).
    pub(crate) local_data: Option<(u64, u32)>,
    pub(crate) sg: Option<MappedSg>,
    pub(crate) cmd_sent: bool,
    /// A Send that read the command's pages (immediate data, unsolicited
    /// Data-Out) may still be read by the device (a retransmission after
    /// a lost ACK): the command must not complete before its last such
    /// Send completed (`data_sent`).
    pub(crate) send_pending: bool,
    /// A response waiting for local invalidation or for `send_pending`:
    /// receive ring index and received length.
    pub(crate) deferred: Option<(u16, u32)>,
    pub(crate) inv_posted: proto::task::StagList,
    /// Armed at the meeting of its response and its data Send
    /// (`MeetWord`, step 24): those two events go there, not through the
    /// task, until the task's rules or `cleanup` take the word back.
    pub(crate) meet: bool,
    /// The connection (`IserConn::seq`) whose pools hold this command's
    /// MR slot, task word and held receive buffer; 0: it took none.
    /// libiscsi's error handler can hold a command across a reconnect and
    /// release it on the next connection, whose pools those indices do
    /// not name (`cleanup`; case 065, mode dup-tmf).
    pub(crate) conn_seq: u32,
}

impl IserTask {
    pub(crate) fn new() -> Self {
        IserTask {
            bhs: [0; BHS_LEN],
            cookie: 0,
            stags: None,
            mrs: [None, None],
            local_only: false,
            local_data: None,
            sg: None,
            cmd_sent: false,
            send_pending: false,
            deferred: None,
            inv_posted: proto::task::StagList::default(),
            meet: false,
            conn_seq: 0,
        }
    }

    /// Back to what `new` makes, after `cleanup` ended the last use; the
    /// BHS is left for libiscsi, which builds the next one over it. Every
    /// field is named, so a field added later cannot be missed here.
    pub(crate) fn reuse(&mut self) {
        let IserTask {
            bhs: _,
            cookie,
            stags,
            mrs,
            local_only,
            local_data,
            sg,
            cmd_sent,
            send_pending,
            deferred,
            inv_posted,
            meet,
            conn_seq,
        } = self;
        *cookie = 0;
        *stags = None;
        *mrs = [None, None];
        *local_only = false;
        *local_data = None;
        // Taken by `cleanup`: nothing to drop (else it is dropped here).
        *sg = None;
        *cmd_sent = false;
        *send_pending = false;
        *deferred = None;
        *inv_posted = proto::task::StagList::default();
        *meet = false;
        *conn_seq = 0;
    }

    pub(crate) fn bhs_ptr(&mut self) -> *mut u8 {
        self.bhs.as_mut_ptr()
    }
}

/// A local invalidation completed (softirq).
impl CqeHandler for InvDesc {
    type Ctx = IserConn;
    fn done(this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        // Flushed (the unsignaled first WR of a pair too): the connection
        // is going away; teardown frees the descriptor.
        if conn.wc_failed(wc, "local invalidate") {
            return;
        }
        let itt = this.itt.load(Ordering::Acquire);
        let cookie = this.cookie.load(Ordering::Acquire);
        let bh = wc.bh();
        let res = conn.resources_in(bh);
        if let Some(res) = res {
            res.invs.free.release(this.index);
        }
        inv_done(bh, res, itt, cookie, conn);
    }
}

/// The invalidations a TMF Response waits for completed (softirq).
impl CqeHandler for TmfInvDesc {
    type Ctx = IserConn;
    fn done(_this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        // Flushed: the connection is going away and the response is never
        // delivered; recovery fails the commands once the QP is drained
        // (and no other QP shares the PD of their MRs).
        if conn.wc_failed(wc, "local invalidate after TMF") {
            return;
        }
        if conn.tmf.update(|r| r.invalidations_completed()) {
            deliver_held_tmf(wc.bh(), conn);
        }
    }
}

/// Hands the held TMF Response to libiscsi (softirq): everything it
/// waited for completed.
pub(crate) fn deliver_held_tmf(bh: BhOff<'_>, conn: &IserConn) {
    let held = match conn.resources_in(bh) {
        Some(res) => res.tmf_inv.held.swap(NO_HELD, Ordering::AcqRel),
        None => return,
    };
    if held != NO_HELD {
        conn.complete_deferred(bh, (held >> 32) as u16, held as u32);
    }
}

/// Applies the STag and Send rules to a TMF Response (softirq): when the
/// target answers Function Complete, libiscsi fails the commands the
/// function covers as soon as it sees the response, and their pages go
/// back to the block layer. So the MRs those commands hold are invalidated
/// locally first (one LOCAL_INV each, the last signaled), and the
/// response, with its receive buffer `rx`, is held until that completed
/// (`TmfInvDesc::done`) and until the TMF request's own Send completed
/// (`TxDesc::done`: every Send that read a covered command's pages was
/// posted before it, and the send queue completes in order). Another
/// answer releases nothing (libiscsi escalates, and a later success or the
/// connection's recovery comes by here or by the drained QP).
pub(crate) fn on_tmf_response(
    conn: &IserConn,
    pdu: &proto::bhs::TargetPdu<'_>,
    rx: u16,
    len: u32,
) -> RspAction {
    let Some(req) = conn.tmf.take(pdu.itt.0) else {
        // It answers no TMF on the wire: never sent, or answered already
        // (a second response while the first is held for its
        // invalidations would tell libiscsi the TMF succeeded, and it
        // would release the commands the TMF covers before their STags
        // died; libiscsi's `iscsi_tmf_rsp` does not look at the ITT).
        // libiscsi has one TMF out at a time; one it gave up on fails the
        // connection when it times out, but not when a signal ends the
        // wait of a reset asked for by ioctl (`sg_reset`): that TMF's late
        // response, after the next TMF was recorded, lands here too, and
        // failing the connection is still the safe answer to it. The
        // response is held for good (case 065, mode dup-tmf).
        pr_warn!(
            "a TMF Response for ITT {:#x} answers no TMF in flight: connection failed\n",
            u32::from_ne_bytes(pdu.itt.0)
        );
        conn.proto_error(proto::ProtoError::TaskState);
        return RspAction::Deferred;
    };
    if pdu.bhs.get(2) != Some(&proto::task::TMF_FUNCTION_COMPLETE) {
        return RspAction::CompleteNow;
    }
    let scope = proto::task::TmfScope::of_request(&req);
    // Without resources the QP is destroyed and the MRs deregistered.
    let Some(res) = conn.resources() else {
        return RspAction::CompleteNow;
    };
    let d = &res.tmf_inv;
    let held = u64::from(rx) << 32 | u64::from(len);
    if d.held
        .compare_exchange(NO_HELD, held, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        // A second successful TMF Response before the first one's
        // invalidation completed: libiscsi never has two TMFs out.
        conn.counters.proto_error();
        conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        return RspAction::Deferred;
    }
    // Each rkey is posted once the next one is known, so the last one
    // goes signaled.
    let mut last = None;
    let mut n = 0u64;
    for rkey in res.tasks.claim_for_tmf(&scope) {
        if let Some(prev) = last.replace(rkey) {
            if res
                .qp
                .post_local_inv_signaled(d.cqe(), &[prev], false)
                .is_err()
            {
                return tmf_inv_failed(conn);
            }
            n += 1;
        }
    }
    if let Some(rkey) = last {
        if res.qp.post_local_inv(d.cqe(), &[rkey]).is_err() {
            return tmf_inv_failed(conn);
        }
        conn.counters.tmf_inv(n + 1);
        iser_info!(
            "TMF Response (Function Complete) held for {} local invalidations\n",
            n + 1
        );
    }
    // Their completion comes through this same CQ, after this handler
    // returns: the state says "pending" before it can arrive.
    let invs_posted = last.is_some();
    if conn.tmf.update(|r| r.response(invs_posted)) {
        d.held.store(NO_HELD, Ordering::Release);
        return RspAction::CompleteNow;
    }
    if !invs_posted {
        // Held for the request's Send alone (see `TmfRelease`).
        conn.counters.tmf_send_wait();
    }
    RspAction::Deferred
}

/// A LOCAL_INV for a TMF could not be posted: the response stays held for
/// good and the connection fails (its recovery drains the QP first).
fn tmf_inv_failed(conn: &IserConn) -> RspAction {
    conn.counters.post_error();
    conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
    RspAction::Deferred
}

/// What the receive path does with a SCSI Response.
pub(crate) enum RspAction {
    /// Every STag is invalid: complete it now.
    CompleteNow,
    /// Local invalidation posted; completion follows in `inv_done`.
    Deferred,
}

/// What a completion step asks of the caller once the back_lock is
/// released (nothing that calls into libiscsi runs under it).
enum Then {
    Nothing,
    /// Hand the held response in receive buffer (index, length) over.
    Complete(u16, u32),
    /// The target broke the rules, or a post failed: fail the connection.
    Fail,
}

/// Applies the completion rules to a SCSI Response (softirq); `rx` and
/// `len` name its receive buffer, held back if the response must wait:
/// a command completes after its response, the invalidation of each of
/// its STags, and the completion of the last Send that read its pages
/// (the nvme-rdma rule).
// Once per I/O: inlined (bench/README.md, step 13).
#[inline(always)]
pub(crate) fn on_scsi_response(
    conn: &IserConn,
    res: Option<&Resources>,
    iscsi: Conn,
    itt: proto::bhs::Itt,
    inv: Option<u32>,
    rx: u16,
    len: u32,
) -> core::result::Result<RspAction, proto::ProtoError> {
    let itt = u32::from_ne_bytes(itt.0);
    // A response that came while `xmit` is still sending its command
    // waits for the post (`XmitWord`), outside the back_lock.
    let slot = res.and_then(|r| r.tasks.by_itt(itt));
    if slot.map(|s| s.xmit.wait_on_wire(itt)) == Some(OnWire::AfterWait) {
        iser_info!(
            "a SCSI Response for ITT {:#x} came while its command was being sent: handled once the command was posted\n",
            itt
        );
    }
    let r = iscsi.with_ctask::<IserTask, _>(itt, |task| {
        let Some(mut task) = task else {
            return Ok(RspOutcome::NoTask);
        };
        // libiscsi finds the command from the moment it allocated it;
        // until `xmit` posted it (or once `cleanup` released it) the task
        // and its transport data are not this response's to act on.
        if !slot.is_some_and(|s| s.xmit.is_on_wire(itt)) {
            return Ok(RspOutcome::NotOnWire);
        }
        let Some(t) = task.data() else {
            return Ok(RspOutcome::NoTask);
        };
        let Some(stags) = t.stags.as_mut() else {
            return Ok(RspOutcome::NoTask);
        };
        // A read armed for the settle on its MR (step 23) answered
        // otherwise, or answered again: the mark is taken back, so no
        // later SendInvSE settles it there, and one that did already made
        // this a second response.
        if let Some(i) = t.mrs[0] {
            let settle = conn
                .resources()
                .and_then(|res| res.tasks.slot(i).map(|s| s.mr.take_remote_settle()));
            if settle == Some(RemoteSettle::Settled) {
                return Err(proto::ProtoError::TaskState);
            }
        }
        // A write armed at the meeting of its response and its data Send
        // (step 24) answered otherwise (SendInvSE, a buffer the word cannot
        // name), or again: the word is taken back and what it held goes
        // to the task.
        if t.meet {
            t.meet = false;
            let taken = conn
                .resources()
                .and_then(|res| res.tasks.by_itt(itt).map(|s| s.meet.take()))
                .unwrap_or(MeetTaken::Off);
            match taken {
                MeetTaken::Off | MeetTaken::Armed => {}
                MeetTaken::Sent => t.send_pending = false,
                MeetTaken::Held(rx, len) => {
                    // `cleanup` returns its buffer.
                    t.deferred = Some((rx, len));
                    pr_warn!(
                        "a second SCSI Response for ITT {:#x}, its first held for its data Send: failing the connection\n",
                        itt
                    );
                    return Err(proto::ProtoError::TaskState);
                }
                MeetTaken::Done => {
                    pr_warn!(
                        "a second SCSI Response for ITT {:#x}, its first delivered: failing the connection\n",
                        itt
                    );
                    return Err(proto::ProtoError::TaskState);
                }
            }
        }
        let todo = stags.on_response(inv)?;
        if inv.is_some() {
            conn.counters.remote_inv();
        }
        if todo.is_empty() {
            if t.send_pending {
                // Completed by `data_sent`.
                t.deferred = Some((rx, len));
                return Ok(RspOutcome::Action(RspAction::Deferred));
            }
            return Ok(RspOutcome::Action(RspAction::CompleteNow));
        }
        let res = conn.resources().ok_or(proto::ProtoError::TaskState)?;
        for s in todo.as_slice() {
            stags.local_invalidate_posted(*s)?;
        }
        t.inv_posted = todo;
        t.deferred = Some((rx, len));
        let Some(di) = res.invs.free.claim() else {
            // More invalidations in flight than commands can have: a
            // target answering commands twice. Fail rather than complete
            // early.
            return Err(proto::ProtoError::TaskState);
        };
        let Some(d) = res.invs.descs.get(di as usize) else {
            return Err(proto::ProtoError::TaskState);
        };
        d.itt.store(itt, Ordering::Relaxed);
        d.cookie.store(t.cookie, Ordering::Release);
        if res.qp.post_local_inv(d.cqe(), todo.as_slice()).is_err() {
            res.invs.free.release(di);
            return Ok(RspOutcome::PostFailed);
        }
        conn.counters.local_inv(todo.len() as u64);
        Ok(RspOutcome::Action(RspAction::Deferred))
    })?;
    match r {
        RspOutcome::Action(a) => Ok(a),
        RspOutcome::NotOnWire => {
            // The target answered a command it was never sent (or one
            // already released): nothing of the command is touched, and
            // the connection fails (libiscsi fails the command once the
            // QP is drained, and the midlayer retries it). The stall of
            // case 071 ends here, before `conn_error` reaches libiscsi's
            // `iscsi_conn_failure`, which takes the frwd_lock the stalled
            // `xmit` holds.
            crate::sys::params::inject_early_rsp_met(false);
            pr_warn!(
                "a SCSI Response for ITT {:#x}, whose command is not on the wire (not sent yet, or released): failing the connection\n",
                itt
            );
            Err(proto::ProtoError::TaskState)
        }
        RspOutcome::PostFailed => {
            // Never completable now: the connection fails and libiscsi
            // cleans up.
            conn.counters.post_error();
            conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
            Ok(RspAction::Deferred)
        }
        // No such command (aborted, or a bad ITT): libiscsi judges the
        // PDU, but an invalidation naming nothing of ours is an error here.
        RspOutcome::NoTask => match inv {
            Some(x) => Err(proto::ProtoError::UnknownStag(x)),
            None => Ok(RspAction::CompleteNow),
        },
    }
}

/// What `on_scsi_response` found under the back_lock.
enum RspOutcome {
    NoTask,
    /// libiscsi knows the command; it is not (or no longer) on the wire.
    NotOnWire,
    Action(RspAction),
    PostFailed,
}

/// The task's held response, if nothing else holds it now.
fn completable(td: &mut IserTask) -> Then {
    if td.send_pending || td.stags.as_ref().is_some_and(|st| !st.completable()) {
        return Then::Nothing;
    }
    match td.deferred.take() {
        Some((rx, len)) => Then::Complete(rx, len),
        None => Then::Nothing,
    }
}

/// Does what a completion step asked for, outside the back_lock.
fn then(bh: BhOff<'_>, conn: &IserConn, step: Then) {
    match step {
        Then::Nothing => {}
        Then::Complete(rx, len) => conn.complete_deferred(bh, rx, len),
        Then::Fail => {
            conn.counters.proto_error();
            conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        }
    }
}

/// Runs a completion step on the command a completion handle names (raw
/// ITT and cookie), under the back_lock, and does what it asks after the
/// unlock. Nothing happens if the task no longer holds that command: it
/// was released meanwhile (a TMF, whose own invalidation covered its MRs,
/// or the error handler), and `cleanup` handed its held receive buffer
/// back.
fn on_command(
    bh: BhOff<'_>,
    conn: &IserConn,
    res: Option<&Resources>,
    itt: u32,
    cookie: u64,
    f: impl FnOnce(&mut IserTask) -> Then,
) {
    let Some(iscsi) = conn.iscsi.get() else {
        return;
    };
    // A Send completion may come before the `xmit` that posted it marked
    // its command on the wire: it waits for that, outside the back_lock.
    let slot = res.and_then(|r| r.tasks.by_itt(itt));
    if let Some(s) = slot {
        s.xmit.wait_on_wire(itt);
    }
    let step = iscsi.with_ctask::<IserTask, _>(itt, |task| {
        let Some(mut task) = task else {
            return Then::Nothing;
        };
        // Not on the wire: the task holds another command now (one that
        // `xmit` is preparing, whose transport data is its own), or none.
        if !slot.is_some_and(|s| s.xmit.is_on_wire(itt)) {
            return Then::Nothing;
        }
        match task.data() {
            Some(td) if td.cookie == cookie => f(td),
            _ => Then::Nothing,
        }
    });
    then(bh, conn, step);
}

/// Local invalidation completed (softirq): complete the held response if
/// nothing else holds it.
fn inv_done(bh: BhOff<'_>, res: Option<&Resources>, itt: u32, cookie: u64, conn: &IserConn) {
    on_command(bh, conn, res, itt, cookie, |td| {
        let mut ok = true;
        if let Some(st) = td.stags.as_mut() {
            for s in td.inv_posted.as_slice() {
                ok &= st.local_invalidate_completed(*s).is_ok();
            }
            ok &= st.completable();
        }
        if !ok {
            return Then::Fail;
        }
        completable(td)
    });
}

/// The last Send that read a command's pages completed (softirq): the
/// device will not read them again; complete the held response if nothing
/// else holds it. `res`: the resources, read in the handler's softirq `bh`.
pub(crate) fn data_sent(
    bh: BhOff<'_>,
    itt: u32,
    cookie: u64,
    conn: &IserConn,
    res: Option<&Resources>,
) {
    // An unregistered write armed at the meeting (step 24): settled there,
    // without the task.
    if let Some((res, slot)) = res.and_then(|r| Some((r, r.tasks.by_itt(itt)?))) {
        match slot.meet.send_done(itt) {
            SendMet::NotArmed => {}
            SendMet::Marked => return,
            SendMet::DeliverHeld(rx, len) => return conn.deliver_held_response(bh, res, rx, len),
        }
    }
    on_command(bh, conn, res, itt, cookie, |td| {
        td.send_pending = false;
        completable(td)
    });
}

/// Drops the DMA mapping of every command of `conn`'s session sent on the
/// connection `seq` (`IserConn::seq`) that libiscsi has not released yet.
/// Called by that connection's teardown once its QP is destroyed, while
/// its device is still registered (`IserConn::release_resources`): a
/// command libiscsi's error handler holds is released (`cleanup`) only
/// when its TMF or the session's recovery times out, maybe after the
/// device was removed and freed, and its mapping must not be unmapped
/// through that device then (case 057). `cleanup` finds the mapping gone.
pub(crate) fn drop_mappings(conn: Conn, seq: u32) {
    conn.for_each_task_data(|td: &mut IserTask| {
        if td.conn_seq == seq {
            drop(td.sg.take());
        }
    });
}

/// `cleanup_task`: unmaps the data and returns the MRs.
///
/// By the time libiscsi releases a command its STags are dead on every
/// path: invalidated by its response's rules, by the local invalidations
/// of a successful TMF covering it (`MrSlot::tmf_invalidated`), or
/// unreachable because the connection's QP is flushed (its own PD: no other
/// QP can use them) or destroyed. A release that finds an STag valid on a
/// live QP breaks that rule: it is counted (`released_valid_stags`, which
/// the guest cases check stays 0), logged once per connection, and the MR
/// is invalidated before its next registration. An MR registered for local
/// access only (never advertised) is invalidated that way too.
pub(crate) fn cleanup(conn: Option<&IserConn>, mut task: Task<'_, IserTask>) {
    let index = task.index();
    let completed = task.completed();
    // Under the session's back_lock (bottom halves off): the resources
    // are read without an RCU call of their own.
    let bh = task.bh();
    let Some(td) = task.data() else { return };
    // A command sent on an earlier connection (libiscsi's error handler
    // held it across the reconnect, and releases it now): its MR slot,
    // task word and held buffer were that connection's, torn down with
    // its QP (the MR deregistered, the ring freed). Nothing of it is in
    // this connection's pools; only the mapping is left to drop.
    let conn = conn.filter(|c| c.seq == td.conn_seq);
    // Nothing is reset: from its return the data is out of use, under
    // the back_lock every completion step takes to find the command
    // (`on_command`), and the task's next command starts from
    // `IserTask::reuse` (`TransportOps::cleanup_task`). The mapping is
    // taken out to be dropped last, after the MRs are released: nothing
    // is left to drop in the data.
    // That connection's pools, read once for every step below.
    let res = conn.and_then(|c| c.resources_in(bh));
    // The task's slot, looked up once for the word, the meeting and the MR.
    let slot = res.and_then(|r| r.tasks.for_task(index?));
    if let Some((_, s)) = slot {
        // No response acts on the task from here on (`XmitWord`).
        s.xmit.released();
    }
    let local_only = td.local_only;
    let mrs = td.mrs;
    let mut held = td.deferred;
    if let (Some(c), true, false) = (conn, td.meet, completed) {
        // Armed at the meeting (step 24) and not completed by libiscsi:
        // taken back, so no later event settles it there; a response held
        // there is this command's. A completed command skips this: its
        // response reached libiscsi from the meeting (the word is done) or
        // from the task's rules (which took the word back), and a done
        // word settles nothing until the task's next command arms it.
        if let Some((_, s)) = slot {
            if let MeetTaken::Held(rx, len) = s.meet.take() {
                // (A response the task's rules hold too is a second one,
                // on a connection that is failing: both buffers go back.)
                if let Some((other, _)) = held.replace((rx, len)) {
                    c.return_rx(other);
                }
            }
        }
    }
    let sg = td.sg.take();
    if let (Some(c), Some((rx, _))) = (conn, held) {
        // A response held for this command will never be delivered: its
        // receive buffer goes back to the ring.
        c.return_rx(rx);
    }
    if let (Some(c), [Some(_), _] | [_, Some(_)]) = (conn, mrs) {
        // Only a command that holds an MR can hold a live STag: the rules
        // are asked here, not for the unregistered write.
        let live = td.stags.as_ref().is_some_and(|s| !s.no_live_stags());
        if let Some(res) = res {
            let release = |i: u16| {
                // The task's own slot (`send_command` names no other).
                let slot_mr = match slot {
                    Some((own, s)) if own == i => &s.mr,
                    _ => match res.tasks.slot(i) {
                        Some(s) => &s.mr,
                        None => return,
                    },
                };
                // Settled by its SendInvSE on the MR (step 23): the task's
                // rules never heard of it, and the STag is dead.
                let settled = slot_mr.take_remote_settle() == RemoteSettle::Settled;
                let valid = live && !settled && !slot_mr.tmf_invalidated();
                if valid && !c.qp_flushed() && c.counters.released_valid() == 0 {
                    pr_err!(
                        "STag guarantee broken: a command was released with a valid STag on a live QP (released_valid_stags)\n"
                    );
                }
                slot_mr.release(valid || local_only);
            };
            // The two slots written out (this runs for every command).
            if let Some(i) = mrs[0] {
                release(i);
            }
            if let Some(i) = mrs[1] {
                release(i);
            }
        }
    }
    drop(sg);
}
