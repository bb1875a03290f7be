//! The iSER transport's `set_param` policy (iSER §6): the login keys
//! themselves are negotiated by iscsid (its `iscsi_login` code, with the
//! iSER rules: RDMAExtensions=Yes, Initiator/TargetRecvDataSegmentLength,
//! MaxOutstandingUnexpectedPDUs) and applied by libiscsi, so this core
//! keeps no shadow negotiation. What reaches the transport is checked
//! here, as `iscsi_iser_set_param()` does: `HeaderDigest`/`DataDigest`
//! must be `None` (§6.1) and `OFMarker`/`IFMarker` `No` (§6.6).

use super::error::{LoginKey, ProtoError, ProtoResult};

/// The `enum iscsi_param` values (`include/scsi/iscsi_if.h`) that the
/// iSER transport's `set_param` must police.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum IscsiParam {
    /// `ISCSI_PARAM_MAX_RECV_DLENGTH`
    MaxRecvDlength = 0,
    /// `ISCSI_PARAM_MAX_XMIT_DLENGTH`
    MaxXmitDlength = 1,
    /// `ISCSI_PARAM_HDRDGST_EN`
    HdrDgstEn = 2,
    /// `ISCSI_PARAM_DATADGST_EN`
    DataDgstEn = 3,
    /// `ISCSI_PARAM_IFMARKER_EN`
    IfMarkerEn = 12,
    /// `ISCSI_PARAM_OFMARKER_EN`
    OfMarkerEn = 13,
}

impl IscsiParam {
    /// Maps a raw `enum iscsi_param`; `None` for parameters this module
    /// does not police.
    pub const fn from_raw(v: u32) -> Option<Self> {
        match v {
            0 => Some(IscsiParam::MaxRecvDlength),
            1 => Some(IscsiParam::MaxXmitDlength),
            2 => Some(IscsiParam::HdrDgstEn),
            3 => Some(IscsiParam::DataDgstEn),
            12 => Some(IscsiParam::IfMarkerEn),
            13 => Some(IscsiParam::OfMarkerEn),
            _ => None,
        }
    }
}

/// Parses a `set_param` buffer like the C driver's `sscanf(buf, "%d")`:
/// optional leading ASCII whitespace, optional sign, decimal digits, then
/// anything. `None` if there are no digits or the value overflows `i64`.
pub fn parse_param_int(buf: &[u8]) -> Option<i64> {
    let mut it = buf
        .iter()
        .copied()
        .skip_while(|c| c.is_ascii_whitespace())
        .peekable();
    let neg = match it.peek() {
        Some(b'-') => {
            it.next();
            true
        }
        Some(b'+') => {
            it.next();
            false
        }
        _ => false,
    };
    let mut acc: i64 = 0;
    let mut any = false;
    for c in it {
        let Some(d) = (c as char).to_digit(10) else {
            break;
        };
        any = true;
        acc = acc.checked_mul(10)?.checked_add(i64::from(d))?;
    }
    if !any {
        return None;
    }
    Some(if neg { acc.checked_neg()? } else { acc })
}

/// Policy of the iSER transport's `set_param` (C: `iscsi_iser_set_param()`)
/// for a raw `enum iscsi_param` and its text value. Returns `Ok` when the
/// generic `iscsi_set_param()` may proceed (or, for
/// `ISCSI_PARAM_MAX_RECV_DLENGTH`, when the value is to be ignored as in C).
/// The kernel maps an error to `-EPROTO`.
///
/// * HeaderDigest / DataDigest enabled (non-zero): [`ProtoError::DigestNotNone`]
///   (iSER §6.1);
/// * IFMarker / OFMarker enabled: [`ProtoError::MarkerNotNo`] (iSER §6.6);
/// * unparsable value for one of those four:
///   [`ProtoError::BadKeyValue`].
pub fn check_set_param(param: u32, value: &[u8]) -> ProtoResult<()> {
    let (key, err) = match IscsiParam::from_raw(param) {
        Some(IscsiParam::HdrDgstEn) => (LoginKey::HeaderDigest, ProtoError::DigestNotNone),
        Some(IscsiParam::DataDgstEn) => (LoginKey::DataDigest, ProtoError::DigestNotNone),
        Some(IscsiParam::IfMarkerEn) => (LoginKey::IfMarker, ProtoError::MarkerNotNo),
        Some(IscsiParam::OfMarkerEn) => (LoginKey::OfMarker, ProtoError::MarkerNotNo),
        _ => return Ok(()),
    };
    match parse_param_int(value) {
        Some(0) => Ok(()),
        Some(_) => Err(err),
        None => Err(ProtoError::BadKeyValue(key)),
    }
}
