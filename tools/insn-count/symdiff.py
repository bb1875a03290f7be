#!/usr/bin/env python3
"""Where two configurations of one insn-count run differ, symbol by symbol.

symdiff.py OUTDIR CFG_A CFG_B RW QD [N] [KDIR]: for point RW 4k QD of
the run in OUTDIR (runs.txt), each kernel symbol's instructions per I/O
under CFG_A and CFG_B (the long run minus the short run over the
difference of their I/O counts, as report.py computes them), and the N
(default 30) symbols outside any module whose counts differ most, A
minus B. With KDIR (the kernel tree the run booted) each line also names
the symbol's layer by layers.py's rule (`scripts/bench-layers.py map`).

It answers what layers.py's table leaves open: whether a difference in
the built-in kernel's columns is work one initiator causes (the copies
of its Sends, a lock it takes) or timing (the scheduler, timers and
workqueues running more often per I/O when completions come in another
order). Modules are left out: report.py lists their symbols.
"""
import sys
from pathlib import Path

from report import per_symbol


def per_io(outdir, cfg, point):
    """{(symbol, module): instructions per I/O} of CFG at POINT."""
    for line in open(f"{outdir}/runs.txt"):
        r = line.split()
        if r and r[0] == cfg and r[2:5] == list(point):
            ios = int(r[6]) - int(r[5])
            by = per_symbol(outdir, f"{cfg}-{'-'.join(point)}", cfg)
            return {k: v / ios for k, v in by.items()}
    raise SystemExit(f"no run of {cfg} at {' '.join(point)} in {outdir}/runs.txt")


def builtin_moves(a, b, n):
    """The N built-in symbols whose per-I/O counts differ most, A - B."""
    keys = {k for k in a.keys() | b.keys() if not k[1]}
    moves = [(a.get(k, 0.0) - b.get(k, 0.0), k[0], a.get(k, 0.0), b.get(k, 0.0)) for k in keys]
    moves.sort(key=lambda m: (-abs(m[0]), m[1]))
    return moves[:n]


def main():
    if len(sys.argv) < 6:
        raise SystemExit(__doc__)
    outdir, cfg_a, cfg_b, rw, qd = sys.argv[1:6]
    n = int(sys.argv[6]) if len(sys.argv) > 6 else 30
    symmap = {}
    if len(sys.argv) > 7:
        import layers
        mapfile = Path(outdir) / "symmap.txt"
        if not mapfile.exists():
            import subprocess
            with open(mapfile, "w") as f:
                subprocess.run([sys.executable, str(layers.HERE.parent.parent / "scripts" /
                                                    "bench-layers.py"), "map", sys.argv[7]],
                               stdout=f, check=True)
        symmap = layers.bench_layers.load_map(mapfile)
    point = (rw, "4k", qd)
    a, b = per_io(outdir, cfg_a, point), per_io(outdir, cfg_b, point)
    whole_a, whole_b = sum(a.values()), sum(b.values())
    mods_a = sum(v for k, v in a.items() if k[1])
    mods_b = sum(v for k, v in b.items() if k[1])
    print(f"{rw} 4k QD{qd}: whole kernel {whole_a:.0f} ({cfg_a}) - {whole_b:.0f} ({cfg_b}) = "
          f"{whole_a - whole_b:+.0f}; modules {mods_a - mods_b:+.0f}, built-in "
          f"{(whole_a - mods_a) - (whole_b - mods_b):+.0f}")
    print(f"{'A - B':>8} {cfg_a:>9} {cfg_b:>9}  symbol")
    for d, name, va, vb in builtin_moves(a, b, n):
        layer = f"  [{symmap.get(name, 'kernel')}]" if symmap else ""
        print(f"{d:+8.1f} {va:9.1f} {vb:9.1f}  {name}{layer}")


if __name__ == "__main__":
    main()
