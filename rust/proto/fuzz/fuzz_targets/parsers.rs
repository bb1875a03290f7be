//! libFuzzer entry point: the first input byte selects the parser, the rest
//! is its input. Every parser must return (Ok or Err) without panicking;
//! overflow checks are on in cargo-fuzz builds (debug assertions).
#![no_main]

use iser_proto::bhs::{
    parse_received_send, parse_scsi_response_data, parse_target_pdu, plain_scsi_response, RxContext,
};
use iser_proto::cm_private::accept_decision;
use iser_proto::iser_hdr::{Hello, HelloReply, IserHeader};
use iser_proto::login_keys::check_set_param;
use iser_proto::task::TaskStags;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    match sel % 10 {
        0 => {
            let _ = IserHeader::decode(input);
        }
        1 => {
            let _ = Hello::decode(input);
            let _ = HelloReply::decode(input);
        }
        2 => {
            let _ = accept_decision(sel & 0x80 != 0, Some(input));
        }
        3 => {
            let _ = parse_target_pdu(input, &RxContext::full_feature(8192));
        }
        4 => {
            let _ = parse_target_pdu(input, &RxContext::login());
        }
        5 => {
            let full = parse_received_send(input, &RxContext::full_feature(128));
            // The receive path's fast path accepts only what the full
            // parser accepts, with the same ITT and BHS.
            if let Some(fast) = plain_scsi_response(input) {
                let full = full.expect("fast path accepted what the full parser refuses");
                assert_eq!((full.itt, full.bhs), (fast.itt, fast.bhs));
            }
        }
        6 => {
            let _ = parse_scsi_response_data(input);
        }
        7 | 8 => {
            let _ = check_set_param(u32::from(sel >> 4), input);
        }
        _ => {
            // Event script: each byte is one event on a bidi task.
            let Ok(mut t) = TaskStags::new(Some(1), Some(2), sel & 0x80 != 0) else {
                return;
            };
            for &e in input {
                let stag = u32::from(e >> 4) % 4;
                let _ = match e % 5 {
                    0 => t.advertise(),
                    1 => t.on_response(None).map(|_| ()),
                    2 => t.on_response(Some(stag)).map(|_| ()),
                    3 => t.local_invalidate_posted(stag),
                    _ => t.local_invalidate_completed(stag),
                };
                if t.completable() {
                    assert!(t.stags_to_invalidate_locally().is_empty());
                    assert!(t.no_live_stags());
                }
            }
        }
    }
});
