#!/usr/bin/env bash
# CHAP: the login exchange (several login PDUs with CHAP keys) runs over
# the RDMA connection; a wrong secret is refused, the right one logs in.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator ${INITIATOR:-iser_rs}
target_chap iser-rs-user secret-0123456789
iscsiadm -m discovery -t st -p $TGT_IP4:$TGT_PORT -I iser >/dev/null || die "discovery"
node() { iscsiadm -m node -T $TGT_IQN -p $TGT_IP4:$TGT_PORT -I iser "$@"; }
node -o update -n node.session.auth.authmethod -v CHAP
node -o update -n node.session.auth.username -v iser-rs-user
node -o update -n node.session.auth.password -v wrong-secret-000
node -o update -n node.session.initial_login_retry_max -v 1
if node --login >/dev/null 2>&1; then die "login with a wrong CHAP secret succeeded"; fi
node -o update -n node.session.auth.password -v secret-0123456789
node --login >/dev/null || die "CHAP login"
disk=$(wait_disks) || die "no disk after CHAP login"
fio_verify "$disk" --rw=randwrite --bs=4k --iodepth=4 --size=4M || die "verify after CHAP"
log "CHAP refused the wrong secret, accepted the right one; verify clean"
echo 0 > $CFG/target/iscsi/$TGT_IQN/tpgt_1/attrib/authentication
