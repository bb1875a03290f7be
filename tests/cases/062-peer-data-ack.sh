#!/usr/bin/env bash
# Data-ack path (spec 004, the zero-length RDMA Read): with
# ErrorRecoveryLevel 1 negotiated, the peer follows the RDMA Writes of
# every Data-In burst that would carry the A-bit with a zero-length RDMA
# Read to the initiator and sends the status only after that Read
# completed. iser_rs's QP must serve the Reads by itself (responder
# resources); fio crc32c verify must be clean and the peer must have
# counted the Reads. Over rxe and over siw.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_siw
start_iscsid
load_initiator iser_rs
# siw is left out for now: the peer's zero-length RDMA Read over siw ends in
# a TERMINATE ("siw: [QP n]: rresp len: 76 != 0", layer 1 type 1 code 1) and
# the connection drops (seen 2026-11-22, cause open). Reported as a SKIP
# naming it below, never as a pass.
for dev in rxe; do
    if [ $dev = siw ]; then PEER_ADDR=$SIW_IP4 PEER_PORT=3260; else PEER_ADDR=$TGT_IP4 PEER_PORT=3261; fi
    start_peer --data-ack --erl 1
    portal=$PEER_ADDR:$PEER_PORT
    iscsiadm -m discovery -t st -p "$portal" -I iser >/dev/null || die "discovery ($dev)"
    iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser -o update -n node.session.iscsi.ERL -v 1 ||
        die "cannot set node.session.iscsi.ERL"
    iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser --login >/dev/null || die "login ($dev)"
    disk=$(wait_disks | head -1)
    if [ -z "$disk" ] && [ $dev = siw ] && dmesg | grep -q "iser_rs: receive failed, status 9"; then
        # Not a data-ack result: the connection died at its first Send with
        # Invalidate (tests/lib.sh). The rxe part above stands; say so.
        log "siw: NOT RUN: $SIW_SENDINV_KNOWN"
        logout_all; stop_peer quiet
        siw_skipped=1
        break
    fi
    [ -n "$disk" ] || die "no disk ($dev)"
    if ! grep -q "normal, ERL 1" "$PEER_LOG"; then
        # open-iscsi did not offer ErrorRecoveryLevel=1: have the peer act
        # as if the A-bit were set on every burst anyway.
        log "$dev: ERL 1 not negotiated ($(grep -o 'ErrorRecoveryLevel=[0-9]*' "$PEER_LOG" | head -1 || echo 'no ErrorRecoveryLevel key')); peer restarted with --data-ack-always"
        logout_all; wait_live_zero || die "live objects: $(live_counts)"; stop_peer quiet
        start_peer --data-ack-always --erl 1
        disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "login ($dev, data-ack-always)"
    fi
    for bs in 4k 256k 1M; do
        peer_fio_verify "$disk" --rw=randwrite --bs=$bs --iodepth=8 --size=8M ||
            { cat /tmp/peer-fio.log; die "fio verify bs=$bs with data-ack ($dev)"; }
    done
    logout_all
    wait_live_zero || die "live objects after logout: $(live_counts)"
    stop_peer
    acks=$(peer_stat data_acks) reads=$(peer_stat reads)
    log "$dev: $reads READs, $acks zero-length RDMA Reads completed, verify clean"
    [ "$acks" -ge "$reads" ] && [ "$reads" -gt 0 ] || die "$dev: $acks data-acks for $reads reads"
    [ "$(peer_stat completion_errors)" = 0 ] || die "$dev: completion errors at the peer"
done
rmmod iser_rs || die "rmmod iser_rs"
[ -z "${siw_skipped:-}" ] || skip "data-ack verified over rxe only; siw: $SIW_SENDINV_KNOWN"
skip "data-ack verified over rxe; over siw the zero-length RDMA Read ends in a TERMINATE (rresp len 76 != 0): known failure, open"
