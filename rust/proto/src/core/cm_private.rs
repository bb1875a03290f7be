//! RDMA CM private data exchanged at connection establishment on IB/RoCE
//! (`struct iser_cm_hdr`, `include/scsi/iser.h`).
//!
//! On InfiniBand/RoCE Linux peers do not exchange iSER Hello messages
//! (iSER §5.1.3 is iWARP practice); instead the connect request and the
//! accept carry a 4-byte header:
//!
//! ```text
//! byte 0: flags  ISER_ZBVA_NOT_SUP 0x80 | ISER_SEND_W_INV_NOT_SUP 0x40
//! bytes 1..4: reserved
//! ```
//!
//! The initiator (`iser_route_handler()`, `iser_verbs.c`) always sets
//! `ISER_ZBVA_NOT_SUP` (it advertises real virtual addresses) and sets
//! `ISER_SEND_W_INV_NOT_SUP` unless it can accept remote invalidation
//! (`iser_always_reg`). LIO (`isert_set_nego_params()`,
//! `isert_rdma_accept()`) answers with `ISERT_ZBVA_NOT_USED` and, when it
//! will not use Send with Invalidate, `ISERT_SEND_W_INV_NOT_USED` (same bit
//! values). tgt accepts without private data.

use super::wire;

/// Length of `struct iser_cm_hdr`.
pub const ISER_CM_HDR_LEN: usize = 4;
/// The sender does not support zero-based virtual addresses
/// (`ISER_ZBVA_NOT_SUP`, also `ISERT_ZBVA_NOT_USED` in an accept).
pub const ISER_ZBVA_NOT_SUP: u8 = 0x80;
/// The sender does not support Send with Invalidate
/// (`ISER_SEND_W_INV_NOT_SUP`, also `ISERT_SEND_W_INV_NOT_USED`).
pub const ISER_SEND_W_INV_NOT_SUP: u8 = 0x40;

/// The private data of the initiator's connect request
/// (`iser_route_handler()`): `ISER_ZBVA_NOT_SUP` always, plus
/// `ISER_SEND_W_INV_NOT_SUP` unless `remote_invalidation` is supported.
pub const fn initiator_request(remote_invalidation: bool) -> [u8; ISER_CM_HDR_LEN] {
    let mut flags = ISER_ZBVA_NOT_SUP;
    if !remote_invalidation {
        flags |= ISER_SEND_W_INV_NOT_SUP;
    }
    [flags, 0, 0, 0]
}

/// How the connection will operate, decided from the target's accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptTerms {
    /// The target addresses our buffers with zero-based VAs. Always `false`
    /// for this initiator: it declares `ISER_ZBVA_NOT_SUP`, so the target
    /// must use the advertised VAs.
    pub zero_based_va: bool,
    /// The target invalidates our STags with Send with Invalidate
    /// (iSER §7.3.2 SendInvSE). When `false` every STag is invalidated
    /// locally (see [`super::task`]).
    pub remote_invalidate: bool,
}

/// Decides the connection terms from the accept's private data
/// (`event->param.conn.private_data` on `RDMA_CM_EVENT_ESTABLISHED`).
///
/// * `requested_remote_invalidation`: what [`initiator_request`] was called
///   with;
/// * `private_data`: `None` if the CM delivered none. The CM pads private
///   data (IB REP carries a fixed-size block), so lengths above 4 are
///   normal: only byte 0 matters, the rest is ignored.
///
/// Rules:
/// * no private data, or fewer than 4 bytes (not a valid `iser_cm_hdr`):
///   neither ZBVA nor Send with Invalidate (tgt behaviour), the initiator
///   invalidates locally;
/// * otherwise remote invalidation is used only if we offered it **and**
///   the target did not set `ISER_SEND_W_INV_NOT_SUP`. This is stricter
///   than `iser_connected_handler()`, which ignores its own offer; a target
///   that sends with invalidate although we declared we do not support it
///   is then caught as [`super::ProtoError::UnexpectedRemoteInvalidation`].
///
/// Note the IB REP padding case: a target that sends no private data over
/// IB yields an all-zero block, which reads as "remote invalidation
/// supported". That is harmless: if no SendInvSE arrives, the STags are
/// still valid when the response comes and are invalidated locally.
pub fn accept_decision(
    requested_remote_invalidation: bool,
    private_data: Option<&[u8]>,
) -> AcceptTerms {
    let flags = match private_data {
        Some(pd) if pd.len() >= ISER_CM_HDR_LEN => wire::u8_at(pd, 0),
        _ => None,
    };
    match flags {
        None => AcceptTerms {
            zero_based_va: false,
            remote_invalidate: false,
        },
        Some(f) => AcceptTerms {
            zero_based_va: false,
            remote_invalidate: requested_remote_invalidation && f & ISER_SEND_W_INV_NOT_SUP == 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// iser.h + iser_route_handler(): ZBVA_NOT_SUP always, SEND_W_INV_NOT_SUP
    /// unless remote invalidation is supported.
    #[test]
    fn cm_request_flags() {
        assert_eq!(initiator_request(true), [0x80, 0, 0, 0]);
        assert_eq!(initiator_request(false), [0xc0, 0, 0, 0]);
    }

    /// tgt accepts without private data: local invalidation, no ZBVA.
    #[test]
    fn cm_accept_without_private_data() {
        let none = AcceptTerms {
            zero_based_va: false,
            remote_invalidate: false,
        };
        assert_eq!(accept_decision(true, None), none);
        assert_eq!(accept_decision(true, Some(&[])), none);
        assert_eq!(accept_decision(true, Some(&[0, 0, 0])), none);
    }

    /// LIO isert_rdma_accept(): ZBVA_NOT_USED | (SEND_W_INV_NOT_USED if it
    /// will not use remote invalidation); CM padding is ignored.
    #[test]
    fn cm_accept_lio() {
        let mut padded = [0u8; 196];
        padded[0] = 0x80;
        assert!(accept_decision(true, Some(&padded)).remote_invalidate);
        assert!(!accept_decision(true, Some(&padded)).zero_based_va);
        padded[0] = 0xc0;
        assert!(!accept_decision(true, Some(&padded)).remote_invalidate);
        // We did not offer it: never use it, whatever the target says.
        padded[0] = 0x00;
        assert!(!accept_decision(false, Some(&padded)).remote_invalidate);
        assert!(!accept_decision(false, Some(&padded)).zero_based_va);
    }
}
