#!/usr/bin/env bash
# A command libiscsi's error handler holds while its RDMA device goes away.
# The peer stalls a READ; the SCSI timeout (5 s) sends ABORT TASK, which
# the peer, stopped (SIGSTOP) right after the stall, never answers, so the
# error handler keeps its reference to the command. The peer is then
# killed and `rdma link delete rxe0` removes and frees the device (the
# connection fails at the latest there). The error handler releases the
# command (cleanup_task) only later: when its TMF times out, the
# session's recovery does, or the session ends. The command's DMA
# mapping must not reach the freed device then: iser_rs unmaps every
# mapping of a connection when it tears the connection down, after its QP
# is destroyed and before it lets the device go. Two rounds: in the first
# the dead peer's disconnect makes the kernel's cleanup work tear the
# connection down (ep_disconnect) before the delete; in the second
# ep_disconnect is held up after it unbound the connection (iser_rs's
# test-only inject_disconnect_delay_ms, 20 s: with 5 s the teardown was over before the delete) and the delete's
# DEVICE_REMOVAL handler tears it down first, and must walk the commands
# itself (it skipped them when the unbinding came first: a review found
# that race). Before that, the release unmapped through the freed
# ib_device: KASAN reports a use-after-free on the debug kernel (the case
# is in its set, scripts/check DEBUG_CASES: KASAN reported it in
# iser_rs_dma_unmap_sg and dma_direct_unmap_sg before the fix); without
# KASAN the stale reads passed silently (rxe's device is a 4 KiB slab
# object: its page stays mapped when it is freed, and debug_pagealloc
# does not help), so on the test kernel the case reaches the path and
# checks what it can there: the delete finishes, the command ends in an
# error, the kernel log stays clean, and the module unloads with every
# live count 0.
. "$(dirname "$0")/../lib.sh"
restore() { # later cases need rxe0 and LIO's listener back, whatever happened
    [ -n "$PEER_PID" ] && kill -CONT "$PEER_PID" 2>/dev/null
    stop_peer quiet
    rdma link show rxe0/1 >/dev/null 2>&1 || { rdma link add rxe0 type rxe netdev veth0; target_relisten; }
    case_cleanup
}
setup_rdma rxe
REPLACEMENT_TIMEOUT=30 start_iscsid
load_initiator iser_rs
kmsg_watch_start
portal=$PEER_ADDR:$PEER_PORT
# held_read_round NAME DELAY_MS: one round (see the header); DELAY_MS is
# iser_rs's inject_disconnect_delay_ms for it.
held_read_round() {
    local name=$1 delay=$2 i kv
    echo "$delay" > /sys/module/iser_rs/parameters/inject_disconnect_delay_ms
    start_peer --mode stall --at 1000000000 --on read
    trap restore EXIT
    iscsiadm -m discovery -t st -p "$portal" -I iser >/dev/null || die "$name: discovery"
    # The TMF's own timeout, long enough for the kill and the delete below
    # to happen first on the KASAN kernel under TCG. No NOP-Out pings:
    # with one unanswered, libiscsi's SCSI timeout handler waits for the
    # ping instead of aborting, the ping's timeout fails the connection,
    # and every command is released with it (no error handler holds one:
    # the first form of this case found that).
    for kv in node.session.err_timeo.abort_timeout=30 \
        "node.conn[0].timeo.noop_out_interval=0" "node.conn[0].timeo.noop_out_timeout=0"; do
        iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser -o update \
            -n "${kv%%=*}" -v "${kv#*=}" >/dev/null || die "$name: node update $kv"
    done
    iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser --login >/dev/null || die "$name: login"
    disk=$(wait_disks | head -1); [ -n "$disk" ] || die "$name: no disk"
    dev=${disk#/dev/}
    echo 5 > /sys/block/$dev/device/timeout
    peer_stall_io Stall if="$disk" of=/dev/null bs=64k count=1 iflag=direct ||
        die "$name: the peer never stalled the READ"
    wl=$STALL_IO_PID
    kill -STOP "$PEER_PID"
    t0=$(now_ms)
    # The SCSI timeout fires 5 s after the READ was queued; the error
    # handler then sends ABORT TASK at once (rxe takes it into the stopped
    # peer's receive queue and acknowledges it).
    sleep 7
    local errs0; errs0=$(kmsg_count "detected conn error" 2>/dev/null)
    kill -KILL "$PEER_PID"
    wait "$PEER_PID" 2>/dev/null
    PEER_PID=
    if [ "$delay" != 0 ]; then
        # The dead peer's disconnect fails the connection, and the kernel's
        # cleanup work calls ep_disconnect, which now sleeps after it
        # unbound the connection (before libiscsi marks the session
        # FAILED): the delete's DEVICE_REMOVAL handler takes the teardown
        # first.
        for ((i = 0; i < 200; i++)); do
            [ "$(kmsg_count "detected conn error" 2>/dev/null)" -gt "$errs0" ] && break
            sleep 0.1
        done
        [ "$(kmsg_count "detected conn error" 2>/dev/null)" -gt "$errs0" ] || die "$name: no connection error after the peer was killed"
        sleep 1
    fi
    timeout 120 rdma link delete rxe0 || die "$name: rdma link delete rxe0 did not finish in 120 s (status $?)"
    log "$name: device deleted $(( $(now_ms) - t0 )) ms after the stall"
    wait_sess FAILED 1 20 >/dev/null || die "$name: session still $(sess_states) after the device removal"
    # The error handler lets the READ go when the TMF (30 s) or the
    # session's recovery (replacement_timeout 30 s) times out: dd ends
    # with an error.
    wait "$wl"; rc=$?
    log "$name: dd of the held READ ended $(( $(now_ms) - t0 )) ms after the stall, rc $rc"
    [ "$rc" != 124 ] || die "$name: the held READ never ended"
    [ "$rc" != 0 ] || die "$name: the held READ succeeded with the device gone"
    sleep 2
    timeout 60 iscsiadm -m node --logoutall=all >/dev/null 2>&1
    [ -z "$(sess_states)" ] || die "$name: sessions left after logout without a device: $(sess_states)"
    wait_live_zero || die "$name: live objects after logout: $(live_counts)"
    rdma link add rxe0 type rxe netdev veth0 || die "$name: rdma link add rxe0"
    # LIO's iSER listener went with the device: the cases after this one
    # log in to LIO (054 failed at its login without this, 2026-12-01).
    target_relisten || die "$name: LIO listener"
    sleep 2
}
held_read_round "teardown first" 0
held_read_round "device removal first" 20000
timeout 30 rmmod iser_rs || die "rmmod iser_rs after device removal"
kmsg_watch_check || die "kernel report"
