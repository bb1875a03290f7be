#!/usr/bin/env bash
# dm-multipath over two iser_rs sessions to two LIO portals on two RDMA
# devices (rxe0 on veth0 192.0.2.1, rxe1 on veth2 198.51.100.1). fio writes
# with crc32c verify through the multipath device while path B's link goes
# down: I/O continues on path A. When the link is back (rxe1 re-created if
# its QP1 died, see rxe_qp1_dead) path B's session logs in again, the path is
# reinstated and carries I/O again; verify is clean. The table is loaded
# with dmsetup directly (round-robin, no multipathd).
. "$(dirname "$0")/../lib.sh"
IP_B=198.51.100.1
MP=mpiser
t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
restore() {
    dmsetup remove --noudevsync $MP >/dev/null 2>&1
    case_cleanup
    rdma link delete rxe1 2>/dev/null
    [ -d "$t/np/$IP_B:$TGT_PORT" ] && rmdir "$t/np/$IP_B:$TGT_PORT"
    ip link del veth2 2>/dev/null
}
trap restore EXIT
setup_rdma rxe
setup_target 1
ip link add veth2 type veth peer name veth3 || die "veth2"
ip addr add $IP_B/24 dev veth2
ip link set veth2 up; ip link set veth3 up
rdma link add rxe1 type rxe netdev veth2 || die "rdma link add rxe1"
mkdir "$t/np/$IP_B:$TGT_PORT" && echo 1 > "$t/np/$IP_B:$TGT_PORT/iser" || die "second LIO portal"
start_iscsid
load_initiator iser_rs
kmsg_watch_start
# Short replacement timeout: a failed path must return its I/O to dm-multipath.
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=5 $FAST_NOOP || die "login path A"
# Both paths must be the same LU: take LUN 0 of each session (the target
# keeps the LUNs earlier cases added, e.g. 032's second LUN).
lun0_disks() {
    local b
    for b in /sys/block/sd*; do
        [ -e "$b/device" ] || continue
        case $(basename "$(readlink -f "$b/device")") in *:0) echo "/dev/${b##*/}" ;; esac
    done
}
wait_disks >/dev/null || die "no disk on path A"
dA=$(lun0_disks | head -1)
[ -n "$dA" ] || die "no LUN 0 disk on path A"
login_node $IP_B:$TGT_PORT node.session.timeo.replacement_timeout=5 $FAST_NOOP || die "login path B"
for ((i = 0; i < 100; i++)); do
    dB=$(lun0_disks | grep -vx "$dA" | head -1); [ -n "$dB" ] && break; sleep 0.2
done
[ -n "$dB" ] || die "no disk on path B"
# The disk node can appear before sd has read its capacity (size 0 for a
# moment): wait for both sizes to settle before comparing them.
sz=$(blockdev --getsz "$dA")
for ((i = 0; i < 100; i++)); do
    szB=$(blockdev --getsz "$dB" 2>/dev/null)
    [ "$sz" -gt 0 ] && [ "$sz" = "$szB" ] && break
    sleep 0.2; sz=$(blockdev --getsz "$dA")
done
[ "$sz" -gt 0 ] && [ "$sz" = "$szB" ] || die "paths differ in size ($dA: $sz, $dB: $szB sectors)"
echo "0 $sz multipath 0 0 1 1 round-robin 0 2 1 $dA 16 $dB 16" | dmsetup create --noudevsync $MP || die "dmsetup create"
mp=/dev/$(dmsetup info -c --noheadings -o blkdevname $MP)
[ -b "$mp" ] || die "no multipath block device"
log "multipath $mp over $dA ($TGT_IP4, rxe0) and $dB ($IP_B, rxe1): $(dmsetup status $MP)"
sectors() { awk '{print $3 + $7}' "/sys/block/${1#/dev/}/stat"; } # sectors read + written
# path_state DEV: A (active) or F (failed) from the multipath status line.
path_state() { dmsetup status $MP | tr ' ' '\n' | grep -A1 -x "$(cat /sys/block/${1#/dev/}/dev)" | tail -1; }

fio_loop_start "$mp" --rw=randwrite --bs=8k --iodepth=16 --size=8M
sleep 4
b0=$(sectors "$dB")
[ "$b0" -gt 0 ] || die "no I/O on path B before the fault"
ip link set veth2 down; t0=$(now_ms)
for ((i = 0; i < 300; i++)); do [ "$(path_state "$dB")" = F ] && break; sleep 0.1; done
[ "$(path_state "$dB")" = F ] || die "path B not failed 30 s after its link went down ($(dmsetup status $MP))"
log "path B failed by dm-multipath $(( $(now_ms) - t0 )) ms after the fault"
a0=$(sectors "$dA")
sleep 6
a1=$(sectors "$dA")
[ "$a1" -gt "$a0" ] || die "no I/O on path A while path B was down"
log "path A carried $(( (a1 - a0) / 2 )) KiB in 6 s with path B down"
ip link set veth2 up; t1=$(now_ms)
how="link up"
rxe_qp1_dead rxe1 && { rxe_recreate rxe1 veth2 $IP_B || die "re-creating rxe1"; how="link up, rxe1 re-created"; }
wait_sess LOGGED_IN 2 90 >/dev/null || die "path B session did not come back ($(sess_states))"
ms=$(( $(now_ms) - t1 ))
dmsetup message $MP 0 reinstate_path "$dB" || die "reinstate_path"
[ "$(path_state "$dB")" = A ] || die "path B not active after reinstate_path ($(dmsetup status $MP))"
log "path B session back $ms ms after its link returned ($how), reinstated"
b1=$(sectors "$dB")
sleep 4
b2=$(sectors "$dB")
[ "$b2" -gt "$b1" ] || die "no I/O on path B after reinstatement"
fio_loop_stop || die "fio verify through multipath across the path fault"
r=$FIO_LOOP_RESULT
log "fio through multipath: $r (passes, I/Os verified) with one path failed and reinstated"
dmsetup remove --noudevsync $MP || die "dmsetup remove"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
kmsg_watch_check || die "kernel report"
