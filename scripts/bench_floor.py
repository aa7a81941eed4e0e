#!/usr/bin/env python3
"""The memory floor and MONeT's 30 published rows, on the zoo's measured GPU profiles.

For each zoo model: takes the committed measured profile of --gpu, or where it is of an earlier training graph
derives one of the current graph from it (monet-profile --rederive, no GPU: schedules/<model>_<batch>/<gpu>/
profile_derived.json), reads the lower bound on
any schedule's peak and the smallest budget the heuristics reach (monet-solve's report at a budget below both), the
lean store-all's peak beside PyTorch's (MONeT's table), then solves full mode at each of MONeT's published budgets
and writes one table side by side with MONeT's overheads (schedules/FLOOR.md; the schedules and reports beside the model's others:
schedules/<model>_<batch>/schedule_<gpu>_full_<budget>GB_<limit>s.json). A budget the zoo has solved on the same
profile with the same time limit (schedules/<model>_<batch>/zoo/report_full_<budget>GB.json, scripts/zoo.py) is
taken from there instead of solved again. The bisection solves for the smallest budget write theirs there too
(report_<gpu>_bisect_full_<budget>GB_<limit>s.json, and the schedule where one fits), so that every figure of
FLOOR.md is in a committed file: its floor table names the file each smallest found comes from, and its header the
commit the solves ran on.

Usage: /usr/bin/python3 scripts/bench_floor.py [--build build] [--gpu h200] [--time-limit 60] [--threads 2]
       [--models resnet50,...] [--out schedules/FLOOR.md]
       /usr/bin/python3 scripts/bench_floor.py --others [--base-build OTHER_BUILD] [--time-limit 150]
       (prints a table: every model's lower bound and the heuristics' smallest budget, here and in OTHER_BUILD)
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# MONeT's README (utsaslab/MONeT, "Results"): PyTorch's peak, then (budget GB, overhead %) per published schedule.
MONET = {
    "resnet50": (184, 15.06, [(10.01, 3.22), (9.01, 4.68), (8.01, 5.56), (6.99, 7.28), (6.00, 9.31), (4.99, 11.95)]),
    "googlenet": (320, 14.93, [(9.98, 7.13), (8.99, 7.87), (8.01, 8.44), (7.02, 9.71), (6.01, 12.14), (4.99, 15.77)]),
    "unet": (11, 14.32, [(10.01, -4.10), (9.01, -2.07), (8.02, -0.09), (7.00, 1.39), (6.01, 4.95), (5.01, 11.51)]),
    "mobilenet_v2": (272, 14.46, [(10.02, 2.40), (9.01, 3.10), (8.02, 4.77), (7.01, 5.53), (6.01, 7.55),
                                  (5.01, 8.72)]),
    "vgg16": (176, 14.12, [(9.71, -5.30), (8.66, -4.64), (7.88, -2.18), (6.82, 1.99), (5.90, 5.44), (5.51, 9.11)]),
}


def source_version():
    """The commit the solves run on, and whether the tracked files differ from it."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "an unknown commit (no git)"
    return f"commit {commit}" + (" with uncommitted changes" if dirty else "")


def run(cmd, ok=(0,)):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in ok:
        sys.exit(f"bench_floor: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r


# --others: the zoo at its batches, and torchvision CNNs exported like the zoo (export_models.py) at batch 64.
OTHERS = [("resnet50", 184), ("googlenet", 320), ("mobilenet_v2", 272), ("vgg16", 176), ("unet", 11),
          ("densenet121", 64), ("efficientnet_b0", 64), ("resnext50_32x4d", 64), ("mobilenet_v3_large", 64)]


def floor_of(build, onnx, batch, loss, work, limit):
    """(lower bound, smallest found) in GB on an estimated profile, from a monet build. The heuristics' smallest
    budget search gets a fifth of the time limit: on densenet121 it has not converged in 6 s (a 30 s limit)."""
    prof = os.path.join(work, "profile.json")
    run([os.path.join(build, "apps", "monet-profile"), onnx, "--batch", str(batch), "--loss", loss, "--device",
         "estimate", "-o", prof])
    rep = os.path.join(work, "report.json")
    run([os.path.join(build, "apps", "monet-solve"), prof, "--budget", "1MB", "--time-limit", f"{limit:g}", "-o",
         os.path.join(work, "schedule.json"), "--report", rep], ok=(2,))
    r = json.load(open(rep))
    return r["lower_bound_bytes"] / 1e9, r["smallest_found_bytes"] / 1e9


def others(a):
    work = os.path.join(a.build, "bench_floor_others")
    os.makedirs(work, exist_ok=True)
    lines = ["| model | batch | lower bound GB (base) | lower bound GB | smallest found GB (base) | smallest found GB |",
             "|---|---|---|---|---|---|"]
    for name, batch in OTHERS:
        onnx = os.path.join(ROOT, "models", f"{name}.onnx")
        if not os.path.exists(onnx):
            onnx = os.path.join(work, f"{name}.onnx")
            if not os.path.exists(onnx):
                run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "export_models.py"), "--out", work, name])
        loss = "ce"
        lb, found = floor_of(a.build, onnx, batch, loss, work, a.time_limit)
        base = floor_of(a.base_build, onnx, batch, loss, work, a.time_limit) if a.base_build else (float("nan"),) * 2
        lines.append(f"| {name} | {batch} | {base[0]:.2f} | {lb:.2f} | {base[1]:.2f} | {found:.2f} |")
        print(lines[-1], flush=True)
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--gpu", default="h200", help="whose measured profiles: schedules/<model>_<batch>/<gpu>/")
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default=",".join(MONET))
    ap.add_argument("--out", default=os.path.join(ROOT, "schedules", "FLOOR.md"))
    ap.add_argument("--others", action="store_true",
                    help="instead: lower bound and smallest found budget of every model on estimated profiles "
                         "(models/ and torchvision CNNs exported like them), beside --base-build's")
    ap.add_argument("--base-build", help="--others: another build (e.g. of an earlier commit) to compare with")
    ap.add_argument("--bisect", type=int, default=5, help="full-mode solves bisecting the smallest budget (default 5)")
    ap.add_argument("--bisect-limit", type=float, default=20, help="time limit of each bisection solve (default 20 s)")
    a = ap.parse_args()
    if a.others:
        return others(a)
    models = a.models.split(",")
    for m in models:
        if m not in MONET:
            sys.exit(f"bench_floor: --models: '{m}' is not one of {', '.join(MONET)}")
    version = source_version()  # before the solves write their files
    profile_bin = os.path.join(a.build, "apps", "monet-profile")
    solve_bin = os.path.join(a.build, "apps", "monet-solve")
    limit = f"{a.time_limit:g}"
    rows, floors = [], []
    for m in models:
        batch, torch_gb, published = MONET[m]
        d = os.path.join(ROOT, "schedules", f"{m}_{batch}")
        measured = os.path.join(d, a.gpu, "profile.json")
        derived = os.path.join(d, a.gpu, "profile_derived.json")
        if not os.path.exists(measured):
            sys.exit(f"bench_floor: --gpu {a.gpu}: no measured profile {os.path.relpath(measured, ROOT)} "
                     "(scripts/gpu_session.sh zoo measures one)")
        meta = json.load(open(measured))
        shape = ",".join(str(x) for x in meta["input_shape"][1:])
        loss = "sum" if meta["loss"] == "sum" else "ce"
        run([profile_bin, os.path.join(ROOT, "models", f"{m}.onnx"), "--batch", str(batch), "--input-shape", shape,
             "--loss", loss, "--rederive", measured, "-o", derived])
        fingerprint = json.load(open(derived))["fingerprint"]
        if fingerprint == meta["fingerprint"]:
            os.remove(derived)  # measured on the current graph: the measured profile is the one to solve on
            derived = measured
        out = d  # beside the model's other schedules: test/cli/zoo_schedules.sh replays every one
        report = os.path.join(out, f"report_{a.gpu}_floor.json")
        run([solve_bin, derived, "--budget", "1MB", "--time-limit", limit, "--threads", str(a.threads), "-o",
             os.path.join(out, f"schedule_{a.gpu}_floor.json"), "--report", report], ok=(2,))
        r = json.load(open(report))
        floor = {"model": m, "batch": batch, "lower_bound": r["lower_bound_bytes"] / 1e9,
                 "found": r["smallest_found_bytes"] / 1e9, "found_in": report, "store_all": r["store_all_peak_bytes"] / 1e9,
                 "store_all_ms": r["store_all_step_ms"], "torch": torch_gb, "monet_min": published[-1][0]}
        for gb, monet_overhead in published:
            tag = f"{gb:.2f}GB"
            zoo = os.path.join(d, "zoo", f"report_full_{tag}.json")
            z = json.load(open(zoo)) if os.path.exists(zoo) else {}
            if z.get("fingerprint") == fingerprint and z.get("time_limit_s") == a.time_limit and \
                    z.get("profile") == os.path.relpath(derived, ROOT):
                s, fits, src, rep = z, z["fits"], "zoo", zoo
            else:
                rep = os.path.join(out, f"report_{a.gpu}_full_{tag}_{limit}s.json")
                res = run([solve_bin, derived, "--budget", f"{gb}GB", "--mode", "full", "--time-limit", limit,
                           "--threads", str(a.threads), "-o", os.path.join(out, f"schedule_{a.gpu}_full_{tag}_{limit}s.json"),
                           "--report", rep], ok=(0, 2, 4))
                s, fits, src = json.load(open(rep)), res.returncode == 0, "here"
            if fits and s["predicted_peak_bytes"] / 1e9 < floor["found"]:
                floor["found"], floor["found_in"] = s["predicted_peak_bytes"] / 1e9, rep
            rows.append({"model": m, "budget": gb, "monet": monet_overhead, "status": s["status"], "fits": fits, "src": src,
                         "overhead": s["overhead"] * 100 if fits else None, "gap": s.get("gap"),
                         "peak": s["predicted_peak_bytes"] / 1e9 if fits else None})
            print(f"{m} {gb} GB: {s['status']}" + (f", {rows[-1]['overhead']:+.2f}% (MONeT {monet_overhead:+.2f}%)"
                                                    if fits else ""), flush=True)
        # Bisection between the lower bound and the smallest budget met so far, with full-mode solves: a budget
        # with a schedule lowers the top (to the schedule's peak), one without (proven or not) raises the bottom.
        # Each solve's report (and schedule, where one fits) is written beside the model's others, to be committed.
        lo, hi = floor["lower_bound"], floor["found"]
        for _ in range(a.bisect):
            mid = round((lo + hi) / 2, 3)
            if hi - lo < 0.01:
                break
            name = f"{a.gpu}_bisect_full_{mid:.3f}GB_{a.bisect_limit:g}s.json"
            rep = os.path.join(out, f"report_{name}")
            res = run([solve_bin, derived, "--budget", f"{mid}GB", "--mode", "full", "--time-limit",
                       f"{a.bisect_limit:g}", "--threads", str(a.threads), "-o", os.path.join(out, f"schedule_{name}"),
                       "--report", rep], ok=(0, 2, 4))
            if res.returncode == 0:
                peak = json.load(open(rep))["predicted_peak_bytes"] / 1e9
                if peak < hi:
                    hi, floor["found_in"] = peak, rep
            else:
                lo = mid
        floor["found"] = hi
        floors.append(floor)
        print(f"{m}: lower bound {floor['lower_bound']:.2f} GB, smallest found {floor['found']:.2f} GB, "
              f"store-all {floor['store_all']:.2f} GB (PyTorch {torch_gb} GB)", flush=True)

    day = datetime.date.today().isoformat()
    lines = [
        "# The memory floor, and MONeT's published rows",
        "",
        f"Measured {day} on {version} by `scripts/bench_floor.py --gpu {a.gpu} --time-limit {limit} --threads "
        f"{a.threads}` on this project's 2-core machine, on the committed {a.gpu.upper()} profiles (`schedules/<model>_<batch>/"
        f"{a.gpu}/profile.json`, every cuDNN algorithm timed; `monet-profile --rederive` carries one measured on an "
        "earlier training graph onto the current one as `profile_derived.json`). Our bytes count everything: "
        "parameters, their gradients, momentum, the batch, activations, gradients and workspace. MONeT's figures are "
        "its README's (PyTorch 1.5 on its own GPU); overheads are each against its own store-all. The lower bound "
        "is what every schedule needs at its worst step (`lower_bound_bytes`); the smallest found is the least peak "
        f"of a schedule found: the heuristics', MONeT's budgets and {a.bisect} full-mode bisection solves of "
        f"{a.bisect_limit:g} s between the two, each in the report the last column names "
        f"(`schedules/<model>_<batch>/report_{a.gpu}_*.json`). Rows marked 'zoo' were solved by the zoo (`scripts/zoo.py`, the "
        "same profile and time limit; `scripts/gpu_session.sh zoo` solves them on the GPU machine's cores) and are "
        "read from `schedules/<model>_<batch>/zoo/`; measured runs of them are in `schedules/README.md`.",
        "",
        "| model | batch | lower bound GB | smallest found GB | MONeT's smallest GB | lean store-all GB | PyTorch (MONeT) GB | smallest found in |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in floors:
        lines.append(f"| {f['model']} | {f['batch']} | {f['lower_bound']:.2f} | {f['found']:.2f} | {f['monet_min']:.2f} "
                     f"| {f['store_all']:.2f} | {f['torch']:.2f} | `{os.path.relpath(f['found_in'], ROOT)}` |")
    lines += ["", f"Full mode, {limit} s, {a.threads} threads, at MONeT's budgets:", "",
              "| model | budget GB | MONeT overhead | ours | our overhead | gap | predicted peak GB | solved |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = f"{r['overhead']:+.2f}%" if r["fits"] else "-"
        gap = f"{r['gap'] * 100:.2f}%" if r["fits"] and r["gap"] is not None else "-"
        peak = f"{r['peak']:.2f}" if r["fits"] else "-"
        lines.append(f"| {r['model']} | {r['budget']:.2f} | {r['monet']:+.2f}% | {r['status']} | {ours} | {gap} | {peak} "
                     f"| {r['src']} |")
    feasible = sum(r["fits"] for r in rows)
    below = sum(1 for r in rows if r["fits"] and r["overhead"] < r["monet"])
    lines += ["", f"{feasible} of {len(rows)} rows have a schedule; {below} of them are predicted below MONeT's "
              "overhead.", ""]
    with open(a.out + ".tmp", "w") as fh:
        fh.write("\n".join(lines))
    os.replace(a.out + ".tmp", a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
