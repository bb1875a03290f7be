// SPDX-License-Identifier: GPL-2.0
//! The driver logic: safe Rust over the wrapper layer in `crate::sys`.
//!
//! - [`transport`]: the `iser` transport's operations (iscsid's view).
//! - [`conn`]: one iSER connection: CM events, resources, receive path.
//! - [`task`]: per-command registration, sends, invalidation, cleanup.
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
pub(crate) mod task;
pub(crate) mod transport;
