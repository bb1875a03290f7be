// SPDX-License-Identifier: GPL-2.0
//! ib_core verbs: protection domain, shared-pool completion queue, memory
//! regions for fast registration, DMA-mapped buffers, work requests and the
//! `ib_cqe.done` completion trampoline.
//!
//! Ownership: [`Cq`], [`Mr`], [`DmaBuf`] and [`DmaPages`] free their C
//! object (or unmap and free their memory) on drop;
//! [`Pd`] is the connection's own protection domain, freed with it.
//! A queue pair belongs to its `rdma_cm_id` ([`super::cm`]); this file
//! only posts to it through [`QpRef`].
//!
//! The rule that makes posting sound: a work request names the [`Cqe`]
//! of a descriptor ([`WithCqe`]) and, through SGEs, DMA memory;
//! both must stay alive until the WR completes. The driver keeps every
//! descriptor and buffer in its connection object, which drains the QP
//! (`ib_drain_qp`) before it frees any of them.

use super::bindings as b;
use super::pool::{IndexPool, Reservation};
use super::rcu::BhOff;
use core::mem::MaybeUninit;
use core::num::NonZeroUsize;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::code::{EINVAL, EIO, ENOMEM};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;

/// Remote access a fast registration grants (`IB_ACCESS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RemoteAccess {
    /// The target RDMA-Writes into the buffer (SCSI Read, Data-In).
    Write,
    /// The target RDMA-Reads from the buffer (SCSI Write, solicited Data-Out).
    Read,
    /// No remote access: the MR only gives local Sends an lkey (a write
    /// whose data is all unsolicited).
    LocalOnly,
}

impl RemoteAccess {
    fn flags(self) -> i32 {
        // Only what the direction needs: never both, never atomics.
        (match self {
            RemoteAccess::Write => {
                b::ib_access_flags_IB_ACCESS_LOCAL_WRITE | b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
            }
            RemoteAccess::Read => {
                b::ib_access_flags_IB_ACCESS_LOCAL_WRITE | b::ib_access_flags_IB_ACCESS_REMOTE_READ
            }
            RemoteAccess::LocalOnly => b::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
        }) as i32
    }
}

/// A borrowed `struct ib_device`, valid while the `rdma_cm_id` it came
/// from is bound to it.
#[derive(Clone, Copy)]
pub(crate) struct Device(NonNull<b::ib_device>);

// SAFETY: an ib_device is used from any context; ib_core synchronises it.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

impl Device {
    /// # Safety
    /// `dev` must be a live `ib_device` that outlives every use of the
    /// returned handle and of the objects created from it.
    pub(crate) unsafe fn from_raw(dev: *mut b::ib_device) -> Option<Self> {
        NonNull::new(dev).map(Device)
    }

    pub(crate) fn as_ptr(self) -> *mut b::ib_device {
        self.0.as_ptr()
    }

    /// Responder resources (IRD) the device offers per QP: how many RDMA
    /// Reads (including the target's zero-length data-ack Reads) it serves
    /// at once without software.
    pub(crate) fn max_qp_rd_atom(self) -> u8 {
        // SAFETY: the handle is live (type invariant).
        let v = unsafe { b::iser_rs_device_max_qp_rd_atom(self.as_ptr()) };
        v.clamp(1, 255) as u8
    }

    /// The most work requests the device lets one queue of a QP hold
    /// (`max_qp_wr`).
    pub(crate) fn max_qp_wr(self) -> u32 {
        // SAFETY: the handle is live (type invariant).
        let v = unsafe { b::iser_rs_device_max_qp_wr(self.as_ptr()) };
        v.max(0) as u32
    }

    /// The most SGEs a receive (`recv`) or a Send work request of the
    /// device may name (`max_recv_sge`, `max_send_sge`).
    pub(crate) fn max_sge(self, recv: bool) -> u32 {
        // SAFETY: the handle is live (type invariant).
        unsafe { b::iser_rs_device_max_sge(self.as_ptr(), i32::from(recv)) }
    }

    /// Whether the device registers SG lists with gaps (`IBK_SG_GAPS_REG`).
    pub(crate) fn sg_gaps_reg(self) -> bool {
        // SAFETY: the handle is live (type invariant).
        unsafe { b::iser_rs_device_sg_gaps_reg(self.as_ptr()) }
    }

    /// The parent `struct device` (for `scsi_add_host`).
    pub(crate) fn dma_parent(self) -> *mut b::device {
        // SAFETY: the handle is live; reading a field of it.
        unsafe { b::iser_rs_device_dma_parent(self.as_ptr()) }
    }
}

/// A protection domain of one connection: its QP and MRs, nothing else.
/// An rkey is an MR index plus an 8-bit key, so it can be guessed; with a
/// PD per connection, an STag advertised on one connection names nothing
/// another connection's QP (another target) can reach, and a target's
/// Send with Invalidate naming a foreign rkey fails only its own
/// connection (the invalidation finds no MR of that PD). Never created
/// with `IB_PD_UNSAFE_GLOBAL_RKEY`: iser-rs exposes no global rkey.
///
/// Allocated and freed in process context (CM handler, teardown).
pub(crate) struct Pd {
    pd: NonNull<b::ib_pd>,
}

// SAFETY: an ib_pd is used from any context; ib_core synchronises it.
unsafe impl Send for Pd {}
// SAFETY: as above; `&Pd` only reads immutable fields.
unsafe impl Sync for Pd {}

impl Pd {
    /// A new PD on `dev`.
    pub(crate) fn new(dev: Device) -> Result<Self> {
        // SAFETY: `dev` is live (its invariant).
        let pd = super::from_err_ptr(unsafe { b::iser_rs_alloc_pd(dev.as_ptr()) })?;
        super::params::live_add(super::params::Live::Pds, 1);
        Ok(Pd { pd })
    }

    pub(crate) fn as_ptr(&self) -> *mut b::ib_pd {
        self.pd.as_ptr()
    }

    /// The PD's local DMA lkey: local access only (it is no rkey).
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: the PD is live while `self` is.
        unsafe { (*self.as_ptr()).local_dma_lkey }
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: the PD is this connection's alone; its QP and MRs were
        // dropped before it by the owner's documented order (`Resources`
        // declares the PD last).
        unsafe { b::iser_rs_dealloc_pd(self.as_ptr()) };
        super::params::live_add(super::params::Live::Pds, -1);
    }
}

/// A completion queue from the device's shared CQ pool, polled in softirq
/// context (`IB_POLL_SOFTIRQ`): every `done` handler runs in softirq.
pub(crate) struct Cq {
    cq: NonNull<b::ib_cq>,
    nr_cqe: u32,
}

// SAFETY: the pool CQ is shared by design; ib_core synchronises it.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

impl Cq {
    pub(crate) fn from_pool(dev: Device, nr_cqe: u32, comp_vector_hint: i32) -> Result<Self> {
        // SAFETY: `dev` is live.
        let cq = unsafe {
            b::ib_cq_pool_get(
                dev.as_ptr(),
                nr_cqe,
                comp_vector_hint,
                b::ib_poll_context_IB_POLL_SOFTIRQ,
            )
        };
        let cq = super::from_err_ptr(cq)?;
        super::params::live_add(super::params::Live::Cqs, 1);
        Ok(Cq { cq, nr_cqe })
    }

    pub(crate) fn as_ptr(&self) -> *mut b::ib_cq {
        self.cq.as_ptr()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: got from the pool in `from_pool` with the same count; the
        // QP using it is destroyed before (owner's order).
        unsafe { b::ib_cq_pool_put(self.as_ptr(), self.nr_cqe) };
        super::params::live_add(super::params::Live::Cqs, -1);
    }
}

/// A memory region for fast registration (`IB_MR_TYPE_MEM_REG`).
pub(crate) struct Mr {
    mr: NonNull<b::ib_mr>,
}

// SAFETY: an ib_mr is plain device state; the driver serialises its use.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    pub(crate) fn new(pd: &Pd, max_pages: u32) -> Result<Self> {
        // SAFETY: `pd` is live.
        let mr =
            unsafe { b::ib_alloc_mr(pd.as_ptr(), b::ib_mr_type_IB_MR_TYPE_MEM_REG, max_pages) };
        let mr = super::from_err_ptr(mr)?;
        Ok(Mr { mr })
    }

    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: the MR is live while `self` is.
        unsafe { (*self.mr.as_ptr()).rkey }
    }

    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr.as_ptr()).lkey }
    }

    pub(crate) fn iova(&self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.mr.as_ptr()).iova }
    }

    /// Gives the MR a fresh key (`ib_inc_rkey`): a STag the target saw
    /// before can never name the next registration.
    // Once per I/O: the C inlines, in Rust (step 18), not a shim call.
    #[inline(always)]
    pub(crate) fn bump_key(&self) {
        self.set_key(self.rkey().wrapping_add(1) as u8);
    }

    /// Gives the MR back the key of `rkey` (its low byte): after a
    /// `bump_key` whose registration was never posted, the key the device
    /// still holds for the MR's live registration.
    pub(crate) fn restore_key(&self, rkey: u32) {
        self.set_key(rkey as u8);
    }

    /// `ib_update_fast_reg_key`: the key byte (the low 8 bits of the lkey
    /// and the rkey) the MR's next registration carries.
    #[inline(always)]
    fn set_key(&self, key: u8) {
        let mr = self.mr.as_ptr();
        // The driver calls `bump_key` only before posting a registration
        // and `restore_key` only when that post failed, on its command's
        // own MR (the driver's `TaskSlots::for_task`): nothing else writes its keys then.
        // SAFETY: the MR is live while `self` is, and in no posted WR.
        unsafe {
            (*mr).lkey = ((*mr).lkey & !0xff) | u32::from(key);
            (*mr).rkey = ((*mr).rkey & !0xff) | u32::from(key);
        }
    }

    /// Maps `nents` DMA-mapped SG entries into the MR's page list.
    pub(crate) fn map_sg(&self, sg: &MappedSg) -> Result {
        // SAFETY: `sg` is DMA-mapped for this MR's device (its invariant).
        let n = unsafe {
            b::ib_map_mr_sg(
                self.mr.as_ptr(),
                sg.sg,
                sg.count,
                core::ptr::null_mut(),
                kernel::page::PAGE_SIZE as u32,
            )
        };
        if n != sg.count {
            return Err(EINVAL);
        }
        Ok(())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: allocated in `new`; no WR names it (the owner drained
        // the QP first).
        unsafe { b::iser_rs_dereg_mr(self.mr.as_ptr()) };
    }
}

/// A SCSI scatterlist DMA-mapped for one device.
///
/// Invariant: `sg` with `nents` entries stays valid (owned by the SCSI
/// command) for as long as this value lives; unmapped on drop.
pub(crate) struct MappedSg {
    dev: Device,
    sg: *mut b::scatterlist,
    nents: i32,
    count: i32,
    to_device: bool,
}

// SAFETY: a mapping is plain data; the command owning the SG list outlives it.
unsafe impl Send for MappedSg {}

impl MappedSg {
    /// # Safety
    /// `sg`/`nents` must be a valid SG list that outlives the mapping.
    pub(crate) unsafe fn map(
        dev: Device,
        sg: *mut b::scatterlist,
        nents: u32,
        to_device: bool,
    ) -> Result<Self> {
        let dir = if to_device {
            b::dma_data_direction_DMA_TO_DEVICE
        } else {
            b::dma_data_direction_DMA_FROM_DEVICE
        } as i32;
        // SAFETY: the caller guarantees the SG list; `dev` is live.
        let count = unsafe { b::iser_rs_dma_map_sg(dev.as_ptr(), sg, nents as i32, dir) };
        if count <= 0 {
            return Err(EIO);
        }
        Ok(MappedSg {
            dev,
            sg,
            nents: nents as i32,
            count,
            to_device,
        })
    }
}

impl MappedSg {
    /// The DMA address of the mapping when it is one contiguous segment
    /// (for local access through the PD's local DMA lkey, no MR needed).
    pub(crate) fn single_segment(&self) -> Option<u64> {
        if self.count != 1 {
            return None;
        }
        // SAFETY: the list is mapped (type invariant) and has one DMA
        // segment, whose address the first entry holds.
        Some(unsafe { b::iser_rs_sg_dma_address(self.sg) })
    }
}

impl Drop for MappedSg {
    fn drop(&mut self) {
        let dir = if self.to_device {
            b::dma_data_direction_DMA_TO_DEVICE
        } else {
            b::dma_data_direction_DMA_FROM_DEVICE
        } as i32;
        // SAFETY: mapped in `map` with the same arguments.
        unsafe { b::iser_rs_dma_unmap_sg(self.dev.as_ptr(), self.sg, self.nents, dir) };
    }
}

/// A kmalloc'ed buffer mapped for DMA in one direction: a chunk of
/// [`DmaSlots`] (at most a page; receive and login buffers are
/// [`DmaPages`]).
pub(crate) struct DmaBuf {
    buf: KVec<u8>,
    dma: u64,
    dev: Device,
    to_device: bool,
    /// Whether syncs of the mapping may do something (as for a page of
    /// [`DmaPages`]: `iser_rs_dma_page_needs_sync`). Coherence is the
    /// device's and a mapping is bounced whole or not at all, so its first
    /// address answers for all of it.
    needs_sync: bool,
}

// SAFETY: plain memory plus a mapping handle.
unsafe impl Send for DmaBuf {}
// SAFETY: `&DmaBuf` gives read access only.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    pub(crate) fn new(
        dev: Device,
        len: usize,
        to_device: bool,
        flags: kernel::alloc::Flags,
    ) -> Result<Self> {
        let mut buf = KVec::with_capacity(len, flags)?;
        buf.extend_with(len, 0u8, flags)?;
        // SAFETY: `buf` is a live kmalloc buffer of `len` bytes that stays
        // put (never reallocated) until `drop` unmaps it.
        let dma = unsafe {
            b::iser_rs_dma_map_single(
                dev.as_ptr(),
                buf.as_mut_ptr().cast(),
                len,
                i32::from(to_device),
            )
        };
        // SAFETY: `dma` was just returned by the mapping call for `dev`.
        if unsafe { b::iser_rs_dma_mapping_error(dev.as_ptr(), dma) } != 0 {
            return Err(ENOMEM);
        }
        // SAFETY: `dma` is a live mapping for `dev` (checked above).
        let needs_sync = unsafe { b::iser_rs_dma_page_needs_sync(dev.as_ptr(), dma) };
        Ok(DmaBuf {
            buf,
            dma,
            dev,
            to_device,
            needs_sync,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }
}

/// `n` equal DMA-mapped (to the device) slots, each claimed exclusively
/// before the CPU writes it: the send-side header buffers of a
/// connection. The slots live in chunks of one page (or of one slot, if a
/// slot is larger), each its own allocation and mapping: a connection's
/// thousands of header slots never need a high-order block, which a
/// reconnect under memory pressure could not get.
///
/// # Invariants
///
/// Chunk `c` holds `min(per_chunk, n - c * per_chunk)` slots of `slot_len`
/// bytes, mapped to the device for as long as `self` lives; `free` hands
/// each index below `shared`, and `own` each index from `shared` to `n`
/// (offset by `shared`), to at most one [`SlotToken`] at a time.
pub(crate) struct DmaSlots {
    /// Chunk `c` holds slots `c * per_chunk ..`; a `KVVec`, so the chunk
    /// table itself never needs contiguous pages either.
    chunks: KVVec<SlotChunk>,
    /// Non-zero, so the divisions by it cannot panic (a divisor the
    /// compiler cannot prove non-zero leaves a `panic_const_div_by_zero`
    /// call that 7.3's objtool does not know as noreturn).
    per_chunk: NonZeroUsize,
    slot_len: usize,
    /// Slots `0..shared`, claimed by anyone.
    free: IndexPool,
    /// Slots `shared..`, each claimed by its own index (`reserve`).
    own: IndexPool,
    shared: u32,
}

/// The chunk size [`DmaSlots`] cuts its slots from.
const SLOT_CHUNK: usize = 4096;

/// `IB_SEND_SIGNALED` as `ib_send_wr::send_flags` wants it. A kernel-version
/// difference: bindgen 0.69 (6.12 build) types the enum constant `u32`,
/// bindgen 0.71 (Debian 7.3 build) `i32`, so the cast is lossless on one and
/// a no-op on the other.
#[allow(clippy::as_underscore, clippy::unnecessary_cast)]
const SEND_SIGNALED: kernel::ffi::c_int = b::ib_send_flags_IB_SEND_SIGNALED as _;

/// One chunk of a [`DmaSlots`].
struct SlotChunk {
    buf: DmaBuf,
    /// `buf`'s memory, taken with `as_mut_ptr` when the chunk was made:
    /// slots are written through it (never through a shared borrow of
    /// `buf`).
    base: *mut u8,
}

// SAFETY: slot contents are only written through a `SlotToken`, which is
// unique per slot (taken from the `IndexPool`); everything else is atomic.
unsafe impl Send for DmaSlots {}
// SAFETY: as above.
unsafe impl Sync for DmaSlots {}

/// Exclusive right to write one slot of a [`DmaSlots`], from `claim` (or
/// a reservation's `take`) until it is posted ([`DmaSlots::posted`]: the
/// completion of the Send that names the slot releases it then) or
/// dropped: a token dropped on an error path releases its slot, so no path
/// leaks one.
///
/// # Invariants
///
/// `index` was claimed for this token alone, from `slots.free` (below
/// `shared`) or as its own index from `slots.own` (`shared` plus it), and
/// is released exactly once: by `drop`, or by the Send completion after
/// [`DmaSlots::posted`] forgot the token.
pub(crate) struct SlotToken<'a> {
    slots: &'a DmaSlots,
    index: u32,
}

impl SlotToken<'_> {
    pub(crate) fn index(&self) -> u32 {
        self.index
    }
}

impl Drop for SlotToken<'_> {
    fn drop(&mut self) {
        self.slots.release_index(self.index);
    }
}

/// Slots set aside by [`DmaSlots::reserve`] (see [`Reservation`]): an
/// owned slot already claimed, taken first, and shared ones.
pub(crate) struct SlotReservation<'a> {
    slots: &'a DmaSlots,
    /// The owned slot claimed for the reservation (its index), until taken.
    own: Option<u32>,
    rsv: Reservation<'a>,
}

impl<'a> SlotReservation<'a> {
    /// One reserved slot (`None` once the reservation is used up): the
    /// owned one first.
    pub(crate) fn take(&mut self) -> Option<SlotToken<'a>> {
        let slots = self.slots;
        if let Some(index) = self.own.take() {
            return Some(SlotToken { slots, index });
        }
        self.rsv.take().map(|index| SlotToken { slots, index })
    }

    /// Whether the owned slot asked for was free and is part of it.
    pub(crate) fn has_own(&self) -> bool {
        self.own.is_some()
    }
}

impl Drop for SlotReservation<'_> {
    fn drop(&mut self) {
        // An owned slot not taken goes back (the shared ones as `rsv`
        // drops).
        if let Some(index) = self.own {
            self.slots.release_index(index);
        }
    }
}

impl DmaSlots {
    /// `shared` slots any claim may take, and `owned` more, slot `k` of
    /// which only `reserve(Some(k), _)` takes.
    pub(crate) fn new(dev: Device, shared: u32, owned: u32, slot_len: usize) -> Result<Self> {
        let n = shared + owned;
        let slot_len = NonZeroUsize::new(slot_len).unwrap_or(NonZeroUsize::MIN);
        let per_chunk = NonZeroUsize::new(SLOT_CHUNK / slot_len).unwrap_or(NonZeroUsize::MIN);
        let slot_len = slot_len.get();
        let n_chunks = (n as usize + per_chunk.get() - 1) / per_chunk;
        let mut chunks = KVVec::with_capacity(n_chunks, GFP_KERNEL)?;
        for c in 0..n_chunks {
            let slots = per_chunk.get().min(n as usize - c * per_chunk.get());
            let mut buf = DmaBuf::new(dev, slots * slot_len, true, GFP_KERNEL)?;
            let base = buf.buf.as_mut_ptr();
            chunks.push(SlotChunk { buf, base }, GFP_KERNEL)?;
        }
        // INVARIANT: every chunk was sized for its slots above, and `free`
        // and `own` hold the `n` indices the chunks cover (`own`'s offset
        // by `shared`).
        Ok(DmaSlots {
            chunks,
            per_chunk,
            slot_len,
            free: IndexPool::new(shared)?,
            own: IndexPool::new(owned)?,
            shared,
        })
    }

    /// Bytes of slot memory (the chunks' buffers).
    pub(crate) fn bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.buf.len()).sum()
    }

    /// The largest single buffer among the chunks.
    pub(crate) fn largest_chunk(&self) -> usize {
        self.chunks.iter().map(|c| c.buf.len()).max().unwrap_or(0)
    }

    /// Sets `n` slots aside, all or none (lock-free; any context): the
    /// first of them owned slot `own` (index `shared + own`) if it is free,
    /// claimed by its index with no search; the rest shared ones.
    pub(crate) fn reserve(&self, own: Option<u32>, n: u32) -> Option<SlotReservation<'_>> {
        let own = own
            .filter(|&k| n > 0 && self.own.claim_at(k))
            .map(|k| self.shared + k);
        match self.free.reserve(n - u32::from(own.is_some())) {
            Some(rsv) => Some(SlotReservation {
                slots: self,
                own,
                rsv,
            }),
            None => {
                if let Some(index) = own {
                    self.release_index(index);
                }
                None
            }
        }
    }

    /// Claims a free slot (lock-free; any context).
    pub(crate) fn claim(&self) -> Option<SlotToken<'_>> {
        self.free
            .claim()
            .map(|index| SlotToken { slots: self, index })
    }

    /// Releases slot `i` after the Send that used it completed (the token
    /// was consumed by `posted`). Releasing a free slot is a no-op.
    pub(crate) fn release_index(&self, i: u32) {
        match i.checked_sub(self.shared) {
            None => self.free.release(i),
            Some(k) => self.own.release(k),
        }
    }

    /// Gives up the token once a Send names the slot: only its completion
    /// releases it now (`release_index`).
    pub(crate) fn posted(&self, t: SlotToken<'_>) -> u32 {
        let index = t.index;
        core::mem::forget(t);
        index
    }

    /// Writes slot `t` with `f` and hands it to the device; returns its
    /// SGE (`len` bytes from the slot start).
    pub(crate) fn write(
        &self,
        t: &mut SlotToken<'_>,
        len: usize,
        lkey: u32,
        f: impl FnOnce(&mut [u8]),
    ) -> Sge {
        let len = len.min(self.slot_len);
        let i = t.index as usize;
        let off = (i % self.per_chunk) * self.slot_len;
        let Some(chunk) = self.chunks.get(i / self.per_chunk) else {
            // INVARIANT: tokens come from `free` and `own`, which cover
            // `n` indices together (`new`), and the chunks hold `n` slots;
            // an empty SGE if that ever broke.
            return Sge {
                addr: 0,
                length: 0,
                lkey,
            };
        };
        let base = chunk.base;
        // SAFETY: the token is the unique claim of this slot (see
        // `claim`), the slot lies inside its chunk (`new` sized each chunk
        // for its slots), and no chunk is reallocated while `self` lives.
        let slot = unsafe { core::slice::from_raw_parts_mut(base.add(off), self.slot_len) };
        f(&mut slot[..len]);
        // Not for a software device (rxe, siw) or coherent DMA, unless
        // debug_pagealloc is on (`DmaBuf::needs_sync`): no call then (step
        // 20).
        if chunk.buf.needs_sync {
            // SAFETY: the range lies in the chunk's mapping made in
            // `DmaBuf::new`.
            unsafe {
                b::iser_rs_dma_sync_for_device(
                    chunk.buf.dev.as_ptr(),
                    chunk.buf.dma + off as u64,
                    len,
                    1,
                )
            };
        }
        Sge {
            addr: chunk.buf.dma + off as u64,
            length: len as u32,
            lkey,
        }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with these arguments.
        unsafe {
            b::iser_rs_dma_unmap_single(
                self.dev.as_ptr(),
                self.dma,
                self.buf.len(),
                i32::from(self.to_device),
            )
        };
    }
}

/// Most SGEs a receive names: a buffer of a [`DmaPages`] up to two pages
/// long (a receive buffer: 8284 bytes) spans at most four pages when it
/// does not start on a page boundary.
pub(crate) const RECV_SGE_MAX: usize = 4;
/// Most SGEs a Send names: the login send buffer (header and 8 KiB of
/// data, 8268 bytes, the only buffer of its [`DmaPages`], so it starts on
/// a page boundary) spans three pages.
pub(crate) const SEND_SGE_MAX: usize = 3;

/// The SGEs of one buffer of a [`DmaPages`]: one per page it spans (the
/// pieces of physically adjacent pages merged), at most `RECV_SGE_MAX`.
#[derive(Clone, Copy)]
pub(crate) struct SgeList {
    sges: [Sge; RECV_SGE_MAX],
    n: usize,
}

impl SgeList {
    pub(crate) fn as_slice(&self) -> &[Sge] {
        &self.sges[..self.n.min(RECV_SGE_MAX)]
    }
}

/// `n` equal buffers, `stride` bytes apart, in memory of order-0 pages
/// (vmalloc), each page mapped for DMA on its own: a receive ring of
/// 8 KiB buffers, or the login send buffer, without a high-order block
/// (a kmalloc of 8284 bytes takes an order-2 block of 16 KiB, which a
/// reconnect under memory pressure may not get, and wastes half of it).
/// The CPU sees a buffer as one slice through the vmalloc mapping; the
/// device gets one SGE per page piece ([`DmaPages::sges`]).
///
/// # Invariants
///
/// `base` is the start of `mem`'s page-aligned vmalloc memory of
/// `dma.len()` pages; `dma[p]` is page `p`'s mapping for `dev` in the
/// direction `to_device`, live until `drop`; buffer `i < n` is
/// `base[i * stride .. i * stride + buf_len]`, inside that memory.
pub(crate) struct DmaPages {
    /// Owns the memory; never grown or reallocated (accessed through
    /// `base`).
    _mem: VVec<u8>,
    base: *mut u8,
    dma: KVVec<u64>,
    dev: Device,
    to_device: bool,
    /// Whether a page needs DMA syncs or vmalloc alias flushes (not for
    /// rxe and siw, nor for coherent DMA on x86: then a receive's CPU view
    /// costs no call).
    needs_sync: bool,
    buf_len: usize,
    stride: usize,
    n: usize,
}

// SAFETY: plain memory plus mapping handles; a buffer's bytes are written
// only through `LoginToken` (unique) or by the device.
unsafe impl Send for DmaPages {}
// SAFETY: as above; `&DmaPages` gives read access to completed buffers.
unsafe impl Sync for DmaPages {}

impl DmaPages {
    /// `n` buffers of `buf_len` bytes, cache-line aligned (128 bytes, so
    /// no two buffers share a line: a device write into one never races a
    /// CPU read of its neighbour on an architecture without coherent DMA).
    /// Allocates with GFP_KERNEL: the reconnect path calls it in a NOIO
    /// scope, which vmalloc honours.
    pub(crate) fn new(dev: Device, n: usize, buf_len: usize, to_device: bool) -> Result<Self> {
        const LINE: usize = 128;
        let stride = buf_len.div_ceil(LINE) * LINE;
        let bytes = n
            .checked_mul(stride)
            .ok_or(EINVAL)?
            .div_ceil(PAGE_SIZE)
            .max(1)
            * PAGE_SIZE;
        let mut mem = VVec::<u8>::with_capacity(bytes, GFP_KERNEL)?;
        mem.extend_with(bytes, 0u8, GFP_KERNEL)?;
        let base = mem.as_mut_ptr();
        if base as usize % PAGE_SIZE != 0 {
            // vmalloc memory starts on a page; the page walk below needs it.
            return Err(EINVAL);
        }
        let pages = bytes / PAGE_SIZE;
        let mut this = DmaPages {
            _mem: mem,
            base,
            // Every page mapped so far, so that `drop` unmaps them on any
            // return below.
            dma: KVVec::with_capacity(pages, GFP_KERNEL)?,
            dev,
            to_device,
            needs_sync: false,
            buf_len,
            stride,
            n,
        };
        for p in 0..pages {
            let mut addr = 0u64;
            // SAFETY: `base + p * PAGE_SIZE` is a page of `mem`'s vmalloc
            // memory (`pages` of them, page-aligned: checked above); `addr`
            // is a live out pointer.
            let rc = unsafe {
                b::iser_rs_dma_map_vmalloc_page(
                    dev.as_ptr(),
                    base.add(p * PAGE_SIZE).cast(),
                    i32::from(to_device),
                    &mut addr,
                )
            };
            if rc != 0 {
                // Nothing is mapped for this page; `drop` unmaps the pages
                // mapped so far (case 056 injects this failure at the
                // receive area's second and last page and at the login
                // buffer's first and last).
                return Err(ENOMEM);
            }
            // SAFETY: `addr` is a live mapping for `dev`, made just above.
            this.needs_sync |= unsafe { b::iser_rs_dma_page_needs_sync(dev.as_ptr(), addr) };
            if this.dma.push(addr, GFP_KERNEL).is_err() {
                // Cannot happen (the capacity is `pages`); `drop` would not
                // know this page, so it is unmapped here.
                // SAFETY: mapped just above, with this device and direction.
                unsafe { b::iser_rs_dma_unmap_page(dev.as_ptr(), addr, i32::from(to_device)) };
                return Err(ENOMEM);
            }
        }
        // INVARIANT: every page of `mem` is mapped, in order.
        Ok(this)
    }

    /// Bytes of memory (whole pages).
    pub(crate) fn bytes(&self) -> usize {
        self.dma.len() * PAGE_SIZE
    }

    /// Whether the buffers' pages need DMA syncs (or alias flushes) around
    /// CPU access: not on rxe or siw, nor with coherent DMA on x86, unless
    /// the boot has debug_pagealloc on (`iser_rs_dma_page_needs_sync`).
    pub(crate) fn needs_sync(&self) -> bool {
        self.needs_sync
    }

    /// The byte range of buffer `i`, its first `len` bytes (at most
    /// `buf_len`); `None` for an index past the buffers.
    fn range(&self, i: usize, len: usize) -> Option<(usize, usize)> {
        (i < self.n).then(|| (i * self.stride, len.min(self.buf_len)))
    }

    /// The SGEs of the first `len` bytes of buffer `i` (empty for an
    /// index past the buffers).
    pub(crate) fn sges(&self, i: usize, len: usize, lkey: u32) -> SgeList {
        let mut list = SgeList {
            sges: [Sge {
                addr: 0,
                length: 0,
                lkey,
            }; RECV_SGE_MAX],
            n: 0,
        };
        let Some((mut off, len)) = self.range(i, len) else {
            return list;
        };
        let end = off + len;
        while off < end {
            let in_page = off % PAGE_SIZE;
            let piece = (PAGE_SIZE - in_page).min(end - off);
            let Some(page) = self.dma.get(off / PAGE_SIZE) else {
                break;
            };
            let addr = page + in_page as u64;
            match list.n.checked_sub(1).and_then(|l| list.sges.get_mut(l)) {
                Some(last) if last.addr + u64::from(last.length) == addr => {
                    last.length += piece as u32;
                }
                _ => {
                    let Some(s) = list.sges.get_mut(list.n) else {
                        break;
                    };
                    *s = Sge {
                        addr,
                        length: piece as u32,
                        lkey,
                    };
                    list.n += 1;
                }
            }
            off += piece;
        }
        list
    }

    /// Syncs `len` bytes from `off` page piece by page piece, for the CPU
    /// or for the device (callers skip it unless `needs_sync`).
    fn sync(&self, off: usize, len: usize, for_cpu: bool) {
        let (mut at, end) = (off, off + len);
        while at < end {
            let in_page = at % PAGE_SIZE;
            let piece = (PAGE_SIZE - in_page).min(end - at);
            let Some(page) = self.dma.get(at / PAGE_SIZE) else {
                return;
            };
            let dir = i32::from(self.to_device);
            let addr = page + in_page as u64;
            // SAFETY: the piece lies in page `at / PAGE_SIZE`'s mapping
            // made in `new`.
            unsafe {
                if for_cpu {
                    b::iser_rs_dma_sync_for_cpu(self.dev.as_ptr(), addr, piece, dir)
                } else {
                    b::iser_rs_dma_sync_for_device(self.dev.as_ptr(), addr, piece, dir)
                }
            };
            at += piece;
        }
    }

    /// CPU view of the first `len` bytes of buffer `i` after the device
    /// wrote them (a receive buffer, once its receive completed); empty
    /// for an index past the buffers.
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    pub(crate) fn for_cpu(&self, i: usize, len: usize) -> &[u8] {
        let Some((off, len)) = self.range(i, len) else {
            return &[];
        };
        if self.needs_sync {
            self.sync(off, len, true);
            // SAFETY: the range lies in `mem` (type invariant).
            unsafe { b::iser_rs_vmap_range_for_cpu(self.base.add(off).cast(), len) };
        }
        // SAFETY: the range lies in `mem` (type invariant), which lives as
        // long as `self`; the device no longer writes it (its receive
        // completed), and the CPU writes receive buffers nowhere.
        unsafe { core::slice::from_raw_parts(self.base.add(off), len) }
    }
}

impl Drop for DmaPages {
    fn drop(&mut self) {
        for &addr in self.dma.iter() {
            // SAFETY: mapped in `new` with this device and direction.
            unsafe {
                b::iser_rs_dma_unmap_page(self.dev.as_ptr(), addr, i32::from(self.to_device))
            };
        }
    }
}

/// The login send buffer: one buffer of a [`DmaPages`] (the iSER header,
/// BHS and up to 8 KiB of data of a Login, Text or NOP-Out PDU), claimed
/// before the CPU writes it, held by the Send that names it.
pub(crate) struct LoginBuf {
    pages: DmaPages,
    busy: AtomicBool,
}

/// Exclusive right to write the [`LoginBuf`], from `claim` until it is
/// posted ([`LoginBuf::posted`]: then `release` frees it) or dropped (an
/// error path: the buffer is free again).
pub(crate) struct LoginToken<'a>(&'a LoginBuf);

impl Drop for LoginToken<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

impl LoginBuf {
    pub(crate) fn new(dev: Device, len: usize) -> Result<Self> {
        Ok(LoginBuf {
            pages: DmaPages::new(dev, 1, len, true)?,
            busy: AtomicBool::new(false),
        })
    }

    /// Claims the buffer (lock-free; any context).
    pub(crate) fn claim(&self) -> Option<LoginToken<'_>> {
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(LoginToken(self))
    }

    /// Gives up the token once a Send names the buffer: only `release`
    /// frees it now.
    pub(crate) fn posted(&self, t: LoginToken<'_>) {
        core::mem::forget(t);
    }

    /// Frees the buffer after the Send that used it completed or was
    /// answered (the token was consumed by `posted`).
    pub(crate) fn release(&self) {
        self.busy.store(false, Ordering::Release);
    }

    /// Bytes of memory (whole pages).
    pub(crate) fn bytes(&self) -> usize {
        self.pages.bytes()
    }

    /// Writes the first `len` bytes with `f` and hands them to the device;
    /// returns their SGEs (at most `SEND_SGE_MAX`: the buffer starts on a
    /// page).
    pub(crate) fn write(
        &self,
        _t: &mut LoginToken<'_>,
        len: usize,
        lkey: u32,
        f: impl FnOnce(&mut [u8]),
    ) -> SgeList {
        let p = &self.pages;
        let len = len.min(p.buf_len);
        // SAFETY: the token is the unique claim of buffer 0, at the start
        // of `mem` (`DmaPages` invariant); no Send reads it until posted.
        let buf = unsafe { core::slice::from_raw_parts_mut(p.base, len) };
        f(buf);
        if p.needs_sync {
            // SAFETY: the range lies in `mem`, written just above.
            unsafe { b::iser_rs_vmap_range_for_device(p.base.cast(), len) };
            p.sync(0, len, false);
        }
        p.sges(0, len, lkey)
    }
}

/// A work completion as seen by a `done` handler.
///
/// # Invariants
///
/// Made only by `cqe_done_trampoline`, which ib_core calls in softirq
/// (every CQ polls `IB_POLL_SOFTIRQ`, [`Cq`]), with `'a` the handler
/// call's: bottom halves are off for all of it.
pub(crate) struct Wc<'a>(&'a b::ib_wc);

impl<'a> Wc<'a> {
    /// The softirq the completion is handled in, for
    /// [`RcuSlot::get_bh`](super::rcu::RcuSlot::get_bh).
    #[inline]
    pub(crate) fn bh(&self) -> BhOff<'a> {
        // SAFETY: bottom halves are off for all of `'a` (type invariant).
        unsafe { BhOff::new_unchecked() }
    }

    pub(crate) fn ok(&self) -> bool {
        self.0.status == b::ib_wc_status_IB_WC_SUCCESS
    }

    /// Flushed because the QP went to error (teardown), not a failure of
    /// this WR itself.
    pub(crate) fn flushed(&self) -> bool {
        self.0.status == b::ib_wc_status_IB_WC_WR_FLUSH_ERR
    }

    pub(crate) fn status(&self) -> u32 {
        self.0.status
    }

    pub(crate) fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// The rkey the peer invalidated with Send with Invalidate, if any.
    pub(crate) fn invalidated_rkey(&self) -> Option<u32> {
        if self.0.wc_flags & (b::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32) != 0 {
            // SAFETY: with IB_WC_WITH_INVALIDATE the `ex` union holds the rkey.
            Some(unsafe { self.0.ex.invalidate_rkey })
        } else {
            None
        }
    }
}

/// The `ib_cqe` a work request names, with the context its handler gets.
/// Only [`WithCqe`] makes one, as its first field: the completion
/// trampoline finds the descriptor from the `ib_cqe` pointer.
#[repr(C)]
pub(crate) struct Cqe {
    raw: b::ib_cqe,
    ctx: *const core::ffi::c_void,
}

// SAFETY: the Cqe is only read by the completion trampoline; `ctx` points to
// a `Sync` context (see `CqeHandler::Ctx`).
unsafe impl Send for Cqe {}
// SAFETY: as above.
unsafe impl Sync for Cqe {}

impl Cqe {
    fn as_ptr(&self) -> *mut b::ib_cqe {
        core::ptr::addr_of!(self.raw).cast_mut()
    }
}

/// The completion handler (`ib_cqe.done`) of a descriptor type.
pub(crate) trait CqeHandler: Sized {
    /// What the handler works on (the connection).
    type Ctx: Sync;
    /// Called in softirq context for every signaled (or failed) WR that
    /// names `this` descriptor's Cqe.
    fn done(this: &WithCqe<Self>, ctx: &Self::Ctx, wc: &Wc<'_>);
}

/// A descriptor `T` with the [`Cqe`] its work requests name in front of
/// it (`#[repr(C)]`, Cqe first): a completion's `wr_cqe` pointer is a
/// pointer to the `WithCqe<T>`, and the Cqe's `done` is `T`'s handler.
/// The context given to [`WithCqe::new`] (the connection) must outlive
/// every WR naming the descriptor: the owner drains the QP before freeing
/// either (module docs).
#[repr(C)]
pub(crate) struct WithCqe<T: CqeHandler> {
    cqe: Cqe,
    desc: T,
}

impl<T: CqeHandler> WithCqe<T> {
    pub(crate) fn new(ctx: *const T::Ctx, desc: T) -> Self {
        WithCqe {
            cqe: Cqe {
                raw: b::ib_cqe {
                    done: Some(cqe_done_trampoline::<T>),
                },
                ctx: ctx.cast(),
            },
            desc,
        }
    }

    /// The completion handle to post work requests with.
    pub(crate) fn cqe(&self) -> &Cqe {
        &self.cqe
    }
}

impl<T: CqeHandler> core::ops::Deref for WithCqe<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.desc
    }
}

/// # Safety
/// Only called by ib_core for a work completion whose `wr_cqe` is the
/// [`Cqe`] of a live [`WithCqe<T>`] (the only maker of a Cqe sets this
/// trampoline with its own `T`).
unsafe extern "C" fn cqe_done_trampoline<T: CqeHandler>(_cq: *mut b::ib_cq, wc: *mut b::ib_wc) {
    // ib_core passes a valid WC whose `wr_cqe` is a Cqe we posted; it is
    // the first field of a `#[repr(C)]` `WithCqe<T>` (the trampoline and
    // `T` were chosen together in `WithCqe::new`), alive until the WR
    // completed, and its context outlives the WR (the owner drains the QP
    // before freeing either).
    // SAFETY: `wc` and its `wr_cqe` are valid as explained just above.
    unsafe {
        let wc = &*wc;
        let cqe = wc.__bindgen_anon_1.wr_cqe as *const Cqe;
        let owner = &*(cqe.cast::<WithCqe<T>>());
        let ctx = &*((*cqe).ctx.cast::<T::Ctx>());
        // INVARIANT: ib_core calls this in softirq (`IB_POLL_SOFTIRQ`),
        // and the `Wc` lives for this call only.
        T::done(owner, ctx, &Wc(wc));
    }
}

/// A refused `post_send`: `posted` work requests of the chain, from its
/// head, were posted before the refused one; the device runs them (or
/// flushes them) as posted (`ib_post_send` stops at the bad one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PostFailed {
    pub(crate) err: Error,
    pub(crate) posted: u32,
}

impl From<Error> for PostFailed {
    fn from(err: Error) -> Self {
        PostFailed { err, posted: 0 }
    }
}

impl From<PostFailed> for Error {
    fn from(f: PostFailed) -> Self {
        f.err
    }
}

/// A local data segment, laid out as `struct ib_sge` (checked below), so
/// a receive names an [`SgeList`]'s entries without a copy.
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Sge>() == size_of::<b::ib_sge>());
    assert!(align_of::<Sge>() == align_of::<b::ib_sge>());
    assert!(offset_of!(Sge, addr) == offset_of!(b::ib_sge, addr));
    assert!(offset_of!(Sge, length) == offset_of!(b::ib_sge, length));
    assert!(offset_of!(Sge, lkey) == offset_of!(b::ib_sge, lkey));
};

/// What a Send carries.
#[derive(Clone, Copy)]
pub(crate) enum SendPayload<'a> {
    /// Gathered by the device from registered memory.
    Sges(&'a [Sge]),
    /// Copied into the work request by the provider during the post
    /// (`IB_SEND_INLINE`), the two pieces one after the other (one SGE
    /// each; the second may be empty): no memory registration, no DMA
    /// read of a header buffer, and the bytes may live anywhere the CPU
    /// reads. The QP must have been created with `max_inline_data` of at
    /// least their total length.
    Inline(&'a [u8], &'a [u8]),
}

/// A registration to post ahead of a Send.
pub(crate) struct RegReq<'a> {
    pub(crate) mr: &'a Mr,
    pub(crate) access: RemoteAccess,
}

/// Whether the test-only post fault injection (debugfs
/// `fail_iser_rs_post`, off unless a test arms it) is armed: the posts then
/// go through the shim, which injects; otherwise they call the provider.
#[inline(always)]
fn post_faults_armed() -> bool {
    // The pointer names the fault attribute's probability (or a constant
    // zero without the framework); debugfs writes it: `READ_ONCE`.
    // SAFETY: a constant pointer to a module-lifetime `unsigned long`.
    unsafe { core::ptr::read_volatile(b::iser_rs_fail_post_armed) != 0 }
}

/// A QP owned by an `rdma_cm_id`, for posting.
#[derive(Clone, Copy)]
pub(crate) struct QpRef(NonNull<b::ib_qp>);

// SAFETY: ib_post_send/recv are safe to call concurrently from any context.
unsafe impl Send for QpRef {}
// SAFETY: as above.
unsafe impl Sync for QpRef {}

impl QpRef {
    /// # Safety
    /// `qp` must stay live for every use of the handle.
    pub(crate) unsafe fn from_raw(qp: *mut b::ib_qp) -> Option<Self> {
        NonNull::new(qp).map(QpRef)
    }

    pub(crate) fn as_ptr(self) -> *mut b::ib_qp {
        self.0.as_ptr()
    }

    /// Posts one receive into `sges` (at most `RECV_SGE_MAX`: a buffer of
    /// a [`DmaPages`]) completing on `cqe`.
    pub(crate) fn post_recv(self, cqe: &Cqe, sges: &SgeList) -> Result {
        let sges = sges.as_slice();
        let mut wr = b::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_cqe = cqe.as_ptr();
        // `Sge` is laid out as `ib_sge` (asserted at its definition); the
        // provider only reads the list (`sg_list` is not const in C).
        wr.sg_list = sges.as_ptr().cast::<b::ib_sge>().cast_mut();
        wr.num_sge = sges.len() as i32;
        let qp = self.as_ptr();
        // SAFETY: the QP is live (the handle's contract) and so is its
        // device, which the ops table belongs to.
        let provider = unsafe { (*(*qp).device).ops.post_recv };
        let ret = match provider {
            // What `ib_post_recv` does, without the shim's call (step 18).
            Some(post) if !post_faults_armed() => {
                let mut bad: *const b::ib_recv_wr = core::ptr::null();
                // SAFETY: the provider's own post for this QP; the WR and
                // SGE live across the call (it copies them); the Cqe and
                // buffer outlive the completion (module docs).
                unsafe { post(qp, &wr, &mut bad) }
            }
            // SAFETY: as above; the shim injects a failure or posts.
            _ => unsafe { b::iser_rs_post_recv(qp, &wr) },
        };
        kernel::error::to_result(ret)
    }

    /// Posts, in one chain: local invalidations of `invs` (MRs left valid
    /// by an aborted command), `regs` fast registrations, then one Send of
    /// `payload`. Only the Send may be signaled (`signaled`); a failing
    /// earlier WR still completes, with an error, to `cqe`. A refused chain
    /// may have been posted in part ([`PostFailed::posted`]).
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    pub(crate) fn post_send(
        self,
        invs: &[u32],
        regs: &[RegReq<'_>],
        cqe: &Cqe,
        payload: SendPayload<'_>,
        signaled: bool,
    ) -> core::result::Result<(), PostFailed> {
        if regs.len() > 2 || invs.len() > 2 {
            return Err(EINVAL.into());
        }
        // Only an inline payload needs SGEs built here; a gathered one is
        // named in place (`Sge` is laid out as `ib_sge`, asserted at its
        // definition; the provider only reads the list).
        let inline_sg: [b::ib_sge; 2];
        let (sg_list, num_sge, flags) = match payload {
            SendPayload::Sges(sges) => {
                if sges.len() > SEND_SGE_MAX {
                    return Err(EINVAL.into());
                }
                (sges.as_ptr().cast::<b::ib_sge>(), sges.len(), 0)
            }
            SendPayload::Inline(first, second) => {
                // An inline SGE holds a CPU address: the provider copies
                // from it during the post (ib_verbs.h, IB_SEND_INLINE).
                let inline_sge = |bytes: &[u8]| -> core::result::Result<b::ib_sge, PostFailed> {
                    Ok(b::ib_sge {
                        addr: bytes.as_ptr() as u64,
                        length: u32::try_from(bytes.len()).map_err(|_| PostFailed::from(EINVAL))?,
                        lkey: 0,
                    })
                };
                inline_sg = [inline_sge(first)?, inline_sge(second)?];
                (
                    inline_sg.as_ptr(),
                    if second.is_empty() { 1 } else { 2 },
                    b::ib_send_flags_IB_SEND_INLINE as kernel::ffi::c_int,
                )
            }
        };
        let mut send = b::ib_send_wr {
            next: core::ptr::null_mut(),
            __bindgen_anon_1: b::ib_send_wr__bindgen_ty_1 {
                wr_cqe: cqe.as_ptr(),
            },
            // The provider only reads the list (`sg_list` is not const in C).
            sg_list: sg_list.cast_mut(),
            // At most SEND_SGE_MAX (3) or 2: checked above.
            num_sge: num_sge as i32,
            opcode: b::ib_wr_opcode_IB_WR_SEND,
            send_flags: flags | if signaled { SEND_SIGNALED } else { 0 },
            ex: b::ib_send_wr__bindgen_ty_2 { imm_data: 0 },
        };
        // Only the work requests the chain uses are built (this runs for
        // every command): `reg[..regs.len()]` and `inv[..invs.len()]` are
        // written below before anything points at them.
        let mut reg = [const { MaybeUninit::<b::ib_reg_wr>::uninit() }; 2];
        let mut next: *mut b::ib_send_wr = &mut send;
        for (w, r) in reg.iter_mut().zip(regs).rev() {
            let w = w.write(b::ib_reg_wr {
                wr: b::ib_send_wr {
                    next,
                    // Unsignaled: an error still completes (to the Send's
                    // handler).
                    __bindgen_anon_1: b::ib_send_wr__bindgen_ty_1 {
                        wr_cqe: cqe.as_ptr(),
                    },
                    sg_list: core::ptr::null_mut(),
                    num_sge: 0,
                    opcode: b::ib_wr_opcode_IB_WR_REG_MR,
                    send_flags: 0,
                    ex: b::ib_send_wr__bindgen_ty_2 { imm_data: 0 },
                },
                mr: r.mr.mr.as_ptr(),
                key: r.mr.rkey(),
                access: r.access.flags(),
            });
            next = &mut w.wr;
        }
        let mut inv = [const { MaybeUninit::<b::ib_send_wr>::uninit() }; 2];
        for (w, rkey) in inv.iter_mut().zip(invs).rev() {
            next = w.write(b::ib_send_wr {
                next,
                __bindgen_anon_1: b::ib_send_wr__bindgen_ty_1 {
                    wr_cqe: cqe.as_ptr(),
                },
                sg_list: core::ptr::null_mut(),
                num_sge: 0,
                opcode: b::ib_wr_opcode_IB_WR_LOCAL_INV,
                send_flags: 0,
                ex: b::ib_send_wr__bindgen_ty_2 {
                    invalidate_rkey: *rkey,
                },
            });
        }
        // SAFETY: chain and SGE lists (`inline_sg`, or the caller's borrow)
        // live across the call, which copies them and any inline payload;
        // Cqe, SGE memory and MRs outlive completion (module docs).
        unsafe { self.post_send_chain(next) }
    }

    /// Posts the send chain headed by `head`.
    ///
    /// # Safety
    ///
    /// `head` and the work requests it links are valid for the call, and
    /// what they name (completion handles, SGE memory, MRs) outlives their
    /// completion.
    // Once per I/O: inlined (bench/README.md, step 13).
    #[inline(always)]
    unsafe fn post_send_chain(
        self,
        head: *const b::ib_send_wr,
    ) -> core::result::Result<(), PostFailed> {
        let qp = self.as_ptr();
        // SAFETY: the QP is live (the handle's contract) and so is its
        // device, which the ops table belongs to.
        let provider = unsafe { (*(*qp).device).ops.post_send };
        let Some(post) = provider.filter(|_| !post_faults_armed()) else {
            let mut posted = 0u32;
            // SAFETY: the caller's contract; `posted` is a live u32. The
            // shim injects a failure or posts.
            let ret = unsafe { b::iser_rs_post_send(qp, head, &mut posted) };
            return kernel::error::to_result(ret).map_err(|err| PostFailed { err, posted });
        };
        // What `ib_post_send` does, without the shim's call (step 18). (An
        // indirect call from Rust: on a kernel with kCFI, which neither
        // kernel of the suite is built with, rustc's type IDs must match
        // the provider's; untested there.) A
        // provider that fails without naming the bad WR posted nothing.
        let mut bad = head;
        // SAFETY: the provider's own post for this QP, with the caller's
        // contract for the chain; `bad` is a live pointer it may write.
        let ret = unsafe { post(qp, head, &mut bad) };
        if ret == 0 {
            return Ok(());
        }
        // The work requests before the refused one were posted (the device
        // runs them). A `bad` outside the chain cannot have been refused:
        // nothing was posted then.
        let mut posted = 0u32;
        let mut w = head;
        while !w.is_null() && w != bad {
            posted += 1;
            // SAFETY: a WR of the caller's chain, valid for the call.
            w = unsafe { (*w).next };
        }
        let posted = if w.is_null() { 0 } else { posted };
        Err(PostFailed {
            err: kernel::error::Error::from_errno(ret),
            posted,
        })
    }

    /// Posts local invalidation of `rkeys` (at most 2), the last signaled.
    pub(crate) fn post_local_inv(self, cqe: &Cqe, rkeys: &[u32]) -> Result {
        self.post_local_inv_signaled(cqe, rkeys, true)
    }

    /// Posts local invalidation of `rkeys` (at most 2), the last one
    /// signaled if `signal_last` (an unsignaled chain's send-queue entries
    /// are released by the next signaled completion).
    pub(crate) fn post_local_inv_signaled(
        self,
        cqe: &Cqe,
        rkeys: &[u32],
        signal_last: bool,
    ) -> Result {
        if rkeys.is_empty() || rkeys.len() > 2 {
            return Err(EINVAL);
        }
        let mut wr = [b::ib_send_wr::default(), b::ib_send_wr::default()];
        let n = rkeys.len();
        for i in (0..n).rev() {
            let next: *mut b::ib_send_wr = if i + 1 < n {
                &mut wr[i + 1]
            } else {
                core::ptr::null_mut()
            };
            let w = &mut wr[i];
            w.opcode = b::ib_wr_opcode_IB_WR_LOCAL_INV;
            w.__bindgen_anon_1.wr_cqe = cqe.as_ptr();
            w.ex.invalidate_rkey = rkeys[i];
            w.send_flags = if i + 1 == n && signal_last {
                SEND_SIGNALED
            } else {
                0
            };
            w.next = next;
        }
        // SAFETY: as in `post_send`. A refused chain fails the connection
        // whether or not its head was posted (every caller), so `posted` is
        // not needed.
        unsafe { self.post_send_chain(&wr[0]) }.map_err(|f| f.err)
    }

    /// Flushes the QP: moves it to error and waits for every posted WR to
    /// complete. Process context only (sleeps).
    pub(crate) fn drain(self) {
        // SAFETY: the QP is live; draining is allowed once.
        unsafe { b::ib_drain_qp(self.as_ptr()) };
    }
}
