//! Immediate and unsolicited write data segmentation (iSER §6.4, §7.3.1,
//! RFC 7143 §13.10, §13.11, §13.14).
//!
//! Unsolicited data of a SCSI Write travels in control-type PDUs (iSER
//! §7.2): first as immediate data in the SCSI Command PDU, then in
//! unsolicited SCSI Data-Out PDUs. Every such PDU but the last carries
//! exactly TargetRecvDataSegmentLength bytes (iSER §6.4, §7.3.1). The total
//! is bounded by FirstBurstLength and the transfer length (RFC 7143
//! §13.14). Whatever remains is solicited: the target fetches it with RDMA
//! Reads through the Write STag (iSER §7.3.1 (a)-(c)), whose tagged offset 0
//! is the start of the whole buffer (immediate data included).
//!
//! The plan mirrors libiscsi `iscsi_prep_scsi_cmd_pdu()`:
//! `imm = min(transfer, FirstBurstLength, TRDSL)` if ImmediateData, and
//! unsolicited Data-Out up to `min(transfer, FirstBurstLength)` if
//! InitialR2T=No.

use super::error::{ProtoError, ProtoResult};
use super::login_keys::{MAX_SEGMENT_LEN, MIN_SEGMENT_LEN};

/// The split of one write command's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnsolicitedPlan {
    /// Bytes sent as immediate data in the SCSI Command PDU.
    pub immediate_len: u32,
    /// Total unsolicited bytes (immediate + unsolicited Data-Out), at offset
    /// 0..unsolicited_len of the buffer.
    pub unsolicited_len: u32,
    /// Bytes left to the target's RDMA Reads (solicited data).
    pub solicited_len: u32,
    /// TargetRecvDataSegmentLength used for segmentation.
    pub segment_len: u32,
}

impl UnsolicitedPlan {
    /// The solicited part needs a Write STag advertisement (iSER §7.3.1:
    /// "If there is solicited data ... MUST allocate a Write STag").
    pub fn needs_write_stag(&self) -> bool {
        self.solicited_len > 0
    }

    /// The unsolicited Data-Out PDUs, in order (iSER §6.4).
    pub fn data_out_segments(&self) -> DataOutSegments {
        DataOutSegments {
            next: self.immediate_len,
            end: self.unsolicited_len,
            seg: self.segment_len,
            data_sn: 0,
        }
    }

    /// Number of unsolicited Data-Out PDUs.
    pub fn data_out_count(&self) -> u32 {
        let bytes = self.unsolicited_len.saturating_sub(self.immediate_len);
        bytes.div_ceil(self.segment_len.max(1))
    }
}

/// Plans immediate / unsolicited / solicited data for a write of
/// `transfer_len` bytes (Expected Data Transfer Length) under the
/// negotiated ImmediateData, InitialR2T, FirstBurstLength and
/// TargetRecvDataSegmentLength.
///
/// FirstBurstLength and TargetRecvDataSegmentLength must be within
/// 512..=2^24-1 ([`ProtoError::BadSegmentationParams`]; iSER §6.4,
/// RFC 7143 §13.14).
pub fn plan_unsolicited(
    transfer_len: u32,
    immediate_data: bool,
    initial_r2t: bool,
    first_burst_length: u32,
    target_recv_dsl: u32,
) -> ProtoResult<UnsolicitedPlan> {
    let range = MIN_SEGMENT_LEN..=MAX_SEGMENT_LEN;
    if !range.contains(&first_burst_length) || !range.contains(&target_recv_dsl) {
        return Err(ProtoError::BadSegmentationParams);
    }
    let burst = transfer_len.min(first_burst_length);
    let immediate_len = if immediate_data {
        burst.min(target_recv_dsl)
    } else {
        0
    };
    let unsolicited_len = if initial_r2t { immediate_len } else { burst };
    Ok(UnsolicitedPlan {
        immediate_len,
        unsolicited_len,
        solicited_len: transfer_len.saturating_sub(unsolicited_len),
        segment_len: target_recv_dsl,
    })
}

/// One unsolicited SCSI Data-Out PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataOutSegment {
    /// Buffer Offset.
    pub offset: u32,
    /// DataSegmentLength.
    pub len: u32,
    /// DataSN within the unsolicited sequence (RFC 7143 §11.7.5 starts at 0).
    pub data_sn: u32,
    /// F bit: last PDU of the unsolicited sequence.
    pub final_pdu: bool,
}

/// Iterator over the unsolicited Data-Out PDUs of an [`UnsolicitedPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataOutSegments {
    next: u32,
    end: u32,
    seg: u32,
    data_sn: u32,
}

impl Iterator for DataOutSegments {
    type Item = DataOutSegment;

    fn next(&mut self) -> Option<DataOutSegment> {
        if self.next >= self.end || self.seg == 0 {
            return None;
        }
        let len = self.seg.min(self.end.saturating_sub(self.next));
        let s = DataOutSegment {
            offset: self.next,
            len,
            data_sn: self.data_sn,
            final_pdu: self.next.saturating_add(len) >= self.end,
        };
        self.next = self.next.saturating_add(len);
        self.data_sn = self.data_sn.saturating_add(1);
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn segs(p: &UnsolicitedPlan) -> Vec<(u32, u32, bool)> {
        p.data_out_segments()
            .map(|s| (s.offset, s.len, s.final_pdu))
            .collect()
    }

    /// iSER §7.3.1 / §6.4: non-final PDUs exactly TRDSL, last one <= TRDSL.
    #[test]
    fn iser_7_3_1_exact_segments() {
        let p = plan_unsolicited(100_000, true, false, 65536, 8192)
            .expect("valid inputs: lengths within the negotiated limits");
        assert_eq!(p.immediate_len, 8192);
        assert_eq!(p.unsolicited_len, 65536);
        assert_eq!(p.solicited_len, 100_000 - 65536);
        assert!(p.needs_write_stag());
        let s = segs(&p);
        assert_eq!(s.len(), 7);
        assert_eq!(p.data_out_count(), 7);
        for (i, &(off, len, fin)) in s.iter().enumerate() {
            assert_eq!(off, 8192 * (i as u32 + 1));
            assert_eq!(len, 8192);
            assert_eq!(fin, i == 6);
        }
    }

    /// RFC 7143 §13.14: unsolicited <= FirstBurstLength and <= transfer.
    #[test]
    fn rfc7143_13_14_bounded_by_transfer() {
        let p = plan_unsolicited(10_000, true, false, 65536, 4096)
            .expect("valid inputs: lengths within the negotiated limits");
        assert_eq!(
            (p.immediate_len, p.unsolicited_len, p.solicited_len),
            (4096, 10_000, 0)
        );
        assert!(!p.needs_write_stag());
        assert_eq!(segs(&p), [(4096, 4096, false), (8192, 1808, true)]);
    }

    /// RFC 7143 §13.10/§13.11: InitialR2T=Yes -> immediate only;
    /// ImmediateData=No -> Data-Out only; both off -> all solicited.
    #[test]
    fn rfc7143_13_10_13_11_modes() {
        let p = plan_unsolicited(20_000, true, true, 65536, 8192)
            .expect("valid inputs: lengths within the negotiated limits");
        assert_eq!((p.immediate_len, p.unsolicited_len), (8192, 8192));
        assert!(segs(&p).is_empty());
        let p = plan_unsolicited(20_000, false, false, 16384, 8192)
            .expect("valid inputs: lengths within the negotiated limits");
        assert_eq!(
            (p.immediate_len, p.unsolicited_len, p.solicited_len),
            (0, 16384, 3616)
        );
        assert_eq!(segs(&p), [(0, 8192, false), (8192, 8192, true)]);
        let p = plan_unsolicited(20_000, false, true, 16384, 8192)
            .expect("valid inputs: lengths within the negotiated limits");
        assert_eq!(
            (p.immediate_len, p.unsolicited_len, p.solicited_len),
            (0, 0, 20_000)
        );
        let p = plan_unsolicited(0, true, false, 16384, 8192)
            .expect("valid inputs: lengths within the negotiated limits");
        assert_eq!(
            (p.immediate_len, p.unsolicited_len, p.solicited_len),
            (0, 0, 0)
        );
    }

    /// iSER §6.4 / RFC 7143 §13.14 ranges.
    #[test]
    fn iser_6_4_param_ranges() {
        assert_eq!(
            plan_unsolicited(1, true, false, 511, 8192),
            Err(ProtoError::BadSegmentationParams)
        );
        assert_eq!(
            plan_unsolicited(1, true, false, 8192, 1 << 24),
            Err(ProtoError::BadSegmentationParams)
        );
        assert!(plan_unsolicited(u32::MAX, true, false, (1 << 24) - 1, 512).is_ok());
    }
}
