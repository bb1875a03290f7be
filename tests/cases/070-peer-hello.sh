#!/usr/bin/env bash
# The iSER Hello (module parameter hello, off by default; iSER §5.1.3,
# §9.3-9.4) against the test peer's HelloReply variants (--hello-reply).
# - hello=N (the default) with a peer that answers Hello: no Hello is sent
#   (the peer counts none) and the login works.
# - hello=Y, ok: every connection (discovery and session) starts with one
#   Hello, the initiator accepts the reply (version 1, iSER-ORD = min of
#   the peer's ORD and our IRD), then the login and fio verify work.
# - hello=Y, bad-version (CurVer 2), ord0 (iSER-ORD 0), reject (R bit):
#   the initiator refuses the reply before any login request (the peer
#   counts no login), names the reason in its log, and no disk appears.
# - hello=Y, ignore (no HelloReply, as LIO and tgt): nothing logs in; the
#   connection is left to the login timeout (here the discovery record's,
#   set to 5 s with no retry, as for the refused replies).
# - hello=Y, probe (no HelloReply: an RDMA Write through an STag never
#   advertised, with --stay-on-error): rxe refuses it and moves the
#   initiator's QP to error, which only a flush tells. The attempt fails on
#   that flush ("QP in error state while the iSER Hello was out"), well
#   before the login timeout (30 s in this variant; before the fix it ran
#   out).
# Nothing is left live after each; no kernel report.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
start_iscsid
load_initiator iser_rs
param=/sys/module/iser_rs/parameters/hello
[ "$(cat $param)" = N ] || die "hello is $(cat $param) by default, not N"

start_peer
disk=$(peer_login iser | head -1)
[ -n "$disk" ] || { tail -5 "$PEER_LOG"; die "login with hello=N"; }
[ "$(peer_stat hellos)" = 0 ] || die "hello=N sent $(peer_stat hellos) Hellos"
log "hello=N: no Hello, login over $(peer_stat connections) connections"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
stop_peer quiet

echo Y > $param
start_peer --hello-reply ok
disk=$(peer_login iser | head -1)
[ -n "$disk" ] || { tail -5 "$PEER_LOG"; dmesg | grep -E "iser|iscsi" | tail -5; die "login with hello=Y and a compliant HelloReply"; }
peer_fio_verify "$disk" --rw=randwrite --bs=16k --iodepth=16 ||
    { cat /tmp/peer-fio.log; die "fio verify after the Hello exchange"; }
hellos=$(peer_stat hellos) conns=$(peer_stat connections)
accepted=$(dmesg | grep -c "iSER HelloReply accepted: version 1, target iSER-ORD [1-9]")
log "hello=Y, ok: $hellos Hellos over $conns connections, $accepted HelloReplies accepted"
[ "$conns" -ge 2 ] && [ "$hellos" = "$conns" ] || die "$hellos Hellos over $conns connections"
[ "$accepted" = "$conns" ] || die "$accepted HelloReplies accepted over $conns connections"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
stop_peer quiet

for m in bad-version:HelloVersionMismatch ord0:HelloOrdZero reject:HelloRejected ignore: probe:; do
    how=${m%%:*} why=${m#*:}
    refused0=$(dmesg | grep -c "iSER HelloReply refused: $why")
    qperr0=$(dmesg | grep -c "QP in error state while the iSER Hello was out")
    tmo=5 extra=()
    [ "$how" = probe ] && tmo=30 extra=(--stay-on-error)
    start_peer --hello-reply "$how" "${extra[@]}"
    t0=$SECONDS
    # One SendTargets attempt with a 5 s login timeout (iscsiadm's default
    # would retry 5 times with 15 s each).
    portal=$PEER_ADDR:$PEER_PORT
    iscsiadm -m discoverydb -t st -p "$portal" -I iser -o new >/dev/null || die "discoverydb new"
    iscsiadm -m discoverydb -t st -p "$portal" -I iser -o update -n discovery.sendtargets.reopen_max -v 0 >/dev/null &&
        iscsiadm -m discoverydb -t st -p "$portal" -I iser -o update -n discovery.sendtargets.timeo.login_timeout -v $tmo >/dev/null ||
        die "discoverydb update"
    t1=$SECONDS
    if timeout 60 iscsiadm -m discoverydb -t st -p "$portal" -I iser --discover >/dev/null 2>&1; then
        die "hello=Y, $how: the discovery login succeeded"
    fi
    took=$((SECONDS - t1))
    iscsiadm -m discoverydb -t st -p "$portal" -I iser -o delete >/dev/null 2>&1
    sleep 1
    [ -z "$(session_disks)" ] || die "hello=Y, $how: a disk appeared"
    hellos=$(peer_stat hellos) replies=$(peer_stat hello_replies)
    logins=$(( $(peer_stat logins) + $(peer_stat discovery_logins) + $(peer_stat login_failures) ))
    refused=$(( $(dmesg | grep -c "iSER HelloReply refused: $why") - refused0 ))
    log "hello=Y, $how: login failed after $((SECONDS - t0)) s; $hellos Hellos, $replies replies, $refused refused ($why), $logins login requests answered"
    [ "$hellos" = 1 ] || die "hello=Y, $how: $hellos Hellos reached the peer for one attempt"
    [ "$logins" = 0 ] || die "hello=Y, $how: $logins login requests reached the peer"
    if [ "$how" = ignore ]; then
        [ "$replies" = 0 ] || die "hello=Y, ignore: the peer replied"
    elif [ "$how" = probe ]; then
        qperr=$(( $(dmesg | grep -c "QP in error state while the iSER Hello was out") - qperr0 ))
        log "hello=Y, probe: $(peer_stat probes_access_error) probe refused (remote access error), $qperr attempts failed on the flush, in $took s (login timeout $tmo s)"
        [ "$replies" = 0 ] || die "hello=Y, probe: the peer replied"
        [ "$(peer_stat probes_access_error)" = 1 ] ||
            die "hello=Y, probe: the probe through a never-advertised STag was not refused ($(peer_stat probes_succeeded) succeeded, $(peer_stat probes_other_error) other errors)"
        [ "$qperr" = 1 ] || die "hello=Y, probe: $qperr attempts failed on the QP's flush (the QP error went unnoticed)"
        [ "$took" -lt 15 ] || die "hello=Y, probe: the discovery took $took s: left to the $tmo s login timeout"
    else
        [ "$replies" = "$hellos" ] && [ "$refused" = "$replies" ] ||
            die "hello=Y, $how: $refused of $replies replies refused as $why"
    fi
    logout_all
    wait_live_zero || die "hello=Y, $how: live objects after the failed login: $(live_counts)"
    stop_peer quiet
done
echo N > $param
rmmod iser_rs || die "rmmod iser_rs"
