// SPDX-License-Identifier: GPL-2.0
//! The driver logic: safe Rust over the wrapper layer in `crate::sys`.
//!
//! Files, each naming only those below it (`scripts/import-graph` checks
//! that no two name each other):
//! - [`transport`]: the `iser` transport's operations (iscsid's view).
//! - [`xmit`]: the transmit path and Send completions.
//! - [`recv`]: the receive path (receive completions, held Login/Text
//!   Responses).
//! - [`task`]: per-command state, the completion rules (STag
//!   invalidation, Send completion, TMF), and task cleanup.
//! - [`conn`]: one iSER connection: CM events, publishing its resources,
//!   receive buffers, the login window, teardown.
//! - [`resources`]: what a connection allocates, and its pools.
//! - [`limits`]: queue and pool budgets, with their derivation.
//! - [`counters`]: statistics and live-object counts.

/// Messages gated by the `debug_level` module parameter, as ib_iser's
/// `iser_info` (level > 1) and `iser_dbg` (level > 2); both print at
/// KERN_INFO (the kernel crate's `pr_debug!` prints only in builds with
/// debug assertions). Errors and the connection's life events are logged
/// whatever the level.
macro_rules! iser_info {
    ($($arg:tt)*) => {
        if $crate::sys::params::param_debug_level() > 1 {
            pr_info!($($arg)*);
        }
    };
}

/// See [`iser_info`].
macro_rules! iser_dbg {
    ($($arg:tt)*) => {
        if $crate::sys::params::param_debug_level() > 2 {
            pr_info!($($arg)*);
        }
    };
}

pub(crate) mod conn;
pub(crate) mod counters;
pub(crate) mod limits;
pub(crate) mod recv;
pub(crate) mod resources;
pub(crate) mod task;
pub(crate) mod transport;
pub(crate) mod xmit;
