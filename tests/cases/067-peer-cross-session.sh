#!/usr/bin/env bash
# STags are scoped to their connection: two sessions through iser_rs on the
# same RDMA device (rxe0), to two peer instances A and B. A stalls one READ
# and hands that command's Read STag (valid: the command is open) to B; B
# RDMA-Writes 512 bytes through it from its own connection. iser_rs gives
# each connection its own protection domain, so the write must end in a
# remote access error at B (B's connection breaks and comes back) while A's
# session runs on without a reconnect and its fio verify stays clean (the
# stalled READ is aborted by its SCSI timeout and retried). With one PD per
# device (ib_iser's, and iser_rs's before) the write lands in A's buffer.
. "$(dirname "$0")/../lib.sh"
ini=${INITIATOR:-iser_rs}
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator "$ini"
leak=/tmp/cross-session.stag
rm -f "$leak"
B_PORT=3262 B_IQN=iqn.2026-11.test.iser-rs:peer-b B_STATS=/tmp/iser-peer-b.stats B_LOG=/tmp/iser-peer-b.log
rm -f $B_STATS
"$PEER_BIN" --iqn $B_IQN --stats $B_STATS --steal-stags "$leak" "$PEER_ADDR" $B_PORT > /dev/null 2> $B_LOG &
B_PID=$!
for ((i = 0; i < 50; i++)); do grep -q "listening on" $B_LOG 2>/dev/null && break; sleep 0.1; done
kill -0 $B_PID 2>/dev/null || { cat $B_LOG; die "peer B exited at start"; }
trap 'kill $B_PID 2>/dev/null; wait $B_PID 2>/dev/null; case_cleanup' EXIT
start_peer --mode stall --at 1000000000 --on read --leak-stags "$leak"
# After start_peer, which sets its own EXIT trap: B goes too.
trap 'case_cleanup; stop_peer quiet; kill $B_PID 2>/dev/null; wait $B_PID 2>/dev/null' EXIT
disk_a=$(peer_login iser | head -1); [ -n "$disk_a" ] || die "login to peer A"
iscsiadm -m discovery -t st -p "$PEER_ADDR:$B_PORT" -I iser >/dev/null || die "discovery of peer B"
iscsiadm -m node -T $B_IQN -p "$PEER_ADDR:$B_PORT" -I iser --login >/dev/null || die "login to peer B"
for ((i = 0; i < 100; i++)); do [ "$(session_disks | wc -l)" -ge 2 ] && break; sleep 0.2; done
[ "$(session_disks | wc -l)" -ge 2 ] || die "two disks expected: $(session_disks)"
b_stat() { local v; v=$(sed -n "s/^$1=//p" $B_STATS 2>/dev/null); echo "${v:-0}"; }
a_conns=$(peer_stat connections)
echo 8 > /sys/block/${disk_a#/dev/}/device/timeout
kill -USR1 "$PEER_PID"; sleep 0.3
timeout 120 dd if="$disk_a" of=/dev/null bs=64k count=16 iflag=direct status=none &
wl=$!
for ((i = 0; i < 300; i++)); do [ -s "$leak" ] && break; sleep 0.1; done
[ -s "$leak" ] || die "peer A never stalled a READ"
log "A's stalled READ: STag/VA $(cat "$leak")"
kill -USR1 "$B_PID" || die "peer B is gone: $(tail -3 $B_LOG)"
for ((i = 0; i < 300; i++)); do
    [ $(( $(b_stat probes_access_error) + $(b_stat probes_succeeded) + $(b_stat probes_other_error) )) -ge 1 ] && break
    sleep 0.1
done
wait "$wl"; rc=$?
wait_logged_in 60 || die "sessions not back"
peer_fio_verify "$disk_a" --rw=randwrite --bs=16k --iodepth=8 --size=4M ||
    { cat /tmp/peer-fio.log; die "fio verify on A after B's access"; }
ae=$(b_stat probes_access_error) ok=$(b_stat probes_succeeded) oe=$(b_stat probes_other_error)
a_new=$(( $(peer_stat connections) - a_conns ))
log "B's RDMA Write through A's STag: access error $ae, succeeded $ok, other $oe ($(grep -m1 -E 'probe with STag' $B_LOG | sed 's/^.*probe with/probe with/')); A: $a_new new connections, dd rc $rc, verify clean"
logout_all
if [ "$ini" = iser_rs ]; then wait_live_zero || die "live objects after logout: $(live_counts)"; fi
[ "$ok" = 0 ] || die "B wrote into A's buffer through A's STag ($ok accesses succeeded)"
[ "$ae" -ge 1 ] || die "B's access did not end in a remote access error ($oe other errors)"
[ "$a_new" = 0 ] || die "A's session reconnected $a_new times"
