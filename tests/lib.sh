# shellcheck shell=bash
# Guest-side library for iser-rs tests (sourced by tests/run-guest, the
# cases in tests/cases/, scripts/demo and scripts/bench). Runs as root
# inside the virtme-ng guest started by scripts/vm-run.
#
# Addresses are from the documentation ranges (RFC 5737, RFC 3849) on the
# guest's own veth pair: nothing here can reach beyond the guest.

ISER_RS_REPO=${ISER_RS_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ISER_RS_KDIR=${ISER_RS_KDIR:-}
ISER_RS_OUT=${ISER_RS_OUT:-/tmp}
TGT_IP4=192.0.2.1
TGT_IP6=2001:db8::1
TGT_PORT=3260
TGT_IQN=iqn.2026-11.test.iser-rs:target
INI_IQN=iqn.2026-11.test.iser-rs:initiator
CFG=/sys/kernel/config
KSFT_PASS=0 KSFT_FAIL=1 KSFT_SKIP=4

log() { echo "# $*"; }

# A modular kernel (Debian's own, modules under /lib/modules/$(uname -r))
# gets what the test kernel has built in; on the test kernel there is
# nothing to load (no modules.dep).
if [ -f "/lib/modules/$(uname -r)/modules.dep" ]; then
    modprobe -a configfs target_core_mod target_core_iblock iscsi_target_mod \
        ib_isert null_blk rdma_rxe veth rdma_cm rdma_ucm ib_uverbs ib_core \
        libiscsi scsi_transport_iscsi iscsi_tcp sg 2>/dev/null ||
        { echo "# FAIL: modprobe of the test's kernel modules"; exit 1; }
    # Only a case loads an initiator: iscsid must not autoload the kernel's
    # ib_iser (it does when no transport "iser" is registered, e.g. after a
    # case unloaded iser_rs), or iser_rs could not register it next.
    echo "install ib_iser /bin/false" > /etc/modprobe.d/iser-rs-tests.conf
fi
# have_siw: soft-iWARP is in this kernel (built in or a module). Debian's
# kernels leave RDMA_SIW unset.
have_siw() {
    [ -d /sys/module/siw ] || modprobe siw 2>/dev/null
}

# Every case leaves the guest as it found it for the next one: sessions
# logged out, initiator modules unloaded (fio state files go to /tmp).
cd /tmp || true
case_cleanup() {
    iscsiadm -m node --logoutall=all >/dev/null 2>&1 || true
    iscsiadm -m node -o delete >/dev/null 2>&1 || true
    local t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
    [ -d "$t" ] && echo 0 > "$t/attrib/authentication" 2>/dev/null
    lsmod | grep -q '^iser_rs ' && rmmod iser_rs 2>/dev/null
    lsmod | grep -q '^ib_iser ' && rmmod ib_iser 2>/dev/null
    true
}
[ "${ISER_RS_NO_CLEANUP:-0}" = 1 ] || trap case_cleanup EXIT
die() { echo "# FAIL: $*"; exit "$KSFT_FAIL"; }

# Whether this boot has debug_pagealloc on, as debug_pagealloc_enabled()
# sees it: the kernel has DEBUG_PAGEALLOC, and the last debug_pagealloc=
# on the command line says so (the kernel's kstrtobool: 1/y/t/on... or
# 0/n/f/off...), or, with none it understands, the configuration has it
# on by default (the debug kernel: DEBUG_PAGEALLOC_ENABLE_DEFAULT). The
# configuration is read from the kernel's build tree (ISER_RS_KDIR); a
# kernel without one known (Debian's, which leaves DEBUG_PAGEALLOC out)
# counts as off.
debug_pagealloc_on() {
    local cfg=${ISER_RS_KDIR:-/nonexistent}/.config v
    grep -qx 'CONFIG_DEBUG_PAGEALLOC=y' "$cfg" 2>/dev/null || return 1
    v=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^debug_pagealloc=//p' | tail -n 1)
    case $v in
        [yYtT1]* | [oO][nN]*) return 0 ;;
        [nNfF0]* | [oO][fF]*) return 1 ;;
    esac
    grep -qx 'CONFIG_DEBUG_PAGEALLOC_ENABLE_DEFAULT=y' "$cfg"
}
skip() { echo "# SKIP: $*"; exit "$KSFT_SKIP"; }

# --- RDMA link -------------------------------------------------------------
# setup_rdma [rxe|siw]: veth0<->veth1 with the target's addresses on veth0
# and an RDMA device ${RDMA_DEV} (rxe0 or siw0) bound to veth0. Target and
# initiator share the guest; the soft drivers loop local traffic back.
RDMA_DEV=
setup_rdma() {
    local kind=${1:-rxe}
    mountpoint -q $CFG || mount -t configfs none $CFG
    if ! ip link show veth0 >/dev/null 2>&1; then
        ip link add veth0 type veth peer name veth1
        ip link set veth0 mtu "${VETH_MTU:-1500}"
        ip link set veth1 mtu "${VETH_MTU:-1500}"
        ip addr add $TGT_IP4/24 dev veth0
        ip -6 addr add $TGT_IP6/64 dev veth0 nodad
        ip link set veth0 up
        ip link set veth1 up
        ip link set lo up
    fi
    RDMA_DEV=${kind}0
    if ! rdma link show "$RDMA_DEV/1" >/dev/null 2>&1; then
        rdma link add "$RDMA_DEV" type "$kind" netdev veth0 || die "rdma link add $RDMA_DEV"
    fi
    rdma link show "$RDMA_DEV/1" | grep -q "state ACTIVE" || sleep 1
}

# veth_mtu M: both veth ends at MTU M (no session may be up), then waits
# until the RDMA device's port follows (rxe takes its IB MTU from the
# netdev's) and prints its active MTU ("unknown" if it did not say within
# 4 s). Fails if the MTU cannot be set.
veth_mtu() {
    local m=$1 active= i
    ip link set veth0 mtu "$m" && ip link set veth1 mtu "$m" || return 1
    for ((i = 0; i < 20; i++)); do
        active=$(ibv_devinfo -d "$RDMA_DEV" 2>/dev/null | awk '/active_mtu:/ {print $2; exit}')
        [ -n "$active" ] && [ "$(cat /sys/class/net/veth0/mtu)" = "$m" ] && break
        sleep 0.2
    done
    echo "${active:-unknown}"
}

# nullb_dev I: prints the block device of null_blk LUN I (configfs item
# iser$I: /dev/iser$I, or /dev/nullb<index> on older kernels); fails if it
# is not there (yet).
nullb_dev() {
    local dev
    for dev in /dev/iser$1 /dev/nullb$(cat "$CFG/nullb/iser$1/index"); do
        [ -b "$dev" ] && { echo "$dev"; return 0; }
    done
    return 1
}

# --- LIO target --------------------------------------------------------------
# setup_target [nluns] [size_mb]: null_blk (memory backed) LUNs exported by
# LIO over iSCSI with iSER enabled on $TGT_IP4:$TGT_PORT (and TCP on the
# same portal for the iscsi_tcp comparison). Configured through configfs.
setup_target() {
    local nluns=${1:-1} size=${2:-256} i
    mountpoint -q $CFG || mount -t configfs none $CFG
    local t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
    for ((i = 0; i < nluns; i++)); do
        [ -e "$t/lun/lun_$i" ] && continue
        local nb=$CFG/nullb/iser$i
        mkdir -p "$nb"
        if [ "$(cat "$nb/power")" != 1 ]; then
            echo "$size" > "$nb/size"
            echo 1 > "$nb/memory_backed"
            echo 512 > "$nb/blocksize"
            echo 2 > "$nb/queue_mode"      # blk-mq
            echo 1 > "$nb/power"
        fi
        # The kernel runs with null_blk.nr_devices=0: configfs devices only,
        # named after their configfs item (older kernels: nullb<index>).
        local dev= w
        for ((w = 0; w < 50; w++)); do
            dev=$(nullb_dev "$i") && break
            sleep 0.1
        done
        [ -b "$dev" ] || die "null_blk device for $nb did not appear"
        local bs=$CFG/target/core/iblock_$i/disk$i
        if [ ! -d "$bs" ]; then
            mkdir -p "$bs"
            echo "udev_path=$dev" > "$bs/control"
            echo 1 > "$bs/enable"
        fi
        mkdir -p "$t/lun/lun_$i"
        ln -s "$bs" "$t/lun/lun_$i/disk$i"
    done
    [ "$(cat "$t/enable")" = 1 ] && return 0
    mkdir -p "$t/np/$TGT_IP4:$TGT_PORT"
    echo 1 > "$t/np/$TGT_IP4:$TGT_PORT/iser" || die "LIO: enabling iSER on the portal failed"
    mkdir -p "$t/np/[$TGT_IP6]:$TGT_PORT" 2>/dev/null &&
        { echo 1 > "$t/np/[$TGT_IP6]:$TGT_PORT/iser" || log "LIO: no iSER on the IPv6 portal"; }
    echo 0 > "$t/attrib/authentication"
    echo 1 > "$t/attrib/generate_node_acls"
    echo 0 > "$t/attrib/demo_mode_write_protect"
    echo 1 > "$t/attrib/cache_dynamic_acls"
    echo 1 > "$t/enable"
}

# fill_luns [nluns]: writes every byte of the null_blk LUNs once, so that
# no measured run pays null_blk's first write to a page (a page allocation
# and a radix-tree insert) and no read finds a page missing (a zero fill
# instead of a copy). Without it a measurement depends on which initiator
# ran first: in one tools/insn-count boot of 2026-12-03 the first
# initiator's 4k writes at QD32 ran 741 more instructions each than the
# second's in the page allocator, the radix tree and null_blk, and the
# second's 4k reads 1,409 more (copying pages the first one's writes had
# allocated); with the fill, in the next boot, 109 and -381. The
# benchmarks call it after setup_target.
fill_luns() {
    local nluns=${1:-1} i dev
    for ((i = 0; i < nluns; i++)); do
        dev=$(nullb_dev "$i") || die "fill_luns: no null_blk device for LUN $i"
        dd if=/dev/zero of="$dev" bs=1M count=$(($(blockdev --getsize64 "$dev") >> 20)) \
            oflag=direct status=none || die "fill_luns: writing $dev failed"
    done
}

# target_chap USER SECRET: require one-way CHAP on the target portal group.
target_chap() {
    local t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
    echo -n "$1" > "$t/auth/userid"
    echo -n "$2" > "$t/auth/password"
    echo 1 > "$t/attrib/authentication"
}

# --- initiator ---------------------------------------------------------------
start_iscsid() {
    mkdir -p /etc/iscsi /var/lib/iscsi /run/lock/iscsi
    echo "InitiatorName=$INI_IQN" > /etc/iscsi/initiatorname.iscsi
    [ -f /etc/iscsi/iscsid.conf ] || touch /etc/iscsi/iscsid.conf
    # Short timeouts: a test waits seconds, not the production minutes.
    sed -i -e '/^node.session.timeo.replacement_timeout/d' \
        -e '/^node.conn\[0\].timeo.login_timeout/d' /etc/iscsi/iscsid.conf
    {
        echo "node.session.timeo.replacement_timeout = ${REPLACEMENT_TIMEOUT:-20}"
        echo "node.conn[0].timeo.login_timeout = 10"
    } >> /etc/iscsi/iscsid.conf
    # The timeouts above are written even when iscsid already runs (an
    # earlier case started it): iscsiadm reads them when discovery creates
    # a node record. Returning before them gave case 057 (30 s) the 120 s
    # of case 052 in a boot of 052 and 057 (2026-12-02): its held READ
    # outlasted dd's 150 s.
    pgrep -x iscsid >/dev/null && return 0
    iscsid || die "iscsid failed to start"
    sleep 0.5
}

# load_initiator iser_rs|ib_iser: makes that module provide transport "iser".
load_initiator() {
    case $1 in
    iser_rs)
        lsmod | grep -q '^ib_iser ' && rmmod ib_iser
        lsmod | grep -q '^iser_rs ' || insmod "${ISER_RS_KO:-$ISER_RS_REPO/iser_rs.ko}" || die "insmod ${ISER_RS_KO:-iser_rs.ko}"
        ;;
    ib_iser)
        lsmod | grep -q '^iser_rs ' && rmmod iser_rs
        lsmod | grep -q '^ib_iser ' || load_ib_iser || die "loading ib_iser"
        ;;
    *) die "load_initiator: unknown initiator $1" ;;
    esac
}

# login [transport] [portal]: discovery and login; echoes the new disk(s).
login() {
    local iface=${1:-iser} portal=${2:-$TGT_IP4:$TGT_PORT}
    iscsiadm -m discovery -t st -p "$portal" -I "$iface" >/dev/null || return 1
    iscsiadm -m node -T $TGT_IQN -p "$portal" -I "$iface" --login >/dev/null || return 1
    wait_disks
}

# wait_disks: echo the block devices of all iSCSI sessions, waiting for the scan.
wait_disks() {
    local i d
    for ((i = 0; i < 100; i++)); do
        d=$(session_disks)
        [ -n "$d" ] && { echo "$d"; return 0; }
        sleep 0.2
    done
    return 1
}

session_disks() {
    local b
    for b in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
        [ -e "$b" ] && echo "/dev/$(basename "$b")"
    done | sort
}

logout_all() {
    iscsiadm -m node --logoutall=all >/dev/null 2>&1 || true
    iscsiadm -m node -o delete >/dev/null 2>&1 || true
}

# live_counts: iser_rs's live connection/QP/MR/PD/CQ counts and its
# mapped buffer pages, one line.
live_counts() {
    local p out=
    for p in live_conns live_qps live_mrs live_pds live_cqs live_dma_pages; do
        out+="$p=$(cat /sys/module/iser_rs/parameters/$p) "
    done
    echo "$out"
}

# wait_live_zero: iscsid tears endpoints down asynchronously after logout;
# wait up to 10 s for every live count to reach 0.
wait_live_zero() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ "$(live_counts)" = "live_conns=0 live_qps=0 live_mrs=0 live_pds=0 live_cqs=0 live_dma_pages=0 " ] && return 0
        sleep 0.1
    done
    return 1
}

# fio_verify DEV [fio options...]: crc32c verify; fails on any mismatch.
fio_verify() {
    local dev=$1; shift
    fio --name=verify --filename="$dev" --direct=1 --ioengine=libaio \
        --verify=crc32c --do_verify=1 --verify_fatal=1 --size=16M \
        --output-format=terse --minimal "$@" >/dev/null
}

# --- kernel reports ----------------------------------------------------------
REPORT_RE='STag guarantee broken|BUG:|WARNING:|Oops|KASAN|UBSAN|possible circular locking|possible recursive locking|inconsistent lock state|sleeping function called from invalid context|kmemleak:.*new suspected|general protection fault|Kernel panic|list_add corruption|list_del corruption|refcount_t:|INFO: task .* blocked|iser_rs.* enqueued on deprecated workqueue'

# report_lines: the report lines (REPORT_RE) of the kernel log text on
# stdin, each followed by " <<< " and the line before it: a WARN prints its
# own message just before its WARNING line, and tests/known-reports tells
# some reports by that message.
report_lines() { awk -v re="$REPORT_RE" '$0 ~ re { print $0 " <<< " prev } { prev = $0 }'; }
# known_report_res: the regexes of tests/known-reports (reports raised
# outside the initiator, each with its evidence), or one that matches
# nothing.
known_report_res() { grep -v '^#' "$ISER_RS_REPO/tests/known-reports" 2>/dev/null | grep . || echo '^$'; }

# kernel_reports: print the report lines of the kernel log (empty: clean).
kernel_reports() {
    dmesg | grep -E "$REPORT_RE" || true
}

# --- fault and recovery (cases 04x) ------------------------------------------
# now_ms: monotonic-enough wall clock in milliseconds.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# sess_states: the state of every iSCSI session (LOGGED_IN, FAILED, FREE), one a line.
sess_states() { cat /sys/class/iscsi_session/session*/state 2>/dev/null; }

# wait_sess STATE N TIMEOUT_S: wait until at least N sessions are in STATE;
# echoes the milliseconds waited, fails after TIMEOUT_S.
wait_sess() {
    local state=$1 n=$2 t=$3 t0 now
    t0=$(now_ms)
    while :; do
        now=$(now_ms)
        if [ "$(sess_states | grep -cx "$state")" -ge "$n" ]; then
            echo $((now - t0)); return 0
        fi
        [ $((now - t0)) -ge $((t * 1000)) ] && return 1
        sleep 0.1
    done
}

# login_node PORTAL [name=value ...]: discovery on PORTAL through iser, set
# the node record's parameters (e.g. node.session.timeo.replacement_timeout=5)
# and log in; the disk appears later (wait_disks / session_disks).
login_node() {
    local portal=$1 kv; shift
    iscsiadm -m discovery -t st -p "$portal" -I iser >/dev/null || return 1
    for kv in "$@"; do
        iscsiadm -m node -T $TGT_IQN -p "$portal" -I iser -o update -n "${kv%%=*}" -v "${kv#*=}" >/dev/null || return 1
    done
    iscsiadm -m node -T $TGT_IQN -p "$portal" -I iser --login >/dev/null
}

# FAST_NOOP: node settings for login_node that make iSCSI notice a dead link
# in ~4 s (NOP-Out every 2 s, 2 s to answer) instead of the default 10 s.
FAST_NOOP="node.conn[0].timeo.noop_out_interval=2 node.conn[0].timeo.noop_out_timeout=2"
# UNSOL_LOGIN: node settings for login_node that ask for unsolicited
# Data-Out (InitialR2T=No, ImmediateData=Yes, FirstBurstLength 256 KiB);
# the target must allow it (target_unsolicited yes). Cases 035 and 054.
UNSOL_LOGIN="node.session.iscsi.InitialR2T=No node.session.iscsi.ImmediateData=Yes node.session.iscsi.FirstBurstLength=262144"

# iser_connects: how many connections iser_rs has established since it was
# loaded (its `connects` counter; counting "connected" lines in dmesg
# undercounts once the kernel's log ring buffer wraps in a long run).
iser_connects() { cat /sys/module/iser_rs/parameters/connects 2>/dev/null || echo 0; }

# slab_kb: unreclaimable slab memory in kB (/proc/meminfo; the tinyconfig
# kernel has SLUB_TINY and no /proc/slabinfo), after dropping clean caches.
slab_kb() {
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
    sed -n 's/^SUnreclaim: *\([0-9]*\) kB/\1/p' /proc/meminfo
}

# slab_settled_kb [SECS [BELOW_KB]]: the lowest slab_kb over SECS (10) one-second
# samples, ending early once a sample is at or below BELOW_KB. Freed objects
# reach the slab allocator late (RCU callbacks, deferred work after a logout:
# measured here, a few hundred kB for about 3 s after the last cycle, and one
# CI run 2.5 MB), so one immediate sample cannot tell a leak from objects in
# flight; a leak never comes back down, whatever the wait.
slab_settled_kb() {
    local secs=${1:-10} below=${2:-0} min= v i
    for ((i = 0; i < secs; i++)); do
        v=$(slab_kb)
        { [ -z "$min" ] || [ "$v" -lt "$min" ]; } && min=$v
        [ "$min" -le "$below" ] && break
        sleep 1
    done
    echo "$min"
}

# slab_growth_check BEFORE_KB AFTER_KB SLACK_KB WHAT: fails when slab grew by
# more than SLACK_KB over WHAT. Not judged under KASAN, whose quarantine (up
# to 1/32 of memory) holds freed objects: there kmemleak's scan is the judge.
slab_growth_check() {
    local before=$1 after=$2 slack=$3 what=$4
    if [ "${DEBUG:-0}" = 1 ] || dmesg | grep -q "KernelAddressSanitizer initialized"; then
        log "KASAN kernel: slab delta not judged (freed objects sit in KASAN's quarantine); kmemleak is"
        return 0
    fi
    [ $((after - before)) -le "$slack" ] || die "unreclaimable slab grew by $((after - before)) kB $what"
}

# kmsg_watch_start / kmsg_watch_check: follow the kernel log from now on into
# a file and, at the end, fail on any report in it. Long cases use this next
# to the runner's check because they can wrap the kernel's log buffer.
KMSG_WATCH_PID= KMSG_WATCH_FILE=/tmp/kmsg-watch.log
kmsg_watch_start() {
    : > "$KMSG_WATCH_FILE"
    dmesg -W > "$KMSG_WATCH_FILE" 2>&1 &
    KMSG_WATCH_PID=$!
}
# kmsg_sync: wait (up to 5 s) until the follower has copied every kernel
# message logged so far into the watch file: a marker written to the log
# now has reached it. A state the kernel reached after logging a line
# (live counts 0 after a warning) does not mean dmesg has been scheduled
# to copy that line yet.
kmsg_sync() {
    [ -n "$KMSG_WATCH_PID" ] || return 0
    local mark="iser-test: kmsg sync $$.$RANDOM.$(now_ms)" i
    echo "$mark" > /dev/kmsg
    for ((i = 0; i < 100; i++)); do
        grep -a -qF -- "$mark" "$KMSG_WATCH_FILE" && return 0
        sleep 0.05
    done
    echo "# the kernel log follower did not catch up in 5 s"
}
# kmsg_count RE: how many lines of the kernel log since kmsg_watch_start
# match RE (grep's basic regular expression), up to now (kmsg_sync).
kmsg_count() { kmsg_sync >&2; grep -ac -- "$1" "$KMSG_WATCH_FILE"; }
kmsg_watch_check() {
    local r
    sleep 0.5
    [ -n "$KMSG_WATCH_PID" ] && kill "$KMSG_WATCH_PID" 2>/dev/null
    wait "$KMSG_WATCH_PID" 2>/dev/null
    KMSG_WATCH_PID=
    r=$(report_lines < "$KMSG_WATCH_FILE")
    # Known reports raised outside the initiator (tests/known-reports) are
    # printed and not failed, as tests/run-guest does.
    if [ -n "$r" ]; then
        echo "$r" | grep -Ef <(known_report_res) | sed 's/^/# known report, not the initiator (tests\/known-reports): /'
        r=$(echo "$r" | grep -vEf <(known_report_res) || true)
    fi
    [ -z "$r" ] && return 0
    local first; first=$(echo "$r" | head -1 | sed 's/^\[[^]]*\] //; s/ <<< .*//')
    echo "# kernel report:"; grep -a -F -m1 -B2 -A30 -- "$first" "$KMSG_WATCH_FILE" | head -60 | sed 's/^/#   /'
    return 1
}

# kmemleak_check: on a kernel with kmemleak, scan now and fail on any
# suspected leak (printed with its backtrace); no-op (status 0) without it.
kmemleak_check() {
    local k=/sys/kernel/debug/kmemleak
    mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2>/dev/null
    [ -e $k ] || return 0
    echo scan > $k; sleep 1; echo scan > $k
    local r; r=$(cat $k)
    [ -z "$r" ] && { log "kmemleak: scan clean"; return 0; }
    echo "$r" | head -120 | sed 's/^/#   /'
    return 1
}

# fio_loop_start DISK [fio options]: successive crc32c write+verify passes on
# DISK in the background until fio_loop_stop; every pass must verify clean.
# fio_loop_stop: ends after the running pass; sets FIO_LOOP_RESULT to "PASSES
# IOS" (IOS: blocks read back and verified); fails if any pass failed (its
# output is printed). Call it in the case's shell, not in $(...): it waits
# for the background loop, which only that shell can.
FIO_LOOP_PID= FIO_LOOP_DIR=/tmp/fio-loop.$$ FIO_LOOP_RESULT=
fio_loop_start() {
    local disk=$1; shift
    rm -rf "$FIO_LOOP_DIR"; mkdir -p "$FIO_LOOP_DIR"
    (
        n=0
        while [ ! -e "$FIO_LOOP_DIR/stop" ]; do
            n=$((n + 1))
            fio --name=loop --filename="$disk" --direct=1 --ioengine=libaio \
                --verify=crc32c --do_verify=1 --verify_fatal=1 \
                --output-format=json --output="$FIO_LOOP_DIR/pass$n.json" "$@" \
                > "$FIO_LOOP_DIR/pass$n.err" 2>&1 || { echo "$n" > "$FIO_LOOP_DIR/failed"; exit 1; }
        done
    ) &
    FIO_LOOP_PID=$!
}
fio_loop_stop() {
    touch "$FIO_LOOP_DIR/stop"
    wait "$FIO_LOOP_PID"
    local rc=$?
    if [ -e "$FIO_LOOP_DIR/failed" ] || [ $rc -ne 0 ]; then
        local n; n=$(cat "$FIO_LOOP_DIR/failed" 2>/dev/null)
        {
            cp "$FIO_LOOP_DIR/pass$n.err" "$ISER_RS_OUT/cases/$(basename "$0" .sh).fio-pass$n.err" 2>/dev/null
            echo "# fio pass $n failed:"
            grep -vE '^\s*$' "$FIO_LOOP_DIR/pass$n.err" 2>/dev/null | tail -20 | sed 's/^/#   /'
            python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); [print("#   job %s: error %s, read ios %s, write ios %s" % (x["jobname"], x["error"], x["read"]["total_ios"], x["write"]["total_ios"])) for x in j["jobs"]]' "$FIO_LOOP_DIR/pass$n.json" 2>/dev/null
        } >&2
        return 1
    fi
    FIO_LOOP_RESULT=$(python3 - "$FIO_LOOP_DIR" <<'PY'
import glob, json, sys
passes = ios = 0
for f in glob.glob(sys.argv[1] + "/pass*.json"):
    t = open(f).read()
    j = json.loads(t[t.index("{"):])  # fio may put notes before the JSON
    passes += 1
    ios += sum(job["read"]["total_ios"] for job in j["jobs"])
print(passes, ios)
PY
)
}

# veth0_up: the target's link back up with its addresses (the kernel drops
# IPv6 addresses when a link goes down).
veth0_up() {
    ip link set veth0 up
    ip -6 addr show dev veth0 | grep -q "$TGT_IP6/" || ip -6 addr add $TGT_IP6/64 dev veth0 nodad
}

# target_relisten [ADDR]: LIO's iSER listener is an rdma_cm id on the RDMA
# device; it is gone after that device was removed. Re-create it on every
# iSER portal (or those whose address starts with ADDR).
target_relisten() {
    local np
    for np in "$CFG/target/iscsi/$TGT_IQN/tpgt_1/np/${1:-}"*; do
        [ "$(cat "$np/iser" 2>/dev/null)" = 1 ] || continue
        echo 0 > "$np/iser"
        # A new device's address (GID) appears asynchronously: retry a while.
        local i
        for ((i = 0; i < 50; i++)); do
            echo 1 > "$np/iser" 2>/dev/null && break
            sleep 0.2
        done
        [ "$(cat "$np/iser")" = 1 ] || { echo "# LIO: no iSER listener on ${np##*/}"; return 1; }
    done
}

# rxe_qp1_dead DEV: rxe moves a QP to ERR when it cannot route a packet (its
# netdev is down), its GSI QP (QP1, which carries the RDMA CM's MADs) too, and
# ib_mad only recovers QP1 from SQE, never from ERR: after a CM message was
# sent while the link was down, no connection can be set up on DEV again.
rxe_qp1_dead() { rdma res show qp link "$1/1" 2>/dev/null | grep -q "type GSI state ERR"; }

# rxe_recreate DEV NETDEV [ADDR]: remove and re-add the soft-RoCE device, then
# LIO's listeners (on ADDR's portals) with it.
rxe_recreate() {
    timeout 120 rdma link delete "$1" || { echo "# rdma link delete $1 did not finish"; return 1; }
    rdma link add "$1" type rxe netdev "$2" || return 1
    target_relisten "${3:-}"
}

# --- iser-peer (tools/iser-peer): the project's userspace iSER target --------
# start_peer [peer options...]: runs the peer on $PEER_ADDR:$PEER_PORT in the
# background (RAM LUN, iSCSI name $PEER_IQN); its counters go to
# $PEER_STATS (key=value), its log to $PEER_LOG. stop_peer ends it (SIGTERM:
# final counters) and is also run when the case exits, after the logout.
PEER_BIN=$ISER_RS_REPO/tools/iser-peer/target/release/iser-peer
PEER_IQN=iqn.2026-11.test.iser-rs:peer
PEER_ADDR=${PEER_ADDR:-$TGT_IP4}
PEER_PORT=${PEER_PORT:-3261}
PEER_STATS=/tmp/iser-peer.stats
PEER_LOG=/tmp/iser-peer.log
PEER_PID=
start_peer() {
    [ -x "$PEER_BIN" ] || die "iser-peer not built ($PEER_BIN): run make peer"
    rm -f "$PEER_STATS"
    "$PEER_BIN" --iqn $PEER_IQN --stats $PEER_STATS "$@" "$PEER_ADDR" "$PEER_PORT" \
        >"$PEER_LOG.final" 2>"$PEER_LOG" &
    PEER_PID=$!
    local i
    for ((i = 0; i < 50; i++)); do
        grep -q "listening on" "$PEER_LOG" 2>/dev/null && break
        kill -0 $PEER_PID 2>/dev/null || { cat "$PEER_LOG"; die "iser-peer exited at start"; }
        sleep 0.1
    done
    [ "${ISER_RS_NO_CLEANUP:-0}" = 1 ] || trap 'case_cleanup; stop_peer quiet' EXIT
}

# stop_peer [quiet]: SIGTERM the peer, wait, show the end of its log.
stop_peer() {
    [ -n "$PEER_PID" ] || return 0
    kill -TERM "$PEER_PID" 2>/dev/null
    wait "$PEER_PID" 2>/dev/null
    PEER_PID=
    [ "${1:-}" = quiet ] && return 0
    grep -vE "full feature|established|connect request|disconnected" "$PEER_LOG" | tail -15 | sed 's/^/# peer: /'
    tr '\n' ' ' < "$PEER_STATS" | fold -w 150 | sed 's/^/# peer stats: /'
    echo
}

# peer_stat NAME: the peer's counter NAME (0 if unknown).
peer_stat() {
    local v
    v=$(sed -n "s/^$1=//p" "$PEER_STATS" 2>/dev/null)
    echo "${v:-0}"
}

# peer_stall_io MODE DD-ARGS...: arm the peer's mode (SIGUSR1), start
# `timeout 150 dd DD-ARGS status=none` in the background (its pid in
# STALL_IO_PID, for the caller's wait), and wait up to 30 s for the peer's
# "mode MODE: no status" line (the command is held); 1 if it never came.
STALL_IO_PID=
peer_stall_io() {
    local mode=$1 i
    shift
    kill -USR1 "$PEER_PID"
    sleep 0.3
    timeout 150 dd "$@" status=none &
    STALL_IO_PID=$!
    for ((i = 0; i < 300; i++)); do
        grep -q "mode $mode: no status" "$PEER_LOG" && return 0
        sleep 0.1
    done
    grep -q "mode $mode: no status" "$PEER_LOG"
}

# peer_login [iface]: SendTargets discovery and login to the peer; echoes the disk.
peer_login() {
    local iface=${1:-iser} portal=$PEER_ADDR:$PEER_PORT
    [[ $PEER_ADDR == *:* ]] && portal="[$PEER_ADDR]:$PEER_PORT"
    iscsiadm -m discovery -t st -p "$portal" -I "$iface" >/dev/null || return 1
    iscsiadm -m node -T $PEER_IQN -p "$portal" -I "$iface" --login >/dev/null || return 1
    wait_disks
}

# wait_logged_in [seconds]: wait until every session is LOGGED_IN again.
wait_logged_in() {
    local i n=$(( ${1:-30} * 10 ))
    for ((i = 0; i < n; i++)); do
        iscsiadm -m session -P1 2>/dev/null | grep -q "iSCSI Session State: LOGGED_IN" &&
            ! iscsiadm -m session -P1 2>/dev/null | grep "iSCSI Session State:" | grep -qv LOGGED_IN && return 0
        sleep 0.1
    done
    return 1
}

# load_ib_iser: the reference C initiator, from the test kernel's tree or,
# on a modular kernel, the kernel's own module (modprobe).
load_ib_iser() {
    if [ -n "$ISER_RS_KDIR" ] && [ -f "$ISER_RS_KDIR/drivers/infiniband/ulp/iser/ib_iser.ko" ]; then
        insmod "$ISER_RS_KDIR/drivers/infiniband/ulp/iser/ib_iser.ko"
    else
        modprobe --ignore-install ib_iser
    fi
}

# setup_siw: soft-iWARP device siw0 on its own veth pair (veth2, address
# $SIW_IP4), so that rxe0/LIO on veth0 and their listeners stay untouched.
SIW_IP4=198.51.100.1
setup_siw() {
    have_siw || skip "this kernel has no siw (soft-iWARP)"
    mountpoint -q $CFG || mount -t configfs none $CFG
    if ! ip link show veth2 >/dev/null 2>&1; then
        ip link add veth2 type veth peer name veth3
        ip addr add $SIW_IP4/24 dev veth2
        ip link set veth2 up
        ip link set veth3 up
        ip link set lo up
    fi
    rdma link show siw0/1 >/dev/null 2>&1 || rdma link add siw0 type siw netdev veth2 || die "rdma link add siw0"
    rdma link show siw0/1 | grep -q "state ACTIVE" || sleep 1
    rdma link show siw0/1 | grep -q "state ACTIVE" || die "siw0 not ACTIVE"
}


# peer_fio_verify DEV [fio options]: like fio_verify but with a log in
# /tmp/peer-fio.log (and failures shown).
peer_fio_verify() {
    local dev=$1; shift
    fio --name=verify --filename="$dev" --direct=1 --ioengine=libaio \
        --verify=crc32c --do_verify=1 --verify_fatal=1 --size=4M \
        --output=/tmp/peer-fio.log "$@" >/dev/null 2>&1
}

# peer_mode INITIATOR MODE EXPECT [peer options...]: one hostile (or polite)
# peer mode against INITIATOR (iser_rs|ib_iser) on rxe0, with a fio crc32c
# verify workload; checks the outcome a careful initiator gives and prints
#   "# mode MODE: PASS|FAIL <what happened>"
# EXPECT: conn-error (reconnect, I/O retried, verify clean), no-error
# (verify clean, no reconnect), tmf (an abort, verify clean), late-dead
# (status-first: the late RDMA Write finds the STag invalid), login-fail
# (the login fails cleanly), any (verify clean; reconnect or not),
# logout-refused (verify clean, no reconnect; the logout at the end is
# refused and the target disconnects: iser_rs judges that disconnect as a
# lost connection, saying the Logout was refused, and the session still
# ends).
# Always: no kernel report, logout, live counts zero, the module unloads.
# Returns 0 on PASS. The last outcome line is in $PEER_MODE_RESULT.
# PEER_FIO_BS: the verify workload's block size (default 8k; 4k writes are
# one page, sent immediate without a registration).
PEER_MODE_RESULT=
peer_mode() {
    local ini=$1 mode=$2 expect=$3; shift 3
    local why=() disk c0 rep rc=0 d kmsg=/tmp/peer-mode-kmsg.log kmsg_pid
    load_initiator "$ini"
    # This mode's kernel log, followed from now on: counting lines of the
    # whole dmesg before and after goes wrong once the ring buffer wraps.
    dmesg -W > "$kmsg" 2>&1 &
    kmsg_pid=$!
    start_peer --mode "$mode" "$@"
    if [ "$expect" = login-fail ]; then
        if ISER_RS_NO_CLEANUP=1 timeout 60 bash -c ". $ISER_RS_REPO/tests/lib.sh; peer_login iser" >/dev/null 2>&1; then
            why+=("login succeeded")
        fi
        sleep 1
        [ -z "$(session_disks)" ] || why+=("a disk appeared")
    else
        disk=$(peer_login iser | head -1)
        if [ -z "$disk" ]; then
            why+=("login failed")
        else
            echo 5 > "/sys/block/${disk#/dev/}/device/timeout"
            c0=$(iser_connects)
            if [ "$expect" = late-dead ]; then
                # Reads only: the command whose status came first returns
                # whatever was in the buffer, nothing can verify it.
                timeout 120 dd if="$disk" of=/dev/null bs=8k count=512 iflag=direct 2>/dev/null
                wait_logged_in 60 || why+=("session not back")
                peer_fio_verify "$disk" --rw=randwrite --bs=8k --iodepth=8 --size=2M ||
                    why+=("fio verify after recovery failed")
            else
                timeout 240 fio --name=verify --filename="$disk" --direct=1 --ioengine=libaio \
                    --verify=crc32c --do_verify=1 --verify_fatal=1 --size=2M --rw=randwrite \
                    --bs="${PEER_FIO_BS:-8k}" --iodepth=8 --output=/tmp/peer-fio.log >/dev/null 2>&1 ||
                    why+=("fio verify failed: $(grep -m1 -E 'err= *[1-9]|bad |mismatch|fio: ' /tmp/peer-fio.log)")
            fi
            wait_logged_in 60 || why+=("session not LOGGED_IN at the end")
            d=$(( $(iser_connects) - c0 ))
            [ "$ini" = iser_rs ] || d="?"
            case $expect in
            conn-error | late-dead) [ "$ini" = ib_iser ] || [ "$d" -ge 1 ] || why+=("no reconnect") ;;
            no-error | logout-refused) [ "$ini" = ib_iser ] || [ "$d" = 0 ] || why+=("$d reconnects") ;;
            esac
        fi
    fi
    # logout-refused: iscsid is held 3 s in the Logout's send_pdu call
    # (inject_send_pdu_delay_ms), so that it cannot stop the connection on
    # the refusal before the target's disconnect is judged (a stopped
    # connection's disconnect is not reported).
    [ "$expect" = logout-refused ] && [ "$ini" = iser_rs ] &&
        echo 3000 > /sys/module/iser_rs/parameters/inject_send_pdu_delay_ms
    logout_all
    if [ "$ini" = iser_rs ]; then
        echo 0 > /sys/module/iser_rs/parameters/inject_send_pdu_delay_ms
        wait_live_zero || why+=("live objects: $(live_counts)")
        rmmod iser_rs || why+=("rmmod iser_rs failed")
    else
        sleep 1; rmmod ib_iser || why+=("rmmod ib_iser failed")
    fi
    stop_peer quiet
    [ "$(peer_stat mode_events)" -ge 1 ] || why+=("the mode never fired")
    case $expect in
    tmf) [ "$(peer_stat aborts)" -ge 1 ] || why+=("no abort TMF") ;;
    logout-refused)
        # The target's disconnect after its refusal, judged as the end of
        # no successful logout (iser_rs: IserConn::judge_disconnect).
        [ "$ini" = ib_iser ] || grep -aq 'iser_rs: .*connection lost (disconnected, the Logout refused)' "$kmsg" ||
            why+=("no judgement of the disconnect after the refused Logout") ;;
    late-dead)
        [ "$(peer_stat late_succeeded)" = 0 ] || why+=("RDMA Write after status SUCCEEDED: STag valid after completion")
        [ "$(peer_stat late_access_error)" -ge 1 ] || why+=("late write did not fail with an access error") ;;
    esac
    sleep 0.5; kill "$kmsg_pid" 2>/dev/null; wait "$kmsg_pid" 2>/dev/null
    rep=$(grep -cE "$REPORT_RE" "$kmsg")
    [ "$rep" = 0 ] || why+=("$rep kernel report lines")
    local info="reconnects=${d:-0} peer: $(grep -E "mode|ABORT|disconnect|probe|failed|SUCCEEDED|error" "$PEER_LOG" | grep -v "listening" | tail -3 | tr '\n' '|' | cut -c1-300)"
    local dm
    dm=$(grep -E "iser_rs:|iser:|connection[0-9]+:|session[0-9]+:" "$kmsg" | grep -vE "connected \(|registered|released|taints" | tail -3 | sed 's/^\[[ 0-9.]*\] //' | tr '\n' '|' | cut -c1-300)
    if [ ${#why[@]} -eq 0 ]; then
        PEER_MODE_RESULT="mode $mode ($ini): PASS ($expect) $info dmesg: $dm"; rc=0
    else
        PEER_MODE_RESULT="mode $mode ($ini): FAIL ($expect): ${why[*]}; $info dmesg: $dm"; rc=1
    fi
    echo "# $PEER_MODE_RESULT"
    return $rc
}

# Send with Invalidate over siw: libsiw (rdma-core's siw provider) takes the
# STag to invalidate from wr.rdma.rkey, not invalidate_rkey; the peer sets
# both (tools/iser-peer/src/verbs.rs). Before that, siw answered the peer's
# first SendInv with a TERMINATE and cases 050/062 skipped siw; they now
# fail if it comes back.

# target_unsolicited yes|no: LIO's first-burst keys for new sessions. "yes":
# InitialR2T=No, ImmediateData=Yes, FirstBurstLength=262144 (open-iscsi's
# own wish, so unsolicited Data-Out is negotiated); "no": LIO's defaults
# back (InitialR2T=Yes, FirstBurstLength=65536), as every other case expects.
target_unsolicited() {
    local p=$CFG/target/iscsi/$TGT_IQN/tpgt_1/param
    if [ "$1" = yes ]; then
        echo No > $p/InitialR2T && echo Yes > $p/ImmediateData && echo 262144 > $p/FirstBurstLength
    else
        echo Yes > $p/InitialR2T && echo Yes > $p/ImmediateData && echo 65536 > $p/FirstBurstLength
    fi
}

# session_stat NAME: the sum of iser_rs's counter NAME over all sessions
# (iscsiadm -m session -s, custom statistics).
session_stat() {
    iscsiadm -m session -s 2>/dev/null | awk -v k="$1:" '$1 == k { s += $2 } END { print s + 0 }'
}

# ring_held: rx_posted - rx_completed of the sessions, from one
# `iscsiadm -m session -s` (two calls let a NOP-In between them skew it).
ring_held() {
    iscsiadm -m session -s 2>/dev/null |
        awk '$1 == "rx_posted:" { p += $2 } $1 == "rx_completed:" { c += $2 } END { print p - c }'
}

# ring_settle SECS: reads ring_held once a second until the ring holds
# RX_RING or SECS seconds passed (a response held for its invalidation or
# Send completion keeps its buffer for a moment); sets RING_HELD (the last
# reading) and RING_WAITED (seconds waited). RING_FIRST, if set, is
# logged before the first wait.
ring_settle() {
    RING_HELD=$(ring_held) RING_WAITED=0
    while [ "$RING_HELD" != "$RX_RING" ] && [ "$RING_WAITED" -lt "$1" ]; do
        [ "$RING_WAITED" = 0 ] && [ -n "${RING_FIRST:-}" ] && log "$RING_FIRST: ring holds $RING_HELD; reading again each second"
        sleep 1
        RING_WAITED=$((RING_WAITED + 1))
        RING_HELD=$(ring_held)
    done
}

# session_param NAME: the negotiated value of iSCSI key NAME in the first
# session (iscsiadm -m session -P3).
session_param() {
    iscsiadm -m session -P3 2>/dev/null | sed -n "s/^[[:space:]]*$1: *//p" | head -1
}

# stats_loop_start / stats_loop_stop: `iscsiadm -m session -s` (the
# transport's get_stats) in a loop in the background, so that it races the
# connection teardowns a case provokes (ep_disconnect frees the endpoint
# get_stats reads). stats_loop_stop echoes how many times it ran.
STATS_LOOP_PID= STATS_LOOP_FILE=/tmp/stats-loop.count
stats_loop_start() {
    : > "$STATS_LOOP_FILE"
    ( while :; do iscsiadm -m session -s >/dev/null 2>&1; echo >> "$STATS_LOOP_FILE"; done ) &
    STATS_LOOP_PID=$!
}
stats_loop_stop() {
    [ -n "$STATS_LOOP_PID" ] && kill "$STATS_LOOP_PID" 2>/dev/null
    wait "$STATS_LOOP_PID" 2>/dev/null
    STATS_LOOP_PID=
    wc -l < "$STATS_LOOP_FILE"
}
