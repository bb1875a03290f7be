//! Shared helpers for the host tests: a seeded xorshift generator and a
//! builder for PDUs as a target would send them.
#![allow(dead_code)]

use iser_proto::bhs::{self, Itt, RxContext};
use iser_proto::iser_hdr::{IserHeader, ISER_HDR_LEN};

/// xorshift64* - deterministic, dependency-free.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
    pub fn chance(&mut self, one_in: u32) -> bool {
        self.next_u32() % one_in == 0
    }
    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
    /// A u32 biased towards boundary values.
    pub fn interesting_u32(&mut self) -> u32 {
        const I: [u32; 16] = [
            0,
            1,
            2,
            3,
            4,
            47,
            48,
            511,
            512,
            8191,
            8192,
            65536,
            0x00ff_ffff,
            0x0100_0000,
            0x7fff_ffff,
            0xffff_ffff,
        ];
        if self.chance(2) {
            *self.pick(&I)
        } else {
            self.next_u32()
        }
    }

    /// Applies 1..=4 random mutations to `buf`.
    pub fn mutate(&mut self, buf: &mut Vec<u8>) {
        for _ in 0..1 + self.below(4) {
            match self.below(9) {
                0 if !buf.is_empty() => {
                    let i = self.below(buf.len());
                    buf[i] ^= 1 << self.below(8);
                }
                1 if !buf.is_empty() => {
                    let i = self.below(buf.len());
                    buf[i] = self.byte();
                }
                2 if !buf.is_empty() => {
                    let i = self.below(buf.len());
                    buf[i] = *self.pick(&[0u8, 1, 2, 3, 0x7f, 0x80, 0xfe, 0xff, b'=', 0]);
                }
                3 => {
                    let n = self.below(buf.len() + 1);
                    buf.truncate(n);
                }
                4 => {
                    let extra = self.below(16);
                    let b = self.bytes(extra);
                    buf.extend_from_slice(&b);
                }
                5 if buf.len() >= 4 => {
                    let i = self.below(buf.len() - 3);
                    let v = self.interesting_u32().to_be_bytes();
                    buf[i..i + 4].copy_from_slice(&v);
                }
                6 if !buf.is_empty() => {
                    let i = self.below(buf.len());
                    buf.remove(i);
                }
                7 => {
                    let i = self.below(buf.len() + 1);
                    let b = self.byte();
                    buf.insert(i, b);
                }
                _ => {
                    if buf.len() >= 2 {
                        let a = self.below(buf.len());
                        let b = self.below(buf.len());
                        buf.swap(a, b);
                    }
                }
            }
        }
    }
}

pub const TASK_ITT: u32 = 5; // index 5, session age 0

/// Builder for a PDU as a target sends it (BHS + AHS + data + padding).
#[derive(Clone)]
pub struct Pdu {
    pub bhs: [u8; 48],
    pub ahs: Vec<u8>,
    pub data: Vec<u8>,
    pub pad: bool,
}

impl Pdu {
    /// A BHS with `opcode`, F bit set, a task ITT and reserved TTT.
    pub fn new(opcode: u8) -> Self {
        let mut bhs = [0u8; 48];
        bhs[0] = opcode;
        bhs[1] = 0x80;
        bhs[16..20].copy_from_slice(&TASK_ITT.to_ne_bytes());
        bhs[20..24].copy_from_slice(&[0xff; 4]);
        bhs[24..28].copy_from_slice(&7u32.to_be_bytes());
        bhs[28..32].copy_from_slice(&8u32.to_be_bytes());
        bhs[32..36].copy_from_slice(&40u32.to_be_bytes());
        Pdu {
            bhs,
            ahs: Vec::new(),
            data: Vec::new(),
            pad: true,
        }
    }
    pub fn flags(mut self, f: u8) -> Self {
        self.bhs[1] = f;
        self
    }
    pub fn byte(mut self, off: usize, v: u8) -> Self {
        self.bhs[off] = v;
        self
    }
    pub fn be32(mut self, off: usize, v: u32) -> Self {
        self.bhs[off..off + 4].copy_from_slice(&v.to_be_bytes());
        self
    }
    pub fn itt(mut self, itt: Itt) -> Self {
        self.bhs[16..20].copy_from_slice(&itt.0);
        self
    }
    pub fn ttt(self, v: u32) -> Self {
        self.be32(20, v)
    }
    pub fn data(mut self, d: &[u8]) -> Self {
        self.data = d.to_vec();
        self
    }
    pub fn ahs(mut self, a: &[u8]) -> Self {
        self.ahs = a.to_vec();
        self
    }
    pub fn pad(mut self, p: bool) -> Self {
        self.pad = p;
        self
    }
    /// BHS (with TotalAHSLength and DataSegmentLength filled in) + AHS +
    /// data + optional padding.
    pub fn build(&self) -> Vec<u8> {
        let mut b = self.bhs;
        b[4] = (self.ahs.len() / 4) as u8;
        let dl = self.data.len() as u32;
        b[5..8].copy_from_slice(&dl.to_be_bytes()[1..]);
        let mut v = b.to_vec();
        v.extend_from_slice(&self.ahs);
        v.extend_from_slice(&self.data);
        if self.pad {
            while v.len() % 4 != 0 {
                v.push(0);
            }
        }
        v
    }
    /// The whole Send payload: iSER header from a target + `build()`.
    pub fn send(&self) -> Vec<u8> {
        let mut h = [0u8; ISER_HDR_LEN];
        IserHeader::control().encode(&mut h);
        let mut v = h.to_vec();
        v.extend_from_slice(&self.build());
        v
    }
}

pub fn ffp() -> RxContext {
    RxContext::full_feature(8192)
}

/// One valid example of every PDU a target may send, with its phase.
pub fn valid_pdus() -> Vec<(&'static str, Vec<u8>, RxContext)> {
    let mut sense = vec![0u8, 18];
    sense.extend_from_slice(&[0x70, 0, 5, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0, 0, 0, 0, 0]);
    let login_text = b"RDMAExtensions=Yes\0TargetRecvDataSegmentLength=8192\0".to_vec();
    vec![
        ("nop-in response", Pdu::new(bhs::OP_NOOP_IN).build(), ffp()),
        (
            "nop-in ping",
            Pdu::new(bhs::OP_NOOP_IN)
                .itt(Itt::RESERVED)
                .ttt(0x1234)
                .data(b"ping")
                .build(),
            ffp(),
        ),
        ("scsi rsp good", Pdu::new(bhs::OP_SCSI_RSP).build(), ffp()),
        (
            "scsi rsp sense",
            Pdu::new(bhs::OP_SCSI_RSP)
                .flags(0x82)
                .byte(3, 2)
                .be32(44, 512)
                .data(&sense)
                .build(),
            ffp(),
        ),
        ("tmf rsp", Pdu::new(bhs::OP_TMF_RSP).build(), ffp()),
        (
            "login rsp",
            Pdu::new(bhs::OP_LOGIN_RSP)
                .flags(0x87)
                .data(&login_text)
                .pad(false)
                .build(),
            RxContext::login(),
        ),
        (
            "text rsp",
            Pdu::new(bhs::OP_TEXT_RSP)
                .data(b"TargetName=iqn.2003-01.org.x:t\0")
                .build(),
            ffp(),
        ),
        ("logout rsp", Pdu::new(bhs::OP_LOGOUT_RSP).build(), ffp()),
        (
            "async",
            Pdu::new(bhs::OP_ASYNC_MSG)
                .itt(Itt::RESERVED)
                .byte(36, 1)
                .build(),
            ffp(),
        ),
        (
            "reject",
            Pdu::new(bhs::OP_REJECT)
                .itt(Itt::RESERVED)
                .byte(2, 4)
                .data(&[0x41u8; 48])
                .build(),
            ffp(),
        ),
        (
            "scsi rsp ahs",
            Pdu::new(bhs::OP_SCSI_RSP)
                .ahs(&[0, 5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0])
                .build(),
            ffp(),
        ),
    ]
}
