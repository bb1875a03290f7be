// SPDX-License-Identifier: GPL-2.0
//! The transmit path: `xmit_task` for commands (FRWR registration and the
//! command PDU in one chain, immediate data, unsolicited Data-Out) and
//! management PDUs (login, Text, NOP-Out, TMF, Logout), and the Send
//! completions that release header slots and tell a command its pages
//! are read.
//!
//! Contexts: `xmit`/`init` run from libiscsi's `queuecommand` (the host
//! has no xmit workqueue: `xmit_can_sleep` is false) or its management
//! PDU path, under the session's frwd_lock with bottom halves off; the
//! Send completions in softirq (the connection's one CQ).

use super::conn::IserConn;
use super::limits::{CMD_CHAIN_MAX, HDRS, RX_DATA_LEN};
use super::resources::{InlineSend, MrSlot, Resources, Signal, TaskSlot, TxDesc};
use super::task::{data_sent, deliver_held_tmf, IserTask};
use crate::proto;
use crate::proto::task::TaskStags;
use crate::sys::errno::{ENOBUFS, ENOTCONN};
use crate::sys::iscsi::{Dir, Task, TaskKind, BHS_LEN};
use crate::sys::verbs::{
    CqeHandler, DmaSlots, RegReq, RemoteAccess, SendPayload, Sge, SlotToken, Wc, WithCqe,
};
use core::sync::atomic::Ordering;
use kernel::error::code::EINVAL;
use kernel::prelude::*;

/// A Send completed (softirq): only signaled ones, and failed or flushed
/// WRs of any kind that name a send descriptor.
impl CqeHandler for TxDesc {
    type Ctx = IserConn;
    fn done(this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        // A flushed WR (unsignaled ones too, and the REG_MR/LOCAL_INV of a
        // chain, which share this handle) releases nothing: the connection
        // is going away and teardown frees every slot.
        if conn.wc_failed(wc, "send") {
            return;
        }
        // Only a signaled Send completes successfully here. Everything the
        // descriptor says about this Send (its owner, whether it was the
        // TMF's or the login buffer's) is read before its slot is
        // released: from then on xmit, on another CPU, may claim the slot
        // and overwrite the descriptor for its own Send.
        let cookie = this.owner_cookie.swap(0, Ordering::AcqRel);
        let owner_itt = this.owner_itt.load(Ordering::Relaxed);
        // A Send that names a command (`cookie`) is that command's: never
        // the TMF request's nor the login buffer's, which `xmit_mgmt` posts
        // without an owner, and whose slot no command can hold before
        // their own completion released it. Only an ownerless Send asks.
        let tmf_send = cookie == 0 && conn.tmf.is_request_send(this.index);
        if cookie == 0 {
            conn.login_tx_done(this.index);
        }
        // The resources for the slot's release and the command's meeting
        // (step 24), read in this softirq (no RCU call of its own).
        let bh = wc.bh();
        let res = conn.resources_in(bh);
        if let Some(res) = res {
            res.tx.send_completed(this);
        }
        if tmf_send && conn.tmf.update(|r| r.send_completed()) {
            deliver_held_tmf(bh, conn);
        }
        if cookie != 0 {
            data_sent(bh, owner_itt, cookie, conn, res);
        }
    }
}

/// A failed or flushed work request of an unsignaled inline command chain
/// (softirq): the connection's failure, nothing to release (no slot was
/// held). A successful completion never comes: those Sends are unsignaled.
impl CqeHandler for InlineSend {
    type Ctx = IserConn;
    fn done(_this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        conn.wc_failed(wc, "send");
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

/// Writes a PDU's iSER header and BHS into a claimed header slot, zeros
/// past the header length libiscsi gave (`hdr_len`): fixed-size copies,
/// no assembly on the stack.
fn write_hdr_slot(
    slots: &DmaSlots,
    t: &mut SlotToken<'_>,
    iser: &[u8; proto::iser_hdr::ISER_HDR_LEN],
    bhs: &[u8; BHS_LEN],
    hdr_len: usize,
    lkey: u32,
) -> Sge {
    slots.write(t, HDRS, lkey, |buf| {
        let Some((h, rest)) = buf.split_first_chunk_mut::<{ proto::iser_hdr::ISER_HDR_LEN }>()
        else {
            return;
        };
        *h = *iser;
        if let Some((b, _)) = rest.split_first_chunk_mut::<BHS_LEN>() {
            *b = *bhs;
            // A whole BHS (every command PDU libiscsi builds) skips the
            // call `fill` makes even for nothing (step 17).
            if hdr_len < BHS_LEN {
                if let Some(past) = b.get_mut(hdr_len..) {
                    past.fill(0);
                }
            }
        }
    })
}

/// `xmit_task`: called by libiscsi with the session's frwd_lock held (BH
/// off) from `queuecommand`, or from its management PDU path.
///
/// Every header slot the call needs is reserved before anything is posted:
/// once the command PDU is on the wire a failure here would make libiscsi
/// hand the command (and its CmdSN) out again.
///
/// Out of send resources (`ENOBUFS`, counted as `tx_full` for header
/// slots, `sq_room_waits` for send-queue entries): the host has
/// no xmit work (`xmit_can_sleep` false), so libiscsi answers
/// `queuecommand` with TARGET_BUSY and the SCSI midlayer retries the
/// command; a refused management PDU fails to its sender. Nothing here
/// waits for a completion to kick a retry.
pub(crate) fn xmit(conn: &IserConn, mut task: Task<'_, IserTask>) -> Result {
    // One RCU section for the whole call: everything below borrows it.
    let res = conn.resources().ok_or_else(ENOTCONN)?;
    if task.kind() == TaskKind::Mgmt {
        return xmit_mgmt(conn, &res, task);
    }
    let stall = crate::sys::params::param_inject_xmit_stall_ms();
    if stall > 0 {
        // Fault injection (case 071): libiscsi has made the command
        // findable by its ITT, and it is not marked yet. Ends early once
        // the receive path refused the early response.
        crate::sys::params::inject_xmit_stall(stall);
    }
    let cmd_sent = task.data().ok_or(EINVAL)?.cmd_sent;
    // The task's slot (its MR, its transmit mark, its meeting word),
    // looked up once for the command: every step below acts on it.
    let task_slot = if cmd_sent {
        None
    } else {
        Some(
            task.index()
                .and_then(|i| res.tasks.for_task(i))
                .ok_or(EINVAL)?,
        )
    };
    let scsi_data = task.scsi_data();
    // Only a write has unsolicited Data-Out (`Task::unsol_pdus_left`
    // checks the direction too): a read skips the look.
    let unsol_pdus = if scsi_data.0 == Dir::ToDevice {
        task.unsol_pdus_left()
    } else {
        0
    };
    // A command PDU without immediate data goes inline where the QP
    // allows it, and then needs no header slot (`TxPool::post_inline`).
    let inline_cmd = res.inline_hdrs && task.imm_count() == 0;
    let cmd_slot = !(cmd_sent || inline_cmd);
    // Room on the send queue for everything this call posts, checked once
    // (libiscsi's frwd_lock keeps other posts out until it returns).
    let chain = if cmd_sent { 0 } else { CMD_CHAIN_MAX };
    if !res.tx.sq_room(chain + unsol_pdus, false, &conn.counters) {
        return Err(ENOBUFS());
    }
    let need = u32::from(cmd_slot) + unsol_pdus;
    let mut rsv = if need == 0 {
        None
    } else {
        // The command PDU's slot is its task's own, free unless the Send
        // of the task's previous command has not completed yet (then a
        // shared one): no search (step 19).
        let own = if cmd_slot { task.index() } else { None };
        let Some(rsv) = res.tx.slots.reserve(own, need) else {
            conn.counters.tx_full();
            return Err(ENOBUFS());
        };
        if cmd_slot && !rsv.has_own() {
            conn.counters.task_slot_busy();
        }
        Some(rsv)
    };
    // From here until every post for the command returned, a response
    // naming it waits (`XmitWord`): the transport data is this call's.
    let mark = match task_slot {
        None => None,
        Some((_, s)) => {
            let itt = cmd_itt(&task.data().ok_or(EINVAL)?.bhs);
            Some(s.xmit.begin(itt))
        }
    };
    let stall = crate::sys::params::param_inject_xmit_posting_stall_ms();
    if stall > 0 {
        // Fault injection (case 071): marked, not posted. Ends early once
        // the early response waits for the post (with the wait's bound
        // lowered: once it gave up and was refused).
        crate::sys::params::inject_xmit_stall(stall);
    }
    let local = match task_slot {
        None => task.data().and_then(|d| d.local_data),
        Some(task_slot) => {
            let slot = match (cmd_slot, rsv.as_mut()) {
                (false, _) => None,
                (true, Some(rsv)) => Some(rsv.take().ok_or_else(ENOBUFS)?),
                (true, None) => return Err(ENOBUFS()),
            };
            send_command(
                conn,
                &res,
                &mut task,
                task_slot,
                slot,
                scsi_data,
                unsol_pdus > 0,
            )?
        }
    };
    if unsol_pdus == 0 {
        if let Some(mark) = mark {
            mark.on_wire();
        }
        return Ok(());
    }
    // Unsolicited Data-Out (iSER §7.3.1, InitialR2T=No): each by a Send
    // whose payload comes straight from the command's buffer. The command
    // is not marked on the wire until the last of them is posted: a
    // response that came early waits, and the task stays ours here.
    //
    // The command PDU is on the wire: from here on a failure fails the
    // connection (libiscsi then fails the command and the midlayer retries
    // it on the next one) and xmit still answers success, because an error
    // would make libiscsi hand the command's CmdSN out again. The failure
    // is reported through `fail_conn_in_xmit`: libiscsi holds the
    // session's frwd_lock around this call.
    while task.has_unsol_data() {
        let (Some(mut slot), Some((base, lkey))) = (rsv.as_mut().and_then(|r| r.take()), local)
        else {
            // Reserved above / set by send_command: unreachable unless
            // libiscsi changed the task under us (or, before the
            // direction was checked, a read inherited a failed write's
            // unsolicited state: case 054).
            pr_warn!(
                "unsolicited Data-Out without a reserved slot or data: failing the connection\n"
            );
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
        let h = write_hdr_slot(&res.tx.slots, &mut slot, &iser, &hdr, BHS_LEN, res.lkey);
        let payload = Sge {
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
                SendPayload::Sges(&[h, payload]),
                Signal::Batched,
                owner,
                &conn.counters,
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
    if let Some(mark) = mark {
        mark.on_wire();
    }
    Ok(())
}

/// Registers the command's buffer (direction and length `(dir, len)`) with
/// the MR of its task's slot (`(index, task_slot)`) and sends the command
/// PDU (with its immediate data) in one chain: [local inv] → REG_MR →
/// Send; `data_outs`: unsolicited Data-Out follows. Returns where the
/// command's data lies for the Data-Out Sends.
fn send_command(
    conn: &IserConn,
    res: &Resources,
    task: &mut Task<'_, IserTask>,
    (i, task_slot): (u16, &TaskSlot),
    slot: Option<SlotToken<'_>>,
    (dir, len): (Dir, u32),
    data_outs: bool,
) -> Result<Option<(u64, u32)>> {
    let unsol = task.unsol_len();
    let mut read = None;
    let mut write = None;
    let mut inv = None;
    let mut reg: Option<(&MrSlot, RemoteAccess)> = None;
    // Before anything of this connection's pools is taken (`cleanup`).
    task.data().ok_or(EINVAL)?.conn_seq = conn.seq;
    if len > 0 && dir != Dir::None {
        let mapped = task.map_sg(res.dev, dir)?;
        // A write whose data is all unsolicited and contiguous in DMA space
        // needs no registration at all: its Sends take the data through the
        // PD's local DMA lkey (local access only; nothing is advertised).
        if dir == Dir::ToDevice && len <= unsol {
            if let Some(addr) = mapped.single_segment() {
                let td = task.data().ok_or(EINVAL)?;
                td.local_data = Some((addr, res.lkey));
                td.sg = Some(mapped);
                return post_command(
                    conn,
                    res,
                    task,
                    task_slot,
                    slot,
                    (dir, len, data_outs),
                    Stags::default(),
                );
            }
        }
        // The task's own MR (`TaskSlots`): no search, nothing to give
        // back but its marks.
        let slot_mr = &task_slot.mr;
        let mr = slot_mr.mr();
        {
            let b = &task.data().ok_or(EINVAL)?.bhs;
            let lun = b.get(8..16).and_then(|l| <[u8; 8]>::try_from(l).ok());
            slot_mr.set_owner(cmd_itt(b), lun.unwrap_or_default());
        }
        if slot_mr.take_dirty() {
            inv = Some(mr.rkey());
        }
        // A fresh key for every registration: no STag the target saw
        // before names this one.
        mr.bump_key();
        if let Err(e) = mr.map_sg(&mapped) {
            // `unwind` keeps the invalidation mark; `release` adds none.
            slot_mr.unwind(inv);
            slot_mr.release(false);
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
                reg = Some((slot_mr, RemoteAccess::Read));
            } else {
                // Fully unsolicited: local access only, never advertised.
                td.local_only = true;
                reg = Some((slot_mr, RemoteAccess::LocalOnly));
            }
        } else {
            td.mrs[0] = Some(i);
            read = Some(proto::iser_hdr::StagVa {
                stag: mr.rkey(),
                va: mr.iova(),
            });
            reg = Some((slot_mr, RemoteAccess::Write));
        }
        conn.counters.registration();
    }
    post_command(
        conn,
        res,
        task,
        task_slot,
        slot,
        (dir, len, data_outs),
        Stags {
            read,
            write,
            inv,
            reg,
        },
    )
}

/// What `send_command` registered for a command: the STags to advertise,
/// an invalidation to lead the chain, and the registration to post.
#[derive(Default)]
struct Stags<'a> {
    read: Option<proto::iser_hdr::StagVa>,
    write: Option<proto::iser_hdr::StagVa>,
    inv: Option<u32>,
    reg: Option<(&'a MrSlot, RemoteAccess)>,
}

/// Sends the command PDU of a prepared task: [local inv] → [REG_MR] → Send
/// of the iSER header, BHS and immediate data, from header slot `slot`, or
/// inline without one (`None`: no immediate data, the QP sends inline);
/// `data_outs`: unsolicited Data-Out follows. `task_slot`: the task's
/// slot, whose meeting word the command arms or clears.
// Once per I/O: inlined (bench/README.md, step 11).
#[inline(always)]
fn post_command(
    conn: &IserConn,
    res: &Resources,
    task: &mut Task<'_, IserTask>,
    task_slot: &TaskSlot,
    mut slot: Option<SlotToken<'_>>,
    (dir, len, data_outs): (Dir, u32, bool),
    Stags {
        read,
        write,
        inv,
        reg,
    }: Stags<'_>,
) -> Result<Option<(u64, u32)>> {
    let imm = task.imm_count();
    let hdr_len = task.hdr_len().min(BHS_LEN);
    let remote_inv = conn.remote_inv.load(Ordering::Acquire);
    let mut stags = TaskStags::new(read.map(|r| r.stag), write.map(|w| w.stag), remote_inv)
        .map_err(|_| EINVAL)?;
    stags.advertise().map_err(|_| EINVAL)?;
    let td = task.data().ok_or(EINVAL)?;
    let mut iser = [0u8; proto::iser_hdr::ISER_HDR_LEN];
    proto::iser_hdr::IserHeader { read, write }.encode(&mut iser);
    // A command PDU without immediate data goes inline (the provider
    // copies the header into the work request); one with immediate data
    // from its header slot, written here, before the task's state
    // changes below, which a failure here would have to undo.
    let inline = imm == 0 && res.inline_hdrs;
    let mut sges = [Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    }; 2];
    if !inline {
        let Some(slot) = slot.as_mut() else {
            return Err(EINVAL);
        };
        sges[0] = write_hdr_slot(&res.tx.slots, slot, &iser, &td.bhs, hdr_len, res.lkey);
        if imm > 0 {
            let Some((base, lkey)) = td.local_data else {
                return Err(EINVAL);
            };
            sges[1] = Sge {
                addr: base,
                length: imm,
                lkey,
            };
        }
    }
    let reg_req = reg.map(|(slot_mr, access)| RegReq {
        mr: slot_mr.mr(),
        access,
    });
    let regs = reg_req.as_slice();
    let invs = inv.as_slice();
    // Everything the response path reads is in place before the post: the
    // response may be handled on another CPU before `post` returns.
    td.stags = Some(stags);
    td.cmd_sent = true;
    td.cookie = conn.next_cookie();
    // The Sends of immediate data and unsolicited Data-Out read the
    // command's pages; the last of them is signaled and tells the command
    // (in-order send queue: its completion implies the others').
    td.send_pending = imm > 0 || data_outs;
    // A read whose SendInvSE alone completes it: the receive path settles
    // that response on the MR, without the task (step 23).
    let armed = match (stags.settles_remotely(), reg) {
        (Some(rkey), Some((slot_mr, _))) if !td.send_pending => {
            slot_mr.arm_remote_settle(rkey);
            Some(slot_mr)
        }
        _ => None,
    };
    let itt = cmd_itt(&td.bhs);
    let owner = (imm > 0 && !data_outs).then_some((itt, td.cookie));
    // A write with no STag whose one Send carries all its data: its
    // response and that Send's completion meet on the task's word, without
    // the task (step 24).
    // Any other command clears the task's word: one left by an earlier
    // command of the task (libiscsi completed it on a response that came
    // before its post, so `cleanup` skipped the word) must not meet this
    // one's response.
    let meet = match owner {
        Some(_) if read.is_none() && write.is_none() => {
            task_slot.meet.arm(itt);
            td.meet = true;
            true
        }
        _ => {
            task_slot.meet.clear();
            false
        }
    };
    let local = td.local_data;
    // Inline, the iSER header and the BHS go as two pieces, the BHS straight
    // from the task, where libiscsi built it: nothing is assembled. (A
    // header shorter than the BHS, which libiscsi never builds for a
    // command, is sent zero-padded, as from a header slot.)
    let padded;
    let payload = if !inline {
        SendPayload::Sges(if imm == 0 { &sges[..1] } else { &sges })
    } else if hdr_len == BHS_LEN {
        SendPayload::Inline(&iser, &td.bhs)
    } else {
        padded = hdr_bytes(&iser, td.bhs.get(..hdr_len).unwrap_or(&[]));
        SendPayload::Inline(&padded, &[])
    };
    let posted = match slot {
        Some(slot) => res.tx.post_inlined(
            res.qp,
            invs,
            regs,
            slot,
            payload,
            if data_outs {
                Signal::Batched
            } else {
                Signal::LastOfXmit
            },
            owner,
            &conn.counters,
        ),
        None => res
            .tx
            .post_inline(res.qp, invs, regs, payload, &conn.counters),
    };
    if let Err(e) = posted {
        if let Some(slot_mr) = armed {
            slot_mr.take_remote_settle();
        }
        if meet {
            td.meet = false;
            // A response that came for this ITT before the post (a target
            // answering what it never received) was held there: its
            // buffer goes back to the ring.
            if let proto::task::MeetTaken::Held(rx, _) = task_slot.meet.take() {
                conn.return_rx(rx);
            }
        }
        td.local_only = false;
        td.stags = None;
        td.cmd_sent = false;
        td.send_pending = false;
        // No header slot for a signaled inline Send is `tx_full`, counted
        // where it happened; nothing was posted then.
        if e.err != ENOBUFS() {
            conn.counters.post_error();
        }
        if e.posted > 0 {
            // Part of the chain was posted (the LOCAL_INV, or the REG_MR
            // too) and the Send, which is last, was not: the MR is
            // no longer in the state the pool keeps for it (valid under a
            // key nobody was told, or invalidated), and undoing that is
            // another post that may fail. The connection fails instead:
            // nothing registers with its MRs again, and its QP is drained
            // (stop_conn) before the session retries the command, which
            // goes back to the midlayer with its CmdSN unused (case 054,
            // partial chains: before this, the MR's next REG_MR was
            // refused and the QP went to error).
            pr_warn!(
                "command chain posted in part ({} of its work requests): failing the connection\n",
                e.posted
            );
            conn.fail_in_xmit(task, crate::sys::iscsi::ERR_CONN_FAILED);
            return Err(e.err);
        }
        // Nothing of the chain was posted: the MR is as it was before
        // `send_command` (its release by `cleanup` keeps the mark), and a
        // local-only registration that never happened must not mark it
        // for invalidation (a LOCAL_INV with a key the device never saw
        // fails the QP: case 054).
        if let Some((slot_mr, _)) = reg {
            slot_mr.unwind(inv);
        }
        return Err(e.err);
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
fn xmit_mgmt(conn: &IserConn, res: &Resources, mut task: Task<'_, IserTask>) -> Result {
    let iscsi = task.conn();
    let hdr_len = task.hdr_len().min(BHS_LEN);
    let mut iser = [0u8; proto::iser_hdr::ISER_HDR_LEN];
    proto::iser_hdr::IserHeader::control().encode(&mut iser);
    let data_len = task.mgmt_data().len();
    let is_login = iscsi.is_login_task(&task);
    let bhs = task.data().ok_or(EINVAL)?.bhs;
    // One Send, from the management PDUs' share of the send queue.
    if !res.tx.sq_room(1, true, &conn.counters) {
        return Err(ENOBUFS());
    }
    let Some(mut slot) = res.tx.slots.claim() else {
        return Err(ENOBUFS());
    };
    if bhs[0] & 0x3f == proto::bhs::OP_TMF_REQ {
        conn.tmf.record(&bhs[..24], slot.index());
    }
    if bhs[0] & proto::bhs::OPCODE_MASK == proto::bhs::OP_LOGOUT_REQ {
        conn.logout_requested();
    }
    if !is_login && data_len == 0 {
        let h = write_hdr_slot(&res.tx.slots, &mut slot, &iser, &bhs, hdr_len, res.lkey);
        return Ok(res.tx.post(
            res.qp,
            &[],
            &[],
            slot,
            SendPayload::Sges(&[h]),
            Signal::Always,
            None,
            &conn.counters,
        )?);
    }
    // Login, and any management PDU with data, go through the login send
    // buffer: header and data in one SGE (at most 8 KiB of data, the login
    // limit; text and NOP-Out data fit it). One such PDU at a time.
    if data_len > RX_DATA_LEN {
        return Err(EINVAL);
    }
    let Some(mut ltok) = res.login_tx.claim() else {
        return Err(ENOBUFS());
    };
    let data = task.mgmt_data();
    let sges = res
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
    conn.post_login_send(res, slot, &sges, ltok)
}
