#!/usr/bin/python3
"""Writes the weight-free ONNX models of models/ (opset 13, training mode) from Debian's torch/torchvision.

Usage: /usr/bin/python3 scripts/export_models.py [--out models] [names...]
(names default to the files of models/; vit_b_16 and convnext_tiny are written only when named.)
Parameters and BatchNorm running statistics become shaped graph inputs (export_params=False); monet initialises
them from a seed. The UNet is defined here: milesial's Pytorch-UNet layout with a halved bottleneck, as measured
in the MONeT paper.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torchvision


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.block(x)


class Up(nn.Module):
    """Nearest 2x upsampling of the deeper map, concat with the skip, double conv."""

    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = DoubleConv(cin, cout)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class UNet(nn.Module):
    """Channels 64-128-256-512-512 (bottleneck halved), 4 downs by 2x2 max-pool, 4 ups, 1x1 conv to 1 class."""

    def __init__(self, in_channels=3, classes=1):
        super().__init__()
        self.inc = DoubleConv(in_channels, 64)
        self.down = nn.ModuleList([DoubleConv(64, 128), DoubleConv(128, 256), DoubleConv(256, 512),
                                   DoubleConv(512, 512)])
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ModuleList([Up(1024, 256), Up(512, 128), Up(256, 64), Up(128, 64)])
        self.outc = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.down:
            skips.append(down(self.pool(skips[-1])))
        x = skips.pop()
        for up in self.up:
            x = up(x, skips.pop())
        return self.outc(x)


class TinyNet(nn.Module):
    """A few of every common op kind, small enough for unit tests."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.conv2 = nn.Conv2d(8, 8, 1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.fc = nn.Linear(8, 5)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        y = nn.functional.relu6(self.dw(x))
        x = x + torch.sigmoid(self.conv2(y)) * y
        x = self.pool(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(self.drop(x))


def build(name):
    """Returns (module, input shape C,H,W) for a model name."""
    tv = torchvision.models
    if name == "resnet50":
        return tv.resnet50(), (3, 224, 224)
    if name == "googlenet":
        return tv.googlenet(aux_logits=False, init_weights=False), (3, 224, 224)
    if name == "mobilenet_v2":
        return tv.mobilenet_v2(), (3, 224, 224)
    if name == "vgg16":
        return tv.vgg16(), (3, 224, 224)
    if name == "unet":
        return UNet(), (3, 416, 608)
    if name == "tiny":
        return TinyNet(), (3, 16, 16)
    # Transformers, exported on request only (not in models/: too big for the tests; see README, "Models").
    if name == "vit_b_16":
        return tv.vit_b_16(), (3, 224, 224)
    if name == "convnext_tiny":
        return tv.convnext_tiny(stochastic_depth_prob=0.0), (3, 224, 224)
    # Further CNNs, on request (scripts/bench_floor.py --others checks their memory floors).
    if name in ("densenet121", "resnext50_32x4d", "mobilenet_v3_large"):
        return getattr(tv, name)(), (3, 224, 224)
    if name == "efficientnet_b0":
        return tv.efficientnet_b0(stochastic_depth_prob=0.0), (3, 224, 224)
    raise SystemExit(f"export_models.py: unknown model '{name}'")


ALL = ["resnet50", "googlenet", "mobilenet_v2", "vgg16", "unet", "tiny"]


def export(module, chw, path):
    module.train()
    x = torch.randn(2, *chw)
    tmp = path + ".tmp"
    torch.onnx.export(module, x, tmp, training=torch.onnx.TrainingMode.TRAINING, opset_version=13,
                      do_constant_folding=False, export_params=False, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    ap.add_argument("names", nargs="*", default=ALL)
    args = ap.parse_args()
    torch.manual_seed(0)
    for name in args.names:
        module, chw = build(name)
        path = os.path.join(args.out, f"{name}.onnx")
        export(module, chw, path)
        print(f"{path}: {os.path.getsize(path)} bytes, input {chw}")


if __name__ == "__main__":
    sys.exit(main())
