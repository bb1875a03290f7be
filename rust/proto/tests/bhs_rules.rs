//! One test per BHS / target-PDU rule; names cite the section.

mod common;

use common::{ffp, valid_pdus, Pdu, TASK_ITT};
use iser_proto::bhs::*;
use iser_proto::{IscsiErr, ProtoError};

fn parse(p: &Pdu) -> Result<TargetHeader, ProtoError> {
    parse_target_pdu(&p.build(), &ffp()).map(|t| t.header)
}

#[test]
fn valid_examples_parse() {
    for (name, bytes, ctx) in valid_pdus() {
        let r = parse_target_pdu(&bytes, &ctx);
        assert!(r.is_ok(), "{name}: {r:?}");
    }
}

/// RFC 7143 §11.2.1: opcode is the low 6 bits; fields at fixed offsets.
#[test]
fn rfc7143_11_2_1_common_fields() {
    let b = Pdu::new(0xc0 | OP_SCSI_RSP).data(&[0, 0]).build();
    let t = parse_target_pdu(&b, &ffp()).unwrap();
    assert_eq!(t.opcode, OP_SCSI_RSP);
    assert_eq!(t.itt, Itt(TASK_ITT.to_ne_bytes()));
    assert_eq!(
        t.sn,
        SeqNums {
            stat_sn: 7,
            exp_cmd_sn: 8,
            max_cmd_sn: 40
        }
    );
    assert_eq!(t.bhs.len(), BHS_LEN);
    assert_eq!(t.data, &[0, 0]);
    assert_eq!(data_segment_length(&b), Ok(2));
}

#[test]
fn rfc7143_11_2_1_truncated_bhs() {
    let b = Pdu::new(OP_NOOP_IN).build();
    assert_eq!(
        parse_target_pdu(&b[..47], &ffp()),
        Err(ProtoError::Truncated)
    );
    assert_eq!(parse_target_pdu(&[], &ffp()), Err(ProtoError::Truncated));
}

/// RFC 7143 §11.1: initiator / unassigned opcodes are not target PDUs.
#[test]
fn rfc7143_11_1_unknown_opcodes() {
    for op in [0x00u8, 0x01, 0x05, 0x10, 0x1c, 0x27, 0x30, 0x3c, 0x3e] {
        let e = parse(&Pdu::new(op)).unwrap_err();
        assert_eq!(e, ProtoError::UnknownOpcode(op));
        assert_eq!(e.iscsi_err(), IscsiErr::BadOpcode);
    }
}

/// iSER §7.1: Data-In and R2T are data-type PDUs, never received in a Send.
#[test]
fn iser_7_1_data_type_pdus_rejected() {
    for op in [OP_DATA_IN, OP_R2T] {
        assert_eq!(classify_opcode(op), Ok(PduClass::Data));
        let e = parse(&Pdu::new(op)).unwrap_err();
        assert_eq!(e, ProtoError::DataTypePdu(op));
        assert_eq!(e.iscsi_err(), IscsiErr::Proto);
    }
}

/// iSER §7.2: everything else a target sends is control-type.
#[test]
fn iser_7_2_control_type_opcodes() {
    for op in [
        OP_NOOP_IN,
        OP_SCSI_RSP,
        OP_TMF_RSP,
        OP_LOGIN_RSP,
        OP_TEXT_RSP,
        OP_LOGOUT_RSP,
        OP_ASYNC_MSG,
        OP_REJECT,
    ] {
        assert_eq!(classify_opcode(op), Ok(PduClass::Control));
    }
}

/// RFC 7143 §6.3 / §11.13: only Login Responses during login, none after.
#[test]
fn rfc7143_6_3_phase_rules() {
    let login = Pdu::new(OP_LOGIN_RSP).flags(0x87).build();
    assert!(parse_target_pdu(&login, &RxContext::login()).is_ok());
    assert_eq!(
        parse_target_pdu(&login, &ffp()),
        Err(ProtoError::UnexpectedOpcode(OP_LOGIN_RSP))
    );
    let nop = Pdu::new(OP_NOOP_IN).build();
    assert_eq!(
        parse_target_pdu(&nop, &RxContext::login()),
        Err(ProtoError::UnexpectedOpcode(OP_NOOP_IN))
    );
}

/// iSER §6.5: DataSegmentLength <= InitiatorRecvDataSegmentLength; 8192
/// during login (ISCSI_DEF_MAX_RECV_SEG_LEN).
#[test]
fn iser_6_5_dsl_limit() {
    let p = Pdu::new(OP_TEXT_RSP).data(&[b'a'; 129]);
    assert_eq!(
        parse_target_pdu(&p.build(), &RxContext::full_feature(128)),
        Err(ProtoError::DataSegmentTooLong { dsl: 129, max: 128 })
    );
    assert!(parse_target_pdu(&p.build(), &RxContext::full_feature(129)).is_ok());
    let big = Pdu::new(OP_LOGIN_RSP).flags(0x87).data(&[0; 8193]);
    let e = parse_target_pdu(&big.build(), &RxContext::login()).unwrap_err();
    assert_eq!(e.iscsi_err(), IscsiErr::DataLen);
    assert_eq!(RxContext::login().max_recv_dsl, 8192);
}

/// RFC 7143 §11.2.3 + Linux practice: padding optional, nothing beyond it.
#[test]
fn rfc7143_11_2_3_received_length() {
    let p = Pdu::new(OP_SCSI_RSP).data(&[0, 1, 0x70]);
    let padded = p.build();
    assert_eq!(padded.len(), 52);
    assert!(parse_target_pdu(&padded, &ffp()).is_ok());
    let unpadded = p.clone().pad(false).build();
    assert_eq!(unpadded.len(), 51);
    assert!(parse_target_pdu(&unpadded, &ffp()).is_ok());
    let mut long = padded.clone();
    long.extend_from_slice(&[0; 4]);
    let e = parse_target_pdu(&long, &ffp()).unwrap_err();
    assert_eq!(
        e,
        ProtoError::LengthMismatch {
            declared: 51,
            received: 56
        }
    );
    assert_eq!(e.iscsi_err(), IscsiErr::DataLen);
    assert!(matches!(
        parse_target_pdu(&padded[..50], &ffp()),
        Err(ProtoError::LengthMismatch { .. })
    ));
    // aligned DSL: no extra bytes allowed at all
    let mut aligned = Pdu::new(OP_NOOP_IN).build();
    aligned.push(0);
    assert!(matches!(
        parse_target_pdu(&aligned, &ffp()),
        Err(ProtoError::LengthMismatch { .. })
    ));
}

/// iSER header + PDU: a full Send message, the header validated as from a
/// target (iSER §9.2).
#[test]
fn iser_9_2_full_send() {
    let p = Pdu::new(OP_NOOP_IN);
    assert!(parse_received_send(&p.send(), &ffp()).is_ok());
    let mut s = p.send();
    s[0] |= 0x04;
    assert_eq!(
        parse_received_send(&s, &ffp()),
        Err(ProtoError::UnexpectedStagAdvertisement)
    );
    assert_eq!(
        parse_received_send(&s[..27], &ffp()),
        Err(ProtoError::Truncated)
    );
    assert_eq!(ISER_HEADERS_LEN, 76);
}

/// RFC 7143 §11.2.2: AHS walk must exactly fill TotalAHSLength.
#[test]
fn rfc7143_11_2_2_ahs_structure() {
    let ok = Pdu::new(OP_SCSI_RSP).ahs(&[0, 1, 1, 0]);
    let b = ok.build();
    let t = parse_target_pdu(&b, &ffp()).unwrap();
    assert_eq!(t.ahs, &[0, 1, 1, 0]);
    let bad = Pdu::new(OP_SCSI_RSP).ahs(&[0, 5, 1, 0]); // needs 8 bytes
    let e = parse(&bad).unwrap_err();
    assert_eq!(e, ProtoError::BadAhsLength);
    assert_eq!(e.iscsi_err(), IscsiErr::AhsLen);
}

/// RFC 7143 §11.4: SCSI Response must have F set.
#[test]
fn rfc7143_11_4_scsi_rsp_final() {
    assert_eq!(
        parse(&Pdu::new(OP_SCSI_RSP).flags(0)),
        Err(ProtoError::FinalBitClear)
    );
}

/// RFC 7143 §11.4.1: o/u and O/U are mutually exclusive.
#[test]
fn rfc7143_11_4_1_residual_flags() {
    for f in [0x80 | 0x10 | 0x08, 0x80 | 0x04 | 0x02] {
        assert_eq!(
            parse(&Pdu::new(OP_SCSI_RSP).flags(f)),
            Err(ProtoError::InvalidFlags)
        );
    }
    let h = parse(
        &Pdu::new(OP_SCSI_RSP)
            .flags(0x80 | 0x10 | 0x02)
            .be32(40, 9)
            .be32(44, 3),
    )
    .unwrap();
    match h {
        TargetHeader::ScsiResponse(r) => {
            assert_eq!(r.bidi_read_residual, Residual::Overflow(9));
            assert_eq!(r.residual, Residual::Underflow(3));
        }
        other => panic!("{other:?}"),
    }
    let h = parse(&Pdu::new(OP_SCSI_RSP).flags(0x80 | 0x08 | 0x04)).unwrap();
    match h {
        TargetHeader::ScsiResponse(r) => {
            assert_eq!(r.bidi_read_residual, Residual::Underflow(0));
            assert_eq!(r.residual, Residual::Overflow(0));
        }
        other => panic!("{other:?}"),
    }
}

/// RFC 7143 §11.4.3: Response 0x00, 0x01, 0x80..=0xff only.
#[test]
fn rfc7143_11_4_3_response_codes() {
    for r in [0u8, 1, 0x80, 0xff] {
        assert!(parse(&Pdu::new(OP_SCSI_RSP).byte(2, r)).is_ok());
    }
    for r in [2u8, 0x40, 0x7f] {
        assert_eq!(
            parse(&Pdu::new(OP_SCSI_RSP).byte(2, r)),
            Err(ProtoError::BadResponseCode(r))
        );
    }
}

/// RFC 7143 §11.4.7.2: SenseLength + sense + response data.
#[test]
fn rfc7143_11_4_7_2_sense_data() {
    let v = parse_scsi_response_data(&[0, 2, 0x70, 0x00, 9, 9]).unwrap();
    assert_eq!(v.sense, &[0x70, 0]);
    assert_eq!(v.response_data, &[9, 9]);
    let v = parse_scsi_response_data(&[]).unwrap();
    assert!(v.sense.is_empty() && v.response_data.is_empty());
    assert_eq!(
        parse_scsi_response_data(&[0]),
        Err(ProtoError::BadSenseLength)
    );
    assert_eq!(
        parse_scsi_response_data(&[0, 3, 1, 2]),
        Err(ProtoError::BadSenseLength)
    );
    assert_eq!(
        parse(&Pdu::new(OP_SCSI_RSP).data(&[0, 9, 1])),
        Err(ProtoError::BadSenseLength)
    );
}

/// RFC 7143 §11.2.1.8: responses echo a real ITT, never 0xffffffff.
#[test]
fn rfc7143_11_2_1_8_response_itt_not_reserved() {
    for op in [OP_SCSI_RSP, OP_TMF_RSP, OP_TEXT_RSP, OP_LOGOUT_RSP] {
        assert_eq!(
            parse(&Pdu::new(op).itt(Itt::RESERVED)),
            Err(ProtoError::BadTag),
            "op {op:#x}"
        );
    }
    let login = Pdu::new(OP_LOGIN_RSP)
        .flags(0x87)
        .itt(Itt::RESERVED)
        .build();
    assert_eq!(
        parse_target_pdu(&login, &RxContext::login()),
        Err(ProtoError::BadTag)
    );
}

/// RFC 7143 §11.6.1: TMF response codes 0..=6, 255; F=1; no data.
#[test]
fn rfc7143_11_6_tmf_response() {
    for r in [0u8, 1, 6, 255] {
        assert!(parse(&Pdu::new(OP_TMF_RSP).byte(2, r)).is_ok());
    }
    for r in [7u8, 0x80, 254] {
        assert_eq!(
            parse(&Pdu::new(OP_TMF_RSP).byte(2, r)),
            Err(ProtoError::BadResponseCode(r))
        );
    }
    assert_eq!(
        parse(&Pdu::new(OP_TMF_RSP).flags(0)),
        Err(ProtoError::FinalBitClear)
    );
    assert_eq!(
        parse(&Pdu::new(OP_TMF_RSP).data(&[1])),
        Err(ProtoError::UnexpectedDataSegment)
    );
}

fn login(flags: u8) -> Pdu {
    Pdu::new(OP_LOGIN_RSP).flags(flags)
}

fn parse_login(p: &Pdu) -> Result<LoginResponse, ProtoError> {
    match parse_target_pdu(&p.build(), &RxContext::login())?.header {
        TargetHeader::LoginResponse(l) => Ok(l),
        other => panic!("{other:?}"),
    }
}

/// RFC 7143 §11.13.1: T and C must not both be set.
#[test]
fn rfc7143_11_13_1_transit_and_continue() {
    assert_eq!(parse_login(&login(0xc7)), Err(ProtoError::InvalidFlags));
    let l = parse_login(&login(0x44)).unwrap();
    assert!(l.cont && !l.transit && l.nsg.is_none());
}

/// RFC 7143 §11.13.1 / §11.12.3: stage 2 reserved; NSG must advance.
#[test]
fn rfc7143_11_13_1_stages() {
    let l = parse_login(&login(0x81)).unwrap(); // T, CSG 0 -> NSG 1
    assert_eq!(
        (l.csg, l.nsg),
        (LoginStage::Security, Some(LoginStage::Operational))
    );
    let l = parse_login(&login(0x87)).unwrap(); // T, CSG 1 -> NSG 3
    assert!(l.enters_full_feature());
    assert_eq!(parse_login(&login(0x08)), Err(ProtoError::BadLoginStage)); // CSG 2
    assert_eq!(parse_login(&login(0x86)), Err(ProtoError::BadLoginStage)); // NSG 2
    assert_eq!(parse_login(&login(0x85)), Err(ProtoError::BadLoginStage)); // 1 -> 1
    assert_eq!(parse_login(&login(0x84)), Err(ProtoError::BadLoginStage)); // 1 -> 0
                                                                           // NSG is ignored without T
    assert!(parse_login(&login(0x06)).is_ok());
}

/// RFC 7143 §11.13.3/§11.13.5: Version-active 0 on success; class 0..=3.
#[test]
fn rfc7143_11_13_5_status_and_version() {
    assert_eq!(
        parse_login(&login(0x87).byte(3, 1)),
        Err(ProtoError::BadLoginVersion)
    );
    // failed login may carry another version (e.g. 0x0205 version unsupported)
    let l = parse_login(&login(0x04).byte(3, 1).byte(36, 2).byte(37, 5)).unwrap();
    assert_eq!((l.status_class, l.status_detail), (2, 5));
    assert!(!l.enters_full_feature());
    assert_eq!(
        parse_login(&login(0x87).byte(36, 4)),
        Err(ProtoError::BadStatusClass(4))
    );
    let l = parse_login(&login(0x87).byte(2, 0).be32(8, 0x0102_0304)).unwrap();
    assert_eq!(&l.isid[..4], &[1, 2, 3, 4]);
}

/// RFC 7143 §11.11: F and C not both set. A final response with a non-
/// reserved TTT is tolerated (LIO multi-PDU SendTargets, see bhs.rs).
#[test]
fn rfc7143_11_11_text_response() {
    assert_eq!(
        parse(&Pdu::new(OP_TEXT_RSP).flags(0xc0)),
        Err(ProtoError::InvalidFlags)
    );
    assert!(parse(&Pdu::new(OP_TEXT_RSP).ttt(5)).is_ok());
    let h = parse(&Pdu::new(OP_TEXT_RSP).flags(0x40).ttt(5)).unwrap();
    assert_eq!(
        h,
        TargetHeader::TextResponse(TextResponse {
            final_bit: false,
            cont: true,
            ttt: 5,
            lun: [0; 8]
        })
    );
}

/// RFC 7143 §11.15.1: Logout response codes 0..=3, F=1, no data.
#[test]
fn rfc7143_11_15_logout_response() {
    for r in 0u8..=3 {
        assert!(parse(&Pdu::new(OP_LOGOUT_RSP).byte(2, r)).is_ok());
    }
    assert_eq!(
        parse(&Pdu::new(OP_LOGOUT_RSP).byte(2, 4)),
        Err(ProtoError::BadResponseCode(4))
    );
    assert_eq!(
        parse(&Pdu::new(OP_LOGOUT_RSP).flags(0)),
        Err(ProtoError::FinalBitClear)
    );
    assert_eq!(
        parse(&Pdu::new(OP_LOGOUT_RSP).data(b"x")),
        Err(ProtoError::UnexpectedDataSegment)
    );
    let h = parse(&Pdu::new(OP_LOGOUT_RSP).be32(40, 0x0002_0014)).unwrap();
    assert_eq!(
        h,
        TargetHeader::LogoutResponse(LogoutResponse {
            response: 0,
            time2wait: 2,
            time2retain: 20
        })
    );
}

/// RFC 7143 §11.9.1: AsyncEvent 0..=5, 255; ITT reserved; F=1.
#[test]
fn rfc7143_11_9_async_message() {
    let a = || Pdu::new(OP_ASYNC_MSG).itt(Itt::RESERVED);
    for ev in [0u8, 1, 2, 3, 4, 5, 255] {
        assert!(parse(&a().byte(36, ev)).is_ok());
    }
    for ev in [6u8, 100, 254] {
        assert_eq!(parse(&a().byte(36, ev)), Err(ProtoError::BadAsyncEvent(ev)));
    }
    assert_eq!(parse(&Pdu::new(OP_ASYNC_MSG)), Err(ProtoError::BadTag));
    assert_eq!(parse(&a().flags(0)), Err(ProtoError::FinalBitClear));
}

/// RFC 7143 §11.17: reason codes, ITT reserved, rejected header present.
#[test]
fn rfc7143_11_17_reject() {
    let r = || {
        Pdu::new(OP_REJECT)
            .itt(Itt::RESERVED)
            .byte(2, 9)
            .data(&[0x01; 48])
    };
    let b = r().build();
    let t = parse_target_pdu(&b, &ffp()).unwrap();
    assert_eq!(t.data.get(..BHS_LEN), Some(&[0x01u8; 48][..]));
    assert!(t.itt.is_reserved());
    for reason in [0u8, 0x0d, 0xff] {
        assert_eq!(
            parse(&r().byte(2, reason)),
            Err(ProtoError::BadRejectReason(reason))
        );
    }
    assert_eq!(
        parse(&r().data(&[0; 47])),
        Err(ProtoError::RejectHeaderMissing)
    );
    assert_eq!(
        parse(&r().itt(Itt(1u32.to_ne_bytes()))),
        Err(ProtoError::BadTag)
    );
    assert_eq!(parse(&r().flags(0)), Err(ProtoError::FinalBitClear));
}

/// RFC 7143 §11.19: NOP-In tags; F=1.
#[test]
fn rfc7143_11_19_nop_in() {
    // response to a NOP-Out: valid ITT, TTT reserved
    let b = Pdu::new(OP_NOOP_IN).build();
    let t = parse_target_pdu(&b, &ffp()).unwrap();
    assert!(!t.itt.is_reserved());
    // response to a NOP-Out with a TTT: invalid
    assert_eq!(parse(&Pdu::new(OP_NOOP_IN).ttt(3)), Err(ProtoError::BadTag));
    // unsolicited ping (wants a NOP-Out) and unsolicited no-reply NOP-In
    for ttt in [3u32, RESERVED_TAG] {
        let b = Pdu::new(OP_NOOP_IN).itt(Itt::RESERVED).ttt(ttt).build();
        let t = parse_target_pdu(&b, &ffp()).unwrap();
        assert!(t.itt.is_reserved());
        assert_eq!(t.header, TargetHeader::NopIn(NopIn { ttt, lun: [0; 8] }));
    }
    assert_eq!(
        parse(&Pdu::new(OP_NOOP_IN).flags(0)),
        Err(ProtoError::FinalBitClear)
    );
}
