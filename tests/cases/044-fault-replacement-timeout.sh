#!/usr/bin/env bash
# replacement_timeout expiry: with a 5 s replacement timeout the target's
# link stays down longer than that while fio writes. I/O then fails cleanly
# (fio ends with an I/O error, a new read fails at once, nothing hangs);
# when the link returns (rxe0 re-created if its QP1 died, see rxe_qp1_dead)
# the session is logged in again by iscsid, the disk
# works, and a fresh logout/login cycle verifies clean.
. "$(dirname "$0")/../lib.sh"
tmo=5
trap 'veth0_up; rxe_qp1_dead rxe0 && rxe_recreate rxe0 veth0; case_cleanup' EXIT
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
kmsg_watch_start
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=$tmo $FAST_NOOP || die "login"
disk=$(wait_disks | head -1) || die "no disk"
[ "$(cat /sys/class/iscsi_session/session*/recovery_tmo)" = $tmo ] || die "recovery_tmo is not $tmo"
fio --name=rt --filename="$disk" --direct=1 --ioengine=libaio --rw=randwrite --bs=8k --iodepth=16 \
    --size=8M --time_based --runtime=120 --output=/tmp/rt.fio >/dev/null 2>&1 &
fio_pid=$!
sleep 3
ip link set veth0 down; t0=$(now_ms)
wait_sess FAILED 1 30 >/dev/null || die "connection not lost 30 s after link down"
t1=$(now_ms)
# fio must end with an error once the replacement timeout expires.
for ((i = 0; i < 600; i++)); do kill -0 $fio_pid 2>/dev/null || break; sleep 0.1; done
kill -0 $fio_pid 2>/dev/null && die "fio still running $(( ($(now_ms) - t0) / 1000 )) s after link down (timeout ${tmo} s)"
wait $fio_pid && die "fio succeeded with the link down past replacement_timeout"
t2=$(now_ms)
grep -m1 -E "err=|error" /tmp/rt.fio | sed 's/^/# fio: /'
log "link down: session failed after $((t1 - t0)) ms, fio failed after $((t2 - t1)) ms more (replacement_timeout ${tmo} s)"
timeout 20 dd if="$disk" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null &&
    die "read succeeded with the session down past its replacement timeout"
[ $? = 124 ] && die "read hung with the session down past its replacement timeout"
log "new I/O fails at once: $(cat /sys/block/${disk#/dev/}/device/state)"
sleep 2
veth0_up; t3=$(now_ms)
how="link up"
# rxe's QP1 does not survive CM messages sent while the link was down.
rxe_qp1_dead rxe0 && { rxe_recreate rxe0 veth0 || die "re-creating rxe0"; how="link up, rxe0 re-created"; }
wait_sess LOGGED_IN 1 90 >/dev/null || die "session not logged in again 90 s after link up ($(sess_states))"
log "session logged in again $(( $(now_ms) - t3 )) ms after link up ($how)"
for ((i = 0; i < 100; i++)); do [ "$(cat /sys/block/${disk#/dev/}/device/state)" = running ] && break; sleep 0.1; done
fio_verify "$disk" --rw=randwrite --bs=8k --iodepth=16 --size=4M || die "fio verify after recovery"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
disk=$(login iser | head -1); [ -n "$disk" ] || die "login again"
fio_verify "$disk" --rw=randwrite --bs=8k --iodepth=16 --size=4M || die "fio verify after a new login"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
log "replacement_timeout ${tmo} s expired with I/O failing cleanly; recovered and logged in again, verify clean"
kmsg_watch_check || die "kernel report"
