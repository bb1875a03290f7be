//! Seeded fuzz / property run over every parser and the task state machine.
//!
//! Each target gets `ITERS` generated inputs (10^6 in `cargo test
//! --release`, which is what `make check` runs; 20 000 in debug builds):
//! half are mutations (bit flips, interesting values, truncation, extension,
//! insert/remove/swap) of valid encodings, half are random bytes. Besides
//! "never panics" (overflow checks are on in the release profile), each
//! target checks the invariants its successful results must satisfy. The
//! generator is a fixed-seed xorshift, so failures are reproducible; set
//! `ISER_FUZZ_SEED` to explore other seeds.

mod common;

use common::{valid_pdus, Pdu, Rng};
use iser_proto::bhs::{
    self, parse_received_send, parse_target_pdu, plain_scsi_response, RxContext, TargetHeader,
};
use iser_proto::cm_private::accept_decision;
use iser_proto::iser_hdr::*;
use iser_proto::login_keys::check_set_param;
use iser_proto::task::TaskStags;
use std::time::Instant;

const ITERS: usize = if cfg!(debug_assertions) {
    20_000
} else {
    1_000_000
};

fn seed() -> u64 {
    std::env::var("ISER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x15E2_2024)
}

/// Mutated seed or random bytes of length `0..max_len`.
fn input(rng: &mut Rng, seeds: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    if rng.chance(2) {
        let mut v = rng.pick(seeds).clone();
        rng.mutate(&mut v);
        v
    } else {
        let n = rng.below(max_len);
        rng.bytes(n)
    }
}

fn report(name: &str, n: usize, ok: usize, t: Instant) {
    eprintln!(
        "fuzz {name:<22} {n:>8} inputs, {ok:>7} accepted, {:>6} ms",
        t.elapsed().as_millis()
    );
}

#[test]
fn fuzz_iser_header() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 1);
    let mut seeds = Vec::new();
    for f in [0u8, ISER_WSV, ISER_RSV, ISER_WSV | ISER_RSV] {
        let mut b = [0u8; ISER_HDR_LEN];
        IserHeader {
            write: (f & ISER_WSV != 0).then_some(StagVa {
                stag: 7,
                va: 0x1000,
            }),
            read: (f & ISER_RSV != 0).then_some(StagVa {
                stag: 9,
                va: 0x2000,
            }),
        }
        .encode(&mut b);
        seeds.push(b.to_vec());
    }
    let mut ok = 0;
    for _ in 0..ITERS {
        let b = input(&mut rng, &seeds, 40);
        if let Ok(h) = IserHeader::decode(&b) {
            ok += 1;
            let mut e = [0u8; ISER_HDR_LEN];
            h.encode(&mut e);
            assert_eq!(IserHeader::decode(&e), Ok(h));
            assert_eq!(e[0], b[0]);
            assert_eq!(
                IserHeader::decode_from_target(&b).is_ok(),
                h.write.is_none() && h.read.is_none()
            );
        } else {
            assert!(IserHeader::decode_from_target(&b).is_err());
        }
        let _ = Hello::decode(&b);
        let _ = HelloReply::decode(&b);
    }
    report("iser_header", ITERS, ok, t);
}

#[test]
fn fuzz_hello() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 2);
    let mut seeds = Vec::new();
    let mut b = [0u8; ISER_HDR_LEN];
    Hello {
        max_ver: 1,
        min_ver: 1,
        ird: 16,
    }
    .encode(&mut b);
    seeds.push(b.to_vec());
    HelloReply {
        reject: false,
        max_ver: 1,
        cur_ver: 1,
        ord: 8,
    }
    .encode(&mut b);
    seeds.push(b.to_vec());
    let mut ok = 0;
    for _ in 0..ITERS {
        let b = input(&mut rng, &seeds, 32);
        if let Ok(h) = Hello::decode(&b) {
            ok += 1;
            let mut e = [0u8; ISER_HDR_LEN];
            h.encode(&mut e);
            assert_eq!(Hello::decode(&e), Ok(h));
            assert!(h.min_ver <= h.max_ver);
        }
        if let Ok(r) = HelloReply::decode(&b) {
            ok += 1;
            let mut e = [0u8; ISER_HDR_LEN];
            r.encode(&mut e);
            assert_eq!(HelloReply::decode(&e), Ok(r));
            let h = Hello {
                max_ver: rng.byte() & 15,
                min_ver: 0,
                ird: rng.next_u32() as u16,
            };
            if let Ok(o) = negotiate_hello_reply(&h, &r) {
                assert!(!r.reject && o.ird <= h.ird && o.version <= h.max_ver);
                assert!(h.ird == 0 || o.ird > 0);
            }
        }
    }
    report("hello/hello_reply", ITERS, ok, t);
}

#[test]
fn fuzz_cm_private() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 3);
    let seeds = vec![vec![0x80, 0, 0, 0], vec![0xc0, 0, 0, 0], vec![0u8; 196]];
    let mut ok = 0;
    for _ in 0..ITERS {
        let b = input(&mut rng, &seeds, 200);
        let offered = rng.chance(2);
        let pd = if rng.chance(16) { None } else { Some(&b[..]) };
        let terms = accept_decision(offered, pd);
        assert!(!terms.zero_based_va);
        if terms.remote_invalidate {
            ok += 1;
            assert!(offered && b.len() >= 4 && b[0] & 0x40 == 0);
        }
    }
    report("cm_private", ITERS, ok, t);
}

#[test]
fn fuzz_target_pdu() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 4);
    let seeds: Vec<Vec<u8>> = valid_pdus().into_iter().map(|(_, b, _)| b).collect();
    let ctxs = [
        RxContext::login(),
        RxContext::full_feature(128),
        RxContext::full_feature(8192),
        RxContext::full_feature(0),
        RxContext::full_feature(u32::MAX),
    ];
    let mut ok = 0;
    let mut per_op = [0usize; 64];
    for i in 0..ITERS {
        let mut b = input(&mut rng, &seeds, 400);
        // Often repair DataSegmentLength/TotalAHSLength so that mutations
        // reach the per-opcode checks instead of the length check.
        if b.len() >= 48 && rng.chance(2) {
            let ahs = if rng.chance(4) { 4 * rng.below(3) } else { 0 };
            b[4] = (ahs / 4) as u8;
            let dl = (b.len() - 48).saturating_sub(ahs) as u32;
            let dl = dl
                - if rng.chance(4) {
                    dl.min(rng.below(4) as u32)
                } else {
                    0
                };
            b[5..8].copy_from_slice(&dl.to_be_bytes()[1..]);
        }
        if b.len() >= 2 && rng.chance(3) {
            b[1] |= 0x80; // F bit, most target PDUs need it
        }
        let ctx = *rng.pick(&ctxs);
        let res = if i % 8 == 0 {
            let mut send = Pdu::new(0).send()[..ISER_HDR_LEN].to_vec();
            if rng.chance(8) {
                send[0] = rng.byte();
            }
            send.extend_from_slice(&b);
            parse_received_send(&send, &ctx).map(|p| p.header)
        } else {
            parse_target_pdu(&b, &ctx).map(|p| {
                // invariants of an accepted PDU
                assert_eq!(p.bhs.len(), 48);
                assert_eq!(p.ahs.len(), 4 * b[4] as usize);
                assert_eq!(p.data.len() as u32, bhs::data_segment_length(&b).unwrap());
                assert!(p.data.len() as u32 <= ctx.max_recv_dsl);
                assert!(b.len() >= 48 + p.ahs.len() + p.data.len());
                assert!(b.len() <= 48 + p.ahs.len() + ((p.data.len() + 3) & !3));
                assert_eq!(p.opcode, b[0] & 0x3f);
                assert_ne!(p.opcode, bhs::OP_DATA_IN);
                assert_ne!(p.opcode, bhs::OP_R2T);
                assert_eq!(
                    ctx.phase == bhs::Phase::Login,
                    p.opcode == bhs::OP_LOGIN_RSP
                );
                p.header
            })
        };
        if let Ok(h) = res {
            ok += 1;
            per_op[(b[0] & 0x3f) as usize] += 1;
            if let TargetHeader::ScsiResponse(_) = h {
                let d = &b[48 + 4 * b[4] as usize..];
                let dl = bhs::data_segment_length(&b).unwrap() as usize;
                assert!(bhs::parse_scsi_response_data(&d[..dl]).is_ok());
            }
        } else if let Err(e) = res {
            let _ = e.iscsi_err();
        }
    }
    report("bhs/target_pdu", ITERS, ok, t);
    let accepted: Vec<_> = per_op
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(op, n)| format!("{op:#04x}:{n}"))
        .collect();
    eprintln!("      accepted per opcode: {}", accepted.join(" "));
    // every control opcode was reached and accepted at least once
    assert!(accepted.len() >= 8, "{accepted:?}");
}

#[test]
fn fuzz_scsi_response_data() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 5);
    let seeds = vec![
        vec![0, 2, 0x70, 0],
        vec![0, 0],
        vec![0, 18, 0x70, 0, 5, 0, 0, 0],
    ];
    let mut ok = 0;
    for _ in 0..ITERS {
        let b = input(&mut rng, &seeds, 64);
        if let Ok(v) = bhs::parse_scsi_response_data(&b) {
            ok += 1;
            if b.is_empty() {
                assert!(v.sense.is_empty() && v.response_data.is_empty());
            } else {
                assert_eq!(v.sense.len(), u16::from_be_bytes([b[0], b[1]]) as usize);
                assert_eq!(v.sense.len() + v.response_data.len() + 2, b.len());
            }
        }
    }
    report("scsi_response_data", ITERS, ok, t);
}

#[test]
fn fuzz_set_param() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 6);
    let seeds = vec![
        b"0".to_vec(),
        b"1".to_vec(),
        b" -0".to_vec(),
        b"+7x".to_vec(),
        b"9223372036854775807".to_vec(),
    ];
    let mut ok = 0;
    for _ in 0..ITERS {
        let b = input(&mut rng, &seeds, 24);
        let param = rng.below(16) as u32;
        match check_set_param(param, &b) {
            Ok(()) => ok += 1,
            // only the four policed parameters are ever refused
            Err(_) => assert!([2, 3, 12, 13].contains(&param), "param {param}"),
        }
    }
    report("set_param", ITERS, ok, t);
}

#[test]
fn fuzz_task_state_machine() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 7);
    let mut completions = 0;
    let mut events = 0usize;
    for _ in 0..ITERS {
        let stags = [0x10u32, 0x20, 0x30];
        let r = rng.chance(3).then(|| *rng.pick(&stags[..2]));
        let w = rng.chance(3).then(|| *rng.pick(&stags[1..]));
        let Ok(mut task) = TaskStags::new(r, w, rng.chance(2)) else {
            assert_eq!(r, w);
            continue;
        };
        for _ in 0..rng.below(14) {
            events += 1;
            let before = task;
            let s = if rng.chance(6) {
                rng.next_u32()
            } else {
                *rng.pick(&stags)
            };
            let res = match rng.below(6) {
                0 => task.advertise(),
                1 => task.on_response(None).map(|_| ()),
                2 => task.on_response(Some(s)).map(|_| ()),
                3 | 4 => task.local_invalidate_posted(s),
                _ => task.local_invalidate_completed(s),
            };
            if res.is_err() {
                assert_eq!(task, before, "failed events must not change state");
            }
            // the invariant: never completable while an STag is valid or
            // its invalidation is in flight (iSER §7.3.2)
            if task.completable() {
                assert!(task.response_received());
                assert!(task.stags_to_invalidate_locally().is_empty());
                for st in [task.read(), task.write()].into_iter().flatten() {
                    assert!(st.state.is_invalidated(), "{st:?}");
                }
            }
            let l = task.stags_to_invalidate_locally();
            for s in l.as_slice() {
                assert!([task.read(), task.write()]
                    .into_iter()
                    .flatten()
                    .any(|x| x.stag == *s && x.state.is_valid()));
            }
        }
        if task.completable() {
            completions += 1;
        }
    }
    report("task_state_machine", ITERS, completions, t);
    eprintln!("      ({events} events)");
}

/// The receive path's fast path accepts only what the full parser accepts,
/// with the same ITT and BHS: over mutations of every valid PDU as received
/// (iSER header in front) and over random bytes, and over the SCSI
/// Responses the fast path is for.
#[test]
fn fast_path_agrees() {
    let t = Instant::now();
    let mut rng = Rng::new(seed() ^ 0xFA57);
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for (_, pdu, _) in valid_pdus() {
        let mut send = vec![0u8; ISER_HDR_LEN];
        send[0] = ISER_VER;
        send.extend_from_slice(&pdu);
        seeds.push(send);
    }
    let (mut fast, mut n) = (0usize, 0usize);
    for i in 0..ITERS {
        let b = input(&mut rng, &seeds, 160);
        n += 1;
        let Some(f) = plain_scsi_response(&b) else {
            continue;
        };
        fast += 1;
        for dsl in [0u32, 1, 8192] {
            let full = parse_received_send(&b, &RxContext::full_feature(dsl))
                .unwrap_or_else(|e| panic!("input {i}: fast path accepted, full parser: {e:?}"));
            assert_eq!(full.opcode, bhs::OP_SCSI_RSP);
            assert_eq!(full.itt, f.itt);
            assert_eq!(full.bhs, f.bhs);
            assert!(full.ahs.is_empty() && full.data.is_empty());
        }
    }
    assert!(fast > 1000, "the inputs reach the fast path ({fast})");
    report("plain_scsi_response", n, fast, t);
}
