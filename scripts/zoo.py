#!/usr/bin/env python3
"""The schedule zoo: five models at MONeT's published budgets, solved, run and checked on a GPU, beside MONeT's own
overheads and PyTorch's memory options, in one table per model (schedules/README.md).

Stages (scripts/zoo.sh runs them; each may be run alone, and each skips what is already done unless --force):
  solve   (no GPU) for each model and each of MONeT's budgets: monet-solve in full mode, checkpoint mode and sqrtn
          on the model's H100 profile (h100/profile.json when measured on the current training graph, else
          h100/profile_derived.json), then its memory timeline (monet-check --simulate --profile --timeline).
          Files: schedules/<model>_<batch>/zoo/{schedule,report}_<mode>_<budget>GB.json, timeline_<mode>_<budget>GB.svg
  gpu     (GPU) for every schedule of the solve stage and for store-all: monet-run --device cuda (median step,
          arena peak) and monet-check --device cuda --reference store-all; then scripts/bench_pytorch.py on the
          same model, input, loss and optimizer: eager, checkpoint_sequential and torch.compile at a ladder of
          activation_memory_budget fractions. Files: zoo/run_*.json, zoo/check_*.json, zoo/pytorch.json, zoo/env.json
  table   schedules/README.md from whatever the stages above left (a column a stage did not fill says so)

Usage: /usr/bin/python3 scripts/zoo.py solve|gpu|table [--models resnet50,...] [--time-limit 600] [--threads 2]
       [--build build] [--force]
"""
import argparse
import datetime
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODES = ("full", "checkpoint", "sqrtn")
COMPILE_FRACTIONS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)


def monet_table():
    """MONeT's published rows, from bench_floor.py (one copy of them in the repository)."""
    sys.path.insert(0, HERE)
    from bench_floor import MONET  # noqa: E402
    return MONET


def model_dir(model, batch):
    return os.path.join(ROOT, "schedules", f"{model}_{batch}")


def loss_of(model):
    return "sum" if model == "unet" else "ce"


def run(cmd, ok=(0,), log=None):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "w") as f:
            f.write(r.stdout + r.stderr)
    if r.returncode not in ok:
        sys.exit(f"zoo: {' '.join(cmd)} exited {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    return r


def profile_of(model, batch):
    """The measured H100 profile when it is of the current training graph, else the derived one."""
    d = os.path.join(model_dir(model, batch), "h100")
    for name in ("profile.json", "profile_derived.json"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            # A profile of an earlier training graph fails monet-solve's and monet-check's fingerprint tests:
            # profile_derived.json (bench_floor.py) is made for exactly that case.
            if name == "profile.json" and os.path.exists(os.path.join(d, "profile_derived.json")):
                if json.load(open(p))["fingerprint"] != json.load(open(os.path.join(d, "profile_derived.json")))["fingerprint"]:
                    continue
            return p
    sys.exit(f"zoo: no H100 profile under {d} (scripts/gpu_session.sh profile measures one)")


def tag(gb):
    return f"{gb:.2f}GB"


def solve_stage(a, monet):
    solve, check = (os.path.join(a.build, "apps", c) for c in ("monet-solve", "monet-check"))
    for model in a.models:
        batch, _, published = monet[model]
        prof = profile_of(model, batch)
        fingerprint = json.load(open(prof))["fingerprint"]
        out = os.path.join(model_dir(model, batch), "zoo")
        os.makedirs(out, exist_ok=True)
        for gb, _ in published:
            for mode in MODES:
                report = os.path.join(out, f"report_{mode}_{tag(gb)}.json")
                schedule = os.path.join(out, f"schedule_{mode}_{tag(gb)}.json")
                if not a.force and os.path.exists(report):
                    r = json.load(open(report))
                    if r.get("fingerprint") == fingerprint and r.get("time_limit_s") == a.time_limit:
                        continue
                res = run([solve, prof, "--budget", f"{gb}GB", "--mode", mode, "--time-limit", f"{a.time_limit:g}",
                           "--threads", str(a.threads), "-o", schedule, "--report", report, "-q"], ok=(0, 2, 4))
                r = json.load(open(report))
                r["fingerprint"], r["profile"] = fingerprint, os.path.relpath(prof, ROOT)
                with open(report, "w") as f:
                    json.dump(r, f, indent=2)
                if res.returncode != 0:
                    if os.path.exists(schedule):
                        os.remove(schedule)  # a schedule of an earlier run at this budget
                    continue
                run([check, os.path.join(ROOT, "models", f"{model}.onnx"), "--schedule", schedule, "--simulate",
                     "--loss", loss_of(model), "--profile", prof, "--timeline",
                     os.path.join(out, f"timeline_{mode}_{tag(gb)}.svg")])


def gpu_stage(a, monet):
    run_bin, check = (os.path.join(a.build, "apps", c) for c in ("monet-run", "monet-check"))
    for model in a.models:
        batch, _, published = monet[model]
        out = os.path.join(model_dir(model, batch), "zoo")
        onnx = os.path.join(ROOT, "models", f"{model}.onnx")
        shape = ",".join(str(x) for x in json.load(open(profile_of(model, batch)))["input_shape"][1:])
        base = [onnx, "--device", "cuda", "--loss", loss_of(model)]
        store_all = os.path.join(out, "run_store-all.json")
        if a.force or not os.path.exists(store_all):
            run([run_bin, *base, "--batch", str(batch), "--input-shape", shape, "--iters", "10", "--warmup", "3",
                 "--report", store_all], ok=(0, 5))
        for schedule in sorted(glob.glob(os.path.join(out, "schedule_*.json"))):
            name = os.path.basename(schedule)[len("schedule_"):-len(".json")]
            report = os.path.join(out, f"run_{name}.json")
            if a.force or not os.path.exists(report):
                run([run_bin, *base, "--schedule", schedule, "--iters", "10", "--warmup", "3", "--report", report],
                    ok=(0, 5))
            report = os.path.join(out, f"check_{name}.json")
            if a.force or not os.path.exists(report):
                run([check, *base, "--schedule", schedule, "--reference", "store-all", "--tolerance", "1e-3",
                     "--report", report], ok=(0, 3))
        torch_json = os.path.join(out, "pytorch.json")
        if a.force or not os.path.exists(torch_json):
            run(["python3", os.path.join(HERE, "bench_pytorch.py"), "--model", model, "--batch", str(batch),
                 "--no-monet", "--compile-budgets", ",".join(f"{f:g}" for f in COMPILE_FRACTIONS), "--json",
                 torch_json])


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def pct(x):
    return f"{100 * x:+.2f}%" if x is not None else "-"


def table_stage(a, monet):
    lines = ["# The schedule zoo", "",
             "Five models at the budgets of MONeT's table (utsaslab/MONeT, \"Results\"): monet's full-mode schedule, "
             "with checkpoint mode (keep/recompute only) and sqrt(n) checkpointing for contrast, each on the model's "
             "H100 profile. Regenerate: `bash scripts/zoo.sh` (on a GPU machine every stage; without one the solve "
             "and table stages). Overheads are step time against monet's own store-all at the same batch, as "
             "MONeT's are against its own; 'vs eager' is against PyTorch eager's measured step.", ""]
    for model in a.models:
        batch, torch_gb, published = monet[model]
        out = os.path.join(model_dir(model, batch), "zoo")
        reports = {(m, gb): load(os.path.join(out, f"report_{m}_{tag(gb)}.json")) for gb, _ in published for m in MODES}
        if not any(reports.values()):
            continue
        first = next(r for r in reports.values() if r)
        sa_run = load(os.path.join(out, "run_store-all.json"))
        torch = load(os.path.join(out, "pytorch.json"))
        eager = torch["rows"][0] if torch else None
        compiled = [r for r in (torch["rows"] if torch else []) if r["run"].startswith("pytorch compile")
                    and r.get("step_ms")]
        lines += [f"## {model}, batch {batch}", ""]
        prof = first.get("profile", "")
        lines.append(f"Profile `{prof}`; solves of {first['time_limit_s']:g} s on {first['threads']} threads. "
                     f"Store-all: predicted peak {first['store_all_peak_bytes'] / 1e9:.2f} GB, step "
                     f"{first['store_all_step_ms']:.2f} ms" +
                     (f"; measured {sa_run['peak_bytes'] / 1e9:.2f} GB, {sa_run['step_ms_median']:.2f} ms"
                      if sa_run else "; not run on a GPU yet") +
                     f". PyTorch eager (MONeT's table, PyTorch 1.5): {torch_gb:.2f} GB" +
                     (f"; measured here {eager['peak_bytes'] / 1e9:.2f} GB, {eager['step_ms']:.2f} ms"
                      if eager and eager.get("peak_bytes") else "") + ".")
        if torch:
            lines.append(f"GPU run: {torch['title']}.")
        lines += ["", "| budget | full: predicted peak | predicted overhead | measured peak | measured overhead | "
                  "vs eager | check | checkpoint mode | sqrt(n) | MONeT | torch.compile at that memory | timeline |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for gb, monet_overhead in published:
            r = reports[("full", gb)]
            run_r = load(os.path.join(out, f"run_full_{tag(gb)}.json"))
            check_r = load(os.path.join(out, f"check_full_{tag(gb)}.json"))
            cells = [f"{gb:.2f} GB"]
            if r and r["fits"]:
                cells += [f"{r['predicted_peak_bytes'] / 1e9:.2f} GB", pct(r["overhead"])]
            else:
                cells += [f"none ({r['status']})" if r else "not solved", "-"]
            if run_r and sa_run:
                cells += [f"{run_r['peak_bytes'] / 1e9:.2f} GB", pct(run_r["step_ms_median"] / sa_run["step_ms_median"] - 1),
                          pct(run_r["step_ms_median"] / eager["step_ms"] - 1) if eager else "-"]
            else:
                cells += ["not run", "-", "-"]
            cells.append(("pass" if check_r.get("pass") else "FAIL") if check_r else "-")
            for m in ("checkpoint", "sqrtn"):
                c = reports[(m, gb)]
                cells.append(pct(c["overhead"]) if c and c["fits"] else ("none" if c else "-"))
            cells.append(f"{monet_overhead:+.2f}%")
            fits = [c for c in compiled if c["peak_bytes"] and c["peak_bytes"] <= gb * 1e9]
            if not torch:
                cells.append("not run")
            elif not fits:
                cells.append("none fits")
            else:
                best = min(fits, key=lambda c: c["step_ms"])
                cells.append(f"{pct(best['step_ms'] / sa_run['step_ms_median'] - 1) if sa_run else '-'} "
                             f"({best['peak_bytes'] / 1e9:.2f} GB)")
            svg = f"timeline_full_{tag(gb)}.svg"
            cells.append(f"[svg]({model}_{batch}/zoo/{svg})" if os.path.exists(os.path.join(out, svg)) else "-")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(f"Table written {datetime.date.today().isoformat()} by `scripts/zoo.py table`; 'not run' marks a "
                 "column the GPU stage has not filled yet.")
    with open(os.path.join(ROOT, "schedules", "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote schedules/README.md")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=["solve", "gpu", "table"])
    ap.add_argument("--models", default="resnet50,googlenet,unet,mobilenet_v2,vgg16")
    ap.add_argument("--time-limit", type=float, default=600)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--force", action="store_true", help="redo what is already done")
    a = ap.parse_args()
    monet = monet_table()
    a.models = a.models.split(",")
    for m in a.models:
        if m not in monet:
            sys.exit(f"zoo: --models: '{m}' is not one of MONeT's models ({', '.join(monet)})")
    {"solve": solve_stage, "gpu": gpu_stage, "table": table_stage}[a.stage](a, monet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
