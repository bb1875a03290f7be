//! iSCSI login/text `key=value` lists and the iSER login key rules.
//!
//! Text format (RFC 7143 §6.1): a sequence of `key=value` pairs, each
//! terminated by one NUL byte. Keys are 1..=63 characters from
//! `[A-Za-z0-9.+@_-]`, starting with a capital letter. Parsing borrows from
//! the input; producing writes into a caller buffer; nothing allocates.
//!
//! iSER keys (iSER §6): `RDMAExtensions` must end up `Yes`;
//! `InitiatorRecvDataSegmentLength` / `TargetRecvDataSegmentLength`
//! (512..=2^24-1, default 8192, result minimum) replace
//! MaxRecvDataSegmentLength, which is ignored (§6.2);
//! `MaxOutstandingUnexpectedPDUs` is 0 (no limit) or 2..=2^32-1 (§6.7);
//! `HeaderDigest`/`DataDigest` must be `None` (§6.1) and
//! `OFMarker`/`IFMarker` `No` (§6.6).

use super::bhs::RxContext;
use super::error::{LoginKey, ProtoError, ProtoResult};
use super::wire;

/// Longest key name (RFC 7143 §6.1).
pub const KEY_MAX_LEN: usize = 63;
/// Smallest legal *RecvDataSegmentLength / burst length (iSER §6.4/§6.5,
/// RFC 7143 §13.12-§13.14).
pub const MIN_SEGMENT_LEN: u32 = 512;
/// Largest legal *RecvDataSegmentLength / burst length (2^24 - 1).
pub const MAX_SEGMENT_LEN: u32 = (1 << 24) - 1;
/// Default of Initiator/TargetRecvDataSegmentLength (iSER §6.4, §6.5).
pub const DEFAULT_RECV_DSL: u32 = 8192;
/// Default FirstBurstLength (RFC 7143 §13.14).
pub const DEFAULT_FIRST_BURST: u32 = 65536;
/// Default MaxBurstLength (RFC 7143 §13.13).
pub const DEFAULT_MAX_BURST: u32 = 262_144;

const K_RDMA_EXT: &[u8] = b"RDMAExtensions";
const K_IRDSL: &[u8] = b"InitiatorRecvDataSegmentLength";
const K_TRDSL: &[u8] = b"TargetRecvDataSegmentLength";
const K_MOUP: &[u8] = b"MaxOutstandingUnexpectedPDUs";
const K_HDGST: &[u8] = b"HeaderDigest";
const K_DDGST: &[u8] = b"DataDigest";
const K_OFMARKER: &[u8] = b"OFMarker";
const K_IFMARKER: &[u8] = b"IFMarker";
const K_IMMEDIATE: &[u8] = b"ImmediateData";
const K_INITIAL_R2T: &[u8] = b"InitialR2T";
const K_FIRST_BURST: &[u8] = b"FirstBurstLength";
const K_MAX_BURST: &[u8] = b"MaxBurstLength";

/// `true` if `key` is a syntactically valid key name (RFC 7143 §6.1).
pub fn key_name_valid(key: &[u8]) -> bool {
    match key.first() {
        Some(c) if c.is_ascii_uppercase() => {}
        _ => return false,
    }
    key.len() <= KEY_MAX_LEN
        && key
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+' | b'@' | b'_'))
}

/// Iterator over the `key=value` pairs of a text data segment
/// (RFC 7143 §6.1). Yields `Err(KeySyntax)` once and then stops on a
/// malformed pair: missing `=`, bad key name, missing terminating NUL, or
/// an empty pair followed by more text. Trailing NUL bytes (padding) are
/// accepted.
#[derive(Debug, Clone)]
pub struct KeyValueIter<'a> {
    rest: &'a [u8],
}

/// Iterates over the pairs of `text` (see [`KeyValueIter`]).
pub fn pairs(text: &[u8]) -> KeyValueIter<'_> {
    KeyValueIter { rest: text }
}

impl<'a> Iterator for KeyValueIter<'a> {
    type Item = ProtoResult<(&'a [u8], &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.iter().all(|&b| b == 0) {
            self.rest = &[];
            return None;
        }
        let res = split_pair(self.rest);
        match res {
            Ok((k, v, rest)) => {
                self.rest = rest;
                Some(Ok((k, v)))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

type Pair<'a> = (&'a [u8], &'a [u8], &'a [u8]);

fn split_pair(text: &[u8]) -> ProtoResult<Pair<'_>> {
    let nul = text
        .iter()
        .position(|&b| b == 0)
        .ok_or(ProtoError::KeySyntax)?;
    let (entry, rest) = wire::split_at(text, nul).ok_or(ProtoError::KeySyntax)?;
    let rest = rest.get(1..).ok_or(ProtoError::KeySyntax)?;
    let eq = entry
        .iter()
        .position(|&b| b == b'=')
        .ok_or(ProtoError::KeySyntax)?;
    let (key, value) = wire::split_at(entry, eq).ok_or(ProtoError::KeySyntax)?;
    let value = value.get(1..).ok_or(ProtoError::KeySyntax)?;
    if !key_name_valid(key) {
        return Err(ProtoError::KeySyntax);
    }
    Ok((key, value, rest))
}

/// Writes `key=value\0` pairs into a caller buffer (RFC 7143 §6.1).
#[derive(Debug)]
pub struct TextWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> TextWriter<'a> {
    /// Starts writing at the beginning of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        TextWriter { buf, len: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` if nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The text written so far.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    /// Appends `key=value\0`. The key must be valid and the value must not
    /// contain NUL ([`ProtoError::KeySyntax`]); if it does not fit,
    /// [`ProtoError::BufferTooSmall`] and nothing is written.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> ProtoResult<()> {
        if !key_name_valid(key) || value.contains(&0) {
            return Err(ProtoError::KeySyntax);
        }
        let need = key
            .len()
            .checked_add(value.len())
            .and_then(|n| n.checked_add(2))
            .ok_or(ProtoError::BufferTooSmall)?;
        let end = self
            .len
            .checked_add(need)
            .ok_or(ProtoError::BufferTooSmall)?;
        let dst = self
            .buf
            .get_mut(self.len..end)
            .ok_or(ProtoError::BufferTooSmall)?;
        // `dst` has exactly `need` bytes; copying through zip leaves no
        // length-mismatch panic path (unlike copy_from_slice).
        let src = key.iter().chain(b"=").chain(value).chain(b"\0");
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
        self.len = end;
        Ok(())
    }

    /// Appends `key=<decimal>\0` (RFC 7143 §5.1 decimal-constant).
    pub fn push_u32(&mut self, key: &[u8], v: u32) -> ProtoResult<()> {
        let mut digits = [0u8; 10];
        let s = fmt_u32(v, &mut digits);
        self.push(key, s)
    }

    /// Appends `key=Yes\0` or `key=No\0` (RFC 7143 §5.1 boolean-value).
    pub fn push_bool(&mut self, key: &[u8], v: bool) -> ProtoResult<()> {
        self.push(key, if v { b"Yes" } else { b"No" })
    }
}

/// Formats `v` in decimal into `buf`, returning the used tail.
fn fmt_u32(mut v: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    while let Some(ni) = i.checked_sub(1) {
        i = ni;
        if let Some(slot) = buf.get_mut(i) {
            // v % 10 < 10, so the addition cannot overflow a u8.
            *slot = b'0' + (v % 10) as u8;
        }
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.get(i..).unwrap_or(&[])
}

/// Parses a numerical value (RFC 7143 §5.1): decimal-constant or
/// hex-constant (`0x`/`0X`), up to 2^32-1. Base64 constants and anything
/// else are `None`.
pub fn parse_number(v: &[u8]) -> Option<u32> {
    let (digits, radix) = match v {
        [b'0', b'x' | b'X', rest @ ..] => (rest, 16u32),
        _ => (v, 10u32),
    };
    if digits.is_empty() {
        return None;
    }
    let mut acc: u32 = 0;
    for &c in digits {
        let d = (c as char).to_digit(radix)?;
        acc = acc.checked_mul(radix)?.checked_add(d)?;
    }
    Some(acc)
}

/// Parses a boolean value `Yes`/`No` (RFC 7143 §5.1).
pub fn parse_bool(v: &[u8]) -> Option<bool> {
    match v {
        b"Yes" => Some(true),
        b"No" => Some(false),
        _ => None,
    }
}

/// `true` for the special answers `Reject`, `Irrelevant`, `NotUnderstood`
/// (RFC 7143 §6.2).
fn is_special(v: &[u8]) -> bool {
    matches!(v, b"Reject" | b"Irrelevant" | b"NotUnderstood")
}

/// What the initiator offers during LoginOperationalNegotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitiatorOffer {
    /// Offer `RDMAExtensions=Yes`: on the leading connection of a Normal
    /// session only (iSER §5.1, §6.3: LO, not for Discovery sessions).
    pub rdma_extensions: bool,
    /// InitiatorRecvDataSegmentLength declared (iSER §6.5).
    pub initiator_recv_dsl: u32,
    /// TargetRecvDataSegmentLength proposed (iSER §6.4).
    pub target_recv_dsl: u32,
    /// MaxOutstandingUnexpectedPDUs declared (iSER §6.7).
    pub max_outstanding_unexpected_pdus: u32,
    /// ImmediateData offered (RFC 7143 §13.11, result AND).
    pub immediate_data: bool,
    /// InitialR2T offered (RFC 7143 §13.10, result OR).
    pub initial_r2t: bool,
    /// FirstBurstLength offered (RFC 7143 §13.14, result minimum).
    pub first_burst_length: u32,
    /// MaxBurstLength offered (RFC 7143 §13.13, result minimum).
    pub max_burst_length: u32,
}

impl Default for InitiatorOffer {
    /// The RFC defaults (iSER §6, RFC 7143 §13) with RDMAExtensions=Yes.
    fn default() -> Self {
        InitiatorOffer {
            rdma_extensions: true,
            initiator_recv_dsl: DEFAULT_RECV_DSL,
            target_recv_dsl: DEFAULT_RECV_DSL,
            max_outstanding_unexpected_pdus: 0,
            immediate_data: true,
            initial_r2t: true,
            first_burst_length: DEFAULT_FIRST_BURST,
            max_burst_length: DEFAULT_MAX_BURST,
        }
    }
}

impl InitiatorOffer {
    /// Checks the offer against the key ranges (iSER §6.4, §6.5, §6.7,
    /// RFC 7143 §13.13, §13.14).
    pub fn validate(&self) -> ProtoResult<()> {
        seg_range(
            self.initiator_recv_dsl,
            LoginKey::InitiatorRecvDataSegmentLength,
        )?;
        seg_range(self.target_recv_dsl, LoginKey::TargetRecvDataSegmentLength)?;
        if self.max_outstanding_unexpected_pdus == 1 {
            return Err(ProtoError::BadKeyValue(
                LoginKey::MaxOutstandingUnexpectedPdus,
            ));
        }
        seg_range(self.first_burst_length, LoginKey::FirstBurstLength)?;
        seg_range(self.max_burst_length, LoginKey::MaxBurstLength)?;
        if self.first_burst_length > self.max_burst_length {
            return Err(ProtoError::BadKeyValue(LoginKey::FirstBurstLength));
        }
        Ok(())
    }

    /// Writes the iSER-related offer (iSER §6.1, §6.3-§6.5, §6.7) plus the
    /// unsolicited-data keys into `buf`; returns the length written.
    /// `RDMAExtensions=Yes` comes first: it must be in the first
    /// LoginOperationalNegotiation request (iSER §6.3).
    pub fn write(&self, buf: &mut [u8]) -> ProtoResult<usize> {
        self.validate()?;
        let mut w = TextWriter::new(buf);
        if self.rdma_extensions {
            w.push_bool(K_RDMA_EXT, true)?;
        }
        w.push(K_HDGST, b"None")?;
        w.push(K_DDGST, b"None")?;
        w.push_u32(K_IRDSL, self.initiator_recv_dsl)?;
        w.push_u32(K_TRDSL, self.target_recv_dsl)?;
        w.push_u32(K_MOUP, self.max_outstanding_unexpected_pdus)?;
        w.push_bool(K_IMMEDIATE, self.immediate_data)?;
        w.push_bool(K_INITIAL_R2T, self.initial_r2t)?;
        w.push_u32(K_FIRST_BURST, self.first_burst_length)?;
        w.push_u32(K_MAX_BURST, self.max_burst_length)?;
        Ok(w.len())
    }
}

/// Outcome of the login negotiation relevant to the iSER datamover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NegotiatedParams {
    /// iSER-assisted mode negotiated (iSER §6.3).
    pub rdma_extensions: bool,
    /// Largest data segment the target may send us (iSER §6.5; use as
    /// [`RxContext::max_recv_dsl`]).
    pub initiator_recv_dsl: u32,
    /// Largest data segment we may send (iSER §6.4; segment unsolicited
    /// data with it, see [`super::unsolicited`]).
    pub target_recv_dsl: u32,
    /// The target's declared MaxOutstandingUnexpectedPDUs, 0 = no limit
    /// (iSER §6.7, §8.1.1).
    pub target_max_outstanding_unexpected_pdus: u32,
    /// ImmediateData result (RFC 7143 §13.11).
    pub immediate_data: bool,
    /// InitialR2T result (RFC 7143 §13.10).
    pub initial_r2t: bool,
    /// FirstBurstLength result (RFC 7143 §13.14).
    pub first_burst_length: u32,
    /// MaxBurstLength result (RFC 7143 §13.13).
    pub max_burst_length: u32,
}

impl NegotiatedParams {
    /// The receive context for full feature phase.
    pub fn rx_context(&self) -> RxContext {
        RxContext::full_feature(self.initiator_recv_dsl)
    }
}

/// Accumulates the target's answers over all Login Responses of one login
/// (keys may be spread over several PDUs, RFC 7143 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginNegotiation {
    offer: InitiatorOffer,
    result: NegotiatedParams,
    seen: u16,
}

const SEEN_RDMA: u16 = 1 << 0;
const SEEN_IRDSL: u16 = 1 << 1;
const SEEN_TRDSL: u16 = 1 << 2;
const SEEN_MOUP: u16 = 1 << 3;
const SEEN_HDGST: u16 = 1 << 4;
const SEEN_DDGST: u16 = 1 << 5;
const SEEN_OFM: u16 = 1 << 6;
const SEEN_IFM: u16 = 1 << 7;
const SEEN_IMM: u16 = 1 << 8;
const SEEN_R2T: u16 = 1 << 9;
const SEEN_FB: u16 = 1 << 10;
const SEEN_MB: u16 = 1 << 11;

impl LoginNegotiation {
    /// Starts a negotiation for `offer`. Keys the target never answers keep
    /// their RFC default (RFC 7143 §6.2: an un-negotiated key has its
    /// default value), combined with the offer by the key's result function.
    pub fn new(offer: InitiatorOffer) -> Self {
        LoginNegotiation {
            offer,
            result: NegotiatedParams {
                rdma_extensions: false,
                initiator_recv_dsl: min(offer.initiator_recv_dsl, DEFAULT_RECV_DSL),
                target_recv_dsl: min(offer.target_recv_dsl, DEFAULT_RECV_DSL),
                target_max_outstanding_unexpected_pdus: 0,
                immediate_data: offer.immediate_data,
                initial_r2t: offer.initial_r2t,
                first_burst_length: min(offer.first_burst_length, DEFAULT_FIRST_BURST),
                max_burst_length: min(offer.max_burst_length, DEFAULT_MAX_BURST),
            },
            seen: 0,
        }
    }

    /// Absorbs the text of one Login Response. Unknown keys are skipped
    /// (other keys are the business of the iSCSI layer). Errors:
    /// * malformed text: [`ProtoError::KeySyntax`];
    /// * a tracked key answered twice: [`ProtoError::DuplicateKey`]
    ///   (RFC 7143 §6.1);
    /// * `RDMAExtensions` other than `Yes`: [`ProtoError::RdmaExtensionsRefused`]
    ///   (iSER §6.3); present although not offered:
    ///   [`ProtoError::BadKeyValue`] (iSER §5.1: LO, not on Discovery);
    /// * digests other than `None` (or `Irrelevant`): [`ProtoError::DigestNotNone`]
    ///   (iSER §6.1);
    /// * markers other than `No` (or `Irrelevant`/`NotUnderstood`, RFC 7143
    ///   dropped the keys): [`ProtoError::MarkerNotNo`] (iSER §6.6);
    /// * Initiator/TargetRecvDataSegmentLength not a number in
    ///   512..=2^24-1 (iSER §6.4, §6.5), MaxOutstandingUnexpectedPDUs 1 or
    ///   not a number (iSER §6.7): [`ProtoError::BadKeyValue`].
    pub fn absorb(&mut self, text: &[u8]) -> ProtoResult<()> {
        for pair in pairs(text) {
            let (k, v) = pair?;
            self.absorb_pair(k, v)?;
        }
        Ok(())
    }

    fn mark(&mut self, bit: u16, key: LoginKey) -> ProtoResult<()> {
        if self.seen & bit != 0 {
            return Err(ProtoError::DuplicateKey(key));
        }
        self.seen |= bit;
        Ok(())
    }

    fn absorb_pair(&mut self, k: &[u8], v: &[u8]) -> ProtoResult<()> {
        match k {
            K_RDMA_EXT => {
                self.mark(SEEN_RDMA, LoginKey::RdmaExtensions)?;
                if !self.offer.rdma_extensions {
                    return Err(ProtoError::BadKeyValue(LoginKey::RdmaExtensions));
                }
                match parse_bool(v) {
                    Some(true) => self.result.rdma_extensions = true,
                    Some(false) => return Err(ProtoError::RdmaExtensionsRefused),
                    None if is_special(v) => return Err(ProtoError::RdmaExtensionsRefused),
                    None => return Err(ProtoError::BadKeyValue(LoginKey::RdmaExtensions)),
                }
            }
            K_IRDSL => {
                self.mark(SEEN_IRDSL, LoginKey::InitiatorRecvDataSegmentLength)?;
                let n = seg_value(v, LoginKey::InitiatorRecvDataSegmentLength)?;
                self.result.initiator_recv_dsl = min(self.offer.initiator_recv_dsl, n);
            }
            K_TRDSL => {
                self.mark(SEEN_TRDSL, LoginKey::TargetRecvDataSegmentLength)?;
                let n = seg_value(v, LoginKey::TargetRecvDataSegmentLength)?;
                self.result.target_recv_dsl = min(self.offer.target_recv_dsl, n);
            }
            K_MOUP => {
                self.mark(SEEN_MOUP, LoginKey::MaxOutstandingUnexpectedPdus)?;
                match parse_number(v) {
                    Some(n) if n != 1 => self.result.target_max_outstanding_unexpected_pdus = n,
                    _ => {
                        return Err(ProtoError::BadKeyValue(
                            LoginKey::MaxOutstandingUnexpectedPdus,
                        ))
                    }
                }
            }
            K_HDGST | K_DDGST => {
                let (bit, key) = if k == K_HDGST {
                    (SEEN_HDGST, LoginKey::HeaderDigest)
                } else {
                    (SEEN_DDGST, LoginKey::DataDigest)
                };
                self.mark(bit, key)?;
                if !matches!(v, b"None" | b"Irrelevant") {
                    return Err(ProtoError::DigestNotNone);
                }
            }
            K_OFMARKER | K_IFMARKER => {
                let (bit, key) = if k == K_OFMARKER {
                    (SEEN_OFM, LoginKey::OfMarker)
                } else {
                    (SEEN_IFM, LoginKey::IfMarker)
                };
                self.mark(bit, key)?;
                if !matches!(v, b"No" | b"Irrelevant" | b"NotUnderstood") {
                    return Err(ProtoError::MarkerNotNo);
                }
            }
            K_IMMEDIATE => {
                self.mark(SEEN_IMM, LoginKey::ImmediateData)?;
                // Result function AND (RFC 7143 §13.11); special answers
                // leave the default (Yes) in force.
                let ans = bool_or_default(v, true, LoginKey::ImmediateData)?;
                self.result.immediate_data = self.offer.immediate_data && ans;
            }
            K_INITIAL_R2T => {
                self.mark(SEEN_R2T, LoginKey::InitialR2t)?;
                // Result function OR (RFC 7143 §13.10), default Yes.
                let ans = bool_or_default(v, true, LoginKey::InitialR2t)?;
                self.result.initial_r2t = self.offer.initial_r2t || ans;
            }
            K_FIRST_BURST => {
                self.mark(SEEN_FB, LoginKey::FirstBurstLength)?;
                let n = seg_or_default(v, DEFAULT_FIRST_BURST, LoginKey::FirstBurstLength)?;
                self.result.first_burst_length = min(self.offer.first_burst_length, n);
            }
            K_MAX_BURST => {
                self.mark(SEEN_MB, LoginKey::MaxBurstLength)?;
                let n = seg_or_default(v, DEFAULT_MAX_BURST, LoginKey::MaxBurstLength)?;
                self.result.max_burst_length = min(self.offer.max_burst_length, n);
            }
            // MaxRecvDataSegmentLength is not used in iSER mode (iSER §6.2);
            // every other key belongs to the iSCSI layer.
            _ => {}
        }
        Ok(())
    }

    /// Ends the negotiation (after the final Login Response). If
    /// `RDMAExtensions=Yes` was offered it must have been answered `Yes`
    /// ([`ProtoError::RdmaExtensionsMissing`], iSER §6.3: the target MUST
    /// respond). FirstBurstLength must not exceed MaxBurstLength
    /// (RFC 7143 §13.14).
    pub fn finish(&self) -> ProtoResult<NegotiatedParams> {
        if self.offer.rdma_extensions && !self.result.rdma_extensions {
            return Err(ProtoError::RdmaExtensionsMissing);
        }
        if self.result.first_burst_length > self.result.max_burst_length {
            return Err(ProtoError::BadKeyValue(LoginKey::FirstBurstLength));
        }
        Ok(self.result)
    }
}

/// Validates the keys of a complete login answer in one go (all Login
/// Response texts concatenated, or a single one): `LoginNegotiation::new`,
/// `absorb`, `finish`.
pub fn validate_login_response_keys(
    text: &[u8],
    offer: &InitiatorOffer,
) -> ProtoResult<NegotiatedParams> {
    let mut n = LoginNegotiation::new(*offer);
    n.absorb(text)?;
    n.finish()
}

fn min(a: u32, b: u32) -> u32 {
    if a < b {
        a
    } else {
        b
    }
}

fn seg_range(n: u32, key: LoginKey) -> ProtoResult<u32> {
    if (MIN_SEGMENT_LEN..=MAX_SEGMENT_LEN).contains(&n) {
        Ok(n)
    } else {
        Err(ProtoError::BadKeyValue(key))
    }
}

fn seg_value(v: &[u8], key: LoginKey) -> ProtoResult<u32> {
    seg_range(parse_number(v).ok_or(ProtoError::BadKeyValue(key))?, key)
}

fn seg_or_default(v: &[u8], default: u32, key: LoginKey) -> ProtoResult<u32> {
    if is_special(v) {
        Ok(default)
    } else {
        seg_value(v, key)
    }
}

fn bool_or_default(v: &[u8], default: bool, key: LoginKey) -> ProtoResult<bool> {
    match parse_bool(v) {
        Some(b) => Ok(b),
        None if is_special(v) => Ok(default),
        None => Err(ProtoError::BadKeyValue(key)),
    }
}

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
