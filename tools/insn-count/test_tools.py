#!/usr/bin/env python3
"""Host test of the insn-count scripts' arithmetic on a made-up run.

Two configurations, one point; every number below is worked by hand from
the snapshots written here. Run by `make check` (host step
"tools/insn-count"); exits non-zero on the first wrong figure.
"""
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # nothing left in the tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import symdiff  # noqa: E402

# Symbols: two built-in, one module function. A block at 0x1010 lies in
# `sched`, at 0x2010 in `copy`, at 0x3010 in the module's `xmit`.
KALLSYMS = """ffffffff00001000 T sched
ffffffff00002000 T copy
ffffffff00003000 t xmit\t[mod]
"""


def snap(counts):
    """A snapshot: address, executions, instructions per block."""
    return "".join(f"{va:x} {n} {k}\n" for va, (n, k) in counts.items())


def write_run(d, cfg, pre_short, post_short, pre_long, post_long):
    (d / f"kallsyms-{cfg}.txt").write_text(KALLSYMS)
    for name, counts in (("pre", pre_short), ("post", post_short)):
        (d / f"snap-{name}-{cfg}-randwrite-4k-32-short.txt").write_text(snap(counts))
    for name, counts in (("pre", pre_long), ("post", post_long)):
        (d / f"snap-{name}-{cfg}-randwrite-4k-32-long.txt").write_text(snap(counts))


S, C, X = 0xffffffff00001010, 0xffffffff00002010, 0xffffffff00003010


def main():
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        # a: short run 100 I/Os, long run 300: 200 marginal I/Os.
        # sched: short +10 blocks of 5, long +50 of 5 -> (250-50)/200 = 1.0
        # copy: short +0, long +400 blocks of 2 -> 800/200 = 4.0
        # xmit: short +100 of 10, long +300 of 10 -> 2000/200 = 10.0
        write_run(d, "a",
                  {S: (0, 5), C: (7, 2), X: (0, 10)},
                  {S: (10, 5), C: (7, 2), X: (100, 10)},
                  {S: (10, 5), C: (7, 2), X: (100, 10)},
                  {S: (60, 5), C: (407, 2), X: (400, 10)})
        # b: 100 marginal I/Os. sched 300/100 = 3.0, copy 400/100 = 4.0,
        # xmit 500/100 = 5.0.
        write_run(d, "b",
                  {S: (0, 5), C: (0, 2), X: (0, 10)},
                  {S: (0, 5), C: (0, 2), X: (0, 10)},
                  {S: (0, 5), C: (0, 2), X: (0, 10)},
                  {S: (60, 5), C: (200, 2), X: (50, 10)})
        (d / "runs.txt").write_text("a x randwrite 4k 32 100 300\nb x randwrite 4k 32 0 100\n")
        a = symdiff.per_io(t, "a", ("randwrite", "4k", "32"))
        b = symdiff.per_io(t, "b", ("randwrite", "4k", "32"))
        want_a = {("sched", ""): 1.0, ("copy", ""): 4.0, ("xmit", "mod"): 10.0}
        want_b = {("sched", ""): 3.0, ("copy", ""): 4.0, ("xmit", "mod"): 5.0}
        for got, want, cfg in ((a, want_a, "a"), (b, want_b, "b")):
            for k, v in want.items():
                if abs(got.get(k, 0.0) - v) > 1e-9:
                    raise SystemExit(f"per_io {cfg} {k}: {got.get(k)} != {v}")
        moves = symdiff.builtin_moves(a, b, 10)
        # The module's symbol is left out; copy did not move.
        if [(m[1], m[0]) for m in moves] != [("sched", -2.0), ("copy", 0.0)]:
            raise SystemExit(f"builtin_moves: {moves}")
    print("insn-count scripts: per-I/O arithmetic and symbol moves as worked by hand")


if __name__ == "__main__":
    main()
