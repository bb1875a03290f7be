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
# Then dup-tmf:conn-error on a READ of fio's verify pass (--at 300: fio
# writes 256 blocks first, so a READ of udev's probing is never the one):
# the peer stalls that READ and answers
# its ABORT TASK with Function Complete twice. The READ holds a Read
# STag, so the first response is held for its local invalidation; the
# second answers no TMF in flight and must fail the connection (the
# kernel log names it). Taken as the TMF's success, it would have libiscsi
# release the READ while its invalidation is still in flight. The
# connection failure comes in the middle of libiscsi's abort, whose error
# handler holds the READ across the reconnect and releases it on the new
# connection: its MR slot, task word and held buffer are the old
# connection's, not the new one's (`IserTask::conn_seq`; before that, the
# release was judged against the new connection's MR and logged "STag
# guarantee broken").
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
failed=()
for m in disconnect:conn-error stall:tmf login-digest:login-fail login-nordma:login-fail logout-refused:logout-refused; do
    peer_mode iser_rs "${m%%:*}" "${m#*:}" --at 60 || failed+=("${m%%:*}")
done
if peer_mode iser_rs dup-tmf conn-error --on read --at 300; then
    [ "$(peer_stat dup_tmf_responses)" -ge 1 ] || failed+=("dup-tmf (no second TMF Response sent)")
    grep -aq 'iser_rs: .*TMF Response for ITT .* answers no TMF in flight' /tmp/peer-mode-kmsg.log ||
        failed+=("dup-tmf (the connection failed, not on the second TMF Response)")
else
    failed+=(dup-tmf)
fi
[ ${#failed[@]} -eq 0 ] || die "modes with a careless outcome: ${failed[*]}"
