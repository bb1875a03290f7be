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
# failed. Then, at the smallest depth, a write of 63 Data-Outs after 15
# unsignaled reads at QD1 with no NOP-Out completes at once (before the
# last Send of an xmit was signaled early when room runs short, it was
# never sent); keys whose largest write could never fit the send queue
# or the header slots are refused at login.
. "$(dirname "$0")/../lib.sh"
# rxe rounds a queue up to a power of two, minus one: 1023 is exact.
SQ_DEPTH=1023
restore() {
    command -v udevadm >/dev/null && udevadm control --start-exec-queue 2>/dev/null
    case_cleanup; target_unsolicited no
    echo 262144 > $CFG/target/iscsi/$TGT_IQN/tpgt_1/param/MaxBurstLength
}
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
kmsg_sync
setup_line=$(grep -a 'iser_rs: setup:' "$KMSG_WATCH_FILE" | tail -1)
log "${setup_line#*iser_rs: }"
[[ "$setup_line" == *"QP with $SQ_DEPTH send"* ]] || die "the QP was not created with $SQ_DEPTH send WRs"
c0=$(iser_connects)
# Submitted in batches of 64: one at a time (fio computes each crc32c
# first) the queue never filled under TCG (CI 2026-12-01: sq_room_waits
# 0, sq_used_max 340 of 1023), as in case 035.
for job in "--rw=randwrite --bs=256k --iodepth=64 --size=32M" \
           "--rw=randwrite --bs=4k --iodepth=64 --size=8M"; do
    timeout 300 fio --name=sq --filename="$disk" --direct=1 --ioengine=libaio \
        --verify=crc32c --do_verify=1 --verify_fatal=1 $job --iodepth_batch_submit=64 \
        --output=/tmp/036-fio.log >/dev/null 2>&1 ||
        { tail -5 /tmp/036-fio.log | sed 's/^/# /'; die "fio verify $job (status $?)"; }
    log "fio $job: verify clean; sq_room_waits $(session_stat sq_room_waits), data_outs $(session_stat data_outs), err_post $(session_stat err_post)"
done
iscsiadm -m session -s | grep -E "sq_|data_outs|unsignaled|err_" | sed 's/^/# /'
posts=$(session_stat err_post) full=$(session_stat sq_room_waits)
part=$(kmsg_count 'posted in part') errs=$(kmsg_count 'detected conn error')
reconnects=$(( $(iser_connects) - c0 ))
log "failed posts $posts, chains posted in part $part, connection errors $errs, reconnects $reconnects, waits for send-queue room $full"
# The target's receive queue runs dry under unsolicited Data-Out: rxe
# answers with RNR NAKs and retransmits, rewinding the send queue over
# REG_MRs already run (before scripts/kernel-patches/0003, rxe ran them
# again and failed the QP).
hw=/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters
log "$RDMA_DEV (target and initiator): RNR NAKs $(cat $hw/rcvd_rnr_err 2>/dev/null), send queues rewound after a NAK or a timeout $(cat $hw/completer_retry_err 2>/dev/null)"
[ "$posts" -eq 0 ] || die "$posts posts failed"
if [ "$part" -ne 0 ] || [ "$errs" -ne 0 ] || [ "$reconnects" -ne 0 ]; then
    # What ended it: the kernel's lines up to the error (the target's
    # too), and rxe's counters (retransmissions, NAKs).
    grep -av 'iser-test' "$KMSG_WATCH_FILE" | grep -a -m1 -B30 'detected conn error' | sed 's/^/# kmsg: /'
    for f in /sys/class/infiniband/*/ports/1/hw_counters/*; do
        [ "$(cat "$f" 2>/dev/null)" != 0 ] && echo "# ${f#/sys/class/infiniband/}: $(cat "$f")"
    done
    die "the connection failed"
fi
[ "$full" -gt 0 ] || die "no command waited for send-queue room (sq_room_waits=0): the budget was never reached"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
# The smallest depth (740: a transmit budget of 99) with 4 KiB PDUs, so a
# 256 KiB write is a command and 63 Data-Outs (66 entries counted), and
# no NOP-Out: at QD1, each round a 4 KiB write (immediate data: a
# signaled Send, after which nothing is counted in use), 15 reads (15
# unsignaled inline command chains, 30-45 entries), then one such write.
# Unsignaled chains stay counted until a later signaled Send's
# completion is reaped, so the write must not find them filling its room
# with no signaled Send left in flight to free them: the last Send of an
# xmit call is signaled instead when it would leave less room than the
# negotiation's largest write needs (`sq_early_signals`). Before that
# rule the write was never sent: the midlayer retried it for good
# (TARGET_BUSY requeues are not timed). udev's event queue is held
# meanwhile, so no close-after-write makes it probe the disk between them.
echo 740 > /sys/module/iser_rs/parameters/sq_depth
login_node $TGT_IP4:$TGT_PORT $UNSOL_LOGIN "node.conn[0].iscsi.MaxXmitDataSegmentLength=4096" \
    "node.conn[0].timeo.noop_out_interval=0" "node.conn[0].timeo.noop_out_timeout=0" || die "login at sq_depth=740"
disk=$(wait_disks | head -1) || die "no disk at sq_depth=740"
[ "$(session_param MaxXmitDataSegmentLength)" = 4096 ] || die "MaxXmitDataSegmentLength=4096 was not negotiated"
udev_hold() { command -v udevadm >/dev/null && udevadm control "$1" 2>/dev/null; }
udevadm settle --timeout=30 2>/dev/null
udev_hold --stop-exec-queue
head -c 262144 /dev/urandom > /tmp/036-burst
head -c 4096 /dev/urandom > /tmp/036-4k
w0=$(session_stat sq_room_waits) d0=$(session_stat data_outs) e0=$(session_stat sq_early_signals) slowest=0
for ((round = 0; round < 8; round++)); do
    dd if=/tmp/036-4k of="$disk" bs=4k count=1 seek=$((8192 + round)) oflag=direct conv=notrunc status=none ||
        die "the 4 KiB write of round $round failed"
    for ((i = 0; i < 15; i++)); do
        dd if="$disk" of=/dev/null bs=4k count=1 skip=$((4096 + round * 16 + i)) iflag=direct status=none ||
            die "read $i of round $round"
    done
    t0=$(date +%s%N)
    dd if=/tmp/036-burst of="$disk" bs=256k count=1 seek=$round oflag=direct conv=notrunc status=none &
    writer=$!
    for ((w = 0; w < 200; w++)); do
        kill -0 $writer 2>/dev/null || break
        sleep 0.1
    done
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    kill -0 $writer 2>/dev/null &&
        die "the 256 KiB write of round $round not done after $ms ms (sq_room_waits +$(( $(session_stat sq_room_waits) - w0 )), sq_early_signals +$(( $(session_stat sq_early_signals) - e0 )))"
    wait $writer || die "the 256 KiB write of round $round failed"
    [ "$ms" -gt "$slowest" ] && slowest=$ms
    dd if="$disk" bs=256k count=1 skip=$round iflag=direct status=none | cmp -s - /tmp/036-burst ||
        die "the 256 KiB write of round $round read back different"
done
udev_hold --start-exec-queue
log "sq_depth=740, 4 KiB PDUs, no NOP-Out: 8 rounds of a 4 KiB write, 15 reads and a 256 KiB write (data_outs +$(( $(session_stat data_outs) - d0 ))), slowest 256 KiB write $slowest ms, sq_room_waits +$(( $(session_stat sq_room_waits) - w0 )), sq_early_signals +$(( $(session_stat sq_early_signals) - e0 )), sq_used_max $(session_stat sq_used_max)"
[ "$(session_stat sq_early_signals)" -gt "$e0" ] || die "no Send was signaled early (sq_early_signals +0)"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
# At that depth, 512-byte PDUs make a 256 KiB write need 3 + 511 entries
# (a command chain, and Data-Outs for all but the immediate 512 bytes),
# more than the transmit budget holds even empty: the connection is
# refused at start (full feature phase), with the reason logged, rather
# than log in and leave every such write waiting for good.
# login_refused WHAT REASON SETTING...: a login with the unsolicited keys
# and SETTINGs (one attempt) fails, and start_conn logged REASON.
login_refused() {
    local what=$1 reason=$2 t0=$SECONDS refusal; shift 2
    if login_node $TGT_IP4:$TGT_PORT $UNSOL_LOGIN "$@" "node.session.initial_login_retry_max=1"; then
        die "login succeeded with $what"
    fi
    kmsg_sync
    refusal=$(grep -a "$reason" "$KMSG_WATCH_FILE" | tail -1)
    [ -n "$refusal" ] || die "no refusal logged at start with $what"
    log "$what: login failed in $((SECONDS - t0)) s: ${refusal#*iser_rs: }"
    logout_all
}
login_refused "sq_depth=740, 512-byte PDUs" 'need up to 514 send-queue entries' \
    "node.conn[0].iscsi.MaxXmitDataSegmentLength=512"
wait_live_zero || die "live objects after the refused start: $(live_counts)"
# Header slots likewise: with max_sectors=8192 (4 MiB commands),
# FirstBurstLength 2,252,800 and 512-byte PDUs a write needs 4,400 (its
# command and 4,399 Data-Outs), more than the 1,152 one transmit call can
# always get (the send queue's default depth would hold it): refused at
# start too.
# A session iscsid has not finished destroying still holds the module.
for ((i = 0; i < 50; i++)); do rmmod iser_rs 2>/dev/null && break; sleep 0.2; done
lsmod | grep -q '^iser_rs ' && die "rmmod before max_sectors=8192"
insmod "${ISER_RS_KO:-$ISER_RS_REPO/iser_rs.ko}" max_sectors=8192 || die "insmod max_sectors=8192"
p=$CFG/target/iscsi/$TGT_IQN/tpgt_1/param
echo 4194304 > $p/MaxBurstLength && echo 2252800 > $p/FirstBurstLength || die "LIO FirstBurstLength 2252800"
login_refused "max_sectors=8192, FirstBurstLength 2252800, 512-byte PDUs" 'need up to 4400 header slots' \
    "node.session.iscsi.FirstBurstLength=2252800" "node.session.iscsi.MaxBurstLength=4194304" \
    "node.conn[0].iscsi.MaxXmitDataSegmentLength=512"
echo 262144 > $p/MaxBurstLength
target_unsolicited yes
wait_live_zero || die "live objects after the refused start: $(live_counts)"
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
