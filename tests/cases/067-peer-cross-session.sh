#!/usr/bin/env bash
# STags are scoped to their connection: two sessions through the initiator
# on the same RDMA device, to two peer instances A and B. A stalls one
# command and hands the STag that command granted it (valid: the command
# is open) to B (--leak-stags); B uses it from its own connection
# (--steal-stags, armed by SIGUSR1). Variants, each with a fresh pair of
# peers and logins:
#   write     A stalls a READ; B RDMA-Writes 512 bytes through its Read STag
#   read      A stalls a 64 KiB WRITE (56 KiB of it past the immediate data,
#             fetched by RDMA Read through a Write STag); B RDMA-Reads 512
#             bytes through that Write STag
#   send-inv  A stalls a READ; B answers a READ of its own session with a
#             SCSI Response sent as Send with Invalidate naming A's Read
#             STag, on B's own connection
#   siw:VAR   the same over soft-iWARP (siw0) instead of rxe0
#   send-inv-probe  (not in the default list: an observation of the RDMA
#             device, not of the initiator) send-inv, then A's peer
#             RDMA-Writes through its own stalled READ's Read STag
#             (SIGUSR2): an access error means B's Send with Invalidate
#             did invalidate A's MR (A's connection then breaks: a new
#             connection for A is allowed in this variant)
# iser_rs gives each connection its own protection domain, so B's RDMA
# Write/Read must end in a remote access error at B (B's connection breaks
# and comes back); the send-inv rkey is none of B's command's, so the
# initiator must fail B's connection (B logs in again). In every variant
# A's session runs on without a new connection and its fio verify is clean
# (the stalled command is aborted by its SCSI timeout and retried). B's
# access must come while A's command is open (A not aborted yet).
# On rxe the device does not check the MR's PD when a Send with Invalidate
# arrives (rxe_invalidate_mr), so A's MR may really be invalidated by B's
# Send (its completing at B says so); siw checks it (siw_invalidate_stag:
# PD mismatch, TERMINATE). A's command is aborted either way: no data goes
# anywhere wrong, which is what is asserted.
# INITIATOR=ib_iser runs the same against the C driver (one PD per device:
# B's Write and Read succeed there; the case then fails, by design).
# VARIANTS overrides the list (default "write read send-inv siw:send-inv").
. "$(dirname "$0")/../lib.sh"
ini=${INITIATOR:-iser_rs}
variants=${VARIANTS:-write read send-inv siw:send-inv}
if [[ " $variants" == *" siw:"* ]] && ! have_siw; then
    log "this kernel has no siw: the siw: variants are left out"
    variants=$(tr ' ' '\n' <<< "$variants" | grep -v '^siw:' | xargs)
fi
setup_rdma rxe
case " $variants" in *" siw:"*) setup_siw ;; esac
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator "$ini"
leak=/tmp/cross-session.stag
dd if=/dev/urandom of=/tmp/cross-session.pat bs=64k count=16 status=none
out=$ISER_RS_OUT/cases
mkdir -p "$out"

# Peer B: a second peer instance on its own port and name (start_peer
# handles only one).
B_PORT=3262 B_IQN=iqn.2026-11.test.iser-rs:peer-b B_STATS=/tmp/iser-peer-b.stats B_LOG=/tmp/iser-peer-b.log B_PID=
start_b() {
    rm -f $B_STATS
    "$PEER_BIN" --iqn $B_IQN --stats $B_STATS "$@" "$PEER_ADDR" $B_PORT > /dev/null 2> $B_LOG &
    B_PID=$!
    for ((i = 0; i < 50; i++)); do grep -q "listening on" $B_LOG 2>/dev/null && break; sleep 0.1; done
    kill -0 $B_PID 2>/dev/null || { cat $B_LOG; die "peer B exited at start"; }
}
stop_b() {
    [ -n "$B_PID" ] || return 0
    kill -TERM "$B_PID" 2>/dev/null; wait "$B_PID" 2>/dev/null; B_PID=
}
b_stat() { local v; v=$(sed -n "s/^$1=//p" $B_STATS 2>/dev/null); echo "${v:-0}"; }
b_probes() { echo $(( $(b_stat probes_access_error) + $(b_stat probes_succeeded) + $(b_stat probes_other_error) )); }
kmsg_pid=
stop_kmsg() { [ -n "$kmsg_pid" ] && { kill "$kmsg_pid" 2>/dev/null; wait "$kmsg_pid" 2>/dev/null; }; kmsg_pid=; }
trap 'case_cleanup; stop_b; stop_kmsg' EXIT

fails=()
for v in $variants; do
    dev=rxe how=$v
    [[ $v == siw:* ]] && dev=siw how=${v#siw:}
    own_probe=0
    [ "$how" = send-inv-probe ] && how=send-inv own_probe=1
    if [ $dev = siw ]; then PEER_ADDR=$SIW_IP4 PEER_PORT=3260; else PEER_ADDR=$TGT_IP4 PEER_PORT=3261; fi
    on=read; [ "$how" = read ] && on=write
    rm -f "$leak"
    dmesg -W > /tmp/cross-session.kmsg 2>&1 &
    kmsg_pid=$!
    start_b --steal-stags "$leak" --steal-how "$how"
    start_peer --mode stall --at 1000000000 --on $on --leak-stags "$leak"
    # start_peer set its own EXIT trap: B goes too.
    trap 'case_cleanup; stop_peer quiet; stop_b; stop_kmsg' EXIT
    disk_a=$(peer_login iser | head -1); [ -n "$disk_a" ] || die "$v: login to peer A"
    iscsiadm -m discovery -t st -p "$PEER_ADDR:$B_PORT" -I iser >/dev/null || die "$v: discovery of peer B"
    iscsiadm -m node -T $B_IQN -p "$PEER_ADDR:$B_PORT" -I iser --login >/dev/null || die "$v: login to peer B"
    for ((i = 0; i < 100; i++)); do [ "$(session_disks | wc -l)" -ge 2 ] && break; sleep 0.2; done
    disk_b=$(session_disks | grep -vx "$disk_a" | head -1)
    [ -n "$disk_b" ] || die "$v: two disks expected: $(session_disks)"
    a_conns=$(peer_stat connections) b_logins=$(b_stat logins)
    echo 5 > /sys/block/${disk_a#/dev/}/device/timeout
    kill -USR1 "$PEER_PID"; sleep 0.3
    if [ $on = read ]; then
        timeout 120 dd if="$disk_a" of=/dev/null bs=64k count=16 iflag=direct status=none &
    else
        timeout 120 dd if=/tmp/cross-session.pat of="$disk_a" bs=64k count=16 oflag=direct status=none &
    fi
    wl=$!
    for ((i = 0; i < 300; i++)); do [ -s "$leak" ] && break; sleep 0.1; done
    [ -s "$leak" ] || die "$v: peer A never stalled a $on"
    log "$v: A's stalled $on (${dev}0): STag/VA $(cat "$leak")"
    kill -USR1 "$B_PID" || die "$v: peer B is gone: $(tail -3 $B_LOG)"
    bl=
    if [ "$how" = send-inv ]; then
        # B's next READ is the command whose response carries the
        # invalidation; it is retried after B's connection comes back.
        sleep 0.3
        timeout 120 dd if="$disk_b" of=/dev/null bs=4k count=1 iflag=direct status=none &
        bl=$!
        # mode_events: the Send was posted.
        for ((i = 0; i < 300; i++)); do [ "$(b_stat mode_events)" -ge 1 ] && break; sleep 0.1; done
        # A's command must still have been open when B tried.
        a_aborts=$(peer_stat aborts)
        for ((i = 0; i < 100; i++)); do
            [ $(( $(b_stat steal_inv_completed) + $(b_stat steal_inv_error) )) -ge 1 ] && break
            [ "$(b_stat logins)" -gt "$b_logins" ] && break
            sleep 0.1
        done
        if [ $own_probe = 1 ]; then
            a_aborts_probe=$(peer_stat aborts)
            kill -USR2 "$PEER_PID"
            for ((i = 0; i < 100; i++)); do
                [ $(( $(peer_stat probes_access_error) + $(peer_stat probes_succeeded) + $(peer_stat probes_other_error) )) -ge 1 ] && break
                sleep 0.1
            done
        fi
    else
        for ((i = 0; i < 300; i++)); do [ "$(b_probes)" -ge 1 ] && break; sleep 0.1; done
        a_aborts=$(peer_stat aborts)
    fi
    wait "$wl"; rc=$?
    brc=0; [ -n "$bl" ] && { wait "$bl"; brc=$?; }
    wait_logged_in 60 || fails+=("$v: sessions not back")
    # B's new login, if any, shows in its counters once it is logged in.
    for ((i = 0; i < 50; i++)); do [ "$(b_stat logins)" -gt "$b_logins" ] && break; [ "$how" = send-inv ] || break; sleep 0.2; done
    verify=clean
    peer_fio_verify "$disk_a" --rw=randwrite --bs=16k --iodepth=8 --size=2M ||
        { cat /tmp/peer-fio.log; verify=FAILED; fails+=("$v: fio verify on A after B's access"); }
    a_new=$(( $(peer_stat connections) - a_conns )) b_new=$(( $(b_stat logins) - b_logins ))
    logout_all
    if [ "$ini" = iser_rs ]; then wait_live_zero || fails+=("$v: live objects after logout: $(live_counts)"); fi
    stop_peer quiet; stop_b
    sleep 0.5; stop_kmsg
    cp "$PEER_LOG" "$out/067-$v.peer-a.log" 2>/dev/null
    cp "$B_LOG" "$out/067-$v.peer-b.log" 2>/dev/null
    cp /tmp/cross-session.kmsg "$out/067-$v.kmsg" 2>/dev/null
    ae=$(b_stat probes_access_error) ok=$(b_stat probes_succeeded) oe=$(b_stat probes_other_error)
    ic=$(b_stat steal_inv_completed) ie=$(b_stat steal_inv_error)
    dm=$(grep -E "iser_rs|iser:|connection[0-9]+:|siw|rxe" /tmp/cross-session.kmsg |
        grep -vE "connected \(|registered|released|taints|connection lost \(Disconnected\)|iwpm|scsi host" |
        sed 's/^\[[ 0-9.]*\] //' | head -4 | tr '\n' '|' | cut -c1-400)
    case $how in
    send-inv)
        log "$v: B's Send with Invalidate of A's STag: completed at B $ic, failed at B $ie ($(grep -m1 -E 'Send with Invalidate of another' $B_LOG | sed 's/^iser-peer: //')); B logged in again $b_new times, B's dd rc $brc; A: $a_new new connections, aborts before B's access $a_aborts, dd rc $rc, verify $verify; $ini: $dm"
        [ "$(b_stat mode_events)" -ge 1 ] || fails+=("$v: B never sent the Send with Invalidate")
        [ "$b_new" -ge 1 ] || fails+=("$v: B's connection did not fail (the foreign rkey was accepted)")
        [ "$brc" = 0 ] || fails+=("$v: B's READ failed (rc $brc)")
        if [ $own_probe = 1 ]; then
            log "$v: A's own RDMA Write through its stalled READ's Read STag after B's Send with Invalidate: access error $(peer_stat probes_access_error), succeeded $(peer_stat probes_succeeded), other $(peer_stat probes_other_error) ($(grep -m1 -E 'probe with STag' "$PEER_LOG" | sed 's/^.*probe with/probe with/')); A's aborts before it $a_aborts_probe"
            [ "$a_aborts_probe" = 0 ] || fails+=("$v: A's command was aborted before its own probe")
            # B's Send may have invalidated A's MR (the device's doing):
            # A's failed probe then breaks A's connection.
            [ "$(peer_stat probes_access_error)" = 0 ] && [ "$(peer_stat probes_other_error)" = 0 ] || a_new=0
        fi
        ;;
    *)
        log "$v: B's RDMA $([ "$how" = write ] && echo Write || echo Read) through A's STag: access error $ae, succeeded $ok, other $oe ($(grep -m1 -E 'probe with STag' $B_LOG | sed 's/^.*probe with/probe with/')); B logged in again $b_new times; A: $a_new new connections, aborts before B's access $a_aborts, dd rc $rc, verify $verify; $ini: $dm"
        [ "$ok" = 0 ] || fails+=("$v: B's RDMA $how through A's STag succeeded ($ok accesses)")
        [ "$ae" -ge 1 ] || fails+=("$v: B's access did not end in a remote access error ($oe other errors)")
        ;;
    esac
    [ "$a_aborts" = 0 ] || fails+=("$v: A's command was aborted before B's access (not a live STag)")
    [ "$a_new" = 0 ] || fails+=("$v: A's session reconnected ($a_new new connections)")
    [ "$rc" = 0 ] || fails+=("$v: A's dd failed (rc $rc)")
done
rm -f /tmp/cross-session.pat "$leak"
[ "$ini" = iser_rs ] && { rmmod iser_rs || die "rmmod iser_rs"; }
[ ${#fails[@]} -eq 0 ] || die "${fails[*]}"
