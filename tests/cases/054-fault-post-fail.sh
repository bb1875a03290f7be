#!/usr/bin/env bash
# Failed posts (issue 14). iser_rs's debugfs fault attribute
# fail_iser_rs_post/ (the kernel's fault-injection framework) makes its
# ib_post_send/ib_post_recv calls fail with ENOMEM, posting nothing. With
# the attribute's task filter, only posts made in one process's context
# fail, so each part below fails exactly the post it names.
# - TMF: a LUN reset and a target reset (sg_reset, whose ioctl runs
#   libiscsi's reset handler in its own context) whose request cannot be
#   posted: the reset fails, libiscsi fails the connection, the session
#   comes back, the same reset then succeeds, and fio verify is clean.
# - Commands: a fio 8 KiB write+verify job whose own submissions fail to
#   post one in POST_FAIL_PCT (50) percent. A command whose PDU could not
#   be posted goes back to the midlayer, which retries it; a write whose
#   unsolicited Data-Out (InitialR2T=No) could not be posted after its
#   command PDU went out fails the connection (the command is on the
#   wire), and the session comes back. Expected: verify clean, no work
#   completion with an error (a registration or invalidation the device
#   refused), no NOP-Out timeout (a connection that died silently), the
#   session logged in at the end. It found three defects, each failing
#   this part before its fix:
#   * a read that reused the task of such a write inherited libiscsi's
#     stale unsolicited Data-Out state, took the Data-Out path without
#     data and failed its connection, again and again (48 reconnects);
#   * a fully unsolicited write whose registration (local access only)
#     could not be posted still marked its MR for invalidation: the MR's
#     next registration began with a LOCAL_INV naming a key the device
#     never saw, which rxe refuses;
#   * a failed chain that was to invalidate an MR still valid left it
#     unmarked and with a bumped key: its next REG_MR found it valid.
#   Either refusal puts the QP in error, which rxe reports by flushes
#   only, so the session hung until the NOP-Out timeout (22 times in one
#   run with neither MR fix, 4 with only the first).
#   It also checks that when a signaled post fails, the unsignaled Sends
#   it was to take (put back, counter unsignaled_requeued) never make
#   more than signal_every - 1 wait at once (unsignaled_max), the room
#   MAX_SEND_WR leaves them: the signaled Send was chosen by a post count,
#   and 34 waited at once (2026-11-27) before it was chosen by how many
#   wait.
# - Partial chains: with fail_iser_rs_post/partial only send chains of two
#   or more WRs fail, each after posting a random prefix (as ib_post_send
#   does when a WR past the head is refused): four command chains of a
#   fio 4k-512k write+verify job ran their LOCAL_INV, or their REG_MR too,
#   and not their Send. Expected: each fails its connection ("command
#   chain posted in part"), verify clean, no error completion, no QP in
#   error on its own. Before the fix the MR was put back as if nothing
#   had run: valid behind the pool's back, its next REG_MR was refused and
#   the QP went to error (1 in the first run).
# - Any post, any context: under a write+verify loop, one post in the next
#   K of any kind fails (interval K, times 1: a command, a Data-Out, a
#   receive repost in softirq, a LOCAL_INV...), for K in 1 3 10 30 100 300;
#   the connection fails and comes back or the command is retried, the
#   verify stays clean, live counts are unchanged.
# - The device's own refusal: with the injection off the posts call the
#   provider directly (step 18), which names the work request it refused.
#   A QP created with one send SGE (test-only inject_qp_send_sge=1, with
#   inline_sends=N) makes rxe refuse each 64 KiB write's command Send,
#   after its REG_MR was posted: the connection fails saying the chain
#   was posted in part (at least 1 work request), and once the injection
#   is off the writes complete and read back identical, with no error
#   completion and no QP in error on its own.
# At the end: logout leaves live counts 0, no kernel report. The case runs
# at debug_level 2 and checks that a connection failed from xmit names
# its source line.
. "$(dirname "$0")/../lib.sh"
dbg=/sys/kernel/debug
mountpoint -q $dbg || mount -t debugfs none $dbg 2>/dev/null
restore() {
    echo 0 > /sys/module/iser_rs/parameters/inject_qp_send_sge 2>/dev/null
    echo Y > /sys/module/iser_rs/parameters/inline_sends 2>/dev/null
    [ -d $dbg/fail_iser_rs_post ] && echo 0 > $dbg/fail_iser_rs_post/probability &&
        echo 0 > $dbg/fail_iser_rs_post/partial
    case_cleanup
    target_unsolicited no
}
trap restore EXIT
setup_rdma rxe
setup_target 1
target_unsolicited yes
start_iscsid
load_initiator iser_rs
f=$dbg/fail_iser_rs_post
# debug_level 2: each connection failure logs the source line that failed it.
echo 2 > /sys/module/iser_rs/parameters/debug_level
[ -d $f ] || skip "no $f (a kernel without CONFIG_FAULT_INJECTION_DEBUG_FS)"
echo 0 > $f/times
echo ${POST_FAIL_VERBOSE:-0} > $f/verbose
echo 1 > $f/interval
echo 100 > $f/probability
kmsg_watch_start
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=120 $UNSOL_LOGIN || die "login"
disk=$(wait_disks | head -1) || die "no disk"
[ "$(session_param InitialR2T)" = No ] || die "InitialR2T=No was not negotiated"
sg=/dev/$(ls /sys/block/${disk#/dev/}/device/scsi_generic/)
counts0=$(live_counts)

# failing CMD...: runs CMD with the iser_rs posts made in its context (and
# its children's) failing, PCT percent of them (default 100), at most TIMES
# (default 1000000). FAILED: how many failed.
FAILED=0
failing() {
    local times=${TIMES:-1000000} rc
    echo Y > $f/task-filter
    echo "${PCT:-100}" > $f/probability
    echo "$times" > $f/times
    (echo 1 > /proc/self/make-it-fail; exec "$@")
    rc=$?
    FAILED=$((times - $(cat $f/times)))
    echo 0 > $f/times
    return $rc
}

# TMF.
for how in d t; do
    what=$([ $how = d ] && echo "LUN reset" || echo "target reset")
    c0=$(iser_connects)
    TIMES=1 failing sg_reset -$how "$sg" 2>/dev/null &&
        log "$what with its request's post failed: sg_reset reported success" ||
        log "$what with its request's post failed: sg_reset failed (expected)"
    ms=$(wait_sess LOGGED_IN 1 90) || die "$what: session not back 90 s after the failed post ($(sess_states))"
    [ "$FAILED" = 1 ] || die "$what: no post failed"
    log "$what: reconnects $(( $(iser_connects) - c0 )), session logged in ($ms ms)"
    sg_reset -$how "$sg" || die "$what without injection"
    fio_verify "$disk" --rw=randwrite --bs=64k --iodepth=8 --size=4M || die "verify after the failed $what"
done

# Commands: the submitter's own posts fail.
c0=$(iser_connects)
PCT=${POST_FAIL_PCT:-50} failing timeout 300 fio --name=postfail --filename="$disk" --direct=1 \
    --ioengine=libaio --verify=crc32c --do_verify=1 --verify_fatal=1 --size=8M \
    --rw=randwrite --bs=8k --iodepth=8 --loops=4 --output=/tmp/postfail-fio.log >/dev/null 2>&1 ||
    { tail -5 /tmp/postfail-fio.log | sed 's/^/# /'; die "fio verify with failing command posts (status $?)"; }
wcerr=$(kmsg_count 'iser_rs: .* failed, status')
log "commands: $FAILED posts failed, $(( $(iser_connects) - c0 )) reconnects, $wcerr error completions; verify clean; this connection's local invalidations (MRs left valid by local-only registrations): $(session_stat local_invalidations)"
[ "$FAILED" -gt 0 ] || die "no command post failed"
[ "$wcerr" = 0 ] || die "work completions with an error after failed command posts"
# The verify reads' Sends are unsignaled but one in signal_every: when
# that one's post fails, the Sends it was to take wait for the next
# signaled one. MAX_SEND_WR leaves room for signal_every - 1 of them, so
# the next post must be signaled once that many wait, not signal_every
# posts later (before the fix: 34 waited at once).
se=$(cat /sys/module/iser_rs/parameters/signal_every)
umax=$(session_stat unsignaled_max) ureq=$(session_stat unsignaled_requeued)
log "commands: unsignaled Sends put back after a failed signaled post: $ureq; the most that waited at once: $umax (signal_every $se)"
[ "$ureq" -gt 0 ] || die "no signaled post with unsignaled Sends waiting failed (the path is not reached)"
[ "$umax" -le $((se - 1)) ] || die "$umax unsignaled Sends waited at once, more than signal_every - 1 = $((se - 1))"
ms=$(wait_sess LOGGED_IN 1 90) || die "session not back after the failing command posts ($(sess_states))"
log "reconnect causes: $(kmsg_count 'iser_rs: connection failed in xmit') failed in xmit (a Data-Out post), $(kmsg_count 'ping timeout') NOP-Out timeouts (so far in the case)"
# A NOP-Out timeout here means the connection was dead and nobody said so
# (before the fix: the initiator's QP in error after a refused REG_MR).
[ "$(kmsg_count 'ping timeout')" = 0 ] || die "NOP-Out timeouts: a connection died silently"
! grep -a -q 'unsolicited Data-Out without a reserved slot' "$KMSG_WATCH_FILE" ||
    die "a command without unsolicited data took the Data-Out path ($(kmsg_count 'unsolicited Data-Out without') times)"

# Partial chains: with fail_iser_rs_post/partial set only chains of two or
# more work requests fail, and each posts a random prefix first, as
# ib_post_send does when a work request past the head is refused: a
# command's LOCAL_INV, or its REG_MR too, ran on the device and its Send
# did not. Under a fio write+verify job (4k-512k) four of its command
# chains fail that way.
c0=$(iser_connects)
qe0=$(kmsg_count 'iser_rs: QP in error state')
echo 1 > $f/partial
# At most 4 chains (TIMES): each fails its connection, and a command caught
# in 5 connection failures would exhaust its SCSI retries.
TIMES=4 PCT=10 failing timeout 300 fio --name=partial --filename="$disk" --direct=1 \
    --ioengine=libaio --verify=crc32c --do_verify=1 --verify_fatal=1 --size=8M \
    --rw=randwrite --bsrange=4k-512k --iodepth=8 --loops=3 --output=/tmp/partial-fio.log >/dev/null 2>&1 ||
    { tail -5 /tmp/partial-fio.log | sed 's/^/# /'; echo 0 > $f/partial; die "fio verify with partly posted command chains (status $?)"; }
echo 0 > $f/partial
ms=$(wait_sess LOGGED_IN 1 90) || die "session not back after the partly posted chains ($(sess_states))"
qerr=$(( $(kmsg_count 'iser_rs: QP in error state') - qe0 ))
partial=$(kmsg_count 'iser_rs: command chain posted in part')
log "partial chains: $FAILED posts failed, $partial of them chains posted in part, $(( $(iser_connects) - c0 )) reconnects, $qerr QPs in error on their own; verify clean"
[ "$FAILED" -gt 0 ] || die "no command post failed (partial)"
[ "$(kmsg_count 'iser_rs: .* failed, status')" = 0 ] || die "work completions with an error after partly posted chains"
# A registration that ran while the driver took it for unposted leaves the
# MR valid behind its back: its next REG_MR is refused and the QP goes to
# error on its own.
[ "$qerr" = 0 ] || die "$qerr QPs went to error after partly posted chains (an MR's state lost)"
[ "$partial" -gt 0 ] || die "no command chain was posted in part"

# Any post, any context.
echo N > $f/task-filter
c0=$(iser_connects)
fio_loop_start "$disk" --rw=randwrite --bsrange=4k-256k --iodepth=8 --size=8M
hits=0
for k in 1 3 10 30 100 300; do
    sleep 2
    echo "$k" > $f/interval; echo 1 > $f/times
    for ((i = 0; i < 100; i++)); do [ "$(cat $f/times)" = 0 ] && break; sleep 0.1; done
    echo 0 > $f/times
    how="no post in 10 s"
    [ "$i" -lt 100 ] && { hits=$((hits + 1)); how="a post failed"; }
    ms=$(wait_sess LOGGED_IN 1 90) || die "K=$k: session not back 90 s after the failed post ($(sess_states))"
    log "any post, K=$k: $how; session logged in"
done
echo 1 > $f/interval
sleep 2
fio_loop_stop || die "fio verify across failed posts"
[ "$hits" -gt 0 ] || die "no post failed"
log "any post: $hits failed posts, $(( $(iser_connects) - c0 )) reconnects, fio $FIO_LOOP_RESULT"
[ "$(kmsg_count 'iser_rs: .* failed, status')" = 0 ] || die "work completions with an error"
[ "$(live_counts)" = "$counts0" ] || die "live counts changed: $counts0 -> $(live_counts)"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"

# The device's own refusal. Every failure above came from the shim's
# fault injection, which is where the posts go while it is armed; with it
# off they call the provider directly (bench/README.md, step 18), which
# says by the work request it names how much of a chain it posted. A QP
# created with one send SGE (inject_qp_send_sge=1, inline_sends=N so that
# rxe keeps it at one) makes rxe refuse, with EINVAL, each Send with more:
# a 64 KiB write's command PDU with its immediate data, after the REG_MR
# before it was posted. Expected: "command chain posted in part (N of its
# work requests)", which the driver says only when it counted N >= 1 from
# the refused work request (counted 0, it would unwind the MR instead and
# return the command to the midlayer, and the message never comes); the
# connection fails, and once the injection is off the writes complete and
# read back identical, with no error completion and no QP in error on its
# own.
par=/sys/module/iser_rs/parameters
echo 0 > $f/probability
echo N > $par/inline_sends
echo 1 > $par/inject_qp_send_sge
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=120 $UNSOL_LOGIN || die "login with one send SGE"
disk=$(wait_disks | head -1); [ -n "$disk" ] || die "no disk with one send SGE"
p0=$(kmsg_count 'iser_rs: command chain posted in part') qe0=$(kmsg_count 'iser_rs: QP in error state')
c0=$(iser_connects)
head -c $((512 * 1024)) /dev/urandom > /tmp/sge-pattern
dd if=/tmp/sge-pattern of="$disk" bs=64k oflag=direct status=none &
ddpid=$!
# Off as soon as the first refusal is logged (the kernel log as followed
# so far, without kmsg_count's sync), so that the session's next QP takes
# the write: each reconnect while it is on fails the retried write again.
for ((i = 0; i < 600; i++)); do
    [ "$(grep -ac 'iser_rs: command chain posted in part' "$KMSG_WATCH_FILE")" -gt "$p0" ] && break
    sleep 0.1
done
echo 0 > $par/inject_qp_send_sge
wait $ddpid || die "64k writes after the device refused their Sends (dd status $?)"
line=$(grep -a 'iser_rs: command chain posted in part' "$KMSG_WATCH_FILE" | tail -1)
[ -n "$line" ] && [ "$i" -lt 600 ] || die "no command chain posted in part with one send SGE in 60 s"
n=$(echo "$line" | sed -n 's/.*posted in part (\([0-9]*\) of.*/\1/p')
ms=$(wait_sess LOGGED_IN 1 90) || die "session not back after the device's refusals ($(sess_states))"
dd if="$disk" of=/tmp/sge-readback bs=64k count=8 iflag=direct status=none || die "read back"
cmp /tmp/sge-pattern /tmp/sge-readback || die "read-back differs after the device's refusals"
qerr=$(( $(kmsg_count 'iser_rs: QP in error state') - qe0 ))
log "device refusals: $(( $(kmsg_count 'iser_rs: command chain posted in part') - p0 )) chains posted in part (the last: $n of its work requests), $(( $(iser_connects) - c0 )) reconnects, $qerr QPs in error on their own; 512 KiB written and read back identical"
[ "$(kmsg_count 'iser_rs: .* failed, status')" = 0 ] || die "work completions with an error after the device's refusals"
[ "$qerr" = 0 ] || die "$qerr QPs went to error after the device's refusals"
echo Y > $par/inline_sends
logout_all
wait_live_zero || die "live objects after logout (one send SGE): $(live_counts)"
grep -a -qE 'iser_rs: connection failed .* at [^ ]+\.rs:[0-9]+$' "$KMSG_WATCH_FILE" ||
    die "debug_level 2: no connection failure named its source line"
kmsg_watch_check || die "kernel report"
