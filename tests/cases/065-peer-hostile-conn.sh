#!/usr/bin/env bash
# Hostile iSER peer modes against iser_rs over rxe (tools/iser-peer, see
# its README for what each mode does). Each mode: log in, fio crc32c
# verify while the mode fires once, then check the careful outcome
# (peer_mode in lib.sh): a clean connection error and reconnect with the
# I/O retried (conn-error), or no error at all where the target's act is
# legal (no-error), an abort TMF (tmf), a dead STag behind an early status
# (late-dead), a clean login failure (login-fail), a refused logout whose
# disconnect is judged a lost connection and still ends the session
# (logout-refused); never a kernel report; logout, live counts zero and
# rmmod after every mode.
# Modes: disconnect:conn-error stall:tmf login-digest:login-fail login-nordma:login-fail logout-refused:logout-refused
# Then dup-tmf, on a READ of the case's own: the peer, armed by SIGUSR1
# right before a dd reads the disk (as case 066 arms its stalls), stalls
# that READ and answers its ABORT TASK (5 s SCSI timeout) with Function
# Complete twice. The READ holds a Read STag, so the first response is
# held for its local invalidation; the second answers no TMF in flight
# and must fail the connection (the kernel log names it); taken as the
# TMF's success, it would have libiscsi release the READ while its
# invalidation is still in flight. Then: a reconnect, the dd retried to
# success, fio verify clean, live counts zero after the logout. The
# connection failure comes in the middle of libiscsi's abort, whose error
# handler holds the READ across the reconnect and releases it on the new
# connection (after its LUN RESET there): its MR slot, task word and held
# buffer are the old connection's, not the new one's
# (`IserTask::conn_seq`; before that, the release was judged against the
# new connection's MR and logged "STag guarantee broken").
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
failed=()
for m in disconnect:conn-error stall:tmf login-digest:login-fail login-nordma:login-fail logout-refused:logout-refused; do
    peer_mode iser_rs "${m%%:*}" "${m#*:}" --at 60 || failed+=("${m%%:*}")
done
load_initiator iser_rs
dmesg -W > /tmp/dup-tmf-kmsg.log 2>&1 &
kmsg_pid=$!
start_peer --mode dup-tmf --at 1000000000 --on read
disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "dup-tmf: login"
echo 5 > "/sys/block/${disk#/dev/}/device/timeout"
c0=$(iser_connects)
peer_stall_io DupTmf if="$disk" of=/dev/null bs=64k count=16 iflag=direct ||
    die "dup-tmf: the peer never stalled a READ"
dd_pid=$STALL_IO_PID
wait "$dd_pid"; rc=$?
wait_logged_in 60 || die "dup-tmf: session not back"
rec=$(( $(iser_connects) - c0 ))
peer_fio_verify "$disk" --rw=randwrite --bs=8k --iodepth=8 --size=2M ||
    { cat /tmp/peer-fio.log; failed+=("dup-tmf (fio verify after the reconnect)"); }
logout_all
wait_live_zero || failed+=("dup-tmf (live objects after logout: $(live_counts))")
rmmod iser_rs || failed+=("dup-tmf (rmmod iser_rs)")
stop_peer quiet
sleep 0.5; kill "$kmsg_pid" 2>/dev/null; wait "$kmsg_pid" 2>/dev/null
log "dup-tmf: aborts $(peer_stat aborts), second TMF Responses $(peer_stat dup_tmf_responses), dd rc $rc, reconnects $rec; $(grep -a -m1 'answers no TMF in flight' /tmp/dup-tmf-kmsg.log | sed 's/^\[[ 0-9.]*\] //')"
[ "$(peer_stat dup_tmf_responses)" -ge 1 ] || failed+=("dup-tmf (no second TMF Response sent)")
grep -aq 'iser_rs: .*TMF Response for ITT .* answers no TMF in flight' /tmp/dup-tmf-kmsg.log ||
    failed+=("dup-tmf (no connection failure on the second TMF Response)")
[ "$rec" -ge 1 ] || failed+=("dup-tmf (no reconnect)")
[ "$rc" = 0 ] || failed+=("dup-tmf (the stalled READ was not retried to success: dd rc $rc)")
[ ${#failed[@]} -eq 0 ] || die "modes with a careless outcome: ${failed[*]}"
