// SPDX-License-Identifier: GPL-2.0
//! The `iser` iSCSI transport: what iscsid's requests do.

use crate::sys::iscsi::TransportOps;

/// The `iser` transport. Operations not overridden here are refused with
/// `EOPNOTSUPP` by the trait defaults.
pub(crate) struct IserTransport;

impl TransportOps for IserTransport {}
