#!/usr/bin/env bash
# rmmod iser_rs with a session logged in is refused (the session holds the
# module), never a hang or an oops; after logout it unloads cleanly.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
disk=$(login iser | head -1); [ -n "$disk" ] || die "login"
if timeout 30 rmmod iser_rs 2>/tmp/rmmod.err; then die "rmmod succeeded with a live session"; fi
grep -q "in use" /tmp/rmmod.err || { cat /tmp/rmmod.err; die "rmmod failed for another reason"; }
dd if="$disk" of=/dev/null bs=64k count=16 iflag=direct status=none || die "I/O after refused rmmod"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
timeout 30 rmmod iser_rs || die "rmmod after logout"
log "rmmod refused while logged in, clean after logout"
