// SPDX-License-Identifier: GPL-2.0
//! The `iser` iSCSI transport: what iscsid's requests and libiscsi's
//! callbacks do, expressed over [`IserConn`] and the task data path.

use super::conn::IserConn;
use super::limits::{max_sectors, sg_tablesize, CMDS_MAX, CMD_CHAIN_MAX, XMIT_SLOTS_MAX};
use super::task::{self, IserTask};
use super::xmit;
use crate::proto;
use crate::sys::errno::{ENOTCONN, EPROTO};
use crate::sys::iscsi::{self, Conn, HostLimits, Param, SockAddr, Task, TransportOps};
use core::pin::Pin;
use kernel::error::code::EINVAL;
use kernel::prelude::*;

/// The `iser` transport.
pub(crate) struct IserTransport;

impl TransportOps for IserTransport {
    type Ep = IserConn;
    type TaskData = IserTask;

    fn ep_connect(dst: &SockAddr<'_>) -> Result<Pin<KBox<IserConn>>> {
        // iscsid reconnects a failed session through here.
        crate::sys::with_noio(|| IserConn::connect(dst, task::drop_mappings))
    }

    fn ep_poll(ep: &IserConn, timeout_ms: u32) -> Result<bool> {
        ep.poll(timeout_ms)
    }

    fn ep_disconnect(ep: Pin<KBox<IserConn>>) {
        ep.shutdown();
    }

    fn ep_bound_conn(ep: &IserConn) -> Option<Conn> {
        ep.iscsi.get()
    }

    fn ep_with_dst_addr(ep: &IserConn, f: &mut dyn FnMut(iscsi::DstAddr) -> i32) -> Option<i32> {
        ep.with_cm_id(|id| f(id.dst_addr()))
    }

    fn session_limits(ep: &IserConn, cmds_max: u16) -> Result<HostLimits> {
        let res = ep.resources().ok_or_else(ENOTCONN)?;
        let sg = sg_tablesize();
        Ok(HostLimits {
            can_queue: cmds_max.min(CMDS_MAX as u16),
            sg_tablesize: sg as u16,
            max_sectors: max_sectors(),
            // Without SG-gaps registration an FRWR maps whole pages only.
            virt_boundary_mask: if res.dev.sg_gaps_reg() { 0 } else { 4095 },
            dma_dev: res.dev.dma_parent(),
        })
    }

    fn bind(ep: &IserConn, conn: Conn, _cmds_max: u16) -> Result {
        ep.resources().ok_or_else(ENOTCONN)?;
        ep.bind_iscsi(conn);
        Ok(())
    }

    fn start(ep: &IserConn) -> Result {
        // Receives switch to full-feature parsing with the final Login
        // Response itself (`IserConn::rx_done`), not here. The keys are
        // set now: the largest write's xmit (a command chain and its
        // unsolicited Data-Outs) must fit the header slots and the send
        // queue's transmit budget, or such a write would wait for good.
        let res = ep.resources().ok_or_else(ENOTCONN)?;
        let conn = ep.iscsi.get().ok_or_else(ENOTCONN)?;
        let data_outs = conn.unsol_pdus_max(max_sectors() * 512);
        if 1 + data_outs > XMIT_SLOTS_MAX {
            pr_warn!(
                "the negotiated keys make a write need up to {} header slots, more than the {} one transmit call can get: refused\n",
                1 + data_outs,
                XMIT_SLOTS_MAX
            );
            return Err(EINVAL);
        }
        let largest = CMD_CHAIN_MAX + data_outs;
        if !res.tx.set_largest_xmit(largest) {
            pr_warn!(
                "the negotiated keys make a write need up to {} send-queue entries, more than the {} this connection gives commands (sq_depth, max_qp_wr): refused\n",
                largest,
                res.tx.sq_cmd_budget()
            );
            return Err(EINVAL);
        }
        Ok(())
    }

    fn stop(ep: &IserConn) {
        ep.drop_held_login_rsp();
        ep.quiesce();
    }

    fn check_param(param: Param, value: &[u8]) -> Result {
        match proto::login_keys::check_set_param(param, value) {
            Ok(()) => Ok(()),
            Err(e) => {
                pr_err!(
                    "refused parameter {}: {:?} (iSER needs no digests, no markers)\n",
                    param,
                    e
                );
                let _ = e;
                Err(EPROTO())
            }
        }
    }

    fn stats(ep: &IserConn, stats: &mut iscsi::Stats<'_>) {
        for (i, (name, v)) in ep.counters.snapshot().iter().enumerate() {
            stats.set_custom(i, name, *v);
        }
    }

    fn send_pdu_begin(ep: &IserConn) {
        ep.login_window_open();
    }

    fn send_pdu_returning(ep: &IserConn, caller: iscsi::SendPduCaller) {
        ep.login_window_closing(caller);
    }

    fn xmit_task(ep: &IserConn, task: Task<'_, IserTask>) -> Result {
        xmit::xmit(ep, task)
    }

    fn cleanup_task(ep: Option<&IserConn>, task: Task<'_, IserTask>) {
        task::cleanup(ep, task)
    }

    fn new_task(_ep: &IserConn) -> IserTask {
        IserTask::new()
    }

    fn reuse_task(_ep: &IserConn, data: &mut IserTask) {
        data.reuse();
    }

    fn task_hdr(data: &mut IserTask) -> *mut u8 {
        data.bhs_ptr()
    }
}
