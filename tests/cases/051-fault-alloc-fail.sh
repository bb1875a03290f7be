#!/usr/bin/env bash
# Allocation failures on the login and reconnect paths. The kernel's
# failslab and fail_page_alloc are narrowed by their stack-trace filter to
# allocations made with iser_rs's code on the stack (its callbacks from
# iscsid and libiscsi, its CM handler, its calls into ib_core and the
# provider), and fail one of the next K such allocations (interval K,
# times 1), K growing from attempt to attempt.
# - Login: 14 logins with one injected failure each; iscsid's retry may
#   then succeed, or the login fails. Either way the next login without
#   injection succeeds, and after logout every live count is 0.
# - Reconnect: under a write+verify fio loop, the portal is flapped 8
#   times with one failure armed for the reconnect; the session comes back
#   and the verify stays clean.
# One allocation is never failed: scsi_transport_iscsi's event to iscsid
# about a failed connection (the kernel drops the event when it fails, so
# no transport's session is recovered). At the end: no kernel report
# (WARNING, BUG, lockdep, KASAN) and, on a kmemleak kernel, a clean scan
# after unloading the module. Prints how many attempts had a failure
# injected and the innermost iser_rs function of each.
. "$(dirname "$0")/../lib.sh"
dbg=/sys/kernel/debug
mountpoint -q $dbg || mount -t debugfs none $dbg 2>/dev/null
[ -d $dbg/failslab ] && [ -d $dbg/fail_page_alloc ] || skip "kernel without failslab/fail_page_alloc (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC)"
[ -e $dbg/failslab/require-start ] || skip "kernel without the fault-injection stack-trace filter"
setup_rdma rxe
setup_target 1
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator iser_rs
portal=$TGT_IP4:$TGT_PORT
t=$CFG/target/iscsi/$TGT_IQN/tpgt_1

# iser_rs's text: the lowest and highest end of its .text sections (the
# module's addresses from sysfs, the sizes from the .ko's section table).
ko=${ISER_RS_KO:-$ISER_RS_REPO/iser_rs.ko}
read -r text_start text_end < <(
    readelf -SW "$ko" | sed -n 's/^ *\[ *[0-9]*\] \(\.text[^ ]*\) \+[A-Z_]\+ \+[0-9a-f]\+ [0-9a-f]\+ \([0-9a-f]\+\) .*/\1 \2/p' | while read -r sec size; do
        [ -e "/sys/module/iser_rs/sections/$sec" ] || continue
        echo "$(cat "/sys/module/iser_rs/sections/$sec") $size"
    done | python3 -c '
import sys
r = [(int(a, 16), int(a, 16) + int(s, 16)) for a, s in (l.split() for l in sys.stdin)]
if r and max(b for _, b in r) > min(a for a, _ in r):
    print(hex(min(a for a, _ in r)), hex(max(b for _, b in r)))')
[ -n "$text_end" ] || die "iser_rs's text range from sysfs and readelf"
log "iser_rs text: $text_start-$text_end"

# Never failed: scsi_transport_iscsi's netlink event that tells iscsid a
# connection failed (iscsi_conn_error_event). Its one GFP_ATOMIC skb is
# the kernel's, not iser_rs's; when it fails the kernel logs "gracefully
# ignored conn error" and drops the event, iscsid never reconnects, and
# the session times out (seen here with failslab K=1 at a portal flap: no
# transport, ib_iser included, learns that the event was lost).
read -r reject_start reject_end < <(python3 -c '
import sys
syms = sorted((int(a, 16), n) for a, t, n, *_ in (l.split() for l in open("/proc/kallsyms")) if t in "tT")
for i, (a, n) in enumerate(syms):
    if n == "iscsi_conn_error_event":
        print(hex(a), hex(syms[i + 1][0]))
        break')
[ -n "$reject_end" ] || die "iscsi_conn_error_event not in /proc/kallsyms"
for f in failslab fail_page_alloc; do
    d=$dbg/$f
    echo 0 > $d/times
    echo "$text_start" > $d/require-start
    echo "$text_end" > $d/require-end
    echo "$reject_start" > $d/reject-start
    echo "$reject_end" > $d/reject-end
    echo 32 > $d/stacktrace-depth
    echo N > $d/task-filter
    echo N > $d/ignore-gfp-wait
    echo 2 > $d/verbose
    echo 0 > $d/verbose_ratelimit_burst 2>/dev/null || true
    echo 100 > $d/probability
done
echo 0 > $dbg/fail_page_alloc/min-order
echo N > $dbg/fail_page_alloc/ignore-gfp-highmem

# arm F K: the next failure of F (failslab, fail_page_alloc) at one of the
# next K allocations made with iser_rs on the stack; disarm F: none.
# injected F: 0 if the armed failure happened.
arm() { echo "$2" > $dbg/$1/interval; echo 1 > $dbg/$1/times; }
disarm() { echo 0 > $dbg/$1/times; }
injected() { [ "$(cat $dbg/$1/times)" = 0 ]; }

kmsg_watch_start
iscsiadm -m discovery -t st -p $portal -I iser >/dev/null || die "discovery"
iscsiadm -m node -T $TGT_IQN -p $portal -I iser -o update -n node.session.scan -v manual >/dev/null
iscsiadm -m node -T $TGT_IQN -p $portal -I iser -o update -n node.session.initial_login_retry_max -v 2 >/dev/null
hits=0 tries=0 failed_logins=0
login_under() { # login_under F K: one login with F armed at K, then a clean one
    local f=$1 k=$2 rc=0 t0 how="not reached"
    tries=$((tries + 1))
    t0=$(now_ms)
    arm "$f" "$k"
    timeout -k 5 120 iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null 2>&1 || rc=$?
    disarm "$f"
    if injected "$f"; then hits=$((hits + 1)); how="injected"; fi
    log "$f K=$k: $how; iscsiadm --login rc $rc after $(( $(now_ms) - t0 )) ms"
    if [ $rc -ne 0 ]; then
        failed_logins=$((failed_logins + 1))
        wait_sess LOGGED_IN 1 1 >/dev/null 2>&1 && die "$f K=$k: iscsiadm failed (rc $rc) but a session is logged in"
        iscsiadm -m node -T $TGT_IQN -p $portal --logout >/dev/null 2>&1
        wait_live_zero || die "$f K=$k: live objects after the failed login: $(live_counts)"
        timeout -k 5 120 iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null ||
            die "$f K=$k: no login after the failed one"
    fi
    wait_sess LOGGED_IN 1 30 >/dev/null || die "$f K=$k: session not logged in ($(sess_states))"
    local c; c=$(live_counts)
    [ "${c%% *}" = "live_conns=1" ] || die "$f K=$k: logged in with $c"
    iscsiadm -m node -T $TGT_IQN -p $portal --logout >/dev/null || die "$f K=$k: logout"
    wait_live_zero || die "$f K=$k: live objects after logout: $(live_counts)"
}
for k in 1 2 4 8 16 32 64 128 256 512; do
    login_under failslab $k
done
for k in 1 4 16 64; do
    login_under fail_page_alloc $k
done
log "login: $tries attempts, $hits with an allocation failure injected, $failed_logins of them failed the login; every next login succeeded and every logout left live counts 0"

# Reconnects under I/O.
iscsiadm -m node -T $TGT_IQN -p $portal -I iser -o update -n node.session.scan -v auto >/dev/null
iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null || die "login for the reconnects"
disk=$(wait_disks | head -1) || die "no disk"
counts0=$(live_counts)
c0=$(iser_connects)
fio_loop_start "$disk" --rw=randwrite --bs=8k --iodepth=16 --size=8M
rhits=0 rtries=0
for fk in failslab:1 failslab:4 failslab:16 failslab:64 failslab:256 fail_page_alloc:1 fail_page_alloc:8 fail_page_alloc:64; do
    f=${fk%%:*} k=${fk#*:}
    rtries=$((rtries + 1))
    sleep 2
    arm "$f" "$k"
    echo 0 > $t/enable; sleep 1; echo 1 > $t/enable
    ms=$(wait_sess LOGGED_IN 1 90) || { disarm "$f"; die "$f K=$k: session not back 90 s after the portal flap ($(sess_states))"; }
    # Leave the armed failure a few seconds of I/O to land in, then disarm.
    sleep 2
    disarm "$f"
    how="no allocation reached"
    if injected "$f"; then rhits=$((rhits + 1)); how="failure injected"; fi
    ms=$(wait_sess LOGGED_IN 1 90) || die "$f K=$k: session not back after the injected failure ($(sess_states))"
    log "reconnect $rtries ($f K=$k): $how; logged in"
done
sleep 2
fio_loop_stop || die "fio verify across the reconnects with injected failures"
reconnects=$(( $(iser_connects) - c0 ))
counts1=$(live_counts)
[ "$counts1" = "$counts0" ] || die "live counts changed across the reconnects: $counts0 -> $counts1"
log "reconnect: $rtries portal flaps, $rhits with an allocation failure injected, $reconnects reconnects, fio $FIO_LOOP_RESULT (passes, I/Os verified)"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
# The innermost iser_rs frame of each injected failure's stack.
sites=$(awk '/FAULT_INJECTION: forcing a failure/ { want = 1; next }
    want && /\[iser_rs\]/ { for (i = 1; i < NF; i++) if ($(i + 1) == "[iser_rs]") { f = $i; sub(/\+0x.*/, "", f); print f; break }; want = 0 }' "$KMSG_WATCH_FILE" | sort | uniq -c | sort -rn)
log "innermost iser_rs function of the injected failures ($(echo "$sites" | grep -c .) distinct):"
echo "$sites" | head -20 | sed 's/^/#   /'
rmmod iser_rs || die "rmmod iser_rs"
kmemleak_check || die "kmemleak reports after the injected failures"
kmsg_watch_check || die "kernel report"
