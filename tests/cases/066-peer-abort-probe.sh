#!/usr/bin/env bash
# STags of released commands (issue: abort, reset): the peer stalls one
# command (a READ, whose Read STag the target may RDMA-Write, or a 64 KiB
# WRITE, whose Write STag the target may RDMA-Read), the initiator releases
# it through a TMF that the peer answers with Function Complete, and once
# iser_rs's counters are read (SIGUSR2) the peer uses that STag the way it
# was granted. Four ways to the
# TMF: ABORT TASK after a 5 s SCSI timeout (READ and WRITE), LOGICAL UNIT
# RESET and TARGET WARM RESET (sg_reset -d / -t) with the command stalled.
# Every access must end in a remote access error (iser_rs invalidates the
# MRs of the commands a successful TMF covers before libiscsi sees the
# response: its tmf_invalidations counter grows), the session comes back
# (the failed access breaks the peer's connection) and a fio verify after
# it is clean. A fifth path aborts a 4 KiB WRITE whose data all went as
# immediate data: it holds no MR and advertises no STag, so there is
# nothing to probe; iser_rs still holds the TMF Response until the TMF
# request's own Send completed (the Send of the immediate data, posted
# before it, then has too: tmf_send_waits counts the responses that had to
# wait), and the abort must succeed without a reconnect. Any release of a
# command with a still-valid STag on a live QP is logged by iser_rs as
# "STag guarantee broken", which fails every case (tests/lib.sh
# REPORT_RE). INITIATOR=ib_iser runs the same against the C driver
# (Documentation/peer-modes.rst has both columns).
. "$(dirname "$0")/../lib.sh"
ini=${INITIATOR:-iser_rs}
setup_rdma rxe
REPLACEMENT_TIMEOUT=60 start_iscsid
load_initiator "$ini"
dd if=/dev/urandom of=/tmp/abort-probe.pat bs=64k count=16 status=none
probes() { echo $(( $(peer_stat probes_access_error) + $(peer_stat probes_succeeded) + $(peer_stat probes_other_error) )); }
fails=()
for v in abort:read abort:write lun-reset:read target-reset:write abort:write-imm; do
    how=${v%%:*} dir=${v#*:}
    # The probe waits for SIGUSR2 (a delay of 10 minutes that the signal
    # cuts short), sent once iser_rs's counters are read: the failed probe
    # breaks the connection, and a new connection starts them from zero.
    # A fixed 4 s delay raced that read on the KASAN kernel (CI of
    # 2026-11-28 read +0 in three variants: the first iscsiadm came back
    # after the probe).
    start_peer --mode stall --at 1000000000 --on "${dir%-imm}" --abort-probe --probe-delay-ms 600000
    disk=$(peer_login iser | head -1); [ -n "$disk" ] || die "$v: login"
    dev=${disk#/dev/}
    sg=/dev/$(ls /sys/block/$dev/device/scsi_generic/)
    tmf0=$(session_stat tmf_invalidations) sw0=$(session_stat tmf_send_waits) c0=$(iser_connects 2>/dev/null || echo 0)
    # ABORT TASK comes from the SCSI timeout; the resets are issued by hand
    # while the command is stalled, long before its timeout.
    if [ "$how" = abort ]; then echo 5 > /sys/block/$dev/device/timeout; else echo 60 > /sys/block/$dev/device/timeout; fi
    if [ "$dir" = read ]; then
        io=(if="$disk" of=/dev/null bs=64k count=16 iflag=direct)
    elif [ "$dir" = write-imm ]; then
        io=(if=/tmp/abort-probe.pat of="$disk" bs=4k count=16 oflag=direct)
    else
        io=(if=/tmp/abort-probe.pat of="$disk" bs=64k count=16 oflag=direct)
    fi
    peer_stall_io Stall "${io[@]}" || die "$v: the peer never stalled a $dir"
    wl=$STALL_IO_PID
    case $how in
    lun-reset) sg_reset -d "$sg" >/dev/null 2>&1 || log "$v: sg_reset -d returned $?" ;;
    target-reset) sg_reset -t "$sg" >/dev/null 2>&1 || log "$v: sg_reset -t returned $?" ;;
    esac
    for ((i = 0; i < 600; i++)); do [ "$(peer_stat tmfs)" -ge 1 ] && break; sleep 0.1; done
    # The peer counts the TMF before it answers; iser_rs invalidates when
    # the answer arrives, which on the KASAN kernel can be after a first
    # read of the counter (a make check run of 2026-11-26 read +0 there).
    # Read until it grows (at most 30 s); the probe waits meanwhile.
    tmf=? sw=?
    if [ "$ini" = iser_rs ]; then
        t_end=$((SECONDS + 30))
        while :; do
            tmf=$(( $(session_stat tmf_invalidations) - tmf0 ))
            [ "$tmf" -ge 1 ] || [ "$dir" = write-imm ] || [ $SECONDS -ge $t_end ] && break
            sleep 0.1
        done
        sw=$(( $(session_stat tmf_send_waits) - sw0 ))
    fi
    if [ "$dir" != write-imm ]; then
        # Then the probe: 1 s after the counter grew (its LOCAL_INV
        # completes in microseconds; the response is held until it has),
        # 4 s after the TMF for ib_iser, which has no counter to read.
        if [ "$ini" = iser_rs ]; then sleep 1; else sleep 4; fi
        kill -USR2 "$PEER_PID"
        for ((i = 0; i < 600; i++)); do [ "$(probes)" -ge 1 ] && break; sleep 0.1; done
    fi
    wait "$wl"; rc=$?
    [ "$ini" = iser_rs ] && rec=$(( $(iser_connects) - c0 )) || rec=?
    wait_logged_in 60 || die "$v: session not back"
    peer_fio_verify "$disk" --rw=randwrite --bs=64k --iodepth=8 --size=4M ||
        { cat /tmp/peer-fio.log; die "$v: fio verify after the probe"; }
    logout_all
    if [ "$ini" = iser_rs ]; then wait_live_zero || die "$v: live objects after logout: $(live_counts)"; fi
    stop_peer quiet
    ae=$(peer_stat probes_access_error) ok=$(peer_stat probes_succeeded) oe=$(peer_stat probes_other_error)
    probe=$(grep -m1 -E "probe with STag" "$PEER_LOG" | sed 's/^.*probe with/probe with/')
    log "$v: TMFs $(peer_stat tmfs) (aborts $(peer_stat aborts)), probe: access error $ae, succeeded $ok, other $oe; $probe; dd rc $rc; tmf_invalidations +$tmf, tmf_send_waits +$sw, reconnects $rec"
    [ "$(peer_stat tmfs)" -ge 1 ] || fails+=("$v: no TMF reached the peer")
    if [ "$dir" = write-imm ]; then
        # No STag: no probe, no invalidation; the abort itself must succeed
        # (a response held for good would time the TMF out and reconnect).
        [ "$ok$ae$oe" = 000 ] || fails+=("$v: the peer probed an STag of an all-immediate WRITE ($ok/$ae/$oe)")
        [ "$ini" != iser_rs ] || [ "$tmf" = 0 ] || fails+=("$v: tmf_invalidations +$tmf for a command without MR")
        [ "$ini" != iser_rs ] || [ "$rec" = 0 ] || fails+=("$v: the abort cost $rec reconnects")
        [ "$rc" = 0 ] || fails+=("$v: the aborted WRITE was not retried to success (dd rc $rc)")
        continue
    fi
    [ "$ok" = 0 ] || fails+=("$v: the released command's STag was still valid ($ok probes succeeded)")
    [ "$ae" -ge 1 ] || fails+=("$v: no probe ended in a remote access error ($oe other errors)")
    [ "$ini" != iser_rs ] || [ "$tmf" -ge 1 ] || fails+=("$v: iser_rs invalidated nothing for the TMF (tmf_invalidations +$tmf)")
done
rm -f /tmp/abort-probe.pat
[ "$ini" = iser_rs ] && { rmmod iser_rs || die "rmmod iser_rs"; }
[ ${#fails[@]} -eq 0 ] || die "${fails[*]}"
