#!/usr/bin/env python3
"""Host-side report of scripts/bench.

usage: bench-report.py RAW OUTDIR [HOST_JSON [LAYERS_JSON]]

RAW is the guest's bench-raw.json (or, if the guest died early, the
partial bench-raw.jsonl). Prints per point the median [min-max] of IOPS,
p99 completion latency and CPU time per I/O for every initiator, the
ratios iser_rs/ib_iser and iser_rs/iscsi_tcp, and the raw null_blk
ceiling; writes OUTDIR/results.json and OUTDIR/results.png. HOST_JSON
(from scripts/bench) goes into the metadata: host CPUs, load, other VMs.
LAYERS_JSON (scripts/bench-layers.py attribute) adds, per profiled
initiator and point, the guest's instructions per I/O split by layer: a
layer's weighted samples over all weighted samples that are not idle, times
the whole guest's instructions per I/O (10^9 / the median IOPS of the measured runs,
under the instruction-count clock); under the wall clock only the shares.
Exits 1 when some (initiator, point) has no successful run.
"""
import json
import statistics
import sys
from pathlib import Path

INITIATORS = ["iser_rs", "ib_iser", "iscsi_tcp", "raw"]
LABEL = {"iser_rs": "iser_rs", "ib_iser": "ib_iser", "iscsi_tcp": "iscsi_tcp",
         "raw": "raw null_blk"}
COLOR = {"iser_rs": "#d9622b", "ib_iser": "#3b75af", "iscsi_tcp": "#519e3e",
         "raw": "#9a9a9a"}
METRICS = ["iops", "bw_bytes", "clat_p50_us", "clat_p99_us", "cpu_us_per_io"]
# (metric, heading, better-when ratio is)
SECTIONS = [
    ("iops", "IOPS", "higher"),
    ("clat_p99_us", "p99 completion latency (us)", "lower"),
    ("cpu_us_per_io", "guest CPU time per I/O (us; all CPUs: initiator + target + rxe)",
     "lower"),
]
RATIOS = [("iser_rs", "ib_iser"), ("iser_rs", "iscsi_tcp")]
# Colours of the layers the chart shows (scripts/bench-layers.py names
# them; the report takes their list and order from its output).
LAYER_COLOR = {"initiator": "#d9622b", "libiscsi": "#e8b04a", "scsi_block": "#8c6bb1",
               "rdma": "#3b75af", "target": "#519e3e", "net": "#7fc8c8", "kernel": "#9a9a9a",
               "user": "#d0d0d0", "helpers": "#f2f2f2"}


def load(path):
    text = Path(path).read_text()
    if path.endswith(".jsonl"):
        runs = [json.loads(line) for line in text.splitlines() if line.strip()]
        return {"meta": {"partial": True}, "errors": [], "kernel_reports": [], "runs": runs}
    return json.loads(text)


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values), "values": values}


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 100000:
        return f"{v / 1000:.0f}k"
    if a >= 10000:
        return f"{v / 1000:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def cell(s, failed=False):
    if failed:
        return "FAIL"
    if s is None:
        return "-"
    if s["n"] == 1:
        return fmt(s["median"])
    return f"{fmt(s['median'])} ({fmt(s['min'])}-{fmt(s['max'])})"


def main():
    if len(sys.argv) not in (3, 4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    raw = load(sys.argv[1])
    outdir = Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    meta = raw.get("meta", {})
    host = {}
    if len(sys.argv) > 3:
        host = json.loads(sys.argv[3])
        meta["host"] = host
    runs = raw["runs"]
    prof = json.loads(Path(sys.argv[4]).read_text()) if len(sys.argv) > 4 else {}
    # The layer columns, in scripts/bench-layers.py's order.
    layer_cols = next((list(d["weights"]) for per_point in prof.values()
                          for d in per_point.values()), [])

    # Points and initiators in the order the guest ran them.
    points = [p["name"] for p in meta.get("points", [])]
    for r in runs:
        if r["point"] not in points:
            points.append(r["point"])
    inits = [i for i in INITIATORS if any(r["initiator"] == i for r in runs)]
    inits += sorted({r["initiator"] for r in runs} - set(inits))

    results, failures, missing = {}, {}, []
    for p in points:
        results[p] = {}
        for i in inits:
            ok = [r for r in runs if r["point"] == p and r["initiator"] == i
                  and not r.get("failed") and not r.get("error")]
            bad = [r for r in runs if r["point"] == p and r["initiator"] == i
                   and (r.get("failed") or r.get("error"))]
            if bad:
                failures[f"{i}/{p}"] = len(bad)
            if not ok:
                results[p][i] = None
                missing.append(f"{i}/{p}")
                continue
            results[p][i] = {m: stats([r.get(m) for r in ok]) for m in METRICS}
            results[p][i]["cpu_util"] = stats([r.get("cpu_util") for r in ok])

    def med(p, i, m):
        c = results[p].get(i)
        if not c or not c.get(m):
            return None
        return c[m]["median"]

    ratios = {}
    for p in points:
        ratios[p] = {}
        for a, b in RATIOS + [("iser_rs", "raw")]:
            d = {}
            for m, _, _ in SECTIONS:
                va, vb = med(p, a, m), med(p, b, m)
                d[m] = va / vb if va is not None and vb else None
            ratios[p][f"{a}/{b}"] = d

    # --- layers (profiling pass) ---------------------------------------------
    icount_clock = host.get("clock") == "icount"
    layers = {}
    for i, per_point in prof.items():
        for p, d in per_point.items():
            busy = sum(d["weights"].values())
            iops = med(p, i, "iops")
            if not busy:
                continue
            whole = 1e9 / iops if icount_clock and iops else None
            share = {k: d["weights"].get(k, 0) / busy for k in layer_cols}
            layers.setdefault(p, {})[i] = {
                "samples": d["layers"], "weights": d["weights"], "top": d.get("top", {}),
                "ios_in_window": d["ios"],
                "idle_share": d.get("idle", 0) / max(1, d["samples"]),
                "share": share,
                "whole_instr_per_io": whole,
                "instr_per_io": ({k: v * whole for k, v in share.items()} if whole else None)}
    layer_ratios = {}
    for p, d in layers.items():
        a, b = d.get("iser_rs"), d.get("ib_iser")
        if a and b and a["instr_per_io"] and b["instr_per_io"]:
            layer_ratios[p] = {"iser_rs/ib_iser": {
                k: (a["instr_per_io"][k] / b["instr_per_io"][k] if b["instr_per_io"][k] else None)
                for k in layer_cols}}
            layer_ratios[p]["iser_rs/ib_iser"]["whole"] = a["whole_instr_per_io"] / b["whole_instr_per_io"]

    # --- table ----------------------------------------------------------------
    w = max([len(p) for p in points] + [5]) + 2
    cells = {p: {i: {m: cell(results[p][i][m] if results[p][i] else None, not results[p][i])
                     for m, _, _ in SECTIONS} for i in inits} for p in points}
    cw = max([len(LABEL.get(i, i)) for i in inits] +
             [len(cells[p][i][m]) for p in points for i in inits for m, _, _ in SECTIONS]) + 2
    rcols = [f"{a}/{b}" for a, b in RATIOS if a in inits and b in inits]
    print()
    print(f"iser-rs bench: kernel {meta.get('kernel', '?')}, {meta.get('cpus', '?')} vCPUs (QEMU/TCG), "
          f"{meta.get('runtime_s', '?')} s runs + {meta.get('ramp_s', '?')} s ramp, "
          f"{meta.get('reps', '?')} rep(s), {meta.get('ioengine', 'libaio')}, direct=1"
          + (" [QUICK]" if meta.get("quick") else "") + (" [PARTIAL]" if meta.get("partial") else ""))
    for link in meta.get("links", []):
        print(f"link setting: {link} (points named NAME-mtuM ran at veth MTU M)")
    if host.get("git"):
        print(f"module: git {host['git']}, iser_rs.ko sha256 {host.get('iser_rs_ko_sha256', '?')}...")
    if host.get("clock") == "icount":
        print("clock: QEMU -icount shift=0,sleep=off: a guest second is 10^9 emulated instructions, "
              "so IOPS are I/Os per 10^9 instructions of the whole guest (CPU cost, not user-visible speed)")
    print("cells: median (min-max) over the reps; ratios of medians")
    if host.get("other_vms_max", 0) > 0:
        print(f"WARNING: {host['other_vms_max']} other QEMU VM(s) ran on the host during the bench: "
              "the numbers are noisy")
    for m, head, better in SECTIONS:
        print()
        print(f"== {head}; ratio {better} is better")
        print("point".ljust(w) + "".join(LABEL.get(i, i).rjust(cw) for i in inits)
              + "".join(c.rjust(19) for c in rcols))
        for p in points:
            line = p.ljust(w) + "".join(cells[p][i][m].rjust(cw) for i in inits)
            for a, b in RATIOS:
                if a in inits and b in inits:
                    v = ratios[p][f"{a}/{b}"][m]
                    line += (f"{v:.2f}x" if v is not None else "-").rjust(19)
            print(line)
    if "raw" in inits and "iser_rs" in inits:
        print()
        print("iser_rs IOPS as a share of the raw null_blk ceiling: " + ", ".join(
            f"{p} {ratios[p]['iser_rs/raw']['iops'] * 100:.0f}%"
            for p in points if ratios[p]["iser_rs/raw"]["iops"] is not None))
    if layers:
        unit = "instructions per I/O" if icount_clock else "% of busy samples"
        print()
        print(f"== {unit} by layer (profiling pass: perf cpu-clock samples, charged by the rule in "
              "scripts/bench-layers.py; whole = 10^9 / median IOPS)")
        print("point".ljust(w) + "initiator".rjust(10) + "whole".rjust(8)
              + "".join(c[:10].rjust(11) for c in layer_cols) + "   idle  ini samples (1 sigma)")
        for p in points:
            for i in inits:
                d = layers.get(p, {}).get(i)
                if not d:
                    continue
                vals = d["instr_per_io"] or {k: 100 * v for k, v in d["share"].items()}
                n_ini = d["samples"].get("initiator", 0)
                sigma = f"+-{100 / n_ini ** 0.5:.1f}%" if n_ini else "-"
                print(p.ljust(w) + i.rjust(10)
                      + (f"{d['whole_instr_per_io']:8.0f}" if d["whole_instr_per_io"] else "-".rjust(8))
                      + "".join(f"{vals[k]:11.0f}" for k in layer_cols)
                      + f"{100 * d['idle_share']:6.1f}%{n_ini:9d} ({sigma})")
            for i in inits:
                d = layers.get(p, {}).get(i)
                if not d or not d.get("top", {}).get("initiator") or not d["instr_per_io"]:
                    continue
                # The initiator layer's heaviest leaf symbols, in
                # instructions per I/O (a helper's leaf is charged to its
                # caller's layer, so memcpy can appear here).
                per = d["instr_per_io"]["initiator"] / max(1e-9, d["weights"]["initiator"])
                print(" " * w + f"{i} leaves: " + ", ".join(
                    f"{name[:48]} {wt * per:.0f}" for name, wt in d["top"]["initiator"][:5]))
            r = layer_ratios.get(p, {}).get("iser_rs/ib_iser")
            if r:
                print(p.ljust(w) + "ratio".rjust(10) + f"{r['whole']:7.3f}x"
                      + "".join((f"{r[k]:10.2f}x" if r[k] is not None else "-".rjust(11))
                                for k in layer_cols))
    if failures:
        print()
        print("failed runs: " + ", ".join(f"{k} x{v}" for k, v in failures.items()))
    for e in raw.get("errors", []):
        print(f"guest error: {e}")
    for e in raw.get("warnings", []):
        print(f"guest warning: {e}")
    for k in raw.get("kernel_reports", []):
        print(f"KERNEL REPORT: {k}")
    events = raw.get("events", [])
    if events:
        print()
        print("kernel log events during the runs (connection errors, recoveries):")
        for e in events:
            print(f"  round {e['round']} {e['initiator']} ({e.get('phase', '?')}): {e['line']}")

    # --- results.json -----------------------------------------------------------
    doc = {
        "meta": meta,
        "initiators": inits,
        "points": meta.get("points") or [{"name": p} for p in points],
        "units": {"iops": "I/O per second", "bw_bytes": "bytes per second",
                  "clat_p50_us": "microseconds", "clat_p99_us": "microseconds",
                  "cpu_us_per_io": "microseconds of guest CPU (all CPUs) per I/O",
                  "cpu_util": "busy fraction of all guest CPUs"},
        "results": results,
        "ratios": ratios,
        "failed_runs": failures,
        "errors": raw.get("errors", []),
        "warnings": raw.get("warnings", []),
        "kernel_reports": raw.get("kernel_reports", []),
        "events": raw.get("events", []),
        "layers": layers,
        "layer_ratios": layer_ratios,
        "layer_rule": "scripts/bench-layers.py: a sample goes to the layer of its first frame, "
                      "leaf first, outside lib/, arch/x86/lib/, kernel/locking/, crypto/ and "
                      "rust/; idle samples are left out; a busy sample weighs 1 / the busy "
                      "samples of its millisecond; instr_per_io = weighted share x "
                      "whole_instr_per_io (10^9 / median IOPS, instruction-count clock)",
        "runs": runs,
    }
    (outdir / "results.json").write_text(json.dumps(doc, indent=1) + "\n")

    # --- chart ------------------------------------------------------------------
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import FuncFormatter

    def human(v, _pos=None):
        if v >= 1000000:
            return f"{v / 1000000:g}M"
        if v >= 1000:
            return f"{v / 1000:g}k"
        return f"{v:g}"

    # (metric, axis label, log scale allowed, value labels on the bars)
    panels = [("iops", "IOPS (median)", True, True),
              ("clat_p99_us", "p99 completion latency, us", True, False),
              ("cpu_us_per_io", "guest CPU per I/O, us", True, False)]
    npanels = len(panels) + (1 if layers else 0)
    fig, axes = plt.subplots(npanels, 1, sharex=True,
                             figsize=(max(7.5, 2.0 + 0.9 * len(points)), 11.5 + (3.5 if layers else 0)))
    width = 0.8 / len(inits)
    xs = range(len(points))
    for ax, (m, ylabel, log, labels) in zip(axes, panels):
        for k, i in enumerate(inits):
            meds, lo, hi, pos = [], [], [], []
            for x, p in zip(xs, points):
                s = results[p][i][m] if results[p][i] else None
                if s is None:
                    continue
                pos.append(x - 0.4 + width * (k + 0.5))
                meds.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
            bars = ax.bar(pos, meds, width, yerr=[lo, hi], capsize=2, label=LABEL.get(i, i),
                          color=COLOR.get(i), edgecolor="black", linewidth=0.4,
                          error_kw={"elinewidth": 0.8})
            if labels:
                ax.bar_label(bars, labels=[human(float(f"{v:.3g}")) for v in meds],
                             fontsize=6, rotation=90, padding=2)
        vals = [results[p][i][m]["median"] for p in points for i in inits
                if results[p][i] and results[p][i][m] and results[p][i][m]["median"] > 0]
        if log and vals and max(vals) / min(vals) > 20:
            ax.set_yscale("log")
            ax.set_ylabel(ylabel + " (log)")
            top = max(vals) * (4 if labels else 2)
            ax.set_ylim(min(vals) / 2, top)
        else:
            ax.set_ylabel(ylabel)
            if vals:
                ax.set_ylim(0, max(vals) * (1.25 if labels else 1.1))
        ax.yaxis.set_major_formatter(FuncFormatter(human))
        ax.grid(axis="y", which="major", alpha=0.35)
        ax.grid(axis="y", which="minor", alpha=0.12)
    if layers:
        # The initiator side, stacked (the initiator's module, libiscsi,
        # SCSI/block), each profiled initiator's bar at its place in the
        # panels above, labelled with the module's own figure; the whole
        # split is in the table and results.json.
        ax = axes[-1]
        side = ["initiator", "libiscsi", "scsi_block"]
        top = 0.0
        for k, i in enumerate(inits):
            rows = [(x, layers.get(p, {}).get(i)) for x, p in zip(xs, points)]
            rows = [(x, d) for x, d in rows if d]
            if not rows:
                continue
            pos = [x - 0.4 + width * (k + 0.5) for x, _ in rows]
            base = [0.0] * len(rows)
            for lay in side:
                vals = [(d["instr_per_io"] or {q: 100 * v for q, v in d["share"].items()})[lay]
                        for _, d in rows]
                bars = ax.bar(pos, vals, width, bottom=base, color=LAYER_COLOR[lay],
                              edgecolor=COLOR.get(i, "black"), linewidth=0.8,
                              label=lay if k == 0 else None)
                if lay == "initiator":
                    ax.bar_label(bars, labels=[f"{v:.0f}" for v in vals], label_type="center",
                                 fontsize=6, rotation=90)
                base = [b + v for b, v in zip(base, vals)]
            top = max([top] + base)
        ax.set_ylabel(("instructions per I/O" if icount_clock else "% of busy samples")
                      + "\ninitiator side, by layer")
        ax.set_ylim(0, top * 1.3 if top else 1)
        ax.yaxis.set_major_formatter(FuncFormatter(human))
        ax.grid(axis="y", alpha=0.35)
        ax.legend(ncol=3, fontsize=7, loc="upper left")
    axes[-1].set_xticks(list(xs))
    axes[-1].set_xticklabels(points, rotation=35, ha="right", fontsize=8)
    handles, names = axes[0].get_legend_handles_labels()
    icount = host.get("clock") == "icount"  # a third title line
    fig.legend(handles, names, ncol=len(inits), fontsize=8, loc="upper center",
               bbox_to_anchor=(0.5, 0.94 if icount else 0.955), frameon=False)
    reps_s = f"{meta.get('reps', '?')} rep(s) x {meta.get('runtime_s', '?')} s"
    fig.suptitle(
        "iser-rs fio benchmark" + (" (QUICK)" if meta.get("quick") else "") + "\n"
        f"QEMU/TCG {meta.get('cpus', '?')} vCPUs, rxe on veth, LIO on null_blk, "
        f"kernel {meta.get('kernel', '?')}; {reps_s}; bars: median, whiskers: min/max"
        + ("\nclock: instruction count (-icount): IOPS = I/Os per 10^9 guest instructions"
           if host.get("clock") == "icount" else ""),
        fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.925 if icount else 0.94))
    fig.savefig(outdir / "results.png", dpi=120)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
