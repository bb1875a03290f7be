//! Command line of the peer.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Per-connection / per-command behaviours (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Polite,
    InvWrong,
    InvOther,
    InvNone,
    BadVersion,
    RsvdBits,
    WsvZero,
    BigData,
    UnknownItt,
    DataInCtrl,
    R2tCtrl,
    StatusFirst,
    DupStatus,
    Rnr,
    Disconnect,
    Stall,
    /// As `Stall`, and the TMF that releases the stalled command (ABORT
    /// TASK, LUN or target reset) is answered with Function Complete twice.
    DupTmf,
    Hello,
    LoginDigest,
    LoginNoRdma,
    LogoutRefused,
    /// After answering a command, a SCSI Response (GOOD, no data) for the
    /// next task of the initiator's session (the ITT's task index plus
    /// one, same age), `--probe-delay-ms` later: an answer to a command
    /// the initiator has allocated but maybe not yet sent.
    EarlyRsp,
    /// As `EarlyRsp`, and the early response carries a Send with
    /// Invalidate naming the next task's MR by its next key: the STag this
    /// connection last saw for that task index, key byte (the low 8 bits)
    /// plus one, as the initiator's next registration of that MR would
    /// make it. Sent before that registration ran, a device must refuse it.
    EarlyInv,
}

pub const MODES: &[(&str, Mode)] = &[
    ("polite", Mode::Polite),
    ("inv-wrong", Mode::InvWrong),
    ("inv-other", Mode::InvOther),
    ("inv-none", Mode::InvNone),
    ("bad-version", Mode::BadVersion),
    ("rsvd-bits", Mode::RsvdBits),
    ("wsv-zero", Mode::WsvZero),
    ("big-data", Mode::BigData),
    ("unknown-itt", Mode::UnknownItt),
    ("datain-ctrl", Mode::DataInCtrl),
    ("r2t-ctrl", Mode::R2tCtrl),
    ("status-first", Mode::StatusFirst),
    ("dup-status", Mode::DupStatus),
    ("rnr", Mode::Rnr),
    ("disconnect", Mode::Disconnect),
    ("stall", Mode::Stall),
    ("dup-tmf", Mode::DupTmf),
    ("hello", Mode::Hello),
    ("login-digest", Mode::LoginDigest),
    ("login-nordma", Mode::LoginNoRdma),
    ("logout-refused", Mode::LogoutRefused),
    ("early-rsp", Mode::EarlyRsp),
    ("early-inv", Mode::EarlyInv),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivateData {
    /// ZBVA_NOT_USED, plus SEND_W_INV_NOT_USED unless we use SendInvSE.
    Auto,
    /// No private data in the accept (as tgt).
    None,
    /// Exactly this flags byte.
    Flags(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataAck {
    Off,
    /// Zero-length Read after each burst when the negotiated ERL >= 1 (the
    /// A-bit rule).
    Erl,
    /// As if the A-bit were set on every burst, whatever the ERL.
    Always,
}

/// How the peer answers an iSER Hello (`--hello-reply`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloAnswer {
    /// As a compliant target (iSER §5.1.3): the highest common version,
    /// iSER-ORD = min(our ORD, the initiator's iSER-IRD).
    Ok,
    /// CurVer and MaxVer 2: a version the initiator did not offer.
    BadVersion,
    /// iSER-ORD 0 although the initiator declared an IRD.
    OrdZero,
    /// The R (reject) bit.
    Reject,
    /// No HelloReply at all (as LIO and tgt, which log and drop a Hello).
    Ignore,
    /// No HelloReply: an RDMA Write through an STag the initiator never
    /// advertised (it has advertised none before the login), which rxe
    /// refuses with a NAK that moves the initiator's QP to error (with
    /// `--stay-on-error`, nothing else tells the initiator).
    Probe,
}

/// What `--steal-stags` does with another target's STag (`--steal-how`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StealHow {
    /// RDMA Write 512 bytes through it (a Read STag).
    Write,
    /// RDMA Read 512 bytes through it (a Write STag).
    Read,
    /// Answer our next data command with a SCSI Response sent as Send
    /// with Invalidate naming it.
    SendInv,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub iqn: String,
    pub lun_mb: u64,
    pub mode: Mode,
    pub at: u64,
    pub every: u64,
    /// Each time the mode is armed it fires on this many fitting data
    /// commands in a row (`--burst`, default 1).
    pub burst: u64,
    pub conn: Option<u64>,
    pub private_data: PrivateData,
    pub send_inv: bool,
    pub data_ack: DataAck,
    pub probe: u32,
    pub probe_delay_ms: u64,
    pub abort_probe: bool,
    /// A failed probe (or late write) leaves the connection up, its QP in
    /// error, instead of disconnecting (`--stay-on-error`).
    pub stay_on_error: bool,
    /// All of the peer's memory locked in RAM (`--mlock`), so that serving
    /// a swap LUN never waits for reclaim of its own pages.
    pub mlock: bool,
    /// The mode fires only on READs (Some(true)) or WRITEs (Some(false)).
    pub on_reads: Option<bool>,
    /// ABORT TASK of a stalled command: its SCSI Response, then Function
    /// Complete, back to back (`--race-tmf`).
    pub race_tmf: bool,
    /// Write the Read STag and VA of a stalled READ (the Write STag and VA
    /// of a stalled WRITE) here (`--leak-stags`).
    pub leak_stags: Option<PathBuf>,
    /// On SIGUSR1, use the STag in this file from our own connection, as
    /// `steal_how` says (`--steal-stags`).
    pub steal_stags: Option<PathBuf>,
    pub steal_how: StealHow,
    /// Answer this many requests to go to full feature phase with T=0
    /// (stay in operational negotiation, RFC 7143 §11.13.1) before
    /// letting one through (`--login-stay`).
    pub login_stay: u32,
    pub erl: u8,
    pub trdsl: u32,
    pub stats: Option<PathBuf>,
    pub hello_reply: HelloAnswer,
}

pub const USAGE: &str = "usage: iser-peer [options] ADDRESS [PORT]
  --iqn IQN              target name (default iqn.2026-11.test.iser-rs:peer)
  --lun-mb N             RAM LUN size in MiB (default 64)
  --mode NAME            behaviour (default polite); one of:
                         polite inv-wrong inv-other inv-none bad-version rsvd-bits
                         wsv-zero big-data unknown-itt datain-ctrl r2t-ctrl
                         status-first dup-status rnr disconnect stall dup-tmf hello
                         login-digest login-nordma logout-refused early-rsp early-inv
  --at N                 the mode fires on the N-th READ/WRITE (default 40)
  --every N              ... and again every N READ/WRITEs after that
                         (SIGUSR1 arms it at once, whatever --at says)
  --burst N              each time it is armed, the mode fires on N fitting
                         READ/WRITEs in a row (default 1); stall never stalls
                         the initiator's retry of a command it stalled (same
                         direction, offset and length)
  --on read|write        ... only on READs / only on WRITEs
  --race-tmf             answer ABORT TASK of a stalled command with the
                         command's SCSI Response and then Function Complete,
                         back to back
  --leak-stags FILE      when a READ is stalled, write its Read STag and VA
                         (hex) to FILE, for another peer instance; for a
                         stalled WRITE its Write STag and VA
  --steal-stags FILE     on SIGUSR1, use the STag in FILE (another target's)
                         from our own connection, as --steal-how says
  --steal-how HOW        write (default): RDMA-Write 512 bytes through it;
                         read: RDMA-Read 512 bytes through it (both counted
                         as probes_*); send-inv: answer our next READ/WRITE
                         that has an STag with its SCSI Response as a Send
                         with Invalidate naming the stolen STag (counted as
                         steal_inv_completed / steal_inv_error)
  --conn K               ... only on the K-th normal-session connection
  --no-private-data      accept without private data (as tgt)
  --private-data HEX     accept with this iser_cm_hdr flags byte
  --no-send-inv          never use Send with Invalidate
  --data-ack             zero-length RDMA Read after the Data-In bursts that
                         carry the A-bit (negotiated ERL >= 1), status after it
  --data-ack-always      the same whatever the ERL
  --probe N              N post-completion probes (RDMA Write/Read with the
                         STags of a completed command; each costs a reconnect)
  --probe-delay-ms N     wait after the status Send completes (default 300)
  --abort-probe          after answering a TMF (ABORT TASK, LUN or target
                         reset) with Function Complete, wait --probe-delay-ms
                         and use the STag of a released command the way it
                         was granted (RDMA Write into a Read STag, RDMA Read
                         from a Write STag); counted as probes_*
  --stay-on-error        when a probe or a late write fails, stay connected
                         (both QPs are in error, no CM event is sent): the
                         initiator must notice its QP's error by itself
  --mlock                lock all of the peer's memory (mlockall) once its
                         buffers exist: a LUN the guest swaps to is served
                         without waiting on reclaim (tests/swap-study)
  --login-stay N         answer the first N Login Requests that ask to go to
                         full feature phase with T=0 (stay in operational
                         negotiation; counted as login_stays)
  --erl N                highest ErrorRecoveryLevel accepted (default 0)
  --trdsl N              TargetRecvDataSegmentLength (default 8192)
  --hello-reply HOW      answer an iSER Hello (the initiator's first message,
                         counted as hellos / hello_replies): ok (default:
                         as iSER §5.1.3 says), bad-version (CurVer 2),
                         ord0 (iSER-ORD 0), reject (R bit), ignore (none),
                         probe (none: an RDMA Write through an STag never
                         advertised, counted as probes_*)
  --stats FILE           counters (key=value), rewritten while running and at exit
signals: SIGUSR1 arms the mode at once (with --steal-stags: uses the STag);
  SIGUSR2 RDMA-Writes 512 bytes through the Read STag of every stalled READ
  from its own connection (counted as probes_*: is that STag still valid?),
  and makes every probe waiting for --probe-delay-ms due at once;
  SIGTERM ends the peer (final counters)";

fn num<T: std::str::FromStr>(v: Option<String>, what: &str) -> Result<T, String> {
    v.ok_or(format!("{what} needs a value"))?
        .parse()
        .map_err(|_| format!("bad value for {what}"))
}

impl Config {
    pub fn parse(args: impl Iterator<Item = String>) -> Result<Config, String> {
        let mut args = args.peekable();
        let mut pos = Vec::new();
        let mut c = Config {
            addr: SocketAddr::from(([0, 0, 0, 0], 3260)),
            iqn: "iqn.2026-11.test.iser-rs:peer".into(),
            lun_mb: 64,
            mode: Mode::Polite,
            at: 40,
            every: 0,
            burst: 1,
            conn: None,
            private_data: PrivateData::Auto,
            send_inv: true,
            data_ack: DataAck::Off,
            probe: 0,
            probe_delay_ms: 300,
            abort_probe: false,
            stay_on_error: false,
            mlock: false,
            on_reads: None,
            race_tmf: false,
            leak_stags: None,
            steal_stags: None,
            steal_how: StealHow::Write,
            login_stay: 0,
            erl: 0,
            trdsl: 8192,
            stats: None,
            hello_reply: HelloAnswer::Ok,
        };
        while let Some(a) = args.next() {
            match a.as_str() {
                "--iqn" => c.iqn = args.next().ok_or("--iqn needs a value")?,
                "--lun-mb" => c.lun_mb = num(args.next(), &a)?,
                "--mode" => {
                    let m = args.next().ok_or("--mode needs a value")?;
                    c.mode = MODES
                        .iter()
                        .find(|(n, _)| *n == m)
                        .map(|(_, m)| *m)
                        .ok_or(format!("unknown mode {m}"))?;
                }
                "--at" => c.at = num(args.next(), &a)?,
                "--every" => c.every = num(args.next(), &a)?,
                "--burst" => c.burst = num(args.next(), &a)?,
                "--conn" => c.conn = Some(num(args.next(), &a)?),
                "--no-private-data" => c.private_data = PrivateData::None,
                "--private-data" => {
                    let v = args.next().ok_or("--private-data needs a value")?;
                    c.private_data = PrivateData::Flags(
                        u8::from_str_radix(v.trim_start_matches("0x"), 16)
                            .map_err(|_| "bad --private-data")?,
                    );
                }
                "--no-send-inv" => c.send_inv = false,
                "--data-ack" => c.data_ack = DataAck::Erl,
                "--data-ack-always" => c.data_ack = DataAck::Always,
                "--probe" => c.probe = num(args.next(), &a)?,
                "--probe-delay-ms" => c.probe_delay_ms = num(args.next(), &a)?,
                "--abort-probe" => c.abort_probe = true,
                "--stay-on-error" => c.stay_on_error = true,
                "--mlock" => c.mlock = true,
                "--race-tmf" => c.race_tmf = true,
                "--leak-stags" => {
                    c.leak_stags = Some(args.next().ok_or("--leak-stags needs a file")?.into())
                }
                "--steal-stags" => {
                    c.steal_stags = Some(args.next().ok_or("--steal-stags needs a file")?.into())
                }
                "--steal-how" => {
                    c.steal_how = match args.next().as_deref() {
                        Some("write") => StealHow::Write,
                        Some("read") => StealHow::Read,
                        Some("send-inv") => StealHow::SendInv,
                        _ => return Err("--steal-how takes write, read or send-inv".into()),
                    }
                }
                "--on" => {
                    c.on_reads = match args.next().as_deref() {
                        Some("read") => Some(true),
                        Some("write") => Some(false),
                        _ => return Err("--on takes read or write".into()),
                    }
                }
                "--hello-reply" => {
                    c.hello_reply = match args.next().as_deref() {
                        Some("ok") => HelloAnswer::Ok,
                        Some("bad-version") => HelloAnswer::BadVersion,
                        Some("ord0") => HelloAnswer::OrdZero,
                        Some("reject") => HelloAnswer::Reject,
                        Some("ignore") => HelloAnswer::Ignore,
                        Some("probe") => HelloAnswer::Probe,
                        _ => return Err(
                            "--hello-reply takes ok, bad-version, ord0, reject, ignore or probe"
                                .into(),
                        ),
                    }
                }
                "--login-stay" => c.login_stay = num(args.next(), &a)?,
                "--erl" => c.erl = num(args.next(), &a)?,
                "--trdsl" => c.trdsl = num(args.next(), &a)?,
                "--stats" => c.stats = Some(args.next().ok_or("--stats needs a value")?.into()),
                "-h" | "--help" => return Err(USAGE.into()),
                s if s.starts_with("--") => return Err(format!("unknown option {s}\n{USAGE}")),
                _ => pos.push(a),
            }
        }
        let host = pos.first().ok_or(USAGE)?;
        let port: u16 = match pos.get(1) {
            Some(p) => p.parse().map_err(|_| "bad port")?,
            None => 3260,
        };
        let ip: std::net::IpAddr = host
            .trim_matches(['[', ']'])
            .parse()
            .map_err(|_| "bad address")?;
        c.addr = SocketAddr::new(ip, port);
        if c.burst == 0 {
            return Err("--burst must be at least 1".into());
        }
        if c.lun_mb == 0 || c.trdsl < 512 {
            return Err(
                "LUN size and TargetRecvDataSegmentLength must be positive (trdsl >= 512)".into(),
            );
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Config, String> {
        Config::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn parses() {
        let c = p("--mode stall --at 5 --every 3 --no-private-data 192.0.2.1 3261")
            .expect("a valid command line parses");
        assert_eq!(c.mode, Mode::Stall);
        assert_eq!((c.at, c.every), (5, 3));
        assert_eq!(c.private_data, PrivateData::None);
        assert_eq!(c.addr.port(), 3261);
        assert!(p("--mode nope 1.2.3.4").is_err());
        assert!(p("").is_err());
        assert_eq!(
            p("2001:db8::1")
                .expect("an IPv6 address parses")
                .addr
                .port(),
            3260
        );
    }

    #[test]
    fn steal_how() {
        let c = p("--steal-stags /tmp/f 192.0.2.1").expect("--steal-stags alone parses");
        assert_eq!(c.steal_how, StealHow::Write, "write stays the default");
        for (w, h) in [
            ("write", StealHow::Write),
            ("read", StealHow::Read),
            ("send-inv", StealHow::SendInv),
        ] {
            let c = p(&format!("--steal-stags /tmp/f --steal-how {w} 192.0.2.1"))
                .expect("a known --steal-how parses");
            assert_eq!(c.steal_how, h);
        }
        assert!(
            p("--steal-how 192.0.2.1").is_err(),
            "a missing value is refused"
        );
        assert!(p("--steal-how sendinv 192.0.2.1").is_err());
        assert!(p("192.0.2.1 --steal-how").is_err());
    }

    #[test]
    fn burst() {
        let c = p("192.0.2.1").expect("defaults parse");
        assert_eq!(c.burst, 1);
        let c = p("--hello-reply ord0 192.0.2.1").expect("--hello-reply ord0 parses");
        assert_eq!(c.hello_reply, HelloAnswer::OrdZero);
        let c = p("--hello-reply probe 192.0.2.1").expect("--hello-reply probe parses");
        assert_eq!(c.hello_reply, HelloAnswer::Probe);
        assert!(p("--hello-reply maybe 192.0.2.1").is_err());
        let c = p("--mode stall --every 100 --burst 32 192.0.2.1").expect("--burst N parses");
        assert_eq!((c.every, c.burst), (100, 32));
        assert!(p("--burst 0 192.0.2.1").is_err());
        assert!(p("--burst x 192.0.2.1").is_err());
    }
}
