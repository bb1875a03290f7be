//! The transport's `set_param` policy (`check_set_param`), one test per
//! rule. Login key negotiation is iscsid's and is not tested here.

use iser_proto::error::LoginKey;
use iser_proto::login_keys::*;
use iser_proto::ProtoError;

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
