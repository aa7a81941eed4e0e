#!/usr/bin/python3
"""Checks scripts/torch_reference.py against PyTorch's own modules, so monet-check can trust it as the reference.

Usage: /usr/bin/python3 scripts/check_reference_vs_torchvision.py [--dtype float32|float64] [--keep DIR] [names...]
For each model (default: resnet50 googlenet mobilenet_v2 vgg16, plus monet's tiny and unet): builds the module
that models/<name>.onnx was exported from (scripts/export_models.py) with a fixed seed, takes one training step
with the module's own autograd, runs torch_reference.py on the ONNX file with the same parameters, input, labels
and dropout masks, and compares the loss and every parameter gradient. Exits 1 if a relative error exceeds 1e-4.
Computes in float64 by default: at these small inputs BatchNorm sees few values per channel, and the modules' own
float32 gradients are up to a few percent off their float64 ones (--dtype float32 prints that noise), so a float32
match holds only while both sides run the very same kernels.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models  # noqa: E402  the module definitions the ONNX files were exported from

BATCH = 2
TOLERANCE = 1e-4
# Gradients of real parameters here are >= 3e-5 of the whole gradient's norm; exact zeros come out near 1e-17 in
# float64 (float32: near 1e-8).
ZERO_FLOOR = {torch.float64: 1e-10, torch.float32: 1e-6}
# name -> (input C, H, W; loss)
SETUPS = {
    "resnet50": ((3, 64, 64), "cross_entropy"),
    "googlenet": ((3, 64, 64), "cross_entropy"),
    "mobilenet_v2": ((3, 64, 64), "cross_entropy"),
    # The export turned AdaptiveAvgPool2d(7) into an AveragePool with a fixed 1x1 kernel, valid for the 7x7 map of
    # a 224..255 input only; at 64x64 the Gemm would see 2048 features instead of 25088.
    "vgg16": ((3, 224, 224), "cross_entropy"),
    "tiny": ((3, 16, 16), "cross_entropy"),
    # Two output classes, cross-entropy per pixel (labels N x H x W), as a segmentation network trains.
    "unet": ((3, 64, 64), "cross_entropy"),
}
DEFAULT = ["resnet50", "googlenet", "mobilenet_v2", "vgg16", "tiny", "unet"]


class MaskedDropout(nn.Module):
    """nn.Dropout whose mask is kept, so that torch_reference can be given the very same one."""

    def __init__(self, p, generator):
        super().__init__()
        # The graph stores p as a float32 constant; the same value here keeps float64 runs exact.
        self.p, self.generator, self.mask = float(np.float32(p)), generator, None

    def forward(self, x):
        self.mask = (torch.rand(x.shape, generator=self.generator) >= self.p).to(torch.uint8)
        return x * self.mask.to(x.dtype) / (1.0 - self.p)


def replace_dropouts(module, generator):
    """Swaps every nn.Dropout for a MaskedDropout; returns {module name: MaskedDropout}."""
    found = {}
    for name, sub in list(module.named_modules()):
        if isinstance(sub, nn.Dropout):
            parent_name, _, leaf = name.rpartition(".")
            masked = MaskedDropout(sub.p, generator)
            setattr(module.get_submodule(parent_name) if parent_name else module, leaf, masked)
            found[name] = masked
    return found


def onnx_scope(module_name):
    """torch.onnx names nodes after the module path: 'classifier.2' -> '/classifier/classifier.2'."""
    parts = module_name.split(".")
    return "/" + "/".join(".".join(parts[:i + 1]) for i in range(len(parts)))


def prepare_batch_norms(module, generator):
    """Random scale and shift (1 and 0 would hide a swapped pair); eps as the graph stores it, in float32."""
    for sub in module.modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            sub.eps = float(np.float32(sub.eps))
            with torch.no_grad():
                sub.weight.copy_(0.5 + torch.rand(sub.weight.shape, generator=generator))
                sub.bias.copy_(0.1 * torch.randn(sub.bias.shape, generator=generator))
                sub.running_mean.copy_(0.1 * torch.randn(sub.running_mean.shape, generator=generator))
                sub.running_var.copy_(0.5 + torch.rand(sub.running_var.shape, generator=generator))


def check_graph_inputs(graph, state, input_name="input"):
    """The exports name parameter inputs after state_dict keys; the manifest relies on it."""
    inputs = {i.name: [d.dim_value if d.HasField("dim_value") else None for d in i.type.tensor_type.shape.dim]
              for i in graph.input}
    missing = sorted(set(inputs) - set(state) - {input_name})
    extra = sorted(set(state) - set(inputs))
    if missing or extra:
        raise SystemExit(f"graph inputs and state_dict differ: only in graph {missing[:5]}, only in module "
                         f"{extra[:5]}")
    for name, t in state.items():
        if inputs[name] != list(t.shape):
            raise SystemExit(f"graph input '{name}' has shape {inputs[name]}, state_dict {list(t.shape)}")


def write_manifest(dir_path, model_path, dtype, loss, tensors, labels, masks, grads):
    files = {}
    for i, (name, t) in enumerate(tensors.items()):
        files[name] = f"t{i:04d}.npy"
        np.save(os.path.join(dir_path, files[name]), t.detach().numpy())
    manifest = {"model": os.path.abspath(model_path), "dtype": dtype, "loss": loss, "output": "output",
                "tensors": files, "grads": grads, "dropout_masks": {}}
    if labels is not None:
        np.save(os.path.join(dir_path, "labels.npy"), labels.numpy())
        manifest["labels"] = "labels.npy"
    for i, (node, mask) in enumerate(masks.items()):
        manifest["dropout_masks"][node] = f"mask{i}.npy"
        np.save(os.path.join(dir_path, f"mask{i}.npy"), mask.numpy())
    with open(os.path.join(dir_path, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def relative_errors(got, want, dtype):
    """||got - want|| / ||want|| per parameter. A gradient below ZERO_FLOOR of the whole gradient's norm is zero
    in exact arithmetic (a bias followed by BatchNorm) and only rounding noise here, so it is measured against
    that floor instead of its own norm."""
    whole = math.sqrt(sum(float(np.sum(np.square(w, dtype=np.float64))) for w in want.values()))
    floor = ZERO_FLOOR[dtype] * whole
    errors, zeros = {}, 0
    for name, w in want.items():
        w_norm = np.linalg.norm(w.astype(np.float64))
        zeros += w_norm < floor
        errors[name] = np.linalg.norm(got[name].astype(np.float64) - w) / max(w_norm, floor)
    return errors, zeros


def dtype_of(name):
    return {"float32": torch.float32, "float64": torch.float64}[name]


def module_step(name, dtype):
    """One training step of the PyTorch module, seeded so that float32 and float64 runs see the same data."""
    chw, loss_kind = SETUPS[name]
    data = torch.Generator().manual_seed(1)
    torch.manual_seed(0)
    module, _ = export_models.build(name)
    prepare_batch_norms(module, data)
    module = module.to(dtype).train()
    dropouts = replace_dropouts(module, data)
    # Taken before the step: the forward pass moves the running statistics.
    state = {k: v.detach().clone() for k, v in module.state_dict().items() if not k.endswith("num_batches_tracked")}
    x = torch.randn((BATCH,) + chw, generator=data).to(dtype)
    start = time.time()
    out = module(x)
    labels = None
    if loss_kind == "cross_entropy":
        labels = torch.randint(0, out.shape[1], (out.shape[0],) + tuple(out.shape[2:]), generator=data)
        loss = F.cross_entropy(out, labels)
    else:
        loss = out.sum()
    loss.backward()
    return SimpleNamespace(x=x, labels=labels, state=state, loss_kind=loss_kind, loss=loss.item(),
                           output_shape=list(out.shape), masks={k: d.mask for k, d in dropouts.items()},
                           grads={k: p.grad.numpy() for k, p in module.named_parameters()},
                           seconds=time.time() - start)


def check(name, dtype_name, dir_path):
    """One model; returns a table row (dict)."""
    dtype = dtype_of(dtype_name)
    model_path = os.path.join(HERE, "..", "models", f"{name}.onnx")
    graph = onnx.load(model_path).graph
    want = module_step(name, dtype)
    check_graph_inputs(graph, want.state)
    dropout_nodes = {n.name for n in graph.node if n.op_type == "Dropout"}
    masks = {}
    for module_name, mask in want.masks.items():
        node = onnx_scope(module_name) + "/Dropout"
        if node not in dropout_nodes:
            raise SystemExit(f"{name}: no Dropout node '{node}' for module '{module_name}'")
        masks[node] = mask
    write_manifest(dir_path, model_path, dtype_name, want.loss_kind, {"input": want.x, **want.state}, want.labels,
                   masks, list(want.grads))

    start = time.time()
    run = subprocess.run([sys.executable, os.path.join(HERE, "torch_reference.py"), dir_path],
                         capture_output=True, text=True)
    row = {"model": name, "loss": want.loss, "module_s": want.seconds, "reference_s": time.time() - start}
    if run.returncode != 0:
        row["error"] = f"torch_reference exit {run.returncode}: {run.stderr.strip()}"
        return row
    with open(os.path.join(dir_path, "result.json")) as f:
        result = json.load(f)
    if result["output_shape"] != want.output_shape:
        row["error"] = f"output shape {result['output_shape']} != {want.output_shape}"
        return row
    row["loss_err"] = abs(result["loss"] - want.loss) / max(abs(want.loss), 1e-30)
    got = {k: np.load(os.path.join(dir_path, result["grads"][k])) for k in want.grads}
    errors, row["zeros"] = relative_errors(got, want.grads, dtype)
    worst = max(errors, key=errors.get)
    row["grad_err"] = errors[worst]
    row["worst"] = worst if row["grad_err"] > 0 else "- (all bitwise equal)"
    row["params"] = len(errors)
    if dtype == torch.float32:
        # How far the module's own float32 gradients are from its float64 ones: the floor float32 can reach.
        noise, _ = relative_errors(want.grads, module_step(name, torch.float64).grads, torch.float32)
        row["noise"] = max(noise.values())
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float64",
                    help="float64 (default): float32 gradients of these models carry percent-level rounding noise")
    ap.add_argument("--keep", help="write each model's manifest and results under KEEP/<name> and keep them")
    ap.add_argument("names", nargs="*", default=DEFAULT)
    args = ap.parse_args()
    for name in args.names:
        if name not in SETUPS:
            raise SystemExit(f"unknown model '{name}'; known: {' '.join(SETUPS)}")

    noise = args.dtype == "float32"
    print(f"dtype {args.dtype}, batch {BATCH}, tolerance {TOLERANCE:g} on |dloss|/|loss| and per parameter "
          "||g - g_module|| / ||g_module||;\n"
          f"zero grads: parameters whose module gradient is below {ZERO_FLOOR[dtype_of(args.dtype)]:g} of the "
          "whole gradient's norm (zero in exact arithmetic), measured against that floor")
    if noise:
        print("f32 noise: the module's own float32 gradients against its float64 ones, worst parameter")
    print(f"{'model':<13} {'input':<8} {'loss':>9} {'loss err':>9} {'params':>6} {'zero':>4} {'grad err':>9}  "
          f"{'worst param':<30}" + (f" {'f32 noise':>9}" if noise else "") + f" {'module s':>8} {'ref s':>6}")
    failed = False
    for name in args.names:
        if args.keep:
            dir_path = os.path.join(args.keep, name)
            os.makedirs(dir_path, exist_ok=True)
            row = check(name, args.dtype, dir_path)
        else:
            with tempfile.TemporaryDirectory(prefix=f"torch_ref_{name}_") as dir_path:
                row = check(name, args.dtype, dir_path)
        shape = "x".join(str(d) for d in SETUPS[name][0][1:])
        if "error" in row:
            failed = True
            print(f"{name:<13} {shape:<8} FAILED: {row['error']}")
            continue
        bad = row["loss_err"] > TOLERANCE or row["grad_err"] > TOLERANCE
        failed |= bad
        print(f"{name:<13} {shape:<8} {row['loss']:>9.5g} {row['loss_err']:>9.1e} {row['params']:>6} "
              f"{row['zeros']:>4} {row['grad_err']:>9.1e}  {row['worst']:<30}"
              + (f" {row['noise']:>9.1e}" if noise else "")
              + f" {row['module_s']:>8.1f} {row['reference_s']:>6.1f}" + ("  EXCEEDS TOLERANCE" if bad else ""),
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
