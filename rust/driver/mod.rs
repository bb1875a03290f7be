// SPDX-License-Identifier: GPL-2.0
//! The driver logic: safe Rust over the wrapper layer in `crate::sys`.
//!
//! - [`transport`]: the `iser` transport's operations.

pub(crate) mod transport;
