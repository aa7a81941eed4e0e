#!/usr/bin/env python3
"""Adds ESTIMATED batch-slice offers for forward and data-gradient convolutions to a measured CUDA profile.

What monet-profile --device cuda now times (time_conv_algorithms): for a Conv / ConvGradData (and the transposed
convolution's two) whose fastest deterministic whole-batch algorithm needs more than 64 MiB of workspace, that
problem over k equal slices of the batch, k the divisors of the batch from 2 up, until a slice's workspace is at
most 64 MiB. Profiles measured before have no such entries. This script writes them with an ASSUMED time and
workspace:
  - workspace: the whole batch's fastest algorithm's over k;
  - time: the whole batch's fastest time times the slowdown the same layer's weight gradient measured over k
    slices on the same profile (its `slices` entries against its default algorithm); for a k it did not measure,
    the ratio of the nearest measured k above, or beyond the largest measured k that one's ratio scaled by k over
    it; a layer whose weight gradient measured no slices: 1 + 3% per doubling of k.
The result is an estimate of what a profile of the current build would offer, not a measurement.

usage: estimate_slices.py PROFILE.json OUT.json
"""
import json
import math
import sys

SLICE_ENOUGH = 64 << 20


def wgrad_ratios(ca, conv_name):
    e = ca.get(conv_name + "/grad/ConvGradWeight0")
    if not e:
        return {}
    whole = [a for a in e["algorithms"] if a.get("chosen_by_default") and a.get("status") == "ok"]
    if not whole:
        return {}
    t1 = whole[0]["time_ms"]
    return {a["slices"]: a["time_ms"] / t1 for a in e["algorithms"] if "slices" in a and a.get("status") == "ok"}


def slowdown(ratios, k):
    if not ratios:
        return 1 + 0.03 * math.log2(k)
    above = [m for m in ratios if m >= k]
    if above:
        return max(1.0, ratios[min(above)])
    top = max(ratios)
    return max(1.0, ratios[top] * k / top)


def main(src, dst):
    p = json.load(open(src))
    batch = p["batch"]
    ca = p["device_info"].get("conv_algorithms", {})
    added = 0
    for name, e in ca.items():
        if "/grad/ConvGradWeight" in name or "/grad/ConvTransposeGradWeight" in name:
            continue
        algs = e["algorithms"]
        ok = [a for a in algs if a.get("status") == "ok" and a.get("deterministic") and "slices" not in a
              and a.get("algo", 0) < 999]
        if not ok:
            continue
        fastest = min(ok, key=lambda a: a["time_ms"])
        if fastest["workspace_bytes"] <= SLICE_ENOUGH:
            continue
        conv = name.split("/grad/")[0]
        ratios = wgrad_ratios(ca, conv)
        for k in range(2, batch + 1):
            if batch % k:
                continue
            ws = fastest["workspace_bytes"] // k
            algs.append({"algo": k * 1000 + fastest["algo"], "slices": k, "workspace_bytes": ws,
                         "deterministic": True, "chosen_by_default": False, "status": "ok",
                         "math": fastest.get("math", "default"),
                         "time_ms": fastest["time_ms"] * slowdown(ratios, k), "estimated": True})
            added += 1
            if ws <= SLICE_ENOUGH:
                break
    json.dump(p, open(dst, "w"))
    print(f"{src}: {added} estimated slice offers -> {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
