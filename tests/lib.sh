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
            for dev in /dev/iser$i /dev/nullb$(cat "$nb/index"); do [ -b "$dev" ] && break 2; done
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

# target_chap USER SECRET: require one-way CHAP on the target portal group.
target_chap() {
    local t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
    echo -n "$1" > "$t/auth/userid"
    echo -n "$2" > "$t/auth/password"
    echo 1 > "$t/attrib/authentication"
}

# --- initiator ---------------------------------------------------------------
start_iscsid() {
    pgrep -x iscsid >/dev/null && return 0
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
    iscsid || die "iscsid failed to start"
    sleep 0.5
}

# load_initiator iser_rs|ib_iser: makes that module provide transport "iser".
load_initiator() {
    case $1 in
    iser_rs)
        lsmod | grep -q '^ib_iser ' && rmmod ib_iser
        lsmod | grep -q '^iser_rs ' || insmod "$ISER_RS_REPO/iser_rs.ko" || die "insmod iser_rs.ko"
        ;;
    ib_iser)
        lsmod | grep -q '^iser_rs ' && rmmod iser_rs
        lsmod | grep -q '^ib_iser ' ||
            insmod "$ISER_RS_KDIR/drivers/infiniband/ulp/iser/ib_iser.ko" || die "insmod ib_iser.ko"
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

# live_counts: iser_rs's live connection/QP/MR/PD/CQ counts, one line.
live_counts() {
    local p out=
    for p in live_conns live_qps live_mrs live_pds live_cqs; do
        out+="$p=$(cat /sys/module/iser_rs/parameters/$p) "
    done
    echo "$out"
}

# wait_live_zero: iscsid tears endpoints down asynchronously after logout;
# wait up to 10 s for every live count to reach 0.
wait_live_zero() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ "$(live_counts)" = "live_conns=0 live_qps=0 live_mrs=0 live_pds=0 live_cqs=0 " ] && return 0
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
REPORT_RE='BUG:|WARNING:|Oops|KASAN|UBSAN|possible circular locking|possible recursive locking|inconsistent lock state|sleeping function called from invalid context|kmemleak:.*new suspected|general protection fault|Kernel panic|list_add corruption|list_del corruption|refcount_t:|INFO: task .* blocked'

# kernel_reports: print the report lines of the kernel log (empty: clean).
kernel_reports() {
    dmesg | grep -E "$REPORT_RE" || true
}
