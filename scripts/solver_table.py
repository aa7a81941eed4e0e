#!/usr/bin/python3
"""Prints the measured solver table (Markdown) from the reports in schedules/*/report_*.json."""
import argparse
import glob
import json
import os

ap = argparse.ArgumentParser()
ap.add_argument("--time-limit", default="?")
ap.add_argument("--threads", default="?")
args = ap.parse_args()
root = os.path.join(os.path.dirname(__file__), "..", "schedules")
rows = []
for path in sorted(glob.glob(os.path.join(root, "*", "report_*.json"))):
    r = json.load(open(path))
    rows.append((r["model"], r["batch"], r["mode"], r["budget_bytes"] / max(r["store_all_peak_bytes"], 1), r))

print("# Solver benchmark (scripts/bench_solver.sh)")
print()
print("| model | batch | mode | budget (of store-all) | budget GB | columns | rows | nonzeros | first feasible s |"
      " solve s | status | gap | LP bound gap | predicted peak GB | overhead vs store-all |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for model, batch, mode, frac, r in sorted(rows, key=lambda x: (x[0], x[3])):
    fits = r.get("fits", False)
    lp_gap = ""
    if fits and r.get("lp_bound_ms"):
        lp_gap = f"{100 * (r['predicted_step_ms'] - r['lp_bound_ms']) / r['predicted_step_ms']:.2f}%"
    print(f"| {model} | {batch} | {mode} | {frac:.3f} | {r['budget_bytes'] / 1e9:.2f} | {r['columns']} | {r['rows']} |"
          f" {r['nonzeros']} | {r['time_to_first_feasible_s']:.1f} | {r['solve_s']:.1f} | {r['status']} |"
          f" {100 * r['gap']:.2f}% | {lp_gap} | {r['predicted_peak_bytes'] / 1e9:.2f} |"
          f" {100 * r['overhead']:+.2f}% |")
print()
print(f"Time limit {args.time_limit} s, {args.threads} threads, estimated profiles (H100-SXM roofline). 'gap' is"
      " against CBC's proven bound, 'LP bound gap' against the LP relaxation; both relative to the predicted step"
      " time. A budget with no schedule reports why: proven below the lower bound (infeasible, 0 columns), or none"
      " found in the time limit.")
notes = os.path.join(root, "SOLVER-notes.md")
if os.path.exists(notes):
    print()
    print(open(notes).read().rstrip())
