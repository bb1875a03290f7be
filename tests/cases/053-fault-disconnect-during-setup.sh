#!/usr/bin/env bash
# Disconnect during setup: iscsid's login timeout (2 s) expires, and its
# ep_disconnect runs, while the connection's setup (the ROUTE_RESOLVED
# handler, which builds the PD, CQ, MRs, buffers and QP) is still running,
# held 4 s by the inject_setup_delay_ms fault injection. Many connections
# queued on rdma_cm's one workqueue do the same unaided (case 052 with
# LOGIN_TIMEOUT=4 did). The disconnect must not free what the setup is
# building, and the setup must build nothing once the disconnect has begun:
# "setup abandoned" (initial_login_retry_max 1: one attempt), the login
# fails, no connection is established, nothing is left live, no kernel report (rxe
# warns when a PD is freed under a live QP). Then, the injection off, a
# login with default timeouts works and verifies with fio.
. "$(dirname "$0")/../lib.sh"
delay=/sys/module/iser_rs/parameters/inject_setup_delay_ms
trap 'echo 0 > $delay 2>/dev/null; case_cleanup' EXIT
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
kmsg_watch_start
portal=$TGT_IP4:$TGT_PORT
iscsiadm -m discovery -t st -p $portal -I iser >/dev/null || die "discovery"
node() { iscsiadm -m node -T $TGT_IQN -p $portal -I iser -o update -n "$1" -v "$2" >/dev/null || die "node $1"; }
node node.session.scan manual
node "node.conn[0].timeo.login_timeout" 2
node node.session.initial_login_retry_max 1
abandoned() { dmesg | grep -c "iser_rs: setup abandoned"; }
a0=$(abandoned) c0=$(iser_connects)
echo 4000 > $delay
iscsiadm -m node -T $TGT_IQN -p $portal -I iser --login >/dev/null 2>&1 && die "logged in although every setup outlasts the login timeout"
# The last attempt's disconnect waits for its setup (rdma_destroy_id waits
# for the running handler): give it the delay's 4 s.
for ((i = 0; i < 100; i++)); do [ "$(live_counts)" = "live_conns=0 live_qps=0 live_mrs=0 live_pds=0 live_cqs=0 live_dma_pages=0 " ] && break; sleep 0.1; done
echo 0 > $delay
logout_all
wait_live_zero || die "live objects after the failed login: $(live_counts)"
a=$(($(abandoned) - a0))
log "login failed; setups abandoned because their disconnect came first: $a; connections established: $(($(iser_connects) - c0))"
[ "$a" -ge 1 ] || die "no setup abandoned: the disconnect did not fall inside a setup"
[ "$(iser_connects)" = "$c0" ] || die "a connection was established after its disconnect"
kmsg_watch_check || die "kernel report"
kmsg_watch_start
login_node "$portal" || die "login after the injection"
dev=$(wait_disks | head -1) || die "no disk after the injection"
fio_verify "$dev" --rw=randwrite --bs=64k --size=8m || die "fio verify"
logout_all
wait_live_zero || die "live objects after logout: $(live_counts)"
kmsg_watch_check || die "kernel report"
