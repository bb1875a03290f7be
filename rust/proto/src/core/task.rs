//! Per-command STag state machine (iSER §7.3.1-§7.3.3, §8.3.2).
//!
//! Each SCSI command owns at most a Read STag and a Write STag (iSER
//! §7.3.1). Life cycle of one STag:
//!
//! ```text
//! Registered --advertise--> Advertised --SendInvSE(stag)--> RemoteInvalidated
//!      \                        |
//!       \--local inv posted--> LocalInvalidatePending --completed--> LocallyInvalidated
//! ```
//!
//! The command may be completed to the iSCSI layer only when its response
//! has arrived **and** none of its STags is still valid or being
//! invalidated (iSER §7.3.2: "MUST ensure the invalidation of the STag(s)
//! ... before notifying the iSCSI Layer"). A SendInvSE invalidates one STag
//! only; with both a Read and a Write STag the other one is invalidated
//! explicitly (iSER §7.3.2), and without negotiated remote invalidation
//! (see [`super::cm_private`]) all are.
//!
//! Only STags registered for this task belong here (not a device-global
//! DMA rkey, which is never invalidated). Every event is transactional: on
//! error the state is left unchanged.

use super::error::{ProtoError, ProtoResult};

/// State of one STag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagState {
    /// Registered and mapped to the ITT, not yet sent (iSER §7.3.1 a, b).
    Registered,
    /// Sent in the iSER header of the command (iSER §7.3.1 c).
    Advertised,
    /// Invalidated by the target's SendInvSE (iSER §7.3.2).
    RemoteInvalidated,
    /// Local invalidation posted, completion outstanding.
    LocalInvalidatePending,
    /// Invalidated locally (iSER §7.3.2 explicit invalidation, §7.3.3).
    LocallyInvalidated,
}

impl StagState {
    /// The STag can still be used by the target (must be invalidated before
    /// completion).
    #[allow(dead_code)] // observer for the host tests
    pub const fn is_valid(self) -> bool {
        matches!(self, StagState::Registered | StagState::Advertised)
    }

    /// The STag is definitely invalid.
    #[allow(dead_code)] // observer for the host tests
    pub const fn is_invalidated(self) -> bool {
        matches!(
            self,
            StagState::RemoteInvalidated | StagState::LocallyInvalidated
        )
    }
}

/// An STag with its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stag {
    /// STag value (rkey).
    pub stag: u32,
    /// Current state.
    pub state: StagState,
}

/// Up to two STags (result of [`TaskStags::stags_to_invalidate_locally`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StagList {
    stags: [u32; 2],
    len: u8,
}

impl StagList {
    fn push(&mut self, s: u32) {
        if let Some(slot) = self.stags.get_mut(usize::from(self.len)) {
            *slot = s;
            self.len = self.len.saturating_add(1);
        }
    }

    /// The STags.
    pub fn as_slice(&self) -> &[u32] {
        self.stags.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Number of STags.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// `true` if there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Bits of one STag's state in [`TaskStags::bits`] (a nibble each, the
/// Read STag's at [`READ_SHIFT`], the Write STag's at [`WRITE_SHIFT`]; all
/// clear: the task has no such STag). Chosen so that the questions asked
/// for every command are one mask: `LIVE` (valid or being invalidated:
/// the command may not complete), `VALID` (the target may still use it).
const LIVE: u16 = 1;
const VALID: u16 = 2;
/// With `LIVE | VALID`: advertised. Never set alone.
const ADVERTISED_BIT: u16 = 4;
/// Invalidated (with `ADVERTISED_BIT`: by the initiator, without: by the
/// target's SendInvSE).
const DEAD: u16 = 8;
const REGISTERED: u16 = LIVE | VALID;
const ADVERTISED: u16 = LIVE | VALID | ADVERTISED_BIT;
const LOCAL_PENDING: u16 = LIVE;
const REMOTE_INVALIDATED: u16 = DEAD;
const LOCALLY_INVALIDATED: u16 = DEAD | ADVERTISED_BIT;
const READ_SHIFT: u32 = 0;
const WRITE_SHIFT: u32 = 4;
const NIBBLE: u16 = 0xf;
/// Flags of the task as a whole.
const REMOTE_INVALIDATION: u16 = 1 << 8;
const SENT: u16 = 1 << 9;
const RESPONSE: u16 = 1 << 10;
/// `LIVE` of both STags.
const ANY_LIVE: u16 = LIVE << READ_SHIFT | LIVE << WRITE_SHIFT;

/// A nibble's state; `None` for an absent STag.
const fn decode(nibble: u16) -> Option<StagState> {
    match nibble {
        REGISTERED => Some(StagState::Registered),
        ADVERTISED => Some(StagState::Advertised),
        LOCAL_PENDING => Some(StagState::LocalInvalidatePending),
        REMOTE_INVALIDATED => Some(StagState::RemoteInvalidated),
        LOCALLY_INVALIDATED => Some(StagState::LocallyInvalidated),
        _ => None,
    }
}

/// The STags of one task and whether its response has arrived.
///
/// Packed (issue 18): the two STag values and one word of state bits, so
/// the checks each command makes are a mask each; the STag value of an
/// absent STag is 0, so equal states compare equal. The rules are those of
/// the model it replaced, kept in `tests/task_stags_model.rs`, which
/// compares the two exhaustively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskStags {
    read: u32,
    write: u32,
    bits: u16,
}

impl TaskStags {
    /// A task whose buffers were registered with the given STags (iSER
    /// §7.3.1 a, b); `remote_invalidation` is
    /// [`super::cm_private::AcceptTerms::remote_invalidate`]. Read and Write
    /// STag must differ ([`ProtoError::DuplicateStag`]).
    pub fn new(
        read: Option<u32>,
        write: Option<u32>,
        remote_invalidation: bool,
    ) -> ProtoResult<Self> {
        if let (Some(r), Some(w)) = (read, write) {
            if r == w {
                return Err(ProtoError::DuplicateStag);
            }
        }
        let mut bits = if remote_invalidation {
            REMOTE_INVALIDATION
        } else {
            0
        };
        if read.is_some() {
            bits |= REGISTERED << READ_SHIFT;
        }
        if write.is_some() {
            bits |= REGISTERED << WRITE_SHIFT;
        }
        Ok(TaskStags {
            read: read.unwrap_or(0),
            write: write.unwrap_or(0),
            bits,
        })
    }

    fn stag(&self, shift: u32) -> Option<Stag> {
        let value = if shift == READ_SHIFT {
            self.read
        } else {
            self.write
        };
        decode(self.bits >> shift & NIBBLE).map(|state| Stag { stag: value, state })
    }

    /// The Read STag, if any.
    #[allow(dead_code)] // observer for the host tests
    pub fn read(&self) -> Option<Stag> {
        self.stag(READ_SHIFT)
    }

    /// The Write STag, if any.
    #[allow(dead_code)] // observer for the host tests
    pub fn write(&self) -> Option<Stag> {
        self.stag(WRITE_SHIFT)
    }

    /// Whether the response has been received.
    #[allow(dead_code)] // observer for the host tests
    pub fn response_received(&self) -> bool {
        self.bits & RESPONSE != 0
    }

    /// The command carrying the STags was sent:
    /// Registered -> Advertised (iSER §7.3.1 c). Sending twice, or
    /// after the response, is [`ProtoError::TaskState`].
    pub fn advertise(&mut self) -> ProtoResult<()> {
        let b = self.bits;
        let registered = |shift: u32| matches!(b >> shift & NIBBLE, 0 | REGISTERED);
        if b & (SENT | RESPONSE) != 0 || !registered(READ_SHIFT) || !registered(WRITE_SHIFT) {
            return Err(ProtoError::TaskState);
        }
        // Every STag present is Registered (`VALID` set): `VALID` moved up
        // one bit is `ADVERTISED_BIT`, which makes it Advertised.
        let valid = b & (VALID << READ_SHIFT | VALID << WRITE_SHIFT);
        self.bits = b | valid << 1 | SENT;
        Ok(())
    }

    /// The SCSI Response arrived, in a SendSE (`invalidated = None`) or a
    /// SendInvSE naming `invalidated` (iSER §7.3.2). Returns the STags that
    /// must now be invalidated locally before completion.
    ///
    /// Errors: a second response or a response before [`Self::advertise`]:
    /// [`ProtoError::TaskState`]; SendInvSE without negotiated remote
    /// invalidation: [`ProtoError::UnexpectedRemoteInvalidation`]; an STag
    /// this task does not own: [`ProtoError::UnknownStag`]; one already
    /// invalid or being invalidated: [`ProtoError::StagNotValid`].
    pub fn on_response(&mut self, invalidated: Option<u32>) -> ProtoResult<StagList> {
        let mut b = self.bits;
        if b & (SENT | RESPONSE) != SENT {
            return Err(ProtoError::TaskState);
        }
        if let Some(x) = invalidated {
            if b & REMOTE_INVALIDATION == 0 {
                return Err(ProtoError::UnexpectedRemoteInvalidation);
            }
            let shift = self.shift_of(x)?;
            if b >> shift & NIBBLE != ADVERTISED {
                return Err(ProtoError::StagNotValid(x));
            }
            b = b & !(NIBBLE << shift) | REMOTE_INVALIDATED << shift;
        }
        self.bits = b | RESPONSE;
        Ok(self.stags_to_invalidate_locally())
    }

    /// STags still valid, which the initiator must invalidate itself: after
    /// a SendInvSE the other STag of a bidirectional command, after a
    /// SendSE (or without remote invalidation) all of them (iSER §7.3.2);
    /// before a TASK REASSIGN or on teardown all remaining ones (iSER
    /// §7.3.3, §5.2.3).
    pub fn stags_to_invalidate_locally(&self) -> StagList {
        let mut l = StagList::default();
        if self.bits & VALID << READ_SHIFT != 0 {
            l.push(self.read);
        }
        if self.bits & VALID << WRITE_SHIFT != 0 {
            l.push(self.write);
        }
        l
    }

    /// A local invalidation of `stag` was posted. Errors as in
    /// [`Self::on_response`] ([`ProtoError::UnknownStag`],
    /// [`ProtoError::StagNotValid`]).
    pub fn local_invalidate_posted(&mut self, stag: u32) -> ProtoResult<()> {
        let shift = self.shift_of(stag)?;
        if self.bits >> shift & VALID == 0 {
            return Err(ProtoError::StagNotValid(stag));
        }
        self.bits = self.bits & !(NIBBLE << shift) | LOCAL_PENDING << shift;
        Ok(())
    }

    /// The local invalidation of `stag` completed. Only valid after
    /// [`Self::local_invalidate_posted`] ([`ProtoError::StagNotValid`]).
    pub fn local_invalidate_completed(&mut self, stag: u32) -> ProtoResult<()> {
        let shift = self.shift_of(stag)?;
        if self.bits >> shift & NIBBLE != LOCAL_PENDING {
            return Err(ProtoError::StagNotValid(stag));
        }
        self.bits = self.bits & !(NIBBLE << shift) | LOCALLY_INVALIDATED << shift;
        Ok(())
    }

    /// The Read STag whose SendInvSE alone would complete the command: it
    /// is the task's only STag, advertised, remote invalidation was
    /// negotiated and no response came yet. [`Self::on_response`] naming it
    /// leaves nothing to invalidate locally, and naming another STag is an
    /// error, so the driver may settle such a response on the MR alone,
    /// without the task (issue 18); any later response is then a second
    /// one ([`ProtoError::TaskState`]). `tests/task_stags_model.rs` holds
    /// this to `on_response` in every reachable state.
    pub fn settles_remotely(&self) -> Option<u32> {
        (self.bits == REMOTE_INVALIDATION | SENT | ADVERTISED << READ_SHIFT).then_some(self.read)
    }

    /// `true` iff the response has arrived and no STag is valid or being
    /// invalidated: only then may the task be completed to the iSCSI layer
    /// (iSER §7.3.2).
    pub fn completable(&self) -> bool {
        self.bits & (RESPONSE | ANY_LIVE) == RESPONSE
    }

    /// `true` if every STag is definitely invalid (safe to release the
    /// buffers, e.g. on connection teardown, iSER §5.2.3).
    pub fn no_live_stags(&self) -> bool {
        self.bits & ANY_LIVE == 0
    }

    /// Where `stag`'s state lies in `bits`: the Read STag's first, as the
    /// model looked it up.
    fn shift_of(&self, stag: u32) -> ProtoResult<u32> {
        if self.bits & NIBBLE << READ_SHIFT != 0 && self.read == stag {
            Ok(READ_SHIFT)
        } else if self.bits & NIBBLE << WRITE_SHIFT != 0 && self.write == stag {
            Ok(WRITE_SHIFT)
        } else {
            Err(ProtoError::UnknownStag(stag))
        }
    }
}

/// Which outstanding commands a task management function releases when
/// the target answers it with Function Complete (RFC 7143 §11.5.1): libiscsi
/// then fails them (and the block layer takes their pages back), so every
/// STag they advertised must be invalid before the response reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmfScope {
    /// ABORT TASK: the command whose ITT is the Referenced Task Tag.
    Task(u32),
    /// ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET: every command
    /// on the LUN (raw 8-byte LUN field as sent).
    Lun([u8; 8]),
    /// TARGET WARM RESET, TARGET COLD RESET: every command of the session.
    All,
    /// CLEAR ACA, TASK REASSIGN and unknown functions release no command
    /// STags here (task reassignment re-advertises them, §7.3.1).
    None,
}

impl TmfScope {
    /// The scope of a TMF request BHS (function in byte 1, LUN in bytes
    /// 8..16, Referenced Task Tag in bytes 20..24, raw); `None` for a
    /// header too short to be one.
    pub fn of_request(bhs: &[u8]) -> TmfScope {
        if bhs.len() < 24 {
            return TmfScope::None;
        }
        let mut lun = [0u8; 8];
        lun.copy_from_slice(&bhs[8..16]);
        match bhs[1] & 0x7f {
            1 => TmfScope::Task(u32::from_ne_bytes([bhs[20], bhs[21], bhs[22], bhs[23]])),
            2 | 3 | 5 => TmfScope::Lun(lun),
            6 | 7 => TmfScope::All,
            _ => TmfScope::None,
        }
    }

    /// Whether the command with raw ITT `itt` on raw LUN `lun` is released.
    pub fn covers(&self, itt: u32, lun: &[u8; 8]) -> bool {
        match self {
            TmfScope::Task(t) => *t == itt,
            TmfScope::Lun(l) => l == lun,
            TmfScope::All => true,
            TmfScope::None => false,
        }
    }
}

/// When a successful TMF Response may reach libiscsi (which then releases
/// the commands the function covers, and the block layer takes their pages
/// back): after the TMF request's own Send completed, and after the local
/// invalidations of the covered commands' STags completed.
///
/// The Send rule is the nvme-rdma one applied to task management: a covered
/// command's last data-carrying Send (immediate data, unsolicited Data-Out)
/// may not have completed yet, and the device may read its pages again to
/// retransmit. All those Sends were posted before the TMF request (libiscsi
/// sends a command's data within its `xmit_task`, before any TMF naming
/// it), and an RC send queue completes in order, so the TMF request's Send
/// completion covers every one of them. The TMF request is always signaled.
///
/// Every event is idempotent; the bits encode into one byte so the driver
/// keeps the state in an atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmfRelease {
    send_completed: bool,
    response_held: bool,
    invalidations_pending: bool,
}

impl TmfRelease {
    /// A TMF request was just posted: its Send has not completed, no
    /// response is held.
    pub const fn request_posted() -> Self {
        TmfRelease {
            send_completed: false,
            response_held: false,
            invalidations_pending: false,
        }
    }

    /// The TMF request's Send completed. Returns whether a held response
    /// may be delivered now.
    pub fn send_completed(&mut self) -> bool {
        self.send_completed = true;
        self.deliverable()
    }

    /// A Function Complete response arrived; `invalidations_posted`: local
    /// invalidations of covered STags were posted and have not completed.
    /// Returns whether it may be delivered at once (otherwise it is held
    /// until [`Self::send_completed`] or
    /// [`Self::invalidations_completed`] says so).
    pub fn response(&mut self, invalidations_posted: bool) -> bool {
        self.response_held = true;
        self.invalidations_pending = invalidations_posted;
        self.deliverable()
    }

    /// The covered STags' local invalidations completed. Returns whether a
    /// held response may be delivered now.
    pub fn invalidations_completed(&mut self) -> bool {
        self.invalidations_pending = false;
        self.deliverable()
    }

    /// A held response may go: nothing it waits for is outstanding. Taking
    /// it (true once) clears the hold.
    fn deliverable(&mut self) -> bool {
        if self.response_held && self.send_completed && !self.invalidations_pending {
            self.response_held = false;
            return true;
        }
        false
    }

    /// Whether a response is held.
    #[allow(dead_code)] // observer for the host tests
    pub const fn holds_response(&self) -> bool {
        self.response_held
    }

    /// The state as one byte (for an atomic).
    pub const fn to_bits(self) -> u8 {
        self.send_completed as u8
            | (self.response_held as u8) << 1
            | (self.invalidations_pending as u8) << 2
    }

    /// The state from [`Self::to_bits`] (other bits ignored).
    pub const fn from_bits(b: u8) -> Self {
        TmfRelease {
            send_completed: b & 1 != 0,
            response_held: b & 2 != 0,
            invalidations_pending: b & 4 != 0,
        }
    }
}

/// The meeting of a command's SCSI Response and the completion of the
/// Send that carried its data, for a command with nothing else to wait for:
/// a write with no STag (all its data immediate, sent from the PD's local
/// DMA lkey or an MR registered for local access only: nothing
/// advertised). It completes after both, in either order (the Send rule:
/// the device may read the pages again until that Send completed), and
/// both arrive on the connection's one CQ; only `cleanup` and `xmit` race
/// with them. The whole state is one word, so the driver settles
/// it by compare-and-swap, without the task (issue 18):
///
/// ```text
/// Armed --response--> Held(rx, len) --Send completed--> Done (deliver held)
///   \--Send completed--> Sent --response--> Done (deliver now)
/// ```
///
/// Bits: the command's raw ITT (63..32), the held response's length
/// (31..17) and receive buffer (16..3), the state (2..0). 0 is "not armed".
/// A response naming another ITT, or any event in another state (a second
/// response), is not the meeting's: the task's rules decide, after taking
/// the word back ([`SendMeet::taken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendMeet;

const MEET_ARMED: u64 = 1;
const MEET_SENT: u64 = 2;
const MEET_HELD: u64 = 3;
const MEET_DONE: u64 = 4;
const MEET_STATE: u64 = 7;
const MEET_RX_SHIFT: u32 = 3;
const MEET_RX_MAX: u16 = (1 << 14) - 1;
const MEET_LEN_SHIFT: u32 = 17;
const MEET_LEN_MAX: u32 = (1 << 15) - 1;

/// What the response does at the meeting ([`SendMeet::on_response`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeetResponse {
    /// The Send has not completed: the response and its buffer wait (word
    /// to store).
    Hold(u64),
    /// The Send completed already: deliver the response now (word to
    /// store).
    Deliver(u64),
}

/// What the Send completion does at the meeting ([`SendMeet::on_send`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeetSend {
    /// No response yet: the word to store.
    Wait(u64),
    /// The held response (receive buffer, length) goes to libiscsi now;
    /// the word to store.
    Deliver(u64, u16, u32),
}

/// What a taken-back word held ([`SendMeet::taken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeetTaken {
    /// Not armed (or taken back already).
    Off,
    /// Armed; neither event came.
    Armed,
    /// The Send completed; no response came.
    Sent,
    /// A response is held in (receive buffer, length); the Send has not
    /// completed.
    Held(u16, u32),
    /// Both came: the response was delivered.
    Done,
}

impl SendMeet {
    /// The word of a command with raw ITT `itt` about to be posted.
    pub const fn armed(itt: u32) -> u64 {
        (itt as u64) << 32 | MEET_ARMED
    }

    /// A SCSI Response of raw ITT `itt` came in receive buffer `rx`, `len`
    /// bytes, without remote invalidation, and the word is `w`: `None` if
    /// it is not this meeting's (another ITT, not armed, a second response,
    /// or a buffer the word cannot name).
    pub fn on_response(w: u64, itt: u32, rx: u16, len: u32) -> Option<MeetResponse> {
        if (w >> 32) as u32 != itt || rx > MEET_RX_MAX || len > MEET_LEN_MAX {
            return None;
        }
        let base = u64::from(itt) << 32;
        match w & MEET_STATE {
            MEET_ARMED => Some(MeetResponse::Hold(
                base | u64::from(len) << MEET_LEN_SHIFT
                    | u64::from(rx) << MEET_RX_SHIFT
                    | MEET_HELD,
            )),
            MEET_SENT => Some(MeetResponse::Deliver(base | MEET_DONE)),
            _ => None,
        }
    }

    /// The Send that carried the data of the command with raw ITT `itt`
    /// completed, and the word is `w`: `None` if it is not this meeting's
    /// (the task's rules hear of it).
    pub fn on_send(w: u64, itt: u32) -> Option<MeetSend> {
        if (w >> 32) as u32 != itt {
            return None;
        }
        let base = u64::from(itt) << 32;
        match Self::taken(w) {
            MeetTaken::Armed => Some(MeetSend::Wait(base | MEET_SENT)),
            MeetTaken::Held(rx, len) => Some(MeetSend::Deliver(base | MEET_DONE, rx, len)),
            _ => None,
        }
    }

    /// What word `w` says, for the one taking it back.
    pub fn taken(w: u64) -> MeetTaken {
        match w & MEET_STATE {
            MEET_ARMED => MeetTaken::Armed,
            MEET_SENT => MeetTaken::Sent,
            MEET_HELD => MeetTaken::Held(
                ((w >> MEET_RX_SHIFT) as u16) & MEET_RX_MAX,
                ((w >> MEET_LEN_SHIFT) as u32) & MEET_LEN_MAX,
            ),
            MEET_DONE => MeetTaken::Done,
            _ => MeetTaken::Off,
        }
    }
}

/// TMF Response code "Function complete" (RFC 7143 §11.6.1): the only
/// answer after which libiscsi releases the affected commands.
pub const TMF_FUNCTION_COMPLETE: u8 = 0;

#[cfg(test)]
mod tests {
    use super::*;

    const R: u32 = 0x100;
    const W: u32 = 0x200;

    fn sent(r: Option<u32>, w: Option<u32>, rinv: bool) -> TaskStags {
        let mut t = TaskStags::new(r, w, rinv).expect("valid STags for a fresh task");
        t.advertise().expect("a registered task advertises once");
        t
    }

    fn drain(t: &mut TaskStags) {
        for s in t.stags_to_invalidate_locally().as_slice() {
            t.local_invalidate_posted(*s)
                .expect("the STag was just listed for local invalidation");
            assert!(!t.completable());
            t.local_invalidate_completed(*s)
                .expect("its local invalidation was posted");
        }
    }

    /// iSER §7.3.2: SendInvSE of the Read STag + explicit invalidation of
    /// the Write STag for a bidirectional command.
    #[test]
    fn iser_7_3_2_bidi_sendinv_read_then_write_local() {
        let mut t = sent(Some(R), Some(W), true);
        let l = t
            .on_response(Some(R))
            .expect("this response is valid for the task in this test");
        assert_eq!(l.as_slice(), &[W]);
        assert!(!t.completable());
        drain(&mut t);
        assert!(t.completable());
    }

    /// iSER §7.3.2: a SendInvSE invalidating the only STag -> completable at
    /// once.
    #[test]
    fn iser_7_3_2_single_stag_remote() {
        let mut t = sent(Some(R), None, true);
        assert!(t
            .on_response(Some(R))
            .expect("this response is valid for the task in this test")
            .is_empty());
        assert!(t.completable());
        let mut t = sent(None, Some(W), true);
        assert!(t
            .on_response(Some(W))
            .expect("this response is valid for the task in this test")
            .is_empty());
        assert!(t.completable());
    }

    /// iSER §7.3.2 with local invalidation only (no SEND_W_INV): both.
    #[test]
    fn iser_7_3_2_no_remote_inv_both_local() {
        let mut t = sent(Some(R), Some(W), false);
        assert_eq!(
            t.on_response(None)
                .expect("this response is valid for the task in this test")
                .as_slice(),
            &[R, W]
        );
        drain(&mut t);
        assert!(t.completable());
        let mut t = sent(Some(R), None, false);
        assert_eq!(
            t.on_response(Some(R)),
            Err(ProtoError::UnexpectedRemoteInvalidation)
        );
    }

    /// iSER §7.3.2: a plain SendSE leaves all STags to invalidate locally
    /// even when remote invalidation was negotiated.
    #[test]
    fn iser_7_3_2_sendse_with_remote_inv_negotiated() {
        let mut t = sent(Some(R), None, true);
        assert_eq!(
            t.on_response(None)
                .expect("this response is valid for the task in this test")
                .as_slice(),
            &[R]
        );
        assert!(!t.completable());
        drain(&mut t);
        assert!(t.completable());
    }

    /// No-data command: completable on response.
    #[test]
    fn iser_7_3_2_no_stags() {
        let mut t = sent(None, None, true);
        assert!(!t.completable());
        assert!(t
            .on_response(None)
            .expect("this response is valid for the task in this test")
            .is_empty());
        assert!(t.completable());
    }

    /// iSER §7.3.2 "MUST ensure that the correct STag is invalidated":
    /// unknown / already invalid STags are protocol errors; state unchanged.
    #[test]
    fn iser_7_3_2_bad_invalidations() {
        let mut t = sent(Some(R), Some(W), true);
        let before = t;
        assert_eq!(
            t.on_response(Some(0x999)),
            Err(ProtoError::UnknownStag(0x999))
        );
        assert_eq!(t, before);
        t.local_invalidate_posted(W)
            .expect("the STag was just listed for local invalidation");
        assert_eq!(t.on_response(Some(W)), Err(ProtoError::StagNotValid(W)));
        assert_eq!(
            t.local_invalidate_posted(W),
            Err(ProtoError::StagNotValid(W))
        );
        t.local_invalidate_completed(W)
            .expect("its local invalidation was posted");
        assert_eq!(
            t.local_invalidate_completed(W),
            Err(ProtoError::StagNotValid(W))
        );
        assert_eq!(
            t.local_invalidate_completed(R),
            Err(ProtoError::StagNotValid(R))
        );
        assert_eq!(
            t.local_invalidate_posted(7),
            Err(ProtoError::UnknownStag(7))
        );
        t.on_response(Some(R))
            .expect("this response is valid for the task in this test");
        assert!(t.completable());
        assert_eq!(t.on_response(None), Err(ProtoError::TaskState));
        assert_eq!(
            t.local_invalidate_posted(R),
            Err(ProtoError::StagNotValid(R))
        );
    }

    /// Order: response before advertise, or double advertise, are errors.
    #[test]
    fn iser_7_3_1_advertise_before_response() {
        let mut t = TaskStags::new(Some(R), None, true).expect("valid STags for a fresh task");
        assert_eq!(t.on_response(None), Err(ProtoError::TaskState));
        t.advertise().expect("a registered task advertises once");
        assert_eq!(t.advertise(), Err(ProtoError::TaskState));
        assert_eq!(
            TaskStags::new(Some(R), Some(R), true),
            Err(ProtoError::DuplicateStag)
        );
    }

    #[test]
    fn task_is_small_and_copy() {
        assert!(core::mem::size_of::<TaskStags>() <= 24);
    }

    fn tmf_bhs(func: u8, lun: u8, rtt: u32) -> [u8; 48] {
        let mut b = [0u8; 48];
        b[0] = 0x02;
        b[1] = 0x80 | func;
        b[9] = lun;
        b[20..24].copy_from_slice(&rtt.to_ne_bytes());
        b
    }

    #[test]
    fn tmf_scope_by_function() {
        let l3 = [0, 3, 0, 0, 0, 0, 0, 0];
        let l4 = [0, 4, 0, 0, 0, 0, 0, 0];
        let abort = TmfScope::of_request(&tmf_bhs(1, 3, 0x1234));
        assert_eq!(abort, TmfScope::Task(0x1234));
        assert!(abort.covers(0x1234, &l4));
        assert!(!abort.covers(0x1235, &l3));
        for f in [2, 3, 5] {
            let s = TmfScope::of_request(&tmf_bhs(f, 3, 0));
            assert!(s.covers(7, &l3), "function {f}");
            assert!(!s.covers(7, &l4), "function {f}");
        }
        for f in [6, 7] {
            assert!(TmfScope::of_request(&tmf_bhs(f, 3, 0)).covers(9, &l4));
        }
        for f in [4, 8, 9, 0x7f] {
            assert_eq!(TmfScope::of_request(&tmf_bhs(f, 3, 0)), TmfScope::None);
        }
        assert_eq!(TmfScope::of_request(&[0x02, 0x81]), TmfScope::None);
    }

    /// Every order of the three events delivers the response exactly once,
    /// and only after both the Send and the invalidations completed.
    #[test]
    fn tmf_release_waits_for_send_and_invalidations() {
        #[derive(Clone, Copy, Debug)]
        enum Ev {
            Send,
            Rsp,
            Inv,
        }
        let orders = [
            [Ev::Send, Ev::Rsp, Ev::Inv],
            [Ev::Send, Ev::Inv, Ev::Rsp],
            [Ev::Rsp, Ev::Send, Ev::Inv],
            [Ev::Rsp, Ev::Inv, Ev::Send],
            [Ev::Inv, Ev::Send, Ev::Rsp],
            [Ev::Inv, Ev::Rsp, Ev::Send],
        ];
        for with_invs in [false, true] {
            for order in orders {
                let mut r = TmfRelease::request_posted();
                let (mut sent, mut rsp, mut inv) = (false, false, !with_invs);
                let mut delivered = 0;
                for ev in order {
                    // Invalidations complete only after they were posted,
                    // i.e. after the response.
                    let go = match ev {
                        Ev::Send => {
                            sent = true;
                            r.send_completed()
                        }
                        Ev::Rsp => {
                            rsp = true;
                            r.response(with_invs)
                        }
                        Ev::Inv if rsp && with_invs => {
                            inv = true;
                            r.invalidations_completed()
                        }
                        Ev::Inv => false,
                    };
                    // Round-trip through the atomic's byte.
                    r = TmfRelease::from_bits(r.to_bits());
                    if go {
                        delivered += 1;
                        assert!(sent && rsp && inv, "{order:?} {with_invs}: delivered early");
                    }
                }
                if rsp && !inv {
                    // The order had the invalidations before the response.
                    assert!(r.invalidations_completed());
                    delivered += 1;
                }
                assert_eq!(delivered, 1, "{order:?} {with_invs}");
                assert!(!r.holds_response());
                assert!(!r.send_completed() && !r.invalidations_completed());
            }
        }
    }

    /// Every order of the meeting's events (response, Send completion, a
    /// second response, another ITT's events), for ITTs and buffers at the
    /// limits: the response reaches libiscsi exactly once, and only after
    /// both events; nothing else is this meeting's. (What a take-back
    /// finds is `taken`, checked after every step.)
    #[test]
    fn send_meet_every_order() {
        #[derive(Clone, Copy)]
        enum Ev {
            Rsp,
            Send,
            OtherItt,
        }
        for (itt, rx, len) in [
            (0u32, 0u16, 0u32),
            (0x1234_5678, 143, 76),
            (u32::MAX, MEET_RX_MAX, MEET_LEN_MAX),
        ] {
            for seq in [
                [Ev::Rsp, Ev::Send, Ev::Rsp],
                [Ev::Send, Ev::Rsp, Ev::Rsp],
                [Ev::OtherItt, Ev::Rsp, Ev::Send],
                [Ev::Send, Ev::OtherItt, Ev::Rsp],
            ] {
                let mut w = SendMeet::armed(itt);
                assert_eq!(SendMeet::taken(w), MeetTaken::Armed);
                let (mut rsp, mut sent, mut delivered) = (false, false, 0);
                for ev in seq {
                    match ev {
                        Ev::Rsp => match SendMeet::on_response(w, itt, rx, len) {
                            Some(MeetResponse::Hold(n)) => {
                                assert!(!rsp && !sent);
                                assert_eq!(SendMeet::taken(n), MeetTaken::Held(rx, len));
                                rsp = true;
                                w = n;
                            }
                            Some(MeetResponse::Deliver(n)) => {
                                assert!(!rsp && sent);
                                assert_eq!(SendMeet::taken(n), MeetTaken::Done);
                                rsp = true;
                                delivered += 1;
                                w = n;
                            }
                            // A second response: the task's rules refuse it.
                            None => assert!(rsp),
                        },
                        Ev::Send => match SendMeet::on_send(w, itt) {
                            Some(MeetSend::Wait(n)) => {
                                assert!(!rsp && !sent);
                                assert_eq!(SendMeet::taken(n), MeetTaken::Sent);
                                sent = true;
                                w = n;
                            }
                            Some(MeetSend::Deliver(n, r, l)) => {
                                assert!(rsp && !sent);
                                assert_eq!((r, l), (rx, len));
                                assert_eq!(SendMeet::taken(n), MeetTaken::Done);
                                sent = true;
                                delivered += 1;
                                w = n;
                            }
                            None => panic!("the command's own Send refused"),
                        },
                        Ev::OtherItt => {
                            let other = itt ^ 0x0100_0000;
                            assert_eq!(SendMeet::on_response(w, other, rx, len), None);
                            assert_eq!(SendMeet::on_send(w, other), None);
                        }
                    }
                }
                assert!(rsp && sent);
                assert_eq!(delivered, 1);
                // Once done, nothing is the meeting's any more.
                assert_eq!(SendMeet::on_send(w, itt), None);
                assert_eq!(SendMeet::on_response(w, itt, rx, len), None);
            }
            // A buffer or length the word cannot name goes the slow way.
            let a = SendMeet::armed(itt);
            assert_eq!(SendMeet::on_response(a, itt, MEET_RX_MAX + 1, len), None);
            assert_eq!(SendMeet::on_response(a, itt, rx, MEET_LEN_MAX + 1), None);
            // Not armed: nothing is the meeting's.
            assert_eq!(SendMeet::on_response(0, 0, rx, len), None);
            assert_eq!(SendMeet::on_send(0, 0), None);
            assert_eq!(SendMeet::taken(0), MeetTaken::Off);
        }
    }
}
