// SPDX-License-Identifier: GPL-2.0
//! Per-command data path: STag registration (FRWR), the command and
//! Data-Out sends, the response's invalidation rules, and task cleanup.
//!
//! The STag rules themselves live in `proto::task::TaskStags`; this file
//! only executes them: register → advertise → (remote- or locally-)
//! invalidated → completable. A response whose command still has a valid
//! STag is held back, with its receive buffer, until the local
//! invalidation completes (`inv_done`): **no command completes to SCSI
//! while one of its STags is valid.**
//!
//! Contexts: `xmit`/`init` run from libiscsi's `queuecommand` (the host
//! has no xmit workqueue: `xmit_can_sleep` is false) or its management
//! PDU path, under the session's frwd_lock with bottom halves off;
//! responses and invalidation completions in softirq (the connection's
//! one CQ); `cleanup` in either, under libiscsi's back_lock.

use super::conn::{IserConn, CMDS_MAX};
use crate::proto;
use crate::proto::task::TaskStags;
use crate::sys::bhlock::BhSpinLock;
use crate::sys::errno::{ENOBUFS, ENOTCONN};
use crate::sys::iscsi::{Conn, Dir, Task, TaskKind, BHS_LEN};
use crate::sys::pool::IndexPool;
use crate::sys::verbs::{
    CqeHandler, Device, DmaSlots, MappedSg, Mr, Pd, RegReq, RemoteAccess, SendPayload, Sge,
    SlotToken, Wc, WithCqe,
};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use kernel::error::code::EINVAL;
use kernel::prelude::*;

const HDRS: usize = proto::bhs::ISER_HEADERS_LEN;

/// Pages one registration covers: `max_sectors` 512-byte sectors, plus one
/// for a buffer that does not start on a page boundary.
pub(crate) fn max_pages() -> u32 {
    sg_tablesize() + 1
}

/// SG entries per command: with `virt_boundary_mask` = 4K-1 every entry
/// but the first and last is a full page, so `max_sectors`/8 entries.
pub(crate) fn sg_tablesize() -> u32 {
    (crate::sys::params::param_max_sectors().clamp(8, 8192) / 8).max(1)
}

/// One fast-registration MR of the pool.
struct MrSlot {
    mr: Mr,
    /// Still valid after its last use (registered for local access only,
    /// or a command released without a known-complete invalidation):
    /// invalidate before the next registration.
    dirty: AtomicBool,
    /// The command holding the MR, while out of the pool: raw ITT (high
    /// half) tagged with `OWNED` (low half), written before the
    /// registration is posted; 0 in the pool. A successful TMF finds the
    /// MRs of the commands it releases by it.
    owner_itt: AtomicU64,
    /// That command's raw LUN field.
    owner_lun: AtomicU64,
    /// A successful TMF covering the owner posted a LOCAL_INV for this MR
    /// (its response reaches libiscsi only once that completed): the
    /// owner's STag is dead when libiscsi releases it. Cleared at the next
    /// registration.
    tmf_invalidated: AtomicBool,
}

/// Low half of `MrSlot::owner_itt` for an MR out of the pool.
const OWNED: u64 = 1;

/// The connection's FRWR MRs: two per command slot (bidirectional
/// commands need a Read and a Write STag). Lock-free: any context may take
/// or return one.
pub(crate) struct MrPool {
    slots: KVec<MrSlot>,
    free: IndexPool,
}

impl MrPool {
    pub(crate) fn new(pd: &Pd, n: u32, max_pages: u32) -> Result<Self> {
        let mut slots = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(
                MrSlot {
                    mr: Mr::new(pd, max_pages)?,
                    dirty: AtomicBool::new(false),
                    owner_itt: AtomicU64::new(0),
                    owner_lun: AtomicU64::new(0),
                    tmf_invalidated: AtomicBool::new(false),
                },
                GFP_KERNEL,
            )?;
            super::counters::live_mr(1);
        }
        Ok(MrPool {
            slots,
            free: IndexPool::new(n)?,
        })
    }

    fn get(&self) -> Option<u16> {
        self.free.claim().map(|i| i as u16)
    }

    fn mr(&self, i: u16) -> Option<&Mr> {
        self.slots.get(i as usize).map(|s| &s.mr)
    }

    /// Records the command that registers MR `i` (before the post).
    fn set_owner(&self, i: u16, itt: u32, lun: [u8; 8]) {
        if let Some(s) = self.slots.get(i as usize) {
            s.tmf_invalidated.store(false, Ordering::Relaxed);
            s.owner_lun
                .store(u64::from_ne_bytes(lun), Ordering::Relaxed);
            s.owner_itt
                .store(u64::from(itt) << 32 | OWNED, Ordering::Release);
        }
    }

    fn put(&self, i: u16, still_valid: bool) {
        if let Some(s) = self.slots.get(i as usize) {
            if still_valid {
                s.dirty.store(true, Ordering::Relaxed);
            }
            s.owner_itt.store(0, Ordering::Release);
            self.free.release(u32::from(i));
        }
    }

    /// The rkeys of the MRs held by commands in `scope`, each marked as
    /// invalidated by the TMF (the caller posts their LOCAL_INVs).
    fn claim_for_tmf(&self, scope: &proto::task::TmfScope) -> impl Iterator<Item = u32> + '_ {
        let scope = *scope;
        self.slots.iter().filter_map(move |s| {
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

    /// Whether a successful TMF invalidated MR `i` for its current owner.
    fn tmf_invalidated(&self, i: u16) -> bool {
        self.slots
            .get(i as usize)
            .is_some_and(|s| s.tmf_invalidated.load(Ordering::Relaxed))
    }

    /// Takes the slot's "invalidate first" mark.
    fn take_dirty(&self, i: u16) -> bool {
        self.slots
            .get(i as usize)
            .is_some_and(|s| s.dirty.swap(false, Ordering::Relaxed))
    }
}

impl Drop for MrPool {
    fn drop(&mut self) {
        super::counters::live_mr(-(self.slots.len() as i64));
    }
}

/// One Send in `signal_every` (module parameter, at most `SIGNAL_EVERY`)
/// is signaled; the others complete silently
/// and their header slots are released by the next signaled completion
/// (an RC send queue completes in order). ib_iser signals every Send: this
/// halves the completions per command. Management and login PDUs are
/// always signaled.
pub(crate) const SIGNAL_EVERY: usize = 16;

/// The `signal_every` module parameter, clamped to `1..=SIGNAL_EVERY`.
fn signal_every() -> usize {
    (crate::sys::params::param_signal_every() as usize).clamp(1, SIGNAL_EVERY)
}

/// A send descriptor: the completion handle of one header slot.
pub(crate) struct TxDesc {
    index: u32,
    /// The command whose pages this Send read, if it is the last Send of
    /// that command's data (raw ITT and cookie; cookie 0: none). Written
    /// before the post; its completion lets the command complete
    /// (`data_sent`).
    owner_itt: AtomicU32,
    owner_cookie: AtomicU64,
    /// Unsignaled slots posted before this (signaled) Send: released with
    /// it. Written before the post, read by its completion.
    batch: [AtomicU32; SIGNAL_EVERY - 1],
    batch_len: AtomicU32,
}

impl CqeHandler for TxDesc {
    type Ctx = IserConn;
    fn done(this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        if !wc.ok() {
            // A flushed WR (unsignaled ones too, and the REG_MR/LOCAL_INV
            // of a chain, which share this handle) releases nothing: the
            // connection is going away and teardown frees every slot.
            if !wc.flushed() {
                conn.counters.wc_error();
                pr_warn!("send failed, status {}\n", wc.status());
                conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
            }
            return;
        }
        // Only a signaled Send completes successfully here. Everything the
        // descriptor says about this Send (its owner, whether it was the
        // TMF's or the login buffer's) is read before its slot is
        // released: from then on xmit, on another CPU, may claim the slot
        // and overwrite the descriptor for its own Send.
        let cookie = this.owner_cookie.swap(0, Ordering::AcqRel);
        let owner_itt = this.owner_itt.load(Ordering::Relaxed);
        let tmf_send = conn.tmf.is_request_send(this.index);
        conn.login_tx_done(this.index);
        if let Some(res) = conn.resources() {
            let n = this.batch_len.swap(0, Ordering::Acquire) as usize;
            for b in this.batch.iter().take(n) {
                res.tx.slots.release_index(b.load(Ordering::Relaxed));
            }
            res.tx.slots.release_index(this.index);
        }
        if tmf_send && conn.tmf.update(|r| r.send_completed()) {
            deliver_held_tmf(conn);
        }
        if cookie != 0 {
            data_sent(owner_itt, cookie, conn);
        }
    }
}

/// Slots of the unsignaled Sends posted since the last signaled one.
struct Unsignaled {
    idx: [u32; SIGNAL_EVERY - 1],
    n: usize,
}

/// Send descriptors for command, Data-Out and management PDUs: one header
/// slot (iSER header + BHS) and one completion handle each.
pub(crate) struct TxPool {
    /// ~90 bytes each, thousands of them: a `KVVec` (kvmalloc), so a
    /// reconnect never needs a high-order block for them.
    descs: KVVec<WithCqe<TxDesc>>,
    slots: DmaSlots,
    /// Taken in process context (xmit, under libiscsi's frwd_lock) only;
    /// BH-disabling anyway, so it is safe from any context. Innermost lock
    /// of iser-rs (ib_post_send's provider lock nests inside it).
    unsignaled: BhSpinLock<Unsignaled>,
    /// One Send in this many is signaled (`signal_every()` at setup).
    signal_every: usize,
}

impl TxPool {
    pub(crate) fn new(dev: Device, ctx: *const IserConn, data_outs: u32) -> Result<Self> {
        // Every command and management PDU may also hold one descriptor,
        // and up to SIGNAL_EVERY - 1 released ones wait for the next
        // signaled completion.
        let n = data_outs + CMDS_MAX + super::conn::MGMT_MAX + SIGNAL_EVERY as u32;
        let mut descs = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        for index in 0..n {
            descs.push(
                WithCqe::new(
                    ctx,
                    TxDesc {
                        index,
                        owner_itt: AtomicU32::new(0),
                        owner_cookie: AtomicU64::new(0),
                        batch: [const { AtomicU32::new(0) }; SIGNAL_EVERY - 1],
                        batch_len: AtomicU32::new(0),
                    },
                ),
                GFP_KERNEL,
            )?;
        }
        Ok(TxPool {
            descs,
            slots: DmaSlots::new(dev, n, HDRS)?,
            unsignaled: BhSpinLock::new(Unsignaled {
                idx: [0; SIGNAL_EVERY - 1],
                n: 0,
            })?,
            signal_every: signal_every(),
        })
    }

    /// Bytes this pool allocated (descriptors, header slots) and the
    /// largest single allocation among them that needs contiguous pages
    /// (the descriptor table is a `KVVec`: page-sized pieces at worst).
    pub(crate) fn memory(&self) -> (usize, usize) {
        let descs = self.descs.len() * core::mem::size_of::<WithCqe<TxDesc>>();
        (descs + self.slots.bytes(), self.slots.largest_chunk())
    }

    /// Posts `[invs] → [regs] → Send(payload)` using header slot `slot`,
    /// signaled if `always_signal`, if it is the last Send of a command's
    /// data (`owner`: raw ITT and cookie, told when it completes), or if it
    /// is the `signal_every`th. On error the slot is released and nothing
    /// was posted.
    #[allow(clippy::too_many_arguments)]
    fn post(
        &self,
        qp: crate::sys::verbs::QpRef,
        invs: &[u32],
        regs: &[RegReq<'_>],
        slot: SlotToken<'_>,
        payload: SendPayload<'_>,
        always_signal: bool,
        owner: Option<(u32, u64)>,
    ) -> Result {
        // A token dropped on the error paths below releases its slot.
        let Some(d) = self.descs.get(slot.index() as usize) else {
            return Err(EINVAL);
        };
        let (itt, cookie) = owner.unwrap_or((0, 0));
        d.owner_itt.store(itt, Ordering::Relaxed);
        d.owner_cookie.store(cookie, Ordering::Release);
        let r = self.unsignaled.with(|u| {
            let signal = always_signal || owner.is_some() || u.n + 1 >= self.signal_every;
            if signal {
                for (dst, src) in d.batch.iter().zip(&u.idx[..u.n]) {
                    dst.store(*src, Ordering::Relaxed);
                }
                d.batch_len.store(u.n as u32, Ordering::Release);
            }
            let r = qp.post_send(invs, regs, d.cqe(), payload, signal);
            match (&r, signal) {
                (Err(_), _) => {
                    d.batch_len.store(0, Ordering::Relaxed);
                    d.owner_cookie.store(0, Ordering::Relaxed);
                }
                (Ok(()), true) => u.n = 0,
                (Ok(()), false) => {
                    u.idx[u.n] = slot.index();
                    u.n += 1;
                }
            }
            r
        });
        match r {
            Ok(()) => {
                self.slots.posted(slot);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// A command's ITT as on the wire (BHS bytes 16..20), in the form libiscsi's
/// `iscsi_itt_to_ctask` takes it back.
fn cmd_itt(bhs: &[u8; BHS_LEN]) -> u32 {
    u32::from_ne_bytes([bhs[16], bhs[17], bhs[18], bhs[19]])
}

/// The iSER header and BHS of a PDU as sent (`HDRS` bytes, zero-padded).
fn hdr_bytes(iser: &[u8; proto::iser_hdr::ISER_HDR_LEN], bhs: &[u8]) -> [u8; HDRS] {
    let mut out = [0u8; HDRS];
    let (a, rest) = out.split_at_mut(iser.len());
    a.copy_from_slice(iser);
    let n = bhs.len().min(rest.len());
    rest[..n].copy_from_slice(&bhs[..n]);
    out
}

/// Writes an iSER header and BHS into a claimed header slot.
fn fill_hdr(
    slots: &DmaSlots,
    t: &mut crate::sys::verbs::SlotToken<'_>,
    iser: &[u8; proto::iser_hdr::ISER_HDR_LEN],
    bhs: &[u8],
    lkey: u32,
) -> Sge {
    write_hdrs(slots, t, &hdr_bytes(iser, bhs), lkey)
}

/// Writes prepared headers (`hdr_bytes`) into a claimed header slot.
fn write_hdrs(slots: &DmaSlots, t: &mut SlotToken<'_>, hdrs: &[u8; HDRS], lkey: u32) -> Sge {
    slots.write(t, HDRS, lkey, |buf| {
        let n = buf.len().min(HDRS);
        buf[..n].copy_from_slice(&hdrs[..n]);
    })
}

/// Transport data of one libiscsi task (lives in `task->dd_data`,
/// rewritten by `alloc_pdu` at the start of every use).
#[repr(C)]
pub(crate) struct IserTask {
    bhs: [u8; BHS_LEN],
    /// Names this command among all sent on the connection (0: none): a
    /// local invalidation's completion completes the response only if the
    /// task still carries the cookie it was posted for.
    cookie: u64,
    stags: Option<TaskStags>,
    /// MR pool slots: [read, write].
    mrs: [Option<u16>; 2],
    /// Registered for local access only (fully unsolicited write).
    local_only: bool,
    /// Where the Sends of this command's data (immediate and unsolicited
    /// Data-Out) find it: (base address, lkey).
    local_data: Option<(u64, u32)>,
    sg: Option<MappedSg>,
    cmd_sent: bool,
    /// A Send that read the command's pages (immediate data, unsolicited
    /// Data-Out) may still be read by the device (a retransmission after
    /// a lost ACK): the command must not complete before its last such
    /// Send completed (`data_sent`).
    send_pending: bool,
    /// A response waiting for local invalidation or for `send_pending`:
    /// receive ring index and received length.
    deferred: Option<(u16, u32)>,
    inv_posted: proto::task::StagList,
}

impl IserTask {
    pub(crate) fn new(_conn: *const IserConn) -> Self {
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
        }
    }

    pub(crate) fn bhs_ptr(&mut self) -> *mut u8 {
        self.bhs.as_mut_ptr()
    }
}

/// The completion handle of one local invalidation (one or two
/// `IB_WR_LOCAL_INV`, the last signaled): which command it was posted for.
/// Owned by the connection, not the task, so an aborted command's
/// invalidation that completes after libiscsi reused the task cannot
/// complete the task's next command.
pub(crate) struct InvDesc {
    index: u32,
    itt: AtomicU32,
    cookie: AtomicU64,
}

impl CqeHandler for InvDesc {
    type Ctx = IserConn;
    fn done(this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        if !wc.ok() {
            // Flushed (the unsignaled first WR of a pair too): the
            // connection is going away; teardown frees the descriptor.
            if !wc.flushed() {
                conn.counters.wc_error();
                pr_warn!("local invalidate failed, status {}\n", wc.status());
                conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
            }
            return;
        }
        let itt = this.itt.load(Ordering::Acquire);
        let cookie = this.cookie.load(Ordering::Acquire);
        if let Some(res) = conn.resources() {
            res.invs.free.release(this.index);
        }
        inv_done(itt, cookie, conn);
    }
}

/// The connection's local-invalidation descriptors: one per command that
/// may wait for its invalidation, doubled for aborted commands whose
/// invalidation is still in flight when their task is reused.
pub(crate) struct InvPool {
    descs: KVec<WithCqe<InvDesc>>,
    free: IndexPool,
}

impl InvPool {
    pub(crate) fn new(ctx: *const IserConn) -> Result<Self> {
        let n = 2 * CMDS_MAX;
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
    fn record(&self, bhs: &[u8], slot: u32) {
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
    fn is_request_send(&self, slot: u32) -> bool {
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
    fn update(&self, event: impl Fn(&mut proto::task::TmfRelease) -> bool) -> bool {
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
    fn take(&self, itt: [u8; 4]) -> Option<[u8; 24]> {
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
    held: AtomicU64,
}

const NO_HELD: u64 = u64::MAX;

impl TmfInvDesc {
    pub(crate) const fn new() -> Self {
        TmfInvDesc {
            held: AtomicU64::new(NO_HELD),
        }
    }
}

impl CqeHandler for TmfInvDesc {
    type Ctx = IserConn;
    fn done(_this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        if !wc.ok() {
            // Flushed: the connection is going away and the response is
            // never delivered; recovery fails the commands once the QP is
            // drained (and no other QP shares the PD of their MRs).
            if !wc.flushed() {
                conn.counters.wc_error();
                pr_warn!(
                    "local invalidate after TMF failed, status {}\n",
                    wc.status()
                );
                conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
            }
            return;
        }
        if conn.tmf.update(|r| r.invalidations_completed()) {
            deliver_held_tmf(conn);
        }
    }
}

/// Hands the held TMF Response to libiscsi (softirq): everything it
/// waited for completed.
fn deliver_held_tmf(conn: &IserConn) {
    let held = match conn.resources() {
        Some(res) => res.tmf_inv.held.swap(NO_HELD, Ordering::AcqRel),
        None => return,
    };
    if held != NO_HELD {
        conn.complete_deferred((held >> 32) as u16, held as u32);
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
        return RspAction::CompleteNow;
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
    for rkey in res.mrs.claim_for_tmf(&scope) {
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
pub(crate) fn on_scsi_response(
    conn: &IserConn,
    iscsi: Conn,
    pdu: &proto::bhs::TargetPdu<'_>,
    inv: Option<u32>,
    rx: u16,
    len: u32,
) -> core::result::Result<RspAction, proto::ProtoError> {
    let itt = u32::from_ne_bytes(pdu.itt.0);
    let r = iscsi.with_ctask::<IserTask, _>(itt, |task| {
        let Some(mut task) = task else {
            return Ok(RspOutcome::NoTask);
        };
        let Some(t) = task.data() else {
            return Ok(RspOutcome::NoTask);
        };
        let Some(stags) = t.stags.as_mut() else {
            return Ok(RspOutcome::NoTask);
        };
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
fn then(conn: &IserConn, step: Then) {
    match step {
        Then::Nothing => {}
        Then::Complete(rx, len) => conn.complete_deferred(rx, len),
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
fn on_command(conn: &IserConn, itt: u32, cookie: u64, f: impl FnOnce(&mut IserTask) -> Then) {
    let Some(iscsi) = conn.iscsi.get() else {
        return;
    };
    let step = iscsi.with_ctask::<IserTask, _>(itt, |task| {
        let Some(mut task) = task else {
            return Then::Nothing;
        };
        match task.data() {
            Some(td) if td.cookie == cookie => f(td),
            _ => Then::Nothing,
        }
    });
    then(conn, step);
}

/// Local invalidation completed (softirq): complete the held response if
/// nothing else holds it.
fn inv_done(itt: u32, cookie: u64, conn: &IserConn) {
    on_command(conn, itt, cookie, |td| {
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
/// else holds it.
fn data_sent(itt: u32, cookie: u64, conn: &IserConn) {
    on_command(conn, itt, cookie, |td| {
        td.send_pending = false;
        completable(td)
    });
}

/// `init_task`: nothing to prepare beyond what `alloc_pdu` did.
pub(crate) fn init(_conn: &IserConn, _task: Task<'_, IserTask>) -> Result {
    Ok(())
}

/// `xmit_task`: called by libiscsi with the session's frwd_lock held (BH
/// off) from `queuecommand`, or from its management PDU path.
///
/// Every header slot the call needs is reserved before anything is posted:
/// once the command PDU is on the wire a failure here would make libiscsi
/// hand the command (and its CmdSN) out again.
///
/// Out of send resources (`ENOBUFS`, counted as `tx_full`): the host has
/// no xmit work (`xmit_can_sleep` false), so libiscsi answers
/// `queuecommand` with TARGET_BUSY and the SCSI midlayer retries the
/// command; a refused management PDU fails to its sender. Nothing here
/// waits for a completion to kick a retry.
pub(crate) fn xmit(conn: &IserConn, mut task: Task<'_, IserTask>) -> Result {
    let res = conn.resources().ok_or_else(ENOTCONN)?;
    if task.kind() == TaskKind::Mgmt {
        return xmit_mgmt(conn, task);
    }
    let cmd_sent = task.data().ok_or(EINVAL)?.cmd_sent;
    let unsol_pdus = task.unsol_pdus_left();
    let need = u32::from(!cmd_sent) + unsol_pdus;
    let Some(mut rsv) = res.tx.slots.reserve(need) else {
        conn.counters.tx_full();
        return Err(ENOBUFS());
    };
    // Once the command is posted its response may be handled on another
    // CPU at any moment: the transport data is not touched after the post
    // (`send_command` hands back what the Data-Outs need).
    let local = if cmd_sent {
        task.data().and_then(|d| d.local_data)
    } else {
        let slot = rsv.take().ok_or_else(ENOBUFS)?;
        send_command(conn, &mut task, slot)?
    };
    if unsol_pdus == 0 {
        return Ok(());
    }
    // Unsolicited Data-Out (iSER §7.3.1, InitialR2T=No): each by a Send
    // whose payload comes straight from the command's buffer. The target
    // answers only after the last of them, so the task stays ours here.
    //
    // The command PDU is on the wire: from here on a failure fails the
    // connection (libiscsi then fails the command and the midlayer retries
    // it on the next one) and xmit still answers success, because an error
    // would make libiscsi hand the command's CmdSN out again. The failure
    // is reported through `fail_conn_in_xmit`: libiscsi holds the
    // session's frwd_lock around this call.
    while task.has_unsol_data() {
        let (Some(mut slot), Some((base, lkey))) = (rsv.take(), local) else {
            // Reserved above / set by send_command: unreachable unless
            // libiscsi changed the task under us.
            conn.counters.proto_error();
            conn.fail_in_xmit(&task, crate::sys::iscsi::ERR_CONN_FAILED);
            return Ok(());
        };
        let mut hdr = [0u8; BHS_LEN];
        let (off, len) = task.prep_unsol_data_out(&mut hdr);
        // The last Data-Out (F bit) tells the command its pages are read.
        let owner = if hdr[1] & proto::bhs::FLAG_FINAL != 0 {
            task.data().map(|d| (cmd_itt(&d.bhs), d.cookie))
        } else {
            None
        };
        let mut iser = [0u8; proto::iser_hdr::ISER_HDR_LEN];
        proto::iser_hdr::IserHeader::control().encode(&mut iser);
        let h = fill_hdr(&res.tx.slots, &mut slot, &iser, &hdr, res.lkey);
        let data = Sge {
            addr: base + u64::from(off),
            length: len,
            lkey,
        };
        if res
            .tx
            .post(
                res.qp,
                &[],
                &[],
                slot,
                SendPayload::Sges(&[h, data]),
                false,
                owner,
            )
            .is_err()
        {
            conn.counters.post_error();
            conn.fail_in_xmit(&task, crate::sys::iscsi::ERR_CONN_FAILED);
            return Ok(());
        }
        task.unsol_data_out_posted();
        conn.counters.tx_bytes(u64::from(len));
        conn.counters.data_out();
    }
    Ok(())
}

/// Registers the command's buffer and sends the command PDU (with its
/// immediate data) in one chain: [local inv] → REG_MR → Send.
/// Returns where the command's data lies for the Data-Out Sends.
fn send_command(
    conn: &IserConn,
    task: &mut Task<'_, IserTask>,
    slot: SlotToken<'_>,
) -> Result<Option<(u64, u32)>> {
    let res = conn.resources().ok_or_else(ENOTCONN)?;
    let (dir, len, _, _) = task.scsi_data();
    let unsol = task.unsol_len();
    let mut read = None;
    let mut write = None;
    let mut inv = None;
    let mut reg: Option<(u16, RemoteAccess)> = None;
    if len > 0 && dir != Dir::None {
        let mapped = match task.map_sg(res.dev) {
            Ok(m) => m,
            Err(e) => {
                return Err(e);
            }
        };
        // A write whose data is all unsolicited and contiguous in DMA space
        // needs no registration at all: its Sends take the data through the
        // PD's local DMA lkey (local access only; nothing is advertised).
        if dir == Dir::ToDevice && len <= unsol {
            if let Some(addr) = mapped.single_segment() {
                let td = task.data().ok_or(EINVAL)?;
                td.local_data = Some((addr, res.lkey));
                td.sg = Some(mapped);
                return post_command(conn, task, slot, None, None, None, None);
            }
        }
        let Some(i) = res.mrs.get() else {
            conn.counters.tx_full();
            return Err(ENOBUFS());
        };
        let Some(mr) = res.mrs.mr(i) else {
            res.mrs.put(i, false);
            return Err(EINVAL);
        };
        {
            let b = &task.data().ok_or(EINVAL)?.bhs;
            let mut lun = [0u8; 8];
            lun.copy_from_slice(&b[8..16]);
            res.mrs.set_owner(i, cmd_itt(b), lun);
        }
        if res.mrs.take_dirty(i) {
            inv = Some(mr.rkey());
        }
        // A fresh key for every registration: no STag the target saw
        // before names this one.
        mr.bump_key();
        if let Err(e) = mr.map_sg(&mapped) {
            res.mrs.put(i, inv.is_some());
            return Err(e);
        }
        let td = task.data().ok_or(EINVAL)?;
        td.sg = Some(mapped);
        if dir == Dir::ToDevice {
            td.mrs[1] = Some(i);
            td.local_data = Some((mr.iova(), mr.lkey()));
            if len > unsol {
                // The solicited rest is RDMA-Read by the target from the
                // Write STag, at the offset where unsolicited data ends.
                write = Some(proto::iser_hdr::StagVa {
                    stag: mr.rkey(),
                    va: mr.iova() + u64::from(unsol),
                });
                reg = Some((i, RemoteAccess::Read));
            } else {
                // Fully unsolicited: local access only, never advertised.
                td.local_only = true;
                reg = Some((i, RemoteAccess::LocalOnly));
            }
        } else {
            td.mrs[0] = Some(i);
            read = Some(proto::iser_hdr::StagVa {
                stag: mr.rkey(),
                va: mr.iova(),
            });
            reg = Some((i, RemoteAccess::Write));
        }
        conn.counters.registration();
    }
    post_command(conn, task, slot, read, write, inv, reg)
}

/// Sends the command PDU of a prepared task: [local inv] → [REG_MR] → Send
/// of the iSER header, BHS and immediate data.
fn post_command(
    conn: &IserConn,
    task: &mut Task<'_, IserTask>,
    mut slot: SlotToken<'_>,
    read: Option<proto::iser_hdr::StagVa>,
    write: Option<proto::iser_hdr::StagVa>,
    inv: Option<u32>,
    reg: Option<(u16, RemoteAccess)>,
) -> Result<Option<(u64, u32)>> {
    let res = conn.resources().ok_or_else(ENOTCONN)?;
    let (dir, len, _, _) = task.scsi_data();
    let imm = task.imm_count();
    let hdr_len = task.hdr_len().min(BHS_LEN);
    let remote_inv = conn.remote_inv.load(Ordering::Acquire);
    let mut stags = TaskStags::new(read.map(|r| r.stag), write.map(|w| w.stag), remote_inv)
        .map_err(|_| EINVAL)?;
    stags.advertise().map_err(|_| EINVAL)?;
    let mut iser = [0u8; proto::iser_hdr::ISER_HDR_LEN];
    proto::iser_hdr::IserHeader { read, write }.encode(&mut iser);
    let td = task.data().ok_or(EINVAL)?;
    let hdrs = hdr_bytes(&iser, &td.bhs[..hdr_len]);
    let mut sges = [Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    }; 2];
    let payload = if imm == 0 && res.inline_hdrs {
        // Header only: copied into the work request by the provider. The
        // header slot is still claimed: its descriptor is the Send's
        // completion handle.
        SendPayload::Inline(&hdrs)
    } else {
        sges[0] = write_hdrs(&res.tx.slots, &mut slot, &hdrs, res.lkey);
        if imm == 0 {
            SendPayload::Sges(&sges[..1])
        } else {
            let Some((base, lkey)) = td.local_data else {
                return Err(EINVAL);
            };
            sges[1] = Sge {
                addr: base,
                length: imm,
                lkey,
            };
            SendPayload::Sges(&sges)
        }
    };
    let reg_req = reg.and_then(|(i, access)| res.mrs.mr(i).map(|mr| RegReq { mr, access }));
    let regs = reg_req.as_slice();
    let invs = inv.as_slice();
    let data_outs = task.has_unsol_data();
    let td = task.data().ok_or(EINVAL)?;
    // Everything the response path reads is in place before the post: the
    // response may be handled on another CPU before `post` returns.
    td.stags = Some(stags);
    td.cmd_sent = true;
    td.cookie = conn.next_cookie();
    // The Sends of immediate data and unsolicited Data-Out read the
    // command's pages; the last of them is signaled and tells the command
    // (in-order send queue: its completion implies the others').
    td.send_pending = imm > 0 || data_outs;
    let owner = (imm > 0 && !data_outs).then(|| (cmd_itt(&td.bhs), td.cookie));
    let local = td.local_data;
    if let Err(e) = res.tx.post(res.qp, invs, regs, slot, payload, false, owner) {
        td.stags = None;
        td.cmd_sent = false;
        td.send_pending = false;
        return Err(e);
    }
    if inv.is_some() {
        conn.counters.local_inv(1);
    }
    conn.counters
        .command(dir == Dir::ToDevice, dir == Dir::FromDevice, u64::from(len));
    conn.counters.tx_bytes(u64::from(imm));
    Ok(local)
}

/// Management PDUs: login, NOP-Out, Text, TMF, Logout.
fn xmit_mgmt(conn: &IserConn, mut task: Task<'_, IserTask>) -> Result {
    let res = conn.resources().ok_or_else(ENOTCONN)?;
    let iscsi = task.conn();
    let hdr_len = task.hdr_len().min(BHS_LEN);
    let mut iser = [0u8; proto::iser_hdr::ISER_HDR_LEN];
    proto::iser_hdr::IserHeader::control().encode(&mut iser);
    let data_len = task.mgmt_data().len();
    let is_login = iscsi.is_login_task(&task);
    let bhs = task.data().ok_or(EINVAL)?.bhs;
    let Some(mut slot) = res.tx.slots.claim() else {
        return Err(ENOBUFS());
    };
    if bhs[0] & 0x3f == proto::bhs::OP_TMF_REQ {
        conn.tmf.record(&bhs[..24], slot.index());
    }
    if !is_login && data_len == 0 {
        let h = fill_hdr(&res.tx.slots, &mut slot, &iser, &bhs[..hdr_len], res.lkey);
        return res
            .tx
            .post(res.qp, &[], &[], slot, SendPayload::Sges(&[h]), true, None);
    }
    // Login, and any management PDU with data, go through the login send
    // buffer: header and data in one SGE (at most 8 KiB of data, the login
    // limit; text and NOP-Out data fit it). One such PDU at a time.
    if data_len > super::conn::RX_DATA_LEN {
        return Err(EINVAL);
    }
    let Some(mut ltok) = res.login_tx.claim() else {
        return Err(ENOBUFS());
    };
    let data = task.mgmt_data();
    let sge = res
        .login_tx
        .write(&mut ltok, HDRS + data_len, res.lkey, |buf| {
            let (h, rest) = buf.split_at_mut(HDRS);
            h.fill(0);
            h[..iser.len()].copy_from_slice(&iser);
            h[iser.len()..iser.len() + hdr_len].copy_from_slice(&bhs[..hdr_len]);
            rest.copy_from_slice(data);
        });
    if is_login {
        // Transit to full feature phase (T=1, NSG=3, RFC 7143 §11.12): post
        // the receive ring with the final request.
        let posted = conn.post_login_rx().and_then(|()| {
            if bhs[1] & 0x80 != 0 && bhs[1] & 0x03 == 3 {
                conn.post_rx_ring()
            } else {
                Ok(())
            }
        });
        // Nothing was sent on an error: the header slot and the login
        // buffer go back as their tokens drop (the login task is
        // libiscsi's only one).
        posted?;
    }
    let idx = slot.index();
    conn.login_tx_posted(idx);
    if let Err(e) = res.tx.post(
        res.qp,
        &[],
        &[],
        slot,
        SendPayload::Sges(&[sge]),
        true,
        None,
    ) {
        conn.login_tx_done(idx);
        return Err(e);
    }
    res.login_tx.posted(ltok);
    Ok(())
}

/// `cleanup_task`: unmaps the data and returns the MRs.
///
/// By the time libiscsi releases a command its STags are dead on every
/// path: invalidated by its response's rules, by the local invalidations
/// of a successful TMF covering it (`MrPool::tmf_invalidated`), or
/// unreachable because the connection's QP is flushed (its own PD: no other
/// QP can use them) or destroyed. A release that finds an STag valid on a
/// live QP breaks that rule: it is counted (`released_valid_stags`, which
/// the guest cases check stays 0), logged once per connection, and the MR
/// is invalidated before its next registration. An MR registered for local
/// access only (never advertised) is invalidated that way too.
pub(crate) fn cleanup(conn: Option<&IserConn>, mut task: Task<'_, IserTask>) {
    let Some(td) = task.data() else { return };
    let live = td.stags.as_ref().is_some_and(|s| !s.no_live_stags());
    let local_only = td.local_only;
    let mrs = td.mrs;
    td.mrs = [None, None];
    td.stags = None;
    let held = td.deferred.take();
    td.send_pending = false;
    td.cookie = 0;
    let sg = td.sg.take();
    if let (Some(c), Some((rx, _))) = (conn, held) {
        // A response held for this command will never be delivered: its
        // receive buffer goes back to the ring.
        c.return_rx(rx);
    }
    if let Some(c) = conn {
        if let Some(res) = c.resources() {
            for i in mrs.into_iter().flatten() {
                let valid = live && !res.mrs.tmf_invalidated(i);
                if valid && !c.qp_flushed() && c.counters.released_valid() == 0 {
                    pr_err!(
                        "STag guarantee broken: a command was released with a valid STag on a live QP (released_valid_stags)\n"
                    );
                }
                res.mrs.put(i, valid || local_only);
            }
        }
    }
    drop(sg);
}
