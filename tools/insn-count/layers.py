#!/usr/bin/env python3
"""Exact kernel instructions per I/O by layer, from one insn-count run.

layers.py OUTDIR KDIR: for every configuration and point of the run in
OUTDIR (runs.txt), the long run's instructions minus the short run's,
over the difference of their I/O counts (as report.py computes them),
split into the layers of `make bench`'s profiling pass
(scripts/bench-layers.py: the initiator's module, libiscsi, SCSI/block,
rdma, the target, the network, the rest of the kernel, and helpers).
KDIR is the kernel build tree the run booted (its objects tell which
layer a built-in symbol belongs to; `bench-layers.py map`).

One rule, the leaf rule: an instruction counts for the layer of the
symbol it executed in. Unlike the profiling pass, which walks a sample's
stack to charge library code (memcpy, spinlocks, CRC32) to its caller,
the plugin sees no stacks: "helpers" is that library code whoever called
it. iser_rs inlines its copies (its `memcpy`/`memset` are about 0 per
I/O, report.py's `helpers` column), so the initiator's column is its own
cost whole. User space is not counted (the plugin counts kernel
addresses only). Prints a Markdown table.
"""
import collections
import importlib.util
import subprocess
import sys
from pathlib import Path

from report import per_symbol

HERE = Path(__file__).resolve().parent
SPEC = importlib.util.spec_from_file_location(
    "bench_layers", HERE.parent.parent / "scripts" / "bench-layers.py")
bench_layers = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench_layers)

COLUMNS = ["initiator", "libiscsi", "scsi_block", "rdma", "target", "net", "kernel",
           "helpers"]
NAMES = {"rs": "iser_rs", "ib": "ib_iser"}


def main():
    outdir, kdir = sys.argv[1], sys.argv[2]
    mapfile = Path(outdir) / "symmap.txt"
    if not mapfile.exists():
        with open(mapfile, "w") as f:
            subprocess.run([sys.executable, str(HERE.parent.parent / "scripts" / "bench-layers.py"),
                            "map", kdir], stdout=f, check=True)
    symmap = bench_layers.load_map(mapfile)
    print("| point | configuration | " + " | ".join(COLUMNS) + " | whole kernel |")
    print("|---|---|" + "---|" * (len(COLUMNS) + 1))
    runs = [l.split() for l in open(f"{outdir}/runs.txt") if l.strip()]
    for r in sorted(runs, key=lambda r: (r[2:5], r[0])):
        cfg, point, ios = r[0], "-".join(r[2:5]), int(r[6]) - int(r[5])
        by = per_symbol(outdir, f"{cfg}-{point}", cfg)
        layer = collections.Counter()
        for (name, mod), n in by.items():
            if mod:
                # A module: by its name; an iser_rs build under another
                # configuration name is still the initiator.
                layer[bench_layers.MODULE_LAYER.get(mod, "kernel")] += n
            else:
                layer[symmap.get(name, "kernel")] += n
        cells = " | ".join(f"{layer[c] / ios:.0f}" for c in COLUMNS)
        print(f"| {point} | {NAMES.get(cfg, cfg)} | {cells} | {sum(layer.values()) / ios:.0f} |")


if __name__ == "__main__":
    main()
