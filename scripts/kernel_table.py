#!/usr/bin/env python3
"""Per-kernel GPU time table from Nsight Compute's CSV (ncu --csv --metrics gpu__time_duration.sum).

    kernel_table.py NCU.csv [--top 40]

Groups the kernels by name (template arguments kept, shortened to --width characters), and prints calls, total
and mean time per group, largest total first, and the sum over all kernels. Used by scripts/gpu_session.sh's
`kernels` stage to put our engine's kernels next to PyTorch's profiler table.
"""
import argparse
import csv
import sys
from collections import defaultdict

SCALE_TO_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
               "second": 1e3, "s": 1e3}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--width", type=int, default=100)
    a = ap.parse_args()
    try:
        text = open(a.csv, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        sys.exit(f"kernel_table.py: cannot read {a.csv}: {e.strerror}")
    # ncu prints its own "==PROF==" lines and the program's output around the CSV: keep the quoted rows.
    start = next((i for i, l in enumerate(text) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"kernel_table.py: {a.csv} has no ncu CSV header (\"ID\",...)")
    rows = list(csv.DictReader(l for l in text[start:] if l.startswith('"')))
    total = defaultdict(float)
    calls = defaultdict(int)
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit", "")
        if unit not in SCALE_TO_MS:
            sys.exit(f"kernel_table.py: {a.csv}: unknown time unit '{unit}' (kernel {r.get('Kernel Name')})")
        name = r["Kernel Name"]
        total[name] += float(r["Metric Value"].replace(",", "")) * SCALE_TO_MS[unit]
        calls[name] += 1
    if not total:
        sys.exit(f"kernel_table.py: {a.csv} holds no gpu__time_duration.sum values")
    all_ms = sum(total.values())
    print(f"{'kernel':<{a.width}} {'calls':>6} {'total ms':>9} {'mean us':>9} {'share':>6}")
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1])[:a.top]:
        short = name if len(name) <= a.width else name[: a.width - 3] + "..."
        print(f"{short:<{a.width}} {calls[name]:>6} {ms:>9.3f} {1e3 * ms / calls[name]:>9.1f} {100 * ms / all_ms:>5.1f}%")
    print(f"{'all kernels':<{a.width}} {sum(calls.values()):>6} {all_ms:>9.3f}")


if __name__ == "__main__":
    main()
