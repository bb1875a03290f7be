#!/usr/bin/env bash
# The userspace iSER peer (tools/iser-peer) as target over rxe, polite mode:
# iser_rs logs in (discovery over iSER too), fio crc32c verify at 512 B ..
# 1 MiB with iodepth 1 and 32, the peer sees Send with Invalidate used,
# logout and rmmod leave nothing behind. Then the same with the peer
# accepting without any CM private data (as tgt does): iser_rs must
# invalidate locally and still pass.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
start_iscsid
load_initiator iser_rs
start_peer
disk=$(peer_login iser | head -1); [ -n "$disk" ] || { dmesg | tail -20; stop_peer; die "login to the peer over rxe0"; }
for bs in 512 4k 64k 1M; do
    case $bs in 512) size=1M ;; 4k) size=4M ;; *) size=16M ;; esac
    for qd in 1 32; do
        peer_fio_verify "$disk" --rw=randwrite --bs=$bs --iodepth=$qd --size=$size ||
            { cat /tmp/peer-fio.log; die "fio verify bs=$bs iodepth=$qd"; }
    done
done
log "bs 512..1M, iodepth 1 and 32: verify clean"
iscsiadm -m session -s | grep -E "remote_invalidations|local_invalidations|err_" | sed 's/^/# /'
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
stop_peer
[ "$(peer_stat send_inv)" -gt 0 ] || die "the peer never used Send with Invalidate"
[ "$(peer_stat completion_errors)" = 0 ] || die "completion errors at the peer"

start_peer --no-private-data
disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "login (accept without private data)"
peer_fio_verify "$disk" --rw=randwrite --bs=64k --iodepth=16 --size=8M ||
    { cat /tmp/peer-fio.log; die "fio verify, no private data"; }
li=$(iscsiadm -m session -s | sed -n 's/.*local_invalidations: *//p' | head -1)
log "no private data: verify clean, local_invalidations=$li"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
rmmod iser_rs || die "rmmod iser_rs"
stop_peer
[ "$(peer_stat send_inv)" = 0 ] || die "Send with Invalidate used without private data"
