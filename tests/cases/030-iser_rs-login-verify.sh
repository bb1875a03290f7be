#!/usr/bin/env bash
# iscsiadm -I iser logs in through iser_rs, a disk appears, fio crc32c
# verify passes (random writes then verified reads), logout and rmmod
# leave no live connection, QP or MR behind.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
disk=$(login iser | head -1); [ -n "$disk" ] || { dmesg | tail -30; die "login through iser_rs"; }
log "iser_rs disk: $disk ($(cat /sys/block/${disk#/dev/}/size) sectors)"
iscsiadm -m session -P1 | grep -E "Iface Transport|iSCSI Session State" | sed 's/^/# /'
fio_verify "$disk" --rw=randwrite --bs=4k --iodepth=16 || die "fio verify 4k"
iscsiadm -m session -s | grep -E "cmds_|registrations|invalidations|deferred|err_" | sed 's/^/# /'
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
rmmod iser_rs || die "rmmod iser_rs"
