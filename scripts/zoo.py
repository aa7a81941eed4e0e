#!/usr/bin/env python3
"""The schedule zoo: five models at MONeT's published budgets, solved, run and checked on a GPU, beside MONeT's own
overheads and PyTorch's memory options, in one table per model (schedules/README.md); and GPT-2 and BERT, which
MONeT did not measure, at fractions of their store-all peak (what scripts/gpu_session.sh's zoo stage solves, runs
and checks for them: MONET_ZOO_MODELS="gpt2 bert"), tabled from whatever of theirs is under zoo/.

Each model's profile is the measured one of --gpu (schedules/<model>_<batch>/<gpu>/profile.json, default h200), or
its profile_derived.json where the measured one is of an earlier training graph (monet-profile --rederive).

Stages (scripts/zoo.sh runs them; each may be run alone, and each skips what is already done unless --force):
  solve   (no GPU) for each model and each of MONeT's budgets: monet-solve in each of --modes (full, checkpoint,
          sqrtn) on the model's profile, then a memory timeline of every full-mode schedule (monet-check
          --simulate --profile --timeline). Files: schedules/<model>_<batch>/zoo/{schedule,report}_<mode>_<budget>GB.json,
          timeline_<mode>_<budget>GB.svg
  gpu     (GPU) the profile's lean store-all (monet-solve --mode store-all: the baseline of every overhead) and
          every full-mode schedule: monet-run --device cuda (median step, arena peak) and monet-check --device cuda
          --reference store-all --math fp32 (bitwise against store-all on its implementations); then scripts/bench_pytorch.py on the same model, input, loss and
          optimizer: eager, checkpoint_sequential and torch.compile at a ladder of activation_memory_budget
          fractions. Files: zoo/run_*.json, zoo/check_*.json, zoo/pytorch.json
  table   schedules/README.md from whatever the stages above left (a column a stage did not fill says so), the
          transformers' tables after the CNNs' where their zoo/ has solves

scripts/gpu_session.sh's zoo stage does the solve and gpu stages' full-mode part inside one short GPU call.

Usage: /usr/bin/python3 scripts/zoo.py solve|gpu|table [--models resnet50,...] [--gpu h200] [--modes full,...]
       [--time-limit 600] [--threads 2] [--build build] [--force] [--schedules DIR] [--out FILE]
--schedules DIR: the models' folders are DIR/<model>_<batch>/ (a GPU call's unpacked results: DIR/schedules);
--out FILE: where the table goes (default DIR/README.md).
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
TRANSFORMERS = {"gpt2": 8, "bert": 32}  # the zoo's batches of the models MONeT did not measure
COMPILE_FRACTIONS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)


def monet_table():
    """MONeT's published rows, from bench_floor.py (one copy of them in the repository)."""
    sys.path.insert(0, HERE)
    from bench_floor import MONET  # noqa: E402
    return MONET


SCHEDULES = os.path.join(ROOT, "schedules")  # the folder of the <model>_<batch>/ folders (--schedules)


def model_dir(model, batch):
    return os.path.join(SCHEDULES, f"{model}_{batch}")


def loss_of(model):
    return "ce"  # the UNet too: per-pixel cross-entropy over its 2 classes


def run(cmd, ok=(0,), log=None):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "w") as f:
            f.write(r.stdout + r.stderr)
    if r.returncode not in ok:
        sys.exit(f"zoo: {' '.join(cmd)} exited {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    return r


def profile_of(model, batch, gpu):
    """The measured profile of this GPU, or the one derived from it when the measured one is of an earlier graph."""
    d = os.path.join(model_dir(model, batch), gpu)
    measured, derived = os.path.join(d, "profile.json"), os.path.join(d, "profile_derived.json")
    if os.path.exists(measured):
        # A profile of an earlier training graph fails monet-solve's and monet-check's fingerprint tests:
        # profile_derived.json (monet-profile --rederive) is made for exactly that case.
        if not os.path.exists(derived) or \
                json.load(open(measured))["fingerprint"] == json.load(open(derived))["fingerprint"]:
            return measured
    if os.path.exists(derived):
        return derived
    sys.exit(f"zoo: no {gpu} profile under {d} (scripts/gpu_session.sh zoo measures one)")


def tag(gb):
    return f"{gb:.2f}GB"


def solve_stage(a, monet):
    solve, check = (os.path.join(a.build, "apps", c) for c in ("monet-solve", "monet-check"))
    for model in a.models:
        batch, _, published = monet[model]
        prof = profile_of(model, batch, a.gpu)
        fingerprint = json.load(open(prof))["fingerprint"]
        out = os.path.join(model_dir(model, batch), "zoo")
        os.makedirs(out, exist_ok=True)
        for gb, _ in published:
            for mode in a.modes:
                report = os.path.join(out, f"report_{mode}_{tag(gb)}.json")
                schedule = os.path.join(out, f"schedule_{mode}_{tag(gb)}.json")
                r = load(report)
                if a.force or not r or r.get("fingerprint") != fingerprint or r.get("time_limit_s") != a.time_limit:
                    res = run([solve, prof, "--budget", f"{gb}GB", "--mode", mode, "--time-limit", f"{a.time_limit:g}",
                               "--threads", str(a.threads), "-o", schedule, "--report", report, "-q"], ok=(0, 2, 4))
                    r = json.load(open(report))
                    r["fingerprint"], r["profile"] = fingerprint, os.path.relpath(prof, ROOT)
                    with open(report, "w") as f:
                        json.dump(r, f, indent=2)
                    if res.returncode != 0 and os.path.exists(schedule):
                        os.remove(schedule)  # a schedule of an earlier run at this budget
                # The table links the full-mode schedules' timelines (the others would only weigh the repository).
                timeline = os.path.join(out, f"timeline_{mode}_{tag(gb)}.svg")
                if mode == "full" and os.path.exists(schedule) and (a.force or not os.path.exists(timeline)):
                    run([check, os.path.join(ROOT, "models", f"{model}.onnx"), "--schedule", schedule, "--simulate",
                         "--loss", loss_of(model), "--profile", prof, "--timeline", timeline])


def gpu_stage(a, monet):
    solve, run_bin, check = (os.path.join(a.build, "apps", c) for c in ("monet-solve", "monet-run", "monet-check"))
    for model in a.models:
        batch, _, published = monet[model]
        out = os.path.join(model_dir(model, batch), "zoo")
        onnx = os.path.join(ROOT, "models", f"{model}.onnx")
        base = [onnx, "--device", "cuda", "--loss", loss_of(model)]
        # Store-all is the profile's lean store-all, the baseline of the solver's overheads (monet-run without a
        # schedule has no profile: it runs cuDNN's heuristic algorithms).
        store_all = os.path.join(out, "schedule_store-all.json")
        if a.force or not os.path.exists(store_all):
            run([solve, profile_of(model, batch, a.gpu), "--mode", "store-all", "--budget", "1000GB", "-q",
                 "-o", store_all, "--report", os.path.join(out, "report_store-all.json")])
        for schedule in [store_all] + sorted(glob.glob(os.path.join(out, "schedule_full_*.json"))):
            name = os.path.basename(schedule)[len("schedule_"):-len(".json")]
            report = os.path.join(out, f"run_{name}.json")
            if a.force or not os.path.exists(report):
                run([run_bin, *base, "--schedule", schedule, "--iters", "10", "--warmup", "3", "--report", report],
                    ok=(0, 5))
            report = os.path.join(out, f"check_{name}.json")
            if name != "store-all" and (a.force or not os.path.exists(report)):
                run([check, *base, "--schedule", schedule, "--reference", "store-all", "--math", "fp32",
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


def check_cell(c):
    """monet-check --reference store-all: bitwise against store-all on the schedule's implementations, and how far
    the lean store-all's differ; a report against the lean store-all alone says only the latter."""
    if not c:
        return "-"
    if "lean_store_all" not in c:
        return f"{'bitwise' if c.get('bitwise_equal') else format(c['max_rel_diff'], '.1e')} vs lean (same-kernel check not run)"
    cell = "bitwise" if c["pass"] else f"NOT bitwise ({c['max_rel_diff']:.1e})"
    lean = c["lean_store_all"]
    return cell + (f"; vs lean {lean['max_rel_diff']:.1e}" if lean else "")


def measured_cells(run_r, sa_run, eager):
    """The measured peak, the overhead against the lean store-all's run and against PyTorch eager's step of a
    full-mode schedule's run report run_r (three cells), and those two overheads (None when not run)."""
    if not (run_r and sa_run):
        return ["not run", "-", "-"], None, None
    overhead = run_r["step_ms_median"] / sa_run["step_ms_median"] - 1
    vs_eager = run_r["step_ms_median"] / eager["step_ms"] - 1 if eager and eager.get("step_ms") else None
    return [f"{run_r['peak_bytes'] / 1e9:.2f} GB", pct(overhead), pct(vs_eager)], overhead, vs_eager


def predicted_vs_eager(report, eager):
    """A solve's predicted step against PyTorch eager's measured one, minus 1 (None where either is missing)."""
    if not (report and report.get("fits") and report.get("predicted_step_ms") and eager and eager.get("step_ms")):
        return None
    return report["predicted_step_ms"] / eager["step_ms"] - 1


def step_ratio(run_r, report):
    """The measured median step of a run report over the solve's predicted step (None where either is missing)."""
    if not (run_r and report and report.get("fits") and report.get("predicted_step_ms")):
        return None
    return run_r["step_ms_median"] / report["predicted_step_ms"]


def ratio_cell(ratio):
    return "-" if ratio is None else f"{ratio:.3f}"


def within_line(ratios):
    """How many runs measured a step within 5% of their prediction, or nothing where none ran."""
    ratios = [r for r in ratios if r is not None]
    if not ratios:
        return []
    return [f"Measured step within 5% of the predicted: {sum(abs(r - 1) <= 0.05 for r in ratios)} of {len(ratios)} "
            f"runs (measured / predicted {min(ratios):.3f} to {max(ratios):.3f})."]


def profile_timing(profile_path):
    """How the profile timed its nodes (its device_info.time), or '' where it does not say."""
    try:
        with open(os.path.join(ROOT, profile_path)) as f:
            return json.load(f).get("device_info", {}).get("time", "")
    except (OSError, ValueError):
        return ""


def compile_cell(compiled, gb, sa_run):
    """The fastest torch.compile row whose peak fits gb, against the lean store-all's run."""
    fits = [c for c in compiled if c["peak_bytes"] and c["peak_bytes"] <= gb * 1e9]
    if not compiled:
        return "not run"
    if not fits:
        return "none fits"
    best = min(fits, key=lambda c: c["step_ms"])
    return (f"{pct(best['step_ms'] / sa_run['step_ms_median'] - 1) if sa_run else '-'} "
            f"({best['peak_bytes'] / 1e9:.2f} GB)")


def timeline_cell(a, out, gb):
    svg = f"timeline_full_{tag(gb)}.svg"
    return (f"[svg]({os.path.relpath(os.path.join(out, svg), os.path.dirname(a.out))})"
            if os.path.exists(os.path.join(out, svg)) else "-")


def pytorch_rows(out):
    """zoo/pytorch.json's eager row, its SDPA row (None where absent) and its torch.compile rows that ran."""
    torch = load(os.path.join(out, "pytorch.json"))
    rows = torch["rows"] if torch else []
    eager = rows[0] if rows else None
    sdpa = next((r for r in rows if r["run"] == "pytorch eager sdpa" and r.get("step_ms")), None)
    compiled = [r for r in rows if r["run"].startswith("pytorch compile") and r.get("step_ms")]
    return torch, eager, sdpa, compiled


def transformer_table(a, model, batch):
    """The table of a model MONeT did not measure: every full-mode solve under zoo/ (fractions of the profile's
    lean or fast store-all peak), its run and check, against PyTorch eager with and without SDPA. [] where zoo/ has
    no solve."""
    out = os.path.join(model_dir(model, batch), "zoo")
    found = []
    for path in glob.glob(os.path.join(out, "report_full_*GB.json")):
        try:
            found.append((float(os.path.basename(path)[len("report_full_"):-len("GB.json")]), load(path)))
        except ValueError:
            continue
    if not found:
        return []
    found.sort(key=lambda x: -x[0])
    first = found[0][1]
    sa_run = load(os.path.join(out, "run_store-all.json"))
    fast_run = load(os.path.join(out, "run_store-all-fast.json"))
    torch, eager, sdpa, compiled = pytorch_rows(out)
    limits = sorted({f"{r['time_limit_s']:g} s" for _, r in found if r.get("time_limit_s") is not None})
    sa_peak = first["store_all_peak_bytes"]
    fast_peak = first.get("fast_store_all_peak_bytes")
    lines = [f"## {model}, batch {batch}", "",
             f"MONeT did not measure this model: budgets are fractions of the profile's lean store-all peak "
             f"({sa_peak / 1e9:.2f} GB, predicted step {first['store_all_step_ms']:.2f} ms)" +
             (f" or of the fast store-all's ({fast_peak / 1e9:.2f} GB, {first['fast_store_all_step_ms']:.2f} ms)"
              if fast_peak else "") + "; full-mode solves of "
             f"{', '.join(limits) or '-'}" +
             (f" on {first['threads']} threads" if first.get("threads") else "") + ". Store-all " +
             (f"measured {sa_run['peak_bytes'] / 1e9:.2f} GB, {sa_run['step_ms_median']:.2f} ms"
              if sa_run else "not run on a GPU yet") +
             (f"; the fast store-all {fast_run['step_ms_median']:.2f} ms" if fast_run else "") +
             (f". PyTorch eager: {eager['peak_bytes'] / 1e9:.2f} GB, {eager['step_ms']:.2f} ms"
              if eager and eager.get("peak_bytes") and eager.get("step_ms") else "") +
             (f"; with SDPA {sdpa['peak_bytes'] / 1e9:.2f} GB, {sdpa['step_ms']:.2f} ms"
              if sdpa and sdpa.get("peak_bytes") else "") + "."]
    if torch:
        lines.append(f"GPU run: {torch['title']}.")
    lines += ["", "| budget | of store-all | of fast store-all | predicted peak | predicted overhead | gap | "
              "predicted vs eager | measured peak | measured overhead | measured / predicted step | vs eager | "
              "vs eager SDPA | check | torch.compile at that memory | timeline |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for gb, r in found:
        cells = [f"{gb:.2f} GB", f"{gb * 1e9 / sa_peak:.2f}" if sa_peak else "-",
                 f"{gb * 1e9 / fast_peak:.2f}" if fast_peak else "-"]
        if r and r.get("fits"):
            cells += [f"{r['predicted_peak_bytes'] / 1e9:.2f} GB", pct(r["overhead"]),
                      f"{100 * r['gap']:.2f}%" if r.get("gap") is not None else "-"]
        else:
            cells += [f"none ({r['status']})" if r else "not solved", "-", "-"]
        cells.append(pct(predicted_vs_eager(r, eager)))
        run_r = load(os.path.join(out, f"run_full_{tag(gb)}.json"))
        measured, _, _ = measured_cells(run_r, sa_run, eager)
        ratios.append(step_ratio(run_r, r))
        measured.insert(2, ratio_cell(ratios[-1]))
        vs_sdpa = (run_r["step_ms_median"] / sdpa["step_ms"] - 1) if run_r and sdpa else None
        cells += measured + [pct(vs_sdpa), check_cell(load(os.path.join(out, f"check_full_{tag(gb)}.json"))),
                             compile_cell(compiled, gb, sa_run), timeline_cell(a, out, gb)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += within_line(ratios)
    lines.append("")
    return lines


def table_stage(a, monet):
    lines = ["# The schedule zoo", "",
             "Five models at the budgets of MONeT's table (utsaslab/MONeT, \"Results\"): monet's full-mode schedule, "
             "with checkpoint mode (keep/recompute only) and sqrt(n) checkpointing for contrast, each solved on the "
             f"model's {a.gpu.upper()} profile and run on that GPU. Regenerate: `bash scripts/zoo.sh` (on a GPU machine "
             "every stage; without one the solve and table stages). Overheads are step time against monet's own "
             "store-all at the same batch (the profile's lean store-all, run on the GPU), as MONeT's are against its "
             "own; 'vs eager' is against PyTorch eager's measured step. 'check' is `monet-check --reference "
             "store-all --math fp32`: one training step of the schedule against store-all on the same "
             "implementations and cuDNN algorithms (bitwise required), and the largest relative gradient "
             "difference against the lean store-all (other kernels round differently); '-' where it was not run.", ""]
    for model in a.models:
        batch, torch_gb, published = monet[model]
        out = os.path.join(model_dir(model, batch), "zoo")
        reports = {(m, gb): load(os.path.join(out, f"report_{m}_{tag(gb)}.json")) for gb, _ in published for m in MODES}
        if not any(reports.values()):
            continue
        first = next(r for r in reports.values() if r)
        sa_run = load(os.path.join(out, "run_store-all.json"))
        torch, eager, _, compiled = pytorch_rows(out)
        limits = sorted({f"{r['time_limit_s']:g} s ({r['mode']})" for r in reports.values() if r})
        lines += [f"## {model}, batch {batch}", ""]
        found = sorted(glob.glob(os.path.join(model_dir(model, batch), "*", "profile*.json")))
        profile = first.get("profile") or (os.path.relpath(found[0], ROOT) if found else "-")
        timing = profile_timing(profile)
        lines.append(f"Profile `{profile}`" + (f" (node times: {timing})" if timing else "") +
                     f"; solves of {', '.join(limits)} on {first['threads']} "
                     f"threads. Store-all: predicted peak {first['store_all_peak_bytes'] / 1e9:.2f} GB, step "
                     f"{first['store_all_step_ms']:.2f} ms (the sum of the profile's node times)" +
                     (f"; measured {sa_run['peak_bytes'] / 1e9:.2f} GB, {sa_run['step_ms_median']:.2f} ms"
                      if sa_run else "; not run on a GPU yet") +
                     f". PyTorch eager: {torch_gb:.2f} GB in MONeT's table (PyTorch 1.5)" +
                     (f"; measured here {eager['peak_bytes'] / 1e9:.2f} GB, {eager['step_ms']:.2f} ms"
                      if eager and eager.get("peak_bytes") else "") + ".")
        if torch:
            lines.append(f"GPU run: {torch['title']}.")
        lines += ["", "| budget | predicted peak | predicted overhead | gap | predicted vs eager | measured peak | "
                  "measured overhead | measured / predicted step | vs eager | check | checkpoint mode | sqrt(n) | "
                  "MONeT | torch.compile at that memory | timeline |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        below = below_vs_eager = measured = predicted_below_vs_eager = 0
        ratios = []
        for gb, monet_overhead in published:
            r = reports[("full", gb)]
            cells = [f"{gb:.2f} GB"]
            if r and r["fits"]:
                cells += [f"{r['predicted_peak_bytes'] / 1e9:.2f} GB", pct(r["overhead"]),
                          f"{100 * r['gap']:.2f}%" if r.get("gap") is not None else "-"]
            else:
                cells += [f"none ({r['status']})" if r else "not solved", "-", "-"]
            predicted_eager = predicted_vs_eager(r, eager)
            cells.append(pct(predicted_eager))
            predicted_below_vs_eager += predicted_eager is not None and 100 * predicted_eager < monet_overhead
            run_r = load(os.path.join(out, f"run_full_{tag(gb)}.json"))
            run_cells, overhead, vs_eager = measured_cells(run_r, sa_run, eager)
            ratios.append(step_ratio(run_r, r))
            run_cells.insert(2, ratio_cell(ratios[-1]))
            if overhead is not None:
                measured += 1
                below += 100 * overhead < monet_overhead
                below_vs_eager += vs_eager is not None and 100 * vs_eager < monet_overhead
            cells += run_cells
            cells.append(check_cell(load(os.path.join(out, f"check_full_{tag(gb)}.json"))))
            for m in ("checkpoint", "sqrtn"):
                c = reports[(m, gb)]
                cells.append(pct(c["overhead"]) if c and c["fits"] else ("none" if c else "-"))
            cells.append(f"{monet_overhead:+.2f}%")
            cells.append(compile_cell(compiled, gb, sa_run))
            cells.append(timeline_cell(a, out, gb))
            lines.append("| " + " | ".join(cells) + " |")
        if eager and eager.get("step_ms") and not measured:
            lines += ["", f"Predicted below MONeT's overhead against PyTorch eager's step (MONeT's overheads are "
                      f"against its PyTorch's store-all): {predicted_below_vs_eager} of {len(published)} budgets."]
        if measured:
            lines += ["", f"Measured below MONeT's overhead: {below} of {len(published)} budgets "
                      f"({measured} run); against PyTorch eager's step (MONeT's overheads are against its "
                      f"PyTorch's store-all): {below_vs_eager} of {len(published)}."]
        lines += within_line(ratios)
        lines.append("")
    for model in a.transformers:
        lines += transformer_table(a, model, TRANSFORMERS[model])
    lines.append(f"Table written {datetime.date.today().isoformat()} by `scripts/zoo.py table`; 'not run' marks a "
                 "column the GPU stage has not filled yet.")
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(a.out, ROOT)}")


def main():
    global SCHEDULES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=["solve", "gpu", "table"])
    ap.add_argument("--models", default="resnet50,googlenet,unet,mobilenet_v2,vgg16",
                    help="MONeT's models (solve, gpu, table); table also takes gpt2 and bert (their zoo/ as the zoo "
                         "stage of scripts/gpu_session.sh leaves it), and without --models tables theirs where found")
    ap.add_argument("--gpu", default="h200", help="whose profiles: schedules/<model>_<batch>/<gpu>/ (default h200)")
    ap.add_argument("--modes", default=",".join(MODES), help="solve: the modes to solve (default: all three)")
    ap.add_argument("--time-limit", type=float, default=600)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--force", action="store_true", help="redo what is already done")
    ap.add_argument("--schedules", default=SCHEDULES,
                    help="the folder of the <model>_<batch>/ folders (default: schedules/; a GPU call's results: "
                         "their schedules/)")
    ap.add_argument("--out", help="table: the file written (default: schedules/README.md)")
    a = ap.parse_args()
    SCHEDULES = os.path.abspath(a.schedules)
    a.out = os.path.abspath(a.out or os.path.join(SCHEDULES, "README.md"))
    monet = monet_table()
    given = "--models" in sys.argv or any(x.startswith("--models=") for x in sys.argv)
    a.models = a.models.split(",")
    a.transformers = [m for m in a.models if m in TRANSFORMERS] if given else list(TRANSFORMERS)
    a.models = [m for m in a.models if m not in TRANSFORMERS]
    if a.transformers and a.stage != "table":
        sys.exit(f"zoo: --models: {', '.join(a.transformers)}: the {a.stage} stage takes MONeT's models only (the "
                 "transformers' solves and runs are scripts/gpu_session.sh's zoo stage)")
    a.modes = a.modes.split(",")
    for m in a.modes:
        if m not in MODES:
            sys.exit(f"zoo: --modes: '{m}' is not one of {', '.join(MODES)}")
    for m in a.models:
        if m not in monet:
            sys.exit(f"zoo: --models: '{m}' is not one of MONeT's models ({', '.join(monet)})")
    {"solve": solve_stage, "gpu": gpu_stage, "table": table_stage}[a.stage](a, monet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
