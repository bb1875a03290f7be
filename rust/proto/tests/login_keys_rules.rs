//! One test per login-key rule; names cite the section.

use iser_proto::error::LoginKey;
use iser_proto::login_keys::*;
use iser_proto::{IscsiErr, ProtoError};

fn neg(text: &[u8]) -> Result<NegotiatedParams, ProtoError> {
    validate_login_response_keys(text, &InitiatorOffer::default())
}

const BASE: &[u8] = b"RDMAExtensions=Yes\0";

fn with(extra: &[u8]) -> Vec<u8> {
    let mut v = BASE.to_vec();
    v.extend_from_slice(extra);
    v
}

/// RFC 7143 §6.1: key=value\0 pairs.
#[test]
fn rfc7143_6_1_pairs() {
    let t = b"A=1\0Bb=\0C.d-e+f@g_h=x=y\0";
    let v: Vec<_> = pairs(t).map(|p| p.unwrap()).collect();
    assert_eq!(
        v,
        [
            (&b"A"[..], &b"1"[..]),
            (&b"Bb"[..], &b""[..]),
            (&b"C.d-e+f@g_h"[..], &b"x=y"[..])
        ]
    );
    // trailing NULs (padding) are fine
    assert_eq!(pairs(b"A=1\0\0\0\0").count(), 1);
    assert_eq!(pairs(b"").count(), 0);
}

/// RFC 7143 §6.1: syntax errors stop the iteration.
#[test]
fn rfc7143_6_1_syntax_errors() {
    for bad in [
        &b"A=1"[..],     // no terminating NUL
        b"A1\0",         // no '='
        b"=1\0",         // empty key
        b"a=1\0",        // must start with a capital letter
        b"A b=1\0",      // bad character
        b"A=1\0\0B=2\0", // empty pair in the middle
    ] {
        let r: Vec<_> = pairs(bad).collect();
        assert!(
            r.iter().any(|p| p == &Err(ProtoError::KeySyntax)),
            "{bad:?}"
        );
        assert!(r.last().unwrap().is_err());
    }
    let long = [b'K'; 64];
    let mut t = long.to_vec();
    t.extend_from_slice(b"=1\0");
    assert_eq!(pairs(&t).next(), Some(Err(ProtoError::KeySyntax)));
    assert!(key_name_valid(&long[..63]));
}

/// RFC 7143 §6.1: writer produces exactly key=value\0, all or nothing.
#[test]
fn rfc7143_6_1_writer() {
    let mut buf = [0u8; 16];
    let mut w = TextWriter::new(&mut buf);
    w.push(b"Key", b"Val").unwrap();
    w.push_u32(b"N", 4096).unwrap();
    assert_eq!(w.as_bytes(), b"Key=Val\0N=4096\0");
    assert_eq!(w.push(b"Xyz", b"x"), Err(ProtoError::BufferTooSmall));
    assert_eq!(w.len(), 15);
    assert_eq!(w.push(b"bad", b"x"), Err(ProtoError::KeySyntax));
    assert_eq!(w.push(b"B", b"x\0"), Err(ProtoError::KeySyntax));
    w.push(b"", b"").unwrap_err();
}

/// RFC 7143 §5.1: decimal and hex numbers, booleans.
#[test]
fn rfc7143_5_1_values() {
    assert_eq!(parse_number(b"8192"), Some(8192));
    assert_eq!(parse_number(b"0x2000"), Some(8192));
    assert_eq!(parse_number(b"0XfF"), Some(255));
    assert_eq!(parse_number(b"4294967295"), Some(u32::MAX));
    assert_eq!(parse_number(b"4294967296"), None);
    for bad in [&b""[..], b"0x", b"12a", b"-1", b"0b1", b" 1"] {
        assert_eq!(parse_number(bad), None, "{bad:?}");
    }
    assert_eq!(parse_bool(b"Yes"), Some(true));
    assert_eq!(parse_bool(b"No"), Some(false));
    assert_eq!(parse_bool(b"yes"), None);
}

/// iSER §6.3: RDMAExtensions must be answered Yes.
#[test]
fn iser_6_3_rdma_extensions() {
    assert!(neg(BASE).unwrap().rdma_extensions);
    assert_eq!(
        neg(b"RDMAExtensions=No\0"),
        Err(ProtoError::RdmaExtensionsRefused)
    );
    assert_eq!(
        neg(b"RDMAExtensions=NotUnderstood\0"),
        Err(ProtoError::RdmaExtensionsRefused)
    );
    assert_eq!(
        neg(b"RDMAExtensions=maybe\0"),
        Err(ProtoError::BadKeyValue(LoginKey::RdmaExtensions))
    );
    assert_eq!(neg(b""), Err(ProtoError::RdmaExtensionsMissing));
    assert_eq!(
        neg(b"RDMAExtensions=No\0").unwrap_err().iscsi_err(),
        IscsiErr::Proto
    );
}

/// iSER §5.1/§6.3: not on discovery or non-leading connections.
#[test]
fn iser_5_1_rdma_extensions_not_offered() {
    let offer = InitiatorOffer {
        rdma_extensions: false,
        ..InitiatorOffer::default()
    };
    assert!(validate_login_response_keys(b"", &offer).is_ok());
    assert_eq!(
        validate_login_response_keys(BASE, &offer),
        Err(ProtoError::BadKeyValue(LoginKey::RdmaExtensions))
    );
}

/// iSER §6.4/§6.5: ranges 512..=2^24-1, default 8192, result minimum.
#[test]
fn iser_6_4_6_5_recv_data_segment_lengths() {
    let p = neg(BASE).unwrap();
    assert_eq!((p.initiator_recv_dsl, p.target_recv_dsl), (8192, 8192));
    let offer = InitiatorOffer {
        initiator_recv_dsl: 262_144,
        target_recv_dsl: 65536,
        ..InitiatorOffer::default()
    };
    let p = validate_login_response_keys(
        &with(b"InitiatorRecvDataSegmentLength=131072\0TargetRecvDataSegmentLength=1048576\0"),
        &offer,
    )
    .unwrap();
    assert_eq!((p.initiator_recv_dsl, p.target_recv_dsl), (131_072, 65536));
    assert_eq!(p.rx_context().max_recv_dsl, 131_072);
    for (t, k) in [
        (
            &b"InitiatorRecvDataSegmentLength=511\0"[..],
            LoginKey::InitiatorRecvDataSegmentLength,
        ),
        (
            b"InitiatorRecvDataSegmentLength=16777216\0",
            LoginKey::InitiatorRecvDataSegmentLength,
        ),
        (
            b"TargetRecvDataSegmentLength=x\0",
            LoginKey::TargetRecvDataSegmentLength,
        ),
        (
            b"TargetRecvDataSegmentLength=Reject\0",
            LoginKey::TargetRecvDataSegmentLength,
        ),
    ] {
        assert_eq!(neg(&with(t)), Err(ProtoError::BadKeyValue(k)));
    }
    assert_eq!(
        neg(&with(b"TargetRecvDataSegmentLength=16777215\0"))
            .unwrap()
            .target_recv_dsl,
        8192
    );
}

/// iSER §6.7: 0 (no limit) or 2..=2^32-1.
#[test]
fn iser_6_7_max_outstanding_unexpected_pdus() {
    assert_eq!(
        neg(&with(b"MaxOutstandingUnexpectedPDUs=0\0"))
            .unwrap()
            .target_max_outstanding_unexpected_pdus,
        0
    );
    assert_eq!(
        neg(&with(b"MaxOutstandingUnexpectedPDUs=4294967295\0"))
            .unwrap()
            .target_max_outstanding_unexpected_pdus,
        u32::MAX
    );
    assert_eq!(
        neg(&with(b"MaxOutstandingUnexpectedPDUs=1\0")),
        Err(ProtoError::BadKeyValue(
            LoginKey::MaxOutstandingUnexpectedPdus
        ))
    );
    let bad = InitiatorOffer {
        max_outstanding_unexpected_pdus: 1,
        ..InitiatorOffer::default()
    };
    assert!(bad.validate().is_err());
}

/// iSER §6.1: digests must be None.
#[test]
fn iser_6_1_digests_none() {
    assert!(neg(&with(b"HeaderDigest=None\0DataDigest=None\0")).is_ok());
    assert!(neg(&with(b"HeaderDigest=Irrelevant\0")).is_ok());
    for t in [
        &b"HeaderDigest=CRC32C\0"[..],
        b"DataDigest=CRC32C\0",
        b"DataDigest=CRC32C,None\0",
    ] {
        assert_eq!(neg(&with(t)), Err(ProtoError::DigestNotNone));
    }
}

/// iSER §6.6: markers must be No.
#[test]
fn iser_6_6_markers_no() {
    assert!(neg(&with(b"OFMarker=No\0IFMarker=NotUnderstood\0")).is_ok());
    assert_eq!(neg(&with(b"IFMarker=Yes\0")), Err(ProtoError::MarkerNotNo));
    assert_eq!(neg(&with(b"OFMarker=Yes\0")), Err(ProtoError::MarkerNotNo));
}

/// iSER §6.2: MaxRecvDataSegmentLength is ignored in iSER mode.
#[test]
fn iser_6_2_max_recv_dsl_ignored() {
    let p = neg(&with(b"MaxRecvDataSegmentLength=262144\0")).unwrap();
    assert_eq!(p.initiator_recv_dsl, 8192);
}

/// RFC 7143 §6.1: a key answered twice is an error.
#[test]
fn rfc7143_6_1_duplicate_keys() {
    assert_eq!(
        neg(&with(b"RDMAExtensions=Yes\0")),
        Err(ProtoError::DuplicateKey(LoginKey::RdmaExtensions))
    );
    // also across Login Responses
    let mut n = LoginNegotiation::new(InitiatorOffer::default());
    n.absorb(b"TargetRecvDataSegmentLength=4096\0").unwrap();
    assert_eq!(
        n.absorb(b"TargetRecvDataSegmentLength=4096\0"),
        Err(ProtoError::DuplicateKey(
            LoginKey::TargetRecvDataSegmentLength
        ))
    );
}

/// RFC 7143 §6.3: keys may be spread over several Login Responses.
#[test]
fn rfc7143_6_3_multi_pdu_negotiation() {
    let mut n = LoginNegotiation::new(InitiatorOffer::default());
    n.absorb(b"TargetRecvDataSegmentLength=4096\0").unwrap();
    assert_eq!(n.finish(), Err(ProtoError::RdmaExtensionsMissing));
    n.absorb(b"RDMAExtensions=Yes\0ImmediateData=No\0").unwrap();
    let p = n.finish().unwrap();
    assert_eq!(p.target_recv_dsl, 4096);
    assert!(!p.immediate_data);
}

/// RFC 7143 §13.10/§13.11/§13.13/§13.14 result functions.
#[test]
fn rfc7143_13_result_functions() {
    let p = neg(&with(
        b"ImmediateData=Yes\0InitialR2T=No\0FirstBurstLength=32768\0MaxBurstLength=1048576\0",
    ))
    .unwrap();
    assert!(p.immediate_data); // AND(Yes, Yes)
    assert!(p.initial_r2t); // OR(Yes, No)
    assert_eq!(p.first_burst_length, 32768);
    assert_eq!(p.max_burst_length, DEFAULT_MAX_BURST);
    let offer = InitiatorOffer {
        initial_r2t: false,
        immediate_data: false,
        ..InitiatorOffer::default()
    };
    let p =
        validate_login_response_keys(&with(b"InitialR2T=No\0ImmediateData=Yes\0"), &offer).unwrap();
    assert!(!p.initial_r2t && !p.immediate_data);
    // special answers keep the default
    let p = neg(&with(b"FirstBurstLength=Irrelevant\0")).unwrap();
    assert_eq!(p.first_burst_length, DEFAULT_FIRST_BURST);
    // FirstBurstLength must not exceed MaxBurstLength
    assert_eq!(
        neg(&with(b"MaxBurstLength=4096\0")),
        Err(ProtoError::BadKeyValue(LoginKey::FirstBurstLength))
    );
}

/// iSER §6.3: the offer starts with RDMAExtensions=Yes and round-trips.
#[test]
fn iser_6_3_offer_writer() {
    let offer = InitiatorOffer {
        initiator_recv_dsl: 262_144,
        ..InitiatorOffer::default()
    };
    let mut buf = [0u8; 512];
    let n = offer.write(&mut buf).unwrap();
    let text = &buf[..n];
    assert!(text.starts_with(b"RDMAExtensions=Yes\0"));
    let got: Vec<_> = pairs(text).map(|p| p.unwrap()).collect();
    assert!(got.contains(&(&b"InitiatorRecvDataSegmentLength"[..], &b"262144"[..])));
    assert!(got.contains(&(&b"HeaderDigest"[..], &b"None"[..])));
    assert!(got.contains(&(&b"DataDigest"[..], &b"None"[..])));
    // an echo of our own offer is a valid answer
    let p = validate_login_response_keys(text, &offer).unwrap();
    assert_eq!(p.initiator_recv_dsl, 262_144);
    assert_eq!(offer.write(&mut buf[..20]), Err(ProtoError::BufferTooSmall));
}

/// iscsi_iser_set_param(): digests / markers must stay disabled (iSER §6.1,
/// §6.6); other params pass through.
#[test]
fn iser_6_1_6_6_check_set_param() {
    assert_eq!(check_set_param(IscsiParam::HdrDgstEn as u32, b"0"), Ok(()));
    assert_eq!(
        check_set_param(IscsiParam::HdrDgstEn as u32, b"1"),
        Err(ProtoError::DigestNotNone)
    );
    assert_eq!(
        check_set_param(IscsiParam::DataDgstEn as u32, b" 2\n"),
        Err(ProtoError::DigestNotNone)
    );
    assert_eq!(
        check_set_param(IscsiParam::IfMarkerEn as u32, b"1"),
        Err(ProtoError::MarkerNotNo)
    );
    assert_eq!(
        check_set_param(IscsiParam::OfMarkerEn as u32, b"-1"),
        Err(ProtoError::MarkerNotNo)
    );
    assert_eq!(
        check_set_param(IscsiParam::OfMarkerEn as u32, b"0\0"),
        Ok(())
    );
    assert_eq!(
        check_set_param(IscsiParam::HdrDgstEn as u32, b"None"),
        Err(ProtoError::BadKeyValue(LoginKey::HeaderDigest))
    );
    assert_eq!(
        check_set_param(IscsiParam::MaxRecvDlength as u32, b"x"),
        Ok(())
    );
    assert_eq!(check_set_param(7, b"65536"), Ok(()));
    assert_eq!(parse_param_int(b"  +42xyz"), Some(42));
    assert_eq!(parse_param_int(b"99999999999999999999"), None);
}
