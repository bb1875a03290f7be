//! Exhaustive equivalence of `task::TaskStags` (its packed form, issue 18)
//! with the model it replaced: the STag state machine as it was written
//! before, two `Option<Stag>` and three flags, kept here verbatim (but for
//! its list type) as the reference. Every task shape (Read and/or Write
//! STag, equal or not, remote invalidation negotiated or not) and every
//! sequence of up to `DEPTH` events over the task's STags, a foreign one
//! and 0 must give the same result for each event and the same observable
//! state after it (a refused event must leave the state as it was, so the
//! walk goes on only from accepted ones). In every state reached,
//! `settles_remotely` (the receive path's settle on the MR, without the
//! task) must agree with the model's `on_response`.

use iser_proto::task::{Stag, StagState, TaskStags};
use iser_proto::{ProtoError, ProtoResult};

/// The STags of one task and whether its response has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelStags {
    read: Option<Stag>,
    write: Option<Stag>,
    remote_invalidation: bool,
    sent: bool,
    response: bool,
}

impl ModelStags {
    /// A task whose buffers were registered with the given STags (iSER
    /// §7.3.1 a, b); `remote_invalidation` is
    /// [`super::cm_private::AcceptTerms::remote_invalidate`]. Read and Write
    /// STag must differ ([`ProtoError::DuplicateStag`]).
    pub fn new(
        read: Option<u32>,
        write: Option<u32>,
        remote_invalidation: bool,
    ) -> ProtoResult<Self> {
        ModelStags {
            read: None,
            write: None,
            remote_invalidation,
            sent: false,
            response: false,
        }
        .with_stags(read, write)
    }

    fn with_stags(mut self, read: Option<u32>, write: Option<u32>) -> ProtoResult<Self> {
        if let (Some(r), Some(w)) = (read, write) {
            if r == w {
                return Err(ProtoError::DuplicateStag);
            }
        }
        let reg = |s| Stag {
            stag: s,
            state: StagState::Registered,
        };
        self.read = read.map(reg);
        self.write = write.map(reg);
        Ok(self)
    }

    /// The Read STag, if any.
    pub fn read(&self) -> Option<Stag> {
        self.read
    }

    /// The Write STag, if any.
    pub fn write(&self) -> Option<Stag> {
        self.write
    }

    /// Whether the response has been received.
    pub fn response_received(&self) -> bool {
        self.response
    }

    /// The command carrying the STags was sent:
    /// Registered -> Advertised (iSER §7.3.1 c). Sending twice, or
    /// after the response, is [`ProtoError::TaskState`].
    pub fn advertise(&mut self) -> ProtoResult<()> {
        if self.sent || self.response {
            return Err(ProtoError::TaskState);
        }
        // Written out for the two slots: this runs for every command.
        let ok = |s: &Option<Stag>| s.map_or(true, |s| s.state == StagState::Registered);
        if !ok(&self.read) || !ok(&self.write) {
            return Err(ProtoError::TaskState);
        }
        if let Some(s) = &mut self.read {
            s.state = StagState::Advertised;
        }
        if let Some(s) = &mut self.write {
            s.state = StagState::Advertised;
        }
        self.sent = true;
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
    pub fn on_response(&mut self, invalidated: Option<u32>) -> ProtoResult<Vec<u32>> {
        if self.response || !self.sent {
            return Err(ProtoError::TaskState);
        }
        let mut next = *self;
        if let Some(x) = invalidated {
            if !next.remote_invalidation {
                return Err(ProtoError::UnexpectedRemoteInvalidation);
            }
            let slot = next.find_mut(x)?;
            if slot.state != StagState::Advertised {
                return Err(ProtoError::StagNotValid(x));
            }
            slot.state = StagState::RemoteInvalidated;
        }
        next.response = true;
        *self = next;
        Ok(self.stags_to_invalidate_locally())
    }

    /// STags still valid, which the initiator must invalidate itself: after
    /// a SendInvSE the other STag of a bidirectional command, after a
    /// SendSE (or without remote invalidation) all of them (iSER §7.3.2);
    /// before a TASK REASSIGN or on teardown all remaining ones (iSER
    /// §7.3.3, §5.2.3).
    pub fn stags_to_invalidate_locally(&self) -> Vec<u32> {
        let mut l = Vec::new();
        if let Some(s) = self.read.filter(|s| s.state.is_valid()) {
            l.push(s.stag);
        }
        if let Some(s) = self.write.filter(|s| s.state.is_valid()) {
            l.push(s.stag);
        }
        l
    }

    /// A local invalidation of `stag` was posted. Errors as in
    /// [`Self::on_response`] ([`ProtoError::UnknownStag`],
    /// [`ProtoError::StagNotValid`]).
    pub fn local_invalidate_posted(&mut self, stag: u32) -> ProtoResult<()> {
        let mut next = *self;
        let slot = next.find_mut(stag)?;
        if !slot.state.is_valid() {
            return Err(ProtoError::StagNotValid(stag));
        }
        slot.state = StagState::LocalInvalidatePending;
        *self = next;
        Ok(())
    }

    /// The local invalidation of `stag` completed. Only valid after
    /// [`Self::local_invalidate_posted`] ([`ProtoError::StagNotValid`]).
    pub fn local_invalidate_completed(&mut self, stag: u32) -> ProtoResult<()> {
        let mut next = *self;
        let slot = next.find_mut(stag)?;
        if slot.state != StagState::LocalInvalidatePending {
            return Err(ProtoError::StagNotValid(stag));
        }
        slot.state = StagState::LocallyInvalidated;
        *self = next;
        Ok(())
    }

    /// `true` iff the response has arrived and no STag is valid or being
    /// invalidated: only then may the task be completed to the iSCSI layer
    /// (iSER §7.3.2).
    pub fn completable(&self) -> bool {
        self.response && self.no_live_stags()
    }

    /// `true` if every STag is definitely invalid (safe to release the
    /// buffers, e.g. on connection teardown, iSER §5.2.3).
    pub fn no_live_stags(&self) -> bool {
        let dead = |s: &Option<Stag>| s.map_or(true, |s| s.state.is_invalidated());
        dead(&self.read) && dead(&self.write)
    }

    fn find_mut(&mut self, stag: u32) -> ProtoResult<&mut Stag> {
        match (&mut self.read, &mut self.write) {
            (Some(r), _) if r.stag == stag => Ok(r),
            (_, Some(w)) if w.stag == stag => Ok(w),
            _ => Err(ProtoError::UnknownStag(stag)),
        }
    }
}

const R: u32 = 0x100;
const W: u32 = 0x200;
const FOREIGN: u32 = 0x300;
/// What the packed form stores for an absent STag: never a match.
const ZERO: u32 = 0;
/// Events per sequence: more than a task's whole life takes (advertise,
/// response, two local invalidations posted and completed: six).
const DEPTH: u32 = 8;

#[derive(Clone, Copy, Debug)]
enum Event {
    Advertise,
    Response(Option<u32>),
    InvPosted(u32),
    InvCompleted(u32),
}

const STAGS: [u32; 4] = [R, W, FOREIGN, ZERO];

fn events() -> Vec<Event> {
    let mut v = vec![Event::Advertise, Event::Response(None)];
    for s in STAGS {
        v.push(Event::Response(Some(s)));
    }
    for s in STAGS {
        v.push(Event::InvPosted(s));
        v.push(Event::InvCompleted(s));
    }
    v
}

fn apply_new(t: &mut TaskStags, e: Event) -> ProtoResult<Vec<u32>> {
    match e {
        Event::Advertise => t.advertise().map(|()| Vec::new()),
        Event::Response(x) => t.on_response(x).map(|l| l.as_slice().to_vec()),
        Event::InvPosted(s) => t.local_invalidate_posted(s).map(|()| Vec::new()),
        Event::InvCompleted(s) => t.local_invalidate_completed(s).map(|()| Vec::new()),
    }
}

fn apply_model(t: &mut ModelStags, e: Event) -> ProtoResult<Vec<u32>> {
    match e {
        Event::Advertise => t.advertise().map(|()| Vec::new()),
        Event::Response(x) => t.on_response(x),
        Event::InvPosted(s) => t.local_invalidate_posted(s).map(|()| Vec::new()),
        Event::InvCompleted(s) => t.local_invalidate_completed(s).map(|()| Vec::new()),
    }
}

/// `settles_remotely` against the model's `on_response`: when it names an
/// STag, a SendInvSE naming it is accepted with nothing left to invalidate
/// and the task completable, one naming any other STag is refused, and a
/// response after it is a second one.
fn fast_settle_agrees(t: &TaskStags, m: &ModelStags, path: &[Event]) {
    let Some(r) = t.settles_remotely() else {
        // Not offered: the model's response would not complete it at once
        // by a SendInvSE of the Read STag alone, or the task has more.
        return;
    };
    let mut once = *m;
    assert_eq!(once.on_response(Some(r)), Ok(Vec::new()), "{path:?}");
    assert!(once.completable(), "{path:?}");
    assert!(once.no_live_stags(), "{path:?}");
    for again in [None, Some(r)] {
        assert_eq!(
            once.on_response(again),
            Err(ProtoError::TaskState),
            "{path:?}"
        );
    }
    for other in STAGS.into_iter().filter(|&s| s != r) {
        let mut m2 = *m;
        assert!(
            m2.on_response(Some(other)).is_err(),
            "{other:#x} after {path:?}"
        );
    }
}

fn same_state(t: &TaskStags, m: &ModelStags, path: &[Event]) {
    assert_eq!(t.read(), m.read(), "read after {path:?}");
    assert_eq!(t.write(), m.write(), "write after {path:?}");
    assert_eq!(t.response_received(), m.response_received(), "{path:?}");
    assert_eq!(t.completable(), m.completable(), "{path:?}");
    assert_eq!(t.no_live_stags(), m.no_live_stags(), "{path:?}");
    assert_eq!(
        t.stags_to_invalidate_locally().as_slice(),
        m.stags_to_invalidate_locally().as_slice(),
        "{path:?}"
    );
    fast_settle_agrees(t, m, path);
}

/// Sequences walked, the longest accepted one, and the states where
/// `settles_remotely` offered an STag.
#[derive(Default)]
struct Walked {
    count: u64,
    deepest: usize,
    settles: u64,
}

fn walk(t: TaskStags, m: ModelStags, evs: &[Event], path: &mut Vec<Event>, w: &mut Walked) {
    w.count += 1;
    w.deepest = w.deepest.max(path.len());
    w.settles += u64::from(t.settles_remotely().is_some());
    if path.len() as u32 == DEPTH {
        return;
    }
    for &e in evs {
        let (mut t2, mut m2) = (t, m);
        let a = apply_new(&mut t2, e);
        let b = apply_model(&mut m2, e);
        path.push(e);
        assert_eq!(a, b, "result of {path:?}");
        same_state(&t2, &m2, path);
        if a.is_err() {
            // Refused, the state is unchanged: the sequences that go on
            // from here are those from its parent, already walked.
            assert_eq!(t2, t, "a refused event changed the state: {path:?}");
        } else {
            walk(t2, m2, evs, path, w);
        }
        path.pop();
    }
}

#[test]
fn packed_task_stags_equal_the_model_exhaustively() {
    let evs = events();
    let shapes = [None, Some(R), Some(W)];
    let mut w = Walked::default();
    for read in shapes {
        for write in shapes {
            for rinv in [false, true] {
                let t = TaskStags::new(read, write, rinv);
                let m = ModelStags::new(read, write, rinv);
                assert_eq!(t.as_ref().err(), m.as_ref().err(), "{read:?} {write:?}");
                let (Ok(t), Ok(m)) = (t, m) else {
                    assert_eq!(read, write);
                    continue;
                };
                same_state(&t, &m, &[]);
                walk(t, m, &evs, &mut Vec::new(), &mut w);
            }
        }
    }
    eprintln!(
        "      task_stags model: {} accepted event sequences compared, the longest {} events, {} offering a fast settle",
        w.count, w.deepest, w.settles
    );
    assert!(w.settles > 0, "no state offered a fast settle");
    // Six accepted events are a bidirectional command's whole life without
    // remote invalidation: the walk reached it.
    assert!(w.deepest >= 6, "longest accepted sequence {}", w.deepest);
}
