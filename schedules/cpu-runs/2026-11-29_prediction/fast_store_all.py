#!/usr/bin/env python3
"""Predicted against measured fast store-all step of a GPU call: for each bench table of the call (bench/*.json, the
row "monet store-all (fast, on the profile)"), the fast store-all's step on the same call's profile
(schedules/<model>_<batch>/<gpu>/profile.json), as `monet-solve --mode store-all` prints it.

Usage: fast_store_all.py CALLDIR [BUILD]   (BUILD: a build folder with apps/monet-solve; default build/)
"""
import glob
import json
import os
import re
import subprocess
import sys

call = sys.argv[1]
build = sys.argv[2] if len(sys.argv) > 2 else "build"
print(f"Fast store-all of {call}: measured (bench/*.json) against predicted on the call's profile\n")
print("| model | profile | predicted ms | measured ms | measured / predicted |")
print("|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(call, "bench", "*.json"))):
    bench = json.load(open(path))
    row = next((r for r in bench["rows"] if r["run"].startswith("monet store-all (fast")), None)
    profiles = glob.glob(os.path.join(call, "schedules", f"{bench['model']}_{bench['batch']}", "*", "profile.json"))
    if not row or not row.get("step_ms") or len(profiles) != 1:
        continue
    out = subprocess.run([os.path.join(build, "apps", "monet-solve"), profiles[0], "--budget", "1000GB", "--mode",
                          "store-all", "-o", os.devnull], capture_output=True, text=True, check=True).stdout
    predicted = float(re.search(r"fast store-all: peak .*?\), step ([0-9.]+) ms", out).group(1))
    print(f"| {bench['model']} b{bench['batch']} | `{os.path.relpath(profiles[0], call)}` | {predicted:.2f} | "
          f"{row['step_ms']:.2f} | {row['step_ms'] / predicted:.3f} |")
