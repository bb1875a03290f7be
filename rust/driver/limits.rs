// SPDX-License-Identifier: GPL-2.0
//! The budgets of one connection: commands in flight, queue depths, pool
//! sizes and buffer lengths. Each is written once here, with its
//! derivation; everything that sizes a queue or a pool names these.

use crate::proto;

/// Commands in flight per connection: the session's `can_queue` is
/// clamped to this, and every budget below derives from it.
pub(crate) const CMDS_MAX: u32 = 128;
/// Management PDUs (NOP-Out, TMF, Text, Logout) that may be outstanding
/// beside the commands (libiscsi's ISCSI_MGMT_CMDS_MAX is 15; +1 login).
pub(crate) const MGMT_MAX: u32 = 16;
/// Unsolicited Data-Out PDUs in flight: 8 per command on average, as
/// ib_iser sizes its send queue (`ISER_INFLIGHT_DATAOUTS`). With
/// FirstBurstLength 256 KiB and TargetRecvDataSegmentLength 8 KiB (the
/// defaults) a write needs 31 or 32, so 32 such writes have their first
/// bursts in flight at once (8 MiB) and a further one waits for header
/// slots (`tx_full`, TARGET_BUSY) until Send completions free them (case
/// 035). Every slot and send-queue entry is allocated at connect time,
/// before the login negotiates InitialR2T: sized for a full queue of such
/// writes (128 * 32) they were 3/4 of the send pool, unused under
/// InitialR2T=Yes. One transmit call can still get the header slots of
/// the largest write the default `max_sectors` allows, with PDUs as small
/// as 512 bytes (`XMIT_SLOTS_MAX`).
pub(crate) const DATAOUT_MAX: u32 = CMDS_MAX * 8;
/// A Send is signaled when `signal_every - 1` unsignaled ones wait
/// (`signal_every`: module parameter, at most `SIGNAL_EVERY`), so fewer
/// than `SIGNAL_EVERY` ever wait; the others complete silently and their
/// header slots are released by the next signaled completion (an RC send
/// queue completes in order). ib_iser signals every Send: this halves the completions per
/// command. Management and login PDUs are always signaled.
pub(crate) const SIGNAL_EVERY: usize = 16;
/// Send descriptors (header slots): one per Data-Out in flight, per
/// command PDU and per management PDU, plus the up to `SIGNAL_EVERY - 1`
/// released unsignaled ones that wait for the next signaled completion
/// (`TxPool::post` signals a Send when that many wait, also after a
/// failed signaled post put its batch back; libiscsi's frwd_lock
/// serialises the posts).
pub(crate) const TX_DESCS: u32 = DATAOUT_MAX + CMDS_MAX + MGMT_MAX + SIGNAL_EVERY as u32;
/// Header slots of the tasks' own, one per task index (`MRS`: every index
/// is below it), after the shared ones: a command PDU with a header slot
/// takes its task's (`DmaSlots::reserve` with its index, no search) and falls back to
/// the shared ones (their `CMDS_MAX` share above) while the Send of the
/// task's previous command has not completed. Released, as every slot,
/// by the completion that covers its Send.
pub(crate) const TASK_SLOTS: u32 = MRS;
/// Header slots one xmit call may reserve (a command and its unsolicited
/// Data-Outs) and always get at QD1 once completions are reaped: all but
/// those of the up to `SIGNAL_EVERY - 1` unsignaled Sends, which only a
/// later signaled completion releases, with the management PDUs' share
/// and one more kept as margin (a NOP-Out or TMF holds its slot until its
/// own completion). A negotiation whose largest write needs more is
/// refused at `start_conn`. (At a deep queue the reservation is all or
/// nothing, so such a write waits while smaller commands hold slots.)
pub(crate) const XMIT_SLOTS_MAX: u32 = TX_DESCS - MGMT_MAX - SIGNAL_EVERY as u32;
/// FRWR MRs: one per libiscsi task, named by the task's index (`TaskSlots`).
/// A command registers one MR at most (Linux has had no bidirectional SCSI
/// commands since 5.1), and a session has at most `CMDS_MAX` tasks in all:
/// `iscsi_session_setup` takes `can_queue` (clamped to `CMDS_MAX`) as the
/// total of its SCSI and management tasks, rounded down to a power of two
/// (`iscsi_host_get_max_scsi_cmds`; ISCSI_MGMT_CMDS_MAX of them are
/// management tasks), so every task index is below it.
pub(crate) const MRS: u32 = CMDS_MAX;
/// Local-invalidation descriptors: one per command that may wait for its
/// invalidation, doubled for aborted commands whose invalidation is still
/// in flight when their task is reused.
pub(crate) const INV_DESCS: u32 = 2 * CMDS_MAX;
/// LOCAL_INVs a successful TMF Response may wait for: a target reset
/// covers every MR of the pool.
pub(crate) const TMF_INV_MAX: u32 = MRS;
/// The most work requests a command's chain takes: a leading LOCAL_INV,
/// one REG_MR (Linux has had no bidirectional SCSI commands since 5.1)
/// and the Send (`xmit::send_command`).
pub(crate) const CMD_CHAIN_MAX: u32 = 3;
/// Send-queue entries the transmit path may have in use, counted by
/// `TxPool` (an entry counts until a signaled completion at or after it
/// is reaped: the verbs rule, which a device like mlx5 applies; rxe frees
/// earlier). Per command a chain of at most `CMD_CHAIN_MAX`, the Data-Out
/// pool, the management PDUs, and the unsignaled chains waiting for a
/// signaled one (fewer than `SIGNAL_EVERY`, up to `CMD_CHAIN_MAX` each).
/// A post that would go past it waits (`sq_room_waits`, TARGET_BUSY).
pub(crate) const SQ_XMIT_MAX: u32 =
    CMDS_MAX * CMD_CHAIN_MAX + DATAOUT_MAX + MGMT_MAX + SIGNAL_EVERY as u32 * CMD_CHAIN_MAX;
/// Send-queue entries the receive path (softirq) may use at once, kept
/// out of the transmit budget so its posts always fit: the invalidations
/// after responses (at most 2 LOCAL_INVs per `INV_DESCS` descriptor, which
/// is held until its signaled completion is reaped) and one TMF's
/// (`TMF_INV_MAX`; libiscsi has one TMF out at a time, and its
/// invalidations are held until the last one, signaled, completes).
pub(crate) const SQ_RX_RESERVE: u32 = 2 * INV_DESCS + TMF_INV_MAX;
/// The fewest transmit entries a connection runs with (`sq_depth`, or a
/// device with a small `max_qp_wr`): the management PDUs' share, a full
/// batch of unsignaled chains, and the largest xmit of the default
/// negotiation (a command chain and 32 unsolicited Data-Outs,
/// FirstBurstLength 256 KiB over 8 KiB PDUs). So once every signaled
/// completion is reaped such a command fits beside the unsignaled chains
/// left over, and its post gets the next signaled one out. (For a larger
/// xmit the pool signals early instead: `TxPool::sq_tight`.)
pub(crate) const SQ_XMIT_MIN: u32 =
    MGMT_MAX + SIGNAL_EVERY as u32 * CMD_CHAIN_MAX + CMD_CHAIN_MAX + 32;
/// The entry `ib_drain_qp` posts at teardown (its caller leaves room).
pub(crate) const SQ_DRAIN: u32 = 1;
/// Send queue asked for: the transmit budget, the receive path's reserve
/// and the drain's entry. `sq_depth()` may lower it.
pub(crate) const MAX_SEND_WR: u32 = SQ_XMIT_MAX + SQ_RX_RESERVE + SQ_DRAIN;
/// Receive queue: one buffer per command response, per unsolicited target
/// PDU we allow in flight (NOP-In, Async, Reject: MGMT_MAX), plus the login
/// buffer.
pub(crate) const RX_RING: u32 = CMDS_MAX + MGMT_MAX;
pub(crate) const MAX_RECV_WR: u32 = RX_RING + 1;
/// One CQ for both queues.
pub(crate) const CQ_ENTRIES: u32 = MAX_SEND_WR + MAX_RECV_WR;
/// Data segment a receive buffer holds: the login limit (iSER §6: 8192
/// during login) and what iser-rs declares for full feature phase.
pub(crate) const RX_DATA_LEN: usize = proto::bhs::LOGIN_MAX_RECV_DSL as usize;
/// iSER header + BHS + the largest AHS we accept (none is defined for a
/// target PDU iSER uses; 4 words of slack) + data.
pub(crate) const RX_BUF_LEN: usize = proto::bhs::ISER_HEADERS_LEN + 16 + RX_DATA_LEN;
/// A header slot: the iSER header and the BHS of a PDU.
pub(crate) const HDRS: usize = proto::bhs::ISER_HEADERS_LEN;
/// Bytes a Send may carry inline: the iSER header and BHS of a command
/// PDU without immediate data (a SCSI Read's, a Write's whose data all
/// goes by RDMA Read).
pub(crate) const INLINE_LEN: u32 = HDRS as u32;

/// Pages one registration covers: `max_sectors` 512-byte sectors, plus one
/// for a buffer that does not start on a page boundary.
pub(crate) fn max_pages() -> u32 {
    sg_tablesize() + 1
}

/// Sectors per command the SCSI host is given: the `max_sectors`
/// parameter, at most what `sg_tablesize` entries cover.
pub(crate) fn max_sectors() -> u32 {
    crate::sys::params::param_max_sectors().min(sg_tablesize() * 8)
}

/// SG entries per command: with `virt_boundary_mask` = 4K-1 every entry
/// but the first and last is a full page, so `max_sectors`/8 entries.
pub(crate) fn sg_tablesize() -> u32 {
    (crate::sys::params::param_max_sectors().clamp(8, 8192) / 8).max(1)
}

/// Send-queue entries of a connection on `dev`: the `sq_depth` module
/// parameter (0: `MAX_SEND_WR`), at most `MAX_SEND_WR` and the device's
/// `max_qp_wr`; `None` when that leaves the transmit path fewer than
/// `SQ_XMIT_MIN` (the connection is refused).
pub(crate) fn sq_depth(dev_max_qp_wr: u32) -> Option<u32> {
    let asked = match crate::sys::params::param_sq_depth() {
        0 => MAX_SEND_WR,
        n => n.min(MAX_SEND_WR),
    };
    let depth = asked.min(dev_max_qp_wr);
    (depth >= SQ_RX_RESERVE + SQ_DRAIN + SQ_XMIT_MIN).then_some(depth)
}

/// The `signal_every` module parameter, clamped to `1..=SIGNAL_EVERY`.
pub(crate) fn signal_every() -> usize {
    (crate::sys::params::param_signal_every() as usize).clamp(1, SIGNAL_EVERY)
}
