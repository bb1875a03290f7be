//! The iSCSI Basic Header Segment (BHS) of PDUs received from a target, and
//! their per-opcode validation in iSER-assisted mode.
//!
//! Common BHS layout (RFC 7143 §11.2.1):
//!
//! ```text
//! byte  0      . . | opcode (6 bits)
//! byte  1      F | opcode-specific flags
//! bytes 2..4   opcode-specific
//! byte  4      TotalAHSLength (4-byte words)
//! bytes 5..8   DataSegmentLength (24 bits, bytes, without padding)
//! bytes 8..16  LUN or opcode-specific
//! bytes 16..20 Initiator Task Tag
//! bytes 20..48 opcode-specific; for every target PDU handled here
//!              StatSN at 24, ExpCmdSN at 28, MaxCmdSN at 32
//! ```
//!
//! A received iSER Send message is `iSER header (28) | BHS (48) | AHS |
//! data segment | padding`. [`parse_received_send`] validates all of it;
//! [`parse_target_pdu`] starts at the BHS.
//!
//! Policy on reserved BHS fields: they are ignored on receipt (RFC 7143
//! only obliges senders to zero them); every field with a meaning is
//! validated.

use super::error::{ProtoError, ProtoResult};
use super::iser_hdr::{IserHeader, ISER_HDR_LEN, ISER_VER};
use super::wire;

/// Length of the Basic Header Segment (RFC 7143 §11.2.1).
pub const BHS_LEN: usize = 48;
/// Length of iSER header plus BHS (`ISER_HEADERS_LEN` in ib_iser).
pub const ISER_HEADERS_LEN: usize = ISER_HDR_LEN + BHS_LEN;
/// The reserved tag value 0xffffffff (RFC 7143 §11.2.1.8, §11.19).
pub const RESERVED_TAG: u32 = 0xffff_ffff;
/// Receive data segment limit during the login phase: iSER does not use
/// MaxRecvDataSegmentLength (iSER §6.2) and the iSER keys only apply in full
/// feature phase, so the RFC 7143 default 8192 applies
/// (`ISCSI_DEF_MAX_RECV_SEG_LEN`, ib_iser `ISER_RX_LOGIN_SIZE`).
pub const LOGIN_MAX_RECV_DSL: u32 = 8192;
/// Mask of the opcode in byte 0 (`ISCSI_OPCODE_MASK`).
pub const OPCODE_MASK: u8 = 0x3f;
/// The F (Final) bit in byte 1.
pub const FLAG_FINAL: u8 = 0x80;
/// Task Management Function Request (initiator opcode, RFC 7143 §11.5).
pub const OP_TMF_REQ: u8 = 0x02;
/// Logout Request (initiator opcode, RFC 7143 §11.14).
pub const OP_LOGOUT_REQ: u8 = 0x06;

/// NOP-In (RFC 7143 §11.19).
pub const OP_NOOP_IN: u8 = 0x20;
/// SCSI Response (RFC 7143 §11.4).
pub const OP_SCSI_RSP: u8 = 0x21;
/// Task Management Function Response (RFC 7143 §11.6).
pub const OP_TMF_RSP: u8 = 0x22;
/// Login Response (RFC 7143 §11.13).
pub const OP_LOGIN_RSP: u8 = 0x23;
/// Text Response (RFC 7143 §11.11).
pub const OP_TEXT_RSP: u8 = 0x24;
/// SCSI Data-In (RFC 7143 §11.7), data-type in iSER (iSER §7.1).
pub const OP_DATA_IN: u8 = 0x25;
/// Logout Response (RFC 7143 §11.15).
pub const OP_LOGOUT_RSP: u8 = 0x26;
/// Ready To Transfer (RFC 7143 §11.8), data-type in iSER (iSER §7.1).
pub const OP_R2T: u8 = 0x31;
/// Asynchronous Message (RFC 7143 §11.9).
pub const OP_ASYNC_MSG: u8 = 0x32;
/// Reject (RFC 7143 §11.17).
pub const OP_REJECT: u8 = 0x3f;

/// Kind of a target opcode in iSER-assisted mode (iSER §7.1, §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PduClass {
    /// Control-type PDU: delivered in a Send message (iSER §7.2).
    Control,
    /// Data-type PDU (SCSI Data-In, R2T): turned into RDMA Write / Read by
    /// the target and never delivered as a Send (iSER §7.1).
    Data,
}

/// Classifies a target opcode (RFC 7143 §11.1 target opcodes, iSER
/// §7.1/§7.2). Anything else (initiator opcodes, vendor or unassigned
/// codes) is [`ProtoError::UnknownOpcode`].
pub const fn classify_opcode(opcode: u8) -> ProtoResult<PduClass> {
    match opcode & OPCODE_MASK {
        OP_NOOP_IN | OP_SCSI_RSP | OP_TMF_RSP | OP_LOGIN_RSP | OP_TEXT_RSP | OP_LOGOUT_RSP
        | OP_ASYNC_MSG | OP_REJECT => Ok(PduClass::Control),
        OP_DATA_IN | OP_R2T => Ok(PduClass::Data),
        op => Err(ProtoError::UnknownOpcode(op)),
    }
}

/// An Initiator Task Tag exactly as it appears on the wire.
///
/// The ITT is opaque to the target (RFC 7143 §11.2.1.8) and Linux libiscsi
/// stores it as a host-endian `itt_t` (`build_itt()` does no byte swap), so
/// the wire bytes are kept raw (libiscsi's `iscsi_itt_to_ctask` checks
/// them); [`Itt::is_reserved`] is endian-independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Itt(pub [u8; 4]);

impl Itt {
    /// The reserved ITT 0xffffffff (`RESERVED_ITT`).
    pub const RESERVED: Itt = Itt([0xff; 4]);

    /// `true` for 0xffffffff (RFC 7143 §11.2.1.8).
    pub fn is_reserved(self) -> bool {
        self == Self::RESERVED
    }
}

/// Connection phase, which decides which PDUs may arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Login phase: only Login Responses (RFC 7143 §6.3, §11.13).
    Login,
    /// Full feature phase in iSER-assisted mode (iSER §7).
    FullFeature,
}

/// Receive-side context for [`parse_target_pdu`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxContext {
    /// Current phase.
    pub phase: Phase,
    /// Largest DataSegmentLength the target may send: the negotiated
    /// InitiatorRecvDataSegmentLength in full feature phase (iSER §6.2,
    /// §6.5), [`LOGIN_MAX_RECV_DSL`] during login.
    pub max_recv_dsl: u32,
}

impl RxContext {
    /// Context for the login phase (limit [`LOGIN_MAX_RECV_DSL`]).
    pub const fn login() -> Self {
        RxContext {
            phase: Phase::Login,
            max_recv_dsl: LOGIN_MAX_RECV_DSL,
        }
    }

    /// Context for full feature phase with the negotiated
    /// InitiatorRecvDataSegmentLength.
    pub const fn full_feature(initiator_recv_dsl: u32) -> Self {
        RxContext {
            phase: Phase::FullFeature,
            max_recv_dsl: initiator_recv_dsl,
        }
    }
}

/// StatSN, ExpCmdSN, MaxCmdSN (bytes 24..36 of every target PDU handled
/// here, RFC 7143 §11.4-§11.19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeqNums {
    /// StatSN.
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
}

/// A residual indication (RFC 7143 §11.4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residual {
    /// Neither overflow nor underflow flagged.
    None,
    /// Overflow (O / o bit) by this many bytes.
    Overflow(u32),
    /// Underflow (U / u bit) by this many bytes.
    Underflow(u32),
}

/// SCSI Response fields (RFC 7143 §11.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScsiResponse {
    /// Response: 0x00 completed at target, 0x01 target failure,
    /// 0x80-0xff vendor specific (§11.4.3).
    pub response: u8,
    /// SCSI status (§11.4.2), meaningful when `response == 0`.
    pub status: u8,
    /// Residual of the (write or read) data transfer, O/U bits (§11.4.5).
    pub residual: Residual,
    /// Residual of the bidirectional read, o/u bits (§11.4.5).
    pub bidi_read_residual: Residual,
    /// ExpDataSN (§11.4.6).
    pub exp_data_sn: u32,
}

/// NOP-In fields (RFC 7143 §11.19).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NopIn {
    /// Target Transfer Tag; not reserved means the target wants a NOP-Out
    /// echoing it (§11.19.2).
    pub ttt: u32,
    /// LUN (meaningful with a valid TTT).
    pub lun: [u8; 8],
}

/// Task Management Function Response fields (RFC 7143 §11.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmfResponse {
    /// Response 0..=6 or 255 (§11.6.1).
    pub response: u8,
}

/// Login stages (RFC 7143 §11.12.3 / §11.13.1: 2 is reserved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoginStage {
    /// SecurityNegotiation (0).
    Security,
    /// LoginOperationalNegotiation (1).
    Operational,
    /// FullFeaturePhase (3).
    FullFeature,
}

impl LoginStage {
    /// Decodes a 2-bit stage value; 2 is reserved.
    pub const fn from_bits(v: u8) -> ProtoResult<Self> {
        match v & 3 {
            0 => Ok(LoginStage::Security),
            1 => Ok(LoginStage::Operational),
            3 => Ok(LoginStage::FullFeature),
            _ => Err(ProtoError::BadLoginStage),
        }
    }
}

/// Login Response fields (RFC 7143 §11.13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginResponse {
    /// T (Transit) bit.
    pub transit: bool,
    /// C (Continue) bit.
    pub cont: bool,
    /// Current stage.
    pub csg: LoginStage,
    /// Next stage, present iff `transit`.
    pub nsg: Option<LoginStage>,
    /// Version-max.
    pub version_max: u8,
    /// Version-active.
    pub version_active: u8,
    /// ISID.
    pub isid: [u8; 6],
    /// TSIH.
    pub tsih: u16,
    /// Status-Class (0 success, 1 redirection, 2 initiator error, 3 target
    /// error).
    pub status_class: u8,
    /// Status-Detail.
    pub status_detail: u8,
}

impl LoginResponse {
    /// The final successful response that moves to full feature phase
    /// (iSER §5.1.1 step 2: T=1, NSG=FullFeaturePhase, Status-Class 0).
    pub fn enters_full_feature(&self) -> bool {
        self.transit && self.nsg == Some(LoginStage::FullFeature) && self.status_class == 0
    }
}

/// Text Response fields (RFC 7143 §11.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextResponse {
    /// F bit.
    pub final_bit: bool,
    /// C bit: the text continues in the next response.
    pub cont: bool,
    /// Target Transfer Tag.
    pub ttt: u32,
    /// LUN.
    pub lun: [u8; 8],
}

/// Logout Response fields (RFC 7143 §11.15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogoutResponse {
    /// Response 0..=3 (§11.15.1).
    pub response: u8,
    /// Time2Wait.
    pub time2wait: u16,
    /// Time2Retain.
    pub time2retain: u16,
}

/// Asynchronous Message fields (RFC 7143 §11.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncMessage {
    /// LUN.
    pub lun: [u8; 8],
    /// AsyncEvent 0..=5 or 255 (§11.9.1).
    pub event: u8,
    /// AsyncVCode.
    pub vcode: u8,
    /// Parameter1.
    pub param1: u16,
    /// Parameter2.
    pub param2: u16,
    /// Parameter3.
    pub param3: u16,
}

/// Reject fields (RFC 7143 §11.17); the rejected header is the first
/// [`BHS_LEN`] bytes of the data segment ([`TargetPdu::rejected_bhs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject {
    /// Reason 0x01..=0x0c (§11.17.1).
    pub reason: u8,
    /// DataSN/R2TSN.
    pub data_sn: u32,
}

/// Per-opcode typed header of a target PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetHeader {
    /// NOP-In.
    NopIn(NopIn),
    /// SCSI Response.
    ScsiResponse(ScsiResponse),
    /// TMF Response.
    TmfResponse(TmfResponse),
    /// Login Response.
    LoginResponse(LoginResponse),
    /// Text Response.
    TextResponse(TextResponse),
    /// Logout Response.
    LogoutResponse(LogoutResponse),
    /// Asynchronous Message.
    AsyncMessage(AsyncMessage),
    /// Reject.
    Reject(Reject),
}

/// A validated PDU received from the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetPdu<'a> {
    /// Opcode (low 6 bits of byte 0).
    pub opcode: u8,
    /// Initiator Task Tag (raw wire bytes).
    pub itt: Itt,
    /// StatSN / ExpCmdSN / MaxCmdSN.
    pub sn: SeqNums,
    /// Per-opcode fields.
    pub header: TargetHeader,
    /// The BHS itself (exactly [`BHS_LEN`] bytes), e.g. for libiscsi.
    pub bhs: &'a [u8],
    /// Additional header segments (TotalAHSLength * 4 bytes).
    pub ahs: &'a [u8],
    /// Data segment (DataSegmentLength bytes, padding excluded).
    pub data: &'a [u8],
}

/// DataSegmentLength from a BHS (bytes 5..8).
pub fn data_segment_length(bhs: &[u8]) -> ProtoResult<u32> {
    wire::be24_at(bhs, 5).ok_or(ProtoError::Truncated)
}

/// Parses and validates a complete received Send message (iSER header,
/// BHS, AHS, data segment, padding) as the initiator (iSER §7.2, §9.2).
/// `msg` is the received buffer truncated to the completion's byte length.
pub fn parse_received_send<'a>(msg: &'a [u8], ctx: &RxContext) -> ProtoResult<TargetPdu<'a>> {
    IserHeader::decode_from_target(msg)?;
    let pdu = msg.get(ISER_HDR_LEN..).ok_or(ProtoError::Truncated)?;
    parse_target_pdu(pdu, ctx)
}

/// The received Send the fast path accepts: a SCSI Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainScsiResponse<'a> {
    /// Initiator Task Tag (raw wire bytes).
    pub itt: Itt,
    /// The BHS (exactly [`BHS_LEN`] bytes).
    pub bhs: &'a [u8],
}

/// The receive path's fast path: a received Send that is a SCSI Response
/// with no AHS and no data segment (the response to nearly every command)
/// in full feature phase. `None` for anything else, and for any such
/// response the full parser would refuse: the caller then runs
/// [`parse_received_send`], which decides. Whatever this accepts,
/// `parse_received_send` accepts with the same ITT and BHS, for any
/// `max_recv_dsl` (host test `fast_path_agrees`, over the fuzz inputs).
///
/// Checks, as the full parser's rules apply to such a PDU: iSER header
/// flags exactly ISER_CTRL (no STag advertised, reserved bits and bytes 1-3
/// zero; bytes 4-27 are ignored without WSV/RSV); exactly 48 bytes after
/// it; opcode SCSI Response; TotalAHSLength and DataSegmentLength 0; F=1;
/// o/u and O/U not both set; Response 0x00, 0x01 or 0x80-0xff; ITT not
/// reserved.
#[inline]
pub fn plain_scsi_response(msg: &[u8]) -> Option<PlainScsiResponse<'_>> {
    let (iser, bhs) = wire::split_at(msg, ISER_HDR_LEN)?;
    if bhs.len() != BHS_LEN || iser.get(..4)? != [ISER_VER, 0, 0, 0] {
        return None;
    }
    let head: [u8; 8] = bhs.get(..8)?.try_into().ok()?;
    let [b0, flags, response, _status, ahs, d0, d1, d2] = head;
    if b0 & OPCODE_MASK != OP_SCSI_RSP || ahs | d0 | d1 | d2 != 0 {
        return None;
    }
    // F set; O/U (0x10/0x08) not both; o/u (0x04/0x02) not both.
    if flags & FLAG_FINAL == 0 || flags & 0x18 == 0x18 || flags & 0x06 == 0x06 {
        return None;
    }
    if matches!(response, 0x02..=0x7f) {
        return None;
    }
    let itt = Itt(wire::arr4_at(bhs, 16)?);
    if itt.is_reserved() {
        return None;
    }
    Some(PlainScsiResponse { itt, bhs })
}

/// Parses and validates the iSCSI part of a received Send: `pdu` starts at
/// the BHS and holds everything received after the iSER header.
///
/// Checks, in order:
/// 1. at least [`BHS_LEN`] bytes;
/// 2. the opcode is a target opcode (RFC 7143 §11.1); Data-In / R2T are
///    [`ProtoError::DataTypePdu`] (iSER §7.1: they never arrive as a Send);
///    during login only Login Responses, in full feature phase no Login
///    Response ([`ProtoError::UnexpectedOpcode`]);
/// 3. DataSegmentLength <= `ctx.max_recv_dsl` (iSER §6.5,
///    RFC 7143 §13.12);
/// 4. length: with `hdr = 48 + 4 * TotalAHSLength`, the received length
///    must lie in `hdr + DSL ..= hdr + pad4(DSL)`. Padding to 4 bytes
///    (RFC 7143 §11.2.3) is optional on the wire in practice: LIO pads SCSI
///    Response sense data (`isert_put_response()`) but sends login/text
///    data unpadded, tgt never pads, and ib_iser (`iscsi_iser_recv()`)
///    accepts up to 4 extra bytes. Anything beyond the padding is an error;
/// 5. AHS structure (RFC 7143 §11.2.2): each AHS is AHSLength (2) + type
///    (1) + AHSLength bytes, padded to 4, exactly filling TotalAHSLength;
/// 6. per-opcode rules (see the `check_*` notes in each arm).
pub fn parse_target_pdu<'a>(pdu: &'a [u8], ctx: &RxContext) -> ProtoResult<TargetPdu<'a>> {
    let (bhs, rest) = wire::split_at(pdu, BHS_LEN).ok_or(ProtoError::Truncated)?;
    let b0 = wire::u8_at(bhs, 0).ok_or(ProtoError::Truncated)?;
    let flags = wire::u8_at(bhs, 1).ok_or(ProtoError::Truncated)?;
    let opcode = b0 & OPCODE_MASK;

    // (2) opcode classification, iSER §7.1/§7.2 and phase.
    if classify_opcode(opcode)? == PduClass::Data {
        return Err(ProtoError::DataTypePdu(opcode));
    }
    match (ctx.phase, opcode == OP_LOGIN_RSP) {
        (Phase::Login, false) | (Phase::FullFeature, true) => {
            return Err(ProtoError::UnexpectedOpcode(opcode));
        }
        _ => {}
    }

    // (3) DataSegmentLength limit.
    let dsl = data_segment_length(bhs)?;
    if dsl > ctx.max_recv_dsl {
        return Err(ProtoError::DataSegmentTooLong {
            dsl,
            max: ctx.max_recv_dsl,
        });
    }

    // (4) received length against the header.
    let ahs_len = u32::from(wire::u8_at(bhs, 4).ok_or(ProtoError::Truncated)?) * 4;
    let received = u32::try_from(rest.len()).unwrap_or(u32::MAX);
    let declared = ahs_len.saturating_add(dsl);
    let allowed = ahs_len.saturating_add(wire::pad4(dsl));
    if received < declared || received > allowed {
        return Err(ProtoError::LengthMismatch {
            declared: declared.saturating_add(BHS_LEN as u32),
            received: received.saturating_add(BHS_LEN as u32),
        });
    }
    let (ahs, after_ahs) = wire::split_at(rest, ahs_len as usize).ok_or(ProtoError::Truncated)?;
    let data = after_ahs.get(..dsl as usize).ok_or(ProtoError::Truncated)?;

    // (5) AHS structure.
    check_ahs(ahs)?;

    let itt = Itt(wire::arr4_at(bhs, 16).ok_or(ProtoError::Truncated)?);
    let sn = SeqNums {
        stat_sn: be32(bhs, 24)?,
        exp_cmd_sn: be32(bhs, 28)?,
        max_cmd_sn: be32(bhs, 32)?,
    };
    let final_bit = flags & FLAG_FINAL != 0;
    let byte2 = wire::u8_at(bhs, 2).ok_or(ProtoError::Truncated)?;
    let lun = wire::arr8_at(bhs, 8).ok_or(ProtoError::Truncated)?;

    // (6) per-opcode rules.
    let header = match opcode {
        OP_NOOP_IN => {
            // RFC 7143 §11.19: F must be 1. A NOP-In answering a NOP-Out
            // (valid ITT) carries TTT 0xffffffff (§11.19.2); an unsolicited
            // NOP-In has ITT 0xffffffff and any TTT (valid = ping wanting a
            // NOP-Out, reserved = no answer wanted).
            require_final(final_bit)?;
            let ttt = be32(bhs, 20)?;
            if !itt.is_reserved() && ttt != RESERVED_TAG {
                return Err(ProtoError::BadTag);
            }
            TargetHeader::NopIn(NopIn { ttt, lun })
        }
        OP_SCSI_RSP => {
            // RFC 7143 §11.4: F=1; o/u and O/U mutually exclusive
            // (§11.4.1); Response 0x00, 0x01 or 0x80-0xff (§11.4.3); ITT
            // names the command; data segment = SenseLength + sense +
            // response data (§11.4.7).
            require_final(final_bit)?;
            require_task_itt(itt)?;
            let o_bidi = flags & 0x10 != 0;
            let u_bidi = flags & 0x08 != 0;
            let o = flags & 0x04 != 0;
            let u = flags & 0x02 != 0;
            if (o_bidi && u_bidi) || (o && u) {
                return Err(ProtoError::InvalidFlags);
            }
            if matches!(byte2, 0x02..=0x7f) {
                return Err(ProtoError::BadResponseCode(byte2));
            }
            if !data.is_empty() {
                parse_scsi_response_data(data)?;
            }
            let bidi_count = be32(bhs, 40)?;
            let count = be32(bhs, 44)?;
            TargetHeader::ScsiResponse(ScsiResponse {
                response: byte2,
                status: wire::u8_at(bhs, 3).ok_or(ProtoError::Truncated)?,
                residual: residual(o, u, count),
                bidi_read_residual: residual(o_bidi, u_bidi, bidi_count),
                exp_data_sn: be32(bhs, 36)?,
            })
        }
        OP_TMF_RSP => {
            // RFC 7143 §11.6: F=1; Response 0..=6 or 255 (§11.6.1); no data
            // segment (libiscsi fails the connection with ISCSI_ERR_PROTO).
            require_final(final_bit)?;
            require_task_itt(itt)?;
            if !matches!(byte2, 0..=6 | 255) {
                return Err(ProtoError::BadResponseCode(byte2));
            }
            require_no_data(dsl)?;
            TargetHeader::TmfResponse(TmfResponse { response: byte2 })
        }
        OP_LOGIN_RSP => TargetHeader::LoginResponse(check_login_rsp(bhs, flags, itt)?),
        OP_TEXT_RSP => {
            // RFC 7143 §11.11: F and C not both set (§11.11.2); the ITT
            // names the Text Request. §11.11.1 also wants TTT 0xffffffff on
            // a final response, but LIO ends a multi-PDU SendTargets with F=1
            // and the TTT it handed out (`iscsit_build_text_rsp()`), and
            // libiscsi/iscsid do not check it, so it is not enforced.
            require_task_itt(itt)?;
            let cont = flags & 0x40 != 0;
            if final_bit && cont {
                return Err(ProtoError::InvalidFlags);
            }
            TargetHeader::TextResponse(TextResponse {
                final_bit,
                cont,
                ttt: be32(bhs, 20)?,
                lun,
            })
        }
        OP_LOGOUT_RSP => {
            // RFC 7143 §11.15: F=1; Response 0..=3 (§11.15.1); no data
            // segment (libiscsi: ISCSI_ERR_PROTO).
            require_final(final_bit)?;
            require_task_itt(itt)?;
            if byte2 > 3 {
                return Err(ProtoError::BadResponseCode(byte2));
            }
            require_no_data(dsl)?;
            TargetHeader::LogoutResponse(LogoutResponse {
                response: byte2,
                time2wait: be16(bhs, 40)?,
                time2retain: be16(bhs, 42)?,
            })
        }
        OP_ASYNC_MSG => {
            // RFC 7143 §11.9: F=1; ITT 0xffffffff; AsyncEvent 0..=5 or 255
            // (§11.9.1; 5 = task termination, added by RFC 7143).
            require_final(final_bit)?;
            if !itt.is_reserved() {
                return Err(ProtoError::BadTag);
            }
            let event = wire::u8_at(bhs, 36).ok_or(ProtoError::Truncated)?;
            if !matches!(event, 0..=5 | 255) {
                return Err(ProtoError::BadAsyncEvent(event));
            }
            TargetHeader::AsyncMessage(AsyncMessage {
                lun,
                event,
                vcode: wire::u8_at(bhs, 37).ok_or(ProtoError::Truncated)?,
                param1: be16(bhs, 38)?,
                param2: be16(bhs, 40)?,
                param3: be16(bhs, 42)?,
            })
        }
        OP_REJECT => {
            // RFC 7143 §11.17: F=1; ITT 0xffffffff; reason 0x01..=0x0c
            // (§11.17.1; 0x01 is kept for RFC 3720 peers, Linux
            // ISCSI_REASON_CMD_BEFORE_LOGIN); the data segment holds the
            // complete rejected header (§11.17.3; libiscsi
            // iscsi_handle_reject()).
            require_final(final_bit)?;
            if !itt.is_reserved() {
                return Err(ProtoError::BadTag);
            }
            if !matches!(byte2, 0x01..=0x0c) {
                return Err(ProtoError::BadRejectReason(byte2));
            }
            if data.len() < BHS_LEN {
                return Err(ProtoError::RejectHeaderMissing);
            }
            TargetHeader::Reject(Reject {
                reason: byte2,
                data_sn: be32(bhs, 36)?,
            })
        }
        // classify_opcode() accepted only the opcodes above and the two
        // data-type ones handled earlier.
        other => return Err(ProtoError::UnknownOpcode(other)),
    };

    Ok(TargetPdu {
        opcode,
        itt,
        sn,
        header,
        bhs,
        ahs,
        data,
    })
}

/// RFC 7143 §11.13: T and C not both set (§11.13.1); CSG/NSG not the
/// reserved 2, NSG only meaningful with T and then later than CSG;
/// Status-Class 0..=3 (§11.13.5); Version-active 0x00 on success
/// (§11.13.3, the only version defined).
fn check_login_rsp(bhs: &[u8], flags: u8, itt: Itt) -> ProtoResult<LoginResponse> {
    require_task_itt(itt)?;
    let transit = flags & 0x80 != 0;
    let cont = flags & 0x40 != 0;
    if transit && cont {
        return Err(ProtoError::InvalidFlags);
    }
    let csg = LoginStage::from_bits((flags >> 2) & 3)?;
    let nsg = if transit {
        let n = LoginStage::from_bits(flags & 3)?;
        if n <= csg {
            return Err(ProtoError::BadLoginStage);
        }
        Some(n)
    } else {
        None
    };
    let status_class = wire::u8_at(bhs, 36).ok_or(ProtoError::Truncated)?;
    if status_class > 3 {
        return Err(ProtoError::BadStatusClass(status_class));
    }
    let version_active = wire::u8_at(bhs, 3).ok_or(ProtoError::Truncated)?;
    if status_class == 0 && version_active != 0 {
        return Err(ProtoError::BadLoginVersion);
    }
    let isid_src = bhs.get(8..14).ok_or(ProtoError::Truncated)?;
    let mut isid = [0u8; 6];
    isid.copy_from_slice(isid_src);
    Ok(LoginResponse {
        transit,
        cont,
        csg,
        nsg,
        version_max: wire::u8_at(bhs, 2).ok_or(ProtoError::Truncated)?,
        version_active,
        isid,
        tsih: be16(bhs, 14)?,
        status_class,
        status_detail: wire::u8_at(bhs, 37).ok_or(ProtoError::Truncated)?,
    })
}

/// Sense and response data of a SCSI Response data segment
/// (RFC 7143 §11.4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenseView<'a> {
    /// Sense data (SenseLength bytes, §11.4.7.2).
    pub sense: &'a [u8],
    /// iSCSI response data following the sense data (§11.4.7.2).
    pub response_data: &'a [u8],
}

/// Splits a SCSI Response data segment (`seg` = exactly DataSegmentLength
/// bytes): 2-byte SenseLength, sense data, then response data
/// (RFC 7143 §11.4.7.2). An empty segment has neither. SenseLength must fit
/// ([`ProtoError::BadSenseLength`], libiscsi `iscsi_scsi_cmd_rsp()`).
pub fn parse_scsi_response_data(seg: &[u8]) -> ProtoResult<SenseView<'_>> {
    if seg.is_empty() {
        return Ok(SenseView {
            sense: &[],
            response_data: &[],
        });
    }
    let sense_len = wire::be16_at(seg, 0).ok_or(ProtoError::BadSenseLength)?;
    let body = seg.get(2..).ok_or(ProtoError::BadSenseLength)?;
    let (sense, response_data) =
        wire::split_at(body, usize::from(sense_len)).ok_or(ProtoError::BadSenseLength)?;
    Ok(SenseView {
        sense,
        response_data,
    })
}

/// Walks the AHS list (RFC 7143 §11.2.2): AHSLength (be16, bytes of
/// AHS-specific data after the type byte), AHSType (1), data, padded to 4.
fn check_ahs(mut ahs: &[u8]) -> ProtoResult<()> {
    while !ahs.is_empty() {
        let len = wire::be16_at(ahs, 0).ok_or(ProtoError::BadAhsLength)?;
        let total = wire::pad4(u32::from(len).saturating_add(3)) as usize;
        if total == 0 {
            return Err(ProtoError::BadAhsLength);
        }
        ahs = ahs.get(total..).ok_or(ProtoError::BadAhsLength)?;
    }
    Ok(())
}

fn residual(over: bool, under: bool, count: u32) -> Residual {
    if over {
        Residual::Overflow(count)
    } else if under {
        Residual::Underflow(count)
    } else {
        Residual::None
    }
}

fn require_final(f: bool) -> ProtoResult<()> {
    if f {
        Ok(())
    } else {
        Err(ProtoError::FinalBitClear)
    }
}

/// Responses to initiator requests echo the request's ITT, which is never
/// the reserved value (RFC 7143 §11.2.1.8; libiscsi routes reserved-ITT
/// PDUs other than NOP-In/Reject/Async to ISCSI_ERR_BAD_OPCODE).
fn require_task_itt(itt: Itt) -> ProtoResult<()> {
    if itt.is_reserved() {
        Err(ProtoError::BadTag)
    } else {
        Ok(())
    }
}

fn require_no_data(dsl: u32) -> ProtoResult<()> {
    if dsl == 0 {
        Ok(())
    } else {
        Err(ProtoError::UnexpectedDataSegment)
    }
}

fn be32(b: &[u8], off: usize) -> ProtoResult<u32> {
    wire::be32_at(b, off).ok_or(ProtoError::Truncated)
}

fn be16(b: &[u8], off: usize) -> ProtoResult<u16> {
    wire::be16_at(b, off).ok_or(ProtoError::Truncated)
}
