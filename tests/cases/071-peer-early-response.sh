#!/usr/bin/env bash
# A SCSI Response for a command the initiator has not sent yet. libiscsi
# makes a command findable by its ITT when it allocates it, before the
# transport's xmit posts it: a response naming it then completed it (its
# pages back to the block layer) while xmit was still registering those
# pages and advertising them (found by reading; before the fix the first
# round read wrong data or crashed the guest). The peer (mode early-rsp)
# answers one READ and, --probe-delay-ms (300) later, sends a SCSI Response
# (GOOD, no data) for the session's next task, which a dd at queue depth 1
# (NOP-Out interval and timeout 0: nothing else takes a task, and
# libiscsi's transport timer is off, see below) has just handed to xmit,
# where fault injection holds it until the receive path met the early
# response, at most EARLY_STALL_MS (3000) ms (the READ the peer answers
# first meets nothing and is held the whole time); the stall that met it
# turns the stall off for the commands after it. Four rounds:
#  - stall: held before xmit marks the command in transmission. The
#    response names a command not on the wire: iser_rs refuses it without
#    touching the command ("whose command is not on the wire"), the
#    connection fails and comes back, the READ is retried there, and dd
#    reads back exactly what was written.
#  - posting: held after the mark, before the post. The response waits
#    for the post (logged at debug_level 2: "came while its command was
#    being sent") and is then handled as any response: the READ's STag is
#    invalidated locally before the command completes (the target lied:
#    GOOD without data; the block's content is not checked).
#  - bound: held after the mark as in posting, with the receive path's
#    wait for a post lowered from 5 s (XMIT_WAIT_MS) to 300 ms by the
#    test parameter inject_xmit_wait_ms. The response gives up waiting
#    ("waited 300 ms for its command's post"), is refused as in stall,
#    the connection fails and comes back, and dd reads back what was
#    written.
#  - nextkey: held as in posting (bound 1000 ms), the peer in mode
#    early-inv: the early response carries a Send with Invalidate naming
#    the next task's MR by its next key (the STag the peer last saw for
#    that task, key byte plus one: what the REG_MR that xmit is about to
#    post will make it; a dd of 508 reads, four turns of the session's
#    127 command tasks, first cycles the pool so every task's STag was
#    seen, and checks the peer's rule on them: at least 381 STags as
#    predicted, none other). The device must refuse it: rxe
#    compares the key with the MR's registered one, fails the receive
#    (IB_WC_REM_INV_REQ_ERR, "receive failed, status 9") and the QP, so
#    the receive path never sees the response (the stall is not met and
#    runs to its bound: checked, at least 900 of its 1000 ms), the
#    connection fails and comes back, and dd reads back what was
#    written. The read's lock-free settle on its MR (design.rst) relies
#    on that refusal; this round tests it on rxe with the Send with
#    Invalidate sent before xmit bumps the key and arms the settle (the
#    stall holds xmit there), not in the window between the arm and the
#    post (limitations.rst). rxe reports any refused invalidation with
#    status 9: that the key sent was the next one rests on the peer's
#    rule, checked on the pool-cycling reads.
# The stall, posting and bound rounds check that the stall met their early
# response (module parameter xmit_stall_last_met); every round logs how
# long its last stall lasted. Until
# 2026-12-03 only the NOP-Out interval was 0: libiscsi then still armed
# its transport timer (recv_tmo not 0), whose softirq spins on the session's
# frwd_lock, which the stalled xmit holds. Fired during a stall, it kept
# the other CPU from running anything else (the peer, the receive path:
# a backtrace of that CPU taken in the stall showed it), the early
# response was not heard until the stall ended, and the case failed at
# random (limitations.rst). Each round now checks that the timer is off.
# Any other command submitted during a stall would spin on that lock the
# same way: the case lets udev settle before the dd.
# The case passed on the debug kernel with its first three rounds
# (2026-12-03, 485 s; the nextkey round came later and has not run there);
# it is not in the debug set, for time.
# All rounds: no kernel report, no command released with a valid STag
# (released_valid_stags 0), the session LOGGED_IN again, and a fio verify
# after it clean.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
REPLACEMENT_TIMEOUT=30 start_iscsid
load_initiator iser_rs
P=/sys/module/iser_rs/parameters
portal=$PEER_ADDR:$PEER_PORT
dd if=/dev/urandom of=/tmp/early.pat bs=4k count=4 status=none
kmsg=/tmp/early-kmsg.log
for round in stall posting bound nextkey; do
    mode=early-rsp
    [ $round = nextkey ] && mode=early-inv
    start_peer --mode $mode --at 1000000000 --on read --probe-delay-ms 300
    iscsiadm -m discovery -t st -p "$portal" -I iser >/dev/null || die "$round: discovery"
    for key in noop_out_interval noop_out_timeout; do
        iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser -o update \
            -n "node.conn[0].timeo.$key" -v 0 >/dev/null || die "$round: node update"
    done
    iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser --login >/dev/null || die "$round: login"
    disk=$(wait_disks | head -1); [ -n "$disk" ] || die "$round: no disk"
    # libiscsi's transport timer takes the frwd_lock that the stalled xmit
    # holds: armed, it spins on the other CPU in softirq, and nothing
    # there (the peer, the receive path) runs until the stall ends.
    for f in /sys/class/iscsi_connection/connection*/recv_tmo /sys/class/iscsi_connection/connection*/ping_tmo; do
        [ "$(cat "$f")" = 0 ] || die "$round: libiscsi's transport timer is armed ($f: $(cat "$f"))"
    done
    dd if=/tmp/early.pat of="$disk" bs=4k count=4 seek=64 oflag=direct conv=notrunc status=none ||
        die "$round: pattern write"
    udevadm settle 2>/dev/null; sleep 1
    if [ $round = nextkey ]; then
        # Every command task of the pool sends a read, so the peer has
        # seen the STag of the task the early response names. The pool
        # holds cmds_max (128 by default) tasks, one of them libiscsi's
        # login task (limits.rs: "+1 login"): commands turn over 127. A
        # multiple of that (4 x 127) leaves the dd below on the task
        # indices the other rounds use.
        dd if="$disk" of=/dev/null bs=4k count=508 iflag=direct status=none || die "nextkey: pool-cycling reads"
        # The peer's prediction (last STag of the task, key byte plus one)
        # checked on every command that followed another on its task: a
        # wrong rule would make the device refuse a key that is not the
        # next one, and the round would prove nothing. At least 508 - 127
        # = 381 of the reads follow another on their task. The peer
        # writes its counters at most every 200 ms: read after that.
        sleep 0.5
        hits=$(peer_stat next_key_hits) misses=$(peer_stat next_key_misses)
        log "nextkey: next-key predictions on the pool-cycling reads: $hits right, $misses wrong"
        [ "$hits" -ge 381 ] && [ "$misses" = 0 ] ||
            die "nextkey: the peer's next-key rule does not hold ($hits right, $misses wrong)"
    fi
    c0=$(iser_connects)
    dmesg -W > "$kmsg" 2>&1 &
    kmsg_pid=$!
    [ $round = posting ] && echo 2 > $P/debug_level
    param=inject_xmit_stall_ms stall_ms=${EARLY_STALL_MS:-3000}
    [ $round = stall ] || param=inject_xmit_posting_stall_ms
    # Nothing ends the nextkey round's stalls early (the response never
    # reaches the receive path): a shorter bound.
    [ $round = nextkey ] && stall_ms=1000
    [ $round = bound ] && { echo 300 > $P/inject_xmit_wait_ms || die "bound: no parameter inject_xmit_wait_ms"; }
    echo $stall_ms > $P/$param || die "$round: no parameter $param"
    echo 0 > $P/xmit_stall_last_ms; echo N > $P/xmit_stall_last_met
    kill -USR1 "$PEER_PID"; sleep 0.3
    timeout 120 dd if="$disk" of=/tmp/early.got bs=4k count=4 skip=64 iflag=direct status=none
    rc=$?
    met=$(cat $P/xmit_stall_last_met) held=$(cat $P/xmit_stall_last_ms)
    echo 0 > $P/inject_xmit_stall_ms; echo 0 > $P/inject_xmit_posting_stall_ms; echo 0 > $P/inject_xmit_wait_ms
    echo 0 > $P/debug_level
    wait_logged_in 60 || die "$round: session not LOGGED_IN again"
    peer_fio_verify "$disk" --rw=randwrite --bs=8k --iodepth=8 --size=2M ||
        die "$round: fio verify after the early response: $(grep -m1 -E 'err=|bad |mismatch' /tmp/peer-fio.log)"
    sleep 0.5; kill "$kmsg_pid" 2>/dev/null; wait "$kmsg_pid" 2>/dev/null
    rvs=$(session_stat released_valid_stags)
    rec=$(( $(iser_connects) - c0 ))
    early=$(peer_stat early_rsps) early_inv=$(peer_stat early_inv_rsps)
    log "$round: dd rc $rc, early responses sent $early (with a predicted next key $early_inv), last stall $held ms (met the early response: $met), reconnects $rec, released_valid_stags $rvs, peer completion errors $(peer_stat completion_errors), dmesg: $(grep -aE 'not on the wire|being sent|given up|connection failed|receive failed' "$kmsg" | head -3 | sed 's/^\[[ 0-9.]*\] //' | tr '\n' '|' | cut -c1-400)"
    logout_all
    wait_live_zero || die "$round: live objects after logout: $(live_counts)"
    stop_peer quiet
    [ "$early" -ge 1 ] || die "$round: the peer sent no early response"
    [ "$rvs" = 0 ] || die "$round: $rvs commands released with a valid STag"
    [ "$met" = Y ] || [ $round = nextkey ] || die "$round: the early response was not met during the $stall_ms ms stall (the last lasted $held ms)"
    case $round in
    stall)
        [ "$rc" = 0 ] || die "stall: dd failed ($rc)"
        grep -aq 'iser_rs: .*whose command is not on the wire' "$kmsg" ||
            die "stall: the early response was not refused"
        [ "$rec" -ge 1 ] || die "stall: no reconnect after the refused response"
        cmp -s /tmp/early.pat /tmp/early.got || die "stall: dd read back other data than was written"
        ;;
    posting)
        grep -aq 'iser_rs: .*came while its command was being sent' "$kmsg" ||
            die "posting: the early response did not wait for its command's post"
        ;;
    bound)
        [ "$rc" = 0 ] || die "bound: dd failed ($rc)"
        grep -aq "iser_rs: .*waited 300 ms for its command's post: given up" "$kmsg" ||
            die "bound: the wait for the post did not end at its bound"
        grep -aq 'iser_rs: .*whose command is not on the wire' "$kmsg" ||
            die "bound: the response was not refused after the wait"
        [ "$rec" -ge 1 ] || die "bound: no reconnect after the refused response"
        cmp -s /tmp/early.pat /tmp/early.got || die "bound: dd read back other data than was written"
        ;;
    nextkey)
        [ "$early_inv" -ge 1 ] || die "nextkey: no early response named a predicted next key (tasks without a seen STag: $(peer_stat early_inv_unknown))"
        [ "$rc" = 0 ] || die "nextkey: dd failed ($rc)"
        grep -aq 'iser_rs: receive failed, status 9' "$kmsg" ||
            die "nextkey: the device did not refuse the Send with Invalidate of the next key (no receive failed with IB_WC_REM_INV_REQ_ERR)"
        [ "$met" = N ] || die "nextkey: the receive path saw the early response (the device let its invalidation through)"
        [ "$held" -ge 900 ] || die "nextkey: the last stall lasted $held ms, not its 1000 ms bound (something ended it)"
        [ "$rec" -ge 1 ] || die "nextkey: no reconnect after the refused invalidation"
        cmp -s /tmp/early.pat /tmp/early.got || die "nextkey: dd read back other data than was written"
        ;;
    esac
done
rmmod iser_rs || die "rmmod iser_rs"
