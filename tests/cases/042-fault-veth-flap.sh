#!/usr/bin/env bash
# Link loss under I/O: the target's link (veth0, under rxe0) goes down for
# DOWN_S (3) seconds and comes back, FLAPS (3) times, while fio writes with
# crc32c verify through iser_rs. rxe fails every send it cannot route, so
# the connection is lost each time and iser_rs tears it down with the link
# down. rxe's own limit: its QP1 (RDMA CM messages) stays in ERR once a CM
# message was sent while the link was down (see rxe_qp1_dead); then the
# device is re-created after the link is back, as an admin would. iscsid
# reconnects through iser_rs, libiscsi retries the queued I/O, and verify
# finds no mismatch.
. "$(dirname "$0")/../lib.sh"
flaps=${FLAPS:-3} down_s=${DOWN_S:-3}
trap 'veth0_up; rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev veth0; rxe_qp1_dead rxe0 && rxe_recreate rxe0 veth0; case_cleanup' EXIT
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
kmsg_watch_start
login_node $TGT_IP4:$TGT_PORT node.session.timeo.replacement_timeout=120 $FAST_NOOP || die "login"
disk=$(wait_disks | head -1) || die "no disk"
counts0=$(live_counts)
c0=$(iser_connects)
fio_loop_start "$disk" --rw=randwrite --bs=8k --iodepth=16 --size=8M
longest=0 recreated=0
for ((f = 1; f <= flaps; f++)); do
    sleep 3
    ip link set veth0 down; t0=$(now_ms)
    d=$(wait_sess FAILED 1 30) || die "flap $f: connection not lost 30 s after link down"
    rest=$(( down_s * 1000 - ($(now_ms) - t0) )); [ $rest -gt 0 ] && sleep "$((rest / 1000)).$(printf %03d $((rest % 1000)))"
    veth0_up; t1=$(now_ms)
    how="link up"
    if rxe_qp1_dead rxe0; then
        rxe_recreate rxe0 veth0 || die "flap $f: re-creating rxe0"
        recreated=$((recreated + 1)); how="link up, rxe0 re-created"
    fi
    ms=$(wait_sess LOGGED_IN 1 90) || die "flap $f: session not back 90 s after link up ($(sess_states))"
    ms=$(( $(now_ms) - t1 ))
    [ "$ms" -gt "$longest" ] && longest=$ms
    log "flap $f: connection lost $d ms after link down; logged in again $ms ms after link up ($how)"
done
sleep 2
fio_loop_stop || die "fio verify across link flaps"
r=$FIO_LOOP_RESULT
reconnects=$(( $(iser_connects) - c0 ))
[ "$reconnects" -ge "$flaps" ] || die "expected >= $flaps reconnects through iser_rs, saw $reconnects"
counts1=$(live_counts)
[ "$counts1" = "$counts0" ] || die "live counts changed across the flaps: $counts0 -> $counts1"
log "$flaps link flaps survived under fio: $reconnects reconnects ($recreated needed rxe0 re-created), $r (passes, I/Os verified), longest reconnect after link up ${longest} ms"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
kmsg_watch_check || die "kernel report"
