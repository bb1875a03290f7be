// SPDX-License-Identifier: GPL-2.0
//! The wrapper layer: every `unsafe` of iser-rs lives below this module.
//!
//! Each submodule owns one C API and exposes it as safe Rust types whose
//! invariants carry the C rules (lifetimes, contexts, ownership). C callback
//! tables are traits here, bridged by `extern "C"` trampolines.
//!
//! - [`iscsi`]: scsi_transport_iscsi + libiscsi (transport registration).

pub(crate) mod bindings;
pub(crate) mod iscsi;
