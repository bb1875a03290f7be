#!/usr/bin/env bash
# fio crc32c verify through iser_rs across block sizes from 512 B to 1 MiB,
# including sizes that are not powers of two or page multiples, at iodepth
# 1 and 32, and a random read/write mix. Every command PDU sent from a
# header slot took its task's own (step 19): task_slot_busy stays 0, as a
# command with immediate data completes only after its Send did. Then, with
# inline_sends=N (every command PDU from a header slot, reads too),
# signal_every=16 and a session of 16 tasks (cmds_max=16: libiscsi keeps
# 15 for management PDUs, so one SCSI command at a time), reads and a
# read/write mix verify clean while the 16 tasks rotate first in, first
# out: a task comes back 16 Sends after its previous one, whose unsignaled
# Send is released only by the completion of the signaled one after it,
# which sometimes has not been handled yet. Its own slot is then still
# held and the command PDU takes a shared one (task_slot_busy > 0, the
# fallback reached with no injection).
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
disk=$(login iser | head -1); [ -n "$disk" ] || die "login through iser_rs"
# Small blocks over a small area (TCG is slow), large ones over more.
for bs in 512 1536 4k 7680 8k 36352 64k 128k 260k 512k 1m; do
    case $bs in 512|1536|4k|7680|8k) size=1M ;; 36352|64k|128k) size=4M ;; *) size=8M ;; esac
    for qd in 1 32; do
        fio_verify "$disk" --rw=randwrite --bs=$bs --iodepth=$qd --size=$size ||
            die "verify bs=$bs iodepth=$qd"
    done
done
log "randwrite verify: 11 block sizes x iodepth 1,32 clean"
fio_verify "$disk" --rw=randrw --rwmixread=50 --bsrange=512-256k --bs_unaligned=0 --iodepth=32 --size=8M ||
    die "randrw mixed sizes"
log "randrw mix 512-256k iodepth 32 clean"
# Write one pattern with dd, read it back by another path, compare.
head -c $((24 * 1024 * 1024)) /dev/urandom > /tmp/pattern
dd if=/tmp/pattern of="$disk" bs=1M oflag=direct status=none || die "dd write"
dd if="$disk" of=/tmp/readback bs=256k count=96 iflag=direct status=none || die "dd read"
cmp /tmp/pattern /tmp/readback || die "read-back differs"
log "dd 24 MiB write + read-back: identical"
iscsiadm -m session -s | grep -E "err_|deferred|invalidations" | sed 's/^/# /'
busy=$(session_stat task_slot_busy)
[ "$busy" -eq 0 ] || die "task_slot_busy=$busy with inline headers (a command's own slot was still held)"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
par=/sys/module/iser_rs/parameters
signal_every0=$(cat $par/signal_every)
restore_params() { echo Y > $par/inline_sends 2>/dev/null; echo "$signal_every0" > $par/signal_every 2>/dev/null; }
if [ "${ISER_RS_NO_CLEANUP:-0}" = 1 ]; then trap restore_params EXIT; else trap 'restore_params; case_cleanup' EXIT; fi
echo N > $par/inline_sends
echo 16 > $par/signal_every
login_node $TGT_IP4:$TGT_PORT node.session.cmds_max=16 node.session.queue_depth=16 || die "login with 16 tasks"
disk=$(wait_disks | head -1); [ -n "$disk" ] || die "no disk with 16 tasks"
fio --name=slots --filename="$disk" --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=16 \
    --size=4M --runtime=5 --time_based >/dev/null 2>&1 || die "randread 4k iodepth 16"
fio_verify "$disk" --rw=randrw --rwmixread=50 --bs=4k --iodepth=16 --size=4M ||
    die "randrw 4k iodepth 16 with inline_sends=N"
busy=$(session_stat task_slot_busy) errs=$(session_stat err_protocol) posts=$(session_stat err_post)
cmds=$(( $(session_stat cmds_read) + $(session_stat cmds_write) ))
log "inline_sends=N, signal_every 16, 16 tasks (one SCSI command at a time): randread and randrw 4k clean; commands $cmds, task_slot_busy $busy, err_protocol $errs, err_post $posts"
[ "$errs" -eq 0 ] && [ "$posts" -eq 0 ] || die "errors with inline_sends=N and 16 tasks"
[ "$busy" -gt 0 ] || die "no task came back with its own slot held (task_slot_busy=0): the fallback was not reached"
logout_all
wait_live_zero || die "live objects after logout with 16 tasks: $(live_counts)"
