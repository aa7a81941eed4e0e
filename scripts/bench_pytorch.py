#!/usr/bin/env python3
"""PyTorch and monet side by side: one training step (forward, loss, backward, SGD momentum 0.9) timed and measured.

Rows, from one run of this script:
  pytorch eager                  the torchvision model (scripts/export_models.py builds it, so it is the very model
                                 monet imports), median step time and torch.cuda.max_memory_allocated
  pytorch checkpoint_sequential  torch.utils.checkpoint.checkpoint_sequential with sqrt(n) segments, where the
                                 model is a chain of modules (resnet50, vgg16, mobilenet_v2); n/a otherwise
  pytorch compile (budget f)     torch.compile with torch._functorch.config.activation_memory_budget = f, one row
                                 per --compile-budgets fraction (PyTorch >= 2.4; n/a otherwise): the choice a
                                 PyTorch user has to trade time for memory
  monet store-all                monet-run --report: median step time, arena peak (= predicted)
  monet scheduled                monet-run --schedule S, one row per --schedule given

Examples:
  scripts/bench_pytorch.py --model resnet50 --batch 184                       (GPU)
  scripts/bench_pytorch.py --model resnet50 --device cpu --batch 2 --size 64   (smoke test without a GPU)
"""
import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load_export_models():
    spec = importlib.util.spec_from_file_location("export_models", os.path.join(HERE, "export_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def as_sequential(name, m):
    """The model as one chain of modules (for checkpoint_sequential), or None when it is not a chain."""
    import torch.nn as nn
    if name == "resnet50":
        return nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, *m.layer1, *m.layer2, *m.layer3, *m.layer4,
                             m.avgpool, nn.Flatten(1), m.fc)
    if name == "vgg16":
        return nn.Sequential(*m.features, m.avgpool, nn.Flatten(1), *m.classifier)
    if name == "mobilenet_v2":
        return nn.Sequential(*m.features, nn.AdaptiveAvgPool2d(1), nn.Flatten(1), *m.classifier)
    return None


def bench_torch(module, x, labels, args, device, checkpoint_segments=0):
    import torch
    import torch.nn.functional as F
    opt = torch.optim.SGD(module.parameters(), lr=args.lr, momentum=0.9)
    if checkpoint_segments:
        from torch.utils.checkpoint import checkpoint_sequential
        x = x.detach().requires_grad_(True)  # reentrant checkpointing needs an input that requires grad

    def step():
        if checkpoint_segments:
            out = checkpoint_sequential(module, checkpoint_segments, x)
        else:
            out = module(x)
        loss = out.sum() if args.loss == "sum" else F.cross_entropy(out.movedim(args.class_axis, 1), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    cuda = device.type == "cuda"
    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    ms = []
    for _ in range(args.iters):
        t0 = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    return statistics.median(ms), peak


def profile_torch(module, x, labels, args, path):
    """One eager step under torch.profiler: the CUDA kernels by total time, written to path (where the time goes,
    to compare with monet-profile's per-node table). A profiler failure is reported, not fatal."""
    import torch
    import torch.nn.functional as F
    opt = torch.optim.SGD(module.parameters(), lr=args.lr, momentum=0.9)

    def step():
        out = module(x)
        loss = out.sum() if args.loss == "sum" else F.cross_entropy(out.movedim(args.class_axis, 1), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    try:
        step()
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=40, max_name_column_width=90)
    except Exception as e:  # noqa: BLE001 - CUPTI missing, profiler API changes: the bench still runs
        table = f"torch.profiler failed: {e}"
    with open(path, "w") as f:
        f.write(table + "\n")
    print(f"wrote {path}", flush=True)


def run_monet(args, chw, schedule=None):
    exe = os.path.join(args.monet_bin, "monet-run")
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "run.json")
        cmd = [exe, args.onnx, "--device", args.device, "--iters", str(args.iters), "--warmup", str(args.warmup),
               "--loss", args.loss, "--lr", str(args.lr), "--report", report]
        if args.device == "cuda":
            cmd += ["--math", args.math]
        if schedule:
            cmd += ["--schedule", schedule]
        else:
            cmd += ["--batch", str(args.batch), "--input-shape", ",".join(map(str, chw))]
        print("+ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return None, None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        with open(report) as f:
            j = json.load(f)
        return j["step_ms_median"], j["peak_bytes"], ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=184)
    ap.add_argument("--size", type=int,
                    help="input height = width, or the sequence length of a token model (default: the model's)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--math", default="default", choices=["default", "fp32"],
                    help="default: TF32 in cuDNN convolutions, fp32 GEMMs (PyTorch's defaults); fp32: strict")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--loss", choices=["ce", "sum"], help="default: sum for unet (one class), else ce")
    ap.add_argument("--onnx", help="ONNX file for monet (default models/<model>.onnx)")
    ap.add_argument("--monet-bin", default=os.path.join(HERE, "..", "build", "apps"), help="directory of monet-run")
    ap.add_argument("--schedule", action="append", default=[],
                    help="SCHEDULE.json: also run monet with it (repeatable: one row per schedule)")
    ap.add_argument("--no-monet", action="store_true", help="PyTorch rows only")
    ap.add_argument("--compile-budgets", default="",
                    help="comma-separated activation_memory_budget fractions in [0, 1]: a torch.compile row for each")
    ap.add_argument("--json", help="write the table as JSON here")
    ap.add_argument("--torch-profile", help="cuda: write PyTorch eager's CUDA kernel times (one step) here")
    args = ap.parse_args()
    if args.torch_profile:  # refused before minutes of benchmarking, not after
        if args.device != "cuda":
            sys.exit("bench_pytorch.py: --torch-profile needs --device cuda (it times CUDA kernels)")
        folder = os.path.dirname(os.path.abspath(args.torch_profile))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            sys.exit(f"bench_pytorch.py: --torch-profile {args.torch_profile}: folder {folder} is not writable")
    args.loss = args.loss or ("sum" if args.model == "unet" else "ce")
    try:
        compile_fractions = [float(f) for f in args.compile_budgets.split(",") if f.strip()]
    except ValueError:
        sys.exit(f"bench_pytorch.py: --compile-budgets '{args.compile_budgets}': expected fractions like 0,0.5,1")
    if any(not 0 <= f <= 1 for f in compile_fractions):
        sys.exit(f"bench_pytorch.py: --compile-budgets '{args.compile_budgets}': each fraction must be in [0, 1]")
    transformers = os.path.join(HERE, "..", "models", "transformers", args.model + ".onnx")
    args.onnx = args.onnx or (transformers if os.path.exists(transformers) else
                              os.path.join(HERE, "..", "models", args.model + ".onnx"))

    try:
        import torch
    except ImportError as e:
        sys.exit(f"bench_pytorch.py: PyTorch is not importable: {e}")
    try:
        em = load_export_models()
    except ImportError as e:
        sys.exit(f"bench_pytorch.py: cannot build the torchvision models ({e}); install torchvision")
    torch.manual_seed(0)
    module, chw = em.build(args.model)
    tokens = getattr(module, "vocab_size", None) is not None  # a language model: token ids in, classes last
    if args.size:
        chw = (args.size,) if tokens else (chw[0], args.size, args.size)
    device = torch.device(args.device)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench_pytorch.py: --device cuda but torch.cuda.is_available() is False")
        torch.backends.cudnn.allow_tf32 = args.math == "default"  # PyTorch's defaults: True for cuDNN ...
        torch.backends.cuda.matmul.allow_tf32 = False              # ... and False for matmul
    module = module.to(device).train()
    x = em.example_input(module, chw, args.batch).to(device)
    with torch.no_grad():
        out_shape = module(x[:1]).shape
    # Classes on dim 1 for the CNNs, last for the token models (as monet's loss takes them).
    args.class_axis = len(out_shape) - 1 if tokens else 1
    classes = out_shape[args.class_axis]
    label_shape = [d for i, d in enumerate(out_shape) if i != args.class_axis][1:]
    labels = torch.randint(0, classes, (args.batch, *label_shape), device=device)

    rows = []
    t, peak = bench_torch(module, x, labels, args, device)
    rows.append(("pytorch eager", t, peak, ""))
    if args.torch_profile:
        profile_torch(module, x, labels, args, args.torch_profile)
    seq = as_sequential(args.model, module)
    if seq is None:
        rows.append(("pytorch checkpoint_sequential", None, None, "n/a: the model is not a chain of modules"))
    else:
        segments = max(1, int(math.sqrt(len(seq))))
        # Reentrant checkpointing hands each segment a detached input that requires grad: an in-place ReLU opening
        # a segment (vgg16's features) would write into that leaf and fail. Inside a segment the forward keeps
        # nothing, so out-of-place ReLUs cost the checkpointed run no memory outside the recomputation.
        for sub in seq.modules():
            if getattr(sub, "inplace", False):
                sub.inplace = False
        del module
        if args.device == "cuda":
            torch.cuda.empty_cache()
        t, peak = bench_torch(seq, x, labels, args, device, checkpoint_segments=segments)
        rows.append((f"pytorch checkpoint_sequential ({segments} of {len(seq)})", t, peak, ""))
    module = seq = None  # the eager models' memory must not count in the compiled rows' peaks
    for fraction in compile_fractions:
        name = f"pytorch compile (budget {fraction:g})"
        try:
            import torch._functorch.config as functorch_config
            if not hasattr(torch, "compile") or not hasattr(functorch_config, "activation_memory_budget"):
                raise AttributeError(f"torch {torch.__version__} has no activation_memory_budget")
        except (ImportError, AttributeError) as e:
            rows.append((name, None, None, f"n/a: {e}"))
            continue
        if args.device == "cuda":
            torch.cuda.empty_cache()
        torch._dynamo.reset()  # recompile under this budget
        functorch_config.activation_memory_budget = fraction
        module, _ = em.build(args.model)
        module = module.to(device).train()
        try:
            t, peak = bench_torch(torch.compile(module), x, labels, args, device)
            rows.append((name, t, peak, ""))
        except Exception as e:  # noqa: BLE001 - a compile failure is a row of the table, not the end of the bench
            rows.append((name, None, None, f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
        del module
    del seq, x, labels
    if args.device == "cuda":
        torch.cuda.empty_cache()  # give the GPU back before monet reserves its arena

    if not args.no_monet:
        t, peak, err = run_monet(args, chw)
        rows.append(("monet store-all", t, peak, err))
        for schedule in args.schedule:
            t, peak, err = run_monet(args, chw, schedule)
            rows.append((f"monet scheduled ({os.path.basename(schedule)})", t, peak, err))

    eager_ms, eager_peak = rows[0][1], rows[0][2]
    title = (f"{args.model} batch {args.batch} input {'x'.join(map(str, chw))} loss {args.loss} device "
             f"{args.device}" + (f" ({torch.cuda.get_device_name()}, math {args.math}, torch {torch.__version__},"
                                 f" cuDNN {torch.backends.cudnn.version()})" if args.device == "cuda" else
                                 f" (torch {torch.__version__})"))
    print()
    print(title)
    print(f"| {'run':48} | {'median step ms':>14} | {'x eager':>7} | {'peak bytes':>16} | {'x eager':>7} |")
    print(f"|{'-' * 50}|{'-' * 16}|{'-' * 9}|{'-' * 18}|{'-' * 9}|")
    for name, t, peak, err in rows:
        if t is None:
            print(f"| {name:48} | {'-':>14} | {'-':>7} | {'-':>16} | {'-':>7} |  {err}")
            continue
        tr = f"{t / eager_ms:.2f}" if eager_ms else "-"
        pk = f"{peak:,}" if peak is not None else "n/a (cpu)"
        pr = f"{peak / eager_peak:.2f}" if peak is not None and eager_peak else "-"
        print(f"| {name:48} | {t:14.1f} | {tr:>7} | {pk:>16} | {pr:>7} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"title": title, "rows": [{"run": n, "step_ms": t, "peak_bytes": p, "error": e}
                                                for n, t, p, e in rows]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
