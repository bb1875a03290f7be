#!/usr/bin/env bash
# Only one "iser" transport at a time: with ib_iser loaded, insmod iser_rs
# fails with EEXIST and a clear message, and no kernel report (the runner
# checks the log).
. "$(dirname "$0")/../lib.sh"
load_initiator ib_iser
if insmod "$ISER_RS_REPO/iser_rs.ko" 2>/tmp/insmod.err; then
    die "iser_rs loaded beside ib_iser"
fi
grep -q "File exists" /tmp/insmod.err || { cat /tmp/insmod.err; die "insmod did not fail with EEXIST"; }
dmesg | grep -q 'already registered (is ib_iser loaded' || die "no clear message in the kernel log"
rmmod ib_iser
load_initiator iser_rs
rmmod iser_rs
