#!/usr/bin/env bash
# fio crc32c verify through iser_rs across block sizes from 512 B to 1 MiB,
# including sizes that are not powers of two or page multiples, at iodepth
# 1 and 32, and a random read/write mix.
. "$(dirname "$0")/../lib.sh"
setup_rdma rxe
setup_target 1
start_iscsid
load_initiator iser_rs
disk=$(login iser | head -1); [ -n "$disk" ] || die "login through iser_rs"
# Small blocks over a small area (TCG is slow), large ones over more.
for bs in 512 1536 4k 7680 8k 36352 64k 128k 260k 512k 1m; do
    case $bs in 512|1536|4k|7680|8k) size=1M ;; 36352|64k|128k) size=4M ;; *) size=8M ;; esac
    for qd in 1 32; do
        fio_verify "$disk" --rw=randwrite --bs=$bs --iodepth=$qd --size=$size ||
            die "verify bs=$bs iodepth=$qd"
    done
done
log "randwrite verify: 11 block sizes x iodepth 1,32 clean"
fio_verify "$disk" --rw=randrw --rwmixread=50 --bsrange=512-256k --bs_unaligned=0 --iodepth=32 --size=8M ||
    die "randrw mixed sizes"
log "randrw mix 512-256k iodepth 32 clean"
# Write one pattern with dd, read it back by another path, compare.
head -c $((24 * 1024 * 1024)) /dev/urandom > /tmp/pattern
dd if=/tmp/pattern of="$disk" bs=1M oflag=direct status=none || die "dd write"
dd if="$disk" of=/tmp/readback bs=256k count=96 iflag=direct status=none || die "dd read"
cmp /tmp/pattern /tmp/readback || die "read-back differs"
log "dd 24 MiB write + read-back: identical"
iscsiadm -m session -s | grep -E "err_|deferred|invalidations" | sed 's/^/# /'
