#!/usr/bin/env python3
"""Module instructions per I/O by function and source line, from insn-count.

lines.py OUTDIR CFG RW QD KO [N]: for the run of configuration CFG at point
RW 4k QD (OUTDIR/runs.txt), the module's instructions per I/O (long run
minus short run over the difference of their I/O counts, as report.py
computes them), by translation block, attributed to the innermost frame
of the module's own code (library frames of core/alloc skipped) with
addr2line. KO is the module that ran, built with line tables, which
leaves the code as it was (only the panic locations' lengths differ):

    make modules KRUSTFLAGS=-Cdebuginfo=line-tables-only KCFLAGS=-g

then run it as `INSN_CFGS="NAME@/path/iser_rs.ko ..." tools/insn-count/run`.
Prints the N (default 40) heaviest functions, then the N heaviest lines.
A block is attributed whole to the location of its first instruction.
"""
import collections
import re
import subprocess
import sys


from report import load_snap


def diff(outdir, tag):
    pre = load_snap(f"{outdir}/snap-pre-{tag}.txt")
    post = load_snap(f"{outdir}/snap-post-{tag}.txt")
    return collections.Counter({a: post[a] - pre.get(a, 0) for a in post})


def main():
    outdir, cfg, rw, qd, ko = sys.argv[1:6]
    top = int(sys.argv[6]) if len(sys.argv) > 6 else 40
    tag = f"{cfg}-{rw}-4k-{qd}"
    n_short = n_long = None
    for line in open(f"{outdir}/runs.txt"):
        p = line.split()
        if p[0] == cfg and p[2] == rw and p[3] == "4k" and p[4] == qd:
            n_short, n_long = int(p[5]), int(p[6])
    if n_long is None:
        sys.exit(f"no run {tag} in {outdir}/runs.txt")
    mod = subprocess.run(["modinfo", "-F", "name", ko], capture_output=True, text=True).stdout.strip() or "iser_rs"
    syms = []
    for line in open(f"{outdir}/kallsyms-{cfg}.txt"):
        p = line.split()
        if len(p) >= 4 and p[3] == f"[{mod}]" and p[1] in "tT":
            syms.append((int(p[0], 16), p[2]))
    syms.sort()
    if not syms:
        sys.exit(f"no symbols of {mod} in kallsyms-{cfg}.txt")
    nm = {}
    for line in subprocess.run(["nm", ko], capture_output=True, text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tT":
            nm[p[2]] = int(p[0], 16)
    # .text's load address: the one most symbols agree on.
    base = collections.Counter(a - nm[s] for a, s in syms if s in nm).most_common(1)[0][0]
    lo, hi = syms[0][0], syms[-1][0] + 0x4000
    long_run, short_run = diff(outdir, f"{tag}-long"), diff(outdir, f"{tag}-short")
    per = {}
    for a in set(long_run) | set(short_run):
        if lo <= a < hi:
            per[a] = (long_run[a] - short_run[a]) / (n_long - n_short)
    addrs = sorted(a for a in per if per[a] > 0.05)
    out = subprocess.run(["addr2line", "-e", ko, "-j", ".text", "-f", "-i", "-C", "-a"],
                         input="\n".join(hex(a - base) for a in addrs),
                         capture_output=True, text=True).stdout.splitlines()
    frames, cur, i = collections.defaultdict(list), None, 0
    while i < len(out):
        if out[i].startswith("0x"):
            cur = int(out[i], 16) + base
            i += 1
            continue
        frames[cur].append((out[i], out[i + 1] if i + 1 < len(out) else "?"))
        i += 2
    by_fn, by_line = collections.Counter(), collections.Counter()
    for a in addrs:
        chain = frames.get(a) or [("?", "?")]
        own = [f for f in chain if "/library/" not in f[1]] or chain
        fn, loc = own[0]
        fn = re.sub(r"\(.*", "", fn)
        loc = re.sub(r".*/(rust/|proto/)", r"\1", loc).split(" ")[0]
        by_fn[fn[-80:]] += per[a]
        by_line[f"{loc}  {fn[-50:]}"] += per[a]
    print(f"{tag}: module instructions per I/O {sum(per.values()):.0f}")
    print("-- by function (innermost own frame)")
    for k, v in by_fn.most_common(top):
        print(f"{v:8.1f}  {k}")
    print("-- by line")
    for k, v in by_line.most_common(top):
        print(f"{v:8.1f}  {k}")


main()
