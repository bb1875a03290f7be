#!/usr/bin/env python3
"""Exact kernel instructions per I/O from tools/insn-count's snapshots.

report.py OUTDIR [BASE_CFG]: for every run in OUTDIR/runs.txt, the
difference of the snapshots around its long fio run minus that around its
short one, by symbol (OUTDIR/kallsyms-CFG.txt), divided by the difference
of their I/O counts: the marginal cost of one I/O, without fio's start and
exit. Prints, per point, each configuration's
instructions per I/O: the whole kernel, the initiator module's own code
(every block whose address lies in a symbol of that module), and the
shared helpers an initiator calls (memcpy, memset); then the module's
heaviest symbols; then, against BASE_CFG (default the first), the
symbols whose count moved most. User space is not counted.
"""
import bisect
import collections
import re
import sys

HELPERS = ("memcpy", "__memcpy", "memcpy_orig", "memset", "__memset", "memset_orig", "memmove", "memmove_orig")


def short(name):
    """A readable form of a Rust v0 symbol: its last identifiers."""
    if not name.startswith("_R"):
        return name
    ids, i = [], 0
    for m in re.finditer(r"(\d+)", name):
        if m.start() < i:
            continue
        n, j = int(m.group(1)), m.end()
        if j < len(name) and name[j] == "_":
            j += 1
        s = name[j:j + n]
        if n and len(s) == n and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", s):
            ids.append(s)
            i = j + n
    keep = [x for x in ids if not x.startswith("Cs")]
    return "::".join(keep[-3:]) or name


def load_syms(path):
    syms = []
    for line in open(path):
        p = line.split()
        if len(p) < 3:
            continue
        mod = p[3].strip("[]") if len(p) > 3 else ""
        syms.append((int(p[0], 16), p[2], mod))
    syms.sort()
    return [s[0] for s in syms], syms


def load_snap(path):
    d = collections.Counter()
    for line in open(path):
        va, n, k = line.split()
        d[int(va, 16)] += int(n) * int(k)
    return d


def delta(outdir, tag, syms):
    addrs, table = syms
    pre = load_snap(f"{outdir}/snap-pre-{tag}.txt")
    post = load_snap(f"{outdir}/snap-post-{tag}.txt")
    by = collections.Counter()
    for va, n in post.items():
        d = n - pre.get(va, 0)
        if d <= 0:
            continue
        i = bisect.bisect_right(addrs, va) - 1
        if i < 0:
            by[("?", "")] += d
            continue
        _, name, mod = table[i]
        by[(name, mod)] += d
    return by


def per_symbol(outdir, tag, cfg):
    """Instructions by symbol of the long run minus the short one."""
    syms = load_syms(f"{outdir}/kallsyms-{cfg}.txt")
    long = delta(outdir, f"{tag}-long", syms)
    short = delta(outdir, f"{tag}-short", syms)
    long.subtract(short)
    return long


def main():
    outdir = sys.argv[1]
    runs = [l.split() for l in open(f"{outdir}/runs.txt") if l.strip()]
    cfgs = list(dict.fromkeys(r[0] for r in runs))
    base = sys.argv[2] if len(sys.argv) > 2 else cfgs[0]
    points = list(dict.fromkeys(tuple(r[2:5]) for r in runs))
    for pt in points:
        print(f"== {' '.join(pt)} (instructions per I/O)")
        print(f"{'config':<12}{'kernel':>10}{'module':>10}{'helpers':>10}{'module+helpers':>16}")
        res = {}
        for r in runs:
            if tuple(r[2:5]) != pt:
                continue
            # I/Os of the long run minus the short one's.
            cfg, mod, ios = r[0], r[1], int(r[6]) - int(r[5])
            tag = f"{cfg}-{'-'.join(pt)}"
            by = per_symbol(outdir, tag, cfg)
            tot = sum(by.values()) / ios
            own = sum(v for (n, m), v in by.items() if m == mod) / ios
            hlp = sum(v for (n, m), v in by.items() if n in HELPERS) / ios
            res[cfg] = (by, ios, mod)
            print(f"{cfg:<12}{tot:>10.0f}{own:>10.0f}{hlp:>10.0f}{own + hlp:>16.0f}   ({ios} I/Os)")
        for cfg, (by, ios, mod) in res.items():
            if mod != "iser_rs":
                continue
            top = sorted(((v, n) for (n, m), v in by.items() if m == mod), reverse=True)[:14]
            print(f"  {cfg}: heaviest module symbols")
            for v, n in top:
                print(f"    {v / ios:8.0f}  {short(n)}")
        if base in res:
            bb, bi, _ = res[base]
            for cfg, (by, ios, _) in res.items():
                if cfg == base:
                    continue
                keys = set(k for k in by) | set(k for k in bb)
                delta = sorted(((by.get(k, 0) / ios - bb.get(k, 0) / bi, k) for k in keys),
                               key=lambda x: -abs(x[0]))[:12]
                print(f"  {cfg} - {base}: largest moves")
                for d, (n, m) in delta:
                    print(f"    {d:+8.0f}  {short(n)} [{m}]")
        print()


if __name__ == "__main__":
    main()
