#!/usr/bin/python3
"""Prints the measured solver tables (Markdown) from the reports in schedules/*/report_*.json (but bench_floor.py's
report_<gpu>_*, as report_h200_*): one table per time limit and thread count (as each report records them), shortest limit first, then
schedules/SOLVER-notes.md."""
import glob
import json
import os
import re

root = os.path.join(os.path.dirname(__file__), "..", "schedules")
groups = {}
for path in sorted(glob.glob(os.path.join(root, "*", "report_*.json"))):
    if re.match(r"report_h\d+_", os.path.basename(path)):
        continue  # scripts/bench_floor.py's (schedules/FLOOR.md), on a GPU's measured profiles
    r = json.load(open(path))
    frac = r["budget_bytes"] / max(r["store_all_peak_bytes"], 1)
    groups.setdefault((r["time_limit_s"], r["threads"]), []).append((r["model"], frac, r["mode"], r))

print("# Solver benchmark (scripts/bench_solver.sh)")
for (limit, threads), rows in sorted(groups.items()):
    print()
    print(f"## Time limit {limit:g} s, {threads} threads")
    print()
    print("| model | batch | mode | budget (of store-all) | budget GB | window | columns | rows | nonzeros |"
          " first feasible s | solve s | status | gap | LP bound gap | predicted peak GB | overhead vs store-all |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model, frac, mode, r in sorted(rows, key=lambda x: (x[0], x[1], x[2])):
        lp_gap = ""
        if r.get("fits", False) and r.get("lp_bound_ms"):
            lp_gap = f"{100 * (r['predicted_step_ms'] - r['lp_bound_ms']) / r['predicted_step_ms']:.2f}%"
        window = str(r["window"]) if r.get("window", 0) > 0 else "none"
        if r.get("widened_steps", 0) > 0:
            window += f" (up to {r['widened_levels']} at {r['widened_steps']} steps)"
        print(f"| {model} | {r['batch']} | {mode} | {frac:.3f} | {r['budget_bytes'] / 1e9:.2f} | {window} | {r['columns']} |"
              f" {r['rows']} | {r['nonzeros']} | {r['time_to_first_feasible_s']:.1f} | {r['solve_s']:.1f} |"
              f" {r['status']} | {100 * r['gap']:.2f}% | {lp_gap} | {r['predicted_peak_bytes'] / 1e9:.2f} |"
              f" {100 * r['overhead']:+.2f}% |")
print()
print("Estimated profiles (H100-SXM roofline). 'window': the recomputation window in levels (planner.md, 'The"
      " window'). 'gap' is against CBC's proven bound, 'LP bound gap' against the LP"
      " relaxation; both relative to the predicted step time. A budget with no schedule reports why: proven below"
      " the lower bound (infeasible, 0 columns), or none found in the time limit.")
notes = os.path.join(root, "SOLVER-notes.md")
if os.path.exists(notes):
    print()
    print(open(notes).read().rstrip())
