#!/usr/bin/env python3
"""Tests of the GPU session's benchmark scripts that need no GPU (no monet binary either):

- scripts/bench_roofline.py on a hand-made profile: bytes from the values (in-place writes of SgdUpdate counted),
  roofline time max(bytes / bandwidth, FLOPs / peak), library ops (cuDNN, cuBLAS) told apart from our kernels,
  a non-default implementation listed apart, BatchNormalization's default on cuDNN but its variant "ours" ours, the flags (>= 64 MB and < 50% of the bandwidth, ours only), the
  device's figures from its name, the refusal of a CPU profile without --bandwidth; and on the committed H200
  GPT-2 profile: its attention Softmax flagged, its MatMuls (cuBLAS) not;
- scripts/gpu_session_util.py: merge keeps one eager row first; zoo-from takes, per model, the first of several
  folders that holds its zoo schedules;
- scripts/zoo.py table on a hand-made zoo/ of GPT-2 (what gpu_session.sh's zoo stage leaves): one row per budget,
  largest first, its fraction of store-all, overheads against the lean store-all's run, PyTorch eager and SDPA, the
  check, the torch.compile row that fits; a budget not run says so; no table for BERT, which has no solves; and on
  a hand-made zoo/ of ResNet-50 solved but not run: each predicted step against eager's, counted against MONeT's;
- scripts/bench_pytorch.py (with PyTorch: skipped without it): the checkpointed forms of a CNN and of the UNet give
  eager's gradients bitwise, the compile budgets parse, and a --small CPU run of the tiny GPT-2 writes its table.

Run: /usr/bin/python3 test/scripts/test_bench_scripts.py (exit 0: pass)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
PY = sys.executable
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args, ok=0):
    r = subprocess.run([PY] + args, capture_output=True, text=True)
    if r.returncode != ok:
        print(r.stdout[-2000:], r.stderr[-2000:])
    return r


def tiny_profile(device_text):
    """A Conv (library), a Softmax moving 100 MB in 1 ms (and an output nothing reads: not counted), its
    output-activated second implementation, an SgdUpdate of 3 inputs writing two of them in place, a node of no
    time reading the Conv's and the Softmax's outputs, and a BatchNormalization of no time on cuDNN (its default)
    and on our kernels."""
    mb = 1_000_000
    values = [{"name": n, "bytes": b, "resident": r, "producer": p} for n, b, r, p in [
        ("x", 10 * mb, True, -1), ("w", 1 * mb, True, -1), ("y", 10 * mb, False, 0),
        ("s_in", 50 * mb, False, -1), ("s_out", 50 * mb, False, 1),
        ("p", 2 * mb, True, -1), ("g", 2 * mb, False, -1), ("m", 2 * mb, True, -1), ("unread", 30 * mb, False, 1)]]
    nodes = [
        {"name": "conv", "op": "Conv", "stage": "forward", "inputs": [0, 1], "outputs": [2], "time_ms": 1.0,
         "workspace_bytes": 0, "flops": 1e12},
        {"name": "softmax", "op": "Softmax", "stage": "forward", "inputs": [3], "outputs": [4, 8], "time_ms": 1.0,
         "workspace_bytes": 0, "flops": 1e6,
         "impls": [{"name": "default", "inputs": [3], "time_ms": 1.0, "workspace_bytes": 0},
                   {"name": "output", "inputs": [3], "time_ms": 0.02, "workspace_bytes": 0}]},
        {"name": "use", "op": "Sum", "stage": "backward", "inputs": [2, 4], "outputs": [], "time_ms": 0.0,
         "workspace_bytes": 0, "flops": 1.0},
        {"name": "sgd", "op": "SgdUpdate", "stage": "update", "inputs": [5, 6, 7], "outputs": [], "time_ms": 0.01,
         "workspace_bytes": 0, "flops": 1e5},
        {"name": "bn", "op": "BatchNormalization", "stage": "forward", "inputs": [0, 5, 5, 5, 5], "outputs": [],
         "time_ms": 0.0, "workspace_bytes": 0, "flops": 1.0,
         "impls": [{"name": "default", "inputs": [0, 5, 5, 5, 5], "time_ms": 0.0, "workspace_bytes": 0},
                   {"name": "ours", "inputs": [0, 5, 5, 5, 5], "time_ms": 0.0, "workspace_bytes": 0}]},
    ]
    return {"format": "monet-profile", "version": 2, "fingerprint": "0", "model": "toy", "batch": 1,
            "input_shape": [1, 3, 4, 4], "loss": "cross_entropy", "device": "cuda",
            "device_info": {"name": "cuda", "device": device_text}, "totals": {}, "values": values, "nodes": nodes}


def test_roofline(tmp):
    path = os.path.join(tmp, "toy.json")
    with open(path, "w") as f:
        json.dump(tiny_profile("NVIDIA H100 80GB HBM3 (sm_90, 81079 MiB), driver 13.0, math default"), f)
    out = os.path.join(tmp, "toy_roof.json")
    r = run([os.path.join(SCRIPTS, "bench_roofline.py"), path, "--json", out])
    check(r.returncode == 0, "bench_roofline runs on a toy profile")
    res = json.load(open(out))[0]
    check(res["bandwidth_gbs"] == 3350 and res["fp32_tflops"] == 66.9 and res["conv_tflops"] == 494.7,
          "H100 HBM3: 3350 GB/s, 66.9 TFLOPS fp32, TF32 for convolutions under math default")
    ops = {(o["op"], o["impl"]): o for o in res["ops"]}
    conv, soft, soft_out, sgd = (ops[("Conv", None)], ops[("Softmax", None)], ops[("Softmax", "output")],
                                 ops[("SgdUpdate", None)])
    check(not conv["ours"] and soft["ours"] and sgd["ours"], "Conv is a library call, Softmax and SgdUpdate ours")
    check(not ops[("BatchNormalization", None)]["ours"] and ops[("BatchNormalization", "ours")]["ours"],
          "BatchNormalization: its default (cuDNN's) a library call, its variant 'ours' ours")
    check(conv["bytes"] == 21_000_000 and abs(conv["roofline_ms"] - 1e12 / 494.7e12 * 1e3) < 1e-9,
          "Conv: 21 MB, compute-bound roofline at the TF32 peak")
    check(soft["bytes"] == 100_000_000 and abs(soft["roofline_ms"] - 100e6 / 3350e9 * 1e3) < 1e-9,
          "Softmax: 100 MB (its unread output not counted), memory-bound roofline")
    check(abs(soft["achieved_gbs"] - 100.0) < 1e-9 and abs(soft["bandwidth_fraction"] - 100 / 3350) < 1e-9,
          "Softmax: 100 GB/s achieved, 3% of the bandwidth")
    check(sgd["bytes"] == 10_000_000, "SgdUpdate: 3 reads and 2 in-place writes of 2 MB")
    check(abs(res["total"]["time_ms"] - 2.01) < 1e-9, "step total: default implementations only")
    flagged = [(c["node"], c["impl"]) for c in res["flagged"]]
    check(flagged == [("softmax", None)],
          f"flagged: the default Softmax only (not the Conv, not the fast implementation): {flagged}")
    check("Flagged: 1 calls" in r.stdout.strip().splitlines()[-1], "the markdown's last line is the flag summary")
    check(soft_out["time_ms"] == 0.02 and soft_out["bandwidth_fraction"] > 0.5,
          "the output-activated implementation is listed apart")

    with open(path, "w") as f:
        json.dump(tiny_profile("NVIDIA H200 (sm_90, 143155 MiB), math fp32"), f)
    r = run([os.path.join(SCRIPTS, "bench_roofline.py"), path, "--json", out])
    res = json.load(open(out))[0]
    check(res["bandwidth_gbs"] == 4800 and res["conv_tflops"] == 66.9, "H200 in fp32 math: 4800 GB/s, no TF32")
    r = run([os.path.join(SCRIPTS, "bench_roofline.py"), path, "--bandwidth", "1000", "--tflops", "10", "--json",
             out])
    res = json.load(open(out))[0]
    check(res["bandwidth_gbs"] == 1000 and res["fp32_tflops"] == 10, "--bandwidth and --tflops override")

    p = tiny_profile("")
    p["device"], p["device_info"] = "cpu", {"name": "cpu", "cpu": "some cpu"}
    with open(path, "w") as f:
        json.dump(p, f)
    r = run([os.path.join(SCRIPTS, "bench_roofline.py"), path], ok=1)
    check(r.returncode == 1 and "--bandwidth" in r.stderr, "a CPU profile without --bandwidth is refused")

    gpt2 = os.path.join(ROOT, "schedules", "gpt2_8", "h200", "profile.json")
    if os.path.exists(gpt2):
        r = run([os.path.join(SCRIPTS, "bench_roofline.py"), gpt2, "--json", out])
        res = json.load(open(out))[0]
        ops_flagged = {c["op"] for c in res["flagged"]}
        check("Softmax" in ops_flagged and not ops_flagged & {"MatMul", "MatMulGradA", "MatMulGradB"},
              f"GPT-2 b8 on the H200: Softmax flagged, no cuBLAS op: {sorted(ops_flagged)}")


def test_merge(tmp):
    a, b, out = (os.path.join(tmp, n) for n in ("a.json", "b.json", "m.json"))
    json.dump({"title": "t", "rows": [{"run": "pytorch eager", "kind": "eager"},
                                      {"run": "pytorch checkpoint_sequential (4 of 23)", "kind": "checkpoint"}]},
              open(a, "w"))
    json.dump({"title": "t2", "rows": [{"run": "pytorch compile (budget 0.5)", "kind": "compile"}]}, open(b, "w"))
    r = run([os.path.join(SCRIPTS, "gpu_session_util.py"), "merge", out, a, b, os.path.join(tmp, "missing.json")])
    rows = [x["run"] for x in json.load(open(out))["rows"]] if r.returncode == 0 else []
    check(rows == ["pytorch eager", "pytorch checkpoint_sequential (4 of 23)", "pytorch compile (budget 0.5)"],
          f"merge: eager first, then the other tables' rows: {rows}")
    r = run([os.path.join(SCRIPTS, "gpu_session_util.py"), "merge", out, os.path.join(tmp, "missing.json"), b], ok=1)
    check(r.returncode == 1, "merge refuses a missing first table (the eager row)")


def test_zoo_from(tmp):
    util = os.path.join(SCRIPTS, "gpu_session_util.py")
    a, b = os.path.join(tmp, "from_a"), os.path.join(tmp, "from_b")
    for d, m in ((a, "unet_11"), (b, "unet_11"), (b, "resnet50_184")):
        os.makedirs(os.path.join(d, m, "zoo"), exist_ok=True)
        open(os.path.join(d, m, "zoo", "schedule_full_5.01GB.json"), "w").write("{}")
    os.makedirs(os.path.join(a, "vgg16_176", "zoo"))  # a zoo folder without schedules does not count
    got = {m: run([util, "zoo-from", m, a, b]).stdout.strip() for m in ("unet_11", "resnet50_184", "vgg16_176")}
    check(got == {"unet_11": a, "resnet50_184": b, "vgg16_176": ""},
          f"zoo-from: the first folder with the model's schedules, none for a model without: {got}")
    check(run([util, "zoo-from", "vgg16_176", a, b], ok=1).returncode == 1, "zoo-from: exit 1 where no folder has them")


def test_summary(tmp):
    outdir = os.path.join(tmp, "call")
    os.makedirs(os.path.join(outdir, "bench"))
    json.dump({"title": "t", "model": "resnet50", "module": "resnet50", "batch": 4, "rows": [
        {"run": "pytorch eager", "kind": "eager", "step_ms": 100.0, "peak_bytes": 2e9, "error": ""},
        {"run": "monet store-all (fast, on the profile)", "kind": "monet", "step_ms": 99.0, "peak_bytes": 1e9,
         "error": "", "predicted_step_ms": 100.0},
        {"run": "monet store-all (fast)", "kind": "monet", "step_ms": 90.0, "peak_bytes": 1e9, "error": "",
         "predicted_step_ms": None}]}, open(os.path.join(outdir, "bench", "resnet50_4.json"), "w"))
    out = os.path.join(tmp, "SUMMARY.md")
    r = run([os.path.join(SCRIPTS, "gpu_session_util.py"), "summary", outdir, out])
    rows = [line for line in open(out).read().splitlines() if line.startswith("| resnet50")] if r.returncode == 0 else []
    check(len(rows) == 3 and rows[1].endswith("| 0.99 | 1.00 GB | 0.50 | 100.0 (0.990) |  |")
          and rows[0].endswith("| - |  |") and rows[2].endswith("| - |  |"),
          f"summary: measured / predicted beside the monet row that has a prediction: {rows}")


def test_zoo_cnn_table(tmp):
    """A zoo of ResNet-50 solved but not run (what a profiling call and zoo.py solve leave): each budget's predicted
    step against PyTorch eager's, and how many of MONeT's budgets that puts below MONeT's overhead."""
    sched = os.path.join(tmp, "cnn_schedules")
    zoo = os.path.join(sched, "resnet50_184", "zoo")
    os.makedirs(zoo)

    def dump(name, doc):
        json.dump(doc, open(os.path.join(zoo, name), "w"))

    # MONeT's ResNet-50 rows: 10.01 GB +3.22%, 9.01 GB +4.68%, ..., 4.99 GB +11.95%. Eager 100 ms: 103.0 ms is
    # below +3.22%, 105.0 ms above +4.68%; 4.99 GB has no schedule; the other three budgets are not solved.
    for gb, fits, predicted in ((10.01, True, 103.0), (9.01, True, 105.0), (4.99, False, 0.0)):
        dump(f"report_full_{gb:.2f}GB.json",
             {"fits": fits, "status": "feasible" if fits else "infeasible", "predicted_peak_bytes": gb * 1e9 - 1e7,
              "overhead": predicted / 90.0 - 1, "gap": 0.0, "store_all_peak_bytes": 15e9, "store_all_step_ms": 90.0,
              "predicted_step_ms": predicted, "time_limit_s": 60, "threads": 1, "mode": "full"})
    dump("pytorch.json", {"title": "resnet50 batch 184", "rows": [
        {"run": "pytorch eager", "step_ms": 100.0, "peak_bytes": 16.2e9}]})
    out = os.path.join(tmp, "CNN.md")
    r = run([os.path.join(SCRIPTS, "zoo.py"), "table", "--models", "resnet50", "--schedules", sched, "--out", out])
    text = open(out).read() if r.returncode == 0 else ""
    rows = {line.split(" |")[0]: line for line in text.splitlines() if line.startswith("| ") and "GB |" in line}
    check("| predicted vs eager |" in text, "zoo CNN table: a predicted-vs-eager column")
    check(rows.get("| 10.01 GB", "").startswith("| 10.01 GB | 10.00 GB | +14.44% | 0.00% | +3.00% | not run |")
          and rows.get("| 9.01 GB", "").startswith("| 9.01 GB | 9.00 GB | +16.67% | 0.00% | +5.00% | not run |"),
          f"zoo CNN table: predicted steps 103 and 105 ms against eager's 100 ms: {list(rows.values())[:2]}")
    check(rows.get("| 4.99 GB", "").startswith("| 4.99 GB | none (infeasible) | - | - | - | not run |"),
          "zoo CNN table: no prediction against eager where no schedule was found")
    check("Predicted below MONeT's overhead against PyTorch eager's step (MONeT's overheads are against its "
          "PyTorch's store-all): 1 of 6 budgets." in text,
          "zoo CNN table: +3.00% is below MONeT's +3.22%, +5.00% is not below its +4.68%")


def test_zoo_transformer_table(tmp):
    sched = os.path.join(tmp, "schedules")
    zoo = os.path.join(sched, "gpt2_8", "zoo")
    os.makedirs(zoo)
    os.makedirs(os.path.join(sched, "bert_32", "zoo"))  # no solves: no table
    sa_peak, sa_ms = 9.0e9, 130.0

    def dump(name, doc):
        json.dump(doc, open(os.path.join(zoo, name), "w"))

    for gb, fits, overhead, predicted in ((4.50, True, 0.11, 133.0), (3.00, True, 0.24, 161.2),
                                          (2.00, False, 0.0, 0.0)):
        dump(f"report_full_{gb:.2f}GB.json",
             {"fits": fits, "status": "feasible" if fits else "infeasible", "predicted_peak_bytes": gb * 1e9 - 1e7,
              "overhead": overhead, "gap": 0.01, "store_all_peak_bytes": sa_peak, "store_all_step_ms": sa_ms,
              "fast_store_all_peak_bytes": 14.0e9, "fast_store_all_step_ms": 118.5, "predicted_step_ms": predicted, "time_limit_s": 60, "threads": 2})
    dump("run_store-all.json", {"peak_bytes": sa_peak, "step_ms_median": 120.0})
    dump("run_store-all-fast.json", {"peak_bytes": sa_peak, "step_ms_median": 118.0})
    dump("run_full_4.50GB.json", {"peak_bytes": 4.49e9, "step_ms_median": 132.0})
    dump("run_full_3.00GB.json", {"peak_bytes": 2.99e9, "step_ms_median": 150.0})
    dump("check_full_3.00GB.json", {"pass": True, "max_rel_diff": 0.0, "lean_store_all": {"max_rel_diff": 2e-5}})
    dump("pytorch.json", {"title": "gpt2 batch 8", "rows": [
        {"run": "pytorch eager", "step_ms": 200.0, "peak_bytes": 17.4e9},
        {"run": "pytorch eager sdpa", "step_ms": 160.0, "peak_bytes": 12.6e9},
        {"run": "pytorch compile (budget 0.3)", "step_ms": 180.0, "peak_bytes": 4.0e9}]})
    out = os.path.join(tmp, "ZOO.md")
    r = run([os.path.join(SCRIPTS, "zoo.py"), "table", "--schedules", sched, "--out", out])
    text = open(out).read() if r.returncode == 0 else ""
    rows = [line for line in text.splitlines() if line.startswith("| ") and "GB |" in line]
    check("## gpt2, batch 8" in text and "## bert" not in text, "zoo table: GPT-2's table, none for BERT without solves")
    check(len(rows) == 3 and rows[0].startswith("| 4.50 GB | 0.50 | 0.32 |")
          and rows[2].startswith("| 2.00 GB | 0.22 | 0.14 |"),
          f"zoo table: a row per budget, largest first, with its fractions of the lean and the fast store-all: {rows}")
    check("or of the fast store-all's (14.00 GB, 118.50 ms)" in text, "zoo table: the fast store-all's peak and step")
    want = ("| 3.00 GB | 0.33 | 0.21 | 2.99 GB | +24.00% | 1.00% | -19.40% | 2.99 GB | +25.00% | 0.931 | -25.00% | "
            "-6.25% | bitwise; vs lean 2.0e-05 |")
    check(len(rows) == 3 and rows[1].startswith(want),
          f"zoo table: measured against the lean store-all's run (150/120), the prediction (150/161.2), eager "
          f"(150/200) and SDPA (150/160): {rows[1] if len(rows) == 3 else rows}")
    check("Measured step within 5% of the predicted: 1 of 2 runs (measured / predicted 0.931 to 0.992)." in text,
          "zoo table: how many runs measured within 5% of their predicted step")
    check(len(rows) == 3 and rows[0].endswith("| +50.00% (4.00 GB) | - |") and rows[1].endswith("| none fits | - |")
          and "none (infeasible)" in rows[2] and "not run" in rows[2],
          f"zoo table: the fitting compile row, a budget without a schedule: {rows}")
    check("the fast store-all 118.00 ms" in text and "with SDPA 12.60 GB, 160.00 ms" in text,
          "zoo table: the fast store-all and SDPA in the model's line")


def test_bench_pytorch(tmp):
    try:
        import torch
        from torch.utils.checkpoint import checkpoint_sequential
    except ImportError:
        print("skip bench_pytorch tests: no torch")
        return
    sys.path.insert(0, SCRIPTS)
    import bench_pytorch as bp
    check(bp.parse_budgets("default,1/2,0.25") == [None, 0.5, 0.25], "compile budgets: default, 1/2, 0.25")
    try:
        bp.parse_budgets("2")
        check(False, "a budget above 1 is refused")
    except ValueError:
        check(True, "a budget above 1 is refused")
    em = bp.load_export_models()
    for name in ("mobilenet_v2", "unet"):
        torch.manual_seed(0)
        m, _ = em.build(name)
        m.train()
        bp.no_inplace(m)
        x = torch.randn(2, 3, 32, 32)

        def grads(fn):
            for p in m.parameters():
                p.grad = None
            torch.manual_seed(5)
            fn(x).pow(2).mean().backward()
            return [p.grad.clone() for p in m.parameters()]
        g1 = grads(m)
        seq = bp.as_sequential(name, m)
        if seq is not None:
            g2 = grads(lambda t: checkpoint_sequential(seq, 3, t.detach().requires_grad_(True)))
        else:
            g2 = grads(bp.CheckpointedUNet(m))
        check(all(torch.equal(a, b) for a, b in zip(g1, g2)),
              f"{name}: the checkpointed form gives eager's gradients bitwise")
    out = os.path.join(tmp, "gpt2.json")
    r = run([os.path.join(SCRIPTS, "bench_pytorch.py"), "--model", "gpt2", "--device", "cpu", "--batch", "1",
             "--small", "--iters", "1", "--warmup", "0", "--rows", "sdpa,compile", "--json", out])
    doc = json.load(open(out)) if r.returncode == 0 else {"rows": []}
    kinds = [x["kind"] for x in doc["rows"]]
    check(kinds[:2] == ["eager", "sdpa"] and kinds.count("compile") == 3 and doc["rows"][0]["step_ms"] > 0,
          f"bench_pytorch --small on the CPU: eager timed, sdpa and 3 compile rows present: {kinds}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_roofline(tmp)
        test_merge(tmp)
        test_zoo_from(tmp)
        test_summary(tmp)
        test_zoo_transformer_table(tmp)
        test_zoo_cnn_table(tmp)
        test_bench_pytorch(tmp)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
