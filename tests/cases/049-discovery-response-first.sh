#!/usr/bin/env bash
# A Login or Text Response that reaches libiscsi before the netlink reply
# to the send_pdu call that sent its request: stock iscsiadm (open-iscsi
# 2.1.8) then loses it (its discovery reads the response while waiting for
# the reply, stashes it where its poll loop never looks, times out after
# 30 s and crashes reconnecting: open-iscsi issue #255). Seen as a rare
# discovery hang in the suite, more often on Debian's kernel, and with
# ib_iser in the benchmark. The fault injection `inject_send_pdu_delay_ms`
# makes every response win that race: the send_pdu call sleeps 300 ms
# after its request went out. iser_rs holds such a response and delivers
# it after the call returned and its caller slept, so discovery
# and login work: each discovery ends within seconds, finds the target, the
# session's `login_rsps_held` counts the held Login Responses, and fio
# verify passes. Logout leaves nothing live.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
p=/sys/module/iser_rs/parameters/inject_send_pdu_delay_ms
trap 'echo 0 > $p 2>/dev/null; case_cleanup' EXIT
echo 300 > $p
for i in 1 2 3; do
    t0=$(date +%s)
    out=$(timeout 60 iscsiadm -m discovery -t st -p $TGT_IP4:$TGT_PORT -I iser 2>&1)
    rc=$? t=$(( $(date +%s) - t0 ))
    [ $rc = 0 ] && grep -q "$TGT_IQN" <<< "$out" ||
        die "discovery $i with every response first: rc $rc after $t s: $(tail -2 <<< "$out" | tr '\n' ' ')"
    [ $t -le 15 ] || die "discovery $i took $t s (a lost response waits 30 s)"
    log "discovery $i with the response first: ok in $t s"
done
iscsiadm -m node -T $TGT_IQN -p $TGT_IP4:$TGT_PORT -I iser --login >/dev/null || die "login with every response first"
disk=$(wait_disks | head -1) || die "no disk"
held=$(session_stat login_rsps_held)
log "login: $held Login Responses held until their send_pdu returned"
[ "$held" -ge 1 ] || die "login_rsps_held is $held: no response was held"
echo 0 > $p
fio_verify "$disk" --rw=randwrite --bs=4k --iodepth=8 --size=4M || die "fio verify"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
