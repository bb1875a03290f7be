// SPDX-License-Identifier: GPL-2.0
//! iser-rs: an iSCSI Extensions for RDMA (iSER) initiator.
//!
//! Crate root of the `iser_rs` module. Layers:
//! - [`proto`]: the protocol rules, pure and allocation-free (also built and
//!   fuzzed on the host from `rust/proto`).
//! - [`sys`]: thin wrappers over the C APIs; all `unsafe` lives there.
//! - [`driver`]: the initiator logic, safe Rust but for one call of the
//!   `unsafe fn` `CmId::new` (its handler pointer's lifetime is the
//!   connection's teardown order; see `driver::conn`).
//!
//! Teardown order (reverse of `init`): the transport is unregistered first,
//! so no new session can start while the rest goes away.

// `pin_init!` of `IserConn` (thirty-odd fields) expands deeper than the
// default limit of 128, and than 256.
#![recursion_limit = "512"]

mod driver;
#[path = "proto/src/core/mod.rs"]
#[allow(unused_imports, unreachable_pub, missing_docs)]
mod proto;
mod sys;

use kernel::c_str;
use kernel::prelude::*;

// The one kernel-version difference in the Rust source (the others are in
// Kbuild's "kernel-version differences"): 6.12's `module!` knows `author`,
// 6.13 added `authors: [..]` and 7.x knows only that.
#[cfg(not(iser_rs_module_authors))]
module! {
    type: IserRs,
    name: "iser_rs",
    author: "iser-rs developers",
    description: "iSER initiator (iSCSI Extensions for RDMA) in Rust",
    license: "GPL",
}
#[cfg(iser_rs_module_authors)]
module! {
    type: IserRs,
    name: "iser_rs",
    authors: ["iser-rs developers"],
    description: "iSER initiator (iSCSI Extensions for RDMA) in Rust",
    license: "GPL",
}

/// Fields drop in declaration order: the transport goes first, so no
/// connection posts once the fault-injection attribute is gone.
struct IserRs {
    _transport: sys::iscsi::Registration,
    _post_faults: sys::PostFaultInjection,
}

impl kernel::Module for IserRs {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let post_faults = sys::PostFaultInjection::new();
        let transport = sys::iscsi::Registration::new::<driver::transport::IserTransport>(
            module,
            c_str!("iser"),
        )?;
        pr_info!("iSER transport registered\n");
        Ok(IserRs {
            _transport: transport,
            _post_faults: post_faults,
        })
    }
}

impl Drop for IserRs {
    fn drop(&mut self) {
        pr_info!("iSER transport unregistering\n");
    }
}
