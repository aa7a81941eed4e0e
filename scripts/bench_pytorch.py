#!/usr/bin/env python3
"""PyTorch and monet side by side: one training step (forward, loss, backward, SGD momentum 0.9) timed and measured.

The PyTorch model is the module scripts/export_models.py exports (torchvision's CNNs, its UNet, GPT-2 and BERT), so
it is the very model monet imports; the loss is monet's mean cross-entropy over the classes (dim 1 for the CNNs,
per pixel for the UNet's 2 classes with labels N x H x W, the last axis for the token models), the optimizer SGD
with momentum 0.9 (lr 0.01). fp32 with PyTorch's default math: TF32
off for matmuls, on for cuDNN convolutions (--math fp32: off for both).

Rows (each on a fresh module from the same seed; --rows picks the optional ones; eager runs first unless
--no-eager):
  pytorch eager                  the module as exported (GPT-2 and BERT: attention materialised, softmax(q k^T) v);
                                 median step time and torch.cuda.max_memory_allocated
  pytorch eager sdpa             (sdpa) GPT-2 and BERT with F.scaled_dot_product_attention, what a PyTorch user runs
                                 (GPT-2: the module's `sdpa` flag; BERT: nn.MultiheadAttention without weights)
  pytorch checkpoint_sequential  (checkpoint) torch.utils.checkpoint.checkpoint_sequential in sqrt(n) segments of the
                                 CNN as a chain of modules (resnet50, googlenet, vgg16, mobilenet_v2); the UNet, not a
                                 chain, checkpoints each of its 9 blocks (torch.utils.checkpoint.checkpoint)
  pytorch compile ...            (compile) torch.compile in its default mode, once per --compile-budgets entry:
                                 `default` (PyTorch's own partitioner) or a fraction f of
                                 torch._functorch.config.activation_memory_budget (PyTorch >= 2.4)
  monet store-all (K)            (monet) monet-run --store-all K (--monet-store-all; `fast` by default: every node
                                 on its fastest implementation, chosen on --monet-profile when given), its median
                                 step and arena peak (= predicted)
  monet scheduled (S)            monet-run --schedule S, one row per --schedule given
A row that cannot run (no torch.compile, no SDPA, not a chain, a compile error) says why instead of failing the run.

Examples:
  scripts/bench_pytorch.py --model resnet50 --batch 184                            (GPU)
  scripts/bench_pytorch.py --model gpt2 --batch 8 --rows sdpa,monet                 (GPU, 1024 tokens)
  scripts/bench_pytorch.py --model unet --batch 11 --rows checkpoint,compile --no-monet
  /usr/bin/python3 scripts/bench_pytorch.py --model gpt2 --device cpu --batch 1 --small   (smoke test, no GPU)
--small: CNNs at 64x64 (vgg16 at 224x224, the only size its ONNX imports at), GPT-2 and BERT as their tiny
variants (test/data/gpt2_tiny.onnx, bert_tiny.onnx: 2 layers, width 32, 64 tokens).
"""
import argparse
import gc
import importlib.util
import inspect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOKEN_MODELS = ("gpt2", "bert")
OPTIONAL_ROWS = ("sdpa", "checkpoint", "compile", "monet")


def load_export_models():
    spec = importlib.util.spec_from_file_location("export_models", os.path.join(HERE, "export_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_budgets(text):
    """--compile-budgets: 'default', fractions (0.5) or ratios (1/3) in [0, 1]. Returns a list of None (default)
    and floats."""
    out = []
    for tok in filter(None, (t.strip() for t in text.split(","))):
        if tok == "default":
            out.append(None)
            continue
        try:
            num, _, den = tok.partition("/")
            f = float(num) / float(den) if den else float(num)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"'{tok}': expected 'default', a fraction like 0.5 or a ratio like 1/3")
        if not 0 <= f <= 1:
            raise ValueError(f"'{tok}': a budget must be in [0, 1]")
        out.append(f)
    return out


class Spec:
    """What one model needs: how to build it, its input, the ONNX monet runs, the loss."""

    def __init__(self, args, em):
        self.em = em
        self.name = args.model
        small_tokens = args.small and args.model in TOKEN_MODELS
        self.build_name = args.model + "_tiny" if small_tokens else args.model
        module, shape = em.build(self.build_name)
        self.tokens = getattr(module, "vocab_size", None) is not None  # token ids in, classes last
        if args.size:
            shape = (args.size,) if self.tokens else (shape[0], args.size, args.size)
        elif args.small and not self.tokens and args.model != "vgg16":
            shape = (shape[0], 64, 64)
        self.shape = tuple(shape)
        if args.onnx:
            self.onnx = args.onnx
        elif small_tokens:
            self.onnx = os.path.join(ROOT, "test", "data", self.build_name + ".onnx")
        elif args.model in TOKEN_MODELS:
            self.onnx = os.path.join(ROOT, "models", "transformers", args.model + ".onnx")
        else:
            self.onnx = os.path.join(ROOT, "models", args.model + ".onnx")
        self.class_axis = -1 if self.tokens else 1
        del module

    def module(self, device):
        import torch
        torch.manual_seed(0)
        m, _ = self.em.build(self.build_name)
        return m.to(device).train()


def set_attention(module, sdpa):
    """GPT-2's and BERT's attention materialised (as exported) or through F.scaled_dot_product_attention. Returns
    None, or why SDPA is not available."""
    import torch
    import torch.nn as nn
    if sdpa and not hasattr(nn.functional, "scaled_dot_product_attention"):
        return f"n/a: torch {torch.__version__} has no F.scaled_dot_product_attention"
    for sub in module.modules():
        if hasattr(sub, "sdpa") and hasattr(sub, "causal_mask"):  # export_models.CausalSelfAttention
            sub.sdpa = sdpa
        elif isinstance(sub, nn.MultiheadAttention):
            # nn.TransformerEncoderLayer asks for no weights; since PyTorch 2.0 F.multi_head_attention_forward then
            # runs scaled_dot_product_attention. Asking for the per-head weights keeps the materialised softmax.
            forward = type(sub).forward.__get__(sub)

            def patched(*a, _forward=forward, _sdpa=sdpa, **k):
                k["need_weights"] = not _sdpa
                if not _sdpa:
                    k["average_attn_weights"] = False
                return _forward(*a, **k)
            sub.forward = patched
    return None


def no_inplace(module):
    # Checkpointing recomputes a segment from its saved input: an in-place ReLU opening a segment (vgg16's features)
    # would overwrite that input. Inside a segment the forward keeps nothing, so out-of-place costs no memory.
    for sub in module.modules():
        if getattr(sub, "inplace", False):
            sub.inplace = False


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
    if name == "googlenet":
        # torchvision's GoogLeNet._forward without aux heads (aux_logits=False) and transform_input off: a chain.
        if getattr(m, "transform_input", False) or getattr(m, "aux1", None) is not None:
            return None
        return nn.Sequential(m.conv1, m.maxpool1, m.conv2, m.conv3, m.maxpool2, m.inception3a, m.inception3b,
                             m.maxpool3, m.inception4a, m.inception4b, m.inception4c, m.inception4d, m.inception4e,
                             m.maxpool4, m.inception5a, m.inception5b, m.avgpool, nn.Flatten(1), m.dropout, m.fc)
    return None


def checkpoint_kwargs(fn):
    """use_reentrant=False where the function takes it (PyTorch >= 2.0 for checkpoint_sequential); else None:
    reentrant checkpointing, whose input must require grad for the first segment's parameters to get gradients."""
    try:
        return {"use_reentrant": False} if "use_reentrant" in inspect.signature(fn).parameters else None
    except (TypeError, ValueError):
        return None


class CheckpointedUNet:
    """export_models.UNet's forward with each of its 9 blocks (inc, 4 downs with their pool, 4 ups) checkpointed."""

    def __init__(self, m):
        from torch.utils.checkpoint import checkpoint
        self.m, self.ckpt = m, checkpoint
        self.kw = checkpoint_kwargs(checkpoint)

    def parameters(self):
        return self.m.parameters()

    def __call__(self, x):
        m, kw = self.m, self.kw or {}
        if self.kw is None:
            x = x.detach().requires_grad_(True)
        skips = [self.ckpt(m.inc, x, **kw)]
        for down in m.down:
            skips.append(self.ckpt(lambda t, d=down: d(m.pool(t)), skips[-1], **kw))
        x = skips.pop()
        for up in m.up:
            x = self.ckpt(up, x, skips.pop(), **kw)
        return m.outc(x)


def bench_torch(step_fn, params, x, labels, spec, args, device):
    """Median ms of --iters steps after --warmup, and the peak bytes allocated during them (cuda)."""
    import torch
    import torch.nn.functional as F
    opt = torch.optim.SGD(params, lr=args.lr, momentum=0.9)

    def step():
        out = step_fn(x)
        if args.loss == "sum":
            loss = out.sum()
        else:
            loss = F.cross_entropy(out.movedim(spec.class_axis, 1), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

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


def profile_torch(module, x, labels, spec, args, path):
    """One eager step under torch.profiler: the CUDA kernels by total time, written to path (where the time goes,
    to compare with monet-profile's per-node table). A profiler failure is reported, not fatal."""
    import torch
    import torch.nn.functional as F
    opt = torch.optim.SGD(module.parameters(), lr=args.lr, momentum=0.9)

    def step():
        out = module(x)
        loss = out.sum() if args.loss == "sum" else F.cross_entropy(out.movedim(spec.class_axis, 1), labels)
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


def monet_help(exe):
    try:
        return subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def run_monet(args, spec, schedule=None):
    """(median ms, arena peak, error, row name, predicted ms or None) of one monet-run."""
    exe = os.path.join(args.monet_bin, "monet-run")
    name = f"monet scheduled ({os.path.basename(schedule)})" if schedule else "monet store-all"
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "run.json")
        cmd = [exe, spec.onnx, "--device", args.device, "--iters", str(args.monet_iters or args.iters),
               "--warmup", str(args.warmup), "--loss", args.loss, "--lr", str(args.lr), "--report", report]
        if args.device == "cuda":
            cmd += ["--math", args.math]
        if schedule:
            cmd += ["--schedule", schedule]
        else:
            cmd += ["--batch", str(args.batch), "--input-shape", ",".join(map(str, spec.shape))]
            helptext = monet_help(exe)
            if "--store-all" in helptext:
                cmd += ["--store-all", args.monet_store_all]
                name += f" ({args.monet_store_all})"
                if args.monet_profile and "--profile" in helptext:
                    cmd += ["--profile", args.monet_profile]
                    name = name[:-1] + ", on the profile)"
            else:
                name += " (monet-run has no --store-all)"
        print("+ " + " ".join(cmd), flush=True)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.monet_timeout)
        except subprocess.TimeoutExpired:
            return None, None, f"monet-run: over {args.monet_timeout} s", name, None
        except OSError as e:
            return None, None, f"monet-run: {e}", name, None
        if r.returncode != 0:
            return None, None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1], name, None
        with open(report) as f:
            j = json.load(f)
        return j["step_ms_median"], j["peak_bytes"], "", name, j.get("predicted_step_ms")


def free(device):
    import torch
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=184)
    ap.add_argument("--size", type=int,
                    help="input height = width, or the sequence length of a token model (default: the model's)")
    ap.add_argument("--small", action="store_true",
                    help="a smoke-test size: CNNs at 64x64 (vgg16 224x224), GPT-2 and BERT as their tiny variants")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--math", default="default", choices=["default", "fp32"],
                    help="default: TF32 in cuDNN convolutions, fp32 GEMMs (PyTorch's defaults); fp32: strict")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--loss", choices=["ce", "sum"], default="ce",
                    help="ce (default: mean cross-entropy over the classes, as monet's) or sum of the output")
    ap.add_argument("--rows", default="sdpa,checkpoint,monet",
                    help="optional rows after eager: any of sdpa, checkpoint, compile, monet (comma-separated; "
                         "'' for eager alone)")
    ap.add_argument("--compile-budgets", default=None,
                    help="torch.compile rows: 'default' and/or activation_memory_budget fractions (0.5, 1/3); "
                         "giving it adds the compile rows (default with --rows compile: default,1/2,1/3)")
    ap.add_argument("--onnx", help="ONNX file for monet (default: the model's under models/, test/data with --small)")
    ap.add_argument("--monet-bin", default=os.path.join(ROOT, "build", "apps"), help="directory of monet-run")
    ap.add_argument("--monet-store-all", default="fast", choices=["fast", "lean", "default"],
                    help="monet-run --store-all (where that monet-run has the flag)")
    ap.add_argument("--monet-profile", help="monet-run --profile: the profile whose times choose the fast store-all")
    ap.add_argument("--monet-iters", type=int, help="monet-run --iters (default --iters)")
    ap.add_argument("--monet-timeout", type=float, default=600, help="seconds for each monet-run")
    ap.add_argument("--schedule", action="append", default=[],
                    help="SCHEDULE.json: also run monet with it (repeatable: one row per schedule)")
    ap.add_argument("--no-monet", action="store_true", help="no monet rows (as --rows without monet)")
    ap.add_argument("--no-eager", action="store_true",
                    help="no eager row (a separate run's rows, e.g. one torch.compile budget: 'x eager' is then '-')")
    ap.add_argument("--json", help="write the table as JSON here")
    ap.add_argument("--torch-profile", help="cuda: write PyTorch eager's CUDA kernel times (one step) here")
    args = ap.parse_args()
    rows_wanted = set(filter(None, (r.strip() for r in args.rows.split(","))))
    unknown = rows_wanted - set(OPTIONAL_ROWS) - {"eager"}
    if unknown:
        ap.error(f"--rows: unknown {', '.join(sorted(unknown))} (eager runs always; optional: "
                 f"{', '.join(OPTIONAL_ROWS)})")
    if args.no_monet:
        rows_wanted.discard("monet")
    try:
        budgets = parse_budgets(args.compile_budgets if args.compile_budgets is not None else
                                ("default,1/2,1/3" if "compile" in rows_wanted else ""))
    except ValueError as e:
        ap.error(f"--compile-budgets: {e}")
    if args.batch < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("--batch and --iters must be positive, --warmup >= 0")
    if args.torch_profile:  # refused before minutes of benchmarking, not after
        if args.device != "cuda":
            ap.error("--torch-profile needs --device cuda (it times CUDA kernels)")
        folder = os.path.dirname(os.path.abspath(args.torch_profile))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            ap.error(f"--torch-profile {args.torch_profile}: folder {folder} is not writable")

    try:
        import torch
    except ImportError as e:
        sys.exit(f"bench_pytorch.py: PyTorch is not importable: {e}")
    try:
        em = load_export_models()
    except ImportError as e:
        sys.exit(f"bench_pytorch.py: cannot build the models ({e}); install torchvision")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_pytorch.py: --device cuda but torch.cuda.is_available() is False")
    spec = Spec(args, em)
    device = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cudnn.allow_tf32 = args.math == "default"  # PyTorch's defaults: True for cuDNN ...
        torch.backends.cuda.matmul.allow_tf32 = False              # ... and False for matmul
    else:
        torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))

    module = spec.module(device)
    torch.manual_seed(1)
    x = em.example_input(module, spec.shape, args.batch).to(device)
    with torch.no_grad():
        out_shape = module(x[:1]).shape
    axis = spec.class_axis % len(out_shape)
    classes = out_shape[axis]
    label_shape = [d for i, d in enumerate(out_shape) if i != axis][1:]
    labels = torch.randint(0, classes, (args.batch, *label_shape), device=device)

    rows = []

    def add(name, kind, fn):
        """Runs fn() -> (ms, peak) as a row; an exception becomes the row's error."""
        print(f"-- {name}", flush=True)
        try:
            t, peak = fn()
            rows.append({"run": name, "kind": kind, "step_ms": t, "peak_bytes": peak, "error": ""})
        except Exception as e:  # noqa: BLE001 - one failing row (out of memory, a compile error) ends no bench
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            rows.append({"run": name, "kind": kind, "step_ms": None, "peak_bytes": None,
                         "error": f"failed: {type(e).__name__}: {msg}"[:300]})
        free(device)

    def skip(name, kind, why):
        rows.append({"run": name, "kind": kind, "step_ms": None, "peak_bytes": None, "error": why})

    def eager():
        set_attention(module, False)
        return bench_torch(module, module.parameters(), x, labels, spec, args, device)

    if not args.no_eager:
        add("pytorch eager", "eager", eager)
    if args.torch_profile:
        profile_torch(module, x, labels, spec, args, args.torch_profile)
    del module
    free(device)

    if "sdpa" in rows_wanted and spec.tokens:
        m = spec.module(device)
        why = set_attention(m, True)
        if why:
            skip("pytorch eager sdpa", "sdpa", why)
        else:
            add("pytorch eager sdpa", "sdpa", lambda: bench_torch(m, m.parameters(), x, labels, spec, args, device))
        del m
        free(device)

    if "checkpoint" in rows_wanted and not spec.tokens:
        from torch.utils.checkpoint import checkpoint_sequential
        m = spec.module(device)
        no_inplace(m)
        seq = as_sequential(args.model, m)
        if seq is not None:
            segments = max(1, int(math.sqrt(len(seq))))
            kw = checkpoint_kwargs(checkpoint_sequential)
            if kw is None:  # reentrant: the input must require grad (see checkpoint_kwargs)
                xs = x.detach().requires_grad_(True)
                fn = lambda t: checkpoint_sequential(seq, segments, xs)  # noqa: E731
            else:
                fn = lambda t: checkpoint_sequential(seq, segments, t, **kw)  # noqa: E731
            add(f"pytorch checkpoint_sequential ({segments} of {len(seq)})", "checkpoint",
                lambda: bench_torch(fn, seq.parameters(), x, labels, spec, args, device))
        elif args.model == "unet":
            cm = CheckpointedUNet(m)
            add("pytorch checkpoint (each of 9 blocks)", "checkpoint",
                lambda: bench_torch(cm, cm.parameters(), x, labels, spec, args, device))
            del cm
        else:
            skip("pytorch checkpoint_sequential", "checkpoint", "n/a: the model is not a chain of modules")
        del m, seq
        free(device)

    if budgets:
        has_compile = hasattr(torch, "compile")
        try:
            import torch._functorch.config as functorch_config
        except ImportError:
            functorch_config = None
        has_budget = functorch_config is not None and hasattr(functorch_config, "activation_memory_budget")
        for b in budgets:
            name = "pytorch compile" if b is None else f"pytorch compile (budget {b:.3g})"
            if not has_compile:
                skip(name, "compile", f"n/a: torch {torch.__version__} has no torch.compile")
                continue
            if b is not None and not has_budget:
                skip(name, "compile", f"n/a: torch {torch.__version__} has no "
                                      "torch._functorch.config.activation_memory_budget")
                continue
            torch._dynamo.reset()  # recompile under this budget
            if has_budget:
                functorch_config.activation_memory_budget = 1.0 if b is None else b
            m = spec.module(device)
            set_attention(m, False)
            compiled = torch.compile(m)
            add(name, "compile", lambda: bench_torch(compiled, m.parameters(), x, labels, spec, args, device))
            del m, compiled
            free(device)
        if has_budget:
            functorch_config.activation_memory_budget = 1.0
    del x, labels
    free(device)  # give the GPU back before monet reserves its arena

    if "monet" in rows_wanted:
        for schedule in [None] + list(args.schedule):
            t, peak, err, name, predicted = run_monet(args, spec, schedule)
            rows.append({"run": name, "kind": "monet", "step_ms": t, "peak_bytes": peak, "error": err,
                         "predicted_step_ms": predicted})

    eager_ms = eager_peak = None
    if rows and rows[0]["kind"] == "eager":
        eager_ms, eager_peak = rows[0]["step_ms"], rows[0]["peak_bytes"]
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else None
    inp = "x".join(map(str, spec.shape))
    title = (f"{spec.build_name} batch {args.batch} input {inp} loss {args.loss} device {args.device}" +
             (f" ({gpu}, math {args.math}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()})"
              if gpu else f" (torch {torch.__version__})"))
    print()
    print(title)
    print(f"| {'run':56} | {'median step ms':>14} | {'x eager':>7} | {'peak bytes':>16} | {'x eager':>7} |")
    print(f"|{'-' * 58}|{'-' * 16}|{'-' * 9}|{'-' * 18}|{'-' * 9}|")
    for r in rows:
        t, peak = r["step_ms"], r["peak_bytes"]
        if t is None:
            print(f"| {r['run']:56} | {'-':>14} | {'-':>7} | {'-':>16} | {'-':>7} |  {r['error']}")
            continue
        tr = f"{t / eager_ms:.2f}" if eager_ms else "-"
        pk = f"{peak:,}" if peak is not None else "n/a (cpu)"
        pr = f"{peak / eager_peak:.2f}" if peak is not None and eager_peak else "-"
        pred = r.get("predicted_step_ms")
        note = f"  predicted {pred:.1f} ms, measured / predicted {t / pred:.3f}" if pred else ""
        print(f"| {r['run']:56} | {t:14.1f} | {tr:>7} | {pk:>16} | {pr:>7} |{note}")
    if args.json:
        doc = {"title": title, "model": args.model, "module": spec.build_name, "batch": args.batch,
               "input": list(spec.shape), "loss": args.loss, "device": args.device, "gpu": gpu,
               "math": args.math, "torch": torch.__version__, "onnx": os.path.relpath(spec.onnx, ROOT),
               "iters": args.iters, "warmup": args.warmup, "rows": rows}
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
