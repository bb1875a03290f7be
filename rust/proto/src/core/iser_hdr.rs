//! The iSER header that precedes every iSCSI control-type PDU in a Send
//! message, and the iSER Hello / HelloReply messages.
//!
//! Wire layout (`struct iser_ctrl`, `include/scsi/iser.h`; iSER §9.1/§9.2,
//! extended to 28 bytes with the base offsets as in RFC 7145 §9.2):
//!
//! ```text
//! byte  0      flags: opcode nibble (0x10 control, 0x20 Hello,
//!              0x30 HelloReply) | WSV 0x08 | RSV 0x04 | 2 reserved bits
//! bytes 1..4   reserved
//! bytes 4..8   Write STag (be32)
//! bytes 8..16  Write VA / base offset (be64)
//! bytes 16..20 Read STag (be32)
//! bytes 20..28 Read VA / base offset (be64)
//! ```

use super::error::{ProtoError, ProtoResult};
use super::wire;

/// Length of the iSER header (`sizeof(struct iser_ctrl)`).
pub const ISER_HDR_LEN: usize = 28;

/// Opcode nibble of an iSCSI control-type PDU (`ISCSI_CTRL` / `ISER_VER`
/// in `iser.h`; iSER §9.2).
pub const ISER_VER: u8 = 0x10;
/// Write STag Valid flag (`ISER_WSV`, iSER §9.2).
pub const ISER_WSV: u8 = 0x08;
/// Read STag Valid flag (`ISER_RSV`, iSER §9.2).
pub const ISER_RSV: u8 = 0x04;
/// Opcode nibble of the iSER Hello message (`ISER_HELLO`, iSER §9.3).
pub const ISER_HELLO: u8 = 0x20;
/// Opcode nibble of the iSER HelloReply message (`ISER_HELLORPLY`,
/// iSER §9.4).
pub const ISER_HELLORPLY: u8 = 0x30;
/// Mask of the opcode nibble in the flags byte.
pub const ISER_OPCODE_MASK: u8 = 0xF0;
/// Reserved low bits of a control-type header's flags byte (iSER §9.2).
const CTRL_RSVD_MASK: u8 = 0x03;
/// Reject bit of the HelloReply (iSER §9.4).
const HELLORPLY_REJECT: u8 = 0x01;
/// Reserved bits of the HelloReply flags byte (iSER §9.4).
const HELLORPLY_RSVD_MASK: u8 = 0x0E;
/// Reserved bits of the Hello flags byte (iSER §9.3).
#[allow(dead_code)] // the target's half of the shared encoding: the test peer runs it
const HELLO_RSVD_MASK: u8 = 0x0F;
/// Minimum length of a Hello / HelloReply message (the 4 meaningful bytes).
const HELLO_MIN_LEN: usize = 4;

/// The iSER protocol version this implementation speaks (iSER §9.3: the
/// version defined by the specification is 1).
pub const ISER_PROTOCOL_VERSION: u8 = 1;

/// The opcode of an iSER message (high nibble of the flags byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IserOpcode {
    /// iSCSI control-type PDU follows (0x1, iSER §9.2).
    Control,
    /// iSER Hello (0x2, iSER §9.3).
    Hello,
    /// iSER HelloReply (0x3, iSER §9.4).
    HelloReply,
}

impl IserOpcode {
    /// Classifies a flags byte by its opcode nibble (iSER §9.1). Unknown
    /// nibbles are [`ProtoError::BadIserOpcode`].
    pub const fn from_flags(flags: u8) -> ProtoResult<Self> {
        match flags & ISER_OPCODE_MASK {
            ISER_VER => Ok(IserOpcode::Control),
            ISER_HELLO => Ok(IserOpcode::Hello),
            ISER_HELLORPLY => Ok(IserOpcode::HelloReply),
            _ => Err(ProtoError::BadIserOpcode(flags)),
        }
    }
}

/// An advertised STag with the virtual address (tagged offset base) of the
/// registered buffer (iSER §2.4.1, §9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagVa {
    /// The STag (rkey).
    pub stag: u32,
    /// Base virtual address / offset of the buffer (Linux ib_iser never
    /// uses zero-based VAs, see [`super::cm_private`]).
    pub va: u64,
}

/// The iSER header of a control-type PDU (iSER §9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IserHeader {
    /// Write STag advertisement (WSV set), iSER §7.3.1 (c) for writes.
    pub write: Option<StagVa>,
    /// Read STag advertisement (RSV set), iSER §7.3.1 (c) for reads.
    pub read: Option<StagVa>,
}

impl IserHeader {
    /// Header without STags: what every PDU other than a SCSI Command (and
    /// a TASK REASSIGN TMF) carries, and what targets send (iSER §9.2).
    pub const fn control() -> Self {
        IserHeader {
            write: None,
            read: None,
        }
    }

    /// The flags byte this header encodes to.
    pub const fn flags(&self) -> u8 {
        let mut f = ISER_VER;
        if self.write.is_some() {
            f |= ISER_WSV;
        }
        if self.read.is_some() {
            f |= ISER_RSV;
        }
        f
    }

    /// Encodes into the 28-byte wire form. Reserved bytes and the fields of
    /// absent STags are written as zero (iSER §9.2: senders zero reserved
    /// fields). Inlined: it runs for every command (Debian's rustc 1.85
    /// kept it out of line).
    #[inline]
    pub fn encode(&self, out: &mut [u8; ISER_HDR_LEN]) {
        *out = [0; ISER_HDR_LEN];
        out[0] = self.flags();
        if let Some(w) = self.write {
            put_stag_va(out, 4, w);
        }
        if let Some(r) = self.read {
            put_stag_va(out, 16, r);
        }
    }

    /// Decodes a control-type iSER header from the start of `buf` (which may
    /// be longer: the BHS follows).
    ///
    /// Validation (iSER §9.2): opcode nibble must be 0x1, the two reserved
    /// flag bits and the three reserved bytes must be zero. The STag/VA
    /// fields are only read when their valid bit is set; otherwise their
    /// contents are ignored (LIO, tgt and ib_iser all zero them anyway).
    pub fn decode(buf: &[u8]) -> ProtoResult<Self> {
        let flags = wire::u8_at(buf, 0).ok_or(ProtoError::Truncated)?;
        if buf.len() < ISER_HDR_LEN {
            return Err(ProtoError::Truncated);
        }
        if IserOpcode::from_flags(flags)? != IserOpcode::Control {
            return Err(ProtoError::BadIserOpcode(flags));
        }
        if flags & CTRL_RSVD_MASK != 0 || !reserved_zero(buf, 1, 4) {
            return Err(ProtoError::IserReservedNotZero);
        }
        let write = if flags & ISER_WSV != 0 {
            Some(get_stag_va(buf, 4)?)
        } else {
            None
        };
        let read = if flags & ISER_RSV != 0 {
            Some(get_stag_va(buf, 16)?)
        } else {
            None
        };
        Ok(IserHeader { write, read })
    }

    /// Decodes the iSER header of a message received by the initiator.
    ///
    /// On top of [`IserHeader::decode`]: a target never advertises STags;
    /// it only uses the initiator's (iSER §7.3.1, §7.3.2, §9.2), and LIO
    /// sends `flags = ISCSI_CTRL` only (`isert_create_send_desc()`). WSV or
    /// RSV set is [`ProtoError::UnexpectedStagAdvertisement`].
    pub fn decode_from_target(buf: &[u8]) -> ProtoResult<Self> {
        let h = Self::decode(buf)?;
        if h.write.is_some() || h.read.is_some() {
            return Err(ProtoError::UnexpectedStagAdvertisement);
        }
        Ok(h)
    }
}

fn put_stag_va(out: &mut [u8; ISER_HDR_LEN], off: usize, s: StagVa) {
    // One 12-byte array store (this runs for every command); within the
    // fixed 28-byte array for off 4 and 16, and a no-op past it.
    let [s0, s1, s2, s3] = s.stag.to_be_bytes();
    let [v0, v1, v2, v3, v4, v5, v6, v7] = s.va.to_be_bytes();
    if let Some(dst) = out.get_mut(off..).and_then(|t| t.first_chunk_mut::<12>()) {
        *dst = [s0, s1, s2, s3, v0, v1, v2, v3, v4, v5, v6, v7];
    }
}

fn get_stag_va(buf: &[u8], off: usize) -> ProtoResult<StagVa> {
    let stag = wire::be32_at(buf, off).ok_or(ProtoError::Truncated)?;
    let va = wire::be64_at(buf, off.saturating_add(4)).ok_or(ProtoError::Truncated)?;
    Ok(StagVa { stag, va })
}

fn reserved_zero(buf: &[u8], from: usize, to: usize) -> bool {
    match buf.get(from..to) {
        Some(s) => s.iter().all(|&b| b == 0),
        None => false,
    }
}

/// The iSER Hello message (iSER §9.3), sent by the initiator as its first
/// iSER message on iWARP (iSER §5.1.1 step 4, §5.1.3). Linux over IB/RoCE
/// uses the CM private data instead (see [`super::cm_private`]).
///
/// ```text
/// byte 0: 0x20 | 4 reserved bits
/// byte 1: MaxVer (high nibble) | MinVer (low nibble)
/// bytes 2..4: iSER-IRD (be16); rest reserved
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Highest iSER version the initiator supports (4 bits).
    pub max_ver: u8,
    /// Lowest iSER version the initiator supports (4 bits).
    pub min_ver: u8,
    /// The initiator's iSER-IRD (iSER §5.1.1, §5.1.3).
    pub ird: u16,
}

/// The iSER HelloReply message (iSER §9.4), sent by the target in answer to
/// the Hello (iSER §5.1.3).
///
/// ```text
/// byte 0: 0x30 | 3 reserved bits | R (reject, 0x01)
/// byte 1: MaxVer (high nibble) | CurVer (low nibble)
/// bytes 2..4: iSER-ORD (be16); rest reserved
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloReply {
    /// R bit: the target rejects the Hello (iSER §9.4).
    pub reject: bool,
    /// Highest iSER version the target supports (4 bits).
    pub max_ver: u8,
    /// Version the target will use (4 bits; meaningless if `reject`).
    pub cur_ver: u8,
    /// The target's iSER-ORD = min(target ORD, initiator iSER-IRD)
    /// (iSER §5.1.3).
    pub ord: u16,
}

impl Hello {
    /// Encodes into a 28-byte message (reserved bytes zero, iSER §9.3).
    /// Version nibbles are truncated to 4 bits.
    pub fn encode(&self, out: &mut [u8; ISER_HDR_LEN]) {
        *out = [0; ISER_HDR_LEN];
        out[0] = ISER_HELLO;
        out[1] = ((self.max_ver & 0x0F) << 4) | (self.min_ver & 0x0F);
        let [a, b] = self.ird.to_be_bytes();
        out[2] = a;
        out[3] = b;
    }

    #[allow(dead_code)] // the target's half of the shared encoding: the test peer runs it
    /// Decodes a Hello (iSER §9.3). `buf` is the whole Send payload: 4 to 28
    /// bytes (the RFC 5046 header is 12 bytes, as illumos sends it; Linux
    /// sizes iSER headers at 28); everything but the first 4 bytes is
    /// reserved and must be zero, as must the low nibble of byte 0. MinVer
    /// must not exceed MaxVer.
    pub fn decode(buf: &[u8]) -> ProtoResult<Self> {
        let (flags, vers, val) = decode_hello_common(buf)?;
        if flags & ISER_OPCODE_MASK != ISER_HELLO {
            return Err(ProtoError::BadIserOpcode(flags));
        }
        if flags & HELLO_RSVD_MASK != 0 {
            return Err(ProtoError::IserReservedNotZero);
        }
        let (max_ver, min_ver) = (vers >> 4, vers & 0x0F);
        if min_ver > max_ver {
            return Err(ProtoError::HelloVersionMismatch);
        }
        Ok(Hello {
            max_ver,
            min_ver,
            ird: val,
        })
    }
}

impl HelloReply {
    #[allow(dead_code)] // the target's half of the shared encoding: the test peer runs it
    /// Encodes into a 28-byte message (reserved bytes zero, iSER §9.4).
    pub fn encode(&self, out: &mut [u8; ISER_HDR_LEN]) {
        *out = [0; ISER_HDR_LEN];
        out[0] = ISER_HELLORPLY | if self.reject { HELLORPLY_REJECT } else { 0 };
        out[1] = ((self.max_ver & 0x0F) << 4) | (self.cur_ver & 0x0F);
        let [a, b] = self.ord.to_be_bytes();
        out[2] = a;
        out[3] = b;
    }

    /// Decodes a HelloReply (iSER §9.4), same framing rules as
    /// [`Hello::decode`].
    pub fn decode(buf: &[u8]) -> ProtoResult<Self> {
        let (flags, vers, val) = decode_hello_common(buf)?;
        if flags & ISER_OPCODE_MASK != ISER_HELLORPLY {
            return Err(ProtoError::BadIserOpcode(flags));
        }
        if flags & HELLORPLY_RSVD_MASK != 0 {
            return Err(ProtoError::IserReservedNotZero);
        }
        Ok(HelloReply {
            reject: flags & HELLORPLY_REJECT != 0,
            max_ver: vers >> 4,
            cur_ver: vers & 0x0F,
            ord: val,
        })
    }

    #[allow(dead_code)] // the target's half of the shared encoding: the test peer runs it
    /// What a compliant target answers to `hello` (iSER §5.1.3): iSER-ORD =
    /// min(target ORD, initiator iSER-IRD); the highest common version, or
    /// the R bit when the version ranges do not overlap. Used by tests and
    /// loopback tooling.
    pub fn for_hello(hello: &Hello, tgt_max_ver: u8, tgt_min_ver: u8, tgt_ord: u16) -> Self {
        let hi = if hello.max_ver < tgt_max_ver {
            hello.max_ver
        } else {
            tgt_max_ver
        };
        let lo = if hello.min_ver > tgt_min_ver {
            hello.min_ver
        } else {
            tgt_min_ver
        };
        let ord = if tgt_ord < hello.ird {
            tgt_ord
        } else {
            hello.ird
        };
        HelloReply {
            reject: hi < lo,
            max_ver: tgt_max_ver & 0x0F,
            cur_ver: if hi < lo { 0 } else { hi & 0x0F },
            ord,
        }
    }
}

fn decode_hello_common(buf: &[u8]) -> ProtoResult<(u8, u8, u16)> {
    if buf.len() < HELLO_MIN_LEN {
        return Err(ProtoError::Truncated);
    }
    if buf.len() > ISER_HDR_LEN {
        // A Hello/HelloReply carries no iSCSI PDU (iSER §9.3, §9.4).
        return Err(ProtoError::LengthMismatch {
            declared: ISER_HDR_LEN as u32,
            received: u32::try_from(buf.len()).unwrap_or(u32::MAX),
        });
    }
    if !reserved_zero(buf, HELLO_MIN_LEN, buf.len()) {
        return Err(ProtoError::IserReservedNotZero);
    }
    let flags = wire::u8_at(buf, 0).ok_or(ProtoError::Truncated)?;
    let vers = wire::u8_at(buf, 1).ok_or(ProtoError::Truncated)?;
    let val = wire::be16_at(buf, 2).ok_or(ProtoError::Truncated)?;
    Ok((flags, vers, val))
}

/// Result of a successful Hello exchange, from the initiator's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloOutcome {
    /// The iSER version in use (the target's CurVer).
    pub version: u8,
    /// The IRD the initiator needs: it MAY lower its IRD to the target's
    /// iSER-ORD (iSER §5.1.3).
    pub ird: u16,
}

/// The initiator's decision on a received HelloReply (iSER §5.1.3, §9.4,
/// failure handling §10.1.3.2: negotiation failure terminates the
/// connection).
///
/// Fails with:
/// * [`ProtoError::HelloRejected`] if the R bit is set;
/// * [`ProtoError::HelloVersionMismatch`] if CurVer is outside
///   `[hello.min_ver, hello.max_ver]` (no common version);
/// * [`ProtoError::HelloOrdZero`] if the initiator declared iSER-IRD > 0
///   and the target declared iSER-ORD 0;
/// * [`ProtoError::HelloOrdExceedsIrd`] if iSER-ORD > iSER-IRD (the target
///   must use the minimum).
pub fn negotiate_hello_reply(hello: &Hello, reply: &HelloReply) -> ProtoResult<HelloOutcome> {
    if reply.reject {
        return Err(ProtoError::HelloRejected);
    }
    if reply.cur_ver < hello.min_ver || reply.cur_ver > hello.max_ver {
        return Err(ProtoError::HelloVersionMismatch);
    }
    if reply.cur_ver > reply.max_ver {
        return Err(ProtoError::HelloVersionMismatch);
    }
    if hello.ird > 0 && reply.ord == 0 {
        return Err(ProtoError::HelloOrdZero);
    }
    if reply.ord > hello.ird {
        return Err(ProtoError::HelloOrdExceedsIrd);
    }
    Ok(HelloOutcome {
        version: reply.cur_ver,
        ird: reply.ord,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sv(stag: u32, va: u64) -> StagVa {
        StagVa { stag, va }
    }

    /// iser.h layout: flags, 3 rsvd, write stag be32, write va be64, read
    /// stag be32, read va be64 (iSER §9.2).
    #[test]
    fn iser_9_2_layout_matches_iser_ctrl() {
        let h = IserHeader {
            write: Some(sv(0x11223344, 0x0102030405060708)),
            read: Some(sv(0xaabbccdd, 0x1112131415161718)),
        };
        let mut b = [0u8; ISER_HDR_LEN];
        h.encode(&mut b);
        assert_eq!(b[0], ISER_VER | ISER_WSV | ISER_RSV);
        assert_eq!(&b[1..4], &[0, 0, 0]);
        assert_eq!(&b[4..8], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[16..20], &[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(
            &b[20..28],
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(IserHeader::decode(&b), Ok(h));
    }

    #[test]
    fn iser_9_2_plain_control_header() {
        let mut b = [0xffu8; ISER_HDR_LEN];
        IserHeader::control().encode(&mut b);
        assert_eq!(b, {
            let mut z = [0u8; ISER_HDR_LEN];
            z[0] = 0x10;
            z
        });
        assert_eq!(
            IserHeader::decode_from_target(&b),
            Ok(IserHeader::control())
        );
    }

    /// iSER §9.2: reserved flag bits and bytes must be zero.
    #[test]
    fn iser_9_2_reserved_nonzero_rejected() {
        let mut b = [0u8; ISER_HDR_LEN];
        b[0] = 0x11;
        assert_eq!(IserHeader::decode(&b), Err(ProtoError::IserReservedNotZero));
        b[0] = 0x12;
        assert_eq!(IserHeader::decode(&b), Err(ProtoError::IserReservedNotZero));
        b[0] = 0x10;
        b[2] = 1;
        assert_eq!(IserHeader::decode(&b), Err(ProtoError::IserReservedNotZero));
    }

    /// iSER §9.1: opcode nibbles other than 1/2/3 are invalid, and a Hello
    /// nibble is not a control header.
    #[test]
    fn iser_9_1_bad_opcode() {
        for f in [0x00u8, 0x40, 0x50, 0xf0, 0x20, 0x30] {
            let mut b = [0u8; ISER_HDR_LEN];
            b[0] = f;
            assert_eq!(IserHeader::decode(&b), Err(ProtoError::BadIserOpcode(f)));
        }
    }

    /// iSER §7.3.2/§9.2: a target never advertises STags.
    #[test]
    fn iser_7_3_2_target_must_not_advertise() {
        for f in [ISER_WSV, ISER_RSV, ISER_WSV | ISER_RSV] {
            let mut b = [0u8; ISER_HDR_LEN];
            b[0] = ISER_VER | f;
            assert!(IserHeader::decode(&b).is_ok());
            assert_eq!(
                IserHeader::decode_from_target(&b),
                Err(ProtoError::UnexpectedStagAdvertisement)
            );
        }
    }

    #[test]
    fn iser_9_2_truncated() {
        let b = [0x10u8; 27];
        assert_eq!(IserHeader::decode(&b[..0]), Err(ProtoError::Truncated));
        assert_eq!(IserHeader::decode(&b), Err(ProtoError::Truncated));
    }

    /// iSER §9.3/§9.4 round trips.
    #[test]
    fn iser_9_3_hello_roundtrip() {
        let h = Hello {
            max_ver: 1,
            min_ver: 1,
            ird: 16,
        };
        let mut b = [0u8; ISER_HDR_LEN];
        h.encode(&mut b);
        assert_eq!(&b[..4], &[0x20, 0x11, 0, 16]);
        assert_eq!(Hello::decode(&b), Ok(h));
        assert_eq!(Hello::decode(&b[..4]), Ok(h));
        // A Hello is not a control-type header, nor a HelloReply.
        assert_eq!(IserHeader::decode(&b), Err(ProtoError::BadIserOpcode(0x20)));
        assert_eq!(HelloReply::decode(&b), Err(ProtoError::BadIserOpcode(0x20)));
        let r = HelloReply {
            reject: false,
            max_ver: 2,
            cur_ver: 1,
            ord: 8,
        };
        r.encode(&mut b);
        assert_eq!(&b[..4], &[0x30, 0x21, 0, 8]);
        assert_eq!(HelloReply::decode(&b), Ok(r));
        assert_eq!(IserHeader::decode(&b), Err(ProtoError::BadIserOpcode(0x30)));
        assert_eq!(Hello::decode(&b), Err(ProtoError::BadIserOpcode(0x30)));
    }

    #[test]
    fn iser_9_3_hello_framing() {
        let mut b = [0u8; 29];
        b[0] = 0x20;
        b[1] = 0x11;
        assert!(matches!(
            Hello::decode(&b),
            Err(ProtoError::LengthMismatch { .. })
        ));
        assert_eq!(Hello::decode(&b[..3]), Err(ProtoError::Truncated));
        b[10] = 1;
        assert_eq!(
            Hello::decode(&b[..28]),
            Err(ProtoError::IserReservedNotZero)
        );
        b[10] = 0;
        b[0] = 0x21;
        assert_eq!(
            Hello::decode(&b[..28]),
            Err(ProtoError::IserReservedNotZero)
        );
        b[0] = 0x20;
        b[1] = 0x12; // MinVer 2 > MaxVer 1
        assert_eq!(
            Hello::decode(&b[..28]),
            Err(ProtoError::HelloVersionMismatch)
        );
        b[0] = 0x32;
        assert_eq!(
            HelloReply::decode(&b[..28]),
            Err(ProtoError::IserReservedNotZero)
        );
    }

    /// iSER §5.1.3: ORD = min(target ORD, IRD); IRD may be lowered to ORD.
    #[test]
    fn iser_5_1_3_ord_is_min() {
        let h = Hello {
            max_ver: 1,
            min_ver: 1,
            ird: 4,
        };
        let r = HelloReply::for_hello(&h, 1, 1, 16);
        assert_eq!(r.ord, 4);
        assert_eq!(
            negotiate_hello_reply(&h, &r),
            Ok(HelloOutcome { version: 1, ird: 4 })
        );
        let r = HelloReply::for_hello(&h, 1, 1, 2);
        assert_eq!(
            negotiate_hello_reply(&h, &r),
            Ok(HelloOutcome { version: 1, ird: 2 })
        );
        let bad = HelloReply { ord: 5, ..r };
        assert_eq!(
            negotiate_hello_reply(&h, &bad),
            Err(ProtoError::HelloOrdExceedsIrd)
        );
    }

    /// iSER §5.1.3: IRD > 0 with ORD 0 is a negotiation failure; IRD 0 with
    /// ORD 0 is fine (no R2Ts will be used, §5.1.1).
    #[test]
    fn iser_5_1_3_ord_zero_failure() {
        let h = Hello {
            max_ver: 1,
            min_ver: 1,
            ird: 1,
        };
        let r = HelloReply::for_hello(&h, 1, 1, 0);
        assert_eq!(negotiate_hello_reply(&h, &r), Err(ProtoError::HelloOrdZero));
        let h0 = Hello { ird: 0, ..h };
        let r0 = HelloReply::for_hello(&h0, 1, 1, 0);
        assert_eq!(
            negotiate_hello_reply(&h0, &r0),
            Ok(HelloOutcome { version: 1, ird: 0 })
        );
    }

    /// iSER §5.1.3: no overlapping version is a negotiation failure; §9.4 R.
    #[test]
    fn iser_5_1_3_version_overlap() {
        let h = Hello {
            max_ver: 2,
            min_ver: 2,
            ird: 1,
        };
        let r = HelloReply::for_hello(&h, 1, 1, 1);
        assert!(r.reject);
        assert_eq!(
            negotiate_hello_reply(&h, &r),
            Err(ProtoError::HelloRejected)
        );
        let r2 = HelloReply {
            reject: false,
            max_ver: 1,
            cur_ver: 1,
            ord: 1,
        };
        assert_eq!(
            negotiate_hello_reply(&h, &r2),
            Err(ProtoError::HelloVersionMismatch)
        );
        let h3 = Hello {
            max_ver: 3,
            min_ver: 1,
            ird: 1,
        };
        let r3 = HelloReply::for_hello(&h3, 2, 2, 1);
        assert_eq!(
            negotiate_hello_reply(&h3, &r3),
            Ok(HelloOutcome { version: 2, ird: 1 })
        );
    }
}
