#!/usr/bin/env python3
"""Instructions per I/O by layer, from the profiling pass of scripts/bench.

usage: bench-layers.py map KDIR > MAP
       bench-layers.py attribute MAP LAYERS_DIR > LAYERS_JSON

`map` lists, for the kernel built in KDIR, every text symbol of built-in
code with the object file that defines it (`nm` of the objects under
KDIR), one "symbol<TAB>object" per line. A kernel without its build tree
(Debian's) gives an empty map: its modules are still told apart by name.

`attribute` reads the folded stacks the guest wrote (LAYERS_DIR/
INI-POINT.folded: "COUNT WEIGHT dso<TAB>sym;dso<TAB>sym;...", leaf first;
scripts/bench-guest, profile_point, says how a sample is weighted) and
prints one JSON object: {INI: {POINT: {"ios": .., "samples": .., "idle": ..,
"layers": {LAYER: samples}, "weights": {LAYER: weight}, "top": {LAYER:
[[leaf symbol, weight], ...]}}}}. scripts/bench-report.py turns weights
into instructions per I/O.

The attribution rule (one rule for every initiator):
 1. A sample whose leaf frame is the idle loop (halted CPU), or that
    landed in the exit of an interrupt that woke the idle loop, is "idle";
    it and perf's own samples are left out of every share (the guest
    marks them: profile_point).
 2. Otherwise walk its frames from the leaf towards the root and charge
    the sample to the layer of the first frame that is not shared helper
    code. Helper code is the kernel's library and locking code and the
    Rust support code (objects under lib/, arch/x86/lib/, kernel/locking/
    and rust/): memcpy, memset, spinlocks, the string and CRC routines and
    the Rust kernel crate are charged to whoever called them. A sample
    whose every frame is a helper stays "helpers".
 3. A frame's layer: a loaded module by its name (LAYERS below); built-in
    code by the object file that defines the symbol (the first matching
    path prefix below); a user-space frame (a DSO that is not a kernel
    "[...]") is "user"; a symbol the map does not know, or one defined
    with the same name in objects of two layers (a static function), is
    "kernel".
The test kernel unwinds with UNWINDER_GUESS (every kernel text address
found on the stack, leaf first): the leaf is exact, and for a leaf in a
helper the next address is its caller's return address; deeper frames can
include stale addresses, which the rule never looks at once it has left the
helpers.
"""
import bisect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

# (layer, object path prefixes of built-in code, module names); the first
# match wins, so ib_isert goes to the target before drivers/infiniband/
# goes to rdma.
LAYERS = [
    ("initiator", ["drivers/infiniband/ulp/iser/", "drivers/scsi/iscsi_tcp.o",
                   "drivers/scsi/libiscsi_tcp.o"],
     ["iser_rs", "ib_iser", "iscsi_tcp", "libiscsi_tcp"]),
    ("libiscsi", ["drivers/scsi/libiscsi.o", "drivers/scsi/scsi_transport_iscsi.o"],
     ["libiscsi", "scsi_transport_iscsi"]),
    ("scsi_block", ["drivers/scsi/", "block/"], ["scsi_mod", "sd_mod", "sg"]),
    ("target", ["drivers/target/", "drivers/infiniband/ulp/isert/", "drivers/block/null_blk/"],
     ["target_core_mod", "iscsi_target_mod", "ib_isert", "null_blk", "target_core_iblock"]),
    ("rdma", ["drivers/infiniband/"],
     ["ib_core", "rdma_rxe", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "siw"]),
    ("net", ["net/", "drivers/net/"], ["veth"]),
    ("helpers", ["lib/", "arch/x86/lib/", "kernel/locking/", "rust/", "crypto/"], []),
]
# The order of the report's columns.
COLUMNS = ["initiator", "libiscsi", "scsi_block", "rdma", "target", "net", "kernel", "user",
           "helpers"]


def layer_of_object(path):
    for name, prefixes, _ in LAYERS:
        if any(path.startswith(p) for p in prefixes):
            return name
    return "kernel"


MODULE_LAYER = {m: name for name, _, mods in LAYERS for m in mods}


def build_map(kdir):
    kdir = Path(kdir)
    objs = []
    for root, _, files in os.walk(kdir):
        for f in files:
            if not f.endswith(".o") or f.endswith(".mod.o") or f == "vmlinux.o":
                continue
            rel = os.path.relpath(os.path.join(root, f), kdir)
            if rel.startswith((".tmp", "scripts/", "tools/", "usr/")):
                continue
            objs.append(rel)
    objs.sort()
    out = sys.stdout
    for k in range(0, len(objs), 400):
        batch = objs[k:k + 400]
        r = subprocess.run(["nm", "-A", "--defined-only"] + batch, cwd=kdir,
                           capture_output=True, text=True)
        for line in r.stdout.splitlines():
            # "path:addr type name" (a path never has a colon here)
            head, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                out.write(f"{parts[2]}\t{head}\n")
    return 0


def load_map(path):
    layers = {}
    for line in Path(path).read_text().splitlines():
        sym, _, obj = line.partition("\t")
        layers.setdefault(sym, set()).add(layer_of_object(obj))
    return {s: (next(iter(v)) if len(v) == 1 else "kernel") for s, v in layers.items()}


def frame_layer(dso, sym, symmap):
    # The kernel: "[kernel.kallsyms]", or the vmlinux perf found (the test
    # guest sees the build tree through /lib/modules/VERSION/build).
    if dso.startswith("[kernel") or dso.endswith("/vmlinux") or dso == "[unknown]":
        if dso == "[unknown]" or sym == "[unknown]":
            return "kernel"
        return symmap.get(sym, "kernel")
    # A module: "[name]", or its .ko file when perf found one.
    if dso.startswith("["):
        return MODULE_LAYER.get(dso[1:-1], "kernel")
    if dso.endswith(".ko") or ".ko." in dso:
        return MODULE_LAYER.get(os.path.basename(dso).split(".ko")[0].replace("-", "_"), "kernel")
    return "user"


def load_module_syms(layers_dir):
    """The modules' /proc/kallsyms lines the guest saved: {module: sorted
    [(address, symbol)]}, to name the "@ADDRESS" frames of a module perf
    had no symbols for."""
    mods = {}
    for f in Path(layers_dir).glob("kallsyms-*.txt"):
        rows = []
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[1] in "tT":
                rows.append((int(parts[0], 16), parts[2]))
        if rows:
            mods[f.stem.partition("-")[2]] = sorted(rows)
    return mods


def name_address(dso, sym, mods):
    rows = mods.get(dso.strip("[]"))
    if not sym.startswith("@") or not rows:
        return sym
    ip = int(sym[1:], 16)
    k = bisect.bisect_right(rows, (ip, "\uffff")) - 1
    return rows[k][1] if k >= 0 else sym


def attribute(mapfile, layers_dir):
    symmap = load_map(mapfile)
    mods = load_module_syms(layers_dir)
    res = {}
    for f in sorted(Path(layers_dir).glob("*.folded")):
        ini, _, point = f.stem.partition("-")
        lines = f.read_text().splitlines()
        m = re.match(r"# ios (\d+) samples (\d+)", lines[0]) if lines else None
        if not m:
            continue
        counts = {c: 0 for c in COLUMNS}
        weights = {c: 0.0 for c in COLUMNS}
        leafs = {c: {} for c in COLUMNS}
        idle = perf_self = 0
        for line in lines[1:]:
            if line.startswith("# idle"):
                idle = int(line.split()[2])
                continue
            if line.startswith("# perf"):
                perf_self = int(line.split()[2])
                continue
            parts = line.strip().split(" ", 2)
            if len(parts) < 3:
                continue
            n, wt, stack = int(parts[0]), float(parts[1]), parts[2]
            frames = [fr.partition("\t") for fr in stack.split(";")]
            frames = [(d, s) for d, _, s in frames]
            charged = "helpers"
            for d, s in frames:
                lay = frame_layer(d, s, symmap)
                if lay != "helpers":
                    charged = lay
                    break
            counts[charged] += n
            weights[charged] += wt
            leaf = name_address(frames[0][0], frames[0][1], mods)
            if leaf == "[unknown]":
                leaf = frames[0][0]
            leafs[charged][leaf] = leafs[charged].get(leaf, 0.0) + wt
        top = {c: [[k, round(v, 2)] for k, v in sorted(leafs[c].items(), key=lambda kv: -kv[1])[:8]]
               for c in COLUMNS}
        res.setdefault(ini, {})[point] = {"ios": int(m.group(1)), "samples": int(m.group(2)),
                                          "idle": idle, "perf": perf_self, "layers": counts, "weights": weights,
                                          "top": top}
    json.dump(res, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "map":
        return build_map(sys.argv[2])
    if len(sys.argv) == 4 and sys.argv[1] == "attribute":
        return attribute(sys.argv[2], sys.argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
