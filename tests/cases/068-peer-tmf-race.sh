#!/usr/bin/env bash
# SCSI Response and TMF Response back to back: the peer stalls a command
# (every 60th READ/WRITE of fio verify runs, from the 100th), the SCSI timeout (2 s) sends
# ABORT TASK, and the peer answers with the command's SCSI Response and
# then Function Complete in the same breath. With Send with Invalidate the
# response completes at once; without (--no-send-inv) it waits for its
# local invalidation while the TMF Response waits for the TMF's own
# invalidations: both held responses must be delivered or handed back.
# Checks: at least RACES races per variant, fio verify clean, no reconnect,
# no kernel report (the runner), and the receive ring intact when idle
# (rx_posted - rx_completed = 144, RX_RING: no buffer lost with a held
# response).
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator iser_rs
RACES=${RACES:-8}
RX_RING=144
for variant in send-inv no-send-inv; do
    opts=(--mode stall --at 100 --every 60 --race-tmf)
    [ $variant = no-send-inv ] && opts+=(--no-send-inv)
    start_peer "${opts[@]}"
    disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "login ($variant)"
    echo 2 > /sys/block/${disk#/dev/}/device/timeout
    c0=$(iser_connects)
    t0=$(date +%s)
    while [ "$(peer_stat tmf_races)" -lt "$RACES" ] && [ $(( $(date +%s) - t0 )) -lt 240 ]; do
        peer_fio_verify "$disk" --rw=randwrite --bs=8k --iodepth=8 --size=1M ||
            { cat /tmp/peer-fio.log; die "fio verify during the races ($variant)"; }
    done
    races=$(peer_stat tmf_races)
    sleep 7 # idle, past one NOP-Out interval
    held=$(( $(session_stat rx_posted) - $(session_stat rx_completed) ))
    rec=$(( $(iser_connects) - c0 ))
    log "$variant: $races SCSI+TMF Response races, $(peer_stat aborts) aborts, reconnects $rec, ring holds $held (rx_posted $(session_stat rx_posted), rx_completed $(session_stat rx_completed)), deferred $(session_stat deferred_completions), tmf_invalidations $(session_stat tmf_invalidations)"
    logout_all
    wait_live_zero || die "live objects after logout ($variant): $(live_counts)"
    stop_peer quiet
    [ "$races" -ge "$RACES" ] || die "$variant: only $races races in 240 s"
    [ "$rec" = 0 ] || die "$variant: $rec reconnects"
    [ "$held" = "$RX_RING" ] || die "$variant: the receive ring holds $held buffers when idle, not $RX_RING"
done
rmmod iser_rs || die "rmmod iser_rs"
