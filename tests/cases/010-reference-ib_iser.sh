#!/usr/bin/env bash
# Reference: the in-tree C ib_iser logs in to the same LIO target and passes
# a fio crc32c verify. Proves the harness independently of iser_rs.
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
