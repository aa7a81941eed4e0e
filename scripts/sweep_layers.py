#!/usr/bin/python3
"""The layer sweep: which layers people write in PyTorch import, train and match PyTorch in float64.

Usage: /usr/bin/python3 scripts/sweep_layers.py [--build build] [--work DIR] [--opset 14] [--layers a,b,...]

Each case is a small module around one layer or functional call (a Linear or Conv before it, so that a parameter
takes its gradient through it), exported as torch.onnx.export writes a model by default in training mode
(parameters stored as initializers, constants folded), then `monet-check CASE.onnx --batch 2 --precision f64
--tolerance 1e-6` (cross-entropy over dim 1 where the output has a class axis, else --loss sum). Prints one
Markdown row per case: the ONNX ops of the export, and PASS/FAIL with the max relative error, or the first line
of the error (the export's, or monet's refusal).
"""
import argparse
import os
import subprocess
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Case(nn.Module):
    def __init__(self, f, *mods):
        super().__init__()
        self.f = f
        self.mods = nn.ModuleList(mods)

    def forward(self, x):
        return self.f(self.mods, x)


def cases():
    lin, conv, conv1 = (lambda: nn.Linear(6, 5)), (lambda: nn.Conv2d(3, 4, 3, padding=1)), (lambda: nn.Conv1d(3, 4, 3))
    vec, img, seq, tok = (4, 6), (2, 3, 8, 8), (2, 3, 16), (2, 5, 6)
    return {
        # 1-D networks
        "conv1d_bn": (Case(lambda m, x: m[1](F.relu(m[0](x))), nn.Conv1d(3, 8, 3, padding=1), nn.BatchNorm1d(8)), seq),
        "maxpool1d": (Case(lambda m, x: F.max_pool1d(m[0](x), 2), conv1()), seq),
        "avgpool1d": (Case(lambda m, x: F.avg_pool1d(m[0](x), 2, padding=1), conv1()), seq),
        "adaptive_avgpool1d": (Case(lambda m, x: F.adaptive_avg_pool1d(m[0](x), 1).flatten(1), conv1()), seq),
        "conv_transpose1d": (Case(lambda m, x: m[0](x), nn.ConvTranspose1d(3, 4, 3, stride=2)), seq),
        "depthwise_dilated1d": (Case(lambda m, x: m[0](x), nn.Conv1d(3, 3, 3, groups=3, dilation=2)), seq),
        "interpolate_linear1d": (Case(lambda m, x: F.interpolate(m[0](x), scale_factor=2, mode="linear"), conv1()),
                                 seq),
        # recurrent
        "lstm": (Case(lambda m, x: m[0](x)[0], nn.LSTM(6, 5, batch_first=True)), tok),
        "lstm_2layer_bidirectional": (Case(lambda m, x: m[0](x)[0], nn.LSTM(6, 5, 2, batch_first=True,
                                                                             bidirectional=True)), tok),
        "gru": (Case(lambda m, x: m[0](x)[0], nn.GRU(6, 5, batch_first=True)), tok),
        # elementwise and activations
        "maximum": (Case(lambda m, x: torch.maximum(m[0](x), m[1](x)), lin(), lin()), vec),
        "minimum": (Case(lambda m, x: torch.minimum(m[0](x), m[1](x)), lin(), lin()), vec),
        "clamp_min": (Case(lambda m, x: m[0](x).clamp(min=0.1), lin()), vec),
        "celu": (Case(lambda m, x: F.celu(m[0](x), 0.5), lin()), vec),
        "silu": (Case(lambda m, x: F.silu(m[0](x)), lin()), vec),
        "gelu_tanh": (Case(lambda m, x: F.gelu(m[0](x), approximate="tanh"), lin()), vec),
        "hardswish": (Case(lambda m, x: F.hardswish(m[0](x)), lin()), vec),
        "relu6": (Case(lambda m, x: F.relu6(m[0](x)), lin()), vec),
        "logsigmoid": (Case(lambda m, x: F.logsigmoid(m[0](x)), lin()), vec),
        "softsign": (Case(lambda m, x: F.softsign(m[0](x)), lin()), vec),
        "softshrink": (Case(lambda m, x: F.softshrink(m[0](x)), lin()), vec),
        "hardshrink": (Case(lambda m, x: F.hardshrink(m[0](x)), lin()), vec),
        "tanhshrink": (Case(lambda m, x: F.tanhshrink(m[0](x)), lin()), vec),
        "glu": (Case(lambda m, x: F.glu(m[0](x), -1), nn.Linear(6, 8)), vec),
        "softmin": (Case(lambda m, x: F.softmin(m[0](x), -1), lin()), vec),
        "rsqrt": (Case(lambda m, x: torch.rsqrt(m[0](x) ** 2 + 1), lin()), vec),
        "atan": (Case(lambda m, x: torch.atan(m[0](x)), lin()), vec),
        "trig_inverse": (Case(lambda m, x: torch.asin(0.9 * torch.tanh(m[0](x))) + torch.acos(0.5 * torch.tanh(m[0](x)))
                              + torch.tan(0.5 * m[0](x)), lin()), vec),
        "sign_round_floor": (Case(lambda m, x: m[0](x) * torch.sign(m[0](x)) + torch.round(m[0](x)) +
                                  torch.floor(m[0](x)), lin()), vec),
        "where_masks": (Case(lambda m, x: torch.where((m[0](x) > 0) & ~(m[0](x) > 1), m[0](x), -m[0](x)), lin()), vec),
        # reductions and norms
        "normalize": (Case(lambda m, x: F.normalize(m[0](x), dim=-1), lin()), vec),
        "norm_p1": (Case(lambda m, x: m[0](x) / m[0](x).norm(p=1, dim=-1, keepdim=True), lin()), vec),
        "logsumexp": (Case(lambda m, x: m[0](x) - torch.logsumexp(m[0](x), -1, keepdim=True), lin()), vec),
        "amin_amax": (Case(lambda m, x: m[0](x) - torch.amin(m[0](x), -1, keepdim=True) +
                           torch.amax(m[0](x), -1, keepdim=True), lin()), vec),
        "var_std": (Case(lambda m, x: m[0](x) / m[0](x).std(-1, keepdim=True) + m[0](x).var(-1, keepdim=True),
                         lin()), vec),
        "cumsum": (Case(lambda m, x: torch.cumsum(m[0](x), 1), lin()), vec),
        "prod": (Case(lambda m, x: m[0](x) * m[0](x).prod(-1, keepdim=True), lin()), vec),
        "instance_norm1d": (Case(lambda m, x: m[1](m[0](x)), conv1(), nn.InstanceNorm1d(4, affine=True)), seq),
        "group_norm": (Case(lambda m, x: m[1](m[0](x)), conv(), nn.GroupNorm(2, 4)), img),
        "layer_norm_channels": (Case(lambda m, x: m[1](m[0](x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2), conv(),
                                     nn.LayerNorm(4)), img),
        "local_response_norm": (Case(lambda m, x: m[1](m[0](x)), conv(), nn.LocalResponseNorm(3)), img),
        # spatial
        "pixel_shuffle": (Case(lambda m, x: F.pixel_shuffle(m[0](x), 2), nn.Conv2d(3, 8, 3)), img),
        "pixel_unshuffle": (Case(lambda m, x: F.pixel_unshuffle(m[0](x), 2), conv()), img),
        "reflect_pad": (Case(lambda m, x: m[0](F.pad(x, (1, 1, 1, 1), mode="reflect")), nn.Conv2d(3, 4, 3)), img),
        "replicate_pad": (Case(lambda m, x: m[0](F.pad(x, (1, 1, 1, 1), mode="replicate")), nn.Conv2d(3, 4, 3)),
                          img),
        "bilinear_align_corners": (Case(lambda m, x: F.interpolate(m[0](x), scale_factor=2, mode="bilinear",
                                                                   align_corners=True), conv()), img),
        "bicubic": (Case(lambda m, x: F.interpolate(m[0](x), scale_factor=2, mode="bicubic"), conv()), img),
        "adaptive_maxpool": (Case(lambda m, x: F.adaptive_max_pool2d(m[0](x), 2).flatten(1), conv()), img),
        "lp_pool2d": (Case(lambda m, x: F.lp_pool2d(m[0](x), 2, 2), conv()), img),
        "conv_transpose_groups": (Case(lambda m, x: m[0](x), nn.ConvTranspose2d(4, 4, 3, stride=2, groups=2,
                                                                                dilation=2)), (2, 4, 5, 5)),
        "conv3d": (Case(lambda m, x: m[0](x), nn.Conv3d(3, 4, 3)), (2, 3, 6, 6, 6)),
        "pool3d_frames": (Case(lambda m, x: m[0](F.avg_pool3d(F.max_pool3d(x, (1, 2, 2)), (1, 3, 3), 1,
                                                               (0, 1, 1)).flatten(1, 2)), nn.Conv2d(12, 4, 3)),
                          (2, 3, 4, 8, 8)),
        "dropout2d": (Case(lambda m, x: F.dropout2d(m[0](x), 0.3, training=True), conv()), img),
        # shapes and indexing
        "flip_roll": (Case(lambda m, x: torch.flip(m[0](x), [-1]) + torch.roll(m[0](x), 1, -1), lin()), vec),
        "stack_chunk": (Case(lambda m, x: torch.stack(torch.chunk(m[0](x), 2, dim=1), 1).flatten(1), conv()), img),
        "gather": (Case(lambda m, x: torch.gather(m[0](x), 1, (m[0](x) > 0).long()), lin()), vec),
        "masked_fill": (Case(lambda m, x: m[0](x).masked_fill(x[:, :5] > 0.5, -1e4), lin()), vec),
        # attention and containers
        "multihead_attention": (Case(lambda m, x: m[0](x, x, x)[0], nn.MultiheadAttention(6, 2, batch_first=True)),
                                tok),
        "transformer_encoder_layer": (Case(lambda m, x: m[0](x), nn.TransformerEncoderLayer(6, 2, 12, dropout=0.0,
                                                                                           batch_first=True)), tok),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="")
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--layers", default="", help="comma-separated case names (default: all)")
    args = ap.parse_args()
    import onnx  # noqa: E402 (Debian's python3-onnx, beside torch)

    wanted = [c for c in args.layers.split(",") if c]
    work = args.work or tempfile.mkdtemp(prefix="monet-layers-")
    os.makedirs(work, exist_ok=True)
    check = os.path.join(args.build, "apps", "monet-check")
    print("| layer | ONNX ops | check |")
    print("|---|---|---|", flush=True)
    passed = total = 0
    for name, (module, shape) in cases().items():
        if wanted and name not in wanted:
            continue
        total += 1
        path = os.path.join(work, name + ".onnx")
        torch.manual_seed(0)
        module.train()
        try:
            x = torch.randn(*shape)
            with torch.no_grad():
                out = module(x)
            torch.onnx.export(module, x, path, opset_version=args.opset, training=torch.onnx.TrainingMode.TRAINING,
                              input_names=["x"], output_names=["y"])
        except Exception as e:  # noqa: BLE001 (the exporter's own refusal is a row)
            print(f"| {name} | - | export failed: {str(e).splitlines()[0][:110]} |", flush=True)
            continue
        ops = []
        for node in onnx.load(path).graph.node:
            if node.op_type not in ops and node.op_type not in ("Constant", "Shape", "Gather", "Unsqueeze",
                                                                 "Concat", "Slice", "Cast"):
                ops.append(node.op_type)
        loss = [] if out.dim() >= 2 and out.shape[1] > 1 else ["--loss", "sum"]
        r = subprocess.run([check, path, "--batch", "2", "--precision", "f64", "--tolerance", "1e-6"] + loss,
                           capture_output=True, text=True, timeout=600)
        lines = [l for l in (r.stdout + r.stderr).strip().splitlines() if l.strip()]
        last = lines[-1] if lines else ""
        ok = r.returncode == 0 and last.endswith("PASS")
        passed += ok
        result = last.split(": ", 1)[-1] if ok else last.replace("monet-check: ", "").replace(work + "/", "")[:140]
        print(f"| {name} | {' '.join(ops[:8])} | {result.replace('|', '/')} |", flush=True)
    print(f"\n{passed} of {total} cases pass.")


if __name__ == "__main__":
    main()
