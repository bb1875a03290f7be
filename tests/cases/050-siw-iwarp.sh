#!/usr/bin/env bash
# iWARP (soft-iWARP, siw): iser_rs logs in to the project's userspace iSER
# target (tools/iser-peer) on siw0, the disk appears, fio crc32c verify
# passes at 512 B .. 1 MiB with iodepth 1 and 32, logout and rmmod leave
# no live object. (LIO cannot serve here: enabling iSER on a portal whose
# TCP listener holds the same address and port fails with EADDRINUSE on
# iWARP, which shares the TCP port space.)
. "$(dirname "$0")/../lib.sh"
setup_siw
start_iscsid
load_initiator iser_rs
PEER_ADDR=$SIW_IP4 PEER_PORT=3260
start_peer
disk=$(peer_login iser | head -1)
if [ -z "$disk" ]; then
    dmesg | grep -E "iser_rs|siw" | tail -8
    stop_peer
    # Diagnosis only (the case fails either way): does it work when the
    # peer does not use Send with Invalidate?
    logout_all; wait_live_zero
    start_peer --no-send-inv
    d2=$(peer_login iser | head -1)
    log "diagnosis: with --no-send-inv the login $([ -n "$d2" ] && echo succeeds || echo fails too)"
    logout_all; stop_peer quiet
    die "login to the peer over siw0 failed (with --no-send-inv it $([ -n "$d2" ] && echo succeeds || echo fails too))"
fi
log "iser_rs over siw0: $disk ($(cat /sys/block/${disk#/dev/}/size) sectors)"
for bs in 512 4k 64k 1M; do
    case $bs in 512) size=1M ;; 4k) size=4M ;; *) size=16M ;; esac
    for qd in 1 32; do
        peer_fio_verify "$disk" --rw=randwrite --bs=$bs --iodepth=$qd --size=$size ||
            { cat /tmp/peer-fio.log; die "fio verify bs=$bs iodepth=$qd over siw"; }
    done
    log "bs=$bs size=$size iodepth 1 and 32: verify clean"
done
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
rmmod iser_rs || die "rmmod iser_rs"
stop_peer
[ "$(peer_stat logins)" -ge 1 ] || die "the peer saw no login"
[ "$(peer_stat completion_errors)" = 0 ] || die "completion errors at the peer"
rdma link delete siw0
