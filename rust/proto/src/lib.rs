//! `iser_proto`: the pure protocol core of the iser-rs iSER initiator.
//!
//! Everything protocol-related that can be decided from bytes alone lives
//! here: the iSER header and Hello messages, the RDMA CM private data, the
//! iSCSI Basic Header Segment of PDUs received from a target, the
//! transport's `set_param` policy and the per-task STag invalidation state
//! machine. Only rules the module runs live here: iscsid negotiates the
//! login keys, libiscsi segments unsolicited data and checks ITTs.
//!
//! The code is `no_std`, allocation-free, free of `unsafe` and free of
//! panics on any input. The actual implementation lives in `src/core/`; the
//! kernel module compiles the very same files as a module of its own crate
//! root (`#[path = "proto/src/core/mod.rs"] pub mod proto;` in
//! `rust/iser_rs_main.rs`). That is why this file only holds crate-level
//! attributes and the re-export: files under `core/` never use `crate::`
//! paths and carry no crate-level attributes.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

#[cfg(test)]
extern crate std;

#[path = "core/mod.rs"]
mod core_impl;

pub use core_impl::*;
