#!/usr/bin/env bash
# iser_rs loads, registers the iSCSI transport "iser" with its caps, and
# unloads leaving no transport behind.
. "$(dirname "$0")/../lib.sh"
load_initiator iser_rs
[ -d /sys/class/iscsi_transport/iser ] || die "no /sys/class/iscsi_transport/iser"
caps=$(cat /sys/class/iscsi_transport/iser/caps)
log "transport iser, caps $caps"
[ $((caps & 0x1)) -ne 0 ] || die "CAP_RECOVERY_L0 missing from caps $caps"
[ -d /sys/module/iser_rs/parameters ] || die "no module parameters"
for p in max_sectors max_lun debug_level; do
    [ -r /sys/module/iser_rs/parameters/$p ] || die "parameter $p missing"
done
rmmod iser_rs || die "rmmod iser_rs"
[ ! -e /sys/class/iscsi_transport/iser ] || die "transport still registered after rmmod"
