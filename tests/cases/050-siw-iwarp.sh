#!/usr/bin/env bash
# iWARP (soft-iWARP, siw): iser_rs over siw needs an iSER target on iWARP.
# LIO cannot enable iSER on a portal whose TCP listener holds the same
# address and port (EADDRINUSE); the project's own userspace test peer
# (tools/, a later issue) will serve here. Until then this case is skipped,
# after checking the part that can be checked: siw comes up on the veth.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
rdma link add siw0 type siw netdev veth0 || die "siw0"
rdma link show siw0/1 | grep -q ACTIVE || die "siw0 not ACTIVE"
rdma link delete siw0
skip "no iSER target for iWARP yet (LIO: EADDRINUSE; the test peer is not built yet)"
