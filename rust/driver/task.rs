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
//! Contexts: `xmit`/`init` run in process context (libiscsi's xmit work);
//! responses and invalidation completions in softirq (the connection's
//! one CQ); `cleanup` in either.

use super::conn::{IserConn, CMDS_MAX};
use crate::proto;
use crate::proto::task::TaskStags;
use crate::sys::errno::{ENOBUFS, ENOTCONN};
use crate::sys::iscsi::{Conn, Dir, Task, TaskKind, BHS_LEN};
use crate::sys::verbs::{
    Cqe, CqeOwner, Device, DmaSlots, MappedSg, Mr, Pd, RegReq, RemoteAccess, Sge, Wc,
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
    (crate::sys::iscsi::param_max_sectors().clamp(8, 8192) / 8).max(1)
}

/// One fast-registration MR of the pool.
struct MrSlot {
    mr: Mr,
    busy: AtomicBool,
    /// Still valid after its last use (aborted command, or registered for
    /// local access only): invalidate before the next registration.
    dirty: AtomicBool,
}

/// The connection's FRWR MRs: two per command slot (bidirectional
/// commands need a Read and a Write STag). Lock-free: a slot is claimed
/// with a compare-exchange, so any context may take or return one.
pub(crate) struct MrPool {
    slots: KVec<MrSlot>,
    hint: AtomicU32,
}

impl MrPool {
    pub(crate) fn new(pd: &Pd, _ctx: *const IserConn, n: u32, max_pages: u32) -> Result<Self> {
        let mut slots = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(
                MrSlot {
                    mr: Mr::new(pd, max_pages)?,
                    busy: AtomicBool::new(false),
                    dirty: AtomicBool::new(false),
                },
                GFP_KERNEL,
            )?;
            super::counters::live_mr(1);
        }
        Ok(MrPool {
            slots,
            hint: AtomicU32::new(0),
        })
    }

    fn get(&self) -> Option<u16> {
        let n = self.slots.len();
        let start = self.hint.load(Ordering::Relaxed) as usize;
        for k in 0..n {
            let i = (start + k) % n;
            if self.slots[i]
                .busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                self.hint.store(((i + 1) % n) as u32, Ordering::Relaxed);
                return Some(i as u16);
            }
        }
        None
    }

    fn mr(&self, i: u16) -> Option<&Mr> {
        self.slots.get(i as usize).map(|s| &s.mr)
    }

    fn put(&self, i: u16, still_valid: bool) {
        if let Some(s) = self.slots.get(i as usize) {
            if still_valid {
                s.dirty.store(true, Ordering::Relaxed);
            }
            s.busy.store(false, Ordering::Release);
        }
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

/// A send descriptor: the completion handle of one header slot.
#[repr(C)]
pub(crate) struct TxDesc {
    cqe: Cqe,
    index: u32,
}

// SAFETY: `#[repr(C)]` with the Cqe (built by `Cqe::new::<TxDesc>`) first.
unsafe impl CqeOwner for TxDesc {
    type Ctx = IserConn;
    fn done(&self, conn: &IserConn, wc: &Wc<'_>) {
        if let Some(res) = conn.resources() {
            res.tx.slots.release_index(self.index);
        }
        conn.login_tx_done(self.index);
        if !wc.ok() {
            if !wc.flushed() {
                conn.counters.wc_error();
                pr_warn!("send failed, status {}\n", wc.status());
                conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
            }
            return;
        }
        if conn.tx_waiting.swap(false, Ordering::AcqRel) {
            if let Some(c) = conn.iscsi.get() {
                c.queue_xmit();
            }
        }
    }
}

/// Send descriptors for command, Data-Out and management PDUs: one header
/// slot (iSER header + BHS) and one completion handle each.
pub(crate) struct TxPool {
    descs: KVec<TxDesc>,
    slots: DmaSlots,
}

impl TxPool {
    pub(crate) fn new(dev: Device, ctx: *const IserConn, data_outs: u32) -> Result<Self> {
        // Every command and management PDU may also hold one descriptor.
        let n = data_outs + CMDS_MAX + super::conn::MGMT_MAX;
        let mut descs = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for index in 0..n {
            descs.push(
                TxDesc {
                    cqe: Cqe::new::<TxDesc>(ctx),
                    index,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(TxPool {
            descs,
            slots: DmaSlots::new(dev, n, HDRS)?,
        })
    }
}

/// Writes an iSER header and BHS into a claimed header slot.
fn fill_hdr(
    slots: &DmaSlots,
    t: &mut crate::sys::verbs::SlotToken,
    iser: &[u8; proto::iser_hdr::ISER_HDR_LEN],
    bhs: &[u8],
    lkey: u32,
) -> Sge {
    slots.write(t, HDRS, lkey, |buf| {
        buf.fill(0);
        let (a, rest) = buf.split_at_mut(iser.len());
        a.copy_from_slice(iser);
        let n = bhs.len().min(rest.len());
        rest[..n].copy_from_slice(&bhs[..n]);
    })
}

/// Transport data of one libiscsi task (lives in `task->dd_data`,
/// rewritten by `alloc_pdu` at the start of every use).
#[repr(C)]
pub(crate) struct IserTask {
    inv_cqe: Cqe,
    bhs: [u8; BHS_LEN],
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
    /// A response waiting for local invalidation: receive ring index and
    /// received length.
    deferred: Option<(u16, u32)>,
    inv_posted: proto::task::StagList,
}

impl IserTask {
    pub(crate) fn new(conn: *const IserConn) -> Self {
        IserTask {
            inv_cqe: Cqe::new::<IserTask>(conn),
            bhs: [0; BHS_LEN],
            stags: None,
            mrs: [None, None],
            local_only: false,
            local_data: None,
            sg: None,
            cmd_sent: false,
            deferred: None,
            inv_posted: proto::task::StagList::default(),
        }
    }

    pub(crate) fn bhs_ptr(&mut self) -> *mut u8 {
        self.bhs.as_mut_ptr()
    }

    fn itt(&self) -> u32 {
        u32::from_ne_bytes([self.bhs[16], self.bhs[17], self.bhs[18], self.bhs[19]])
    }
}

// SAFETY: `#[repr(C)]` with the Cqe (built by `Cqe::new::<IserTask>`) first.
unsafe impl CqeOwner for IserTask {
    type Ctx = IserConn;
    fn done(&self, conn: &IserConn, wc: &Wc<'_>) {
        inv_done(self.itt(), conn, wc);
    }
}

/// What the receive path does with a SCSI Response.
pub(crate) enum RspAction {
    /// Every STag is invalid: complete it now.
    CompleteNow,
    /// Local invalidation posted; completion follows in `inv_done`.
    Deferred,
}

/// Applies the invalidation rules to a SCSI Response (softirq); `rx` and
/// `len` name its receive buffer, held back if the response must wait.
pub(crate) fn on_scsi_response(
    conn: &IserConn,
    iscsi: Conn,
    pdu: &proto::bhs::TargetPdu<'_>,
    inv: Option<u32>,
    rx: u16,
    len: u32,
) -> core::result::Result<RspAction, proto::ProtoError> {
    let mut task = iscsi.itt_to_ctask::<IserTask>(u32::from_ne_bytes(pdu.itt.0));
    let Some(t) = task.as_mut().and_then(|t| t.data()) else {
        // No such command (aborted, or a bad ITT): libiscsi judges the PDU,
        // but an invalidation naming nothing of ours is an error here.
        return match inv {
            Some(x) => Err(proto::ProtoError::UnknownStag(x)),
            None => Ok(RspAction::CompleteNow),
        };
    };
    let Some(stags) = t.stags.as_mut() else {
        return match inv {
            Some(x) => Err(proto::ProtoError::UnknownStag(x)),
            None => Ok(RspAction::CompleteNow),
        };
    };
    let todo = stags.on_response(inv)?;
    if inv.is_some() {
        conn.counters.remote_inv();
    }
    if todo.is_empty() {
        return Ok(RspAction::CompleteNow);
    }
    let res = conn.resources().ok_or(proto::ProtoError::TaskState)?;
    for s in todo.as_slice() {
        stags.local_invalidate_posted(*s)?;
    }
    t.inv_posted = todo;
    t.deferred = Some((rx, len));
    if res.qp.post_local_inv(&t.inv_cqe, todo.as_slice()).is_err() {
        conn.counters.post_error();
        // Never completable now: the connection fails and libiscsi cleans up.
        conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        return Ok(RspAction::Deferred);
    }
    conn.counters.local_inv(todo.len() as u64);
    Ok(RspAction::Deferred)
}

/// Local invalidation completed (softirq): complete the held response.
fn inv_done(itt: u32, conn: &IserConn, wc: &Wc<'_>) {
    if !wc.ok() {
        if !wc.flushed() {
            conn.counters.wc_error();
            pr_warn!("local invalidate failed, status {}\n", wc.status());
            conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        }
        return;
    }
    let Some(iscsi) = conn.iscsi.get() else {
        return;
    };
    let mut task = iscsi.itt_to_ctask::<IserTask>(itt);
    let Some(td) = task.as_mut().and_then(|t| t.data()) else {
        return;
    };
    let Some((rx, len)) = td.deferred.take() else {
        return;
    };
    let mut ok = true;
    if let Some(st) = td.stags.as_mut() {
        for s in td.inv_posted.as_slice() {
            ok &= st.local_invalidate_completed(*s).is_ok();
        }
        ok &= st.completable();
    }
    if !ok {
        conn.counters.proto_error();
        conn.conn_error(crate::sys::iscsi::ERR_CONN_FAILED);
        return;
    }
    conn.complete_deferred(rx, len);
}

/// `init_task`: nothing to prepare beyond what `alloc_pdu` did.
pub(crate) fn init(_conn: &IserConn, _task: Task<'_, IserTask>) -> Result {
    Ok(())
}

/// `xmit_task` (process context).
pub(crate) fn xmit(conn: &IserConn, mut task: Task<'_, IserTask>) -> Result {
    let res = conn.resources().ok_or(ENOTCONN())?;
    if task.kind() == TaskKind::Mgmt {
        return xmit_mgmt(conn, task);
    }
    if !task.data().ok_or(EINVAL)?.cmd_sent {
        send_command(conn, &mut task)?;
    }
    // Unsolicited Data-Out (iSER §7.3.1, InitialR2T=No): each by a Send
    // whose payload comes straight from the registered buffer.
    let local = task.data().and_then(|d| d.local_data);
    while task.has_unsol_data() {
        let Some(mut slot) = res.tx.slots.claim() else {
            conn.tx_waiting.store(true, Ordering::Release);
            conn.counters.tx_full();
            return Err(ENOBUFS());
        };
        let Some((base, lkey)) = local else {
            res.tx.slots.release(slot);
            return Err(EINVAL);
        };
        let mut hdr = [0u8; BHS_LEN];
        let (off, len) = task.prep_unsol_data_out(&mut hdr);
        let mut iser = [0u8; proto::iser_hdr::ISER_HDR_LEN];
        proto::iser_hdr::IserHeader::control().encode(&mut iser);
        let h = fill_hdr(&res.tx.slots, &mut slot, &iser, &hdr, res.lkey);
        let data = Sge {
            addr: base + off as u64,
            length: len,
            lkey,
        };
        let d = &res.tx.descs[slot.index() as usize];
        if let Err(e) = res.qp.post_send(&[], &[], &d.cqe, &[h, data], true) {
            res.tx.slots.release(slot);
            return Err(e);
        }
        res.tx.slots.posted(slot);
        conn.counters.tx_bytes(len as u64);
        conn.counters.data_out();
    }
    Ok(())
}

/// Registers the command's buffer and sends the command PDU (with its
/// immediate data) in one chain: [local inv] → REG_MR → Send.
fn send_command(conn: &IserConn, task: &mut Task<'_, IserTask>) -> Result {
    let res = conn.resources().ok_or(ENOTCONN())?;
    let (dir, len, _, _) = task.scsi_data();
    let unsol = task.unsol_len();
    let Some(slot) = res.tx.slots.claim() else {
        conn.tx_waiting.store(true, Ordering::Release);
        conn.counters.tx_full();
        return Err(ENOBUFS());
    };
    let mut read = None;
    let mut write = None;
    let mut inv = None;
    let mut reg: Option<(u16, RemoteAccess)> = None;
    if len > 0 && dir != Dir::None {
        let mapped = match task.map_sg(res.dev) {
            Ok(m) => m,
            Err(e) => {
                res.tx.slots.release(slot);
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
            res.tx.slots.release(slot);
            conn.tx_waiting.store(true, Ordering::Release);
            conn.counters.tx_full();
            return Err(ENOBUFS());
        };
        let Some(mr) = res.mrs.mr(i) else {
            res.tx.slots.release(slot);
            return Err(EINVAL);
        };
        if res.mrs.take_dirty(i) {
            inv = Some(mr.rkey());
        }
        // A fresh key for every registration: no STag the target saw
        // before names this one.
        mr.bump_key();
        if let Err(e) = mr.map_sg(&mapped) {
            res.mrs.put(i, inv.is_some());
            res.tx.slots.release(slot);
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
                    va: mr.iova() + unsol as u64,
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
    mut slot: crate::sys::verbs::SlotToken,
    read: Option<proto::iser_hdr::StagVa>,
    write: Option<proto::iser_hdr::StagVa>,
    inv: Option<u32>,
    reg: Option<(u16, RemoteAccess)>,
) -> Result {
    let res = conn.resources().ok_or(ENOTCONN())?;
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
    let h = fill_hdr(
        &res.tx.slots,
        &mut slot,
        &iser,
        &td.bhs[..hdr_len],
        res.lkey,
    );
    let mut sges = [h, h];
    let mut nsge = 1;
    if imm > 0 {
        let Some((base, lkey)) = td.local_data else {
            res.tx.slots.release(slot);
            return Err(EINVAL);
        };
        sges[1] = Sge {
            addr: base,
            length: imm,
            lkey,
        };
        nsge = 2;
    }
    let reg_req = reg.and_then(|(i, access)| res.mrs.mr(i).map(|mr| RegReq { mr, access }));
    let regs = reg_req.as_slice();
    let invs = inv.as_slice();
    td.stags = Some(stags);
    let d = &res.tx.descs[slot.index() as usize];
    if let Err(e) = res.qp.post_send(invs, regs, &d.cqe, &sges[..nsge], true) {
        td.stags = None;
        res.tx.slots.release(slot);
        return Err(e);
    }
    res.tx.slots.posted(slot);
    td.cmd_sent = true;
    if inv.is_some() {
        conn.counters.local_inv(1);
    }
    conn.counters
        .command(dir == Dir::ToDevice, dir == Dir::FromDevice, len as u64);
    conn.counters.tx_bytes(imm as u64);
    Ok(())
}

/// Management PDUs: login, NOP-Out, Text, TMF, Logout.
fn xmit_mgmt(conn: &IserConn, mut task: Task<'_, IserTask>) -> Result {
    let res = conn.resources().ok_or(ENOTCONN())?;
    let iscsi = task.conn();
    let hdr_len = task.hdr_len().min(BHS_LEN);
    let mut iser = [0u8; proto::iser_hdr::ISER_HDR_LEN];
    proto::iser_hdr::IserHeader::control().encode(&mut iser);
    let data_len = task.mgmt_data().len();
    let is_login = iscsi.is_login_task(&task);
    let bhs = task.data().ok_or(EINVAL)?.bhs;
    let Some(mut slot) = res.tx.slots.claim() else {
        conn.tx_waiting.store(true, Ordering::Release);
        return Err(ENOBUFS());
    };
    let d = &res.tx.descs[slot.index() as usize];
    if !is_login && data_len == 0 {
        let h = fill_hdr(&res.tx.slots, &mut slot, &iser, &bhs[..hdr_len], res.lkey);
        if let Err(e) = res.qp.post_send(&[], &[], &d.cqe, &[h], true) {
            res.tx.slots.release(slot);
            return Err(e);
        }
        res.tx.slots.posted(slot);
        return Ok(());
    }
    // Login, and any management PDU with data, go through the login send
    // buffer: header and data in one SGE (at most 8 KiB of data, the login
    // limit; text and NOP-Out data fit it). One such PDU at a time.
    if data_len > super::conn::RX_DATA_LEN {
        res.tx.slots.release(slot);
        return Err(EINVAL);
    }
    let Some(mut ltok) = res.login_tx.claim() else {
        res.tx.slots.release(slot);
        conn.tx_waiting.store(true, Ordering::Release);
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
        conn.post_login_rx()?;
        // Transit to full feature phase (T=1, NSG=3, RFC 7143 §11.12): post
        // the receive ring with the final request.
        if bhs[1] & 0x80 != 0 && bhs[1] & 0x03 == 3 {
            conn.post_rx_ring()?;
        }
    }
    conn.login_tx_posted(slot.index());
    if let Err(e) = res.qp.post_send(&[], &[], &d.cqe, &[sge], true) {
        conn.login_tx_done(slot.index());
        res.login_tx.release(ltok);
        res.tx.slots.release(slot);
        return Err(e);
    }
    res.login_tx.posted(ltok);
    res.tx.slots.posted(slot);
    Ok(())
}

/// `cleanup_task`: unmaps the data and returns the MRs; an MR whose STag
/// may still be valid (the command was aborted) is marked for
/// invalidation before its next registration.
pub(crate) fn cleanup(conn: Option<&IserConn>, mut task: Task<'_, IserTask>) {
    let Some(td) = task.data() else { return };
    let live = td.stags.as_ref().is_some_and(|s| !s.no_live_stags());
    let local_only = td.local_only;
    let mrs = td.mrs;
    td.mrs = [None, None];
    td.stags = None;
    td.deferred = None;
    let sg = td.sg.take();
    if let Some(res) = conn.and_then(|c| c.resources()) {
        for i in mrs.into_iter().flatten() {
            res.mrs.put(i, live || local_only);
        }
    }
    drop(sg);
}
