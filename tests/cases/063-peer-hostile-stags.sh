#!/usr/bin/env bash
# Hostile iSER peer modes against iser_rs over rxe (tools/iser-peer, see
# its README for what each mode does). Each mode: log in, fio crc32c
# verify while the mode fires once, then check the careful outcome
# (peer_mode in lib.sh): a clean connection error and reconnect with the
# I/O retried (conn-error), or no error at all where the target's act is
# legal (no-error), an abort TMF (tmf), a dead STag behind an early status
# (late-dead), a clean login failure (login-fail); never a kernel report;
# logout, live counts zero and rmmod after every mode.
# Modes: inv-wrong:conn-error inv-other:conn-error inv-none:no-error status-first:late-dead dup-status:conn-error unknown-itt:conn-error
# and dup-status:conn-error again on 4k writes.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
failed=()
for m in inv-wrong:conn-error inv-other:conn-error inv-none:no-error status-first:late-dead dup-status:conn-error unknown-itt:conn-error; do
    peer_mode iser_rs "${m%%:*}" "${m#*:}" --at 60 || failed+=("${m%%:*}")
done
# The status of 4k writes, sent twice: a 4k write is one page, sent
# immediate without a registration, so its response and its data Send's
# completion meet on the task's word (step 24, MeetWord). A second
# response must fail the connection whether the first was held there for
# the Send or delivered. Which one a fire finds is the device's timing
# (case 030 held 516 of its 4096 4k writes' responses for their Send):
# the mode fires every 40 writes and the case logs which paths it reached
# (2026-11-30: 17 fires, 3 found the first response held at the meeting).
PEER_FIO_BS=4k peer_mode iser_rs dup-status conn-error --on write --at 20 --every 40 ||
    failed+=(dup-status-4k-write)
held=$(grep -c 'second SCSI Response .* its first held' /tmp/peer-mode-kmsg.log)
delivered=$(grep -c 'second SCSI Response .* its first delivered' /tmp/peer-mode-kmsg.log)
log "dup-status on 4k writes: $(peer_stat mode_events) fires; the second response found the first held at the meeting $held times, delivered there $delivered times (else the command was already released)"
[ ${#failed[@]} -eq 0 ] || die "modes with a careless outcome: ${failed[*]}"
