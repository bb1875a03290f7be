#!/usr/bin/env bash
# Target loss under I/O: the LIO portal group is disabled and re-enabled
# three times while fio writes with crc32c verify through iser_rs. iscsid
# reconnects through iser_rs, libiscsi retries the queued I/O, and the
# verify pass finds zero mismatches. Nothing leaks after logout.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator iser_rs
disk=$(login iser | head -1); [ -n "$disk" ] || die "login"
t=$CFG/target/iscsi/$TGT_IQN/tpgt_1
fio --name=flap --filename="$disk" --direct=1 --ioengine=libaio --rw=randwrite --bs=8k \
    --iodepth=16 --size=8M --loops=6 --verify=crc32c --do_verify=1 --verify_fatal=1 \
    --output=/tmp/flap.fio >/dev/null 2>&1 &
fio_pid=$!
longest=0
conns_before=$(iser_connects)
for round in 1 2 3; do
    sleep 4
    echo 0 > $t/enable
    t0=$(date +%s%N)
    sleep 2
    echo 1 > $t/enable
    # Wait for the session to be logged in again.
    for ((i = 0; i < 300; i++)); do
        iscsiadm -m session -P1 2>/dev/null | grep -q "iSCSI Session State: LOGGED_IN" && break
        sleep 0.1
    done
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ $ms -gt $longest ] && longest=$ms
    log "flap $round: session back after ${ms} ms (portal down 2 s)"
done
wait $fio_pid || { cat /tmp/flap.fio; die "fio verify across portal flaps"; }
grep -E "err=|verify" /tmp/flap.fio | head -3 | sed 's/^/# /'
reconnects=$(( $(iser_connects) - conns_before ))
[ $reconnects -ge 3 ] || die "expected >= 3 reconnects through iser_rs, saw $reconnects"
log "3 portal flaps under fio: $reconnects reconnects, verify clean, longest reconnect ${longest} ms"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
