#!/usr/bin/env python3
"""Small lookups for scripts/gpu_session.sh (no torch, no GPU).

  gpu_session_util.py batch MODEL              the zoo's batch: MONeT's table (bench_floor.py) for the CNNs,
                                               8 for gpt2, 32 for bert
  gpu_session_util.py budgets MODEL            MONeT's budgets of the model in GB, one line, 2 decimals
  gpu_session_util.py shape-args PROFILE       "--batch N --input-shape C,H,W" (or T) of a profile or schedule
  gpu_session_util.py budget PROFILE FRACTION  FRACTION of the profile's store-all peak, in bytes
  gpu_session_util.py budgets-of MODEL PROFILE  MONeT's budgets of the model in GB, or for a model MONeT did not
                                               measure (GPT-2, BERT) the fractions MONET_ZOO_FRACTIONS (default
                                               "1/2 1/3") of the profile's store-all peak, in GB, 2 decimals
  gpu_session_util.py zoo-from MODEL_BATCH [FROM...]  the first of the folders FROM (in order; "schedules"
                                               where none is given) with FROM/MODEL_BATCH/zoo/schedule_full_*GB.json;
                                               nothing (exit 1) where none has them
  gpu_session_util.py profile-for SCHEDULE     the profile of the schedule's training graph (same fingerprint) among
                                               <model>_<batch>/*/profile*.json beside its zoo/ folder, then among the
                                               repository's schedules/<model>_<batch>/*/; nothing (exit 1) where none
  gpu_session_util.py merge OUT IN.json...     bench_pytorch.py tables into one: the first's (which must exist: its
                                               eager row comes first) title and rows, then the others' rows but an
                                               eager row (missing ones are skipped)
  gpu_session_util.py summary OUTDIR SUMMARY.md  the bench stage's tables (OUTDIR/bench/*.json) as one table, and
                                               each roofline's totals and flagged calls (OUTDIR/roofline/*.json)
  gpu_session_util.py between REPORT SHARE     a budget SHARE of the way from a monet-solve report's lower bound to
                                               its heuristics' smallest peak, in bytes
  gpu_session_util.py offload-table OUTDIR OFFLOAD.md  the offload stage's runs (OUTDIR/offload/*/): per model and
                                               budget the solve without and with offload, the run's peak and
                                               median step against the prediction, the check's verdict
"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRANSFORMER_BATCH = {"gpt2": 8, "bert": 32}


def monet_table():
    sys.path.insert(0, HERE)
    from bench_floor import MONET  # noqa: E402 - one copy of MONeT's table in the repository
    return MONET


def shape_args(path):
    with open(path) as f:
        shape = json.load(f)["input_shape"]
    return f"--batch {shape[0]} --input-shape {','.join(map(str, shape[1:]))}"


def profile_for(schedule):
    with open(schedule) as f:
        fp = json.load(f)["fingerprint"]
    model_dir = os.path.dirname(os.path.dirname(os.path.abspath(schedule)))
    candidates = sorted(glob.glob(os.path.join(model_dir, "*", "profile*.json")))
    candidates += sorted(glob.glob(os.path.join(ROOT, "schedules", os.path.basename(model_dir), "*", "profile*.json")))
    for p in candidates:
        try:
            with open(p) as f:
                if json.load(f).get("fingerprint") == fp:
                    return p
        except (OSError, ValueError):
            continue
    return None


def zoo_from(model_batch, sources):
    for d in sources or ["schedules"]:
        if glob.glob(os.path.join(d, model_batch, "zoo", "schedule_full_*GB.json")):
            return d
    return None


def merge(out, inputs):
    docs = []
    for k, p in enumerate(inputs):
        try:
            with open(p) as f:
                docs.append(json.load(f))
        except (OSError, ValueError) as e:
            if k == 0:
                sys.exit(f"gpu_session_util: merge: {p}: {e} (the first table, with the eager row, is needed)")
    doc = docs[0]
    for d in docs[1:]:
        doc["rows"] += [r for r in d["rows"] if r.get("kind", "") != "eager" and r["run"] != "pytorch eager"]
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, out)
    print(f"wrote {out}: {len(doc['rows'])} rows from {len(docs)} tables")


def gb(x):
    if x is None:
        return "-"
    return f"{x / 1e9:.2f} GB" if x >= 1e8 else f"{x / 1e6:.2f} MB"


def summary(outdir, path):
    lines = ["# GPU session summary", ""]
    benches = sorted(glob.glob(os.path.join(outdir, "bench", "*.json")))
    if benches:
        lines += ["## PyTorch and monet, one training step (median ms, peak)", "",
                  "| model | run | step ms | x eager | peak | x eager | predicted ms (measured / predicted) | note |",
                  "|---|---|---|---|---|---|---|---|"]
        for p in benches:
            with open(p) as f:
                d = json.load(f)
            eager = d["rows"][0] if d["rows"] and d["rows"][0].get("kind") == "eager" else None
            for r in d["rows"]:
                t, pk = r.get("step_ms"), r.get("peak_bytes")
                xt = f"{t / eager['step_ms']:.2f}" if t and eager and eager.get("step_ms") else "-"
                xp = f"{pk / eager['peak_bytes']:.2f}" if pk and eager and eager.get("peak_bytes") else "-"
                pred = r.get("predicted_step_ms")
                pc = f"{pred:.1f} ({t / pred:.3f})" if pred and t else "-"
                lines.append(f"| {d.get('module', d.get('model'))} b{d.get('batch')} | {r['run']} | "
                             f"{'-' if t is None else f'{t:.1f}'} | {xt} | {gb(pk)} | {xp} | {pc} | "
                             f"{r.get('error', '')} |")
        title = json.load(open(benches[0])).get("title", "")
        lines += ["", f"First table's setting: {title}.", ""]
    roofs = sorted(glob.glob(os.path.join(outdir, "roofline", "*.json")))
    if roofs:
        lines += ["## Roofline (scripts/bench_roofline.py)", "",
                  "| model | device | step ms | roofline ms | our kernels ms | their roofline ms | flagged calls | "
                  "flagged ms |", "|---|---|---|---|---|---|---|---|"]
        for p in roofs:
            with open(p) as f:
                for r in json.load(f):
                    fl = r["flagged"]
                    lines.append(f"| {r['model']} b{r['batch']} | {r['device']} | {r['total']['time_ms']:.1f} | "
                                 f"{r['total']['roofline_ms']:.1f} | {r['ours_total']['time_ms']:.1f} | "
                                 f"{r['ours_total']['roofline_ms']:.1f} | {len(fl)} | "
                                 f"{sum(c['time_ms'] for c in fl):.1f} |")
        lines.append("")
    if not benches and not roofs:
        lines.append("(no bench or roofline results under this folder)")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path}: {len(benches)} bench tables, {len(roofs)} rooflines")


def monet_budgets(model):
    """MONeT's budgets of the model in GB, 2 decimals, on one line."""
    return " ".join(f"{gb:.2f}" for gb, _ in monet_table()[model][2])


def fraction(text):
    """'1/3' or '0.5' as a number in (0, 1]."""
    num, _, den = text.partition("/")
    try:
        x = float(num) / float(den) if den else float(num)
    except (ValueError, ZeroDivisionError):
        x = -1
    if not 0 < x <= 1:
        sys.exit(f"gpu_session_util.py: fraction {text} is not in (0, 1]")
    return x


def offload_table(outdir, path):
    def load(p):
        try:
            with open(p) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    rows = ["| model | budget | without offload | with offload | waits | copies | host | momenta on host | "
            "measured peak | measured step | measured / predicted | check |", "|" + "---|" * 12]
    for d in sorted(glob.glob(os.path.join(outdir, "offload", "*"))):
        tag = os.path.basename(d)
        none, off, run = (load(os.path.join(d, f)) for f in ("solve_none.json", "solve_offload.json", "run.json"))
        check = os.path.join(outdir, f"offload_check_{tag}.txt")
        verdict = "not run"
        if os.path.exists(check):
            with open(check) as f:
                text = f.read()
            verdict = "bitwise PASS" if "bitwise equal, PASS" in text else "FAIL" if "FAIL" in text else "see log"
        step = lambda r: f"{r['predicted_step_ms']:.2f} ms" if r and r.get("fits") else "none"
        o = (off or {}).get("offload") or {}
        peak = measured = ratio = "-"
        if run and off and off.get("fits"):
            peak = f"{run['peak_bytes'] / 1e9:.3f} GB ({'=' if run['peak_bytes'] == off['predicted_peak_bytes'] else '!='})"
            measured = f"{run['step_ms_median']:.2f} ms"
            ratio = f"{run['step_ms_median'] / off['predicted_step_ms']:.3f}"
        budget = (off or none or {}).get("budget_bytes", 0) / 1e9
        rows.append(f"| {tag.rsplit('_', 1)[0]} | {budget:.3f} GB | {step(none)} | {step(off)} | "
                    f"{o.get('copy_wait_ms', 0):.2f} ms | {o.get('transfers', 0)} | "
                    f"{o.get('host_peak_bytes', 0) / 1e9:.3f} GB | {o.get('states_on_host', 0)} "
                    f"({o.get('state_bytes_on_host', 0) / 1e9:.3f} GB) | {peak} | {measured} | {ratio} | {verdict} |")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"{len(rows) - 2} offload rows")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, rest = argv[1], argv[2:]
    if cmd == "batch" and len(rest) == 1:
        m = rest[0]
        print(TRANSFORMER_BATCH[m] if m in TRANSFORMER_BATCH else monet_table()[m][0])
    elif cmd == "budgets" and len(rest) == 1:
        print(monet_budgets(rest[0]))
    elif cmd == "shape-args" and len(rest) == 1:
        print(shape_args(rest[0]))
    elif cmd == "budgets-of" and len(rest) == 2:
        m, profile = rest
        if m in monet_table():
            print(monet_budgets(m))
        else:
            with open(profile) as f:
                peak = json.load(f)["totals"]["store_all_peak_bytes"]
            fractions = os.environ.get("MONET_ZOO_FRACTIONS", "1/2 1/3").split()
            print(*(f"{peak * fraction(x) / 1e9:.2f}" for x in fractions))
    elif cmd == "budget" and len(rest) == 2:
        with open(rest[0]) as f:
            print(int(json.load(f)["totals"]["store_all_peak_bytes"] * float(rest[1])))
    elif cmd == "profile-for" and len(rest) == 1:
        p = profile_for(rest[0])
        if not p:
            return 1
        print(p)
    elif cmd == "zoo-from" and len(rest) >= 1:
        d = zoo_from(rest[0], rest[1:])
        if not d:
            return 1
        print(d)
    elif cmd == "merge" and len(rest) >= 2:
        merge(rest[0], rest[1:])
    elif cmd == "summary" and len(rest) == 2:
        summary(rest[0], rest[1])
    elif cmd == "between" and len(rest) == 2:
        with open(rest[0]) as f:
            r = json.load(f)
        lb, found = r["lower_bound_bytes"], r["smallest_found_bytes"]
        print(int(lb + (found - lb) * float(rest[1])))
    elif cmd == "offload-table" and len(rest) == 2:
        offload_table(rest[0], rest[1])
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
