#!/usr/bin/env bash
# Only one "iser" transport at a time: with ib_iser loaded, insmod iser_rs
# fails (init returns EEXIST; 7.3 (Debian's) reports an init's EEXIST
# to userspace as EBUSY, keeping EEXIST for "module already loaded") with
# a clear message, and no kernel report (the runner checks the log).
. "$(dirname "$0")/../lib.sh"
load_initiator ib_iser
if insmod "${ISER_RS_KO:-$ISER_RS_REPO/iser_rs.ko}" 2>/tmp/insmod.err; then
    die "iser_rs loaded beside ib_iser"
fi
grep -qE "File exists|Device or resource busy" /tmp/insmod.err ||
    { cat /tmp/insmod.err; die "insmod did not fail with EEXIST (EBUSY on 7.3)"; }
dmesg | grep -q 'already registered (is ib_iser loaded' || die "no clear message in the kernel log"
rmmod ib_iser
load_initiator iser_rs
rmmod iser_rs
