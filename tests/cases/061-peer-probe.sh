#!/usr/bin/env bash
# Post-completion probe: the peer picks completed commands (a read and a
# write, after their status Send completed and a pause) and uses their
# STags once more, an RDMA Write and an RDMA Read each. Every probe must
# fail with a remote access error: the STags were invalid when iser_rs
# completed the commands. Each failed probe breaks the connection, so
# iscsid reconnects and the fio verify running meanwhile must stay clean.
# Run three times: with Send with Invalidate (the peer invalidates the
# STag), with --no-send-inv (iser_rs must invalidate locally before it
# completes the command), and with --stay-on-error: the peer keeps its
# connection after the failed probe. The refused access put iser_rs's QP
# in error, which rxe reports by flushes only, with no CM event and no
# error completion; iser_rs must fail the connection on the first flush
# it did not ask for, so no NOP-Out ever times out ("ping timeout": the
# connection was dead and nothing said so).
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator iser_rs
NPROBE=4
for variant in send-inv no-send-inv stay-on-error; do
    opts=(--probe $NPROBE)
    [ $variant = no-send-inv ] && opts+=(--no-send-inv)
    [ $variant = stay-on-error ] && opts+=(--stay-on-error)
    start_peer "${opts[@]}"
    kmsg_watch_start
    disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "login ($variant)"
    t0=$(date +%s)
    while :; do
        n=$(( $(peer_stat probes_access_error) + $(peer_stat probes_succeeded) + $(peer_stat probes_other_error) ))
        [ "$n" -ge $NPROBE ] && break
        [ $(( $(date +%s) - t0 )) -gt 240 ] && break
        peer_fio_verify "$disk" --rw=randrw --bs=16k --iodepth=8 --size=2M ||
            { cat /tmp/peer-fio.log; die "fio verify while probing ($variant)"; }
    done
    wait_logged_in 60 || die "session not back after the probes ($variant)"
    logout_all
    wait_live_zero || die "live objects after logout: $(live_counts)"
    stop_peer
    ae=$(peer_stat probes_access_error) ok=$(peer_stat probes_succeeded) oe=$(peer_stat probes_other_error)
    log "$variant: $ae probes failed with an access error, $ok succeeded, $oe failed otherwise"
    [ "$ok" = 0 ] || die "$variant: $ok probes SUCCEEDED: a completed command's STag was still valid"
    [ "$ae" -ge $NPROBE ] || die "$variant: only $ae of $NPROBE probes ended with an access error ($oe other errors)"
    pings=$(kmsg_count 'ping timeout')
    qperr=$(kmsg_count 'iser_rs: QP in error state')
    log "$variant: $qperr connections failed on a flush nobody asked for, $pings NOP-Out timeouts"
    [ "$pings" = 0 ] || die "$variant: $pings NOP-Out timeouts: a connection died silently"
    if [ $variant = stay-on-error ]; then
        [ "$qperr" -ge $NPROBE ] || die "$variant: $qperr connections failed on an unexpected flush, $NPROBE expected"
    fi
    kmsg_watch_check || die "$variant: kernel report"
done
rmmod iser_rs || die "rmmod iser_rs"
