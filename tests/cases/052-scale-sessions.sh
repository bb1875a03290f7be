#!/usr/bin/env bash
# Scale: SESSIONS (64) sessions through iser_rs to one LIO portal
# (node.session.nr_sessions), each with its own disk node of LUN 0.
# Every connection has its own PD (live_pds = SESSIONS). With an
# `iscsiadm -m session -s` loop running, one fio job per disk writes its
# own 1 MiB region with crc32c verify while the portal group is flapped
# once (disabled 1 s): every session reconnects and is back, verify is
# clean, the live counts are the same after as before; memory per session
# (MemAvailable before and after the logins, over SESSIONS) is logged.
# Logout leaves nothing live.
# The login timeout is 60 s here, not the suite's 10 s: LIO takes logins
# one at a time on a portal (its np thread, ~0.3 s each under TCG), so the
# last of 64 simultaneous logins waits ~20 s, more on a slower host. A
# login iscsid gives up on still holds LIO's thread, which makes the next
# ones late too (a CI run lost 2 of 64 after 8 retries of 10 s each).
. "$(dirname "$0")/../lib.sh"
n=${SESSIONS:-64}
t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
trap 'echo 1 > $t/enable; kill $stats_pid 2>/dev/null; case_cleanup' EXIT
setup_rdma rxe
setup_target 1 256
REPLACEMENT_TIMEOUT=120 start_iscsid
load_initiator iser_rs
kmsg_watch_start
portal=$TGT_IP4:$TGT_PORT
mem_kb() { sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo; }
sync; echo 3 > /proc/sys/vm/drop_caches
mem0=$(mem_kb) t0=$SECONDS
login_diag() { dmesg | grep -E "iser_rs|iSCSI Login|isert" | grep -vE "connected \(|released" | tail -8 | sed 's/^/    /'; }
login_node "$portal" node.session.nr_sessions=$n "node.conn[0].timeo.login_timeout=${LOGIN_TIMEOUT:-60}" ||
    { login_diag; die "login of $n sessions"; }
wait_sess LOGGED_IN "$n" 120 >/dev/null || die "$(sess_states | grep -cx LOGGED_IN) of $n sessions logged in"
# LUN 0 of each session (an earlier case of the same boot may have left
# more LUNs in the target).
lun0_disks() {
    local b
    for b in /sys/class/iscsi_session/session*/device/target*/*:0/block/*; do
        [ -e "$b" ] && echo "/dev/${b##*/}"
    done | sort
}
for ((i = 0; i < 600; i++)); do [ "$(lun0_disks | wc -l)" -ge "$n" ] && break; sleep 0.2; done
disks=($(lun0_disks))
[ "${#disks[@]}" = "$n" ] || die "${#disks[@]} LUN 0 disks for $n sessions"
sync; echo 3 > /proc/sys/vm/drop_caches
mem1=$(mem_kb)
counts0=$(live_counts)
log "$n sessions logged in and scanned in $((SECONDS - t0)) s; live: $counts0"
log "MemAvailable: $((mem0 / 1024)) MiB before, $((mem1 / 1024)) MiB after: $(( (mem0 - mem1) / n )) KiB per session (initiator, rxe and LIO together)"
case "$counts0" in *"live_conns=$n "*"live_pds=$n "*) ;; *) die "expected $n connections with a PD each: $counts0" ;; esac
c0=$(iser_connects)
# Per-connection counters read over and over while everything runs.
( while :; do iscsiadm -m session -s >/dev/null 2>&1; done ) &
stats_pid=$!
jobs=()
for ((k = 0; k < n; k++)); do
    jobs+=(--name="s$k" --filename="${disks[k]}" --offset=$((k))M)
done
fio --thread --direct=1 --ioengine=libaio --rw=randwrite --bs=16k --iodepth=4 --size=1M \
    --verify=crc32c --do_verify=1 --verify_fatal=1 --loops=4 --output=/tmp/scale-fio.log "${jobs[@]}" >/dev/null 2>&1 &
fio_pid=$!
sleep 5
echo 0 > $t/enable
wait_sess FAILED 1 30 >/dev/null || die "the portal flap failed no session within 30 s"
sleep 1
echo 1 > $t/enable; t1=$SECONDS
wait_sess LOGGED_IN "$n" 110 >/dev/null || die "$(sess_states | grep -cx LOGGED_IN) of $n sessions back within 110 s"
log "all $n sessions back $((SECONDS - t1)) s after the portal came back"
wait $fio_pid || { grep -m3 -E "err=|verify|mismatch" /tmp/scale-fio.log; die "fio verify on $n disks across the flap"; }
kill $stats_pid 2>/dev/null; wait $stats_pid 2>/dev/null
reconnects=$(( $(iser_connects) - c0 ))
counts1=$(live_counts)
log "fio verify on $n disks clean across the flap; $reconnects reconnects; live: $counts1"
[ "$reconnects" -ge "$n" ] || die "$reconnects reconnects for $n sessions"
[ "$counts1" = "$counts0" ] || die "live counts changed across the flap: $counts0 -> $counts1"
logout_all
for ((i = 0; i < 600; i++)); do [ "$(live_counts)" = "live_conns=0 live_qps=0 live_mrs=0 live_pds=0 live_cqs=0 live_dma_pages=0 " ] && break; sleep 0.1; done
wait_live_zero || die "live objects after logout: $(live_counts)"
kmsg_watch_check || die "kernel report"
