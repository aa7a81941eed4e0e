#!/usr/bin/env python3
"""Each op type of a measured profile against the device's roofline: where the step's time goes, and which of our
kernels are far from the memory bandwidth they need.

For every node of a profile (monet-profile -o; docs/formats.md, "Profile") the bytes it moves are the bytes of the
values its implementation reads and writes (inputs + outputs, from the profile's `values`; SgdUpdate and
BatchNormalization also write inputs in place: the parameter and momentum, the running statistics; an output that no
node's default implementation reads is not counted: the engine leaves such optional outputs unwritten in a store-all
step, e.g. ReLU's mask, MaxPool's argmax, the attention's probabilities), its FLOPs are the profile's `flops`, and its roofline time is max(bytes / bandwidth, FLOPs / peak). Per op type (and per non-default
implementation and lean run, listed apart: they are not in the store-all step's total) the table gives the nodes' total time,
bytes, FLOPs, roofline time, the achieved bandwidth (bytes / time) and the fractions of the bandwidth and of the
roofline reached.

Library calls (cuDNN convolutions and batch norm, cuBLAS GEMMs: lib/engine/cuda/cuda_conv.cpp, cuda_gemm.cpp,
cuda_norm_pool.cpp) are told apart from our kernels. Flagged: every call of one of our kernels that moves at least
--flag-mb MB (default 64) and reaches less than --flag-fraction (default 0.5) of the bandwidth, unless its FLOPs make
it compute-bound and it reaches that fraction of the roofline.

The device's figures come from the profile: a cuda profile names its GPU (H200: 4800 GB/s, H100 SXM: 3350 GB/s,
nominal; fp32 without tensor cores 66.9 TFLOPS; cuDNN convolutions under --math default may use TF32 tensor cores,
494.7 TFLOPS dense); an estimated profile records its roofline. --bandwidth / --tflops / --tf32-tflops override them
(a cpu profile needs --bandwidth and --tflops).

Usage: scripts/bench_roofline.py PROFILE.json [PROFILE.json ...] [--bandwidth GB/s] [--tflops T] [--json OUT.json]
       [--flag-mb 64] [--flag-fraction 0.5] [--top 25] [--library OP,...]
Markdown to stdout; --json writes the same figures (one entry per profile). Runs anywhere (no GPU, no torch).
"""
import argparse
import json
import os
import signal
import sys

# Ops that run library code on the CUDA engine (lib/engine/cuda): every other op is one of our kernels.
CUDNN_CONV = {"Conv", "ConvGradData", "ConvGradWeight", "ConvTranspose", "ConvTransposeGradData",
              "ConvTransposeGradWeight"}
# The fused loss head: its products on cuBLAS are most of its time and bytes.
CUBLAS = {"Gemm", "GemmGradA", "GemmGradB", "MatMul", "MatMulGradA", "MatMulGradB", "LinearCrossEntropy",
          "LinearCrossEntropyGrad"}
# BatchNormalization on cuDNN (its one implementation, "default" where the profile lists its algorithm variants);
# BatchNormGrad's input-activated implementation (its default) on cuDNN, the output-activated one ours; their
# algorithm variant "ours" (our kernels) is ours.
CUDNN_OTHER = {("BatchNormalization", None), ("BatchNormalization", "default"), ("BatchNormGrad", "input"),
               ("BatchNormGrad", None)}

# Inputs a node writes in place besides its outputs (counted once more, as written).
WRITES_INPUTS = {"SgdUpdate": (0, 2), "BatchNormalization": (3, 4)}

# Nominal figures: (name fragment, memory GB/s, fp32 TFLOPS without tensor cores, TF32 tensor TFLOPS dense).
# First match wins: the specific names before the general ones.
DEVICES = [
    ("H200", 4800.0, 66.9, 494.7),
    ("H100 PCIe", 2000.0, 51.2, 378.0),
    ("H100 NVL", 3900.0, 60.0, 417.5),
    ("H100", 3350.0, 66.9, 494.7),      # SXM5, HBM3 (the "NVIDIA H100 80GB HBM3" of the lent machines)
    ("A100-SXM4-80GB", 2039.0, 19.5, 156.0),
    ("A100 80GB PCIe", 1935.0, 19.5, 156.0),
    ("A100", 1555.0, 19.5, 156.0),
]


def device_figures(profile):
    """(label, GB/s, fp32 TFLOPS, TF32 TFLOPS for convolutions, math mode) from the profile, None where unknown."""
    info = profile.get("device_info", {})
    dev = profile.get("device")
    if dev == "estimate":
        tf = info.get("fp32_tflops")
        return info.get("name", "estimate"), info.get("bandwidth_gbs"), tf, tf, "estimate"
    if dev == "cuda":
        text = info.get("device", "")
        math = "fp32" if "math fp32" in text else "default"
        for frag, bw, tf, tf32 in DEVICES:
            if frag.lower() in text.lower():
                return text.split(" (")[0] or frag, bw, tf, tf32 if math == "default" else tf, math
        return text.split(" (")[0] or "cuda", None, None, None, math
    return info.get("cpu", dev or "?"), None, None, None, "fp32"


def is_library(op, impl, extra):
    if op in extra or op in CUDNN_CONV or op in CUBLAS:
        return True
    if impl is not None and impl.startswith("cudnn"):
        return True
    return (op, impl) in CUDNN_OTHER


def node_calls(node, read):
    """(implementation name or None for the default, inputs, time_ms, outputs written or None for those some default
    reads) of every implementation a node lists. A node the profile times both ways (lean_time_ms: none of its
    optional outputs written; Attention's fused forward) appears as the defaults' store-all runs it (lean where no
    default reads its optional outputs) and, apart, the other way ("lean" or "written")."""
    impls = node.get("impls") or []
    if "lean_time_ms" in node and not impls:
        optional = set(node.get("optional_outputs", []))
        lean = (node["lean_time_ms"], [v for v in node["outputs"] if v not in optional])
        written = (node["time_ms"], list(node["outputs"]))
        if optional & read:
            yield (None, node["inputs"]) + written
            yield ("lean", node["inputs"]) + lean
        else:
            yield (None, node["inputs"]) + lean
            yield ("written", node["inputs"]) + written
        return
    if not impls:
        yield None, node["inputs"], node["time_ms"], None
    for k, im in enumerate(impls):
        yield (None if k == 0 else im["name"]), im["inputs"], im["time_ms"], None


def analyse(profile, path, a):
    label, bw, tf, tf32, math = device_figures(profile)
    bw = a.bandwidth or bw
    tf = a.tflops or tf
    tf32 = a.tf32_tflops or (a.tflops if a.tflops else tf32)
    if not bw or not tf:
        raise SystemExit(f"bench_roofline.py: {path}: no roofline known for device '{label}' "
                         f"({profile.get('device')}): give --bandwidth GB/s and --tflops")
    extra = set(filter(None, a.library.split(",")))
    values = profile["values"]
    read = {v for node in profile["nodes"] for v in node["inputs"]}  # by the default implementations
    groups = {}   # (op, impl) -> sums
    calls = []    # every (node, impl): for the flags
    default_impl_name = {}
    for node in profile["nodes"]:
        op = node["op"]
        impls = node.get("impls") or []
        if impls:
            default_impl_name[op] = impls[0]["name"]
        for impl, inputs, t, written in node_calls(node, read):
            if impl is not None and impl.startswith("cudnn"):
                continue  # a cuDNN algorithm variant: library code, and its op's default is listed already
            ids = list(inputs) + (written if written is not None else [v for v in node["outputs"] if v in read])
            ids += [inputs[i] for i in WRITES_INPUTS.get(op, ()) if i < len(inputs)]
            nbytes = sum(values[i]["bytes"] for i in ids)
            flops = float(node.get("flops", 0.0))
            peak = tf32 if op in CUDNN_CONV else tf
            t_mem = nbytes / (bw * 1e9) * 1e3
            t_cmp = flops / (peak * 1e12) * 1e3
            roof = max(t_mem, t_cmp)
            lib = is_library(op, impl if impl is not None else (impls[0]["name"] if impls else None), extra)
            g = groups.setdefault((op, impl), {"op": op, "impl": impl, "ours": not lib, "nodes": 0, "time_ms": 0.0,
                                               "bytes": 0, "flops": 0.0, "roofline_ms": 0.0,
                                               "memory_bound_ms": 0.0})
            g["nodes"] += 1
            g["time_ms"] += t
            g["bytes"] += nbytes
            g["flops"] += flops
            g["roofline_ms"] += roof
            g["memory_bound_ms"] += t_mem
            calls.append({"node": node["name"], "op": op, "impl": impl, "ours": not lib, "bytes": nbytes,
                          "flops": flops, "time_ms": t, "roofline_ms": roof, "memory_bound_ms": t_mem,
                          "compute_ms": t_cmp})

    def fractions(d):
        t = d["time_ms"]
        d["achieved_gbs"] = d["bytes"] / (t * 1e-3) / 1e9 if t > 0 else None
        d["bandwidth_fraction"] = d["memory_bound_ms"] / t if t > 0 else None
        d["roofline_fraction"] = d["roofline_ms"] / t if t > 0 else None
        return d

    rows = [fractions(g) for g in groups.values()]
    rows.sort(key=lambda r: (r["impl"] is not None, -r["time_ms"]))
    for c in calls:
        fractions(c)
    flagged = [c for c in calls if c["ours"] and c["bytes"] >= a.flag_mb * 1e6 and c["time_ms"] > 0
               and c["bandwidth_fraction"] < a.flag_fraction and c["roofline_fraction"] < a.flag_fraction]
    flagged.sort(key=lambda c: -(c["time_ms"] - c["roofline_ms"]))
    step = [r for r in rows if r["impl"] is None]
    total = fractions({"time_ms": sum(r["time_ms"] for r in step), "bytes": sum(r["bytes"] for r in step),
                       "flops": sum(r["flops"] for r in step), "roofline_ms": sum(r["roofline_ms"] for r in step),
                       "memory_bound_ms": sum(r["memory_bound_ms"] for r in step)})
    ours = [r for r in step if r["ours"]]
    ours_total = fractions({"time_ms": sum(r["time_ms"] for r in ours), "bytes": sum(r["bytes"] for r in ours),
                            "flops": sum(r["flops"] for r in ours),
                            "roofline_ms": sum(r["roofline_ms"] for r in ours),
                            "memory_bound_ms": sum(r["memory_bound_ms"] for r in ours)})
    return {"profile": path, "model": profile.get("model"), "batch": profile.get("batch"),
            "input_shape": profile.get("input_shape"), "device": label, "math": math, "bandwidth_gbs": bw,
            "fp32_tflops": tf, "conv_tflops": tf32, "flag_mb": a.flag_mb, "flag_fraction": a.flag_fraction,
            "ops": rows, "total": total, "ours_total": ours_total, "flagged": flagged}


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x, fmt):
    return "-" if x is None else format(x, fmt)


def markdown(r, top):
    out = [f"## {r['model']} batch {r['batch']} ({r['profile']})", "",
           f"Device {r['device']}, math {r['math']}: roofline {r['bandwidth_gbs']:g} GB/s, {r['fp32_tflops']:g} "
           f"TFLOPS fp32" + (f", {r['conv_tflops']:g} TFLOPS for cuDNN convolutions (TF32)"
                             if r["conv_tflops"] != r["fp32_tflops"] else "") + ".", "",
           "| op | kernel | nodes | time ms | share | GB moved | GFLOP | roofline ms | GB/s | of bandwidth | "
           "of roofline |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    total_t = r["total"]["time_ms"] or 1.0

    def line(name, kind, d, share=True):
        return (f"| {name} | {kind} | {d.get('nodes', '')} | {d['time_ms']:.3f} | "
                f"{pct(d['time_ms'] / total_t) if share else ''} | {d['bytes'] / 1e9:.3f} | {d['flops'] / 1e9:.1f} | "
                f"{d['roofline_ms']:.3f} | {num(d['achieved_gbs'], '.0f')} | {pct(d['bandwidth_fraction'])} | "
                f"{pct(d['roofline_fraction'])} |")

    for d in r["ops"]:
        if d["impl"] is None:
            out.append(line(d["op"], "ours" if d["ours"] else "library", d))
    out.append(line("**step (store-all, default implementations)**", "", r["total"]))
    out.append(line("**our kernels**", "ours", r["ours_total"]))
    others = [d for d in r["ops"] if d["impl"] is not None]
    if others:
        out += ["", "Other implementations (timed in the profile, not in the step above):", "",
                "| op | implementation | kernel | nodes | time ms | GB moved | roofline ms | GB/s | of bandwidth | "
                "of roofline |", "|---|---|---|---|---|---|---|---|---|---|"]
        for d in others:
            out.append(f"| {d['op']} | {d['impl']} | {'ours' if d['ours'] else 'library'} | {d['nodes']} | "
                       f"{d['time_ms']:.3f} | {d['bytes'] / 1e9:.3f} | {d['roofline_ms']:.3f} | "
                       f"{num(d['achieved_gbs'], '.0f')} | {pct(d['bandwidth_fraction'])} | "
                       f"{pct(d['roofline_fraction'])} |")
    fl = r["flagged"]
    head = (f"Flagged: {len(fl)} calls of our kernels moving >= {r['flag_mb']:g} MB at < "
            f"{100 * r['flag_fraction']:g}% of the bandwidth")
    if fl:
        out += ["", head + " (the most time lost first):", "",
                "| node | op | implementation | MB | time ms | roofline ms | GB/s | of bandwidth |",
                "|---|---|---|---|---|---|---|---|"]
        for c in fl[:top]:
            out.append(f"| {c['node']} | {c['op']} | {c['impl'] or 'default'} | {c['bytes'] / 1e6:.1f} | "
                       f"{c['time_ms']:.3f} | {c['roofline_ms']:.3f} | {num(c['achieved_gbs'], '.0f')} | "
                       f"{pct(c['bandwidth_fraction'])} |")
        if len(fl) > top:
            out.append(f"| ... {len(fl) - top} more (--top) | | | | | | | |")
        by_op = {}
        for c in fl:
            k = c["op"] + (f" ({c['impl']})" if c["impl"] else "")
            s = by_op.setdefault(k, {"calls": 0, "time_ms": 0.0, "roofline_ms": 0.0})
            s["calls"] += 1
            s["time_ms"] += c["time_ms"]
            s["roofline_ms"] += c["roofline_ms"]
        # Last, so that a log's last line says it.
        out += ["", head + ": " + "; ".join(
            f"{k} x{s['calls']} {s['time_ms']:.2f} ms (roofline {s['roofline_ms']:.2f})"
            for k, s in sorted(by_op.items(), key=lambda kv: -kv[1]["time_ms"])) + "."]
    else:
        out += ["", head + ": none."]
    return "\n".join(out) + "\n"


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output quietly
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+", help="profile JSON files (monet-profile -o)")
    ap.add_argument("--bandwidth", type=float, help="memory bandwidth in GB/s (default: the profile's device)")
    ap.add_argument("--tflops", type=float, help="peak fp32 TFLOPS (default: the profile's device)")
    ap.add_argument("--tf32-tflops", type=float,
                    help="peak TFLOPS of cuDNN convolutions (default: TF32 tensor cores under math default, else "
                         "--tflops)")
    ap.add_argument("--flag-mb", type=float, default=64.0, help="flag calls moving at least this many MB (1e6 B)")
    ap.add_argument("--flag-fraction", type=float, default=0.5, help="... below this fraction of the bandwidth")
    ap.add_argument("--top", type=int, default=25, help="flagged calls listed (the worst first)")
    ap.add_argument("--library", default="", help="further op types that run library code (comma-separated)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    for v, name in ((a.bandwidth, "--bandwidth"), (a.tflops, "--tflops"), (a.tf32_tflops, "--tf32-tflops")):
        if v is not None and v <= 0:
            ap.error(f"{name} must be positive")
    results = []
    for path in a.profiles:
        try:
            with open(path) as f:
                profile = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"bench_roofline.py: {path}: {e}")
        if profile.get("format") != "monet-profile":
            sys.exit(f"bench_roofline.py: {path}: not a monet profile (format '{profile.get('format')}')")
        r = analyse(profile, path, a)
        if results:
            print()
        results.append(r)
        print(markdown(r, a.top).rstrip("\n"))  # the flag summary is the last line (a step log's tail)
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
