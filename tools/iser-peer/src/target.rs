//! The iSER target: connections, login, full feature phase, the RAM LUN's
//! data movement, and the probing and hostile behaviours. Safe Rust over
//! [`crate::verbs`].

use crate::config::{Config, DataAck, HelloAnswer, Mode, PrivateData, StealHow};
use crate::scsi::{self, Action};
use crate::sys::{ibv_wc_status, rdma_cm_event_type as Ev};
use crate::text::{pairs, parse_number, TextWriter};
use crate::verbs::{CmEvent, DmaBuf, Endpoint, IdKey, Local, Mr, Wc};
use iser_proto::cm_private::{ISER_SEND_W_INV_NOT_SUP, ISER_ZBVA_NOT_SUP};
use iser_proto::iser_hdr::{
    Hello, HelloReply, IserHeader, StagVa, ISER_HDR_LEN, ISER_HELLO, ISER_OPCODE_MASK,
    ISER_PROTOCOL_VERSION, ISER_RSV, ISER_VER, ISER_WSV,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

const BHS: usize = 48;
const HDRS: usize = ISER_HDR_LEN + BHS;
/// Receive buffers we post, and their size (iSER headers + our declared
/// TargetRecvDataSegmentLength, with slack to see oversized PDUs).
const NRECV: u32 = 256;
const SEND_SLOTS: u32 = 1024;
const SEND_SLOT: usize = 9216;
const SEND_WR: u32 = 2048;
const SCRATCH_SLOTS: u32 = 128;
const SCRATCH_SLOT: usize = 4096;
/// CmdSN window granted to the initiator.
const WINDOW: u32 = 64;
/// NOP-Ins the RNR mode fires at once.
const RNR_BURST: u32 = 600;
/// The STag of `--hello-reply probe`: MR index 0xabcd, key 0. Before its
/// login an initiator has advertised no STag at all, so whatever this
/// names, the access is one it never granted.
const NEVER_ADVERTISED: u32 = 0x00ab_cd00;

/// Arms a probe at once: an RDMA Write of 512 bytes through `sv`, as if it
/// were a Read STag, on connection `c` (counted as probes_*).
fn write_probe_now(c: &mut Conn, sv: StagVa) {
    c.timers.push((
        Instant::now(),
        Timer::Probe {
            read: Some(sv),
            write: None,
            plan: ProbePlan {
                on: Dir::Read,
                rdma_write: true,
            },
        },
    ));
}

// wr_id kinds (top byte).
const K_RECV: u64 = 1;
const K_SEND: u64 = 2;
const K_WRITE: u64 = 3;
const K_READ: u64 = 4;
const K_ZREAD: u64 = 5;
const K_PROBE: u64 = 6;
const K_LATE: u64 = 7;
/// The SCSI Response of `--steal-how send-inv` (value: its send slot).
const K_STEAL: u64 = 8;
/// The Send of a refused Logout's response (mode LogoutRefused): its
/// completion disconnects.
const K_BYE: u64 = 9;
/// How many stalled commands `stall` remembers, so as not to stall the
/// initiator's retry of one of them again.
const STALLED_KEYS: usize = 1024;

fn wr(kind: u64, v: u64) -> u64 {
    kind << 56 | (v & 0x00ff_ffff_ffff_ffff)
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Counters printed at exit and written to the stats file.
#[derive(Default, Debug)]
pub struct Counters {
    pub connections: u64,
    pub logins: u64,
    pub login_failures: u64,
    pub login_stays: u64,
    pub discovery_logins: u64,
    pub commands: u64,
    pub data_commands: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub send_inv: u64,
    pub data_acks: u64,
    pub probes_access_error: u64,
    pub probes_succeeded: u64,
    pub probes_other_error: u64,
    pub mode_events: u64,
    pub late_access_error: u64,
    pub late_succeeded: u64,
    pub tmfs: u64,
    pub aborts: u64,
    pub tmf_races: u64,
    /// TMF Responses sent a second time (mode DupTmf).
    pub dup_tmf_responses: u64,
    pub steal_inv_completed: u64,
    pub steal_inv_error: u64,
    pub nop_outs: u64,
    pub logouts: u64,
    pub completion_errors: u64,
    pub protocol_errors: u64,
    pub disconnects_by_peer: u64,
    pub disconnects_by_initiator: u64,
    pub hellos: u64,
    pub hello_replies: u64,
    /// SCSI Responses sent for a command not received (modes EarlyRsp,
    /// EarlyInv).
    pub early_rsps: u64,
    /// Of those, sent with a Send with Invalidate naming the next key
    /// (mode EarlyInv).
    pub early_inv_rsps: u64,
    /// Early responses of mode EarlyInv sent without one: no STag of the
    /// next task was seen on the connection, so no key to predict.
    pub early_inv_unknown: u64,
    /// Commands whose STag was the one predicted from the last STag seen
    /// for their task index on the connection (`next_key`), and those
    /// whose STag was another: mode EarlyInv's prediction checked on every
    /// command that follows another on its task.
    pub next_key_hits: u64,
    pub next_key_misses: u64,
}

impl Counters {
    pub fn render(&self) -> String {
        let s = format!("{self:?}");
        // "Counters { a: 1, b: 2 }" -> "a=1\nb=2\n"
        let inner = s.trim_start_matches("Counters {").trim_end_matches('}');
        inner
            .split(',')
            .map(|kv| kv.trim().replacen(": ", "=", 1))
            .filter(|l| !l.is_empty())
            .map(|l| l + "\n")
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Read,
    Write,
    None,
}

/// Which access the next probe tries, on which kind of command.
#[derive(Clone, Copy, Debug)]
struct ProbePlan {
    on: Dir,
    rdma_write: bool,
}

const PROBES: [ProbePlan; 4] = [
    ProbePlan {
        on: Dir::Read,
        rdma_write: true,
    },
    ProbePlan {
        on: Dir::Read,
        rdma_write: false,
    },
    ProbePlan {
        on: Dir::Write,
        rdma_write: false,
    },
    ProbePlan {
        on: Dir::Write,
        rdma_write: true,
    },
];

struct Task {
    itt: u32,
    dir: Dir,
    read: Option<StagVa>,
    write: Option<StagVa>,
    edtl: u32,
    /// Data-In still to be acknowledged by zero-length Reads.
    acks_pending: u32,
    reads_pending: u32,
    status: u8,
    sense: Vec<u8>,
    residual: Option<(bool, u32)>,
    hostile: Option<Mode>,
    probe: Option<ProbePlan>,
    stalled: bool,
    /// `--steal-how send-inv`: the status invalidates this STag (another
    /// target's) instead of the command's own.
    steal_inv: Option<u32>,
}

impl Task {
    fn stag(&self) -> Option<u32> {
        self.read.or(self.write).map(|s| s.stag)
    }
}

#[derive(PartialEq, Eq)]
enum Phase {
    Login,
    Ffp,
}

enum Timer {
    Probe {
        read: Option<StagVa>,
        write: Option<StagVa>,
        plan: ProbePlan,
    },
    /// Modes `early-rsp` and `early-inv`: a SCSI Response (GOOD) for this
    /// ITT (as read big-endian off the wire), whose command we have not
    /// received; `inv`: sent as a Send with Invalidate of that STag
    /// (`early-inv`: the next key of the task's MR).
    EarlyRsp { itt: u32, inv: Option<u32> },
}

/// The task index of an ITT as read big-endian off the wire (see
/// [`next_task_itt`]): the bits below the session age.
fn task_index(itt: u32) -> u32 {
    u32::from_le_bytes(itt.to_be_bytes()) & ((1 << 28) - 1)
}

/// The STag an initiator's next fast registration of the MR of `stag` makes
/// (`ib_inc_rkey`): the key byte, the low 8 bits, plus one.
fn next_key(stag: u32) -> u32 {
    (stag & !0xff) | (stag.wrapping_add(1) & 0xff)
}

/// The ITT of the task libiscsi hands out after the one with `itt` (as
/// read big-endian off the wire) when one command is out at a time: its
/// session's task pool is a FIFO filled in index order, and libiscsi
/// writes the ITT (task index, session age from bit 28) in the host's
/// byte order, little-endian on the guests we test.
fn next_task_itt(itt: u32) -> u32 {
    const AGE_SHIFT: u32 = 28;
    let raw = u32::from_le_bytes(itt.to_be_bytes());
    let age = raw & !((1 << AGE_SHIFT) - 1);
    let index = (raw & ((1 << AGE_SHIFT) - 1)).wrapping_add(1);
    u32::from_be_bytes((age | index).to_le_bytes())
}

/// Shared peer state (all connections).
pub struct Peer {
    pub cfg: Config,
    pub lun: Rc<DmaBuf>,
    pub c: Counters,
    pub conns: HashMap<IdKey, Conn>,
    /// How many more fitting data commands the mode fires on.
    armed: u64,
    /// (is a READ, byte offset, length) of commands `stall` stalled, until
    /// the initiator retries them (that retry is not stalled again).
    stalled_keys: VecDeque<(bool, u64, u64)>,
    /// `--steal-how send-inv`: the STag our next data command's status
    /// invalidates.
    steal_inv: Option<u32>,
    next_probe: usize,
    normal_conns: u64,
    next_tsih: u16,
    pub dirty: bool,
}

pub struct Conn {
    // Field order = drop order: MRs before the endpoint's PD.
    recv: Mr,
    send: Mr,
    scratch: Mr,
    lun: Mr,
    big: Option<Mr>,
    ep: Endpoint,
    send_free: Vec<u32>,
    /// Next scratch slot (round robin: a slot is reused only after 127
    /// other control Data-Ins, long after its unsignaled Write executed).
    scratch_next: u32,
    remote_inv: bool,
    phase: Phase,
    discovery: bool,
    rdma_offered: bool,
    index: u64,
    irdsl: u32,
    erl: u8,
    max_burst: u32,
    stat_sn: u32,
    exp_cmd_sn: u32,
    tasks: BTreeMap<u32, Task>,
    /// The STag (read, else write) of the last command seen for each task
    /// index on this connection (mode EarlyInv predicts the next key).
    last_stags: HashMap<u32, u32>,
    timers: Vec<(Instant, Timer)>,
    closing: bool,
    probe_armed_after: Option<u64>,
    data_cmds: u64,
    /// Requests to go to full feature phase answered with T=0.
    login_stays: u32,
    /// Sends received on this connection (an iSER Hello must be the first).
    sends_received: u64,
    /// Our ORD (the RDMA Reads we may have outstanding), for the HelloReply.
    ord: u8,
    name: String,
}

fn log(msg: &str) {
    eprintln!("iser-peer: {msg}");
}

impl Peer {
    pub fn new(cfg: Config) -> std::io::Result<Peer> {
        let lun = DmaBuf::new((cfg.lun_mb << 20) as usize)?;
        Ok(Peer {
            cfg,
            lun,
            c: Counters::default(),
            conns: HashMap::new(),
            armed: 0,
            stalled_keys: VecDeque::new(),
            steal_inv: None,
            next_probe: 0,
            normal_conns: 0,
            next_tsih: 1,
            dirty: true,
        })
    }

    /// Arms the mode: it fires on the next data command that fits
    /// (SIGUSR1; `--at`/`--every` arm it by command count).
    pub fn arm(&mut self) {
        if let Some(f) = self.cfg.steal_stags.clone() {
            return self.steal(&f);
        }
        log(&format!("mode {:?} armed by signal", self.cfg.mode));
        self.armed = self.cfg.burst;
    }

    /// SIGUSR2: an RDMA Write of 512 bytes through the Read STag of every
    /// stalled READ, on its own connection (counted as probes_*): shows
    /// whether something else (another target's Send with Invalidate)
    /// invalidated that STag while the command is still open.
    ///
    /// Probes waiting for their `--probe-delay-ms` (after a TMF with
    /// `--abort-probe`, or after a status) are made due now and counted in
    /// `n`: a test reads the initiator's counters first, then signals, so
    /// the probe that breaks the connection cannot race that read.
    pub fn probe_now(&mut self) {
        let mut n = 0;
        let now = Instant::now();
        for c in self.conns.values_mut() {
            for (due, _) in c
                .timers
                .iter_mut()
                .filter(|(_, t)| matches!(t, Timer::Probe { .. }))
            {
                if *due > now {
                    *due = now;
                    log(&format!(
                        "{}: SIGUSR2: a waiting probe made due now",
                        c.name
                    ));
                    n += 1;
                }
            }
            let stalled: Vec<StagVa> = c
                .tasks
                .values()
                .filter(|t| t.stalled)
                .filter_map(|t| t.read)
                .collect();
            for sv in stalled {
                log(&format!(
                    "{}: probe of our own stalled READ's Read STag {:#x}",
                    c.name, sv.stag
                ));
                write_probe_now(c, sv);
                n += 1;
            }
        }
        if n == 0 {
            log("SIGUSR2: no stalled READ and no waiting probe");
        }
    }

    /// `--steal-stags`: another target's STag, used from a full-feature
    /// connection of ours: an RDMA Write or Read through it at once, or
    /// (send-inv) a Send with Invalidate naming it as the status of our
    /// next data command.
    fn steal(&mut self, f: &std::path::Path) {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let mut it = text
            .split_whitespace()
            .map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16));
        let (Some(Ok(stag)), Some(Ok(va))) = (it.next(), it.next()) else {
            log(&format!("steal: no STag in {}", f.display()));
            return;
        };
        let sv = StagVa {
            stag: stag as u32,
            va,
        };
        let (read, write, plan) = match self.cfg.steal_how {
            StealHow::SendInv => {
                log(&format!(
                    "steal: the status of our next data command invalidates another target's STag {stag:#x}"
                ));
                self.steal_inv = Some(sv.stag);
                return;
            }
            StealHow::Write => (
                Some(sv),
                None,
                ProbePlan {
                    on: Dir::Read,
                    rdma_write: true,
                },
            ),
            StealHow::Read => (
                None,
                Some(sv),
                ProbePlan {
                    on: Dir::Write,
                    rdma_write: false,
                },
            ),
        };
        let Some(c) = self
            .conns
            .values_mut()
            .find(|c| c.phase == Phase::Ffp && !c.discovery && !c.closing)
        else {
            log("steal: no full-feature connection");
            return;
        };
        log(&format!(
            "{}: steal: RDMA {} through another target's STag {stag:#x} va {va:#x}",
            c.name,
            if plan.rdma_write { "Write" } else { "Read" }
        ));
        c.timers
            .push((Instant::now(), Timer::Probe { read, write, plan }));
    }

    fn blocks(&self) -> u64 {
        self.lun.len() as u64 / scsi::BLOCK
    }

    pub fn cm_event(&mut self, ev: CmEvent) {
        self.dirty = true;
        match ev.kind {
            Ev::RDMA_CM_EVENT_CONNECT_REQUEST => {
                let mut ev = ev;
                let Some(id) = ev.new_id.take() else { return };
                if let Err(e) = self.accept(id, &ev) {
                    log(&format!("accept failed: {e}"));
                }
            }
            Ev::RDMA_CM_EVENT_ESTABLISHED => {
                if let Some(c) = self.conns.get(&ev.id) {
                    log(&format!("{}: established", c.name));
                }
            }
            Ev::RDMA_CM_EVENT_DISCONNECTED => {
                if let Some(mut c) = self.conns.remove(&ev.id) {
                    if !c.closing {
                        self.c.disconnects_by_initiator += 1;
                    }
                    log(&format!(
                        "{}: disconnected ({} tasks open)",
                        c.name,
                        c.tasks.len()
                    ));
                    self.drain(&mut c);
                    c.ep.disconnect();
                }
            }
            Ev::RDMA_CM_EVENT_TIMEWAIT_EXIT => {}
            _ => {
                if let Some(c) = self.conns.remove(&ev.id) {
                    log(&format!(
                        "{}: {} (status {}), dropped",
                        c.name,
                        ev.name(),
                        ev.status
                    ));
                }
            }
        }
    }

    fn accept(&mut self, id: crate::verbs::CmId, ev: &CmEvent) -> std::io::Result<()> {
        self.c.connections += 1;
        let req_flags = ev.private_data.as_ref().and_then(|p| p.first().copied());
        let ep = Endpoint::new(id, SEND_WR, NRECV)?;
        let recv = ep.register(&DmaBuf::new(NRECV as usize * self.recv_slot())?)?;
        let send = ep.register(&DmaBuf::new(SEND_SLOTS as usize * SEND_SLOT)?)?;
        let scratch = ep.register(&DmaBuf::new(SCRATCH_SLOTS as usize * SCRATCH_SLOT)?)?;
        let lun = ep.register(&self.lun)?;
        // Remote invalidation: only if the initiator offered it (its
        // request lacks SEND_W_INV_NOT_SUP) and we announce it.
        let ini_inv = req_flags.is_some_and(|f| f & ISER_SEND_W_INV_NOT_SUP == 0);
        let (pd, remote_inv): (Option<[u8; 4]>, bool) = match self.cfg.private_data {
            PrivateData::None => (None, false),
            PrivateData::Auto if ini_inv && self.cfg.send_inv => {
                ([ISER_ZBVA_NOT_SUP, 0, 0, 0].into(), true)
            }
            PrivateData::Auto => (
                [ISER_ZBVA_NOT_SUP | ISER_SEND_W_INV_NOT_SUP, 0, 0, 0].into(),
                false,
            ),
            PrivateData::Flags(f) => (
                [f, 0, 0, 0].into(),
                ini_inv && f & ISER_SEND_W_INV_NOT_SUP == 0,
            ),
        };
        let name = format!("conn{}", self.c.connections);
        log(&format!(
            "{name}: connect request, private data {:02x?}, ird {} ord {}; accept with {:02x?}, remote invalidation {}",
            ev.private_data.as_deref().map(|p| &p[..p.len().min(4)]),
            ev.responder_resources,
            ev.initiator_depth,
            pd,
            remote_inv
        ));
        // Our RDMA Reads (Data-Out, data-ack, probes) need an ORD of at
        // least 1; the initiator's Reads of us: none expected.
        let ord = ev.responder_resources.clamp(1, 16);
        let ird = ev.initiator_depth.min(16);
        let c = Conn {
            recv,
            send,
            scratch,
            lun,
            big: None,
            ep,
            send_free: (0..SEND_SLOTS).rev().collect(),
            scratch_next: 0,
            remote_inv,
            phase: Phase::Login,
            discovery: false,
            rdma_offered: false,
            index: 0,
            irdsl: 8192,
            erl: 0,
            max_burst: 262_144,
            stat_sn: 1,
            exp_cmd_sn: 0,
            tasks: BTreeMap::new(),
            last_stags: HashMap::new(),
            timers: Vec::new(),
            closing: false,
            probe_armed_after: None,
            data_cmds: 0,
            login_stays: 0,
            sends_received: 0,
            ord,
            name,
        };
        let slot = self.recv_slot();
        for i in 0..NRECV {
            c.ep.post_recv(
                wr(K_RECV, i as u64),
                Local {
                    mr: &c.recv,
                    off: i as usize * slot,
                    len: slot,
                },
            )?;
        }
        let rnr = if self.cfg.mode == Mode::Rnr { 1 } else { 7 };
        c.ep.accept(pd.as_ref().map(|p| &p[..]), ird, ord, rnr)?;
        self.conns.insert(c.ep.key(), c);
        Ok(())
    }

    /// The completions a connection's CQ still holds when it goes away:
    /// those of probes and stolen-STag Sends are counted (an iWARP peer
    /// that sent a TERMINATE disconnects before we polled them); nothing
    /// else is acted on.
    fn drain(&mut self, c: &mut Conn) {
        c.closing = true;
        let mut wcs = Vec::new();
        c.ep.poll(&mut wcs);
        for w in &wcs {
            self.dirty = true;
            let kind = w.wr_id >> 56;
            if matches!(kind, K_PROBE | K_LATE | K_STEAL) {
                // Err only says the connection ends: it already has.
                let _ = self.completion(c, w);
            }
        }
    }

    fn recv_slot(&self) -> usize {
        HDRS + self.cfg.trdsl as usize + 512
    }

    /// Polls every connection's CQ and runs due timers.
    pub fn poll_all(&mut self) {
        let keys: Vec<IdKey> = self.conns.keys().copied().collect();
        let mut wcs = Vec::new();
        for k in keys {
            wcs.clear();
            let Some(mut c) = self.conns.remove(&k) else {
                continue;
            };
            c.ep.poll(&mut wcs);
            for w in &wcs {
                self.dirty = true;
                if let Err(e) = self.completion(&mut c, w) {
                    self.fail(&mut c, &e);
                }
            }
            let now = Instant::now();
            let due: Vec<Timer> = {
                let (d, keep): (Vec<_>, Vec<_>) = c.timers.drain(..).partition(|(t, _)| *t <= now);
                c.timers = keep;
                d.into_iter().map(|(_, t)| t).collect()
            };
            for t in due {
                if let Err(e) = self.timer(&mut c, t) {
                    self.fail(&mut c, &e);
                }
            }
            self.conns.insert(k, c);
        }
    }

    pub fn fds(&self) -> Vec<i32> {
        self.conns.values().map(|c| c.ep.comp_fd()).collect()
    }

    fn fail(&mut self, c: &mut Conn, e: &str) {
        if !c.closing {
            log(&format!("{}: {e}; disconnecting", c.name));
            self.c.disconnects_by_peer += 1;
            c.closing = true;
            c.ep.disconnect();
        }
    }

    fn completion(&mut self, c: &mut Conn, w: &Wc) -> Result<(), String> {
        let kind = w.wr_id >> 56;
        let val = w.wr_id & 0x00ff_ffff_ffff_ffff;
        if kind == K_PROBE || kind == K_LATE {
            let what = if kind == K_PROBE {
                "probe"
            } else {
                "data after status"
            };
            if w.ok {
                if kind == K_PROBE {
                    self.c.probes_succeeded += 1;
                } else {
                    self.c.late_succeeded += 1;
                }
                log(&format!(
                    "{}: {what} with STag {val:#x} SUCCEEDED: the STag was still valid",
                    c.name
                ));
                if kind == K_PROBE && self.next_probe < self.cfg.probe as usize {
                    c.probe_armed_after = Some(c.data_cmds + 8);
                }
                return Ok(());
            }
            let access = matches!(w.status, ibv_wc_status::IBV_WC_REM_ACCESS_ERR);
            match (kind == K_PROBE, access) {
                (true, true) => self.c.probes_access_error += 1,
                (true, false) => self.c.probes_other_error += 1,
                (false, true) => self.c.late_access_error += 1,
                (false, false) => {}
            }
            log(&format!(
                "{}: {what} with STag {val:#x} failed: {}",
                c.name,
                w.status_str()
            ));
            if self.cfg.stay_on_error {
                // Both QPs are in error now (the initiator's answered a
                // refused access with a NAK and moved to error; rxe tells
                // its owner by flushes only): no disconnect from us.
                log(&format!("{}: staying connected (--stay-on-error)", c.name));
                return Ok(());
            }
            return Err(format!("{what} ended the connection"));
        }
        if kind == K_BYE {
            if let Ok(slot) = u32::try_from(val) {
                c.send_free.push(slot);
            }
            // Sent (or not): the connection is dropped, as a target that
            // gives up on it after refusing the Logout.
            log(&format!(
                "{}: mode LogoutRefused: response Send {}, disconnecting",
                c.name,
                if w.ok { "completed" } else { "failed" }
            ));
            c.closing = true;
            self.c.disconnects_by_peer += 1;
            c.ep.disconnect();
            return Ok(());
        }
        if kind == K_STEAL {
            if let Ok(slot) = u32::try_from(val) {
                c.send_free.push(slot);
            }
            if w.ok {
                self.c.steal_inv_completed += 1;
                log(&format!(
                    "{}: Send with Invalidate of another target's STag completed at our side",
                    c.name
                ));
                return Ok(());
            }
            self.c.steal_inv_error += 1;
            log(&format!(
                "{}: Send with Invalidate of another target's STag failed: {}",
                c.name,
                w.status_str()
            ));
            return Err("the Send with Invalidate ended the connection".into());
        }
        if !w.ok {
            if c.closing || w.status == ibv_wc_status::IBV_WC_WR_FLUSH_ERR {
                return Ok(());
            }
            self.c.completion_errors += 1;
            return Err(format!(
                "completion error kind {kind} val {val:#x}: {}",
                w.status_str()
            ));
        }
        match kind {
            K_RECV => {
                let slot = self.recv_slot();
                let off = val as usize * slot;
                let msg = c
                    .recv
                    .buf
                    .to_vec(off, w.byte_len as usize)
                    .ok_or("recv length")?;
                let r = self.pdu(c, &msg);
                if !c.closing {
                    c.ep.post_recv(
                        w.wr_id,
                        Local {
                            mr: &c.recv,
                            off,
                            len: slot,
                        },
                    )
                    .map_err(|e| format!("post_recv: {e}"))?;
                }
                r
            }
            K_SEND => {
                if let Ok(slot) = u32::try_from(val) {
                    c.send_free.push(slot);
                }
                Ok(())
            }
            K_READ => {
                let itt = val as u32;
                let Some(t) = c.tasks.get_mut(&itt) else {
                    return Ok(());
                };
                t.reads_pending -= 1;
                if t.reads_pending == 0 && !t.stalled {
                    self.finish(c, itt)?;
                }
                Ok(())
            }
            K_ZREAD => {
                self.c.data_acks += 1;
                let itt = val as u32;
                let Some(t) = c.tasks.get_mut(&itt) else {
                    return Ok(());
                };
                t.acks_pending -= 1;
                if t.acks_pending == 0 && !t.stalled {
                    self.finish(c, itt)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn timer(&mut self, c: &mut Conn, t: Timer) -> Result<(), String> {
        match t {
            Timer::EarlyRsp { itt, inv } => {
                log(&format!(
                    "{}: mode {:?}: status GOOD for ITT {itt:#x}, a command not received{}",
                    c.name,
                    self.cfg.mode,
                    inv.map(|k| format!(", with Send with Invalidate of STag {k:#x}"))
                        .unwrap_or_default()
                ));
                self.c.early_rsps += 1;
                if inv.is_some() {
                    self.c.early_inv_rsps += 1;
                }
                let mut r = c.bhs(0x21, 0x80);
                r[16..20].copy_from_slice(&itt.to_be_bytes());
                c.status_fields(&mut r, true);
                self.send(c, &r, &[], inv, ISER_VER)
            }
            Timer::Probe { read, write, plan } => {
                let sv = if plan.on == Dir::Read { read } else { write };
                let Some(sv) = sv else { return Ok(()) };
                log(&format!(
                    "{}: probe: RDMA {} with STag {:#x} va {:#x} of a completed or released {:?} command",
                    c.name,
                    if plan.rdma_write { "Write" } else { "Read" },
                    sv.stag,
                    sv.va,
                    plan.on
                ));
                let l = Local {
                    mr: &c.scratch,
                    off: 0,
                    len: 512,
                };
                let id = wr(K_PROBE, sv.stag as u64);
                let r = if plan.rdma_write {
                    c.ep.rdma_write(id, l, sv.va, sv.stag, true)
                } else {
                    c.ep.rdma_read(id, Some(l), sv.va, sv.stag)
                };
                r.map_err(|e| format!("post probe: {e}"))
            }
        }
    }

    /// One received Send: iSER header + iSCSI PDU.
    fn pdu(&mut self, c: &mut Conn, msg: &[u8]) -> Result<(), String> {
        if c.closing {
            return Ok(());
        }
        c.sends_received += 1;
        if msg
            .first()
            .is_some_and(|f| f & ISER_OPCODE_MASK == ISER_HELLO)
        {
            return self.hello(c, msg);
        }
        if msg.len() < HDRS {
            self.c.protocol_errors += 1;
            return Err(format!("short Send of {} bytes", msg.len()));
        }
        let ih = IserHeader::decode(msg).map_err(|e| {
            self.c.protocol_errors += 1;
            format!("bad iSER header: {e:?}")
        })?;
        let bhs = &msg[ISER_HDR_LEN..HDRS];
        let dsl = be32(bhs, 4) & 0x00ff_ffff;
        let ahs = bhs[4] as usize * 4;
        let data = msg
            .get(HDRS + ahs..HDRS + ahs + dsl as usize)
            .ok_or_else(|| {
                self.c.protocol_errors += 1;
                format!("data segment {dsl} beyond the Send ({} bytes)", msg.len())
            })?;
        let op = bhs[0] & 0x3f;
        let immediate = bhs[0] & 0x40 != 0;
        if c.phase == Phase::Ffp && !immediate && matches!(op, 0x01 | 0x02 | 0x04 | 0x06) {
            c.exp_cmd_sn = be32(bhs, 24).wrapping_add(1);
        }
        match op {
            0x03 => self.login(c, bhs, data),
            0x01 => self.command(c, &ih, bhs, data),
            0x00 => {
                self.c.nop_outs += 1;
                let itt = be32(bhs, 16);
                if itt != 0xffff_ffff {
                    let mut r = c.bhs(0x20, 0x80);
                    r[8..16].copy_from_slice(&bhs[8..16]);
                    r[16..20].copy_from_slice(&bhs[16..20]);
                    r[20..24].copy_from_slice(&[0xff; 4]);
                    c.status_fields(&mut r, true);
                    self.send(c, &r, data, None, ISER_VER)?;
                }
                Ok(())
            }
            0x02 => self.tmf(c, bhs),
            0x04 => self.text(c, bhs, data),
            0x06 => {
                self.c.logouts += 1;
                let mut r = c.bhs(0x26, 0x80);
                r[16..20].copy_from_slice(&bhs[16..20]);
                c.status_fields(&mut r, true);
                if self.cfg.mode != Mode::LogoutRefused || c.discovery {
                    return self.send(c, &r, &[], None, ISER_VER);
                }
                // Refused: "cleanup failed" (RFC 7143 §11.15.1); the
                // connection is dropped once the response's Send completed
                // (`K_BYE`: a disconnect right after the post would flush
                // the Send unsent).
                r[2] = 3;
                self.c.mode_events += 1;
                log(&format!(
                    "{}: mode LogoutRefused: Logout answered \"cleanup failed\"",
                    c.name
                ));
                self.send_kind(c, &r, &[], None, ISER_VER, K_BYE)
            }
            0x05 => {
                // Unsolicited Data-Out (we negotiate InitialR2T=Yes, so only
                // immediate data is expected): copy it anyway.
                Ok(())
            }
            _ => {
                self.c.protocol_errors += 1;
                Err(format!("unexpected opcode {op:#x}"))
            }
        }
    }

    /// An iSER Hello (iSER §5.1.3, §9.3): only as the initiator's first
    /// message; answered as `--hello-reply` says, encoded by the protocol
    /// core that the module decodes it with.
    fn hello(&mut self, c: &mut Conn, msg: &[u8]) -> Result<(), String> {
        if c.sends_received != 1 {
            self.c.protocol_errors += 1;
            return Err("iSER Hello after the first message".into());
        }
        let h = Hello::decode(msg).map_err(|e| {
            self.c.protocol_errors += 1;
            format!("bad iSER Hello: {e:?}")
        })?;
        self.c.hellos += 1;
        let mut r = HelloReply::for_hello(
            &h,
            ISER_PROTOCOL_VERSION,
            ISER_PROTOCOL_VERSION,
            u16::from(c.ord),
        );
        match self.cfg.hello_reply {
            HelloAnswer::Ok => {}
            HelloAnswer::BadVersion => {
                r.max_ver = 2;
                r.cur_ver = 2;
            }
            HelloAnswer::OrdZero => r.ord = 0,
            HelloAnswer::Reject => r.reject = true,
            HelloAnswer::Ignore => {
                log(&format!(
                    "{}: iSER Hello {h:?} not answered (--hello-reply ignore)",
                    c.name
                ));
                return Ok(());
            }
            HelloAnswer::Probe => {
                log(&format!(
                    "{}: iSER Hello {h:?} not answered: a probe through STag {NEVER_ADVERTISED:#x} instead (--hello-reply probe)",
                    c.name
                ));
                let sv = StagVa {
                    stag: NEVER_ADVERTISED,
                    va: 0,
                };
                write_probe_now(c, sv);
                return Ok(());
            }
        }
        log(&format!("{}: iSER Hello {h:?}, answered {r:?}", c.name));
        let mut b = [0u8; ISER_HDR_LEN];
        r.encode(&mut b);
        self.c.hello_replies += 1;
        self.send_raw(c, &b, None)
    }

    fn login(&mut self, c: &mut Conn, bhs: &[u8], data: &[u8]) -> Result<(), String> {
        let transit = bhs[1] & 0x80 != 0;
        let csg = (bhs[1] >> 2) & 3;
        let nsg = bhs[1] & 3;
        c.exp_cmd_sn = be32(bhs, 24);
        let exp_stat = be32(bhs, 28);
        if exp_stat != 0 {
            c.stat_sn = exp_stat;
        }
        let mut out = vec![0u8; 8192];
        let mut w = TextWriter::new(&mut out);
        let mut reject: Option<(u8, u8)> = None;
        let mut rdma_offered = c.rdma_offered;
        let mut mrdsl: Option<u32> = None;
        let mut irdsl: Option<u32> = None;
        let mut digest_sent = false;
        for kv in pairs(data) {
            let (k, v) = kv.map_err(|e| format!("login key syntax: {e:?}"))?;
            let key = String::from_utf8_lossy(k).into_owned();
            let val = String::from_utf8_lossy(v).into_owned();
            let num = parse_number(v);
            let r: Option<String> = match key.as_str() {
                "InitiatorName" | "InitiatorAlias" => None,
                "SessionType" => {
                    c.discovery = val == "Discovery";
                    None
                }
                "TargetName" => {
                    if val != self.cfg.iqn {
                        reject = Some((2, 3));
                    }
                    None
                }
                "AuthMethod" => {
                    if val.split(',').any(|m| m == "None") {
                        Some("None".into())
                    } else {
                        reject = Some((2, 1));
                        Some("Reject".into())
                    }
                }
                "HeaderDigest" if self.cfg.mode == Mode::LoginDigest && !c.discovery => {
                    digest_sent = true;
                    Some("CRC32C".into())
                }
                "HeaderDigest" | "DataDigest" => Some("None".into()),
                "MaxConnections" | "MaxOutstandingR2T" => Some("1".into()),
                "InitialR2T" | "DataPDUInOrder" | "DataSequenceInOrder" => Some("Yes".into()),
                "ImmediateData" | "IFMarker" | "OFMarker" => Some(val.clone()),
                "MaxBurstLength" => {
                    c.max_burst = num.unwrap_or(262_144).min(262_144);
                    Some(c.max_burst.to_string())
                }
                "FirstBurstLength" => Some(num.unwrap_or(65536).min(65536).to_string()),
                "DefaultTime2Wait" | "DefaultTime2Retain" => Some(val.clone()),
                "ErrorRecoveryLevel" => {
                    c.erl = num.unwrap_or(0).min(self.cfg.erl as u32) as u8;
                    Some(c.erl.to_string())
                }
                "MaxRecvDataSegmentLength" => {
                    mrdsl = num;
                    Some(self.cfg.trdsl.to_string())
                }
                "RDMAExtensions" => {
                    rdma_offered = true;
                    Some(
                        if self.cfg.mode == Mode::LoginNoRdma && !c.discovery {
                            "No"
                        } else {
                            "Yes"
                        }
                        .into(),
                    )
                }
                "InitiatorRecvDataSegmentLength" => {
                    irdsl = Some(num.unwrap_or(8192).min((1 << 24) - 1));
                    irdsl.map(|v| v.to_string())
                }
                "TargetRecvDataSegmentLength" => {
                    Some(num.unwrap_or(8192).min(self.cfg.trdsl).to_string())
                }
                "MaxOutstandingUnexpectedPDUs" => Some("0".into()),
                _ => Some("NotUnderstood".into()),
            };
            if let Some(r) = r {
                w.push(k, r.as_bytes())
                    .map_err(|e| format!("login answer: {e:?}"))?;
            }
        }
        if csg == 0 {
            let _ = w.push(b"TargetPortalGroupTag", b"1");
        }
        // iscsid offers no digest keys on an iSER connection (iSER §6.1:
        // digests are not used); the hostile target declares one anyway.
        if self.cfg.mode == Mode::LoginDigest && csg == 1 && !c.discovery && !digest_sent {
            w.push(b"HeaderDigest", b"CRC32C")
                .map_err(|e| format!("login answer: {e:?}"))?;
        }
        // iSER §6.5: with RDMAExtensions the initiator's receive limit is
        // InitiatorRecvDataSegmentLength (default 8192), not MRDSL.
        c.rdma_offered = rdma_offered;
        if !c.discovery && !data.is_empty() {
            let keys: Vec<String> = pairs(data)
                .flatten()
                .map(|(k, v)| {
                    format!(
                        "{}={}",
                        String::from_utf8_lossy(k),
                        String::from_utf8_lossy(v)
                    )
                })
                .collect();
            log(&format!(
                "{}: login keys (stage {csg}): {}",
                c.name,
                keys.join(" ")
            ));
        }
        if rdma_offered || irdsl.is_some() {
            c.irdsl = irdsl.unwrap_or(8192);
        } else if let Some(m) = mrdsl {
            c.irdsl = m;
        }
        let n = w.len();
        out.truncate(n);
        let mut r = c.bhs(0x23, 0);
        let mut ffp = reject.is_none() && transit && nsg == 3;
        // --login-stay: the target may answer T=0 and stay in the stage
        // (RFC 7143 §11.13.1); the initiator asks again.
        let stay = ffp && c.login_stays < self.cfg.login_stay;
        if stay {
            ffp = false;
            c.login_stays += 1;
            self.c.login_stays += 1;
            log(&format!(
                "{}: login: staying in stage {csg} (T=0), {} of {}",
                c.name, c.login_stays, self.cfg.login_stay
            ));
        }
        r[1] = if reject.is_some() {
            0
        } else if stay {
            csg << 2
        } else {
            (bhs[1] & 0x80) | (csg << 2) | if transit { nsg } else { 0 }
        };
        r[8..14].copy_from_slice(&bhs[8..14]);
        if ffp {
            let tsih = if bhs[14] == 0 && bhs[15] == 0 {
                self.next_tsih = self.next_tsih.wrapping_add(1).max(1);
                self.next_tsih
            } else {
                u16::from_be_bytes([bhs[14], bhs[15]])
            };
            r[14..16].copy_from_slice(&tsih.to_be_bytes());
        }
        r[16..20].copy_from_slice(&bhs[16..20]);
        c.status_fields(&mut r, true);
        if let Some((class, detail)) = reject {
            r[36] = class;
            r[37] = detail;
            self.c.login_failures += 1;
            log(&format!(
                "{}: login rejected {class:#x}/{detail:#x}",
                c.name
            ));
            return self.send(c, &r, &[], None, ISER_VER);
        }
        if matches!(self.cfg.mode, Mode::LoginDigest | Mode::LoginNoRdma)
            && csg == 1
            && !c.discovery
        {
            self.c.mode_events += 1;
            log(&format!(
                "{}: mode {:?}: login response breaks the key rules",
                c.name, self.cfg.mode
            ));
        }
        self.send(c, &r, &out, None, ISER_VER)?;
        if ffp {
            c.phase = Phase::Ffp;
            if c.discovery {
                self.c.discovery_logins += 1;
            } else {
                self.c.logins += 1;
                self.normal_conns += 1;
                c.index = self.normal_conns;
                if self.next_probe < self.cfg.probe as usize {
                    c.probe_armed_after = Some(8);
                }
            }
            log(&format!(
                "{}: full feature phase ({}, ERL {}, IRDSL {}, MaxBurst {})",
                c.name,
                if c.discovery { "discovery" } else { "normal" },
                c.erl,
                c.irdsl,
                c.max_burst
            ));
        }
        Ok(())
    }

    fn text(&mut self, c: &mut Conn, bhs: &[u8], data: &[u8]) -> Result<(), String> {
        let mut out = vec![0u8; 4096];
        let mut w = TextWriter::new(&mut out);
        for (k, v) in pairs(data).flatten() {
            if k == b"SendTargets" && (v == b"All" || v == self.cfg.iqn.as_bytes()) {
                let addr = match self.cfg.addr {
                    std::net::SocketAddr::V4(a) => format!("{}:{},1", a.ip(), a.port()),
                    std::net::SocketAddr::V6(a) => format!("[{}]:{},1", a.ip(), a.port()),
                };
                let _ = w.push(b"TargetName", self.cfg.iqn.as_bytes());
                let _ = w.push(b"TargetAddress", addr.as_bytes());
            }
        }
        let n = w.len();
        out.truncate(n);
        let mut r = c.bhs(0x24, 0x80);
        r[16..20].copy_from_slice(&bhs[16..20]);
        r[20..24].copy_from_slice(&[0xff; 4]);
        c.status_fields(&mut r, true);
        self.send(c, &r, &out, None, ISER_VER)
    }

    fn tmf(&mut self, c: &mut Conn, bhs: &[u8]) -> Result<(), String> {
        self.c.tmfs += 1;
        let func = bhs[1] & 0x7f;
        let rtt = be32(bhs, 20);
        let mut resp = 0u8;
        let mut released: Vec<Task> = Vec::new();
        match func {
            1 if self.cfg.race_tmf && c.tasks.get(&rtt).is_some_and(|t| t.stalled) => {
                self.c.aborts += 1;
                self.c.tmf_races += 1;
                log(&format!(
                    "{}: ABORT TASK {rtt:#x}: SCSI Response first, then Function Complete",
                    c.name
                ));
                self.finish(c, rtt)?;
            }
            1 => {
                self.c.aborts += 1;
                if let Some(t) = c.tasks.remove(&rtt) {
                    log(&format!(
                        "{}: ABORT TASK {:#x} ({:?}, stalled {})",
                        c.name, t.itt, t.dir, t.stalled
                    ));
                    released.push(t);
                } else {
                    log(&format!(
                        "{}: ABORT TASK {rtt:#x}: no such task (answered 'task does not exist')",
                        c.name
                    ));
                    resp = 1; // task does not exist
                }
            }
            5..=7 => {
                log(&format!(
                    "{}: TMF function {func}: dropping {} tasks",
                    c.name,
                    c.tasks.len()
                ));
                released.extend(std::mem::take(&mut c.tasks).into_values());
            }
            _ => resp = 5, // not supported
        }
        let mut r = c.bhs(0x22, 0x80);
        r[2] = resp;
        r[16..20].copy_from_slice(&bhs[16..20]);
        c.status_fields(&mut r, true);
        self.send(c, &r, &[], None, ISER_VER)?;
        if resp == 0 && released.iter().any(|t| t.hostile == Some(Mode::DupTmf)) {
            // The same TMF Response again: it answers no TMF the initiator
            // still has out.
            log(&format!(
                "{}: mode DupTmf: Function Complete of ITT {:#x} again",
                c.name,
                be32(bhs, 16)
            ));
            self.c.dup_tmf_responses += 1;
            let mut r2 = r;
            c.status_fields(&mut r2, true);
            self.send(c, &r2, &[], None, ISER_VER)?;
        }
        if self.cfg.abort_probe {
            // The access each STag was granted for: only that one would
            // succeed on a still-valid STag.
            if let Some(t) = released.iter().find(|t| t.stag().is_some()) {
                let on = if t.read.is_some() {
                    Dir::Read
                } else {
                    Dir::Write
                };
                c.timers.push((
                    Instant::now() + Duration::from_millis(self.cfg.probe_delay_ms),
                    Timer::Probe {
                        read: t.read,
                        write: t.write,
                        plan: ProbePlan {
                            on,
                            rdma_write: on == Dir::Read,
                        },
                    },
                ));
            }
        }
        Ok(())
    }

    /// Does the armed hostile mode fire on this task? `key`: its
    /// direction, offset and length (a retry of a stalled command has the
    /// same).
    fn take_hostile(
        &mut self,
        c: &Conn,
        dir: Dir,
        has_stag: bool,
        key: (bool, u64, u64),
    ) -> Option<Mode> {
        let m = self.cfg.mode;
        if matches!(
            m,
            Mode::Polite | Mode::LoginDigest | Mode::LoginNoRdma | Mode::LogoutRefused
        ) {
            return None;
        }
        if self.cfg.conn.is_some_and(|k| k != c.index) {
            return None;
        }
        if self.armed == 0 {
            return None;
        }
        let fits = match m {
            _ if self.cfg.on_reads.is_some_and(|r| r != (dir == Dir::Read)) => false,
            Mode::StatusFirst | Mode::DataInCtrl => dir == Dir::Read,
            Mode::R2tCtrl => dir == Dir::Write,
            Mode::InvWrong | Mode::InvOther | Mode::InvNone => has_stag,
            _ => true,
        };
        if !fits {
            return None;
        }
        if matches!(m, Mode::Stall | Mode::DupTmf) {
            // The initiator's retry of a command we stalled (after its
            // abort): let it through, or the SCSI layer escalates.
            if let Some(i) = self.stalled_keys.iter().position(|k| *k == key) {
                self.stalled_keys.remove(i);
                return None;
            }
            if self.stalled_keys.len() >= STALLED_KEYS {
                self.stalled_keys.pop_front();
            }
            self.stalled_keys.push_back(key);
        }
        self.armed -= 1;
        self.c.mode_events += 1;
        Some(m)
    }

    fn command(
        &mut self,
        c: &mut Conn,
        ih: &IserHeader,
        bhs: &[u8],
        data: &[u8],
    ) -> Result<(), String> {
        self.c.commands += 1;
        let itt = be32(bhs, 16);
        let edtl = be32(bhs, 20);
        let mut cdb = [0u8; 16];
        cdb.copy_from_slice(&bhs[32..48]);
        let lun = u16::from_be_bytes([bhs[8], bhs[9]]) as u64 & 0x3fff;
        let action = scsi::decide(&cdb, lun, self.blocks());
        let (dir, key) = match action {
            Action::ReadLun(o, l) => (Dir::Read, (true, o, l)),
            Action::WriteLun(o, l) => (Dir::Write, (false, o, l)),
            _ => (Dir::None, (false, 0, 0)),
        };
        if dir != Dir::None {
            self.c.data_commands += 1;
            c.data_cmds += 1;
            let n = self.c.data_commands;
            if (self.cfg.every > 0
                && n >= self.cfg.at
                && (n - self.cfg.at).is_multiple_of(self.cfg.every))
                || n == self.cfg.at
            {
                self.armed = self.cfg.burst;
            }
        }
        let has_stag = ih.read.is_some() || ih.write.is_some();
        let hostile = if dir != Dir::None {
            self.take_hostile(c, dir, has_stag, key)
        } else {
            None
        };
        let probe = match (c.probe_armed_after, dir) {
            (Some(after), d) if d != Dir::None && c.data_cmds >= after => {
                let plan = PROBES[self.next_probe % PROBES.len()];
                let stag_ok = match plan.on {
                    Dir::Read => ih.read.is_some(),
                    _ => ih.write.is_some(),
                };
                (plan.on == d && stag_ok).then(|| {
                    c.probe_armed_after = None;
                    self.next_probe += 1;
                    plan
                })
            }
            _ => None,
        };
        if let Some(s) = ih.read.or(ih.write) {
            if let Some(last) = c.last_stags.insert(task_index(itt), s.stag) {
                if s.stag == next_key(last) {
                    self.c.next_key_hits += 1;
                } else {
                    self.c.next_key_misses += 1;
                }
            }
        }
        let mut t = Task {
            itt,
            dir,
            read: ih.read,
            write: ih.write,
            edtl,
            acks_pending: 0,
            reads_pending: 0,
            status: 0,
            sense: Vec::new(),
            residual: None,
            hostile,
            probe,
            stalled: false,
            steal_inv: if dir != Dir::None && has_stag {
                self.steal_inv.take()
            } else {
                None
            },
        };
        if let Some(k) = t.steal_inv {
            self.c.mode_events += 1;
            log(&format!(
                "{}: steal: the status of ITT {itt:#x} will invalidate another target's STag {k:#x}",
                c.name
            ));
        }
        if let Some(m) = hostile {
            log(&format!(
                "{}: mode {m:?} fires on ITT {itt:#x} (data command {})",
                c.name, self.c.data_commands
            ));
        }
        match action {
            Action::Good => {}
            Action::Check(k, a, q) => {
                t.status = 2;
                t.sense = scsi::sense_segment(k, a, q);
            }
            Action::DataIn(v) => {
                let len = (v.len() as u32).min(edtl);
                if len < edtl {
                    t.residual = Some((false, edtl - len));
                }
                if len > 0 {
                    let Some(r) = ih.read else {
                        self.c.protocol_errors += 1;
                        return Err(format!("Data-In command ITT {itt:#x} without Read STag"));
                    };
                    // Slot 0 is the probe / late-write source.
                    let slot = 1 + c.scratch_next % (SCRATCH_SLOTS - 1);
                    c.scratch_next = c.scratch_next.wrapping_add(1);
                    let off = slot as usize * SCRATCH_SLOT;
                    c.scratch.buf.write(off, &v[..len as usize]);
                    c.ep.rdma_write(
                        wr(K_WRITE, itt as u64),
                        Local {
                            mr: &c.scratch,
                            off,
                            len: len as usize,
                        },
                        r.va,
                        r.stag,
                        false,
                    )
                    .map_err(|e| format!("post RDMA Write: {e}"))?;
                    self.c.bytes_in += len as u64;
                }
            }
            Action::ReadLun(off, len) => {
                self.c.reads += 1;
                let len = (len as u32).min(edtl);
                if (len as u64) < edtl as u64 {
                    t.residual = Some((false, edtl - len));
                }
                let Some(r) = ih.read else {
                    self.c.protocol_errors += 1;
                    return Err(format!("READ ITT {itt:#x} without Read STag"));
                };
                if hostile == Some(Mode::StatusFirst) {
                    // Status goes first; the data follows in `finish`.
                } else if hostile == Some(Mode::DataInCtrl) {
                    let mut d = c.bhs(0x25, 0x80);
                    d[16..20].copy_from_slice(&itt.to_be_bytes());
                    d[20..24].copy_from_slice(&[0xff; 4]);
                    d[4..8].copy_from_slice(&512u32.to_be_bytes());
                    let seg = self.lun.to_vec(off as usize, 512).unwrap_or_default();
                    self.send(c, &d, &seg, None, ISER_VER)?;
                } else {
                    let ack = self.data_ack(c);
                    let burst = c.max_burst.max(512);
                    let mut done = 0u32;
                    while done < len {
                        let n = (len - done).min(burst);
                        c.ep.rdma_write(
                            wr(K_WRITE, itt as u64),
                            Local {
                                mr: &c.lun,
                                off: (off + done as u64) as usize,
                                len: n as usize,
                            },
                            r.va + done as u64,
                            r.stag,
                            false,
                        )
                        .map_err(|e| format!("post RDMA Write: {e}"))?;
                        done += n;
                        if ack {
                            // Spec 004: a zero-length RDMA Read after the
                            // Writes of a burst whose last Data-In carries
                            // the A-bit; it cannot pass them (ordering).
                            c.ep.rdma_read(
                                wr(K_ZREAD, itt as u64),
                                // One zero-length SGE: siw takes exactly one
                                // sink SGE for a Read.
                                Some(Local {
                                    mr: &c.scratch,
                                    off: 0,
                                    len: 0,
                                }),
                                r.va,
                                r.stag,
                            )
                            .map_err(|e| format!("post zero-length Read: {e}"))?;
                            t.acks_pending += 1;
                        }
                    }
                    self.c.bytes_in += len as u64;
                }
            }
            Action::WriteLun(off, len) => {
                self.c.writes += 1;
                let len = (len as u32).min(edtl);
                let imm = (data.len() as u32).min(len);
                if !self.lun.write(off as usize, &data[..imm as usize]) {
                    return Err("immediate data out of LUN".into());
                }
                self.c.bytes_out += len as u64;
                if hostile == Some(Mode::R2tCtrl) {
                    let mut d = c.bhs(0x31, 0x80);
                    d[16..20].copy_from_slice(&itt.to_be_bytes());
                    d[20..24].copy_from_slice(&0x1234u32.to_be_bytes());
                    d[40..44].copy_from_slice(&imm.to_be_bytes());
                    d[44..48].copy_from_slice(&(len - imm).to_be_bytes());
                    self.send(c, &d, &[], None, ISER_VER)?;
                }
                if imm < len {
                    let Some(wsv) = ih.write else {
                        self.c.protocol_errors += 1;
                        return Err(format!(
                            "WRITE ITT {itt:#x} needs {} more bytes but has no Write STag",
                            len - imm
                        ));
                    };
                    c.ep.rdma_read(
                        wr(K_READ, itt as u64),
                        Some(Local {
                            mr: &c.lun,
                            off: (off + imm as u64) as usize,
                            len: (len - imm) as usize,
                        }),
                        wsv.va,
                        wsv.stag,
                    )
                    .map_err(|e| format!("post RDMA Read: {e}"))?;
                    t.reads_pending = 1;
                }
            }
        }
        let wait = t.reads_pending > 0 || t.acks_pending > 0;
        c.tasks.insert(itt, t);
        if hostile == Some(Mode::Disconnect) {
            log(&format!(
                "{}: mode Disconnect: disconnecting with {} tasks open",
                c.name,
                c.tasks.len()
            ));
            c.closing = true;
            self.c.disconnects_by_peer += 1;
            c.ep.disconnect();
            return Ok(());
        }
        if matches!(hostile, Some(Mode::Stall | Mode::DupTmf)) {
            if let Some(t) = c.tasks.get_mut(&itt) {
                t.stalled = true;
                // The STag the command granted us: a READ's Read STag, a
                // WRITE's Write STag (there is none when all of its data
                // came as immediate data).
                let sv = if t.dir == Dir::Write { t.write } else { t.read };
                if let (Some(f), Some(r)) = (&self.cfg.leak_stags, sv) {
                    let _ = std::fs::write(f, format!("{:#x} {:#x}\n", r.stag, r.va));
                }
            }
            log(&format!(
                "{}: mode {:?}: no status for ITT {itt:#x}",
                c.name,
                hostile.unwrap_or(Mode::Stall)
            ));
            return Ok(());
        }
        if !wait {
            self.finish(c, itt)?;
        }
        Ok(())
    }

    fn data_ack(&self, c: &Conn) -> bool {
        match self.cfg.data_ack {
            DataAck::Off => false,
            DataAck::Erl => c.erl >= 1,
            DataAck::Always => true,
        }
    }

    /// Sends the status of a task whose data movement is done.
    fn finish(&mut self, c: &mut Conn, itt: u32) -> Result<(), String> {
        let Some(t) = c.tasks.remove(&itt) else {
            return Ok(());
        };
        let mut r = c.bhs(0x21, 0x80);
        r[3] = t.status;
        if let Some((over, n)) = t.residual {
            r[1] |= if over { 0x04 } else { 0x02 };
            r[44..48].copy_from_slice(&n.to_be_bytes());
        }
        r[16..20].copy_from_slice(&itt.to_be_bytes());
        c.status_fields(&mut r, true);
        let mut inv = if c.remote_inv { t.stag() } else { None };
        let mut kind = K_SEND;
        if let Some(k) = t.steal_inv {
            log(&format!(
                "{}: status of ITT {itt:#x} by Send with Invalidate of another target's STag {k:#x} (ours: {:x?})",
                c.name,
                t.stag()
            ));
            inv = Some(k);
            kind = K_STEAL;
        }
        let mut flags = ISER_VER;
        let mut sense = t.sense.clone();
        match t.hostile {
            Some(Mode::InvWrong) => inv = t.stag().map(|s| s ^ 0x5a5a_0000),
            Some(Mode::InvOther) => {
                let other = c
                    .tasks
                    .values()
                    .find_map(|o| o.stag())
                    .or(t.stag().map(|s| s.wrapping_add(0x100)));
                log(&format!(
                    "{}: invalidating {other:x?} instead of {:x?}",
                    c.name,
                    t.stag()
                ));
                inv = other;
            }
            Some(Mode::InvNone) => inv = None,
            Some(Mode::BadVersion) => flags = 0x50,
            Some(Mode::RsvdBits) => flags = ISER_VER | 0x03,
            Some(Mode::WsvZero) => flags = ISER_VER | ISER_WSV | ISER_RSV,
            Some(Mode::UnknownItt) => r[16..20].copy_from_slice(&(itt ^ 0x0ab0_0fff).to_be_bytes()),
            Some(Mode::BigData) => {
                r[3] = 2;
                sense = vec![0u8; c.irdsl as usize + 16];
                sense[..20].copy_from_slice(&scsi::sense_segment(scsi::ILLEGAL_REQUEST, 0x24, 0));
            }
            Some(Mode::Hello) => {
                // An iSER Hello (iSER §9.3: max/min version 1, IRD 16),
                // which only an initiator sends, encoded by the protocol
                // core as the module's own messages are.
                let mut hello = [0u8; ISER_HDR_LEN];
                Hello {
                    max_ver: 1,
                    min_ver: 1,
                    ird: 16,
                }
                .encode(&mut hello);
                self.send_raw(c, &hello, None)?;
            }
            Some(Mode::Rnr) => {
                log(&format!(
                    "{}: mode Rnr: {RNR_BURST} unsolicited NOP-Ins",
                    c.name
                ));
                for _ in 0..RNR_BURST {
                    let mut n = c.bhs(0x20, 0x80);
                    n[16..20].copy_from_slice(&[0xff; 4]);
                    n[20..24].copy_from_slice(&[0xff; 4]);
                    c.status_fields(&mut n, false);
                    self.send(c, &n, &[], None, ISER_VER)?;
                }
            }
            _ => {}
        }
        if inv.is_some() {
            self.c.send_inv += 1;
        }
        self.send_kind(c, &r, &sense, inv, flags, kind)?;
        if t.hostile == Some(Mode::DupStatus) {
            log(&format!(
                "{}: mode DupStatus: status of ITT {itt:#x} again",
                c.name
            ));
            let mut r2 = r;
            c.status_fields(&mut r2, true);
            self.send(c, &r2, &sense, None, ISER_VER)?;
        }
        if t.hostile == Some(Mode::StatusFirst) {
            if let (Some(rd), Some(len)) = (t.read, Some(t.edtl.min(512))) {
                c.ep.rdma_write(
                    wr(K_LATE, rd.stag as u64),
                    Local {
                        mr: &c.scratch,
                        off: 0,
                        len: len as usize,
                    },
                    rd.va,
                    rd.stag,
                    true,
                )
                .map_err(|e| format!("post late write: {e}"))?;
            }
        }
        if matches!(t.hostile, Some(Mode::EarlyRsp | Mode::EarlyInv)) {
            let next = next_task_itt(itt);
            // Predicted now, before the next task's command can arrive
            // and show its own key.
            let inv = if t.hostile == Some(Mode::EarlyInv) {
                let k = c.last_stags.get(&task_index(next)).map(|s| next_key(*s));
                if k.is_none() {
                    self.c.early_inv_unknown += 1;
                }
                k
            } else {
                None
            };
            c.timers.push((
                Instant::now() + Duration::from_millis(self.cfg.probe_delay_ms),
                Timer::EarlyRsp { itt: next, inv },
            ));
        }
        if let Some(plan) = t.probe {
            // Give the initiator time to complete the command, then use
            // its STags once more.
            c.timers.push((
                Instant::now() + Duration::from_millis(self.cfg.probe_delay_ms),
                Timer::Probe {
                    read: t.read,
                    write: t.write,
                    plan,
                },
            ));
        }
        Ok(())
    }

    /// Sends iSER header (`flags`) + BHS + data.
    fn send(
        &mut self,
        c: &mut Conn,
        bhs: &[u8; BHS],
        data: &[u8],
        inv: Option<u32>,
        flags: u8,
    ) -> Result<(), String> {
        self.send_kind(c, bhs, data, inv, flags, K_SEND)
    }

    /// [`Self::send`] with the work request kind its completion is
    /// counted under (K_SEND or K_STEAL).
    fn send_kind(
        &mut self,
        c: &mut Conn,
        bhs: &[u8; BHS],
        data: &[u8],
        inv: Option<u32>,
        flags: u8,
        kind: u64,
    ) -> Result<(), String> {
        let mut b = bhs.to_owned();
        let dsl = data.len() as u32;
        b[5..8].copy_from_slice(&dsl.to_be_bytes()[1..]);
        let mut hdr = [0u8; ISER_HDR_LEN];
        IserHeader::control().encode(&mut hdr);
        hdr[0] = flags;
        let pad = (4 - data.len() % 4) % 4;
        let mut m = Vec::with_capacity(HDRS + data.len() + pad);
        m.extend_from_slice(&hdr);
        m.extend_from_slice(&b);
        m.extend_from_slice(data);
        m.resize(m.len() + pad, 0);
        self.send_raw_kind(c, &m, inv, kind)
    }

    fn send_raw(&mut self, c: &mut Conn, m: &[u8], inv: Option<u32>) -> Result<(), String> {
        self.send_raw_kind(c, m, inv, K_SEND)
    }

    fn send_raw_kind(
        &mut self,
        c: &mut Conn,
        m: &[u8],
        inv: Option<u32>,
        kind: u64,
    ) -> Result<(), String> {
        if m.len() > SEND_SLOT {
            let buf = DmaBuf::new(m.len()).map_err(|e| e.to_string())?;
            buf.write(0, m);
            let mr = c.ep.register(&buf).map_err(|e| e.to_string())?;
            // Not a slot: its completion returns nothing to `send_free`.
            c.ep.send(
                wr(kind, u32::MAX as u64 + 1),
                Local {
                    mr: &mr,
                    off: 0,
                    len: m.len(),
                },
                inv,
            )
            .map_err(|e| format!("post big Send: {e}"))?;
            c.big = Some(mr);
            return Ok(());
        }
        let slot = c.send_free.pop().ok_or("send slots exhausted")?;
        let off = slot as usize * SEND_SLOT;
        c.send.buf.write(off, m);
        c.ep.send(
            wr(kind, slot as u64),
            Local {
                mr: &c.send,
                off,
                len: m.len(),
            },
            inv,
        )
        .map_err(|e| format!("post Send: {e}"))
    }

    pub fn close_all(&mut self) {
        for c in self.conns.values() {
            c.ep.disconnect();
        }
    }
}

impl Conn {
    fn bhs(&self, op: u8, flags: u8) -> [u8; BHS] {
        let mut b = [0u8; BHS];
        b[0] = op;
        b[1] = flags;
        b
    }

    /// StatSN / ExpCmdSN / MaxCmdSN; `advance` for PDUs that consume a StatSN.
    fn status_fields(&mut self, b: &mut [u8; BHS], advance: bool) {
        b[24..28].copy_from_slice(&self.stat_sn.to_be_bytes());
        if advance {
            self.stat_sn = self.stat_sn.wrapping_add(1);
        }
        b[28..32].copy_from_slice(&self.exp_cmd_sn.to_be_bytes());
        b[32..36].copy_from_slice(&self.exp_cmd_sn.wrapping_add(WINDOW - 1).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_key_bumps_the_key_byte_only() {
        assert_eq!(next_key(0x0000_1234), 0x0000_1235);
        assert_eq!(next_key(0x0000_12ff), 0x0000_1200);
        // Task 5 of age 3, as read off the wire (see below).
        assert_eq!(task_index(0x0500_0030), 5);
    }

    #[test]
    fn next_task_itt_keeps_the_age() {
        // Task 5 of age 3 (raw 0x3000_0005) as read big-endian off the
        // wire of a little-endian host: 0x0500_0030.
        assert_eq!(next_task_itt(0x0500_0030), 0x0600_0030);
        assert_eq!(next_task_itt(0xff00_0000), 0x0001_0000);
    }

    #[test]
    fn counters_render() {
        let c = Counters {
            commands: 3,
            ..Default::default()
        };
        let s = c.render();
        assert!(s.contains("commands=3\n"));
        assert!(s.contains("probes_succeeded=0\n"));
    }
}
