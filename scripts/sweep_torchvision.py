#!/usr/bin/python3
"""The torchvision sweep: which models import, train and match PyTorch in float64, at which opsets.

Usage: /usr/bin/python3 scripts/sweep_torchvision.py [--opsets 14,17] [--family classification,segmentation,backbone]
       [--models resnet18,swin_t,...] [--build build] [--work DIR] [--json OUT.json] [--timeout 600]
       [--max-params 150e6]

For each model and opset: exported as scripts/export_models.py exports (training mode, weight-free, stochastic
depth off, index buffers as constants; segmentation models give their "out" map, detection backbones their first
feature map), then `monet-check MODEL.onnx --batch 2 --precision f64 --tolerance 1e-6` at the model's input size
(64x64 where the model takes any size; 224x224 for the transformers, vgg and alexnet; 75x75 for inception_v3).
Prints one Markdown row per model and opset as it goes: export, import, check (PASS/FAIL with the max relative
error, or the first line of the error) and seconds; --json writes the rows.

Families: classification (every builder of torchvision.models), segmentation (torchvision.models.segmentation),
backbone (the ResNet-50 and MobileNetV3 FPN backbones of torchvision.models.detection, their first output, with
trainable BatchNorm: detection's default FrozenBatchNorm2d keeps its statistics in buffers that a weight-free export
leaves out and its arithmetic reads as plain operands, which monet would train).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from export_models import SegmentationOut, buffers_as_constants, without_stochastic_depth  # noqa: E402

FIXED_224 = ("vit", "swin", "maxvit", "vgg", "alexnet")


class FirstOutput(nn.Module):
    """A detection backbone returns an OrderedDict of feature maps; the export takes the first."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return next(iter(self.model(x).values()))


def builders(family):
    tv = torchvision.models
    if family == "classification":
        names = tv.list_models(module=tv) if hasattr(tv, "list_models") else [
            n for n in dir(tv) if n[0].islower() and callable(getattr(tv, n)) and not n.startswith("get_")
            and n not in ("list_models", "load_state_dict_from_url")]
        out = {}
        for n in sorted(names):
            fn = getattr(tv, n, None)
            if fn is None or not callable(fn) or isinstance(fn, type):
                continue
            kwargs = {"aux_logits": False, "init_weights": False} if n in ("googlenet", "inception_v3") else {}
            out[n] = (lambda fn=fn, kwargs=kwargs: fn(weights=None, **kwargs), None)
        return out
    if family == "segmentation":
        seg = tv.segmentation
        return {n: (lambda fn=getattr(seg, n): SegmentationOut(fn(weights=None, weights_backbone=None,
                                                                   num_classes=21, aux_loss=False)), None)
                for n in ("lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "deeplabv3_resnet50",
                          "fcn_resnet50")}
    if family == "backbone":
        from torchvision.models.detection.backbone_utils import mobilenet_backbone, resnet_fpn_backbone
        return {
            "resnet50_fpn_backbone": (lambda: FirstOutput(resnet_fpn_backbone(
                backbone_name="resnet50", weights=None, trainable_layers=5, norm_layer=nn.BatchNorm2d)), "sum"),
            "mobilenet_v3_large_fpn_backbone": (lambda: FirstOutput(mobilenet_backbone(
                backbone_name="mobilenet_v3_large", weights=None, fpn=True, trainable_layers=6,
                norm_layer=nn.BatchNorm2d)), "sum"),
        }
    raise SystemExit(f"sweep_torchvision.py: unknown family '{family}'")


def input_size(name):
    if name.startswith("inception"):
        return (3, 75, 75)
    if name.startswith(FIXED_224):
        return (3, 224, 224)
    return (3, 64, 64)


def export(module, chw, path, opset):
    module = buffers_as_constants(without_stochastic_depth(module))
    module.train()
    torch.onnx.export(module, torch.randn(2, *chw), path, training=torch.onnx.TrainingMode.TRAINING,
                      opset_version=opset, do_constant_folding=False, export_params=False, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def first_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:160] if lines else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opsets", default="14,17")
    ap.add_argument("--family", default="classification,segmentation,backbone")
    ap.add_argument("--models", default="", help="comma-separated names (default: every model of the families)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--max-params", type=float, default=150e6,
                    help="skip larger models (a float64 check holds several copies of every parameter)")
    args = ap.parse_args()
    wanted = [m for m in args.models.split(",") if m]
    work = args.work or tempfile.mkdtemp(prefix="monet-sweep-")
    os.makedirs(work, exist_ok=True)
    check = os.path.join(args.build, "apps", "monet-check")
    rows = []
    print("| model | opset | export | check | max rel error | s |")
    print("|---|---|---|---|---|---|", flush=True)
    for family in args.family.split(","):
        for name, (make, loss) in builders(family).items():
            if wanted and name not in wanted:
                continue
            for opset in (int(o) for o in args.opsets.split(",")):
                row = {"model": name, "family": family, "opset": opset, "export": "", "check": "", "error": None}
                start = time.time()
                path = os.path.join(work, f"{name}_{opset}.onnx")
                chw = input_size(name)
                try:
                    torch.manual_seed(0)
                    module = make()
                    params = sum(p.numel() for p in module.parameters())
                    if params > args.max_params:
                        row["export"] = f"skipped ({params / 1e6:.0f}M parameters)"
                    else:
                        export(module, chw, path, opset)
                        row["export"] = "ok"
                except Exception as e:  # noqa: BLE001 (a model torch cannot export is a row, not a stop)
                    row["export"] = "fails: " + first_line(str(e))
                if row["export"] == "ok":
                    cmd = [check, path, "--batch", "2", "--input-shape", ",".join(map(str, chw)), "--precision", "f64",
                           "--tolerance", "1e-6"] + (["--loss", loss] if loss else [])
                    try:
                        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                        m = re.search(r"max relative error ([0-9.e+-]+) .*: (PASS|FAIL)", r.stdout)
                        if m:
                            row["check"], row["error"] = m.group(2), float(m.group(1))
                        else:
                            row["check"] = "error: " + first_line(r.stderr or r.stdout)
                    except subprocess.TimeoutExpired:
                        row["check"] = f"timeout ({args.timeout} s)"
                    os.remove(path)
                row["seconds"] = round(time.time() - start, 1)
                rows.append(row)
                err = f"{row['error']:.1e}" if row["error"] is not None else ""
                print(f"| {name} | {opset} | {row['export'][:60]} | {row['check'][:120]} | {err} | {row['seconds']} |",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    passed = sum(r["check"] == "PASS" for r in rows)
    skipped = sum(r["export"].startswith("skipped") for r in rows)
    print(f"\n{passed} of {len(rows) - skipped} model-opset pairs pass ({skipped} skipped)")


if __name__ == "__main__":
    main()
