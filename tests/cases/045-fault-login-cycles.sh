#!/usr/bin/env bash
# Repetition: CYCLES (100) login/logout cycles through iser_rs. After every
# logout the live connection/QP/MR/PD/CQ counts are back to 0; every 10th
# cycle scans its LUN and reads from the disk; unreclaimable slab after the
# cycles is back near its level after the warm-up cycles (SLAB_SLACK_KB,
# 1024; not judged under KASAN, whose quarantine holds freed objects); on a
# kmemleak kernel a scan after unloading the module is clean. No cycle
# makes libiscsi report a connection error: each logout is answered, and
# the target's disconnect after it is the expected end, also when the
# disconnect is handled before the response (HELD_CYCLES, 3, logouts whose
# response the receive path holds 500 ms); a response held past the 2 s
# grace (3 s) makes it a lost connection, reported once, and the logout
# still ends. Then one logout
# whose iscsid stops (SIGSTOP) after sending the Logout and before acting
# on its answer: the target answers and disconnects, and nothing else
# would stop the connection; 15 s later iser_rs reports it failed, the
# kernel stops it without iscsid (live counts 0), and once iscsid resumes
# the session is gone.
. "$(dirname "$0")/../lib.sh"
cycles=${CYCLES:-100}
slab_slack_kb=${SLAB_SLACK_KB:-1024}
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
kmsg_watch_start
portal=$TGT_IP4:$TGT_PORT
iscsiadm -m discovery -t st -p $portal -I iser >/dev/null || die "discovery"
# No LUN scan at login (a disk, its udev events and partition scan cost
# seconds each under TCG); every 10th cycle scans and reads from the disk.
iscsiadm -m node -T $TGT_IQN -p $portal -I iser -o update -n node.session.scan -v manual >/dev/null
cycle() { # cycle N: one login, every 10th a scan and a read, logout, live counts back to 0
    iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null || die "login in cycle $1"
    wait_sess LOGGED_IN 1 30 >/dev/null || die "session not logged in, cycle $1"
    local c; c=$(live_counts)
    [ "${c%% *}" = "live_conns=1" ] || die "cycle $1: logged in with $c"
    if [ $(($1 % 10)) = 0 ]; then
        iscsiadm -m session --rescan >/dev/null || die "rescan in cycle $1"
        local d; d=$(wait_disks | head -1) || die "no disk in cycle $1"
        dd if="$d" of=/dev/null bs=64k count=16 iflag=direct status=none || die "read in cycle $1"
    fi
    iscsiadm -m node -T $TGT_IQN -p $portal --logout >/dev/null || die "logout in cycle $1"
    wait_live_zero || die "cycle $1: live objects after logout: $(live_counts)"
}
# Warm-up: caches (sessions' sysfs, SCSI hosts, slab caches) settle first.
for i in 1 2 3; do cycle 0; done
slab0=$(slab_settled_kb 10)
t0=$(now_ms)
for ((i = 1; i <= cycles; i++)); do
    cycle $i
    [ $((i % 25)) = 0 ] && log "cycle $i: slab $(slab_kb) kB (start $slab0 kB)"
done
ms=$(( $(now_ms) - t0 ))
slab1=$(slab_settled_kb 30 $((slab0 + slab_slack_kb)))
log "$cycles login/logout cycles in ${ms} ms ($((ms / cycles)) ms each); live counts 0 after every logout"
# Every logout was answered: the target's disconnect after it is the
# expected end, not a connection error for libiscsi to report.
errs=$(kmsg_count 'detected conn error')
log "connection errors reported over the cycles: $errs (disconnected after logout: $(kmsg_count 'disconnected after logout'))"
[ "$errs" = 0 ] || die "$errs connection errors reported in clean login/logout cycles"
log "unreclaimable slab: $slab0 kB after warm-up, $slab1 kB after the cycles, settled (delta $((slab1 - slab0)) kB, allowed $slab_slack_kb)"
# The disconnect handled before the Logout Response (rdma_cm's event work
# and the CQ's softirq have no order; a CI run met it once in 43 cycles):
# inject_logout_rsp_delay_ms holds each Logout Response 500 ms in the
# receive path, so the target's disconnect after it comes first. Each such
# logout still ends "after logout", with no connection error.
held_cycles=${HELD_CYCLES:-3}
deferred0=$(kmsg_count 'disconnected before its Logout Response was handled')
ends0=$(kmsg_count 'disconnected after logout')
echo 500 > /sys/module/iser_rs/parameters/inject_logout_rsp_delay_ms
for ((i = 1; i <= held_cycles; i++)); do cycle $i; done
echo 0 > /sys/module/iser_rs/parameters/inject_logout_rsp_delay_ms
deferred=$(( $(kmsg_count 'disconnected before its Logout Response was handled') - deferred0 ))
ends=$(( $(kmsg_count 'disconnected after logout') - ends0 ))
errs=$(kmsg_count 'detected conn error')
log "$held_cycles logouts with the response held 500 ms: the disconnect came first $deferred times; ended after logout $ends, connection errors $errs"
[ "$errs" = 0 ] || die "$errs connection errors reported for logouts whose response was held"
[ "$ends" = "$held_cycles" ] || die "$ends of $held_cycles logouts with a held response ended after logout"
[ "$deferred" -ge 1 ] || die "no disconnect came before its held Logout Response: the race was not reached"
# A response held past the 2 s grace (3 s): the disconnect is judged a
# lost connection then (one connection error for libiscsi), the response
# that comes later is dropped, and the logout still ends the session.
lost0=$(kmsg_count 'the Logout unanswered')
echo 3000 > /sys/module/iser_rs/parameters/inject_logout_rsp_delay_ms
cycle 1
echo 0 > /sys/module/iser_rs/parameters/inject_logout_rsp_delay_ms
lost=$(( $(kmsg_count 'the Logout unanswered') - lost0 ))
errs1=$(kmsg_count 'detected conn error')
log "a logout with the response held 3 s: judged lost $lost times at the grace's end, connection errors $((errs1 - errs)); live counts 0"
[ "$lost" = 1 ] || die "a disconnect whose Logout Response came after the grace was judged lost $lost times, not once"
[ $((errs1 - errs)) = 1 ] || die "$((errs1 - errs)) connection errors for a logout judged lost, not one"
# The logout deadline: iscsid is held in the Logout's send_pdu (10 s, the
# fault-injection delay) while the answer and the disconnect arrive, and
# stopped (once the disconnect is logged) before it returns to act on them.
iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null || die "login before the stalled logout"
wait_sess LOGGED_IN 1 30 >/dev/null || die "session not logged in before the stalled logout"
# iscsid's own processes (a login forks short-lived children: a pid gone
# by the time of the kill is no error).
iscsid_pids=$(pgrep -x iscsid)
trap 'kill -CONT $iscsid_pids 2>/dev/null; case_cleanup' EXIT
ends0=$(kmsg_count 'disconnected after logout')
echo 10000 > /sys/module/iser_rs/parameters/inject_send_pdu_delay_ms
iscsiadm -m node -T $TGT_IQN -p $portal --logout >/dev/null 2>&1 &
logout_pid=$!
t0=$(now_ms)
until [ "$(kmsg_count 'disconnected after logout')" -gt "$ends0" ]; do
    [ $(( $(now_ms) - t0 )) -lt 8000 ] || die "no disconnect within 8 s of the stalled Logout"
    sleep 0.1
done
kill -STOP $iscsid_pids 2>/dev/null
echo 0 > /sys/module/iser_rs/parameters/inject_send_pdu_delay_ms
t0=$(now_ms)
while [ $(( $(now_ms) - t0 )) -lt 40000 ]; do
    [[ "$(live_counts)" == "live_conns=0 live_qps=0 "* ]] && break
    sleep 0.2
done
stopped_ms=$(( $(now_ms) - t0 ))
counts=$(live_counts) reported=$(kmsg_count 'after its successful logout')
kill -CONT $iscsid_pids 2>/dev/null
wait $logout_pid
log "iscsid stopped after its Logout: connection reported failed ($reported) and stopped after $stopped_ms ms ($counts)"
if [ "$reported" != 1 ]; then
    grep -a -E 'iser_rs|connection[0-9:]+|session[0-9]+:' "$KMSG_WATCH_FILE" | grep -a -v 'iser-test' | tail -15 | sed 's/^/# kmsg: /'
    die "the connection iscsid did not stop after its logout was reported failed $reported times, not once ($counts after $stopped_ms ms)"
fi
[[ "$counts" == "live_conns=0 live_qps=0 "* ]] || die "the connection was not stopped without iscsid: $counts"
for ((i = 0; i < 300; i++)); do
    [ -z "$(iscsiadm -m session 2>/dev/null)" ] && break
    sleep 0.1
done
[ -z "$(iscsiadm -m session 2>/dev/null)" ] || die "session left after iscsid resumed: $(sess_states)"
wait_live_zero || die "live objects after the stalled logout: $(live_counts)"
log "iscsid resumed: the session is gone, live counts 0"
iscsiadm -m node -o delete >/dev/null 2>&1
rmmod iser_rs || die "rmmod iser_rs after the cycles"
kmemleak_check || die "kmemleak reports after $cycles cycles"
kmsg_watch_check || die "kernel report during the cycles"
slab_growth_check "$slab0" "$slab1" "$slab_slack_kb" "over $cycles cycles"
