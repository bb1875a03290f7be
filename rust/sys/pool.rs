// SPDX-License-Identifier: GPL-2.0
//! [`IndexPool`]: lock-free allocation of indices `0..n` (header slots,
//! MRs, invalidation descriptors), usable from any context, with
//! all-or-nothing reservations. Safe code; it lives in the wrapper layer
//! because [`super::verbs::DmaSlots`] builds on it.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;

/// Indices `0..n`, each free or taken.
pub(crate) struct IndexPool {
    busy: KVec<AtomicBool>,
    /// Where the next search starts (the last index taken + 1).
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
        self.pool.avail.fetch_add(self.left, Ordering::Release);
    }
}

impl IndexPool {
    /// `n` free indices (process context: allocates).
    pub(crate) fn new(n: u32) -> Result<Self> {
        let mut busy = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for _ in 0..n {
            busy.push(AtomicBool::new(false), GFP_KERNEL)?;
        }
        Ok(IndexPool {
            busy,
            hint: AtomicU32::new(0),
            avail: AtomicU32::new(n),
        })
    }

    /// Sets `n` indices aside, all or none.
    pub(crate) fn reserve(&self, n: u32) -> Option<Reservation<'_>> {
        self.avail
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |a| a.checked_sub(n))
            .ok()?;
        Some(Reservation {
            pool: self,
            left: n,
        })
    }

    /// Takes one free index.
    pub(crate) fn claim(&self) -> Option<u32> {
        self.reserve(1)?.take()
    }

    /// Finds and takes a free index; the caller holds a reservation for
    /// it, so one exists (`avail` never exceeds the free flags).
    fn take_one(&self) -> Option<u32> {
        let n = self.busy.len();
        let start = self.hint.load(Ordering::Relaxed) as usize;
        for k in 0..n {
            let i = (start + k) % n;
            if self.busy[i]
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                self.hint.store(((i + 1) % n) as u32, Ordering::Relaxed);
                return Some(i as u32);
            }
        }
        None
    }

    /// Returns index `i`. Returning a free index again is a no-op.
    pub(crate) fn release(&self, i: u32) {
        if let Some(b) = self.busy.get(i as usize) {
            if b.swap(false, Ordering::AcqRel) {
                self.avail.fetch_add(1, Ordering::Release);
            }
        }
    }
}
