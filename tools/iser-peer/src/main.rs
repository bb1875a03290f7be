//! iser-peer: a userspace iSER target on rdma-core for the iser-rs guest
//! tests. See `--help` and `README.md` in this directory.

mod config;
mod scsi;
mod sys;
mod target;
mod text;
mod verbs;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);
/// SIGUSR1: arm the mode now (for a test that wants it to fire on its own
/// workload, not on the login's partition scan).
static ARM: AtomicBool = AtomicBool::new(false);
/// SIGUSR2: RDMA-Write through the Read STag of every stalled READ (is
/// that STag still valid?), and run every probe waiting for its delay now.
static PROBE_NOW: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_usr1(_: libc::c_int) {
    ARM.store(true, Ordering::SeqCst);
}

extern "C" fn on_usr2(_: libc::c_int) {
    PROBE_NOW.store(true, Ordering::SeqCst);
}

fn write_stats(peer: &target::Peer) {
    let s = peer.c.render();
    if let Some(p) = &peer.cfg.stats {
        let tmp = p.with_extension("tmp");
        if std::fs::write(&tmp, &s).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
}

fn main() {
    let cfg = match config::Config::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    for s in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: installing an async-signal-safe handler (one atomic store).
        unsafe { libc::signal(s, on_signal as *const () as libc::sighandler_t) };
    }
    // SAFETY: as above.
    unsafe { libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t) };
    // SAFETY: as above.
    unsafe { libc::signal(libc::SIGUSR2, on_usr2 as *const () as libc::sighandler_t) };
    if let Err(e) = run(cfg) {
        eprintln!("iser-peer: {e}");
        std::process::exit(1);
    }
}

fn run(cfg: config::Config) -> std::io::Result<()> {
    let ch = verbs::EventChannel::new()?;
    let listener = verbs::CmId::listen(&ch, cfg.addr, 16)?;
    eprintln!(
        "iser-peer: listening on {} as {} (mode {:?})",
        cfg.addr, cfg.iqn, cfg.mode
    );
    let mut peer = target::Peer::new(cfg)?;
    if peer.cfg.mlock {
        // SAFETY: mlockall takes flags only and touches no Rust memory.
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        eprintln!("iser-peer: memory locked (--mlock)");
    }
    let mut last_write = Instant::now() - Duration::from_secs(1);
    while !STOP.load(Ordering::SeqCst) {
        let mut fds: Vec<libc::pollfd> = std::iter::once(ch.fd())
            .chain(peer.fds())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of pollfd for the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 20) };
        while let Some(ev) = ch.get() {
            peer.cm_event(ev);
        }
        if ARM.swap(false, Ordering::SeqCst) {
            peer.arm();
        }
        if PROBE_NOW.swap(false, Ordering::SeqCst) {
            peer.probe_now();
        }
        peer.poll_all();
        if peer.dirty && last_write.elapsed() > Duration::from_millis(200) {
            write_stats(&peer);
            peer.dirty = false;
            last_write = Instant::now();
        }
    }
    peer.close_all();
    write_stats(&peer);
    print!("{}", peer.c.render());
    drop(peer);
    drop(listener);
    Ok(())
}
