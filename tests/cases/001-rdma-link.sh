#!/usr/bin/env bash
# The harness itself: soft-RoCE and soft-iWARP devices come up on the
# guest's veth and carry RDMA CM traffic (rping, userspace verbs).
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
rdma link show rxe0/1 | grep -q ACTIVE || die "rxe0 not ACTIVE"
rping -s -a $TGT_IP4 -C 3 -v >/dev/null 2>&1 &
srv=$!
# The server may take a while to listen on a loaded TCG guest: retry.
ok=0
for ((i = 0; i < 10; i++)); do
    sleep 1
    rping -c -a $TGT_IP4 -C 3 -v -S 64 >/tmp/rping.out 2>&1 && { ok=1; break; }
done
[ $ok = 1 ] || { cat /tmp/rping.out; die "rping over rxe0"; }
wait $srv || die "rping server"
if have_siw; then
    rdma link add siw0 type siw netdev veth0 || die "siw0"
    rdma link show siw0/1 | grep -q ACTIVE || die "siw0 not ACTIVE"
    rdma link delete siw0
    log "rxe0 and siw0 up, rping over rxe0 ok"
else
    log "rxe0 up, rping over rxe0 ok (this kernel has no siw)"
fi
