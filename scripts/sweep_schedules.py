#!/usr/bin/python3
"""The schedule sweep: models monet was not built around, planned below store-all and run, on the CPU.

Usage: /usr/bin/python3 scripts/sweep_schedules.py [--models resnet18,swin_t,...] [--fractions 0.5,0.15]
       [--build build] [--work DIR] [--json OUT.json] [--time-limit 60] [--host-bandwidth 25] [--opset 17]

For each model (torchvision builders, exported as scripts/sweep_torchvision.py exports them, at its input sizes,
batch 2; the repository's tiny transformers from test/data): an estimated profile with a host link, the lower bound
and the lean store-all's peak (a probe solve at 1 byte), then for each fraction f a budget of
lower bound + f (store-all - lower bound), solved in full mode without and with --offload, by work done (CBC at its
root node and one sub-MIP, or --time-limit, whichever ends first; one thread). Each schedule found is checked with
`monet-check --schedule --reference store-all` (one step bitwise equal to store-all on the same implementations) and
run once with `monet-run --schedule` (the arena's measured peak equal to the predicted one, and with copies the host
arena's equal to the simulator's). Prints one Markdown row per model, fraction and mode as it goes; --json writes
them. A row with a failing check or run is a bug; "none" (no schedule found in the limit) is not.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# One model of each architecture family (torchvision 0.14): convolutions with concatenations, depthwise and
# squeeze-excitation blocks, channel shuffles, fire modules, transformers with windows and grids, segmentation heads.
DEFAULT_MODELS = ("resnet18,densenet121,efficientnet_b0,mobilenet_v3_small,shufflenet_v2_x1_0,squeezenet1_1,"
                  "regnet_y_400mf,mnasnet0_5,convnext_tiny,inception_v3,googlenet,swin_t,lraspp_mobilenet_v3_large,"
                  "fcn_resnet50,gpt2_tiny,bert_tiny,llama_tiny")
# The repository's transformer files (token ids in): no export, no input shape.
TEST_DATA = {"gpt2_tiny": "gpt2_tiny.onnx", "bert_tiny": "bert_tiny.onnx", "llama_tiny": "llama_tiny.onnx"}


def run(cmd, timeout):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return None, f"timeout ({timeout} s)"


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:140] if lines else ""


def model_file(name, work, opset):
    """The ONNX file and its --input-shape arguments (export errors raise)."""
    if name in TEST_DATA:
        return os.path.join(ROOT, "test", "data", TEST_DATA[name]), []
    import torch
    from sweep_torchvision import builders, export, input_size
    for family in ("classification", "segmentation"):
        found = builders(family).get(name)
        if found:
            torch.manual_seed(0)
            chw = input_size(name)
            path = os.path.join(work, f"{name}.onnx")
            export(found[0](), chw, path, opset)
            return path, ["--input-shape", ",".join(map(str, chw))]
    raise SystemExit(f"sweep_schedules.py: unknown model '{name}'")


def check_schedule(bin_dir, path, shape, schedule, offload, timeout):
    """'PASS' or the first thing that failed: the bitwise check against store-all, then one run's peaks."""
    code, out = run([os.path.join(bin_dir, "monet-check"), path, "--schedule", schedule, "--reference", "store-all"],
                    timeout)
    if code != 0 or "bitwise equal, PASS" not in out:
        return "check: " + last_line(out)
    code, out = run([os.path.join(bin_dir, "monet-run"), path, "--schedule", schedule, "--iters", "1", "--warmup",
                     "0"], timeout)
    if code != 0:
        return "run: " + last_line(out)
    if not re.search(r"predicted [0-9,]* bytes \(equal\)", out):
        return "run: arena peak differs from the prediction"
    if offload and "offloaded: host arena" in out and not re.search(
            r"offloaded: host arena ([0-9,]+) bytes \(predicted \1\)", out):
        return "run: host arena differs from the prediction"
    return "PASS"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--fractions", default="0.5,0.15", help="budgets between the lower bound (0) and store-all (1)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--host-bandwidth", type=float, default=25)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--timeout", type=int, default=900, help="per command, seconds")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="monet-schedule-sweep-")
    os.makedirs(work, exist_ok=True)
    bin_dir = os.path.join(args.build, "apps")
    fractions = [float(f) for f in args.fractions.split(",")]
    rows = []
    print("| model | budget | of store-all | mode | solve | overhead | copies | check and run | s |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)

    def emit(row):
        rows.append(row)
        over = f"{100 * row['overhead']:+.2f}%" if row.get("overhead") is not None else ""
        share = f"{row['share']:.2f}" if row.get("share") else ""
        print(f"| {row['model']} | {row.get('budget', '')} | {share} | {row.get('mode', '')} | {row['solve']} | "
              f"{over} | {row.get('copies', '')} | {row.get('check', '')} | {row['seconds']} |", flush=True)

    for name in [m for m in args.models.split(",") if m]:
        start = time.time()
        try:
            path, shape = model_file(name, work, args.opset)
        except Exception as e:  # noqa: BLE001 (a model torch cannot export is a row, not a stop)
            emit({"model": name, "solve": "export fails: " + last_line(str(e)), "seconds": 0})
            continue
        profile = os.path.join(work, f"{name}.profile.json")
        code, out = run([os.path.join(bin_dir, "monet-profile"), path, "--batch", "2", *shape, "--device", "estimate",
                         "--host-bandwidth", str(args.host_bandwidth), "-o", profile, "-q"], args.timeout)
        if code != 0:
            emit({"model": name, "solve": "profile: " + last_line(out), "seconds": round(time.time() - start, 1)})
            continue
        probe = os.path.join(work, f"{name}.probe.json")
        run([os.path.join(bin_dir, "monet-solve"), profile, "--budget", "1", "--report", probe, "-o",
             os.path.join(work, "none.json"), "-q"], args.timeout)
        p = json.load(open(probe))
        lower, store_all = p["lower_bound_bytes"], p["store_all_peak_bytes"]
        for f in fractions:
            budget = int(lower + f * (store_all - lower))
            for offload in (False, True):
                begun = time.time()
                tag = f"{name}_{f}_{'offload' if offload else 'plain'}"
                schedule, report = os.path.join(work, tag + ".json"), os.path.join(work, tag + ".report.json")
                cmd = [os.path.join(bin_dir, "monet-solve"), profile, "--mode", "full", "--budget", str(budget),
                       "--time-limit", str(args.time_limit), "--max-nodes", "1", "--max-sub-mips", "1", "--threads",
                       "1", "-o", schedule, "--report", report, "-q"]
                if offload:
                    cmd += ["--offload", "--host-limit", "4GB"]
                code, out = run(cmd, args.timeout)
                row = {"model": name, "budget": budget, "share": budget / store_all, "fraction": f,
                       "mode": "offload" if offload else "plain", "lower_bound": lower, "store_all": store_all}
                r = json.load(open(report)) if os.path.exists(report) else None
                if r is None or not r.get("fits"):
                    row["solve"] = "none" if r is not None else "error: " + last_line(out)
                else:
                    row["solve"] = r["status"]
                    row["overhead"] = r["overhead"]
                    row["copies"] = (r.get("offload") or {}).get("transfers", 0)
                    row["check"] = check_schedule(bin_dir, path, shape, schedule, offload, args.timeout)
                row["seconds"] = round(time.time() - begun, 1)
                emit(row)
        if path.startswith(work):
            os.remove(path)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    solved = [r for r in rows if "check" in r]
    passed = sum(r["check"] == "PASS" for r in solved)
    errors = sum(r["solve"].startswith(("error", "profile", "export")) for r in rows)
    print(f"\n{passed} of {len(solved)} schedules check and run as predicted; {errors} rows failed before a solve")


if __name__ == "__main__":
    main()
