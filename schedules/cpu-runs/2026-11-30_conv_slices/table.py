#!/usr/bin/env python3
"""SLICES.md from logs/: each row's predicted step on the measured profile (base) and with estimated forward /
data-gradient slice offers (est), against PyTorch eager's step measured on the same H200 (2026-11-30, call 2)."""
import glob
import os
import re

EAGER = {"vgg16": 127.5, "unet": 106.4, "resnet50": 86.2, "googlenet": 85.5, "mobilenet_v2": 107.0}
MONET = {("vgg16", "9.71"): -5.30, ("vgg16", "8.66"): -4.64, ("vgg16", "7.88"): -2.18, ("vgg16", "6.82"): 1.99,
         ("vgg16", "5.90"): 5.44, ("vgg16", "5.51"): 9.11, ("unet", "6.01"): 4.95, ("unet", "5.01"): 11.51,
         ("resnet50", "6.00"): 9.31, ("resnet50", "4.99"): 11.95, ("googlenet", "4.99"): 15.77,
         ("mobilenet_v2", "5.01"): 8.72}
here = os.path.dirname(os.path.abspath(__file__))


def step(path):
    if not os.path.exists(path):
        return None
    text = open(path).read()
    m = re.search(r"^predicted: .*? step ([0-9.]+) ms", text, re.M)
    if m:
        return float(m.group(1))
    return "none found" if "no schedule" in text else "?"


def fmt(v, eager):
    if not isinstance(v, float):
        return v or "-"
    return f"{v:.3f} ms ({100 * (v / eager - 1):+.2f}%)"


rows = []
for f in sorted(glob.glob(os.path.join(here, "logs", "solve_*_base*.log"))):
    name = os.path.basename(f)[len("solve_"):-len(".log")]
    m = re.match(r"(.+)_([0-9.]+)_base(_offload)?$", name)
    model, budget, off = m.group(1), m.group(2), m.group(3) or ""
    base, est = step(f), step(f.replace("_base", "_est"))
    rows.append((model, float(budget), budget, off, base, est))
rows.sort(key=lambda r: (r[0], -r[1], r[3]))
out = ["| row | MONeT | predicted, measured profile | predicted, with estimated slice offers |", "|---|---|---|---|"]
for model, _, budget, off, base, est in rows:
    e = EAGER[model]
    out.append(f"| {model} at {budget} GB{' --offload' if off else ''} | {MONET.get((model, budget), 0):+.2f}% | "
               f"{fmt(base, e)} | {fmt(est, e)} |")
text = "\n".join(out) + "\n\nPercentages: against PyTorch eager's step on the same H200 (call 2 of 2026-11-30).\n"
open(os.path.join(here, "SLICES.md"), "w").write(text)
print(text)
