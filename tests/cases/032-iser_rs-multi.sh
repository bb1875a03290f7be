#!/usr/bin/env bash
# Two LUNs in a session and two concurrent sessions (IPv4 and IPv6
# portals), all verified at once through iser_rs.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 2 128
start_iscsid
load_initiator ${INITIATOR:-iser_rs}
login iser "$TGT_IP4:$TGT_PORT" >/dev/null || die "IPv4 login"
n4=$(session_disks | wc -l)
[ "$n4" = 2 ] || die "expected 2 LUNs on the IPv4 session, got $n4"
iscsiadm -m discovery -t st -p "[$TGT_IP6]:$TGT_PORT" -I iser >/dev/null || die "IPv6 discovery"
iscsiadm -m node -T $TGT_IQN -p "[$TGT_IP6]:$TGT_PORT" -I iser --login >/dev/null || die "IPv6 login"
for ((i = 0; i < 50; i++)); do [ "$(session_disks | wc -l)" = 4 ] && break; sleep 0.2; done
nsess=$(iscsiadm -m session | wc -l)
[ "$nsess" = 2 ] || die "expected 2 sessions, got $nsess"
disks=$(session_disks)
log "sessions: $nsess, disks: $(echo $disks)"
if [ "${INITIATOR:-iser_rs}" = iser_rs ]; then
    # Both connections run on rxe0, each with a PD of its own (an STag
    # advertised on one connection names nothing the other can reach).
    counts=$(live_counts); log "live: $counts"
    case "$counts" in *"live_conns=2 "*"live_pds=2 "*) ;; *) die "expected 2 connections with a PD each: $counts" ;; esac
fi
# Each LUN is seen twice (once per session): give every disk node its own
# region so that no two writers overlap.
pids=()
k=0
for d in $disks; do
    fio_verify "$d" --rw=randwrite --bs=16k --iodepth=8 --size=8M --offset=$((k * 16))M &
    pids+=($!)
    k=$((k + 1))
done
for p in "${pids[@]}"; do wait "$p" || die "concurrent verify failed"; done
log "concurrent verify on $(echo $disks | wc -w) disks over 2 sessions clean"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
