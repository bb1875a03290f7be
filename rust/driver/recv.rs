// SPDX-License-Identifier: GPL-2.0
//! The receive path: every received Send (softirq, the connection's one
//! CQ) is validated by the protocol core, routed by opcode (a SCSI or TMF
//! Response through the STag rules of `task.rs`, a Login or Text Response
//! through the login window of `conn.rs`) and handed to libiscsi; and the
//! delayed delivery of a held Login or Text Response, or of a Logout
//! Response held by fault injection (`login_rsp_work`, process context
//! with BH off).

use super::conn::IserConn;
use super::limits::RX_DATA_LEN;
use super::resources::RxDesc;
use super::task::{on_scsi_response, on_tmf_response, RspAction};
use crate::proto;
use crate::sys::verbs::{CqeHandler, Wc, WithCqe};
use crate::sys::work::{with_bh_disabled, DelayedWorkHandler};
use kernel::prelude::*;

/// A receive completed (softirq).
impl CqeHandler for RxDesc {
    type Ctx = IserConn;
    fn done(this: &WithCqe<Self>, conn: &IserConn, wc: &Wc<'_>) {
        rx_done(conn, this, wc);
    }
}

/// The receive path (softirq): validates the PDU, applies the login,
/// STag and TMF rules, and hands it to libiscsi (or holds it).
fn rx_done(conn: &IserConn, desc: &WithCqe<RxDesc>, wc: &Wc<'_>) {
    if conn.wc_failed(wc, "receive") {
        return;
    }
    // After a reported failure nothing received is delivered (nor its
    // buffer reposted: the connection is going away).
    if conn.has_failed() {
        conn.counters.rx_dropped();
        return;
    }
    // With the `hello` parameter on, the login buffer is posted for the
    // HelloReply before any login request.
    if desc.login && conn.awaiting_hello_reply() {
        return conn.on_hello_reply(desc.received(wc.byte_len() as usize));
    }
    if !desc.login {
        conn.counters.rx_completed();
    }
    conn.repost_orphans();
    let Some(iscsi) = conn.iscsi.get() else {
        return;
    };
    let msg = desc.received(wc.byte_len() as usize);
    // The login buffer only ever receives Login Responses; the ring is
    // posted with the request to go to full feature phase and receives
    // full-feature PDUs once the target answered that request with
    // T=1 (a NOP-In may follow at once, before libiscsi started the
    // connection), and before that only the Login Responses of a
    // target that stayed in operational negotiation (T=0).
    let login_phase = desc.login || !conn.ring_in_full_feature();
    // The fast path: a SCSI Response without AHS or data, which the full
    // parser below would accept the same (`plain_scsi_response`).
    if !login_phase {
        if let Some(rsp) = proto::bhs::plain_scsi_response(msg) {
            return scsi_response(conn, iscsi, desc, wc, rsp.itt, rsp.bhs, &[]);
        }
    }
    let ctx = rx_context(login_phase);
    let pdu = match proto::bhs::parse_received_send(msg, &ctx) {
        Ok(p) => p,
        Err(e) => return conn.proto_error(e),
    };
    let inv = wc.invalidated_rkey();
    if pdu.opcode == proto::bhs::OP_LOGIN_RSP || pdu.opcode == proto::bhs::OP_TEXT_RSP {
        conn.login_tx_answered();
    }
    if let proto::bhs::TargetHeader::LoginResponse(l) = &pdu.header {
        if l.enters_full_feature() {
            conn.ring_enters_full_feature();
        } else if !desc.login {
            iser_dbg!(
                "login response in the receive ring: the target stays in stage {:?}\n",
                l.csg
            );
        }
    }
    if (pdu.opcode == proto::bhs::OP_LOGIN_RSP || pdu.opcode == proto::bhs::OP_TEXT_RSP)
        && conn.hold_login_rsp(desc, wc.byte_len(), login_phase)
    {
        return;
    }
    if let proto::bhs::TargetHeader::LogoutResponse(l) = &pdu.header {
        if !desc.login && conn.hold_logout_rsp(desc.index, wc.byte_len()) {
            return;
        }
        // Response 0: connection or session closed successfully (RFC 7143
        // §11.15.1).
        conn.logout_answered(l.response == 0);
    }
    if pdu.opcode == proto::bhs::OP_SCSI_RSP {
        let hdr_len = proto::bhs::BHS_LEN + pdu.ahs.len();
        let hdr = msg
            .get(proto::iser_hdr::ISER_HDR_LEN..proto::iser_hdr::ISER_HDR_LEN + hdr_len)
            .unwrap_or(&[]);
        return scsi_response(conn, iscsi, desc, wc, pdu.itt, hdr, pdu.data);
    } else if inv.is_some() {
        // Only a SCSI Response may carry SendInvSE (iSER §7.3.2).
        return conn.proto_error(proto::ProtoError::UnexpectedRemoteInvalidation);
    } else if pdu.opcode == proto::bhs::OP_TMF_RSP && !desc.login {
        if let RspAction::Deferred = on_tmf_response(conn, &pdu, desc.index, wc.byte_len()) {
            // Delivered (and the buffer reposted) when the commands'
            // invalidations complete: see `TmfInvDesc::done`.
            conn.counters.deferred();
            return;
        }
    }
    conn.complete(wc.bh(), iscsi, desc, msg, &pdu);
    if pdu.opcode == proto::bhs::OP_LOGOUT_RSP {
        conn.logout_rsp_delivered();
    }
}

/// A SCSI Response (BHS and AHS `hdr`, data segment `data`) through the
/// STag and Send rules: delivered now, or held with its buffer.
// Once per I/O: inlined (bench/README.md, step 13).
#[inline(always)]
fn scsi_response(
    conn: &IserConn,
    iscsi: crate::sys::iscsi::Conn,
    desc: &WithCqe<RxDesc>,
    wc: &Wc<'_>,
    itt: proto::bhs::Itt,
    hdr: &[u8],
    data: &[u8],
) {
    conn.counters.response();
    let inv = wc.invalidated_rkey();
    // The resources for both settles and the repost (step 24), read in
    // this softirq (no RCU call of its own).
    let bh = wc.bh();
    let res = conn.resources_in(bh);
    let raw_itt = u32::from_ne_bytes(itt.0);
    if let Some((res, slot)) = res.and_then(|r| Some((r, r.tasks.by_itt(raw_itt)?))) {
        match inv {
            // A read's SendInvSE naming its one STag, armed on its MR:
            // settled there, without the task's rules (step 23).
            Some(rkey) => {
                if slot.mr.settle_remote(rkey) {
                    conn.counters.remote_inv();
                    return conn.deliver_in(bh, res, iscsi, desc, hdr, data);
                }
            }
            // A write armed at the meeting of its response and its data
            // Send: delivered now if that Send completed, else held there
            // until it does (step 24).
            None => match slot.meet.response(raw_itt, desc.index, wc.byte_len()) {
                Some(true) => return conn.deliver_in(bh, res, iscsi, desc, hdr, data),
                Some(false) => return conn.counters.deferred(),
                None => {}
            },
        }
    }
    match on_scsi_response(conn, res, iscsi, itt, inv, desc.index, wc.byte_len()) {
        Ok(RspAction::CompleteNow) => conn.deliver(bh, iscsi, desc, hdr, data),
        Ok(RspAction::Deferred) => {
            // Completed (and the buffer reposted) when the local
            // invalidation finishes: see `task::inv_done`.
            conn.counters.deferred();
        }
        Err(e) => conn.proto_error(e),
    }
}

/// How a received Send is parsed: as a login-phase PDU (the login buffer
/// only ever receives Login Responses; the ring before the target answered
/// the request to go to full feature phase receives the Login Responses of
/// a target that stayed in operational negotiation) or a full-feature one.
fn rx_context(login_phase: bool) -> proto::bhs::RxContext {
    if login_phase {
        proto::bhs::RxContext::login()
    } else {
        proto::bhs::RxContext::full_feature(RX_DATA_LEN as u32)
    }
}

impl DelayedWorkHandler for IserConn {
    /// `login_rsp_work`: acts on a HelloReply's verdict; judges a
    /// disconnect whose grace for the Logout Response ended, then delivers
    /// a held Logout Response (fault injection) once its time came; once
    /// the last `send_pdu` caller
    /// slept, closes the login window and delivers the held Login or Text
    /// Response, as the receive path would have.
    fn run(this: &IserConn) {
        // Scheduled by the receive path for a HelloReply or a held Logout
        // Response, by a disconnect that came before its Logout Response,
        // and after a successful logout's disconnect, too.
        this.logout_deadline();
        this.finish_hello();
        // A disconnect's grace first: a Logout Response held past it (fault
        // injection) comes too late, as one received after it would.
        this.disconnect_judgement_due();
        if let Some((index, len)) = this.take_held_logout_rsp() {
            deliver_held(this, false, index, len, false);
        }
        // The window stays open until the last send_pdu caller slept.
        if !this.login_caller_done() {
            return;
        }
        let Some(held) = this.take_held_login_rsp() else {
            return;
        };
        deliver_held(
            this,
            held.in_login_buf,
            held.index,
            held.len,
            held.login_phase,
        );
    }
}

/// Delivers the response held in the login buffer (`in_login_buf`) or in
/// ring entry `index`, `len` bytes, as the receive path would have (BH
/// off, as libiscsi's receive entry point expects; inside the RCU section
/// that implies for the resources). `login_phase`: it was parsed as a
/// login-phase PDU when it arrived. Process context (`login_rsp_work`).
fn deliver_held(this: &IserConn, in_login_buf: bool, index: u16, len: u32, login_phase: bool) {
    with_bh_disabled(|bh| {
        if this.has_failed() {
            this.counters.rx_dropped();
            return;
        }
        let Some(iscsi) = this.iscsi.get() else {
            return;
        };
        let Some(res) = this.resources_in(bh) else {
            return;
        };
        let desc = if in_login_buf {
            &*res.login_rx
        } else {
            match res.rx.get(usize::from(index)) {
                Some(d) => d,
                None => return,
            }
        };
        let msg = desc.received(len as usize);
        let ctx = rx_context(login_phase);
        match proto::bhs::parse_received_send(msg, &ctx) {
            Ok(pdu) => {
                if let proto::bhs::TargetHeader::LogoutResponse(l) = &pdu.header {
                    this.logout_answered(l.response == 0);
                }
                this.complete(bh, iscsi, desc, msg, &pdu);
                if pdu.opcode == proto::bhs::OP_LOGOUT_RSP {
                    this.logout_rsp_delivered();
                }
            }
            Err(e) => this.proto_error(e),
        }
    });
}
