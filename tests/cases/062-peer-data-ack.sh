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
devs="rxe siw"
if have_siw; then setup_siw; else devs=rxe; log "this kernel has no siw: over rxe only"; fi
start_iscsid
load_initiator iser_rs
# Over siw this needs the test kernel's siw fix
# (scripts/kernel-patches/0002-siw-zero-length-read-response-from-irq.diff):
# unpatched, a zero-length Read answered while the initiator's QP is busy
# sending carries that Send's 76 stale bytes and the connection drops.
for dev in $devs; do
    if [ $dev = siw ]; then PEER_ADDR=$SIW_IP4 PEER_PORT=3260; else PEER_ADDR=$TGT_IP4 PEER_PORT=3261; fi
    start_peer --data-ack --erl 1
    portal=$PEER_ADDR:$PEER_PORT
    iscsiadm -m discovery -t st -p "$portal" -I iser >/dev/null || die "discovery ($dev)"
    iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser -o update -n node.session.iscsi.ERL -v 1 ||
        die "cannot set node.session.iscsi.ERL"
    iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser --login >/dev/null || die "login ($dev)"
    disk=$(wait_disks | head -1)
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
