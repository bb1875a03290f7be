#!/usr/bin/env bash
# RDMA device removal while an endpoint is still connecting and iscsid is
# stopped. An endpoint that is not bound to a connection yet (iscsid's
# ep_connect/ep_poll phase) is destroyed only by iscsid's ep_disconnect;
# the kernel's own conn cleanup work covers bound connections only. On
# DEVICE_REMOVAL iser_rs releases the endpoint's resources and hands its
# CM id to rdma_cm to destroy (as ib_iser does), so `rdma link delete`
# finishes without iscsid. Before: rdma_cm waited for the id's owner, and
# the delete hung (D state) until iscsid ran again.
# Setup: the peer is discovered, then SIGSTOPped, so a login's connect
# request is never answered; once the endpoint exists (live_conns 1)
# iscsid is SIGSTOPped, the peer killed (rxe cannot disassociate a
# userspace verbs user: a device removal waits for every one to exit) and
# the device deleted. Then iscsid resumes: the endpoint is released, the
# device returns and a login to a new peer works.
. "$(dirname "$0")/../lib.sh"
restore() {
    pkill -CONT -x iscsid 2>/dev/null
    [ -n "$PEER_PID" ] && kill -CONT "$PEER_PID" 2>/dev/null
    rdma link show rxe0/1 >/dev/null 2>&1 || { rdma link add rxe0 type rxe netdev veth0; target_relisten; }
    case_cleanup; stop_peer quiet
}
setup_rdma rxe
start_iscsid
load_initiator iser_rs
start_peer
trap restore EXIT
portal=$PEER_ADDR:$PEER_PORT
iscsiadm -m discovery -t st -p "$portal" -I iser >/dev/null || die "discovery"
# One login attempt only: iscsid would otherwise retry the first login
# for 80 s (initial_login_retry_max 8 x login_timeout 10 s).
iscsiadm -m node -T $PEER_IQN -p "$portal" -o update -n node.session.initial_login_retry_max -v 1 >/dev/null
kill -STOP "$PEER_PID"
timeout 60 iscsiadm -m node -T $PEER_IQN -p "$portal" -I iser --login >/dev/null 2>&1 & login=$!
for ((i = 0; i < 100; i++)); do [ "$(cat /sys/module/iser_rs/parameters/live_conns)" -ge 1 ] && break; sleep 0.1; done
[ "$(cat /sys/module/iser_rs/parameters/live_conns)" -ge 1 ] || die "no endpoint appeared"
sleep 0.5
pkill -STOP -x iscsid
kill -KILL "$PEER_PID"; wait "$PEER_PID" 2>/dev/null; PEER_PID=
log "endpoint connecting, iscsid stopped, peer gone: $(live_counts)"
t0=$(now_ms)
rdma link delete rxe0 & del=$!
for ((i = 0; i < 200; i++)); do kill -0 $del 2>/dev/null || break; sleep 0.1; done
del_ms=$(( $(now_ms) - t0 )) stuck=0
kill -0 $del 2>/dev/null && stuck=1
after=$(live_counts)
pkill -CONT -x iscsid
wait $del
log "rdma link delete rxe0: $del_ms ms$([ $stuck = 1 ] && echo ", still running at 20 s (finished only once iscsid ran again)"); then $after"
wait $login
[ $stuck = 0 ] || die "rdma link delete waited for iscsid (an unbound endpoint's CM id)"
rdma link add rxe0 type rxe netdev veth0 || die "rdma link add rxe0"
target_relisten || die "LIO listener"
iscsiadm -m node -T $PEER_IQN -p "$portal" -u >/dev/null 2>&1
iscsiadm -m node -T $PEER_IQN -p "$portal" -o delete >/dev/null 2>&1
wait_live_zero || die "live objects after the failed login: $(live_counts)"
# A new peer on another port: nothing of the failed login can reach it.
PEER_PORT=3263
start_peer
disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "login after the device returned"
peer_fio_verify "$disk" --rw=randwrite --bs=16k --iodepth=8 --size=2M || die "fio verify after the device returned"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
rmmod iser_rs || die "rmmod iser_rs"
