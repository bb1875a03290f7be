#!/usr/bin/env bash
# Two refusals of a connection's setup that rxe and siw never cause, each
# made by a test-only module parameter:
# - inject_dev_max_sge: the device looks as if it took at most N SGEs per
#   work request. The page-backed buffers need 4 per receive and 3 per
#   Send, so N=3 (receive too few) and N=2 (both) must refuse the setup
#   with the "the device takes N receive and N send SGEs ... refused" line,
#   before anything is allocated; the login fails, nothing is left live.
# - inject_dma_map_fail_in: the Kth page mapping of a receive or login
#   buffer area from now fails, once. A connection maps its receive area
#   (295 pages) and then its login send buffer (3 pages): K = 2 and 295
#   (the receive area's second and last page: one page and 294 mapped
#   before it), 296 and 298 (the login buffer's first and last: the whole
#   receive area, and it and two pages, mapped before it). Each must fail that
#   setup ("connection setup failed: ENOMEM"), unmap exactly the pages
#   mapped before it (live_dma_pages back to 0: the count is kept by the
#   mapping calls themselves) and free everything else (every live count
#   0). iscsid's retry of the login (the failure is injected once) may
#   succeed: then its session holds exactly one connection's 298 pages.
# Then a login with neither verifies with fio, and no kernel report.
. "$(dirname "$0")/../lib.sh"
par=/sys/module/iser_rs/parameters
injection_off() { echo 0 > $par/inject_dev_max_sge 2>/dev/null; echo 0 > $par/inject_dma_map_fail_in 2>/dev/null; }
if [ "${ISER_RS_NO_CLEANUP:-0}" = 1 ]; then trap injection_off EXIT; else trap 'injection_off; case_cleanup' EXIT; fi
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
portal=$TGT_IP4:$TGT_PORT
iscsiadm -m discovery -t st -p $portal -I iser >/dev/null || die "discovery"
node() { iscsiadm -m node -T $TGT_IQN -p $portal -I iser -o update -n "$1" -v "$2" >/dev/null || die "node $1"; }
node node.session.scan manual
node node.session.initial_login_retry_max 1
kmsg_watch_start

# settle: iscsid may still be retrying a failed login after iscsiadm
# gave up: log out (the node record stays), and wait for nothing live
# and 3 s without an iser_rs kernel line.
settle() {
    local n i
    iscsiadm -m node --logoutall=all >/dev/null 2>&1 || true
    wait_live_zero || die "$1: live objects after the login: $(live_counts)"
    for ((i = 0; i < 30; i++)); do
        n=$(kmsg_count "iser_rs: ")
        sleep 3
        [ "$(kmsg_count "iser_rs: ")" = "$n" ] && return 0
    done
    die "$1: iser_rs still busy after 90 s"
}

for n in 3 2; do
    line="setup: the device takes $n receive and $n send SGEs per work request, fewer than the 4 and 3 the page-backed buffers need: refused"
    c0=$(kmsg_count "$line")
    echo $n > $par/inject_dev_max_sge
    out=$(iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login 2>&1) && die "max_sge $n: logged in"
    log "iscsiadm: $(echo "$out" | tail -2 | tr '\n' ' ')"
    settle "max_sge $n"
    echo 0 > $par/inject_dev_max_sge
    c=$(($(kmsg_count "$line") - c0))
    log "device max SGE $n: login refused, $c setup refusals logged, live counts 0"
    [ "$c" -ge 1 ] || die "max_sge $n: no refusal line"
done

# The setup's error line names ENOMEM (Debian's 7.3) or its number (6.12).
enomem='connection setup failed: \(ENOMEM\|Error(12)\)'
# The mapping failure is injected once: iscsid's retry of the login may
# then succeed; that session must hold exactly one connection's pages.
for k in 2 295 296 298; do
    c0=$(kmsg_count "$enomem")
    echo $k > $par/inject_dma_map_fail_in
    how=failed
    if iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null 2>&1; then
        how="logged in on a retry"
        for ((i = 0; i < 50; i++)); do [[ "$(live_counts)" == *"live_conns=1 "* ]] && break; sleep 0.1; done
        [ "$(live_counts)" = "live_conns=1 live_qps=1 live_mrs=128 live_pds=1 live_cqs=1 live_dma_pages=298 " ] ||
            die "page $k: after the retry: $(live_counts)"
    fi
    left=$(cat $par/inject_dma_map_fail_in)
    echo 0 > $par/inject_dma_map_fail_in
    settle "page $k"
    [ "$left" = 0 ] || die "page $k: the injected mapping failure did not happen ($left mappings left)"
    c=$(($(kmsg_count "$enomem") - c0))
    [ "$c" -ge 1 ] || die "page $k: no setup failure logged"
    log "mapping failure at page $k: setup failed, login $how; live counts 0 after logout"
done

node node.session.scan auto
iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null || die "login without injection"
dev=$(wait_disks | head -1); [ -n "$dev" ] || die "no disk without injection"
for ((i = 0; i < 50; i++)); do [[ "$(live_counts)" == *"live_conns=1 "* ]] && break; sleep 0.1; done
log "logged in without injection: $(live_counts)"
[[ "$(live_counts)" == *" live_dma_pages=298 " ]] || die "mapped pages with one session: $(live_counts)"
fio_verify "$dev" --rw=randwrite --bs=64k --size=8m || die "fio verify"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
kmsg_watch_check || die "kernel report"
