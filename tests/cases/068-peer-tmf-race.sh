#!/usr/bin/env bash
# SCSI Response and TMF Response back to back, RACES (200) times per
# variant: the peer stalls BURST (32) READ/WRITEs in a row every EVERY
# (96) data commands of fio verify runs at iodepth 32 (so the whole queue
# is stalled at once; the initiator's retry of a stalled command is never
# stalled again), the 1 s SCSI timeout sends ABORT TASK for each of them
# (libiscsi: one TMF at a time per session, back to back), and the peer
# answers each with the command's SCSI Response and then Function
# Complete in the same breath. With Send with Invalidate the response
# completes at once; without (--no-send-inv) it waits for its local
# invalidation while the TMF Response waits for the TMF's own
# invalidations: both held responses must be delivered or handed back.
# Checks per variant: at least RACES races within LIMIT (240) s, fio
# verify clean, no reconnect, no kernel report (the runner), the receive
# ring whole once nothing is in flight (rx_posted - rx_completed = 144,
# read for up to 30 s after fio returns: no buffer lost with a held
# response), no command released while one of its STags was
# still valid (released_valid_stags 0; a counter the driver does not have
# reads 0), and nothing left registered after the logout (live counts 0).
. "$(dirname "$0")/../lib.sh"
# INITIATOR=ib_iser runs the same against the C driver: reconnects are
# then counted at the peer, and the iser_rs-only counters are not checked.
ini=${INITIATOR:-iser_rs}
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator "$ini"
RACES=${RACES:-200}
LIMIT=${LIMIT:-240}
BURST=${BURST:-32} EVERY=${EVERY:-96}
RX_RING=144
for variant in send-inv no-send-inv; do
    opts=(--mode stall --at 100 --every "$EVERY" --burst "$BURST" --race-tmf)
    [ $variant = no-send-inv ] && opts+=(--no-send-inv)
    start_peer "${opts[@]}"
    disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "login ($variant)"
    echo 1 > /sys/block/${disk#/dev/}/device/timeout
    c0=$(iser_connects) p0=$(peer_stat connections)
    t0=$(date +%s)
    passes=0
    # 16 KiB: a WRITE has a Write STag too (8 KiB of immediate data, the
    # rest fetched by RDMA Read).
    while [ "$(peer_stat tmf_races)" -lt "$RACES" ] && [ $(( $(date +%s) - t0 )) -lt "$LIMIT" ]; do
        passes=$((passes + 1))
        peer_fio_verify "$disk" --rw=randwrite --bs=16k --iodepth=32 --size=4M ||
            { cat /tmp/peer-fio.log; die "fio verify during the races ($variant, pass $passes)"; }
    done
    secs=$(( $(date +%s) - t0 ))
    races=$(peer_stat tmf_races)
    # The ring must be whole once nothing is in flight. fio returned, but
    # I/O from outside fio (udev probing the disk) may be stalled by the
    # peer as well and be in its abort race right now, its responses held
    # for their invalidations: short for a moment, not lost. So the ring
    # is read until it is whole, for up to 30 s; a lost buffer never comes
    # back. (A held buffer whose command is released goes back to the ring
    # at once, `return_rx`, not at the next receive; counted as
    # rx_returned, which stayed 0 in every race so far: the held SCSI
    # Response was always delivered before the TMF Response released its
    # command.)
    RING_FIRST="$variant: as fio returned (stalls $(peer_stat mode_events), aborts $(peer_stat aborts))" ring_settle 30
    held=$RING_HELD waited=$RING_WAITED
    rvs=$(session_stat released_valid_stags)
    ret=$(session_stat rx_returned)
    rec=$(( $(iser_connects) - c0 ))
    [ "$ini" = iser_rs ] || rec=$(( $(peer_stat connections) - p0 ))
    log "$variant: $races SCSI+TMF Response races in $secs s ($passes fio passes), $(peer_stat mode_events) stalls, $(peer_stat aborts) aborts, $(peer_stat tmfs) TMFs, reconnects $rec, ring holds $held after ${waited} s (rx_posted $(session_stat rx_posted), rx_completed $(session_stat rx_completed)), deferred $(session_stat deferred_completions), tmf_invalidations $(session_stat tmf_invalidations), local_invalidations $(session_stat local_invalidations), released_valid_stags $rvs, held responses whose command was released first $ret (rx_returned)"
    logout_all
    if [ "$ini" = iser_rs ]; then wait_live_zero || die "live objects after logout ($variant): $(live_counts)"; fi
    stop_peer quiet
    [ "$races" -ge "$RACES" ] || die "$variant: only $races races in $secs s (limit $LIMIT s)"
    [ "$rec" = 0 ] || die "$variant: $rec reconnects"
    [ "$ini" != iser_rs ] || [ "$held" = "$RX_RING" ] || die "$variant: the receive ring holds $held buffers 30 s after fio returned, not $RX_RING"
    [ "$ini" != iser_rs ] || [ "$rvs" = 0 ] || die "$variant: $rvs commands released while one of their STags was still valid"
done
rmmod "$ini" || die "rmmod $ini"
