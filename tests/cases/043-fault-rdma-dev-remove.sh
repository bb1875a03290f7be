#!/usr/bin/env bash
# RDMA device removal under I/O: `rdma link delete rxe0` while a session is
# logged in through iser_rs and fio writes with crc32c verify. The delete
# must finish (iser_rs handles RDMA_CM_EVENT_DEVICE_REMOVAL: the connection
# fails, iscsid tears it down, and its QP/CQ/MRs/PD release the device).
# When the device returns the session recovers and verify is clean. Then
# the device is removed once more with the session idle, the session is
# logged out while the device is gone, and the module unloads. Meanwhile
# `iscsiadm -m session -s` runs in a loop: get_stats must not read an
# endpoint that the teardown frees (KASAN on the debug kernel).
. "$(dirname "$0")/../lib.sh"
restore() { # later cases need rxe0 and LIO's listener back, whatever happened
    rdma link show rxe0/1 >/dev/null 2>&1 || { rdma link add rxe0 type rxe netdev veth0; target_relisten; }
    case_cleanup
}
trap restore EXIT
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
kmsg_watch_start
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=120 || die "login"
disk=$(wait_disks | head -1) || die "no disk"
c0=$(iser_connects)
fio_loop_start "$disk" --rw=randwrite --bs=8k --iodepth=16 --size=8M
stats_loop_start
sleep 4
log "before removal: $(live_counts)"
t0=$(now_ms)
timeout 120 rdma link delete rxe0 || die "rdma link delete rxe0 did not finish in 120 s (status $?)"
log "rdma link delete rxe0 took $(( $(now_ms) - t0 )) ms with I/O running"
wait_sess FAILED 1 10 >/dev/null || die "session still $(sess_states) after device removal"
sleep 3
log "device gone: session $(sess_states), $(live_counts)"
rdma link add rxe0 type rxe netdev veth0 || die "rdma link add rxe0"
target_relisten || die "LIO listener"
t1=$(now_ms)
ms=$(wait_sess LOGGED_IN 1 90) || die "session did not recover within 90 s of the device's return ($(sess_states))"
log "session back $ms ms after the device returned ($(( $(now_ms) - t0 )) ms after removal)"
sleep 3
fio_loop_stop || die "fio verify across device removal"
r=$FIO_LOOP_RESULT
log "iscsiadm -m session -s ran $(stats_loop_stop) times across the removal"
log "fio across device removal: $r (passes, I/Os verified), reconnects $(( $(iser_connects) - c0 ))"

# Second removal, no I/O: log out while the device is gone, then unload.
timeout 120 rdma link delete rxe0 || die "second rdma link delete did not finish"
wait_sess FAILED 1 10 >/dev/null || die "session still $(sess_states) after the second removal"
timeout 60 iscsiadm -m node --logoutall=all >/dev/null 2>&1
[ -z "$(sess_states)" ] || die "sessions left after logout without a device: $(sess_states)"
wait_live_zero || die "live objects after logout: $(live_counts)"
timeout 30 rmmod iser_rs || die "rmmod iser_rs after device removal"
log "logout with the device gone, rmmod clean"
kmsg_watch_check || die "kernel report"
