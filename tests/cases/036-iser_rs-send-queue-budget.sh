#!/usr/bin/env bash
# A send queue smaller than the commands in flight can fill (module
# parameter sq_depth, as on a device whose max_qp_wr is below the full
# budget): with LIO at InitialR2T=No, 256 KiB writes (an immediate-data
# command and 31 Data-Out Sends each) and 4 KiB writes and reads at the
# target's full command window fill it. iser_rs counts its send-queue
# entries (an entry counts until a signaled completion at or after it is
# reaped) and makes a command wait (TARGET_BUSY, the `sq_room_waits` counter)
# rather than post past the queue: fio crc32c verify clean, no failed
# post, no command chain posted in part, no connection error or
# reconnect. Before the count, the same load overflowed the queue: the
# provider refused posts, chains went out in part and the connection
# failed.
. "$(dirname "$0")/../lib.sh"
# rxe rounds a queue up to a power of two, minus one: 1023 is exact.
SQ_DEPTH=1023
restore() { case_cleanup; target_unsolicited no; }
trap restore EXIT
setup_rdma rxe
setup_target 1
target_unsolicited yes
start_iscsid
lsmod | grep -q '^ib_iser ' && rmmod ib_iser
lsmod | grep -q '^iser_rs ' && rmmod iser_rs
insmod "${ISER_RS_KO:-$ISER_RS_REPO/iser_rs.ko}" sq_depth=$SQ_DEPTH debug_level=2 || die "insmod sq_depth=$SQ_DEPTH"
kmsg_watch_start
login_node $TGT_IP4:$TGT_PORT $UNSOL_LOGIN || die "login"
disk=$(wait_disks | head -1) || die "no disk"
[ "$(session_param InitialR2T)" = No ] || die "InitialR2T=No was not negotiated"
sleep 0.5
setup_line=$(grep 'iser_rs: setup:' "$KMSG_WATCH_FILE" | tail -1)
log "${setup_line#*iser_rs: }"
[[ "$setup_line" == *"QP with $SQ_DEPTH send"* ]] || die "the QP was not created with $SQ_DEPTH send WRs"
c0=$(iser_connects)
for job in "--rw=randwrite --bs=256k --iodepth=64 --size=32M" \
           "--rw=randwrite --bs=4k --iodepth=64 --size=8M"; do
    timeout 300 fio --name=sq --filename="$disk" --direct=1 --ioengine=libaio \
        --verify=crc32c --do_verify=1 --verify_fatal=1 $job \
        --output=/tmp/036-fio.log >/dev/null 2>&1 ||
        { tail -5 /tmp/036-fio.log | sed 's/^/# /'; die "fio verify $job (status $?)"; }
    log "fio $job: verify clean; sq_room_waits $(session_stat sq_room_waits), data_outs $(session_stat data_outs), err_post $(session_stat err_post)"
done
iscsiadm -m session -s | grep -E "sq_|data_outs|unsignaled|err_" | sed 's/^/# /'
posts=$(session_stat err_post) full=$(session_stat sq_room_waits)
part=$(kmsg_count 'posted in part') errs=$(kmsg_count 'detected conn error')
reconnects=$(( $(iser_connects) - c0 ))
log "failed posts $posts, chains posted in part $part, connection errors $errs, reconnects $reconnects, waits for send-queue room $full"
[ "$posts" -eq 0 ] || die "$posts posts failed"
[ "$part" -eq 0 ] && [ "$errs" -eq 0 ] && [ "$reconnects" -eq 0 ] || die "the connection failed"
[ "$full" -gt 0 ] || die "no command waited for send-queue room (sq_room_waits=0): the budget was never reached"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
# A depth that leaves the transmit path less than its minimum is refused
# at setup: the discovery session's connection fails.
echo 700 > /sys/module/iser_rs/parameters/sq_depth
if timeout 120 iscsiadm -m discovery -t st -p $TGT_IP4:$TGT_PORT -I iser >/dev/null 2>&1; then
    die "discovery succeeded with sq_depth=700"
fi
[ "$(kmsg_count 'would hold fewer than 740 entries')" -gt 0 ] || die "no refusal logged for sq_depth=700"
log "sq_depth=700: setup refused, discovery failed"
echo 0 > /sys/module/iser_rs/parameters/sq_depth
wait_live_zero || die "live objects after the refused connection: $(live_counts)"
kmsg_watch_check || die "kernel report"
