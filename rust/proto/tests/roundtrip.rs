//! Seeded round-trip properties for every encoder/decoder pair.

mod common;

use common::{Pdu, Rng};
use iser_proto::bhs::{self, parse_target_pdu, Itt, RxContext, TargetHeader};
use iser_proto::cm_private::{accept_decision, initiator_request};
use iser_proto::iser_hdr::*;

const N: usize = 20_000;

fn opt_sv(rng: &mut Rng) -> Option<StagVa> {
    rng.chance(2).then(|| StagVa {
        stag: rng.next_u32(),
        va: rng.next_u64(),
    })
}

/// iSER §9.2: decode(encode(h)) == h, and the flags byte reflects WSV/RSV.
#[test]
fn iser_9_2_header_roundtrip() {
    let mut rng = Rng::new(1);
    for _ in 0..N {
        let h = IserHeader {
            write: opt_sv(&mut rng),
            read: opt_sv(&mut rng),
        };
        let mut b = [0u8; ISER_HDR_LEN];
        h.encode(&mut b);
        assert_eq!(IserHeader::decode(&b), Ok(h));
        assert_eq!(b[0] & ISER_WSV != 0, h.write.is_some());
        assert_eq!(b[0] & ISER_RSV != 0, h.read.is_some());
        // trailing BHS bytes do not matter
        let mut long = b.to_vec();
        long.extend_from_slice(&rng.bytes(48));
        assert_eq!(IserHeader::decode(&long), Ok(h));
    }
}

/// iSER §9.3/§9.4: Hello and HelloReply round trips.
#[test]
fn iser_9_3_9_4_hello_roundtrip() {
    let mut rng = Rng::new(2);
    for _ in 0..N {
        let a = (rng.byte() & 0x0f, rng.byte() & 0x0f);
        let h = Hello {
            max_ver: a.0.max(a.1),
            min_ver: a.0.min(a.1),
            ird: rng.next_u32() as u16,
        };
        let mut b = [0u8; ISER_HDR_LEN];
        h.encode(&mut b);
        assert_eq!(Hello::decode(&b), Ok(h));
        let r = HelloReply {
            reject: rng.chance(2),
            max_ver: rng.byte() & 0x0f,
            cur_ver: rng.byte() & 0x0f,
            ord: rng.next_u32() as u16,
        };
        r.encode(&mut b);
        assert_eq!(HelloReply::decode(&b), Ok(r));
        // the compliant target answer is always accepted when versions overlap
        let (tmax, tmin) = (rng.byte() & 0x0f, rng.byte() & 0x0f);
        let (tmax, tmin) = (tmax.max(tmin), tmax.min(tmin));
        let reply = HelloReply::for_hello(&h, tmax, tmin, rng.next_u32() as u16);
        let overlap = h.min_ver.max(tmin) <= h.max_ver.min(tmax);
        let res = negotiate_hello_reply(&h, &reply);
        if overlap && !(h.ird > 0 && reply.ord == 0) {
            let o = res.unwrap();
            assert!(o.ird <= h.ird);
            assert!(o.version >= h.min_ver && o.version <= h.max_ver);
        } else {
            assert!(res.is_err());
        }
    }
}

/// iser.h CM private data: request flags decode back to the offer.
#[test]
fn cm_private_roundtrip() {
    for rinv in [false, true] {
        let req = initiator_request(rinv);
        // a target echoing our flags grants exactly what we asked for
        let t = accept_decision(rinv, Some(&req));
        assert_eq!(t.remote_invalidate, rinv);
        assert!(!t.zero_based_va);
    }
}

#[test]
fn rfc7143_11_target_pdu_roundtrip() {
    let mut rng = Rng::new(4);
    for _ in 0..N {
        let itt = Itt((rng.next_u32() & 0x0fff_1fff).to_ne_bytes());
        let stat_sn = rng.next_u32();
        let dlen = rng.below(300);
        let data = rng.bytes(dlen);
        let (pdu, check): (Pdu, fn(&TargetHeader) -> bool) = match rng.below(4) {
            0 => (
                Pdu::new(bhs::OP_TEXT_RSP).data(&data),
                |h| matches!(h, TargetHeader::TextResponse(t) if t.final_bit),
            ),
            1 => (Pdu::new(bhs::OP_NOOP_IN).data(&data), |h| {
                matches!(h, TargetHeader::NopIn(_))
            }),
            2 => {
                let mut d = (data.len().min(200) as u16).to_be_bytes().to_vec();
                d.extend_from_slice(&data);
                (Pdu::new(bhs::OP_SCSI_RSP).data(&d), |h| {
                    matches!(h, TargetHeader::ScsiResponse(_))
                })
            }
            _ => (
                Pdu::new(bhs::OP_TMF_RSP).byte(2, 5),
                |h| matches!(h, TargetHeader::TmfResponse(t) if t.response == 5),
            ),
        };
        let pdu = pdu.itt(itt).be32(24, stat_sn).pad(rng.chance(2));
        let bytes = pdu.build();
        let t = parse_target_pdu(&bytes, &RxContext::full_feature(1024)).unwrap();
        assert_eq!(t.itt, itt);
        assert_eq!(t.sn.stat_sn, stat_sn);
        assert_eq!(t.data, &pdu.data[..]);
        assert!(check(&t.header), "{:?}", t.header);
        if let TargetHeader::ScsiResponse(_) = t.header {
            let v = bhs::parse_scsi_response_data(t.data).unwrap();
            assert_eq!(v.sense.len() + v.response_data.len() + 2, t.data.len());
        }
    }
}
