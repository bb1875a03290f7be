#!/usr/bin/env bash
# Reference: the in-tree C ib_iser logs in to the same LIO target and passes
# a fio crc32c verify. Proves the harness independently of iser_rs.
# LIO occasionally warns in iscsit_release_cmd (a command still on the
# connection list) when ib_iser logs out: a target-side race seen once in CI
# (6.12.117). It is not in the code under test, so it is reported, not failed:
# target-side-reports: WARNING: CPU: [0-9]+ PID: [0-9]+ at drivers/target/
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator ib_iser
disk=$(login iser | head -1); [ -n "$disk" ] || die "ib_iser login"
log "ib_iser disk: $disk"
fio_verify "$disk" --rw=randwrite --bs=4k --iodepth=16 || die "fio verify over ib_iser"
logout_all
rmmod ib_iser || die "rmmod ib_iser"
