//! One typed error for the whole protocol core, and its mapping to the
//! iSCSI connection error codes the kernel reports through
//! `iscsi_conn_failure()` (`enum iscsi_err`, `include/scsi/iscsi_if.h`).

/// `enum iscsi_err` from `include/scsi/iscsi_if.h` (Linux 6.12), with the
/// exact numeric values (`ISCSI_ERR_BASE` = 1000). Every value of the C
/// enum is named, as in the header; the module reports a few of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
#[allow(dead_code)]
pub enum IscsiErr {
    /// `ISCSI_ERR_DATASN`
    DataSn = 1001,
    /// `ISCSI_ERR_DATA_OFFSET`
    DataOffset = 1002,
    /// `ISCSI_ERR_MAX_CMDSN`
    MaxCmdSn = 1003,
    /// `ISCSI_ERR_EXP_CMDSN`
    ExpCmdSn = 1004,
    /// `ISCSI_ERR_BAD_OPCODE`
    BadOpcode = 1005,
    /// `ISCSI_ERR_DATALEN`
    DataLen = 1006,
    /// `ISCSI_ERR_AHSLEN`
    AhsLen = 1007,
    /// `ISCSI_ERR_PROTO`
    Proto = 1008,
    /// `ISCSI_ERR_LUN`
    Lun = 1009,
    /// `ISCSI_ERR_BAD_ITT`
    BadItt = 1010,
    /// `ISCSI_ERR_CONN_FAILED`
    ConnFailed = 1011,
    /// `ISCSI_ERR_R2TSN`
    R2tSn = 1012,
    /// `ISCSI_ERR_SESSION_FAILED`
    SessionFailed = 1013,
    /// `ISCSI_ERR_HDR_DGST`
    HdrDgst = 1014,
    /// `ISCSI_ERR_DATA_DGST`
    DataDgst = 1015,
    /// `ISCSI_ERR_PARAM_NOT_FOUND`
    ParamNotFound = 1016,
    /// `ISCSI_ERR_NO_SCSI_CMD`
    NoScsiCmd = 1017,
    /// `ISCSI_ERR_INVALID_HOST`
    InvalidHost = 1018,
    /// `ISCSI_ERR_XMIT_FAILED`
    XmitFailed = 1019,
    /// `ISCSI_ERR_TCP_CONN_CLOSE`
    TcpConnClose = 1020,
    /// `ISCSI_ERR_SCSI_EH_SESSION_RST`
    ScsiEhSessionRst = 1021,
    /// `ISCSI_ERR_NOP_TIMEDOUT`
    NopTimedOut = 1022,
}

impl IscsiErr {
    /// The numeric `enum iscsi_err` value to hand to `iscsi_conn_failure()`.
    pub const fn code(self) -> u32 {
        self as u32
    }
}

/// Which login key a refused `set_param` value refers to (see
/// [`super::login_keys`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginKey {
    /// `HeaderDigest` (iSER §6.1).
    HeaderDigest,
    /// `DataDigest` (iSER §6.1).
    DataDigest,
    /// `OFMarker` (iSER §6.6).
    OfMarker,
    /// `IFMarker` (iSER §6.6).
    IfMarker,
}

/// Every protocol violation or local misuse the core can detect.
///
/// All variants are small and `Copy`; [`ProtoError::iscsi_err`] gives the
/// connection error the kernel reports for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoError {
    // ----- framing ---------------------------------------------------------
    /// The buffer is shorter than the fixed-size structure being parsed.
    Truncated,

    // ----- iSER header / Hello (iSER §9, §5.1.3) ----------------------------
    /// The opcode nibble of the iSER header flags is unknown or not allowed
    /// here (holds the whole flags byte).
    BadIserOpcode(u8),
    /// A reserved bit or byte of an iSER header / Hello message is non-zero.
    IserReservedNotZero,
    /// A target advertised a Write or Read STag (WSV/RSV set); only the
    /// initiator advertises STags (iSER §7.3.1, §9.2).
    UnexpectedStagAdvertisement,
    /// The target rejected the iSER Hello (HelloReply R bit, iSER §9.4).
    HelloRejected,
    /// No common iSER version (iSER §5.1.3).
    HelloVersionMismatch,
    /// Initiator declared iSER-IRD > 0 but the target declared iSER-ORD 0
    /// (iSER §5.1.3).
    HelloOrdZero,
    /// The target declared an iSER-ORD above the initiator's iSER-IRD; it
    /// must use min(ORD, IRD) (iSER §5.1.3).
    HelloOrdExceedsIrd,

    // ----- BHS / PDUs from the target (RFC 7143 §11, iSER §7) --------------
    /// Not a target opcode (RFC 7143 §11.1); holds the opcode.
    UnknownOpcode(u8),
    /// A valid target opcode that may not arrive in the current phase
    /// (e.g. a Login Response in full feature phase); holds the opcode.
    UnexpectedOpcode(u8),
    /// An iSCSI data-type PDU (SCSI Data-In or R2T) arrived in a Send
    /// message; in iSER-assisted mode those are carried by RDMA (iSER §7.1).
    DataTypePdu(u8),
    /// The F (Final) bit is clear on a PDU that must have it set.
    FinalBitClear,
    /// An invalid combination of flag bits (o+u, O+U, T+C, F+C, ...).
    InvalidFlags,
    /// A Response / reason code outside the values the RFC allows.
    BadResponseCode(u8),
    /// Login stage fields (CSG/NSG) invalid (RFC 7143 §11.13.1).
    BadLoginStage,
    /// Login Version-active not 0x00 on a successful Login Response
    /// (RFC 7143 §11.13.3).
    BadLoginVersion,
    /// Login Status-Class not 0..=3 (RFC 7143 §11.13.5).
    BadStatusClass(u8),
    /// AsyncEvent code not defined (RFC 7143 §11.9.1).
    BadAsyncEvent(u8),
    /// Reject reason not defined (RFC 7143 §11.17.1).
    BadRejectReason(u8),
    /// A Reject data segment does not hold the complete rejected header
    /// (RFC 7143 §11.17.3).
    RejectHeaderMissing,
    /// A reserved-tag rule (ITT/TTT 0xffffffff) is violated.
    BadTag,
    /// DataSegmentLength exceeds what the initiator declared it can receive
    /// (iSER §6.5, RFC 7143 §13.12).
    DataSegmentTooLong {
        /// DataSegmentLength from the BHS.
        dsl: u32,
        /// Limit in force.
        max: u32,
    },
    /// The length of the received Send message does not match
    /// BHS + AHS + DataSegmentLength (+ at most the 4-byte padding).
    LengthMismatch {
        /// Bytes the header declares (without padding).
        declared: u32,
        /// Bytes actually received (iSCSI part, without the iSER header).
        received: u32,
    },
    /// A data segment where the PDU type must have none.
    UnexpectedDataSegment,
    /// TotalAHSLength is inconsistent with the PDU / AHS not allowed.
    BadAhsLength,
    /// SenseLength exceeds the data segment (RFC 7143 §11.4.7.2).
    BadSenseLength,

    // ----- set_param policy (iSER §6.1, §6.6) --------------------------------
    /// A value for a known key is malformed or out of range.
    BadKeyValue(LoginKey),
    /// A digest other than `None` was negotiated (iSER §6.1).
    DigestNotNone,
    /// A marker other than `No` was negotiated (iSER §6.6).
    MarkerNotNo,

    // ----- task / STag state machine (iSER §7.3.1-7.3.3) -------------------
    /// A remote or local invalidation names an STag the task never owned.
    UnknownStag(u32),
    /// Invalidation of an STag that is already invalid (or whose local
    /// invalidation is already in flight).
    StagNotValid(u32),
    /// SendInvSE received although remote invalidation was not negotiated
    /// (CM private data, `ISER_SEND_W_INV_NOT_SUP`).
    UnexpectedRemoteInvalidation,
    /// An event that is impossible in the task's current state (second
    /// response, response before the command was sent, reassign with live
    /// STags, ...).
    TaskState,
    /// Read and Write STag of one task are equal.
    DuplicateStag,
}

/// Result alias used throughout the protocol core.
pub type ProtoResult<T> = core::result::Result<T, ProtoError>;

impl ProtoError {
    /// The iSCSI connection error the kernel reports for this error
    /// (`iscsi_conn_failure(conn, err.iscsi_err().code())`).
    ///
    /// Choices follow the C initiator: length problems are
    /// `ISCSI_ERR_DATALEN` (`iscsi_iser_recv()`), bad/unknown opcodes
    /// `ISCSI_ERR_BAD_OPCODE` and ITT problems `ISCSI_ERR_BAD_ITT`
    /// (`__iscsi_complete_pdu()`), bogus remote invalidation
    /// `ISCSI_ERR_CONN_FAILED` (`iser_task_rsp()`), everything else that is a
    /// peer protocol violation `ISCSI_ERR_PROTO`.
    pub const fn iscsi_err(&self) -> IscsiErr {
        match self {
            ProtoError::Truncated
            | ProtoError::DataSegmentTooLong { .. }
            | ProtoError::LengthMismatch { .. } => IscsiErr::DataLen,
            ProtoError::BadAhsLength => IscsiErr::AhsLen,
            ProtoError::UnknownOpcode(_) | ProtoError::UnexpectedOpcode(_) => IscsiErr::BadOpcode,
            ProtoError::HelloRejected
            | ProtoError::HelloVersionMismatch
            | ProtoError::HelloOrdZero
            | ProtoError::HelloOrdExceedsIrd
            | ProtoError::UnknownStag(_)
            | ProtoError::StagNotValid(_)
            | ProtoError::UnexpectedRemoteInvalidation
            | ProtoError::TaskState
            | ProtoError::DuplicateStag => IscsiErr::ConnFailed,
            ProtoError::BadIserOpcode(_)
            | ProtoError::IserReservedNotZero
            | ProtoError::UnexpectedStagAdvertisement
            | ProtoError::DataTypePdu(_)
            | ProtoError::FinalBitClear
            | ProtoError::InvalidFlags
            | ProtoError::BadResponseCode(_)
            | ProtoError::BadLoginStage
            | ProtoError::BadLoginVersion
            | ProtoError::BadStatusClass(_)
            | ProtoError::BadAsyncEvent(_)
            | ProtoError::BadRejectReason(_)
            | ProtoError::RejectHeaderMissing
            | ProtoError::BadTag
            | ProtoError::UnexpectedDataSegment
            | ProtoError::BadSenseLength
            | ProtoError::BadKeyValue(_)
            | ProtoError::DigestNotNone
            | ProtoError::MarkerNotNo => IscsiErr::Proto,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `include/scsi/iscsi_if.h`: ISCSI_ERR_BASE = 1000, values in order.
    #[test]
    fn iscsi_if_h_values() {
        assert_eq!(IscsiErr::DataSn.code(), 1001);
        assert_eq!(IscsiErr::BadOpcode.code(), 1005);
        assert_eq!(IscsiErr::DataLen.code(), 1006);
        assert_eq!(IscsiErr::AhsLen.code(), 1007);
        assert_eq!(IscsiErr::Proto.code(), 1008);
        assert_eq!(IscsiErr::BadItt.code(), 1010);
        assert_eq!(IscsiErr::ConnFailed.code(), 1011);
        assert_eq!(IscsiErr::DataDgst.code(), 1015);
        assert_eq!(IscsiErr::NopTimedOut.code(), 1022);
    }

    /// The C initiator's choices (iscsi_iser_recv, __iscsi_complete_pdu,
    /// iser_task_rsp).
    #[test]
    fn mapping_follows_c_initiator() {
        assert_eq!(
            ProtoError::LengthMismatch {
                declared: 48,
                received: 60
            }
            .iscsi_err(),
            IscsiErr::DataLen
        );
        assert_eq!(
            ProtoError::UnknownOpcode(1).iscsi_err(),
            IscsiErr::BadOpcode
        );
        assert_eq!(ProtoError::UnknownStag(3).iscsi_err(), IscsiErr::ConnFailed);
        assert_eq!(ProtoError::DataTypePdu(0x25).iscsi_err(), IscsiErr::Proto);
    }
}
