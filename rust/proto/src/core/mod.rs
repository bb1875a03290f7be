//! Pure iSER/iSCSI protocol core (no `std`, no allocation, no `unsafe`, no
//! panics on any input).
//!
//! This directory is compiled twice: as the host crate `iser_proto` (through
//! `rust/proto/src/lib.rs`) and as the `proto` module of the kernel crate.
//! Paths inside therefore only use `super::`/`self::`, never `crate::`.
//!
//! Specifications cited throughout:
//! * draft-ietf-ips-iser-06 (became RFC 5046, now RFC 7145), cited as
//!   "iSER §x.y";
//! * RFC 7143 (iSCSI, consolidated), cited as "RFC 7143 §x.y";
//! * Linux practice (`include/scsi/iser.h`, `drivers/infiniband/ulp/iser`,
//!   `drivers/infiniband/ulp/isert`, `drivers/scsi/libiscsi.c`) where real
//!   peers deviate from or refine the RFCs.
//!
//! Module map:
//! * [`error`]: [`ProtoError`] and its mapping to `enum iscsi_err`;
//! * [`iser_hdr`]: the 28-byte iSER header, Hello/HelloReply;
//! * [`cm_private`]: the 4-byte RDMA CM private data (`iser_cm_hdr`);
//! * [`bhs`]: parsing/validation of PDUs a target sends ([`bhs::TargetPdu`]);
//! * [`login_keys`]: the transport's `set_param` policy (digests, markers);
//! * [`task`]: the per-command STag invalidation state machine.

pub mod bhs;
pub mod cm_private;
pub mod error;
pub mod iser_hdr;
pub mod login_keys;
pub mod task;
mod wire;

pub use self::error::{IscsiErr, ProtoError, ProtoResult};
