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
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
failed=()
for m in disconnect:conn-error stall:tmf login-digest:login-fail login-nordma:login-fail logout-refused:logout-refused; do
    peer_mode iser_rs "${m%%:*}" "${m#*:}" --at 60 || failed+=("${m%%:*}")
done
[ ${#failed[@]} -eq 0 ] || die "modes with a careless outcome: ${failed[*]}"
