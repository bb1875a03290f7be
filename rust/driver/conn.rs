// SPDX-License-Identifier: GPL-2.0
//! One iSER connection (the iSCSI endpoint): the RDMA CM state machine,
//! publishing and revoking its [`Resources`], posting and returning
//! receive buffers, the login window, handing received PDUs to libiscsi,
//! and teardown. The paths above it: `recv.rs` (receive completions),
//! `task.rs` (completion rules), `xmit.rs` (sends).
//!
//! Contexts and synchronisation (spinlocks: [`RxGate`] and
//! `login_caller`, below):
//! - CM events: process context, one at a time (rdma_cm's handler mutex).
//!   The ROUTE_RESOLVED handler creates [`Resources`] and publishes them in
//!   an [`RcuSlot`]; readers (xmit, completion handlers, task cleanup) hold
//!   an RCU guard while they use them and never sleep meanwhile.
//! - Completion handlers: softirq (`IB_POLL_SOFTIRQ`), one CQ per
//!   connection, so they never run concurrently with each other.
//! - iscsid/libiscsi callbacks: process context.
//! - `login_rsp_work` (a delayed work item in the connection): process
//!   context; delivers, with BH off, a Login/Text Response the receive
//!   path held while a `send_pdu` call was in progress or its caller had
//!   not slept since (see [`IserConn::login_window_open`]; `login_caller`,
//!   a plain spinlock, process context only), acts on a HelloReply's
//!   verdict, judges a disconnect that came before its Logout Response
//!   once the grace for that response ends
//!   ([`IserConn::disconnect_judgement_due`]), delivers a Logout Response
//!   held by fault injection, and
//!   reports a connection iscsid did not stop after its successful logout
//!   ([`IserConn::logout_deadline`]); cancelled at stop and disconnect,
//!   and for good when the connection drops it (its first field): a late
//!   run before that finds the connection drained and does nothing.
//! - The bound libiscsi connection is published in a [`ConnSlot`].
//! - Teardown steps run under the connection's teardown mutex (process
//!   context), so device removal (CM handler) and `ep_disconnect` never
//!   interleave. The ROUTE_RESOLVED handler builds and publishes the
//!   resources under it too, and builds nothing once `quiesce` has run.
//!   It is taken inside rdma_cm's handler mutex, so nothing waits for a
//!   CM handler under it (`shutdown` destroys the id after dropping it).
//! - [`RxGate`] (a BH spinlock, any context; innermost but for the
//!   provider's own queue lock): task cleanup reposts a held response's
//!   receive buffer under it, possibly inside libiscsi's back_lock (lock
//!   order: back_lock, then the gate); `quiesce` closes it before the QP is
//!   drained, so no receive is posted behind the drain.
//!
//! Teardown order (`release_resources`, from [`IserConn::shutdown`] or the
//! DEVICE_REMOVAL handler): disconnect, drain the QP (every posted WR
//! completes, so no handler runs afterwards), destroy the QP, drop the DMA
//! mappings of the commands libiscsi still holds (`task::drop_mappings`,
//! under the session's frwd_lock and back_lock, taken inside the teardown
//! mutex), revoke the resources (after an RCU grace period: MRs, receive
//! and send buffers, CQ back to the pool, and last the PD share); then, in
//! `shutdown` only, the CM id (waits for a running CM handler) and the
//! connection.

use super::counters::Counters;
use super::limits::{RX_DATA_LEN, RX_RING};
use super::resources::{Resources, RxDesc, Signal, TmfInFlight};
use crate::proto;
use crate::sys::bhlock::BhSpinLock;
use crate::sys::cm::{CmEvent, CmEventKind, CmHandler, CmId, CmIdRef};
use crate::sys::errno::{
    ECONNABORTED, ECONNREFUSED, ECONNRESET, EHOSTUNREACH, ENOBUFS, ENOTCONN, EPROTO, ETIMEDOUT,
};
use crate::sys::iscsi::{Conn, ConnSlot, IscsiErr, SendPduCaller, SockAddr};
use crate::sys::rcu::{BhOff, RcuGuard, RcuSlot};
use crate::sys::verbs::{LoginToken, SendPayload, SgeList, SlotToken, Wc, WithCqe};
use crate::sys::work::{impl_has_delayed_work, DelayedWork};
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};
use kernel::error::code::{EBUSY, EIO, ENODEV, ERESTARTSYS};
use kernel::prelude::*;
use kernel::sync::{
    new_condvar, new_mutex, new_spinlock, CondVar, CondVarTimeoutResult, Mutex, SpinLock,
};
use kernel::time::msecs_to_jiffies;

/// Words of the orphaned-receive bitmap: one bit per ring entry.
const ORPHAN_WORDS: usize = (RX_RING as usize).div_ceil(64);
/// Address and route resolution timeouts (ms), as ib_iser.
const RESOLVE_TIMEOUT_MS: u32 = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum State {
    Connecting = 0,
    Up = 1,
    Failed = 2,
    Down = 3,
}

/// Whether receive buffers may still be posted from outside the
/// completion handler (task cleanup): open from connect until `quiesce`.
struct RxGate {
    open: bool,
}

/// When `login_rsp_work` first looks whether a returned `send_pdu` call's
/// caller has queued its netlink reply (see
/// [`IserConn::login_window_open`]). What follows the transport's return
/// in that call (scsi_transport_iscsi unlocks a mutex and unicasts a reply
/// of a few dozen bytes) takes microseconds, and the caller then sleeps
/// waiting for the response: the first look, at the next tick (2 ms
/// rounded up to a jiffy), usually finds it asleep. A caller whose CPU was taken away in
/// between (a vCPU the host does not run, a preempted task) is looked at
/// again every `LOGIN_CALLER_LOOK_MS` (rounded up to a jiffy).
const LOGIN_CALLER_FIRST_LOOK_MS: u32 = 2;
/// How often `login_rsp_work` looks again at a caller that has not slept.
const LOGIN_CALLER_LOOK_MS: u32 = 1;
/// How long after a `send_pdu` call returned its response is held at most
/// for a caller that never sleeps (a caller busy elsewhere has long queued
/// its reply): far below iscsiadm's 30 s login timeout.
const LOGIN_CALLER_WAIT_MAX_MS: u64 = 2_000;

/// After a successful Logout's disconnect, how long iscsid (which got the
/// Logout Response and stops the connection for it at once) has before
/// the connection is reported failed anyway, counted from the disconnect:
/// the length of open-iscsi's default logout timeout
/// (`node.conn[0].timeo.logout_timeout`, 15 s, which iscsid counts from
/// its Logout to the response), ample for a live iscsid.
const LOGOUT_STOP_DEADLINE_MS: u32 = 15_000;

/// A disconnect that arrives with a Logout request out and its response
/// not yet handled is judged when the response is handled, or this long
/// after the disconnect if none is. The target sends the response before
/// it disconnects, and the two reach this host by different paths with no
/// order between them (a receive completion in the CQ's softirq, an event
/// in rdma_cm's work): the response, already received, is handled within
/// a softirq run, milliseconds even under TCG. 2 s is far above that and
/// far below open-iscsi's 15 s logout timeout, within which a Logout that
/// goes unanswered is reported to iscsid.
const LOGOUT_RSP_GRACE_MS: u32 = 2_000;

/// The caller of the last `send_pdu` call (`IserConn::login_caller`).
struct LoginCaller {
    /// That call's task; `None` once seen asleep, or none yet.
    task: Option<SendPduCaller>,
    /// When (`params::now_ms`) its response is delivered even if the task
    /// never slept (`LOGIN_CALLER_WAIT_MAX_MS` after the call returned).
    due_ms: u64,
}

/// One iSER connection; the `Ep` of the `iser` transport.
#[pin_data]
pub(crate) struct IserConn {
    /// Delivers a Login or Text Response held by the receive path
    /// (`login_rsp_held`), acts on a HelloReply's verdict, judges a
    /// deferred disconnect (`disconnect_judge_due`), delivers a Logout
    /// Response held by fault injection (`logout_rsp_held`), and runs the
    /// logout deadline (`logout_stop_due`). First field: dropped (cancelled, waiting for a
    /// running handler) before any field the handler reads.
    #[pin]
    login_rsp_work: DelayedWork<IserConn>,
    /// A `send_pdu` call is in progress, or returned and its caller has
    /// not been seen asleep (cleared by `login_rsp_work`): a Login or Text
    /// Response arriving now is held (see `login_window_open`).
    login_window: AtomicBool,
    /// The task of the last `send_pdu` call, until `login_rsp_work` saw it
    /// asleep. A spinlock: `send_pdu_returning` takes it inside an RCU
    /// read-side section, and a sleep there would also make the caller
    /// look asleep before its reply is queued. Process context only
    /// (`send_pdu_returning`, the work, `drop_held_login_rsp`); innermost:
    /// nothing is taken while it is held (it is taken under the netlink
    /// handler's mutexes); a task reference is dropped after the unlock.
    #[pin]
    login_caller: SpinLock<LoginCaller>,
    /// The held response: 0 none; else `HELD_RSP`, `HELD_IN_LOGIN_BUF` if
    /// it is in the login buffer, `HELD_LOGIN_PHASE` if it was parsed as a
    /// login-phase PDU, the ring index at bit 32 and the byte length in the
    /// low 32 bits. Written by the receive path (softirq), taken by
    /// `login_rsp_work`.
    login_rsp_held: AtomicU64,
    /// `State`; read lock-free from any context, written under
    /// `state_lock` (process context) and announced on `state_changed`.
    state: AtomicU8,
    /// The errno `ep_poll` reports in `State::Failed`.
    error: AtomicI32,
    /// Serialises state changes with `ep_poll`'s check-then-wait.
    #[pin]
    state_lock: Mutex<()>,
    /// `ep_poll` waits here for the CM handlers' outcome.
    #[pin]
    state_changed: CondVar,
    /// Serialises this connection's teardown steps (drain, QP destroy,
    /// freeing the resources, taking the CM id) between its CM handler
    /// (device removal) and `ep_disconnect`. Process context; never held
    /// while waiting for a CM handler. Per connection: one device's
    /// teardown never waits for another's.
    #[pin]
    teardown: Mutex<()>,
    cm: RcuSlot<CmId>,
    res: RcuSlot<Resources>,
    pub(crate) iscsi: ConnSlot,
    /// The same connection, for `release_resources` alone: set with
    /// `iscsi` at bind (`bind_iscsi`), cleared only by `release_resources`,
    /// under the teardown mutex, after its walk of the commands. `shutdown`
    /// clears `iscsi` before it takes that mutex, and the DEVICE_REMOVAL
    /// handler may take it first: the walk then has to run there, before
    /// the device goes (case 057's second round), while `shutdown`, which
    /// cannot return before the handler did, keeps the connection alive.
    teardown_iscsi: ConnSlot,
    /// Target invalidates our STags with Send with Invalidate.
    pub(crate) remote_inv: AtomicBool,
    /// The target answered the request to go to full feature phase (the
    /// Login Response with T=1, NSG=3, status 0 arrived): ring buffers
    /// complete in order, so every later one holds a full-feature PDU and
    /// every earlier one a Login Response (of a target that stayed in
    /// operational negotiation, T=0). Softirq only (the CQ handler).
    ring_ffp: AtomicBool,
    ring_posted: AtomicBool,
    drained: AtomicBool,
    /// The QP is flushed (drain returned) or gone: nothing the target
    /// sends can reach any of this connection's STags any more.
    flushed: AtomicBool,
    /// A failure was reported (`conn_error`): receives are dropped.
    failed: AtomicBool,
    /// A Logout Response was handled (the receive path got it, or
    /// `login_rsp_work` took a held one): the target's disconnect that
    /// follows is judged by it (`judge_disconnect`): the end of a logout
    /// (or of a discovery session) when it succeeded, a lost link when it
    /// was refused.
    logged_out: AtomicBool,
    /// That Logout Response said "connection closed successfully": iscsid,
    /// which got it, stops the connection itself, so the disconnect (and
    /// the flush it brings) is not reported to libiscsi as a connection
    /// error (`end_after_logout`).
    logout_ok: AtomicBool,
    /// 0, or when (`params::now_ms`) a connection that ended after a
    /// successful logout is reported failed if iscsid has not stopped it
    /// by then (`logout_deadline`); `LOGOUT_DEADLINE_DONE` once reported.
    /// Armed once, by `end_after_logout`.
    logout_stop_due: AtomicU64,
    /// A Logout request was posted on this connection (`logout_requested`).
    logout_sent: AtomicBool,
    /// 0, or when (`params::now_ms`) a disconnect that arrived before the
    /// Logout Response was handled is judged as lost if no response was
    /// handled by then (`defer_disconnect`); whoever swaps it to 0 (the
    /// receive path handling the response, or `login_rsp_work` at that
    /// time) judges the disconnect (`judge_disconnect`), once.
    disconnect_judge_due: AtomicU64,
    /// Fault injection (`inject_logout_rsp_delay_ms`, case 045): 0, or
    /// `HELD_RSP` plus the ring entry (bits 32..48) and length (bits 0..32)
    /// of a Logout Response the receive path holds, until
    /// `logout_rsp_due` (`params::now_ms`), for `login_rsp_work` to handle.
    logout_rsp_held: AtomicU64,
    logout_rsp_due: AtomicU64,
    /// The iSER Hello exchange (module parameter `hello`): `HELLO_SENT`
    /// plus the iSER-IRD the Hello declared while its HelloReply is
    /// awaited; 0 when none is. Set by the ESTABLISHED handler, taken by
    /// the receive path (softirq) when the reply arrives.
    hello_sent: AtomicU32,
    /// The HelloReply's verdict, for `login_rsp_work` to act on in process
    /// context: 0 none, `HELLO_ACCEPTED`, or the negative errno `ep_poll`
    /// reports.
    hello_verdict: AtomicI32,
    /// The send slot whose Send uses the login buffer (u32::MAX: none).
    login_tx_user: AtomicU32,
    /// Source of command cookies (see `IserTask::cookie`); 0 is never used.
    cookies: AtomicU64,
    /// Names this RDMA connection among all the module made (never 0):
    /// a command records it when it takes a slot of this connection's
    /// pools (`IserTask::conn_seq`).
    pub(crate) seq: u32,
    /// Drops the DMA mappings of this connection's commands that libiscsi
    /// still holds (`task::drop_mappings`, given by the transport, which
    /// owns the task data): `release_resources` calls it once the QP is
    /// gone, before the device can go.
    drop_task_mappings: fn(Conn, u32),
    /// The TMF request on the wire (see `task::on_tmf_response`).
    pub(crate) tmf: TmfInFlight,
    /// Receive ring entries whose held response was dropped with its
    /// command and could not be posted at once (`return_rx`): reposted by
    /// the receive path.
    orphans: [AtomicU64; ORPHAN_WORDS],
    /// Some bit of `orphans` may be set: the receive path looks at the
    /// words only then (set after the bit, taken before the words).
    orphaned: AtomicBool,
    rx_gate: BhSpinLock<RxGate>,
    pub(crate) counters: Counters,
}

/// Source of `IserConn::seq`.
static CONN_SEQ: AtomicU32 = AtomicU32::new(0);

impl IserConn {
    /// Allocates the connection and starts address resolution of `dst`;
    /// `drop_task_mappings` is `task::drop_mappings` (see the field).
    pub(crate) fn connect(
        dst: &SockAddr<'_>,
        drop_task_mappings: fn(Conn, u32),
    ) -> Result<Pin<KBox<IserConn>>> {
        let rx_gate = BhSpinLock::new(RxGate { open: true })?;
        let conn = KBox::pin_init(
            pin_init!(IserConn {
                login_rsp_work <- DelayedWork::new(),
                login_window: AtomicBool::new(false),
                login_caller <- new_spinlock!(LoginCaller { task: None, due_ms: 0 }),
                login_rsp_held: AtomicU64::new(0),
                state: AtomicU8::new(State::Connecting as u8),
                error: AtomicI32::new(0),
                state_lock <- new_mutex!(()),
                state_changed <- new_condvar!(),
                teardown <- new_mutex!(()),
                cm: RcuSlot::new(),
                res: RcuSlot::new(),
                iscsi: ConnSlot::new(),
                teardown_iscsi: ConnSlot::new(),
                remote_inv: AtomicBool::new(false),
                ring_ffp: AtomicBool::new(false),
                ring_posted: AtomicBool::new(false),
                drained: AtomicBool::new(false),
                flushed: AtomicBool::new(false),
                failed: AtomicBool::new(false),
                logged_out: AtomicBool::new(false),
                logout_ok: AtomicBool::new(false),
                logout_stop_due: AtomicU64::new(0),
                logout_sent: AtomicBool::new(false),
                disconnect_judge_due: AtomicU64::new(0),
                logout_rsp_held: AtomicU64::new(0),
                logout_rsp_due: AtomicU64::new(0),
                hello_sent: AtomicU32::new(0),
                hello_verdict: AtomicI32::new(0),
                login_tx_user: AtomicU32::new(u32::MAX),
                cookies: AtomicU64::new(0),
                seq: CONN_SEQ.fetch_add(1, Ordering::Relaxed).wrapping_add(1).max(1),
                drop_task_mappings,
                tmf: TmfInFlight::new(),
                orphans: [const { AtomicU64::new(0) }; ORPHAN_WORDS],
                orphaned: AtomicBool::new(false),
                rx_gate,
                counters: Counters::new(),
            }),
            GFP_KERNEL,
        )?;
        // The connection is pinned in its box and outlives the id:
        // `shutdown` destroys the id before the box is dropped (or the
        // DEVICE_REMOVAL handler hands it to rdma_cm, which destroys it
        // before the handler's caller returns), and so does dropping the
        // box on an error below (its `cm` slot drops the id).
        let id =
            // SAFETY: `conn` outlives the id (above).
            unsafe { CmId::new::<IserConn>(&*conn) }?;
        let id = KBox::new(id, GFP_KERNEL)?;
        // Published before resolution starts: the CM handlers that follow
        // (ROUTE_RESOLVED creates the QP, DEVICE_REMOVAL destroys it
        // through the published id) always find it. `connect` returns
        // the connection to iscsid only after this, so nothing takes the
        // id from the slot while `id_ref` is used.
        let id_ref = id.as_ref();
        conn.cm.set(id)?;
        id_ref.resolve_addr(dst, RESOLVE_TIMEOUT_MS)?;
        super::counters::live_conn(1);
        Ok(conn)
    }

    fn state(&self) -> State {
        match self.state.load(Ordering::Acquire) {
            0 => State::Connecting,
            1 => State::Up,
            2 => State::Failed,
            _ => State::Down,
        }
    }

    /// Moves to `s` (with `err` for `State::Failed`) and wakes `ep_poll`.
    /// Process context (CM handlers, `quiesce`).
    fn set_state(&self, s: State, err: Option<Error>) {
        let guard = self.state_lock.lock();
        if let Some(e) = err {
            self.error.store(e.to_errno(), Ordering::Relaxed);
        }
        self.state.store(s as u8, Ordering::Release);
        drop(guard);
        self.state_changed.notify_all();
    }

    fn fail(&self, err: Error) {
        self.set_state(State::Failed, Some(err));
    }

    /// The connection is ready for login: Up, unless it failed or went
    /// down meanwhile (a DISCONNECTED while the Hello was out). Process
    /// context (the ESTABLISHED handler, or `login_rsp_work` after the
    /// HelloReply).
    fn connected(&self) {
        let guard = self.state_lock.lock();
        if self.state() != State::Connecting {
            return;
        }
        self.state.store(State::Up as u8, Ordering::Release);
        drop(guard);
        self.state_changed.notify_all();
        super::counters::connect_established();
        pr_info!(
            "connected (target invalidates STags: {})\n",
            if self.remote_inv.load(Ordering::Acquire) {
                "yes"
            } else {
                "no, locally"
            }
        );
    }

    /// ESTABLISHED with the `hello` parameter on: posts the login receive
    /// buffer for the HelloReply, then sends the Hello (iSER §5.1.3: the
    /// initiator's first iSER message, before the Login Request) from the
    /// login send buffer, declaring the IRD the connection was set up
    /// with (the `responder_resources` of `setup`'s connect). Returns that
    /// IRD. Process context (CM handler); nothing else sends yet.
    fn send_hello(&self) -> Result<u16> {
        use proto::iser_hdr::{Hello, ISER_HDR_LEN, ISER_PROTOCOL_VERSION};
        let res = self.res.get().ok_or_else(ENOTCONN)?;
        let hello = Hello {
            max_ver: ISER_PROTOCOL_VERSION,
            min_ver: ISER_PROTOCOL_VERSION,
            ird: u16::from(res.dev.max_qp_rd_atom()),
        };
        let mut msg = [0u8; ISER_HDR_LEN];
        hello.encode(&mut msg);
        // Tokens dropped on the error paths release their slots.
        let slot = res.tx.slots.claim().ok_or_else(ENOBUFS)?;
        let mut ltok = res.login_tx.claim().ok_or_else(ENOBUFS)?;
        let sges = res.login_tx.write(&mut ltok, msg.len(), res.lkey, |buf| {
            buf.copy_from_slice(&msg)
        });
        self.hello_sent
            .store(HELLO_SENT | u32::from(hello.ird), Ordering::Release);
        res.qp.post_recv(res.login_rx.cqe(), res.login_rx.sges())?;
        self.post_login_send(&res, slot, &sges, ltok)?;
        Ok(hello.ird)
    }

    /// Posts the signaled Send of the login send buffer (`sges`, written
    /// through `ltok`) with header slot `slot`, and records that the
    /// buffer is in use until that Send completes or its request is
    /// answered. On error nothing was posted: both tokens drop and release
    /// the slot and the buffer.
    pub(crate) fn post_login_send(
        &self,
        res: &Resources,
        slot: SlotToken<'_>,
        sges: &SgeList,
        ltok: LoginToken<'_>,
    ) -> Result {
        let idx = slot.index();
        self.login_tx_posted(idx);
        if let Err(e) = res.tx.post(
            res.qp,
            &[],
            &[],
            slot,
            SendPayload::Sges(sges.as_slice()),
            Signal::Always,
            None,
            &self.counters,
        ) {
            self.login_tx_done(idx);
            return Err(e.into());
        }
        res.login_tx.posted(ltok);
        Ok(())
    }

    /// Whether the login buffer's next receive is the awaited HelloReply.
    pub(crate) fn awaiting_hello_reply(&self) -> bool {
        self.hello_sent.load(Ordering::Acquire) != 0
    }

    /// The HelloReply arrived in the login buffer (receive path, softirq).
    /// The protocol core checks it against our Hello (iSER §5.1.3, §9.4):
    /// R bit, CurVer within our version range, iSER-ORD not 0 and not
    /// above our iSER-IRD. We keep the IRD we declared (the draft lets the
    /// initiator lower it to the target's ORD; an unused responder
    /// resource costs nothing). `login_rsp_work` acts on the verdict.
    pub(crate) fn on_hello_reply(&self, msg: &[u8]) {
        use proto::iser_hdr::{negotiate_hello_reply, Hello, HelloReply, ISER_PROTOCOL_VERSION};
        let sent = self.hello_sent.swap(0, Ordering::AcqRel);
        if sent == 0 {
            return;
        }
        self.login_tx_answered();
        let hello = Hello {
            max_ver: ISER_PROTOCOL_VERSION,
            min_ver: ISER_PROTOCOL_VERSION,
            ird: (sent & 0xffff) as u16,
        };
        let verdict =
            match HelloReply::decode(msg).and_then(|reply| negotiate_hello_reply(&hello, &reply)) {
                Ok(outcome) => {
                    pr_info!(
                    "iSER HelloReply accepted: version {}, target iSER-ORD {} (our iSER-IRD {})\n",
                    outcome.version,
                    outcome.ird,
                    hello.ird
                );
                    HELLO_ACCEPTED
                }
                Err(e) => {
                    self.counters.proto_error();
                    pr_warn!("iSER HelloReply refused: {:?}\n", e);
                    if e == proto::ProtoError::HelloRejected {
                        ECONNREFUSED().to_errno()
                    } else {
                        EPROTO().to_errno()
                    }
                }
            };
        self.hello_verdict.store(verdict, Ordering::Release);
        self.login_rsp_work.schedule(0);
    }

    /// Acts on the HelloReply's verdict (`login_rsp_work`, process
    /// context): the connection is up, or it failed with the errno
    /// `ep_poll` reports to iscsid (which then disconnects it).
    pub(crate) fn finish_hello(&self) {
        match self.hello_verdict.swap(0, Ordering::AcqRel) {
            0 => {}
            HELLO_ACCEPTED => self.connected(),
            errno => {
                if self.state() == State::Connecting {
                    self.fail(Error::from_errno(errno));
                }
            }
        }
    }

    /// The RDMA resources, while published: an RCU read-side section for
    /// as long as the guard lives (never sleep holding it).
    pub(crate) fn resources(&self) -> Option<RcuGuard<'_, Resources>> {
        self.res.get()
    }

    /// The RDMA resources, while published, read inside the
    /// bottom-half-disabled region `bh` (a completion handler's softirq,
    /// a libiscsi callback under its lock): no RCU call of its own.
    pub(crate) fn resources_in<'a>(&'a self, bh: BhOff<'a>) -> Option<&'a Resources> {
        self.res.get_bh(bh)
    }

    /// `ep_poll`: waits up to `timeout_ms` for the outcome of the
    /// connection attempt (woken by `set_state`); Ok(false) if there is
    /// none yet. Interrupted by a signal: ERESTARTSYS, as ib_iser.
    pub(crate) fn poll(&self, timeout_ms: u32) -> Result<bool> {
        let mut left = msecs_to_jiffies(timeout_ms);
        let mut guard = self.state_lock.lock();
        loop {
            match self.state() {
                State::Up => return Ok(true),
                State::Failed => return Err(Error::from_errno(self.error.load(Ordering::Relaxed))),
                State::Down => return Err(ENOTCONN()),
                State::Connecting => {}
            }
            if left == 0 {
                return Ok(false);
            }
            left = match self
                .state_changed
                .wait_interruptible_timeout(&mut guard, left)
            {
                CondVarTimeoutResult::Timeout => 0,
                CondVarTimeoutResult::Woken { jiffies } => jiffies,
                CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
            };
        }
    }

    /// Whether the QP is flushed or gone (`quiesce` finished draining).
    pub(crate) fn qp_flushed(&self) -> bool {
        self.flushed.load(Ordering::Acquire)
    }

    /// Reports a connection failure to libiscsi/iscsid (any context).
    /// From here on nothing this connection receives reaches libiscsi: a
    /// response that arrives behind the PDU that broke the rules (in the
    /// same completion batch, before the QP is flushed) would otherwise
    /// complete its command, perhaps with GOOD status for data that never
    /// came. libiscsi fails the open commands instead and the midlayer
    /// retries them on the next connection.
    /// With `debug_level` >= 2 the log names the line that failed it.
    #[track_caller]
    pub(crate) fn conn_error(&self, err: IscsiErr) {
        let at = core::panic::Location::caller();
        iser_info!(
            "connection failed ({}) at {}:{}\n",
            err,
            at.file(),
            at.line()
        );
        self.failed.store(true, Ordering::Release);
        if let Some(c) = self.iscsi.get() {
            c.failure(err);
        }
    }

    /// `conn_error` from inside `xmit_task` (libiscsi holds the session's
    /// frwd_lock there, which `conn_error` would take again).
    #[track_caller]
    pub(crate) fn fail_in_xmit<D>(&self, task: &crate::sys::iscsi::Task<'_, D>, err: IscsiErr) {
        let at = core::panic::Location::caller();
        iser_info!(
            "connection failed in xmit ({}) at {}:{}\n",
            err,
            at.file(),
            at.line()
        );
        self.failed.store(true, Ordering::Release);
        task.fail_conn_in_xmit(err);
    }

    /// A completion handler's first step (softirq): true if the WR did not
    /// succeed. Any status but a flush is counted (`err_completion`),
    /// logged naming `what` failed, and fails the connection. A flush is
    /// the connection going away when it was torn down (`quiesce`), failed
    /// or lost; otherwise the QP went to error on its own and fails the
    /// connection here (`unasked_flush`).
    #[inline]
    pub(crate) fn wc_failed(&self, wc: &Wc<'_>, what: &str) -> bool {
        if wc.ok() {
            return false;
        }
        self.wc_failed_slow(wc, what);
        true
    }

    /// `wc_failed` for a completion that did not succeed (out of line: every
    /// completion takes the check above, few get here).
    #[cold]
    fn wc_failed_slow(&self, wc: &Wc<'_>, what: &str) {
        if !wc.flushed() {
            self.counters.wc_error();
            pr_warn!("{} failed, status {}\n", what, wc.status());
            self.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        } else {
            self.unasked_flush();
        }
    }

    /// A flush on a connection that is up, neither failed nor torn down:
    /// the QP went to error with no error completion of ours and, so far,
    /// no CM event. rxe does that when it refuses the target's access (a
    /// bad STag: it NAKs and moves our QP to error, and no CM event ever
    /// follows), and it reports a refused local operation (REG_MR,
    /// LOCAL_INV) the same way; on iWARP the target closing the connection
    /// flushes the QP before the DISCONNECTED event arrives. Left alone,
    /// the first two leave the connection dead until a NOP-Out or a SCSI
    /// command times out (case 061, `--stay-on-error`). As nvme-rdma does,
    /// the first such flush fails the connection; the rest find it failed.
    /// While Connecting with the iSER Hello out (the QP is connected, the
    /// login not begun: case 070, `--hello-reply probe`), the first flush
    /// fails the attempt the way a refused HelloReply does
    /// (`hello_verdict`, acted on by `login_rsp_work` in process context),
    /// so `ep_poll` reports it at once instead of at the login timeout.
    /// Softirq.
    fn unasked_flush(&self) {
        if self.drained.load(Ordering::Acquire) {
            return;
        }
        if self.state() == State::Connecting {
            // Once: the Hello is no longer awaited (a HelloReply that
            // already arrived has its verdict stored and acted on).
            if self.hello_sent.swap(0, Ordering::AcqRel) != 0 {
                pr_warn!(
                    "QP in error state while the iSER Hello was out: connection attempt failed\n"
                );
                self.hello_verdict
                    .store(ECONNRESET().to_errno(), Ordering::Release);
                self.login_rsp_work.schedule(0);
            }
            return;
        }
        if self.state() != State::Up || self.failed.load(Ordering::Acquire) {
            return;
        }
        if self.end_after_logout() {
            return;
        }
        // Once per connection: `conn_error` marks it failed.
        if !self.logged_out.load(Ordering::Acquire) {
            pr_warn!("QP in error state on a live connection (a flush before any teardown): connection failed\n");
        }
        self.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
    }

    pub(crate) fn proto_error(&self, e: proto::ProtoError) {
        self.counters.proto_error();
        pr_warn!("protocol error from target: {:?}\n", e);
        self.conn_error(e.iscsi_err().code() as IscsiErr);
    }

    /// ROUTE_RESOLVED: allocates and publishes the resources (the QP
    /// last, `Resources::new`), then connects.
    fn setup(&self, id: CmIdRef) -> Result {
        let delay = crate::sys::params::param_inject_setup_delay_ms();
        if delay > 0 {
            // Fault injection (case 053). Process context: rdma_cm's
            // handler work, holding only its handler mutex.
            crate::sys::params::msleep(delay);
        }
        // Under the teardown lock, against `release_resources`: iscsid's
        // ep_disconnect (its login timeout expiring) may run while this
        // handler does (case 053). Either the resources are built,
        // published and connected before `quiesce` takes the lock, and
        // `release_resources` tears them down; or `quiesce` came first and
        // nothing is built. Unlocked, a QP created after `release_resources`
        // found nothing to destroy outlived the connection, and a QP it did
        // destroy mid-build was published anyway.
        let _teardown = self.teardown.lock();
        if self.drained.load(Ordering::Acquire) {
            pr_info!("setup abandoned: the connection is being disconnected\n");
            return Err(ECONNABORTED());
        }
        if self.res.get().is_some() {
            // One ROUTE_RESOLVED per id; `res.set` below cannot fail then.
            return Err(EBUSY);
        }
        let res = Resources::new(id, self)?;
        let (kib, largest) = res.memory();
        let (dev, inline_hdrs, sq_depth) = (res.dev, res.inline_hdrs, res.sq_depth);
        let rx_syncs = res.rx_needs_sync();
        self.res.set(res)?;
        super::counters::live_qp(1);
        iser_info!(
            "setup: PD, CQ of {} entries, QP with {} send and {} receive WRs (inline headers: {}), {} MRs of {} pages, {} receive buffers of {} bytes; buffers and descriptors {} KiB, largest contiguous allocation {} bytes, DMA syncs of receive buffers: {}\n",
            super::limits::CQ_ENTRIES,
            sq_depth,
            super::limits::MAX_RECV_WR,
            if inline_hdrs { "yes" } else { "no" },
            super::limits::MRS,
            super::limits::max_pages(),
            RX_RING + 1,
            super::limits::RX_BUF_LEN,
            kib,
            largest,
            if rx_syncs { "yes" } else { "no" }
        );
        // Ask for Send with Invalidate: the target then invalidates our
        // STags with its response, saving a local invalidation per command.
        let hdr = proto::cm_private::initiator_request(true);
        id.connect(&hdr, dev.max_qp_rd_atom())
    }

    /// A fresh command cookie, never 0.
    pub(crate) fn next_cookie(&self) -> u64 {
        self.cookies.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Posts the login receive buffer before a login request, until the
    /// receive ring is posted (with the first request to go to full
    /// feature phase). A target may answer that request with T=0 (RFC 7143
    /// §11.13.1 lets it stay in operational negotiation; case 069): its
    /// answer fills the login buffer, posted first, and the answers to the
    /// requests that follow land in the ring (`rx_done` parses ring
    /// buffers as Login Responses until the final one).
    pub(crate) fn post_login_rx(&self) -> Result {
        // Once the ring is posted it takes every Login Response (the
        // receive queue completes in order): a login buffer posted behind
        // it would later receive a full-feature PDU as a login PDU.
        if self.ring_posted.load(Ordering::Acquire) {
            return Ok(());
        }
        let res = self.res.get().ok_or_else(ENOTCONN)?;
        res.qp.post_recv(res.login_rx.cqe(), res.login_rx.sges())
    }

    /// Posts the full-feature receive ring (once, with the final login
    /// request, so that nothing the target sends after the login response
    /// finds the queue empty).
    pub(crate) fn post_rx_ring(&self) -> Result {
        if self.ring_posted.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let res = self.res.get().ok_or_else(ENOTCONN)?;
        for d in res.rx.iter() {
            res.qp.post_recv(d.cqe(), d.sges())?;
        }
        self.counters.rx_posted(res.rx.len() as u64);
        Ok(())
    }

    /// The Send in tx slot `idx` uses the login buffer.
    pub(crate) fn login_tx_posted(&self, idx: u32) {
        self.login_tx_user.store(idx, Ordering::Release);
    }

    /// Tx slot `idx` completed: release the login buffer if it used it.
    pub(crate) fn login_tx_done(&self, idx: u32) {
        if self
            .login_tx_user
            .compare_exchange(idx, u32::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            if let Some(res) = self.res.get() {
                res.login_tx.release();
            }
        }
    }

    /// A Login or Text Response arrived: the target holds the whole
    /// request that used the login buffer, so the buffer is free for the
    /// next request even while that request's Send completion is still on
    /// its way. Login and Text are strictly request/response on libiscsi's
    /// login task, and rxe handles the ACK of a request and the response
    /// to it in different tasks, in either order: waiting for the
    /// completion let the next request find the buffer held, and libiscsi
    /// cannot retry a refused management PDU (a discovery stalled for
    /// 30 s and iscsiadm then crashed). A retransmission of the old
    /// request reading the reused buffer is a duplicate the target's RC
    /// responder discards (IBA 9.9.2: a duplicate Send is acknowledged,
    /// not delivered again).
    pub(crate) fn login_tx_answered(&self) {
        if self.login_tx_user.swap(u32::MAX, Ordering::AcqRel) != u32::MAX {
            if let Some(res) = self.res.get() {
                res.login_tx.release();
            }
        }
    }

    /// A `send_pdu` call begins: its Login or Text request goes out during
    /// the call, and the response must not reach libiscsi before the
    /// call's netlink reply reached its caller. iscsiadm's discovery (open-
    /// iscsi 2.1.8, `__kipc_call`) reads the Text Response it finds before
    /// that reply into a stash its poll loop never looks at, waits 30 s,
    /// gives up, and on reconnecting crashes on the stale stash (open-iscsi
    /// issue #255). So a Login or Text Response arriving while the call is
    /// in progress, or after it returned but before its caller slept
    /// (which it does only after scsi_transport_iscsi queued the reply), is
    /// held and delivered by `login_rsp_work` once the caller was seen
    /// asleep (or `LOGIN_CALLER_WAIT_MAX_MS` passed). A time margin alone
    /// lost that race when the caller's vCPU was not run for longer (case
    /// 069 with `inject_send_pdu_busy_ms`; a CI run). Process context
    /// (scsi_transport_iscsi's netlink handler).
    pub(crate) fn login_window_open(&self) {
        self.login_window.store(true, Ordering::SeqCst);
    }

    /// The `send_pdu` call of `caller` returns: the window closes when
    /// `login_rsp_work` finds `caller` asleep, looking first
    /// `LOGIN_CALLER_FIRST_LOOK_MS` from now, and delivers what it holds.
    pub(crate) fn login_window_closing(&self, caller: SendPduCaller) {
        let due_ms = crate::sys::params::now_ms() + LOGIN_CALLER_WAIT_MAX_MS;
        let old = core::mem::replace(
            &mut *self.login_caller.lock(),
            LoginCaller {
                task: Some(caller),
                due_ms,
            },
        );
        // The previous caller's reference drops outside the lock.
        drop(old);
        self.login_rsp_work.schedule(LOGIN_CALLER_FIRST_LOOK_MS);
    }

    /// Whether the last `send_pdu` call's caller has slept since the call
    /// returned (so its netlink reply is queued ahead of anything delivered
    /// now), or was waited for long enough; if not, `login_rsp_work` is
    /// scheduled to look again. Process context (`login_rsp_work`).
    pub(crate) fn login_caller_done(&self) -> bool {
        let mut guard = self.login_caller.lock();
        let waited = match &guard.task {
            None => return true,
            Some(t) => !t.has_slept() && crate::sys::params::now_ms() < guard.due_ms,
        };
        if waited {
            drop(guard);
            self.counters.login_caller_look();
            self.login_rsp_work.schedule(LOGIN_CALLER_LOOK_MS);
            return false;
        }
        let task = guard.task.take();
        drop(guard);
        drop(task);
        true
    }

    /// The connection stops or goes away: a held Login, Text or Logout
    /// Response is dropped, not delivered (process context; waits for a running
    /// delivery).
    pub(crate) fn drop_held_login_rsp(&self) {
        self.login_rsp_work.cancel_sync();
        let task = self.login_caller.lock().task.take();
        drop(task);
        self.login_window.store(false, Ordering::SeqCst);
        self.login_rsp_held.store(0, Ordering::SeqCst);
        self.logout_rsp_held.store(0, Ordering::SeqCst);
    }

    /// Receive path (softirq): holds the Login or Text Response in `desc`
    /// (`len` bytes) if the window is open; false: deliver it now.
    /// `login_phase`: it was parsed as a login-phase PDU (the final Login
    /// Response has set `ring_ffp` by the time it is delivered).
    pub(crate) fn hold_login_rsp(
        &self,
        desc: &WithCqe<RxDesc>,
        len: u32,
        login_phase: bool,
    ) -> bool {
        if !self.login_window.load(Ordering::SeqCst) {
            return false;
        }
        self.counters.login_rsp_held();
        let held = HELD_RSP
            | if desc.login { HELD_IN_LOGIN_BUF } else { 0 }
            | if login_phase { HELD_LOGIN_PHASE } else { 0 }
            | (u64::from(desc.index) << 32)
            | u64::from(len);
        self.login_rsp_held.store(held, Ordering::SeqCst);
        // The work may have closed the window (and found nothing held)
        // between the check above and the store: then it runs again.
        if !self.login_window.load(Ordering::SeqCst) {
            self.login_rsp_work.schedule(0);
        }
        true
    }

    /// Takes the held Login or Text Response, closing the login window
    /// (`login_rsp_work`, process context).
    pub(crate) fn take_held_login_rsp(&self) -> Option<HeldLoginRsp> {
        self.login_window.store(false, Ordering::SeqCst);
        let held = self.login_rsp_held.swap(0, Ordering::SeqCst);
        if held & HELD_RSP == 0 {
            return None;
        }
        Some(HeldLoginRsp {
            in_login_buf: held & HELD_IN_LOGIN_BUF != 0,
            login_phase: held & HELD_LOGIN_PHASE != 0,
            index: ((held >> 32) & 0xffff) as u16,
            len: (held & 0xffff_ffff) as u32,
        })
    }

    /// A failure was reported (`conn_error`): nothing received is
    /// delivered any more.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The target answered the request to go to full feature phase: every
    /// later ring buffer holds a full-feature PDU.
    pub(crate) fn ring_in_full_feature(&self) -> bool {
        self.ring_ffp.load(Ordering::Acquire)
    }

    /// The final Login Response arrived (receive path, softirq).
    pub(crate) fn ring_enters_full_feature(&self) {
        self.ring_ffp.store(true, Ordering::Release);
    }

    /// A Logout Response arrived (`ok`: its response is "connection closed
    /// successfully"): the disconnect that follows is expected.
    pub(crate) fn logout_answered(&self, ok: bool) {
        if ok {
            self.logout_ok.store(true, Ordering::Release);
        }
        // SeqCst, against `defer_disconnect`'s store and look (one of the
        // two sees the other).
        self.logged_out.store(true, Ordering::SeqCst);
    }

    /// A Logout request is about to be posted (`xmit_mgmt`, process
    /// context): a disconnect from now on may be the end of that logout.
    pub(crate) fn logout_requested(&self) {
        self.logout_sent.store(true, Ordering::SeqCst);
    }

    /// The Logout Response was handed to libiscsi (receive path, or
    /// `login_rsp_work` for a held one): a disconnect that came first and
    /// waits for it is judged now.
    pub(crate) fn logout_rsp_delivered(&self) {
        if self.disconnect_judge_due.swap(0, Ordering::SeqCst) != 0 {
            self.judge_disconnect();
        }
    }

    /// The disconnect (CM handler): true if a Logout request is out and its
    /// response not yet handled, so the disconnect is judged later (by
    /// `logout_rsp_delivered`, or by `disconnect_judgement_due` after
    /// `LOGOUT_RSP_GRACE_MS`); false: judge it now (also when the response
    /// was handled meanwhile).
    fn defer_disconnect(&self) -> bool {
        if !self.logout_sent.load(Ordering::SeqCst) || self.logged_out.load(Ordering::SeqCst) {
            return false;
        }
        let due = crate::sys::params::now_ms() + u64::from(LOGOUT_RSP_GRACE_MS);
        self.disconnect_judge_due.store(due, Ordering::SeqCst);
        // The response may have been handled between the look above and
        // the store, finding nothing to judge: take the judgement back
        // (the receive path may have taken it already, and judges).
        if self.logged_out.load(Ordering::SeqCst) {
            return self.disconnect_judge_due.swap(0, Ordering::SeqCst) == 0;
        }
        // The earliest of the work's times wins (`DelayedWork::schedule`,
        // best effort: a run may come late by a jiffy or early): it runs by
        // the grace's end, and a run before it schedules again for the rest.
        self.login_rsp_work.schedule(LOGOUT_RSP_GRACE_MS);
        true
    }

    /// Whether `due` (`params::now_ms`) has come, for a step of
    /// `login_rsp_work`; if not, the work is scheduled again for the rest
    /// (at most `max_ms`).
    fn work_due(&self, due: u64, max_ms: u32) -> bool {
        let now = crate::sys::params::now_ms();
        if now >= due {
            return true;
        }
        self.login_rsp_work
            .schedule((due - now).min(u64::from(max_ms)) as u32);
        false
    }

    /// `login_rsp_work`: a deferred disconnect whose Logout Response was not
    /// handled within `LOGOUT_RSP_GRACE_MS` is judged (as a lost
    /// connection). The work may run earlier for other reasons: then it is
    /// scheduled again for the rest.
    pub(crate) fn disconnect_judgement_due(&self) {
        let due = self.disconnect_judge_due.load(Ordering::SeqCst);
        if due == 0 {
            return;
        }
        if !self.work_due(due, LOGOUT_RSP_GRACE_MS) {
            return;
        }
        if self
            .disconnect_judge_due
            .compare_exchange(due, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            self.judge_disconnect();
        }
    }

    /// A disconnect after a Logout, judged once (deferred, or at once when
    /// its response was handled first): the end of a successful logout,
    /// or a lost connection (the Logout unanswered, or refused). Nothing
    /// is reported once `stop_conn` stopped the connection. Softirq, or
    /// process context (`login_rsp_work`, the CM handler).
    fn judge_disconnect(&self) {
        if self.drained.load(Ordering::Acquire) {
            return;
        }
        if self.end_after_logout() {
            pr_info!("disconnected after logout\n");
        } else {
            pr_warn!(
                "connection lost (disconnected, the Logout {})\n",
                if self.logged_out.load(Ordering::Acquire) {
                    "refused"
                } else {
                    "unanswered"
                }
            );
            self.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        }
    }

    /// Fault injection (`inject_logout_rsp_delay_ms`, case 045; receive
    /// path, softirq): holds the Logout Response in ring entry `index`
    /// (`len` bytes) for that many ms if set; false: handle it now.
    pub(crate) fn hold_logout_rsp(&self, index: u16, len: u32) -> bool {
        let ms = crate::sys::params::param_inject_logout_rsp_delay_ms();
        if ms == 0 || self.drained.load(Ordering::Acquire) {
            return false;
        }
        self.logout_rsp_due.store(
            crate::sys::params::now_ms() + u64::from(ms),
            Ordering::SeqCst,
        );
        self.logout_rsp_held.store(
            HELD_RSP | (u64::from(index) << 32) | u64::from(len),
            Ordering::SeqCst,
        );
        pr_info!(
            "test: Logout Response held {} ms (inject_logout_rsp_delay_ms)\n",
            ms
        );
        self.login_rsp_work.schedule(ms);
        true
    }

    /// The held Logout Response's ring entry and length, once its time
    /// came (`login_rsp_work`, process context); not yet: the work is
    /// scheduled again for the rest.
    pub(crate) fn take_held_logout_rsp(&self) -> Option<(u16, u32)> {
        if self.logout_rsp_held.load(Ordering::SeqCst) == 0 {
            return None;
        }
        if !self.work_due(self.logout_rsp_due.load(Ordering::SeqCst), u32::MAX) {
            return None;
        }
        let held = self.logout_rsp_held.swap(0, Ordering::SeqCst);
        // Stopped meanwhile (`stop_conn`): dropped, as the receive path
        // would drop it; the ring entry goes with the resources.
        if held & HELD_RSP == 0 || self.drained.load(Ordering::Acquire) {
            return None;
        }
        Some((((held >> 32) & 0xffff) as u16, (held & 0xffff_ffff) as u32))
    }

    /// The QP's end after a successful logout (the target's disconnect,
    /// the flush it brings): nothing more is delivered, and no connection
    /// error goes to libiscsi, whose logout iscsid completes by stopping
    /// the connection (libiscsi would log "detected conn error" for every
    /// such logout; case 045 counts them). Arms the logout deadline
    /// (`logout_deadline`), once. Returns false when the logout was not
    /// answered with success: a failure to report, then. Any context.
    fn end_after_logout(&self) -> bool {
        if !self.logout_ok.load(Ordering::Acquire) {
            return false;
        }
        self.failed.store(true, Ordering::Release);
        let due = crate::sys::params::now_ms() + u64::from(LOGOUT_STOP_DEADLINE_MS);
        if self
            .logout_stop_due
            .compare_exchange(0, due, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.login_rsp_work.schedule(LOGOUT_STOP_DEADLINE_MS);
        }
        true
    }

    /// The logout deadline (`login_rsp_work`, process context): a
    /// connection whose successful logout ended it and that iscsid has not
    /// stopped (`stop_conn` drains it) `LOGOUT_STOP_DEADLINE_MS` later is
    /// reported failed, so that the kernel stops it without iscsid
    /// (scsi_transport_iscsi's cleanup work disconnects the endpoint, which
    /// frees the QP and the MRs) instead of keeping it for good when
    /// iscsid died between its Logout and acting on the response (case
    /// 045). The work item may run earlier for a Login or Text Response's
    /// window (a `send_pdu` of the Logout itself schedules it): then it is
    /// scheduled again for the rest.
    pub(crate) fn logout_deadline(&self) {
        let due = self.logout_stop_due.load(Ordering::Acquire);
        if due == 0 || due == LOGOUT_DEADLINE_DONE || self.drained.load(Ordering::Acquire) {
            return;
        }
        if !self.work_due(due, LOGOUT_STOP_DEADLINE_MS) {
            return;
        }
        // Never armed again: a late disconnect event finds it done.
        if self
            .logout_stop_due
            .compare_exchange(
                due,
                LOGOUT_DEADLINE_DONE,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return;
        }
        pr_warn!(
            "connection not stopped {} s after its successful logout (iscsid gone?): reported failed\n",
            LOGOUT_STOP_DEADLINE_MS / 1000
        );
        self.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
    }

    /// Receive ring entry `rx` held a response for a command that was
    /// released before the response could be delivered (task cleanup: any
    /// context, also under libiscsi's back_lock). It goes back to the ring
    /// at once while the gate is open, so the ring is whole again even if
    /// nothing more arrives (the eh thread releases an aborted command
    /// after the last receive). The gate closes before the QP is drained:
    /// a buffer posted here is flushed by that drain like every other.
    /// After a reported failure nothing is reposted (the connection is
    /// going away); a post that fails leaves it to the receive path.
    pub(crate) fn return_rx(&self, rx: u16) {
        self.counters.rx_returned();
        let post_failed = self.rx_gate.with(|gate| {
            if !gate.open || self.failed.load(Ordering::Acquire) {
                return false;
            }
            let Some(res) = self.res.get() else {
                return false;
            };
            res.rx
                .get(rx as usize)
                .is_some_and(|desc| self.post_rx(&res, desc).is_err())
        });
        if post_failed {
            self.counters.rx_orphaned();
            self.orphan_rx(rx);
        }
    }

    /// Ring entry `rx` is to be reposted by the next receive completion,
    /// where reposting is safe from teardown (after a reported failure
    /// nothing is reposted, and a drained QP completes nothing).
    fn orphan_rx(&self, rx: u16) {
        let (w, b) = (rx as usize / 64, rx as usize % 64);
        if let Some(word) = self.orphans.get(w) {
            word.fetch_or(1 << b, Ordering::AcqRel);
            self.orphaned.store(true, Ordering::Release);
        }
    }

    /// Reposts the orphaned ring entries (receive path, softirq).
    pub(crate) fn repost_orphans(&self) {
        // A plain load on the common path: nothing orphaned.
        if !self.orphaned.load(Ordering::Acquire) || !self.orphaned.swap(false, Ordering::AcqRel) {
            return;
        }
        for (w, word) in self.orphans.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(res) = self.res.get() {
                    if let Some(desc) = res.rx.get(w * 64 + b) {
                        self.repost(desc);
                    }
                }
            }
        }
    }

    /// Posts ring buffer `desc`, counted either way (`rx_posted` or
    /// `err_post`); the caller decides what a failure means.
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    fn post_rx(&self, res: &Resources, desc: &WithCqe<RxDesc>) -> Result {
        let r = res.qp.post_recv(desc.cqe(), desc.sges());
        match r {
            Ok(()) => self.counters.rx_posted(1),
            Err(_) => self.counters.post_error(),
        }
        r
    }

    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    fn repost(&self, desc: &WithCqe<RxDesc>) {
        if let Some(res) = self.res.get() {
            self.repost_in(&res, desc);
        }
    }

    /// `repost` with the resources the caller read (in its RCU section or
    /// its bottom-half-off region).
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    fn repost_in(&self, res: &Resources, desc: &WithCqe<RxDesc>) {
        if desc.login {
            return;
        }
        if self.post_rx(res, desc).is_err() {
            self.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        }
    }

    /// Hands a received PDU to libiscsi and reposts its buffer.
    pub(crate) fn complete(
        &self,
        bh: BhOff<'_>,
        conn: Conn,
        desc: &WithCqe<RxDesc>,
        msg: &[u8],
        pdu: &proto::bhs::TargetPdu<'_>,
    ) {
        let hdr_len = proto::bhs::BHS_LEN + pdu.ahs.len();
        let start = proto::iser_hdr::ISER_HDR_LEN;
        let hdr = msg.get(start..start + hdr_len).unwrap_or(&[]);
        self.deliver(bh, conn, desc, hdr, pdu.data);
    }

    /// Hands a received PDU (BHS and AHS `hdr`, data segment `data`) to
    /// libiscsi and reposts its buffer.
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    pub(crate) fn deliver(
        &self,
        bh: BhOff<'_>,
        conn: Conn,
        desc: &WithCqe<RxDesc>,
        hdr: &[u8],
        data: &[u8],
    ) {
        self.hand_over(bh, conn, hdr, data);
        self.repost(desc);
    }

    /// `deliver` with the resources the caller read (in its RCU section or
    /// its bottom-half-off region `bh`): the buffer is reposted without a
    /// second look-up (step 24).
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    pub(crate) fn deliver_in(
        &self,
        bh: BhOff<'_>,
        res: &Resources,
        conn: Conn,
        desc: &WithCqe<RxDesc>,
        hdr: &[u8],
        data: &[u8],
    ) {
        self.hand_over(bh, conn, hdr, data);
        self.repost_in(res, desc);
    }

    /// Hands a received PDU to libiscsi (its buffer stays the caller's).
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    fn hand_over(&self, bh: BhOff<'_>, conn: Conn, hdr: &[u8], data: &[u8]) {
        self.counters.rx_bytes(data.len() as u64);
        if let Err(e) = conn.complete_pdu(bh, hdr, data) {
            self.counters.proto_error();
            self.conn_error(e);
        }
    }

    /// Re-parses a deferred response's buffer (receive ring entry `rx`)
    /// and completes it.
    pub(crate) fn complete_deferred(&self, bh: BhOff<'_>, rx: u16, len: u32) {
        if let Some(res) = self.resources_in(bh) {
            self.complete_deferred_in(bh, res, rx, len);
        } else if self.failed.load(Ordering::Acquire) {
            self.counters.rx_dropped();
        }
    }

    /// The libiscsi connection and the ring entry `rx` of a held response
    /// about to be delivered; None once the connection failed (counted:
    /// nothing is delivered after a failure), is unbound, or for an index
    /// outside the ring.
    fn held_entry<'a>(&self, res: &'a Resources, rx: u16) -> Option<(Conn, &'a WithCqe<RxDesc>)> {
        if self.failed.load(Ordering::Acquire) {
            self.counters.rx_dropped();
            return None;
        }
        Some((self.iscsi.get()?, res.rx.get(rx as usize)?))
    }

    /// A SCSI Response held at the meeting of a write's response and its
    /// data Send (step 24), in ring entry `rx`, `len` bytes: the receive
    /// path validated it when it came, and the buffer is unchanged since
    /// (not reposted), so one of headers only (no AHS, no data: all the
    /// parser's length rules leave) is handed over as it lies; any other
    /// is parsed again (`complete_deferred_in`).
    pub(crate) fn deliver_held_response(&self, bh: BhOff<'_>, res: &Resources, rx: u16, len: u32) {
        if len as usize != proto::bhs::ISER_HEADERS_LEN {
            return self.complete_deferred_in(bh, res, rx, len);
        }
        let Some((conn, desc)) = self.held_entry(res, rx) else {
            return;
        };
        let bhs = desc
            .received(len as usize)
            .get(proto::iser_hdr::ISER_HDR_LEN..)
            .unwrap_or(&[]);
        self.deliver_in(bh, res, conn, desc, bhs, &[]);
    }

    /// `complete_deferred` with the resources the caller read in its
    /// bottom-half-off region `bh` (step 24).
    pub(crate) fn complete_deferred_in(&self, bh: BhOff<'_>, res: &Resources, rx: u16, len: u32) {
        let Some((conn, desc)) = self.held_entry(res, rx) else {
            return;
        };
        let msg = desc.received(len as usize);
        // A SCSI Response without AHS or data (most held ones: held for
        // their Send's completion) takes the receive path's fast path, which
        // the full parser would accept the same (`plain_scsi_response`).
        if let Some(rsp) = proto::bhs::plain_scsi_response(msg) {
            self.deliver_in(bh, res, conn, desc, rsp.bhs, &[]);
        } else {
            let ctx = proto::bhs::RxContext::full_feature(RX_DATA_LEN as u32);
            match proto::bhs::parse_received_send(msg, &ctx) {
                Ok(pdu) => self.complete(bh, conn, desc, msg, &pdu),
                Err(e) => return self.proto_error(e),
            }
        }
        // A held TMF Response just made libiscsi release commands, whose
        // own held responses' buffers `cleanup` orphaned: back to the ring.
        if !self.failed.load(Ordering::Acquire) {
            self.repost_orphans();
        }
    }

    /// Calls `f` with the CM id inside an RCU section (for `get_ep_param`:
    /// the target's address lives in the id); None once the id is gone.
    pub(crate) fn with_cm_id<R>(&self, f: impl FnOnce(CmIdRef) -> R) -> Option<R> {
        self.cm.get().map(|id| f(id.as_ref()))
    }

    /// `stop_conn`: disconnect and flush. After this no completion handler
    /// runs and no posted buffer is open to the target. Process context.
    pub(crate) fn quiesce(&self) {
        // Under the teardown lock: a second caller (device removal racing
        // stop_conn) returns only once the first has drained.
        let _teardown = self.teardown.lock();
        if self.drained.swap(true, Ordering::AcqRel) {
            return;
        }
        // No receive is posted from outside the completion handler
        // from here on (`return_rx`): the drain below covers them all.
        self.rx_gate.with(|gate| gate.open = false);
        // The id handle is copied out of the RCU guard: disconnecting
        // sleeps. The id lives until `shutdown` revokes it, after this,
        // or until the DEVICE_REMOVAL handler takes it, which it does
        // under this same teardown lock.
        let id = self.cm.get().map(|c| c.as_ref());
        if let Some(id) = id {
            id.disconnect();
        }
        // Copy the QP handle out: draining sleeps, which an RCU guard
        // must not. The QP lives until `release_resources`.
        let qp = self.res.get().map(|r| r.qp);
        if let Some(qp) = qp {
            qp.drain();
        }
        self.flushed.store(true, Ordering::Release);
        if self.state() == State::Up {
            self.set_state(State::Down, None);
        }
    }

    /// Destroys the QP and frees the RDMA resources (MRs, buffers, CQ, the
    /// PD share), after `quiesce`. Idempotent; process context. Called by
    /// `shutdown`, and by the CM handler on device removal so that nothing
    /// of ours is left on the device when rdma_cm and ib_core tear it down
    /// (the CQ pool, for one, must be back to empty by then).
    fn release_resources(&self) {
        self.quiesce();
        let _teardown = self.teardown.lock();
        // The libiscsi connection bound until now (if any), whose
        // session's commands may hold DMA mappings for this device.
        let iscsi = self.teardown_iscsi.get();
        self.teardown_iscsi.clear();
        // Unpublish first and wait for the readers (xmit, completion
        // handlers, task cleanup) to leave their RCU sections: from here
        // on nobody can post to the QP, so destroying it is safe (rxe
        // warns on a post to a destroyed QP, and a real HCA would use a
        // freed QP). The CQ, MRs and buffers the QP used are dropped
        // only after the QP is gone.
        let res = self.res.take();
        let id = self.cm.get().map(|c| c.as_ref());
        if let Some(id) = id {
            id.destroy_qp();
        }
        if let Some(res) = res {
            // A command libiscsi still holds keeps its DMA mapping until
            // its `cleanup_task`, and libiscsi's error handler can hold
            // one for as long as its TMF's timeout, past this connection's
            // end and past its device's removal: unmapped then, it would
            // reach a freed `ib_device`. The mappings go now, with the QP
            // destroyed (nothing reads or writes the pages any more) and
            // the device still registered (case 057).
            if let Some(c) = iscsi {
                (self.drop_task_mappings)(c, self.seq);
            }
            drop(res);
            super::counters::live_qp(-1);
        }
    }

    /// `bind_conn`: publishes the libiscsi connection (`iscsi`, and
    /// `teardown_iscsi` for the teardown's walk of its commands).
    pub(crate) fn bind_iscsi(&self, c: Conn) {
        self.teardown_iscsi.set(c);
        self.iscsi.set(c);
    }

    /// `ep_disconnect`: quiesce, free the resources, destroy the CM id
    /// (waits for a running CM handler), then the connection itself.
    pub(crate) fn shutdown(self: Pin<KBox<Self>>) {
        self.drop_held_login_rsp();
        self.iscsi.clear();
        // Test only (case 057): the DEVICE_REMOVAL handler can run here.
        let delay = crate::sys::params::param_inject_disconnect_delay_ms();
        if delay > 0 {
            crate::sys::params::msleep(delay);
        }
        self.release_resources();
        // Not under the teardown lock: destroying the id waits for a
        // running CM handler, which may be waiting for that lock.
        self.cm.revoke();
        super::counters::live_conn(-1);
        pr_info!("connection released\n");
    }
}

/// `hello_sent`: a Hello is out and its HelloReply awaited.
/// `logout_stop_due` once the deadline reported the connection.
const LOGOUT_DEADLINE_DONE: u64 = u64::MAX;
const HELLO_SENT: u32 = 1 << 31;
/// `hello_verdict`: the HelloReply was accepted.
const HELLO_ACCEPTED: i32 = 1;

/// `login_rsp_held`, `logout_rsp_held`: a response is held.
const HELD_RSP: u64 = 1 << 63;
/// `login_rsp_held`: it is in the login buffer (else in ring entry `index`).
const HELD_IN_LOGIN_BUF: u64 = 1 << 62;
/// `login_rsp_held`: it arrived as a login-phase PDU.
const HELD_LOGIN_PHASE: u64 = 1 << 61;

/// A Login or Text Response the receive path held (`hold_login_rsp`).
pub(crate) struct HeldLoginRsp {
    /// In the login buffer (else in ring entry `index`).
    pub(crate) in_login_buf: bool,
    /// Parsed as a login-phase PDU when it arrived.
    pub(crate) login_phase: bool,
    pub(crate) index: u16,
    /// Bytes received.
    pub(crate) len: u32,
}

impl_has_delayed_work!(IserConn, login_rsp_work);

impl CmHandler for IserConn {
    fn cm_event(&self, id: CmIdRef, ev: &CmEvent<'_>) -> Option<KBox<CmId>> {
        iser_dbg!("cm event {:?}, status {}\n", ev.kind, ev.status);
        match ev.kind {
            CmEventKind::AddrResolved => {
                if let Err(e) = id.resolve_route(RESOLVE_TIMEOUT_MS) {
                    self.fail(e);
                }
            }
            CmEventKind::RouteResolved => {
                // The connection's resources, on every reconnect too: in a
                // NOIO scope (`sys::with_noio`).
                if let Err(e) = crate::sys::with_noio(|| self.setup(id)) {
                    // ECONNABORTED: `setup` logged "setup abandoned" (the
                    // disconnect came first); no error line for it.
                    if e != ECONNABORTED() {
                        pr_err!("connection setup failed: {:?}\n", e);
                    }
                    self.fail(e);
                }
            }
            CmEventKind::Established => {
                let terms = proto::cm_private::accept_decision(true, ev.private_data);
                self.remote_inv
                    .store(terms.remote_invalidate, Ordering::Release);
                if !crate::sys::params::param_hello() {
                    self.connected();
                } else {
                    // Up once the HelloReply is accepted (`finish_hello`);
                    // a target that never answers (LIO, tgt) leaves the
                    // connection to iscsid's login timeout.
                    match self.send_hello() {
                        Ok(ird) => pr_info!(
                            "RDMA connected; iSER Hello sent (version 1, iSER-IRD {}), awaiting the HelloReply\n",
                            ird
                        ),
                        Err(e) => {
                            pr_err!("sending the iSER Hello failed: {:?}\n", e);
                            self.fail(e);
                        }
                    }
                }
            }
            CmEventKind::AddrError | CmEventKind::RouteError | CmEventKind::Unreachable => {
                pr_info!("target unreachable ({:?}, status {})\n", ev.kind, ev.status);
                self.fail(EHOSTUNREACH());
            }
            CmEventKind::Rejected => {
                pr_info!("connection rejected by target, reason {}\n", ev.status);
                self.fail(ECONNREFUSED());
            }
            CmEventKind::ConnectError => {
                pr_info!("connect error, status {}\n", ev.status);
                self.fail(ETIMEDOUT());
            }
            CmEventKind::DeviceRemoval => {
                // Everything we hold on the device goes now, the CM id
                // included: rdma_cm waits for every id on the device to be
                // destroyed, and an endpoint not bound to a connection yet
                // would otherwise wait for iscsid's ep_disconnect (case
                // 048). The id goes back to rdma_cm, which destroys it
                // after this handler; ep_disconnect later finds it gone.
                pr_info!("RDMA device removed: releasing the connection's resources\n");
                if self.state() == State::Connecting {
                    self.fail(ENODEV);
                } else {
                    self.set_state(State::Down, None);
                }
                self.release_resources();
                self.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
                // Under the teardown lock, which every other use of the id
                // outside an RCU section (quiesce, release_resources)
                // holds; `take` waits for the RCU readers (get_ep_param).
                let _teardown = self.teardown.lock();
                return self.cm.take();
            }
            CmEventKind::Disconnected | CmEventKind::AddrChange => {
                // `stop_conn` (quiesce) disconnected first: the end libiscsi
                // asked for (a discovery session ends so), nothing lost.
                let stopping = self.drained.load(Ordering::Acquire);
                // A Logout out and its response not handled yet (it may be
                // in the CQ still): judged when it is (case 045).
                let deferred = !stopping && self.defer_disconnect();
                // Its Logout Response handled already: judged now, as the
                // end of a successful logout or, the Logout refused, a lost
                // connection (case 065, logout-refused: before, this said
                // "disconnected after logout" for a refused one too).
                let answered = !stopping && !deferred && self.logged_out.load(Ordering::Acquire);
                if deferred {
                    pr_info!(
                        "disconnected before its Logout Response was handled: judged then, or in {} ms\n",
                        LOGOUT_RSP_GRACE_MS
                    );
                } else if stopping {
                    iser_dbg!("disconnected: the connection was stopped\n");
                } else if !answered {
                    pr_warn!("connection lost ({:?})\n", ev.kind);
                }
                if self.state() == State::Connecting {
                    self.fail(EIO);
                } else {
                    self.set_state(State::Down, None);
                }
                if answered {
                    self.judge_disconnect();
                } else if !stopping && !deferred && !self.end_after_logout() {
                    self.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
                }
            }
            CmEventKind::TimewaitExit | CmEventKind::Other(_) => {}
        }
        None
    }
}
