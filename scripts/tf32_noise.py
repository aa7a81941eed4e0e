#!/usr/bin/env python3
"""How far PyTorch's own GPU gradients move from float64 under strict fp32 and under TF32 convolutions.

monet-check --device cuda --reference cpu judges the CUDA step by the CPU engine's float32 error (the noise floor);
with --math default, cuDNN's convolutions run in TF32 (10-bit mantissa), which moves ill-conditioned gradients
(BatchNorm parameters at batch 2) far more than fp32 rounding does. This script measures the same quantity for
PyTorch on the same models and inputs: one training step's parameter gradients with cuDNN in float64 (the
truth), in fp32 (allow_tf32 = False) and in TF32 (allow_tf32 = True, PyTorch's default for convolutions), compared
with monet-check's metric (per parameter ||g - g64|| / max(||g64||, 1e-3 ||all of g64||), the worst parameter).

Usage (GPU machine): python3 scripts/tf32_noise.py [--batch 2] [--size 64] [models...]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models  # noqa: E402  (the models monet imports, built as scripts/export_models.py writes them)


def gradients(module, x, labels, loss_kind, dtype, tf32):
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    m = module.to(dtype)
    m.zero_grad(set_to_none=True)
    out = m(x.to(dtype))
    loss = out.sum() if loss_kind == "sum" else F.cross_entropy(out, labels)
    loss.backward()
    return float(loss.detach()), [p.grad.detach().double().clone() for p in m.parameters()]


def worst_error(grads, truth):
    total = torch.sqrt(sum((t * t).sum() for t in truth))
    floor = 1e-3 * total
    worst = 0.0
    for g, t in zip(grads, truth):
        rel = torch.linalg.vector_norm(g - t) / torch.maximum(torch.linalg.vector_norm(t), floor)
        worst = max(worst, float(rel))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=["tiny", "resnet50", "googlenet", "mobilenet_v2", "unet"])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=64, help="input height = width (tiny keeps its 16x16)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("tf32_noise.py: needs a CUDA GPU")
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}, "
          f"batch {args.batch}")
    print(f"| {'model':14} | {'input':11} | {'fp32 vs f64':>12} | {'tf32 vs f64':>12} |")
    print(f"|{'-' * 16}|{'-' * 13}|{'-' * 14}|{'-' * 14}|")
    for name in args.models:
        torch.manual_seed(0)
        module, chw = export_models.build(name)
        if name != "tiny":
            chw = (chw[0], args.size, args.size)
        # Dropout off: its masks would differ between the float64 and float32 runs (googlenet, mobilenet_v2).
        for sub in module.modules():
            if isinstance(sub, torch.nn.Dropout):
                sub.p = 0.0
        module = module.to(dev).train()
        x = torch.randn(args.batch, *chw, device=dev)
        loss_kind = "ce"
        with torch.no_grad():
            out_shape = module(x[:1]).shape
        labels = torch.randint(0, out_shape[1], (args.batch, *out_shape[2:]), device=dev)
        # The same starting state for each run: BatchNorm running statistics change in every forward.
        state = {k: v.clone() for k, v in module.state_dict().items()}
        runs = {}
        for key, dtype, tf32 in (("f64", torch.float64, False), ("fp32", torch.float32, False),
                                 ("tf32", torch.float32, True)):
            module.load_state_dict(state)
            runs[key] = gradients(module, x, labels, loss_kind, dtype, tf32)
        truth = runs["f64"][1]
        print(f"| {name:14} | {'x'.join(map(str, chw)):11} | {worst_error(runs['fp32'][1], truth):12.3e} | "
              f"{worst_error(runs['tf32'][1], truth):12.3e} |", flush=True)


if __name__ == "__main__":
    main()
