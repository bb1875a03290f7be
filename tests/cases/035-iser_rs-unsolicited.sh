#!/usr/bin/env bash
# Unsolicited Data-Out (iSER §7.3.1): LIO negotiates InitialR2T=No with
# ImmediateData=Yes and FirstBurstLength 256 KiB, so every write longer than
# MaxXmitDataSegmentLength sends its first burst as Send-carried Data-Out
# PDUs before the target RDMA-Reads the rest. fio crc32c verify from 512 B
# to 1 MiB must be clean and iser_rs's data_outs counter must grow (the
# path ran), also when a deep queue of 256 KiB writes runs out of header
# slots; then a link flap and an RDMA device removal while such writes
# run: the session comes back and verify stays clean. Before the fix this
# path hung the guest at the first 64 KiB write (libiscsi's unsol_r2t.sent
# never advanced, and the failure report re-took frwd_lock inside
# xmit_task); the lockup detectors turn such a hang into a report.
. "$(dirname "$0")/../lib.sh"
restore() {
    veth0_up
    rdma link show rxe0/1 >/dev/null 2>&1 || { rdma link add rxe0 type rxe netdev veth0; target_relisten; }
    rxe_qp1_dead rxe0 && rxe_recreate rxe0 veth0
    case_cleanup
    target_unsolicited no
}
trap restore EXIT
setup_rdma rxe
setup_target 1
target_unsolicited yes
start_iscsid
load_initiator iser_rs
kmsg_watch_start
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=120 $FAST_NOOP $UNSOL_LOGIN || die "login"
disk=$(wait_disks | head -1) || die "no disk"
r2t=$(session_param InitialR2T) imm=$(session_param ImmediateData)
fb=$(session_param FirstBurstLength) mxdsl=$(session_param MaxXmitDataSegmentLength)
log "negotiated InitialR2T=$r2t ImmediateData=$imm FirstBurstLength=$fb MaxXmitDataSegmentLength=$mxdsl"
[ "$r2t" = No ] || die "InitialR2T=No was not negotiated (got '$r2t')"
for bs in 512 4k 8k 12k 64k 256k 300k 1M; do
    d0=$(session_stat data_outs)
    timeout 120 fio --name=unsol --filename="$disk" --direct=1 --ioengine=libaio \
        --verify=crc32c --do_verify=1 --verify_fatal=1 --size=4M --rw=randwrite \
        --bs=$bs --iodepth=4 --output=/tmp/unsol-fio.log >/dev/null 2>&1 ||
        { tail -5 /tmp/unsol-fio.log | sed 's/^/# /'; die "fio verify bs=$bs (status $?)"; }
    log "bs=$bs: verify clean, $(( $(session_stat data_outs) - d0 )) unsolicited Data-Outs"
done
outs=$(session_stat data_outs)
[ "$outs" -gt 0 ] || die "no unsolicited Data-Out was sent (data_outs=0)"
# A deep queue of 256 KiB writes: each takes 32 header slots (its command
# and 31 Data-Outs), and LIO's command window (64) lets more of them out
# than the 1,024 Data-Out slots hold (8 per command, as ib_iser sizes
# its queue): a write that finds too few goes back to the midlayer
# (TARGET_BUSY, counter send_queue_full) and is retried once Send
# completions free them. Verify clean, and the wait must have happened.
# fio submits its writes in batches of 128 (one io_submit, dispatched
# back to back). Submitted one at a time, each after fio has computed its
# crc32c over 256 KiB, they can arrive no faster than rxe sends them: a
# make check run of 2026-12-02 saw 0 waits, and the path went unreached.
echo 128 > /sys/block/${disk#/dev/}/device/queue_depth
f0=$(session_stat send_queue_full) d0=$(session_stat data_outs)
timeout 300 fio --name=unsol --filename="$disk" --direct=1 --ioengine=libaio \
    --verify=crc32c --do_verify=1 --verify_fatal=1 --size=32M --rw=randwrite \
    --bs=256k --iodepth=128 --iodepth_batch_submit=128 \
    --output=/tmp/unsol-fio.log >/dev/null 2>&1 ||
    { tail -5 /tmp/unsol-fio.log | sed 's/^/# /'; die "fio verify bs=256k iodepth=128 (status $?)"; }
full=$(( $(session_stat send_queue_full) - f0 ))
log "bs=256k iodepth=128 (queue_depth $(cat /sys/block/${disk#/dev/}/device/queue_depth)): verify clean, $(( $(session_stat data_outs) - d0 )) unsolicited Data-Outs, $full waits for header slots"
[ "$full" -gt 0 ] || die "no write waited for header slots (send_queue_full +0)"

# Link flap, then device removal, while 64k writes with Data-Outs run.
c0=$(iser_connects)
fio_loop_start "$disk" --rw=randwrite --bs=64k --iodepth=8 --size=8M
stats_loop_start
sleep 3
ip link set veth0 down
wait_sess FAILED 1 30 >/dev/null || die "flap: connection not lost 30 s after link down"
sleep 2
veth0_up
rxe_qp1_dead rxe0 && { rxe_recreate rxe0 veth0 || die "flap: re-creating rxe0"; }
ms=$(wait_sess LOGGED_IN 1 90) || die "flap: session not back 90 s after link up ($(sess_states))"
log "link flap under unsolicited writes: session back after $ms ms"
sleep 3
timeout 120 rdma link delete rxe0 || die "rdma link delete rxe0 did not finish in 120 s"
wait_sess FAILED 1 10 >/dev/null || die "session still $(sess_states) after device removal"
rdma link add rxe0 type rxe netdev veth0 || die "rdma link add rxe0"
target_relisten || die "LIO listener"
ms=$(wait_sess LOGGED_IN 1 90) || die "session did not recover after device removal ($(sess_states))"
log "device removal under unsolicited writes: session back after $ms ms"
sleep 3
fio_loop_stop || die "fio verify across the flap and the device removal"
log "iscsiadm -m session -s ran $(stats_loop_stop) times across the flap and the removal"
log "writes across flap and removal: $FIO_LOOP_RESULT (passes, I/Os verified), reconnects $(( $(iser_connects) - c0 )), data_outs $(session_stat data_outs)"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
kmsg_watch_check || die "kernel report"
