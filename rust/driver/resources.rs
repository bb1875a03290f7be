// SPDX-License-Identifier: GPL-2.0
//! What one connection allocates, and the pools it is carved into: the
//! PD, CQ and QP ([`Resources::new`], the QP last), what it keeps per
//! libiscsi task ([`TaskSlots`]: the FRWR MR, the transmit mark and the
//! meeting word), the send descriptors and their header slots ([`TxPool`]),
//! the local-invalidation descriptors ([`InvPool`]), the TMF record
//! ([`TmfInFlight`]), and the receive buffers ([`RxDesc`]).
//!
//! Only data and the lock-free pool operations live here; what a
//! completion of each descriptor does is its `CqeHandler` impl, in the
//! file of the path it belongs to (`xmit.rs`: [`TxDesc`]; `task.rs`:
//! [`InvDesc`], [`TmfInvDesc`]; `recv.rs`: [`RxDesc`]). Those handlers
//! name the connection as their context ([`Ctx`]).
//!
//! Contexts: built in the CM handler (process context, NOIO scope);
//! the pools are taken and returned from any context (lock-free).

use super::counters::Counters;
use super::limits::{
    max_pages, signal_every, CMD_CHAIN_MAX, CQ_ENTRIES, HDRS, INLINE_LEN, INV_DESCS, MAX_RECV_WR,
    MGMT_MAX, MRS, RX_BUF_LEN, RX_DATA_LEN, RX_RING, SQ_DRAIN, SQ_RX_RESERVE, TASK_SLOTS, TX_DESCS,
};
use crate::proto;
use crate::sys::cm::CmIdRef;
use crate::sys::errno::{ENOBUFS, ENOTCONN};
use crate::sys::pool::IndexPool;
use crate::sys::verbs::{
    Cq, CqeHandler, Device, DmaPages, DmaSlots, LoginBuf, Mr, Pd, PostFailed, QpRef, RegReq,
    SendPayload, SgeList, SlotToken, WithCqe, RECV_SGE_MAX, SEND_SGE_MAX,
};
use core::num::NonZeroU32;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use kernel::error::code::EINVAL;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The context every descriptor's completion handler runs on (the
/// connection), as its handler impl declares it.
pub(crate) type Ctx = <RxDesc as CqeHandler>::Ctx;

/// The RDMA resources of an established (or establishing) connection.
pub(crate) struct Resources {
    pub(crate) qp: QpRef,
    /// The QP sends `INLINE_LEN` bytes inline.
    pub(crate) inline_hdrs: bool,
    /// Send-queue entries the QP was created with (`limits::sq_depth`).
    pub(crate) sq_depth: u32,
    pub(crate) lkey: u32,
    pub(crate) dev: Device,
    pub(crate) tasks: TaskSlots,
    pub(crate) tx: TxPool,
    pub(crate) invs: InvPool,
    /// Completion handle of the invalidations a TMF Response waits for.
    pub(crate) tmf_inv: KBox<WithCqe<TmfInvDesc>>,
    pub(crate) login_rx: KBox<WithCqe<RxDesc>>,
    pub(crate) login_tx: LoginBuf,
    pub(crate) rx: KVec<KBox<WithCqe<RxDesc>>>,
    _cq: Cq,
    _pd: Pd,
}

/// A receive descriptor: one posted receive buffer.
pub(crate) struct RxDesc {
    /// The receive buffers of the connection (the ring's and the login
    /// buffer), shared by all its descriptors.
    bufs: Arc<DmaPages>,
    /// This descriptor's buffer in `bufs`: the ring index, `RX_RING` for
    /// the login buffer.
    buf: usize,
    /// The buffer's SGEs, computed once (every repost names them).
    sges: SgeList,
    /// The login buffer (else a ring entry).
    pub(crate) login: bool,
    /// Ring index (u16::MAX: the login buffer).
    pub(crate) index: u16,
}

impl RxDesc {
    fn new(bufs: &Arc<DmaPages>, buf: usize, lkey: u32, login: bool, index: u16) -> Self {
        RxDesc {
            sges: bufs.sges(buf, RX_BUF_LEN, lkey),
            bufs: bufs.clone(),
            buf,
            login,
            index,
        }
    }

    /// The SGEs to post this buffer with.
    pub(crate) fn sges(&self) -> &SgeList {
        &self.sges
    }

    /// CPU view of the first `len` bytes received (`Wc::byte_len`).
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    pub(crate) fn received(&self, len: usize) -> &[u8] {
        self.bufs.for_cpu(self.buf, len)
    }
}

/// One fast-registration MR of the pool, and its marks.
pub(crate) struct MrSlot {
    mr: Mr,
    /// Still valid after its last use (registered for local access only,
    /// or a command released without a known-complete invalidation):
    /// invalidate before the next registration.
    dirty: AtomicBool,
    /// The command holding the MR (its task's current command): raw ITT
    /// (high half) tagged with `OWNED` (low half), written before the
    /// registration is posted; 0 once released. A successful TMF finds the
    /// MRs of the commands it releases by it.
    owner_itt: AtomicU64,
    /// That command's raw LUN field.
    owner_lun: AtomicU64,
    /// A successful TMF covering the owner posted a LOCAL_INV for this MR
    /// (its response reaches libiscsi only once that completed): the
    /// owner's STag is dead when libiscsi releases it. Cleared at the next
    /// registration.
    tmf_invalidated: AtomicBool,
    /// A read whose SendInvSE alone completes it
    /// (`TaskStags::settles_remotely`): its rkey (high half) and `ARMED`,
    /// then `SETTLED` once the receive path saw that SendInvSE
    /// (`settle_remote`); 0 otherwise. Armed before the command's post,
    /// taken back (0) by the task's slow response path and by `cleanup`,
    /// so a response settles a command at most once and only while the
    /// command holds the MR.
    remote_settle: AtomicU64,
}

/// Low half of `MrSlot::remote_settle`: a read's SendInvSE is awaited.
const ARMED: u64 = 1;
/// Low half of `MrSlot::remote_settle`: that SendInvSE came; the target
/// invalidated the STag (the device did so before it completed the
/// receive).
const SETTLED: u64 = 2;

/// What `MrSlot::take_remote_settle` found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoteSettle {
    /// Never armed for the current command, or taken back already.
    Off,
    /// Armed; no SendInvSE settled it.
    Armed,
    /// Settled by its SendInvSE: the STag is dead.
    Settled,
}

/// Where an unregistered write's SCSI Response meets the completion of
/// the Send that carried its data (`proto::task::SendMeet`): one word per
/// libiscsi task, in its [`TaskSlot`], so both sides find it from the ITT
/// alone, without the task or its back_lock (issue 18). The word is armed
/// by `xmit` before the command's post, moved by the receive path and the
/// Send completion (the connection's one CQ: never both at once), and
/// taken back by `cleanup` and by the task's own rules, so at most one of
/// them delivers the response, once.
pub(crate) struct MeetWord {
    word: AtomicU64,
}

/// What the Send completion found at the meeting.
pub(crate) enum SendMet {
    /// Not armed for this command: the task's rules hear of it.
    NotArmed,
    /// Marked; the response comes later and is delivered at once.
    Marked,
    /// The response was held here: deliver it (receive buffer, length).
    DeliverHeld(u16, u32),
}

impl MeetWord {
    /// The command with raw ITT `itt` is about to be posted with nothing
    /// but its response and its data Send to wait for.
    pub(crate) fn arm(&self, itt: u32) {
        self.word
            .store(proto::task::SendMeet::armed(itt), Ordering::Release);
    }

    /// The task's command about to be posted does not meet here: whatever
    /// an earlier command of the task left is cleared.
    pub(crate) fn clear(&self) {
        self.word.store(0, Ordering::Release);
    }

    /// Takes the word back (the command was not posted, was released, or
    /// its rules run instead): what it held.
    pub(crate) fn take(&self) -> proto::task::MeetTaken {
        proto::task::SendMeet::taken(self.word.swap(0, Ordering::AcqRel))
    }

    /// A SCSI Response of raw ITT `itt` without remote invalidation, in
    /// receive buffer `rx` (`len` bytes), softirq: `Some(true)`: deliver
    /// it now; `Some(false)`: held here (the Send delivers it); `None`:
    /// not this meeting's, the task's rules decide.
    #[inline]
    pub(crate) fn response(&self, itt: u32, rx: u16, len: u32) -> Option<bool> {
        let w = &self.word;
        let cur = w.load(Ordering::Acquire);
        let (next, now) = match proto::task::SendMeet::on_response(cur, itt, rx, len)? {
            proto::task::MeetResponse::Hold(n) => (n, false),
            proto::task::MeetResponse::Deliver(n) => (n, true),
        };
        // A failed swap: `cleanup` took the word back meanwhile.
        w.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| now)
    }

    /// The Send that carried the data of the command with raw ITT `itt`
    /// completed (softirq).
    #[inline]
    pub(crate) fn send_done(&self, itt: u32) -> SendMet {
        let w = &self.word;
        let cur = w.load(Ordering::Acquire);
        let (next, met) = match proto::task::SendMeet::on_send(cur, itt) {
            None => return SendMet::NotArmed,
            Some(proto::task::MeetSend::Wait(n)) => (n, SendMet::Marked),
            Some(proto::task::MeetSend::Deliver(n, rx, len)) => (n, SendMet::DeliverHeld(rx, len)),
        };
        match w.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => met,
            // `cleanup` took the word back: the command is released.
            Err(_) => SendMet::Marked,
        }
    }
}

/// Whether a task's command is on the wire: one word per libiscsi task, in
/// its [`TaskSlot`], holding the command's raw ITT (high half)
/// and its transmission state (low half: [`IN_XMIT`], [`ON_WIRE`]; the
/// whole word 0 when neither).
///
/// libiscsi hands a command to the transport with its ITT already
/// findable (`iscsi_itt_to_ctask` looks only at the task's `sc` and the
/// session's age): a SCSI Response naming it, received on another CPU
/// before `xmit` posted it, would complete it (and release its pages) while
/// `xmit` is still registering them, and a completion step would touch the
/// transport data `xmit` is writing. So the receive path acts on a
/// command only once its word says it is on the wire (`ON_WIRE`, set by
/// `xmit` when its last post for the command returned), waits while `xmit`
/// is on it (`IN_XMIT`: that call runs with bottom halves off on another
/// CPU, never sleeps and never waits for this CPU), and refuses a response
/// for a command in neither state: the target answered what it was never
/// sent.
///
/// Stable under the session's back_lock once `ON_WIRE`: only `cleanup`
/// (under that lock) clears it, and the task cannot be handed out again
/// before.
pub(crate) struct XmitWord {
    word: AtomicU64,
}

/// Low half of an `XmitWord`: `xmit` is preparing or posting the
/// command.
const IN_XMIT: u64 = 1;
/// Low half of an `XmitWord`: the command is posted.
const ON_WIRE: u64 = 2;

/// What the receive path found in a command's `XmitWord`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnWire {
    /// Posted: the response may act on the command.
    Yes,
    /// Posted after the receive path waited for `xmit` to finish.
    AfterWait,
    /// Not being sent and never sent (or released): a response naming it
    /// answers nothing on the wire.
    No,
}

/// How long the receive path waits for `xmit` to finish a command (ms):
/// `xmit` takes microseconds; this bounds a wait on a transmit call that
/// fault injection stalls (`inject_xmit_posting_stall_ms`, case 071) and
/// stays far below the soft-lockup watchdog (20 s).
const XMIT_WAIT_MS: u64 = 5000;

impl XmitWord {
    /// `xmit` takes the command with raw ITT `itt` (frwd_lock held, BH
    /// off): from now until the guard is sent or dropped, the receive path
    /// waits for it.
    pub(crate) fn begin(&self, itt: u32) -> XmitMark<'_> {
        self.word
            .store(u64::from(itt) << 32 | IN_XMIT, Ordering::Release);
        XmitMark {
            word: &self.word,
            itt,
        }
    }

    /// Whether the command with raw ITT `itt` is on the wire, waiting
    /// (spinning, softirq) while `xmit` is on it. Called before the
    /// back_lock is taken; the caller checks [`XmitWord::is_on_wire`]
    /// again under it.
    pub(crate) fn wait_on_wire(&self, itt: u32) -> OnWire {
        let w = &self.word;
        let in_xmit = u64::from(itt) << 32 | IN_XMIT;
        let on_wire = u64::from(itt) << 32 | ON_WIRE;
        let mut cur = w.load(Ordering::Acquire);
        if cur == on_wire {
            return OnWire::Yes;
        }
        let since = crate::sys::params::now_ms();
        // Lowered by a test parameter only (case 071, round bound).
        let bound = match crate::sys::params::param_inject_xmit_wait_ms() {
            0 => XMIT_WAIT_MS,
            ms => u64::from(ms),
        };
        if cur == in_xmit {
            crate::sys::params::inject_early_rsp_met(true);
        }
        while cur == in_xmit {
            if crate::sys::params::now_ms().saturating_sub(since) > bound {
                pr_warn!(
                    "a response for ITT {:#x} waited {} ms for its command's post: given up, the command is treated as not on the wire\n",
                    itt,
                    bound
                );
                return OnWire::No;
            }
            core::hint::spin_loop();
            cur = w.load(Ordering::Acquire);
        }
        if cur == on_wire {
            OnWire::AfterWait
        } else {
            OnWire::No
        }
    }

    /// Whether the command with raw ITT `itt` is on the wire (back_lock
    /// held: stays so until the lock is released).
    #[inline]
    pub(crate) fn is_on_wire(&self, itt: u32) -> bool {
        self.word.load(Ordering::Acquire) == u64::from(itt) << 32 | ON_WIRE
    }

    /// `cleanup` released the task (back_lock held).
    pub(crate) fn released(&self) {
        self.word.store(0, Ordering::Release);
    }
}

/// `xmit`'s hold on a command's `XmitWord`: [`XmitMark::on_wire`]
/// once every post for the command returned; dropped without it (nothing
/// or not all was sent, the connection failed), the word is cleared and a
/// response naming the command is refused.
pub(crate) struct XmitMark<'a> {
    word: &'a AtomicU64,
    itt: u32,
}

impl XmitMark<'_> {
    /// The command is posted: the receive path may act on it.
    pub(crate) fn on_wire(self) {
        self.leave(ON_WIRE);
        core::mem::forget(self);
    }

    /// Moves the word from `IN_XMIT` to `next` (with the ITT, or 0), unless
    /// `cleanup` cleared it meanwhile: a response that needed no wait (a
    /// read's SendInvSE settled on its MR, a write met at its data Send)
    /// can complete the command once it is posted, before this call
    /// returns, and a word set after that would outlive the command.
    fn leave(&self, next: u64) {
        let cur = u64::from(self.itt) << 32 | IN_XMIT;
        let next = if next == 0 {
            0
        } else {
            u64::from(self.itt) << 32 | next
        };
        let _ = self
            .word
            .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl Drop for XmitMark<'_> {
    fn drop(&mut self) {
        self.leave(0);
    }
}

/// Low half of `MrSlot::owner_itt` for an MR a command holds.
const OWNED: u64 = 1;

/// What the connection keeps for one libiscsi task, named by the task's
/// index: its FRWR MR and the two words the receive path finds from the
/// ITT alone. One look-up gives a command all three (issue 18).
pub(crate) struct TaskSlot {
    pub(crate) mr: MrSlot,
    pub(crate) xmit: XmitWord,
    pub(crate) meet: MeetWord,
}

/// The connection's per-task slots ([`TaskSlot`]): one per libiscsi task of
/// the session, named by the task's index (`MRS`), so a command finds its
/// MR and words without a search and nothing is shared between tasks:
/// libiscsi hands a task to one command at a time and calls
/// `cleanup_task` before it hands it out again. Any context may read a
/// slot's marks (atomics).
pub(crate) struct TaskSlots {
    /// 56 bytes each, `MRS` of them (7 KiB): a `KVVec` (kvmalloc), so a
    /// reconnect never needs a high-order block for them (the MR table
    /// alone, 5 KiB, was a `KVec` before step 27).
    slots: KVVec<TaskSlot>,
}

/// The size the `slots` comment gives.
const _: () = assert!(core::mem::size_of::<TaskSlot>() == 56);

impl TaskSlots {
    pub(crate) fn new(pd: &Pd, n: u32, max_pages: u32) -> Result<Self> {
        let mut slots = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(
                TaskSlot {
                    mr: MrSlot {
                        mr: Mr::new(pd, max_pages)?,
                        dirty: AtomicBool::new(false),
                        owner_itt: AtomicU64::new(0),
                        owner_lun: AtomicU64::new(0),
                        tmf_invalidated: AtomicBool::new(false),
                        remote_settle: AtomicU64::new(0),
                    },
                    xmit: XmitWord {
                        word: AtomicU64::new(0),
                    },
                    meet: MeetWord {
                        word: AtomicU64::new(0),
                    },
                },
                GFP_KERNEL,
            )?;
        }
        // Counted once the pool exists: its `Drop` takes them back off.
        // An error above drops the MRs made so far (each deregisters
        // itself) without a pool, so nothing was counted for them (case
        // 051 found 6 counted and never taken off after a failed login).
        super::counters::live_mr(slots.len() as i64);
        Ok(TaskSlots { slots })
    }

    /// The slot of the task with libiscsi index `task_index`, and its
    /// index (`None` past the pool: never, as `MRS` bounds the session's
    /// tasks). Looked up once per command and per release: the slot's
    /// methods act on it.
    pub(crate) fn for_task(&self, task_index: u32) -> Option<(u16, &TaskSlot)> {
        let i = u16::try_from(task_index).ok()?;
        Some((i, self.slot(i)?))
    }

    /// Slot `i`.
    pub(crate) fn slot(&self, i: u16) -> Option<&TaskSlot> {
        self.slots.get(usize::from(i))
    }

    /// The slot of the task a raw ITT names (the receive path, the Send
    /// completion).
    #[inline]
    pub(crate) fn by_itt(&self, itt: u32) -> Option<&TaskSlot> {
        self.slots.get(crate::sys::iscsi::itt_index(itt) as usize)
    }

    /// The rkeys of the MRs held by commands in `scope`, each marked as
    /// invalidated by the TMF (the caller posts their LOCAL_INVs).
    pub(crate) fn claim_for_tmf(
        &self,
        scope: &proto::task::TmfScope,
    ) -> impl Iterator<Item = u32> + '_ {
        let scope = *scope;
        self.slots.iter().map(|t| &t.mr).filter_map(move |s| {
            let owner = s.owner_itt.load(Ordering::Acquire);
            if owner & OWNED == 0 {
                return None;
            }
            let lun = s.owner_lun.load(Ordering::Relaxed).to_ne_bytes();
            if !scope.covers((owner >> 32) as u32, &lun) {
                return None;
            }
            s.tmf_invalidated.store(true, Ordering::Relaxed);
            Some(s.mr.rkey())
        })
    }
}

impl MrSlot {
    pub(crate) fn mr(&self) -> &Mr {
        &self.mr
    }

    /// A SendInvSE naming `rkey` came with the SCSI Response of the MR's
    /// task (softirq): settles the command on its MR, without the task,
    /// if the MR is armed for a read with this rkey
    /// ([`MrSlot::arm_remote_settle`]). `true`: the command's rules are
    /// met (its one STag is dead, nothing else holds it), and the response
    /// goes to libiscsi at once; `false`: the task's rules decide.
    #[inline]
    pub(crate) fn settle_remote(&self, rkey: u32) -> bool {
        let armed = u64::from(rkey) << 32 | ARMED;
        self.remote_settle
            .compare_exchange(
                armed,
                u64::from(rkey) << 32 | SETTLED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Records the command that registers the MR (before the post).
    pub(crate) fn set_owner(&self, itt: u32, lun: [u8; 8]) {
        self.tmf_invalidated.store(false, Ordering::Relaxed);
        self.owner_lun
            .store(u64::from_ne_bytes(lun), Ordering::Relaxed);
        // Acquire too: the `dirty` mark `release` left (for the task's
        // previous command, maybe on another CPU) is seen by `take_dirty`
        // after this.
        self.owner_itt
            .swap(u64::from(itt) << 32 | OWNED, Ordering::AcqRel);
    }

    /// The command holding the MR let it go (`cleanup`, or a registration
    /// that failed before its post); `still_valid`: invalidate it before its
    /// next registration.
    pub(crate) fn release(&self, still_valid: bool) {
        if still_valid {
            self.dirty.store(true, Ordering::Relaxed);
        }
        self.owner_itt.store(0, Ordering::Release);
    }

    /// The command about to be posted is a read whose SendInvSE naming
    /// `rkey` alone completes it (`TaskStags::settles_remotely`): the
    /// receive path may settle it here (`MrSlot::settle_remote`).
    pub(crate) fn arm_remote_settle(&self, rkey: u32) {
        self.remote_settle
            .store(u64::from(rkey) << 32 | ARMED, Ordering::Release);
    }

    /// Takes the settle mark back (the task's response rules run instead,
    /// or the command was released or never posted): what it was.
    pub(crate) fn take_remote_settle(&self) -> RemoteSettle {
        match self.remote_settle.swap(0, Ordering::AcqRel) & 3 {
            ARMED => RemoteSettle::Armed,
            SETTLED => RemoteSettle::Settled,
            _ => RemoteSettle::Off,
        }
    }

    /// Whether a successful TMF invalidated the MR for its current owner.
    pub(crate) fn tmf_invalidated(&self) -> bool {
        self.tmf_invalidated.load(Ordering::Relaxed)
    }

    /// A registration of the MR was prepared (its key bumped) and never
    /// posted. If the MR was still valid with `valid_rkey` (its LOCAL_INV
    /// was to lead the failed chain), it gets that key back and stays
    /// marked for invalidation first; otherwise it was free on the device
    /// and the bumped key is harmless. Without this, the next registration
    /// finds the MR valid (REG_MR on a valid MR) or invalidates it with a
    /// key the device never saw: either fails the QP (case 054).
    pub(crate) fn unwind(&self, valid_rkey: Option<u32>) {
        let Some(rkey) = valid_rkey else {
            return;
        };
        self.mr.restore_key(rkey);
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Takes the "invalidate first" mark.
    pub(crate) fn take_dirty(&self) -> bool {
        self.dirty.swap(false, Ordering::Relaxed)
    }
}

impl Drop for TaskSlots {
    fn drop(&mut self) {
        super::counters::live_mr(-(self.slots.len() as i64));
    }
}

/// A send descriptor: the completion handle of one header slot.
pub(crate) struct TxDesc {
    pub(crate) index: u32,
    /// The command whose pages this Send read, if it is the last Send of
    /// that command's data (raw ITT and cookie; cookie 0: none). Written
    /// before the post; its completion lets the command complete
    /// (`data_sent`).
    pub(crate) owner_itt: AtomicU32,
    pub(crate) owner_cookie: AtomicU64,
    /// For a signaled Send: the first of the unsignaled Sends' slots it
    /// releases when it completes (`NO_SLOT`: none), a chain through
    /// `next_unsignaled`. Written before the post, taken by its completion.
    batch: AtomicU32,
    /// For a posted unsignaled Send: the next slot of the chain it is in.
    next_unsignaled: AtomicU32,
    /// For a signaled Send: `TxPool::sq_posted` just after its chain, so
    /// its completion frees every entry up to it (`TxPool::sq_reaped`).
    /// Written before the post.
    sq_pos: AtomicU32,
}

/// No slot (the end of a chain of unsignaled Sends' slots).
const NO_SLOT: u32 = u32::MAX;

/// The completion handle of the unsignaled inline Sends (command PDUs
/// without data, posted `IB_SEND_INLINE`: the provider copied the header
/// during the post, so no header slot is read after it and none is held).
/// Only a failed or flushed work request of such a chain completes here.
pub(crate) struct InlineSend;

/// Send descriptors for command, Data-Out and management PDUs: one header
/// slot (iSER header + BHS) and one completion handle each.
pub(crate) struct TxPool {
    /// ~90 bytes each, thousands of them: a `KVVec` (kvmalloc), so a
    /// reconnect never needs a high-order block for them.
    descs: KVVec<WithCqe<TxDesc>>,
    pub(crate) slots: DmaSlots,
    /// Names the unsignaled inline Sends (`post_inline`).
    inline_send: WithCqe<InlineSend>,
    /// The slots of the unsignaled Sends posted and not yet handed to a
    /// signaled one: a lock-free stack (`next_unsignaled` links), pushed
    /// after each unsignaled post and emptied (swapped out whole, never
    /// popped one by one: no ABA) before each signaled post. A slot is
    /// pushed only once its Send is on the send queue, so the signaled Send
    /// that takes it was posted after it and, the queue completing in
    /// order, completes after it.
    unsignaled: AtomicU32,
    /// Slots on the `unsignaled` stack. A Send is signaled when
    /// `signal_every - 1` wait, so no more ever wait (SQ_XMIT_MAX's
    /// margin), also after a failed signaled post put its batch back.
    /// Posts are serialised by libiscsi's frwd_lock: a plain count.
    waiting: AtomicU32,
    /// One Send in this many is signaled (`signal_every()` at setup).
    signal_every: NonZeroU32,
    /// Send-queue entries posted through this pool (commands, Data-Out,
    /// management PDUs, the login), a wrapping count. Written only by the
    /// posts, which libiscsi's frwd_lock serialises (the Hello goes before
    /// the login, with nothing else to post): check, post and count are one
    /// step for every other poster.
    sq_posted: AtomicU32,
    /// `sq_posted` as it was after the chain of the last signaled Send
    /// whose completion was reaped: every entry before that is free (an RC
    /// send queue completes in order, and a device frees an unsignaled
    /// entry no later than the next signaled completion). Written by the
    /// completion handler (one context per CQ). Completions of the receive
    /// path's invalidations free entries too and are not counted here: the
    /// count errs high, never low.
    sq_reaped: AtomicU32,
    /// Entries in use above which a Send that would go unsignaled is
    /// signaled instead (`sq_tight`): the budget less the management share
    /// and the largest xmit the negotiation allows (`set_largest_xmit`).
    /// So the entries posted after the last signaled Send never exceed it
    /// (they are in use, and `sq_reaped` is at most that Send's position),
    /// and once that Send's completion is reaped the largest xmit fits
    /// beside them: an xmit refused room always has a signaled completion
    /// coming that makes room for its retry, with no other post needed (at
    /// QD1 with NOP-Outs off nothing else would be posted). Written at
    /// `start_conn`, before the connection's first command.
    sq_signal_above: AtomicU32,
    /// Entries this pool may have in use: the QP's depth less the receive
    /// path's reserve (`SQ_RX_RESERVE`) and the drain's entry, at least
    /// `SQ_XMIT_MIN`.
    sq_budget: u32,
}

/// When [`TxPool::post`] signals a Send. Whatever is asked, the last Send
/// of a command's data (`owner`) is signaled, and so is the one that would
/// make `signal_every` unsignaled Sends wait.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Always: management and login PDUs, and the inline command Send a
    /// batch is handed to (`post_inline`).
    Always,
    /// The last post of an xmit call: also when the send queue is short
    /// (`sq_tight`), so a later xmit refused room has a signaled
    /// completion coming.
    LastOfXmit,
    /// A Send that more of the same xmit call follow (its last one decides).
    Batched,
}

/// Work requests of a chain `[invs] → [regs] → Send`.
fn chain_len(invs: &[u32], regs: &[RegReq<'_>]) -> u32 {
    (invs.len() + regs.len() + 1) as u32
}

impl TxPool {
    /// A pool for a QP of `sq_depth` send-queue entries (at least
    /// `SQ_RX_RESERVE + SQ_DRAIN + SQ_XMIT_MIN`: `limits::sq_depth`).
    pub(crate) fn new(dev: Device, ctx: *const Ctx, sq_depth: u32) -> Result<Self> {
        let n = TX_DESCS + TASK_SLOTS;
        let mut descs = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        for index in 0..n {
            descs.push(
                WithCqe::new(
                    ctx,
                    TxDesc {
                        index,
                        owner_itt: AtomicU32::new(0),
                        owner_cookie: AtomicU64::new(0),
                        batch: AtomicU32::new(NO_SLOT),
                        next_unsignaled: AtomicU32::new(NO_SLOT),
                        sq_pos: AtomicU32::new(0),
                    },
                ),
                GFP_KERNEL,
            )?;
        }
        Ok(TxPool {
            descs,
            slots: DmaSlots::new(dev, TX_DESCS, TASK_SLOTS, HDRS)?,
            inline_send: WithCqe::new(ctx, InlineSend),
            unsignaled: AtomicU32::new(NO_SLOT),
            waiting: AtomicU32::new(0),
            // `signal_every()` is at least 1.
            signal_every: NonZeroU32::new(signal_every() as u32).unwrap_or(NonZeroU32::MIN),
            sq_posted: AtomicU32::new(0),
            sq_reaped: AtomicU32::new(0),
            // Until `start_conn` sets it: an xmit without Data-Out.
            sq_signal_above: AtomicU32::new(
                sq_depth.saturating_sub(SQ_RX_RESERVE + SQ_DRAIN + MGMT_MAX + CMD_CHAIN_MAX),
            ),
            // At least SQ_XMIT_MIN: `limits::sq_depth` refuses less.
            sq_budget: sq_depth.saturating_sub(SQ_RX_RESERVE + SQ_DRAIN),
        })
    }

    /// Entries a command's xmit may count at most: the transmit budget
    /// less the management share.
    pub(crate) fn sq_cmd_budget(&self) -> u32 {
        self.sq_budget - MGMT_MAX
    }

    /// The negotiation's largest xmit takes `n` entries (`start_conn`):
    /// sets the point above which Sends are signaled early. `false` when
    /// `n` exceeds what commands may count even with nothing in use: such
    /// a write could never be posted.
    pub(crate) fn set_largest_xmit(&self, n: u32) -> bool {
        let Some(above) = self.sq_cmd_budget().checked_sub(n) else {
            return false;
        };
        self.sq_signal_above.store(above, Ordering::Relaxed);
        true
    }

    /// Whether a chain of `n` posted unsignaled would leave more entries
    /// in use than `sq_signal_above`: it is to be signaled (counted as
    /// `sq_early_signals` once posted).
    #[inline]
    fn sq_tight(&self, n: u32) -> bool {
        self.sq_in_use().wrapping_add(n) > self.sq_signal_above.load(Ordering::Relaxed)
    }

    /// Entries the transmit path has in use: posted, and not yet freed by
    /// a reaped signaled completion.
    #[inline]
    fn sq_in_use(&self) -> u32 {
        self.sq_posted
            .load(Ordering::Relaxed)
            .wrapping_sub(self.sq_reaped.load(Ordering::Acquire))
    }

    /// Bytes this pool allocated (descriptors, header slots) and the
    /// largest single allocation among them that needs contiguous pages
    /// (the descriptor table is a `KVVec`: page-sized pieces at worst).
    pub(crate) fn memory(&self) -> (usize, usize) {
        let descs = self.descs.len() * core::mem::size_of::<WithCqe<TxDesc>>();
        (descs + self.slots.bytes(), self.slots.largest_chunk())
    }

    /// Whether `n` more send-queue entries fit the transmit budget, keeping
    /// `MGMT_MAX` of it for management PDUs unless `mgmt` (so commands
    /// cannot take the last entries from a TMF or a NOP-Out). The caller is a serialised
    /// poster (see `sq_posted`), and checks once for everything its call
    /// posts. When not, counts the wait (`sq_room_waits`): a command goes
    /// back to the midlayer, and the entries free as completions are reaped
    /// (`SQ_XMIT_MIN`: for the default negotiation a post that gets a
    /// signaled one out always fits once they are).
    #[inline]
    pub(crate) fn sq_room(&self, n: u32, mgmt: bool, counters: &Counters) -> bool {
        let in_use = self.sq_in_use();
        let budget = if mgmt {
            self.sq_budget
        } else {
            self.sq_cmd_budget()
        };
        let wanted = in_use.saturating_add(n);
        if wanted > budget {
            return Self::sq_refused(counters);
        }
        counters.sq_in_use(u64::from(wanted));
        true
    }

    #[cold]
    fn sq_refused(counters: &Counters) -> bool {
        counters.sq_room_wait();
        false
    }

    /// Counts `n` entries posted.
    fn sq_count(&self, n: u32) {
        let pos = self.sq_posted.load(Ordering::Relaxed).wrapping_add(n);
        self.sq_posted.store(pos, Ordering::Relaxed);
    }

    /// Posts `[invs] → [regs] → Send(payload)` using header slot `slot`,
    /// signaled as `signal` says ([`Signal`]; `owner`: raw ITT and cookie
    /// of the command whose data this Send ends, told when it completes).
    /// On error the slot is
    /// released and the Send was not posted; the invalidations and
    /// registrations before it may have been, `PostFailed::posted` says how
    /// many WRs were.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post(
        &self,
        qp: crate::sys::verbs::QpRef,
        invs: &[u32],
        regs: &[RegReq<'_>],
        slot: SlotToken<'_>,
        payload: SendPayload<'_>,
        signal: Signal,
        owner: Option<(u32, u64)>,
        counters: &Counters,
    ) -> core::result::Result<(), PostFailed> {
        self.post_inlined(qp, invs, regs, slot, payload, signal, owner, counters)
    }

    /// [`TxPool::post`] inlined into its caller: the post of a command PDU
    /// with a header slot, once per such I/O (bench/README.md, step 16).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_inlined(
        &self,
        qp: crate::sys::verbs::QpRef,
        invs: &[u32],
        regs: &[RegReq<'_>],
        slot: SlotToken<'_>,
        payload: SendPayload<'_>,
        signal: Signal,
        owner: Option<(u32, u64)>,
        counters: &Counters,
    ) -> core::result::Result<(), PostFailed> {
        // A token dropped on the error paths below releases its slot.
        let Some(d) = self.descs.get(slot.index() as usize) else {
            return Err(EINVAL.into());
        };
        let (itt, cookie) = owner.unwrap_or((0, 0));
        d.owner_itt.store(itt, Ordering::Relaxed);
        d.owner_cookie.store(cookie, Ordering::Release);
        let waiting = self.waiting_if_unsignaled();
        let n = chain_len(invs, regs);
        let (signal, early) = match (signal, owner, waiting) {
            (Signal::Always, _, _) | (_, Some(_), _) | (_, _, None) => (true, false),
            (Signal::LastOfXmit, None, Some(_)) => {
                let tight = self.sq_tight(n);
                (tight, tight)
            }
            (Signal::Batched, None, Some(_)) => (false, false),
        };
        if let (false, Some(waiting)) = (signal, waiting) {
            if let Err(e) = qp.post_send(invs, regs, d.cqe(), payload, false) {
                d.owner_cookie.store(0, Ordering::Relaxed);
                self.sq_count(e.posted);
                return Err(e);
            }
            self.sq_count(n);
            let index = self.slots.posted(slot);
            self.push_unsignaled(index);
            self.now_waiting(waiting, counters);
            return Ok(());
        }
        // Every unsignaled Send pushed so far was posted before this one.
        let batch = self.unsignaled.swap(NO_SLOT, Ordering::AcqRel);
        let taken = self.waiting.swap(0, Ordering::Relaxed);
        let before = self.sq_posted.load(Ordering::Relaxed);
        let after = before.wrapping_add(n);
        // Published by the Release below, read after its completion.
        d.sq_pos.store(after, Ordering::Relaxed);
        d.batch.store(batch, Ordering::Release);
        if let Err(e) = qp.post_send(invs, regs, d.cqe(), payload, true) {
            self.sq_posted
                .store(before.wrapping_add(e.posted), Ordering::Relaxed);
            // Their Sends are still on the queue: back to the stack, for
            // the next signaled Send.
            d.batch.store(NO_SLOT, Ordering::Relaxed);
            d.owner_cookie.store(0, Ordering::Relaxed);
            self.walk(batch, |i| self.push_unsignaled(i));
            self.waiting.fetch_add(taken, Ordering::Relaxed);
            counters.unsignaled_requeued(taken.into());
            return Err(e);
        }
        self.sq_posted.store(after, Ordering::Relaxed);
        self.slots.posted(slot);
        if early {
            counters.sq_early_signal();
        }
        Ok(())
    }

    /// Posts `[invs] → [regs] → Send(payload)` for a command PDU whose
    /// payload is inline (the header only: the provider copies it during
    /// the post), as the last post of its xmit call ([`Signal::LastOfXmit`]).
    /// Unsignaled, it needs no header slot: it is posted with
    /// the shared `InlineSend` handle and only counts as waiting (its send
    /// queue entries free with the next signaled completion). When it is
    /// to be signaled (`signal_every - 1` wait, or `sq_tight`) it claims a
    /// slot now, whose
    /// descriptor is the handle that releases the waiting ones: no slot
    /// free is `ENOBUFS` with nothing posted. Errors as [`TxPool::post`].
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    pub(crate) fn post_inline(
        &self,
        qp: crate::sys::verbs::QpRef,
        invs: &[u32],
        regs: &[RegReq<'_>],
        payload: SendPayload<'_>,
        counters: &Counters,
    ) -> core::result::Result<(), PostFailed> {
        let n = chain_len(invs, regs);
        let mut early = false;
        if let Some(waiting) = self.waiting_if_unsignaled() {
            early = self.sq_tight(n);
            if !early {
                if let Err(e) = qp.post_send(invs, regs, self.inline_send.cqe(), payload, false) {
                    self.sq_count(e.posted);
                    return Err(e);
                }
                self.sq_count(n);
                self.now_waiting(waiting, counters);
                return Ok(());
            }
        }
        let Some(slot) = self.slots.claim() else {
            counters.tx_full();
            return Err(ENOBUFS().into());
        };
        self.post(
            qp,
            invs,
            regs,
            slot,
            payload,
            Signal::Always,
            None,
            counters,
        )?;
        if early {
            counters.sq_early_signal();
        }
        Ok(())
    }

    /// How many unsignaled Sends would wait if the next one went
    /// unsignaled; `None` when that would be `signal_every`: it is signaled.
    fn waiting_if_unsignaled(&self) -> Option<u32> {
        let waiting = self.waiting.load(Ordering::Relaxed).saturating_add(1);
        (waiting < self.signal_every.get()).then_some(waiting)
    }

    /// An unsignaled Send was posted: `waiting` wait now.
    fn now_waiting(&self, waiting: u32, counters: &Counters) {
        self.waiting.store(waiting, Ordering::Relaxed);
        counters.unsignaled_waiting(waiting.into());
    }

    /// Puts the slot of a posted unsignaled Send on the stack.
    fn push_unsignaled(&self, index: u32) {
        let Some(d) = self.descs.get(index as usize) else {
            return;
        };
        let mut head = self.unsignaled.load(Ordering::Acquire);
        loop {
            d.next_unsignaled.store(head, Ordering::Relaxed);
            match self.unsignaled.compare_exchange_weak(
                head,
                index,
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Calls `f` with each slot of the chain from `first`, the link read
    /// before `f` (which may hand the slot to a new Send). At most one
    /// visit per slot, whatever the links say.
    fn walk(&self, first: u32, mut f: impl FnMut(u32)) {
        let mut i = first;
        for _ in 0..self.descs.len() {
            let Some(d) = self.descs.get(i as usize) else {
                return;
            };
            let next = d.next_unsignaled.load(Ordering::Relaxed);
            f(i);
            i = next;
        }
    }

    /// A signaled Send completed (softirq): releases its slot and those of
    /// the unsignaled Sends it took with it (all posted before it, so all
    /// completed: the send queue completes in order).
    pub(crate) fn send_completed(&self, d: &TxDesc) {
        let batch = d.batch.swap(NO_SLOT, Ordering::Acquire);
        // Completions come in send-queue order: positions only grow.
        self.sq_reaped
            .store(d.sq_pos.load(Ordering::Relaxed), Ordering::Release);
        self.walk(batch, |i| self.slots.release_index(i));
        self.slots.release_index(d.index);
    }
}

/// The completion handle of one local invalidation (one or two
/// `IB_WR_LOCAL_INV`, the last signaled): which command it was posted for.
/// Owned by the connection, not the task, so an aborted command's
/// invalidation that completes after libiscsi reused the task cannot
/// complete the task's next command.
pub(crate) struct InvDesc {
    pub(crate) index: u32,
    pub(crate) itt: AtomicU32,
    pub(crate) cookie: AtomicU64,
}

/// The connection's local-invalidation descriptors: one per command that
/// may wait for its invalidation, doubled for aborted commands whose
/// invalidation is still in flight when their task is reused.
pub(crate) struct InvPool {
    pub(crate) descs: KVec<WithCqe<InvDesc>>,
    pub(crate) free: IndexPool,
}

impl InvPool {
    pub(crate) fn new(ctx: *const Ctx) -> Result<Self> {
        let n = INV_DESCS;
        let mut descs = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for index in 0..n {
            descs.push(
                WithCqe::new(
                    ctx,
                    InvDesc {
                        index,
                        itt: AtomicU32::new(0),
                        cookie: AtomicU64::new(0),
                    },
                ),
                GFP_KERNEL,
            )?;
        }
        Ok(InvPool {
            descs,
            free: IndexPool::new(n)?,
        })
    }
}

/// The TMF request on the wire: the first 24 bytes of its BHS (function,
/// LUN, ITT, Referenced Task Tag), recorded by `xmit_mgmt` before the post
/// and taken by its response; the header slot of its Send; and what a
/// successful response still waits for (`proto::task::TmfRelease`).
/// libiscsi sends one TMF at a time (`conn->tmf_state`).
pub(crate) struct TmfInFlight {
    words: [AtomicU64; 3],
    /// Header slot of the request's Send (always signaled); `u32::MAX`
    /// once its completion was seen, or none.
    send_slot: AtomicU32,
    /// `TmfRelease::to_bits`.
    release: AtomicU8,
}

impl TmfInFlight {
    pub(crate) const fn new() -> Self {
        TmfInFlight {
            words: [const { AtomicU64::new(0) }; 3],
            send_slot: AtomicU32::new(u32::MAX),
            release: AtomicU8::new(proto::task::TmfRelease::request_posted().to_bits()),
        }
    }

    /// Records a TMF request about to be posted from header slot `slot`.
    pub(crate) fn record(&self, bhs: &[u8], slot: u32) {
        for (i, w) in self.words.iter().enumerate() {
            let mut b = [0u8; 8];
            if let Some(c) = bhs.get(i * 8..i * 8 + 8) {
                b.copy_from_slice(c);
            }
            w.store(u64::from_ne_bytes(b), Ordering::Release);
        }
        self.release.store(
            proto::task::TmfRelease::request_posted().to_bits(),
            Ordering::Release,
        );
        self.send_slot.store(slot, Ordering::Release);
    }

    /// Whether the Send in header slot `slot` is the TMF request's (true
    /// once: the record is consumed).
    pub(crate) fn is_request_send(&self, slot: u32) -> bool {
        slot != u32::MAX
            && self
                .send_slot
                .compare_exchange(slot, u32::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Applies one event to the release state; returns what the event
    /// returned (true: deliver the held response now). Only the
    /// connection's CQ handler calls it, so events never run
    /// concurrently; the atomic keeps it sound if they did.
    pub(crate) fn update(&self, event: impl Fn(&mut proto::task::TmfRelease) -> bool) -> bool {
        let mut go = false;
        let _ = self
            .release
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                let mut r = proto::task::TmfRelease::from_bits(b);
                go = event(&mut r);
                Some(r.to_bits())
            });
        go
    }

    /// The recorded request if its ITT (bytes 16..20) is `itt`; forgets it.
    pub(crate) fn take(&self, itt: [u8; 4]) -> Option<[u8; 24]> {
        let mut req = [0u8; 24];
        for (i, w) in self.words.iter().enumerate() {
            if let Some(c) = req.get_mut(i * 8..i * 8 + 8) {
                c.copy_from_slice(&w.load(Ordering::Acquire).to_ne_bytes());
            }
        }
        if req[0] & 0x3f != proto::bhs::OP_TMF_REQ || req[16..20] != itt {
            return None;
        }
        self.words[0].store(0, Ordering::Release);
        Some(req)
    }
}

/// The completion handle of the local invalidations a successful TMF
/// Response waits for: which receive buffer holds that response.
pub(crate) struct TmfInvDesc {
    /// `rx index << 32 | length` of the held TMF Response; `NO_HELD`: none.
    pub(crate) held: AtomicU64,
}

pub(crate) const NO_HELD: u64 = u64::MAX;

impl TmfInvDesc {
    pub(crate) const fn new() -> Self {
        TmfInvDesc {
            held: AtomicU64::new(NO_HELD),
        }
    }
}

impl Resources {
    /// Everything a connection allocates, the QP last (on ROUTE_RESOLVED:
    /// `id` has its device and route). `ctx` is the connection the
    /// completion handlers of the descriptors run on; it must outlive
    /// every WR that names them (the owner drains the QP before it drops
    /// the resources).
    ///
    /// Every fallible step comes before the QP: once `create_qp` has
    /// succeeded only infallible steps follow, so an allocation failure
    /// never drops the PD, CQ or MRs under a live QP (locals drop in
    /// reverse order, and nothing here outlives them on error).
    pub(crate) fn new(id: CmIdRef, ctx: *const Ctx) -> Result<KBox<Resources>> {
        let dev = id.device().ok_or_else(ENOTCONN)?;
        let Some(sq_depth) = super::limits::sq_depth(dev.max_qp_wr()) else {
            pr_warn!(
                "setup: the send queue would hold fewer than {} entries (device max_qp_wr {}, sq_depth {}): refused\n",
                SQ_RX_RESERVE + SQ_DRAIN + super::limits::SQ_XMIT_MIN,
                dev.max_qp_wr(),
                crate::sys::params::param_sq_depth()
            );
            return Err(EINVAL);
        };
        // Receive and login buffers lie in order-0 pages, one SGE per page
        // piece (`DmaPages`); a device that takes fewer is refused here
        // rather than by `create_qp` without a word.
        let (recv_sge, send_sge) = (dev.max_sge(true), dev.max_sge(false));
        if recv_sge < RECV_SGE_MAX as u32 || send_sge < SEND_SGE_MAX as u32 {
            pr_warn!(
                "setup: the device takes {} receive and {} send SGEs per work request, fewer than the {} and {} the page-backed buffers need: refused\n",
                recv_sge,
                send_sge,
                RECV_SGE_MAX,
                SEND_SGE_MAX
            );
            return Err(EINVAL);
        }
        let pd = Pd::new(dev)?;
        let cq = Cq::from_pool(dev, CQ_ENTRIES, -1)?;
        let tasks = TaskSlots::new(&pd, MRS, max_pages())?;
        let tx = TxPool::new(dev, ctx, sq_depth)?;
        let invs = InvPool::new(ctx)?;
        let tmf_inv = KBox::new(WithCqe::new(ctx, TmfInvDesc::new()), GFP_KERNEL)?;
        // The ring's buffers and, after them, the login buffer: one area of
        // order-0 pages.
        let bufs = Arc::new(
            DmaPages::new(dev, RX_RING as usize + 1, RX_BUF_LEN, false)?,
            GFP_KERNEL,
        )?;
        let lkey = pd.local_dma_lkey();
        let login_rx = KBox::new(
            WithCqe::new(
                ctx,
                RxDesc::new(&bufs, RX_RING as usize, lkey, true, u16::MAX),
            ),
            GFP_KERNEL,
        )?;
        let login_tx = LoginBuf::new(dev, HDRS + RX_DATA_LEN)?;
        let mut rx = KVec::with_capacity(RX_RING as usize, GFP_KERNEL)?;
        for index in 0..RX_RING as u16 {
            rx.push(
                KBox::new(
                    WithCqe::new(
                        ctx,
                        RxDesc::new(&bufs, usize::from(index), lkey, false, index),
                    ),
                    GFP_KERNEL,
                )?,
                GFP_KERNEL,
            )?;
        }
        let slot = KBox::<Resources>::new_uninit(GFP_KERNEL)?;
        // Header-only command PDUs go inline where the device allows it
        // (rxe: 400 bytes, siw: 80, most HCAs more): asked for first, and
        // without it if the device refuses.
        let want_inline = crate::sys::params::param_inline_sends();
        // (Test only: `inject_qp_send_sge` asks for fewer, so the device
        // refuses the Sends that have more.)
        let send_sge = match crate::sys::params::param_inject_qp_send_sge() {
            0 => SEND_SGE_MAX as u32,
            n => n.min(SEND_SGE_MAX as u32),
        };
        let create = |inline| id.create_qp(&pd, &cq, sq_depth, send_sge, MAX_RECV_WR, inline);
        let (qp, inline_hdrs) = match want_inline.then(|| create(INLINE_LEN)) {
            Some(Ok(qp)) => (qp, true),
            _ => (create(0)?, false),
        };
        // From here on nothing fails.
        Ok(KBox::write(
            slot,
            Resources {
                qp,
                inline_hdrs,
                sq_depth,
                lkey,
                dev,
                tasks,
                tx,
                invs,
                tmf_inv,
                login_rx,
                login_tx,
                rx,
                _cq: cq,
                _pd: pd,
            },
        ))
    }

    /// Whether reading a receive buffer syncs its page pieces
    /// (`DmaPages::needs_sync`; the setup line says).
    pub(crate) fn rx_needs_sync(&self) -> bool {
        self.login_rx.bufs.needs_sync()
    }

    /// What this connection allocated itself (the provider's QP and CQ
    /// memory, and the MRs' page lists, are the device's): the receive
    /// buffers (whole pages of one vmalloc area), the send pool, the login
    /// send buffer (whole pages). Returns (KiB in all, largest contiguous
    /// allocation in bytes: the receive and login buffers' areas are
    /// order-0 pages, their page tables are kvmalloc'ed like the send
    /// descriptors, so the header slots' chunks set it).
    pub(crate) fn memory(&self) -> (usize, usize) {
        let (tx_bytes, tx_largest) = self.tx.memory();
        let rx_bytes = self.login_rx.bufs.bytes();
        let largest = tx_largest.max(kernel::page::PAGE_SIZE);
        let kib = (rx_bytes + tx_bytes + self.login_tx.bytes()).div_ceil(1024);
        (kib, largest)
    }
}
