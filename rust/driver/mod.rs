// SPDX-License-Identifier: GPL-2.0
//! The driver logic: safe Rust over the wrapper layer in `crate::sys`.
//!
//! - [`transport`]: the `iser` transport's operations (iscsid's view).
//! - [`conn`]: one iSER connection: CM events, resources, receive path.
//! - [`task`]: per-command registration, sends, invalidation, cleanup.
//! - [`counters`]: statistics and live-object counts.

pub(crate) mod conn;
pub(crate) mod counters;
pub(crate) mod task;
pub(crate) mod transport;
