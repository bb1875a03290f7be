//! Panic-free big-endian field access helpers shared by the parsers.
//!
//! Every accessor returns `None` (or a default) instead of panicking when the
//! buffer is too short, so callers never index slices directly.

/// Reads one byte at `off`.
pub(super) fn u8_at(buf: &[u8], off: usize) -> Option<u8> {
    buf.get(off).copied()
}

/// Reads a big-endian `u16` at `off`.
pub(super) fn be16_at(buf: &[u8], off: usize) -> Option<u16> {
    let b = buf.get(off..off.checked_add(2)?)?;
    let a: [u8; 2] = b.try_into().ok()?;
    Some(u16::from_be_bytes(a))
}

/// Reads a big-endian 24-bit quantity at `off` (iSCSI DataSegmentLength).
pub(super) fn be24_at(buf: &[u8], off: usize) -> Option<u32> {
    let b = buf.get(off..off.checked_add(3)?)?;
    let a: [u8; 3] = b.try_into().ok()?;
    Some(u32::from_be_bytes([0, a[0], a[1], a[2]]))
}

/// Reads a big-endian `u32` at `off`.
pub(super) fn be32_at(buf: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes(arr4_at(buf, off)?))
}

/// Reads a big-endian `u64` at `off`.
pub(super) fn be64_at(buf: &[u8], off: usize) -> Option<u64> {
    let b = buf.get(off..off.checked_add(8)?)?;
    let a: [u8; 8] = b.try_into().ok()?;
    Some(u64::from_be_bytes(a))
}

/// Copies 4 raw bytes at `off`.
pub(super) fn arr4_at(buf: &[u8], off: usize) -> Option<[u8; 4]> {
    let b = buf.get(off..off.checked_add(4)?)?;
    b.try_into().ok()
}

/// Copies 8 raw bytes at `off`.
pub(super) fn arr8_at(buf: &[u8], off: usize) -> Option<[u8; 8]> {
    let b = buf.get(off..off.checked_add(8)?)?;
    b.try_into().ok()
}

/// Rounds `n` up to a multiple of 4 (iSCSI data segment padding,
/// RFC 7143 §11.2.3), saturating at `u32::MAX & !3`.
pub(super) fn pad4(n: u32) -> u32 {
    match n.checked_add(3) {
        Some(v) => v & !3,
        None => !3,
    }
}

/// `buf.split_at(mid)` without a panic: `None` if `mid > buf.len()`.
/// (`slice::split_at_checked` is newer than the kernel's minimum Rust.)
pub(super) fn split_at(buf: &[u8], mid: usize) -> Option<(&[u8], &[u8])> {
    Some((buf.get(..mid)?, buf.get(mid..)?))
}
