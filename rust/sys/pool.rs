// SPDX-License-Identifier: GPL-2.0
//! [`IndexPool`]: lock-free allocation of indices `0..n` (header slots,
//! invalidation descriptors), usable from any context, with
//! all-or-nothing reservations. Safe code; it lives in the wrapper layer
//! because [`super::verbs::DmaSlots`] builds on it.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;

/// Indices `0..n`, each free or taken: one bit each, 64 to a word.
pub(crate) struct IndexPool {
    /// Bit `i % 64` of word `i / 64` set: index `i` taken.
    // INVARIANT: the bits of indices `n..` in the last word are set at
    // `new` and never cleared (`release` ignores indices past `n`).
    busy: KVec<AtomicU64>,
    n: u32,
    /// The word where the next search starts (the last one taken from).
    hint: AtomicU32,
    /// Indices neither taken nor reserved.
    avail: AtomicU32,
}

/// Indices set aside by [`IndexPool::reserve`]: each `take` yields one
/// without failing; what is not taken returns to the pool on drop.
pub(crate) struct Reservation<'a> {
    pool: &'a IndexPool,
    left: u32,
}

impl Reservation<'_> {
    /// One reserved index (`None` once the reservation is used up).
    pub(crate) fn take(&mut self) -> Option<u32> {
        if self.left == 0 {
            return None;
        }
        let i = self.pool.take_one()?;
        self.left -= 1;
        Some(i)
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.left == 0 {
            return;
        }
        self.pool.avail.fetch_add(self.left, Ordering::Release);
    }
}

impl IndexPool {
    /// `n` free indices (process context: allocates).
    pub(crate) fn new(n: u32) -> Result<Self> {
        let words = (n as usize).div_ceil(64);
        let mut busy = KVec::with_capacity(words, GFP_KERNEL)?;
        for w in 0..words {
            // Bits past `n` stay set: never handed out.
            let first_past = (n as usize).saturating_sub(w * 64).min(64);
            let past = if first_past == 64 {
                0
            } else {
                !0u64 << first_past
            };
            busy.push(AtomicU64::new(past), GFP_KERNEL)?;
        }
        Ok(IndexPool {
            busy,
            n,
            hint: AtomicU32::new(0),
            avail: AtomicU32::new(n),
        })
    }

    /// Sets `n` indices aside, all or none.
    pub(crate) fn reserve(&self, n: u32) -> Option<Reservation<'_>> {
        // Nothing to set aside: no atomic.
        if n > 0 {
            self.avail
                .fetch_update(Ordering::Acquire, Ordering::Relaxed, |a| a.checked_sub(n))
                .ok()?;
        }
        Some(Reservation {
            pool: self,
            left: n,
        })
    }

    /// Takes one free index.
    pub(crate) fn claim(&self) -> Option<u32> {
        self.reserve(1)?.take()
    }

    /// Takes index `i` itself if it is free (`false`: taken, or past `n`),
    /// with the same accounting as `claim`: a fixed index costs no search.
    pub(crate) fn claim_at(&self, i: u32) -> bool {
        let word = match self.busy.get((i / 64) as usize) {
            Some(word) if i < self.n => word,
            _ => return false,
        };
        let Some(mut rsv) = self.reserve(1) else {
            return false;
        };
        let bit = 1u64 << (i % 64);
        if word.fetch_or(bit, Ordering::Acquire) & bit != 0 {
            // Taken: the reservation goes back as it drops.
            return false;
        }
        rsv.left = 0;
        true
    }

    /// Finds and takes a free index; the caller holds a reservation for
    /// it, so one exists (`avail` never exceeds the clear bits).
    fn take_one(&self) -> Option<u32> {
        let words = self.busy.len();
        let start = self.hint.load(Ordering::Relaxed) as usize;
        for k in 0..words {
            let w = (start + k) % words;
            let word = &self.busy[w];
            let mut v = word.load(Ordering::Relaxed);
            while v != !0 {
                let bit = (!v).trailing_zeros();
                match word.compare_exchange_weak(
                    v,
                    v | 1 << bit,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        self.hint.store(w as u32, Ordering::Relaxed);
                        return Some(w as u32 * 64 + bit);
                    }
                    Err(now) => v = now,
                }
            }
        }
        None
    }

    /// Returns index `i`. Returning a free index again is a no-op.
    pub(crate) fn release(&self, i: u32) {
        if i >= self.n {
            return;
        }
        let Some(word) = self.busy.get((i / 64) as usize) else {
            return;
        };
        let bit = 1u64 << (i % 64);
        if word.fetch_and(!bit, Ordering::AcqRel) & bit != 0 {
            self.avail.fetch_add(1, Ordering::Release);
        }
    }
}
