//! The RAM-backed LUN 0: the SCSI commands Linux issues at scan and I/O
//! (SPC-4 / SBC-3 subsets).

pub const BLOCK: u64 = 512;

/// What a command does with data, decided from its CDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// No data; GOOD.
    Good,
    /// Data-In from a built buffer (truncated to the allocation length).
    DataIn(Vec<u8>),
    /// Data-In from the LUN: byte offset, length.
    ReadLun(u64, u64),
    /// Data-Out into the LUN: byte offset, length.
    WriteLun(u64, u64),
    /// CHECK CONDITION with sense key, ASC, ASCQ.
    Check(u8, u8, u8),
}

pub const ILLEGAL_REQUEST: u8 = 0x05;

/// Fixed-format sense data, prefixed with the 2-byte SenseLength of the
/// iSCSI SCSI Response data segment (RFC 7143 §11.4.7.2).
pub fn sense_segment(key: u8, asc: u8, ascq: u8) -> Vec<u8> {
    let mut s = vec![0u8; 18];
    s[0] = 0x70;
    s[2] = key;
    s[7] = 10;
    s[12] = asc;
    s[13] = ascq;
    let mut v = (s.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(&s);
    v
}

fn be16(c: &[u8], o: usize) -> u64 {
    u16::from_be_bytes([c[o], c[o + 1]]) as u64
}
fn be32(c: &[u8], o: usize) -> u64 {
    u32::from_be_bytes([c[o], c[o + 1], c[o + 2], c[o + 3]]) as u64
}
fn be64(c: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&c[o..o + 8]);
    u64::from_be_bytes(a)
}

fn trunc(mut v: Vec<u8>, alloc: u64) -> Action {
    v.truncate(alloc as usize);
    Action::DataIn(v)
}

fn pad(s: &str, n: usize) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.resize(n, b' ');
    v
}

/// Decides what `cdb` (16 bytes) does on LUN `lun` of `blocks` blocks.
pub fn decide(cdb: &[u8; 16], lun: u64, blocks: u64) -> Action {
    let op = cdb[0];
    if lun != 0 {
        return match op {
            // Peripheral qualifier 3: no LU at this LUN (SPC-4 6.6.2).
            0x12 => trunc(vec![0x7f, 0, 6, 2, 0], be16(cdb, 3)),
            0xa0 => report_luns(cdb),
            _ => Action::Check(ILLEGAL_REQUEST, 0x25, 0), // LOGICAL UNIT NOT SUPPORTED
        };
    }
    match op {
        0x00 | 0x35 | 0x91 | 0x1b | 0x1e => Action::Good, // TUR, SYNC CACHE 10/16, START STOP, PREVENT
        0x12 => inquiry(cdb, blocks),
        0x25 => {
            let last = (blocks - 1).min(0xffff_ffff) as u32;
            let mut v = last.to_be_bytes().to_vec();
            v.extend_from_slice(&(BLOCK as u32).to_be_bytes());
            Action::DataIn(v)
        }
        0x9e if cdb[1] & 0x1f == 0x10 => {
            let mut v = vec![0u8; 32];
            v[..8].copy_from_slice(&(blocks - 1).to_be_bytes());
            v[8..12].copy_from_slice(&(BLOCK as u32).to_be_bytes());
            trunc(v, be32(cdb, 10))
        }
        0xa0 => report_luns(cdb),
        0x1a => mode_sense(cdb[2], be16(cdb, 3) & 0xff, false),
        0x5a => mode_sense(cdb[2], be16(cdb, 7), true),
        0x28 | 0x2a => rw(op == 0x28, be32(cdb, 2), be16(cdb, 7), blocks),
        0x88 | 0x8a => rw(op == 0x88, be64(cdb, 2), be32(cdb, 10), blocks),
        _ => Action::Check(ILLEGAL_REQUEST, 0x20, 0), // INVALID COMMAND OPERATION CODE
    }
}

fn rw(read: bool, lba: u64, nblk: u64, blocks: u64) -> Action {
    if lba.checked_add(nblk).is_none_or(|e| e > blocks) {
        return Action::Check(ILLEGAL_REQUEST, 0x21, 0); // LBA OUT OF RANGE
    }
    if nblk == 0 {
        return Action::Good;
    }
    if read {
        Action::ReadLun(lba * BLOCK, nblk * BLOCK)
    } else {
        Action::WriteLun(lba * BLOCK, nblk * BLOCK)
    }
}

fn report_luns(cdb: &[u8; 16]) -> Action {
    let mut v = vec![0u8; 16];
    v[3] = 8; // one LUN: LUN 0
    trunc(v, be32(cdb, 6))
}

fn inquiry(cdb: &[u8; 16], blocks: u64) -> Action {
    let alloc = be16(cdb, 3);
    if cdb[1] & 1 == 0 {
        if cdb[2] != 0 {
            return Action::Check(ILLEGAL_REQUEST, 0x24, 0);
        }
        let mut v = vec![0x00, 0x00, 0x06, 0x02, 91, 0, 0, 0x02];
        v.extend(pad("LINUX-RS", 8));
        v.extend(pad("iser-peer", 16));
        v.extend(pad("0001", 4));
        v.resize(96, 0);
        return trunc(v, alloc);
    }
    let page: Vec<u8> = match cdb[2] {
        0x00 => vec![0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2],
        0x80 => b"ISERPEER0001".to_vec(),
        0x83 => {
            // NAA 6 (IEEE registered extended), binary, LU association.
            let mut d = vec![0x01, 0x03, 0x00, 0x10, 0x60, 0x01, 0x40, 0x5e];
            d.extend_from_slice(&0x1234_5678_9abc_def0u64.to_be_bytes());
            d.extend_from_slice(&[0, 0, 0, 0]);
            d
        }
        0xb0 => {
            let mut d = vec![0u8; 0x3c];
            // Maximum transfer length 2048 blocks (1 MiB), optimal 0.
            d[4..8].copy_from_slice(&2048u32.to_be_bytes());
            d
        }
        0xb1 => {
            let mut d = vec![0u8; 0x3c];
            d[1] = 1; // non-rotating medium
            d
        }
        0xb2 => vec![0u8; 4],
        _ => return Action::Check(ILLEGAL_REQUEST, 0x24, 0),
    };
    let _ = blocks;
    let mut v = vec![0x00, cdb[2]];
    v.extend_from_slice(&(page.len() as u16).to_be_bytes());
    v.extend(page);
    trunc(v, alloc)
}

fn mode_sense(pc_page: u8, alloc: u64, ten: bool) -> Action {
    let page = pc_page & 0x3f;
    // Caching page (SBC-3 6.5.5): WCE set, so sd issues SYNCHRONIZE CACHE.
    let caching: Vec<u8> = {
        let mut p = vec![0u8; 20];
        p[0] = 0x08;
        p[1] = 18;
        p[2] = 0x04;
        p
    };
    // Control page (SPC-4 7.5.8).
    let control: Vec<u8> = {
        let mut p = vec![0u8; 12];
        p[0] = 0x0a;
        p[1] = 10;
        p
    };
    let body: Vec<u8> = match page {
        0x08 => caching,
        0x0a => control,
        0x3f => [caching, control].concat(),
        _ => return Action::Check(ILLEGAL_REQUEST, 0x24, 0),
    };
    let v = if ten {
        let mut h = vec![0u8; 8];
        h[..2].copy_from_slice(&((body.len() + 6) as u16).to_be_bytes());
        [h, body].concat()
    } else {
        let h = vec![(body.len() + 3) as u8, 0, 0, 0];
        [h, body].concat()
    };
    trunc(v, alloc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdb(b: &[u8]) -> [u8; 16] {
        let mut c = [0u8; 16];
        c[..b.len()].copy_from_slice(b);
        c
    }

    #[test]
    fn read_write_bounds() {
        assert_eq!(
            decide(&cdb(&[0x28, 0, 0, 0, 0, 8, 0, 0, 2]), 0, 16),
            Action::ReadLun(4096, 1024)
        );
        assert_eq!(
            decide(&cdb(&[0x2a, 0, 0, 0, 0, 15, 0, 0, 2]), 0, 16),
            Action::Check(5, 0x21, 0)
        );
        let mut c = cdb(&[0x8a]);
        c[9] = 1;
        c[13] = 1;
        assert_eq!(decide(&c, 0, 16), Action::WriteLun(512, 512));
    }

    #[test]
    fn capacity_and_luns() {
        assert_eq!(
            decide(&cdb(&[0x25]), 0, 16),
            Action::DataIn(vec![0, 0, 0, 15, 0, 0, 2, 0])
        );
        match decide(
            &cdb(&[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32]),
            0,
            16,
        ) {
            Action::DataIn(v) => assert_eq!(&v[..12], &[0, 0, 0, 0, 0, 0, 0, 15, 0, 0, 2, 0]),
            a => panic!("{a:?}"),
        }
        assert_eq!(decide(&cdb(&[0x00]), 3, 16), Action::Check(5, 0x25, 0));
        match decide(&cdb(&[0x12, 0, 0, 0, 96]), 0, 16) {
            Action::DataIn(v) => assert_eq!(v.len(), 96),
            a => panic!("{a:?}"),
        }
    }
}
