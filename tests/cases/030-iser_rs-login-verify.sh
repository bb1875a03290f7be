#!/usr/bin/env bash
# iscsiadm -I iser logs in through iser_rs, a disk appears, fio crc32c
# verify passes (random writes then verified reads), logout and rmmod
# leave no live connection, QP or MR behind (while logged in: one
# connection, with one MR per libiscsi task). Then `debug_level` as
# ib_iser's: 0 (the default) prints no trace, 3 prints the connection
# setup (level > 1) and every CM event (level > 2). The setup line's
# memory figures: no buffer of the connection needs more than a page.
# Nothing in the clean discovery, logins and logouts warns that a
# connection was lost or reports a connection error.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
# The kernel log from here on (a follower: the ring buffer may wrap).
dmesg -W > /tmp/030.kmsg 2>&1 & kmsg=$!
trap 'kill $kmsg 2>/dev/null; case_cleanup' EXIT
traces() { sleep 0.5; grep -cE "iser_rs: $1" /tmp/030.kmsg; }
disk=$(login iser | head -1); [ -n "$disk" ] || { dmesg | tail -30; die "login through iser_rs"; }
log "iser_rs disk: $disk ($(cat /sys/block/${disk#/dev/}/size) sectors)"
iscsiadm -m session -P1 | grep -E "Iface Transport|iSCSI Session State" | sed 's/^/# /'
# One connection (the discovery one is gone once its session logged out)
# holds one MR per libiscsi task: MRS = CMDS_MAX = 128; and its receive
# area (145 buffers at a stride of 8,320 bytes: 295 pages) and login send
# buffer (3 pages) are DMA-mapped page by page: 298.
for ((i = 0; i < 50; i++)); do [[ "$(live_counts)" == *"live_conns=1 "* ]] && break; sleep 0.1; done
log "live objects with one session: $(live_counts)"
[[ "$(live_counts)" == "live_conns=1 live_qps=1 live_mrs=128 live_pds=1 live_cqs=1 live_dma_pages=298 " ]] ||
    die "one session: $(live_counts) (expected one connection with 128 MRs and 298 mapped pages)"
fio_verify "$disk" --rw=randwrite --bs=4k --iodepth=16 || die "fio verify 4k"
iscsiadm -m session -s | grep -E "cmds_|registrations|invalidations|deferred|err_" | sed 's/^/# /'
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
[ "$(traces 'setup:|cm event')" = 0 ] || die "debug_level=0 printed $(traces 'setup:|cm event') trace lines"
# On a kernel with tracing (Debian's), the page allocator's own record
# checks the setup line's count for this login: no allocation of more
# than one page made with iser_rs's code on the stack may reclaim or
# retry (slab's and kvmalloc's first tries at a larger block are made
# __GFP_NORETRY, and fall back to single pages). The 6.12 test kernels
# have no tracing: there the setup line's count is the check.
T=/sys/kernel/tracing tracing=
[ -d $T/events ] || mount -t tracefs nodev $T 2>/dev/null
if [ -e $T/events/kmem/mm_page_alloc/enable ]; then
    echo 0 > $T/tracing_on; echo > $T/trace; echo 8192 > $T/buffer_size_kb
    echo 1 > $T/options/stacktrace; echo 1 > $T/options/sym-offset
    echo 'order > 0' > $T/events/kmem/mm_page_alloc/filter
    echo 1 > $T/events/kmem/mm_page_alloc/enable
    echo 1 > $T/tracing_on
    tracing=1
fi
echo 3 > /sys/module/iser_rs/parameters/debug_level
disk=$(login iser | head -1); [ -n "$disk" ] || die "login with debug_level=3"
if [ -n "$tracing" ]; then
    echo 0 > $T/tracing_on; echo 0 > $T/events/kmem/mm_page_alloc/enable
    echo 0 > $T/options/stacktrace; echo 0 > $T/options/sym-offset
    echo 0 > $T/events/kmem/mm_page_alloc/filter
    cp $T/trace /tmp/030.trace; echo > $T/trace
    # An event line, then its stack (lines ' => function+off/len [module]':
    # the module's Rust symbols and its C shim's name iser_rs too).
    awk '/ mm_page_alloc: / { if (mod) print ev; ev = $0; mod = 0; next }
         / => .*iser_rs/ { mod = 1 }
         END { if (mod) print ev }' /tmp/030.trace > /tmp/030.ours
    all=$(grep -c ' mm_page_alloc: ' /tmp/030.trace)
    ours=$(wc -l < /tmp/030.ours)
    hard=$(grep -E 'GFP_KERNEL|GFP_NOIO|GFP_NOFS|__GFP_DIRECT_RECLAIM' /tmp/030.ours | grep -v '__GFP_NORETRY' | sed 's/^.*mm_page_alloc: //')
    log "page allocations of order > 0 during a login: $all, $ours with iser_rs on the stack, of which may reclaim or retry: $(echo -n "$hard" | grep -c .)"
    [ "$all" -gt 0 ] || die "no page allocation of order > 0 traced during a login (tracing broken?)"
    [ -z "$hard" ] || {
        grep -A20 -F "$(echo "$hard" | head -1)" /tmp/030.trace | head -20 | sed 's/^/# /'
        die "iser_rs made $(echo "$hard" | grep -c .) allocations of more than a page that may reclaim (the first: $(echo "$hard" | head -1))"
    }
else
    log "no tracing in this kernel: the setup line's count is the check"
fi
logout_all
wait_live_zero || die "live objects after the second logout: $(live_counts)"
echo 0 > /sys/module/iser_rs/parameters/debug_level
setup=$(traces 'setup:') events=$(traces 'cm event')
log "debug_level=3: $setup setup lines, $events CM event lines ($(grep -m1 'iser_rs: setup:' /tmp/030.kmsg | sed 's/^\[[ 0-9.]*\] //'))"
# Discovery and session: two connections, each with ADDR_RESOLVED,
# ROUTE_RESOLVED and ESTABLISHED (a DISCONNECTED comes only when the
# target closes first).
[ "$setup" -ge 2 ] || die "debug_level=3: $setup setup lines (2 connections)"
[ "$events" -ge 6 ] || die "debug_level=3: $events CM event lines"
# Memory per connection, as the setup line counts it from the objects it
# made: no buffer of ours on the (re)connect path needs more than a
# page (the receive buffers of 8284 bytes and the login send buffer lie
# in order-0 pages of vmalloc areas, one SGE per page piece; the
# thousands of header slots come in page-sized chunks, the descriptor
# table from kvmalloc).
largest=$(grep -m1 -o 'largest contiguous allocation [0-9]*' /tmp/030.kmsg | grep -o '[0-9]*$')
[ -n "$largest" ] && [ "$largest" -le 4096 ] || die "largest contiguous allocation ${largest:-?} bytes (more than a page)"
# Reading a receive buffer costs no DMA sync call on rxe (software DMA),
# but in a boot with debug_pagealloc on (the suite's second 6.12 boot,
# and the debug kernel, where it is on by default) the page-piece syncs
# run, so that they are reached.
syncs=$(grep -m1 -o 'DMA syncs of receive buffers: [a-z]*' /tmp/030.kmsg | grep -o '[a-z]*$')
want=no; debug_pagealloc_on && want=yes
[ "$syncs" = "$want" ] || die "DMA syncs of receive buffers: '${syncs:-?}', expected $want"
# Discovery, two logins and logouts, nothing lost: no warning that a
# connection was lost (the discovery session ends with stop_conn, the
# sessions with a Logout), and no connection error reported to libiscsi.
lost=$(grep -c 'iser_rs: connection lost' /tmp/030.kmsg) errs=$(grep -c 'detected conn error' /tmp/030.kmsg)
log "connection lost warnings: $lost, connection errors reported: $errs"
[ "$lost" = 0 ] && [ "$errs" = 0 ] || die "clean discovery/login/logout: $lost 'connection lost' warnings, $errs connection errors"
rmmod iser_rs || die "rmmod iser_rs"
