#!/usr/bin/env bash
# Repetition under I/O: LINK_FLAPS (20) flaps while fio writes with crc32c verify
# through iser_rs, alternating the target's link (veth0 down 1 s; rxe0
# re-created when its QP1 did not survive, see rxe_qp1_dead) and the LIO
# portal group (disabled 1 s). Every flap costs the connection and is
# survived: the session is logged in after each, verify is clean, and the
# live connection/QP/MR/CQ counts are the same after the flaps as before;
# unreclaimable slab, settled (slab_settled_kb), is back within SLAB_SLACK_KB
# (1024) of its level before fio (not judged under KASAN, whose quarantine
# holds freed objects); on a kmemleak kernel a scan at the end is clean.
. "$(dirname "$0")/../lib.sh"
flaps=${LINK_FLAPS:-20}
slab_slack_kb=${SLAB_SLACK_KB:-1024}
t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
trap 'veth0_up; echo 1 > $t/enable; rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev veth0; rxe_qp1_dead rxe0 && rxe_recreate rxe0 veth0; case_cleanup' EXIT
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
kmsg_watch_start
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=120 $FAST_NOOP || die "login"
disk=$(wait_disks | head -1) || die "no disk"
counts0=$(live_counts)
c0=$(iser_connects)
slab0=$(slab_settled_kb 10)
fio_loop_start "$disk" --rw=randwrite --bs=8k --iodepth=16 --size=8M
longest=0 recreated=0 t_start=$(now_ms)
for ((f = 1; f <= flaps; f++)); do
    sleep 2
    if [ $((f % 2)) = 1 ]; then
        kind=link; ip link set veth0 down
    else
        kind=portal; echo 0 > $t/enable
    fi
    wait_sess FAILED 1 30 >/dev/null || die "flap $f ($kind): connection not lost within 30 s"
    sleep 1
    if [ $kind = link ]; then
        veth0_up; t1=$(now_ms)
        if rxe_qp1_dead rxe0; then
            rxe_recreate rxe0 veth0 || die "flap $f: re-creating rxe0"; recreated=$((recreated + 1))
        fi
    else
        echo 1 > $t/enable; t1=$(now_ms)
    fi
    wait_sess LOGGED_IN 1 90 >/dev/null || die "flap $f ($kind): session not back within 90 s ($(sess_states))"
    ms=$(( $(now_ms) - t1 ))
    [ "$ms" -gt "$longest" ] && longest=$ms
    [ -e "$FIO_LOOP_DIR/failed" ] && break
done
fio_loop_stop || die "fio verify across the flaps (flap $f)"
r=$FIO_LOOP_RESULT
reconnects=$(( $(iser_connects) - c0 ))
counts1=$(live_counts)
slab1=$(slab_settled_kb 30 $((slab0 + slab_slack_kb)))
log "$flaps flaps ($((flaps - flaps / 2)) link, $((flaps / 2)) portal) survived in $(( ($(now_ms) - t_start) / 1000 )) s under fio: $reconnects reconnects ($recreated needed rxe0 re-created), $r (passes, I/Os verified), longest reconnect ${longest} ms"
[ "$reconnects" -ge "$flaps" ] || die "expected >= $flaps reconnects, saw $reconnects"
[ "$counts1" = "$counts0" ] || die "live counts changed across the flaps: $counts0 -> $counts1"
log "unreclaimable slab: $slab0 kB before fio, $slab1 kB after the flaps, settled (delta $((slab1 - slab0)) kB, allowed $slab_slack_kb)"
slab_growth_check "$slab0" "$slab1" "$slab_slack_kb" "across $flaps flaps"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
kmemleak_check || die "kmemleak reports after $flaps flaps"
kmsg_watch_check || die "kernel report"
