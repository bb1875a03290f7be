// SPDX-License-Identifier: GPL-2.0
//! Counters a user can read.
//!
//! Per connection: [`Counters`], shown by `iscsiadm -m session -s` as the
//! connection's custom statistics (`get_stats`). Module-wide live-object
//! counts (connections, QPs, MRs) are read-only module parameters
//! (`/sys/module/iser_rs/parameters/live_*`), so a test or an operator
//! sees leaks after logout and before `rmmod`.
//!
//! All counters are relaxed atomics: any context, no lock.

use crate::sys::params;
use core::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($field:ident: $doc:literal),* $(,)?) => {
        /// Per-connection event counters.
        pub(crate) struct Counters {
            $(#[doc = $doc] $field: AtomicU64,)*
        }

        impl Counters {
            pub(crate) const fn new() -> Self {
                Counters { $($field: AtomicU64::new(0),)* }
            }

            /// How many there are: every one must fit libiscsi's custom
            /// statistics (`set_custom_stat` drops those past
            /// `ISCSI_STATS_CUSTOM_MAX`, and `iscsiadm` would not show them).
            pub(crate) const COUNT: usize = counters!(@count $($field)*);

            /// (name, value) pairs in a fixed order, for `get_stats`.
            pub(crate) fn snapshot(&self) -> [(&'static str, u64); Self::COUNT] {
                [$((stringify!($field), self.$field.load(Ordering::Relaxed)),)*]
            }
        }
    };
    (@count $($f:ident)*) => { 0 $(+ counters!(@one $f))* };
    (@one $f:ident) => { 1 };
}

// Every counter shows in `iscsiadm -m session -s` (32 of 32 are used).
const _: () = assert!(Counters::COUNT <= crate::sys::iscsi::CUSTOM_STATS_MAX);

counters! {
    cmds_read: "SCSI commands reading from the target.",
    cmds_write: "SCSI commands writing to the target.",
    cmds_nodata: "SCSI commands without data.",
    bytes_cmd: "Bytes of SCSI data requested by commands.",
    bytes_sent: "Bytes sent by Send (immediate and unsolicited data).",
    bytes_received: "Data-segment bytes received by Send.",
    registrations: "Fast registrations (FRWR) posted.",
    remote_invalidations: "STags the target invalidated (Send with Invalidate).",
    local_invalidations: "STags invalidated locally (LOCAL_INV posted).",
    responses: "SCSI Responses received.",
    deferred_completions: "Responses held until a local invalidation completed.",
    data_outs: "Unsolicited Data-Out PDUs sent.",
    rx_posted: "Receive ring buffers posted (the ring at login, then every repost).",
    rx_completed: "Receive ring completions (PDUs received into the ring); rx_posted - rx_completed is what the ring holds: RX_RING when idle.",
    send_queue_full: "PDUs refused for lack of a send slot (the midlayer retries commands).",
    task_slot_busy: "Command PDUs sent from a shared header slot because their task's own was still held by the Send of its previous command (not yet completed: a command without immediate data sent from a slot, as with inline_sends=N, or a task whose command was aborted or failed while its Send was pending).",
    err_protocol: "Protocol errors by the target (connection failed).",
    err_completion: "Work completions with an error (not flushes).",
    err_post: "Failed post_send/post_recv calls.",
    rx_dropped: "PDUs received after a reported connection failure, not delivered.",
    tmf_invalidations: "STags invalidated locally before a successful TMF Response was delivered.",
    tmf_send_waits: "Successful TMF Responses that arrived before their request's Send completed and were held for it (and for no invalidation).",
    login_rsps_held: "Login/Text Responses that arrived before the send_pdu call of their request returned (or before its caller slept after it), held and delivered after that (see IserConn::login_window_open).",
    login_caller_looks: "Looks at a send_pdu caller that had not slept since its call returned (its netlink reply maybe not yet queued), so a Login/Text Response arriving was held longer.",
    released_valid_stags: "STags (MRs) still valid on a live QP when libiscsi released their command: a broken guarantee, 0 on every path the tests drive.",
    rx_returned: "Receive buffers of held responses whose command libiscsi released first (task cleanup): back to the ring undelivered (to teardown once the connection failed).",
    rx_orphaned: "Of those, buffers whose repost failed: reposted by the next receive completion.",
    unsignaled_max: "The most unsignaled Sends that waited at once for a signaled one to release their slots: at most signal_every - 1.",
    unsignaled_requeued: "Unsignaled Sends put back to wait for the next signaled one, after the signaled post that was to take them failed.",
    sq_room_waits: "Transmit calls refused for send-queue room (a command goes back to the midlayer and counts again at each retry refused): the entries the transmit path had in use, counted until a signaled completion at or after them was reaped, left too few (sq_depth less the receive path's reserve).",
    sq_early_signals: "Sends signaled early because the send-queue entries in use would otherwise have left less room than the negotiation's largest write needs (so a write refused room always has a signaled completion coming; only at a small sq_depth).",
    sq_used_max: "The most send-queue entries the transmit path counted in use at once, a call's worst case included (a command chain counted as 3).",
}

impl Counters {
    pub(crate) fn command(&self, write: bool, read: bool, bytes: u64) {
        let c = if write {
            &self.cmds_write
        } else if read {
            &self.cmds_read
        } else {
            &self.cmds_nodata
        };
        c.fetch_add(1, Ordering::Relaxed);
        self.bytes_cmd.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn tx_bytes(&self, n: u64) {
        self.bytes_sent.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn rx_bytes(&self, n: u64) {
        self.bytes_received.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn registration(&self) {
        self.registrations.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn remote_inv(&self) {
        self.remote_invalidations.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn local_inv(&self, n: u64) {
        self.local_invalidations.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn response(&self) {
        self.responses.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn deferred(&self) {
        self.deferred_completions.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn data_out(&self) {
        self.data_outs.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn rx_posted(&self, n: u64) {
        self.rx_posted.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn rx_completed(&self) {
        self.rx_completed.fetch_add(1, Ordering::Relaxed);
    }
    #[cold]
    pub(crate) fn task_slot_busy(&self) {
        self.task_slot_busy.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn tx_full(&self) {
        self.send_queue_full.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn proto_error(&self) {
        self.err_protocol.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn wc_error(&self) {
        self.err_completion.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn login_rsp_held(&self) {
        self.login_rsps_held.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn login_caller_look(&self) {
        self.login_caller_looks.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn rx_dropped(&self) {
        self.rx_dropped.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn tmf_inv(&self, n: u64) {
        self.tmf_invalidations.fetch_add(n, Ordering::Relaxed);
        self.local_invalidations.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn tmf_send_wait(&self) {
        self.tmf_send_waits.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one; returns the count before (0: the first on this
    /// connection).
    pub(crate) fn released_valid(&self) -> u64 {
        self.released_valid_stags.fetch_add(1, Ordering::Relaxed)
    }
    /// `n` unsignaled Sends wait now (posts are serialised by libiscsi's
    /// frwd_lock: a plain high-water mark).
    pub(crate) fn unsignaled_waiting(&self, n: u64) {
        if n > self.unsignaled_max.load(Ordering::Relaxed) {
            self.unsignaled_max.store(n, Ordering::Relaxed);
        }
    }
    pub(crate) fn sq_room_wait(&self) {
        self.sq_room_waits.fetch_add(1, Ordering::Relaxed);
    }
    #[cold]
    pub(crate) fn sq_early_signal(&self) {
        self.sq_early_signals.fetch_add(1, Ordering::Relaxed);
    }
    /// `n` send-queue entries in use by the transmit path (its posts are
    /// serialised: a plain high-water mark).
    #[inline]
    pub(crate) fn sq_in_use(&self, n: u64) {
        if n > self.sq_used_max.load(Ordering::Relaxed) {
            self.sq_used_max.store(n, Ordering::Relaxed);
        }
    }
    pub(crate) fn unsignaled_requeued(&self, n: u64) {
        self.unsignaled_requeued.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn rx_returned(&self) {
        self.rx_returned.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn rx_orphaned(&self) {
        self.rx_orphaned.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn post_error(&self) {
        self.err_post.fetch_add(1, Ordering::Relaxed);
    }
}

/// Live connections (endpoints) of the module.
pub(crate) fn live_conn(delta: i64) {
    params::live_add(params::Live::Conns, delta);
}

/// One more connection established since the module was loaded.
pub(crate) fn connect_established() {
    params::live_add(params::Live::Connects, 1);
}

/// Live QPs (with their CQ and PD).
pub(crate) fn live_qp(delta: i64) {
    params::live_add(params::Live::Qps, delta);
}

/// Live fast-registration MRs.
pub(crate) fn live_mr(delta: i64) {
    params::live_add(params::Live::Mrs, delta);
}
