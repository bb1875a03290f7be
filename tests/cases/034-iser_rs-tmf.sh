#!/usr/bin/env bash
# Task management through iser_rs: a LUN reset and a target reset are
# answered; a command stalled in the backend times out and is aborted (TMF
# ABORT TASK); I/O verifies afterwards and nothing leaks.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator ${INITIATOR:-iser_rs}
disk=$(login iser | head -1); [ -n "$disk" ] || die "login"
sg=/dev/$(ls /sys/block/${disk#/dev/}/device/scsi_generic/)
sg_reset -d "$sg" || die "LUN reset (sg_reset -d $sg)"
sg_reset -t "$sg" || die "target reset (sg_reset -t $sg)"
fio_verify "$disk" --rw=randwrite --bs=4k --iodepth=8 --size=4M || die "verify after resets"

# LUN 7: a null_blk that completes every command after 10 s (timer mode):
# longer than libiscsi's timeout grace, so the timeout always aborts.
nb=$CFG/nullb/slow1
mkdir -p $nb
if [ "$(cat $nb/power)" != 1 ]; then
    echo 64 > $nb/size; echo 1 > $nb/memory_backed; echo 2 > $nb/irqmode
    echo 10000000000 > $nb/completion_nsec; echo 1 > $nb/power
fi
for ((i = 0; i < 50; i++)); do [ -b /dev/slow1 ] && break; sleep 0.1; done
bs=$CFG/target/core/iblock_9/slow1
if [ ! -d $bs ]; then
    mkdir -p $bs; echo "udev_path=/dev/slow1" > $bs/control; echo 1 > $bs/enable
fi
t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
mkdir -p $t/lun/lun_7; ln -s $bs $t/lun/lun_7/slow1
iscsiadm -m session -R >/dev/null
slow_disk() { ls /sys/class/iscsi_session/session*/device/target*/*:7/block/ 2>/dev/null | head -1; }
for ((i = 0; i < 100; i++)); do [ -n "$(slow_disk)" ] && break; sleep 0.2; done
slow=/dev/$(slow_disk)
[ "$slow" != /dev/ ] || die "slow LUN did not appear"
tmf_count() { iscsiadm -m session -s | sed -n 's/.*tmfcmd_pdus: *//p' | head -1; }
before=$(tmf_count)
echo 1 > /sys/block/${slow#/dev/}/device/timeout
timeout 120 dd if="$slow" of=/dev/null bs=4k count=1 iflag=direct status=none &&
    log "stalled read completed after recovery" ||
    log "stalled read failed after recovery (acceptable: the LUN never answers in time)"
after=$(tmf_count)
log "TMF PDUs: before $before, after $after"
[ "${after:-0}" -gt "${before:-0}" ] || die "the timeout did not send ABORT TASK"
echo 30 > /sys/block/${slow#/dev/}/device/timeout 2>/dev/null || true
disk=$(session_disks | grep -v "^$slow$" | head -1)
[ -n "$disk" ] || die "fast LUN gone after abort"
fio_verify "$disk" --rw=randwrite --bs=4k --iodepth=8 --size=4M || die "verify after abort"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
rm -f $t/lun/lun_7/slow1; rmdir $t/lun/lun_7; rmdir $bs 2>/dev/null; true
