#!/usr/bin/env bash
# iser_rs loads, registers the iSCSI transport "iser" with its caps, and
# unloads leaving no transport behind. Loading taints the kernel only as an
# out-of-tree module (O) and, on a kernel that checks module signatures
# (Debian's), as an unsigned one (E): nothing else (no P, W, ...). The
# module's own flags (/sys/module/iser_rs/taint) say so even when the
# kernel was tainted O and E before (Debian's guest loads the test rdma_rxe,
# built outside Debian's tree: scripts/debian-kernel).
. "$(dirname "$0")/../lib.sh"
t0=$(cat /proc/sys/kernel/tainted)
load_initiator iser_rs
t1=$(cat /proc/sys/kernel/tainted)
mt=$(cat /sys/module/iser_rs/taint)
log "taint before $t0, after insmod $t1 ($(uname -r)); iser_rs's own: $mt"
# Bit 12 is TAINT_OOT_MODULE, bit 13 TAINT_UNSIGNED_MODULE.
[ $(( (t1 & ~t0) & ~((1 << 12) | (1 << 13)) )) -eq 0 ] || die "insmod set taint bits other than O and E: $t0 -> $t1"
[ $(( t1 & (1 << 12) )) -ne 0 ] || die "no out-of-tree taint after insmod ($t1)"
case $mt in
*O*) ;;
*) die "iser_rs's own taint flags '$mt' lack O" ;;
esac
[ -z "$(echo "$mt" | tr -d 'OE')" ] || die "iser_rs's own taint flags '$mt' are more than O and E"
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
