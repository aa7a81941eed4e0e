#!/usr/bin/python3
"""Writes the small hand-built ONNX files the tests use (test/data/): bad inputs, edge cases, a tiny transformer.

Usage: /usr/bin/python3 scripts/make_test_models.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "test", "data")


def save(model, name, check=True):
    """check=False for opsets beyond Debian's onnx 1.12 (17), whose checker validates them against older schemas."""
    if check:
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name))
    print(name)


def conv_relu(op="Relu", batch="N", name="g", hw=(8, 8), out_channels=4):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, *hw])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [out_channels, 3, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c"], ["y"], name="act")]
    g = helper.make_graph(nodes, name, [x, w], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def tiny_transformer():
    """A one-block ViT as torch 1.13 exports one (opset 13, training mode, export_params=False), with 8 channels.

    Patch embedding (Conv 4x4/4, Reshape, Transpose), the class token through the lowering of
    class_token.expand(n, -1, -1) (Shape, Reshape, ConstantOfShape, Mul, Equal, Where, Expand: folded at import
    but the Expand), position embedding, LayerNorm decomposed (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add),
    two-head softmax attention (Linear as Transpose + MatMul + Add, Slice into q/k/v, out projection as Gemm),
    exact GELU (Div, Erf, Add, Mul), x[:, 0] (Gather with a scalar index), runtime Unsqueeze/Squeeze, the head.
    Every parameter is a graph input, so the importer's initialisation rules all apply.
    """
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    nodes, consts = [], {}

    def const(value, dtype=i64, shape=None):
        """Name of a Constant node output holding value (a scalar unless shape or a list is given)."""
        name = f"c{len(consts)}"
        values = value if isinstance(value, list) else [value]
        dims = shape if shape is not None else ([len(values)] if isinstance(value, list) else [])
        nodes.append(helper.make_node("Constant", [], [name], name=name,
                                      value=helper.make_tensor(name, dtype, dims, values)))
        consts[name] = value
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def layer_norm(x, g, b, tag):
        mean = node("ReduceMean", [x], f"{tag}_mean", axes=[-1])
        d = node("Sub", [x, mean], f"{tag}_sub")
        var = node("ReduceMean", [node("Pow", [d, const(2.0, f32)], f"{tag}_pow")], f"{tag}_var", axes=[-1])
        sd = node("Sqrt", [node("Add", [var, const(1e-6, f32)], f"{tag}_add_eps")], f"{tag}_sqrt")
        return node("Add", [node("Mul", [node("Div", [d, sd], f"{tag}_div"), g], f"{tag}_mul"), b], tag)

    def linear(x, w, b, tag):  # torch's Linear on a 3-D input: x @ W^T + b
        wt = node("Transpose", [w], f"{tag}_wt", perm=[1, 0])
        return node("Add", [b, node("MatMul", [x, wt], f"{tag}_matmul")], tag)

    # Patch embedding: (N, 3, 8, 8) -> (N, 8, 2, 2) -> (N, 8, 4) -> tokens (N, 4, 8).
    conv = node("Conv", ["x", "conv_w", "conv_b"], "conv", kernel_shape=[4, 4], strides=[4, 4])
    n = node("Gather", [node("Shape", ["x"], "shape_x"), const(0)], "batch", axis=0)
    flat_shape = node("Concat", [node("Unsqueeze", [n, const([0])], "n_1d"),
                                 node("Unsqueeze", [const(8), const([0])], "c_1d"),
                                 node("Unsqueeze", [const(4), const([0])], "p_1d")], "flat_shape", axis=0)
    tokens = node("Transpose", [node("Reshape", [conv, flat_shape], "flat")], "tokens", perm=[0, 2, 1])
    # class_token.expand(n, -1, -1) as torch lowers it.
    n2 = node("Gather", [node("Shape", [tokens], "shape_t"), const(0)], "batch_t", axis=0)
    minus_one = const(-1)
    spec = node("Concat", [node("Unsqueeze", [n2, const([0])], "n2_1d"),
                           node("Unsqueeze", [minus_one, const([0])], "m1_1d"),
                           node("Unsqueeze", [minus_one, const([0])], "m2_1d")], "expand_spec", axis=0)
    spec = node("Reshape", [spec, const([-1])], "expand_spec_flat")
    ones = node("ConstantOfShape", [node("Shape", [spec], "spec_shape")], "spec_ones",
                value=helper.make_tensor("one", i64, [1], [1]))
    is_minus = node("Equal", [spec, node("Mul", [ones, const(-1)], "spec_minus")], "spec_is_minus")
    target = node("Where", [is_minus, ones, spec], "expand_target")
    cls = node("Expand", ["class_token", target], "cls_expanded")
    h0 = node("Add", [node("Concat", [cls, tokens], "with_cls", axis=1), "pos_embedding"], "h0")  # (N, 5, 8)

    # Two-head self-attention.
    h1 = layer_norm(h0, "ln1_g", "ln1_b", "ln1")
    qkv = linear(h1, "qkv_w", "qkv_b", "qkv")  # (N, 5, 24)
    heads = []
    for k, part in enumerate("qkv"):
        s = node("Slice", [qkv, const([8 * k]), const([8 * k + 8]), const([-1])], f"{part}_slice")
        r = node("Reshape", [s, const([0, 0, 2, 4])], f"{part}_heads")
        heads.append(node("Transpose", [r], f"{part}_t", perm=[0, 2, 1, 3] if part != "k" else [0, 2, 3, 1]))
    q, kt, v = heads
    scores = node("MatMul", [node("Div", [q, const(2.0, f32)], "q_scaled"), kt], "scores")  # (N, 2, 5, 5)
    attn = node("MatMul", [node("Softmax", [scores], "attn", axis=-1), v], "attn_v")  # (N, 2, 5, 4)
    merged = node("Reshape", [node("Transpose", [attn], "attn_t", perm=[0, 2, 1, 3]), const([-1, 8])], "merged")
    out = node("Gemm", [merged, "out_w", "out_b"], "out_proj", transB=1)
    h2 = node("Add", [node("Reshape", [out, const([-1, 5, 8])], "out_3d"), h0], "h2")

    # MLP with exact GELU.
    h3 = layer_norm(h2, "ln2_g", "ln2_b", "ln2")
    f = linear(h3, "fc1_w", "fc1_b", "fc1")
    erf = node("Erf", [node("Div", [f, const(1.4142135381698608, f32)], "gelu_div")], "gelu_erf")
    gelu = node("Mul", [node("Mul", [f, node("Add", [erf, const(1.0, f32)], "gelu_add")], "gelu_mul"),
                        const(0.5, f32)], "gelu")
    h4 = node("Add", [h2, linear(gelu, "fc2_w", "fc2_b", "fc2")], "h4")

    # x[:, 0], a no-op Unsqueeze/Squeeze pair at runtime, the head.
    first = node("Gather", [h4, const(0)], "cls_out", axis=1)  # (N, 8)
    first = node("Squeeze", [node("Unsqueeze", [first, const([1])], "cls_3d"), const([1])], "cls_2d")
    node("Gemm", [first, "head_w", "head_b"], "y", transB=1)

    params = {"conv_w": [8, 3, 4, 4], "conv_b": [8], "class_token": [1, 1, 8], "pos_embedding": [1, 5, 8],
              "ln1_g": [8], "ln1_b": [8], "qkv_w": [24, 8], "qkv_b": [24], "out_w": [8, 8], "out_b": [8],
              "ln2_g": [8], "ln2_b": [8], "fc1_w": [16, 8], "fc1_b": [16], "fc2_w": [8, 16], "fc2_b": [8],
              "head_w": [5, 8], "head_b": [5]}
    inputs = [helper.make_tensor_value_info("x", f32, ["N", 3, 8, 8])]
    inputs += [helper.make_tensor_value_info(name, f32, shape) for name, shape in params.items()]
    g = helper.make_graph(nodes, "tiny_transformer", inputs, [helper.make_tensor_value_info("y", f32, ["N", 5])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def layer_norm_forms():
    """nn.LayerNorm as torch exports it at opset 13, in the forms the importer fuses into one LayerNorm and in those
    it leaves as they are, on x (N, 3, 4):

    ln_a  over the last dim, Scale * normalised (operands swapped), B + that, epsilon an initializer: fused
    ln_b  over the last two dims, no B (the Mul is read twice): fused, with a zero B
    ln_c  a Scale of shape [1] (broadcast, not the normalised shape): matched, then converted node by node
    ln_d  the centred value read by a third node: not matched
    """
    f32 = TensorProto.FLOAT
    nodes, inits = [], [helper.make_tensor("eps_init", f32, [], [1e-5])]

    def const(value):
        name = f"c{len(nodes)}"
        nodes.append(helper.make_node("Constant", [], [name], name=name, value=helper.make_tensor(name, f32, [], [value])))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def stats(x, tag, axes, eps):
        d = node("Sub", [x, node("ReduceMean", [x], f"{tag}_mean", axes=axes)], f"{tag}_sub")
        var = node("ReduceMean", [node("Pow", [d, const(2.0)], f"{tag}_pow")], f"{tag}_var", axes=axes)
        return d, node("Div", [d, node("Sqrt", [node("Add", [var, eps], f"{tag}_add_eps")], f"{tag}_sqrt")],
                       f"{tag}_div")

    _, n = stats("x", "ln_a", [-1], "eps_init")
    a = node("Add", ["a_b", node("Mul", ["a_g", n], "ln_a_mul")], "ln_a")
    _, n = stats(a, "ln_b", [-2, -1], const(1e-5))
    scaled = node("Mul", [n, "b_g"], "ln_b_mul")
    b = node("Add", [scaled, node("Relu", [scaled], "ln_b_relu")], "ln_b")
    _, n = stats(b, "ln_c", [-1], const(1e-5))
    c = node("Add", [node("Mul", [n, "c_g"], "ln_c_mul"), "c_b"], "ln_c")
    d, n = stats(c, "ln_d", [-1], const(1e-5))
    h = node("Add", [node("Add", [node("Mul", [n, "d_g"], "ln_d_mul"), "d_b"], "ln_d"), d], "ln_d_res")
    nodes.append(helper.make_node("Constant", [], ["flat_shape"], name="flat_shape",
                                  value=helper.make_tensor("fs", TensorProto.INT64, [2], [-1, 12])))
    node("Gemm", [node("Reshape", [h, "flat_shape"], "flat"), "head_w", "head_b"], "y", transB=1)
    params = {"a_g": [4], "a_b": [4], "b_g": [3, 4], "c_g": [1], "c_b": [4], "d_g": [4], "d_b": [4],
              "head_w": [5, 12], "head_b": [5]}
    inputs = [helper.make_tensor_value_info("x", f32, ["N", 3, 4])]
    inputs += [helper.make_tensor_value_info(name, f32, shape) for name, shape in params.items()]
    g = helper.make_graph(nodes, "layer_norm_forms", inputs, [helper.make_tensor_value_info("y", f32, ["N", 5])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def layer_norm_stats():
    """Opset 17: a LayerNormalization whose Mean and InvStdDev outputs the model reads (y + Mean * InvStdDev), so
    that gradients flow through them (LayerNormStatGrad)."""
    f32 = TensorProto.FLOAT
    nodes = [helper.make_node("Mul", ["x", "s"], ["xs"], name="xs"),  # a parameter before it: dX reaches s
             helper.make_node("LayerNormalization", ["xs", "g", "b"], ["ln", "mean", "invstd"], name="ln", axis=-2,
                              epsilon=1e-3),
             helper.make_node("Mul", ["mean", "invstd"], ["stats"], name="stats"),
             helper.make_node("Add", ["ln", "stats"], ["h"], name="h"),
             helper.make_node("Constant", [], ["flat_shape"], name="flat_shape",
                              value=helper.make_tensor("fs", TensorProto.INT64, [2], [-1, 12])),
             helper.make_node("Reshape", ["h", "flat_shape"], ["flat"], name="flat"),
             helper.make_node("Gemm", ["flat", "head_w", "head_b"], ["y"], name="y", transB=1)]
    params = {"s": [4], "g": [3, 4], "b": [3, 4], "head_w": [5, 12], "head_b": [5]}
    inputs = [helper.make_tensor_value_info("x", f32, ["N", 3, 4])]
    inputs += [helper.make_tensor_value_info(name, f32, shape) for name, shape in params.items()]
    g = helper.make_graph(nodes, "layer_norm_stats", inputs, [helper.make_tensor_value_info("y", f32, ["N", 5])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def masks_and_math():
    """Issue 38's elementwise ops as torch 1.13 exports them (opset 13, training mode, export_params=False): Neg,
    Exp, Log, Reciprocal, Sin, Cos; a causal mask by masked_fill with -inf (Where on a constant mask, a scalar
    constant branch); masks computed from the data (Greater, Less, GreaterOrEqual, LessOrEqual, Equal on int64)
    into Where and through Cast to float; Cast float -> int64 -> float. Input (N, 4, 6), output (N, 5).
    """
    import tempfile

    import torch
    from torch import nn

    class MasksAndMath(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 6)
            self.head = nn.Linear(24, 5)
            self.keep = torch.tensor([[True, False, True, True, False, True]])  # a constant mask (1, 6)

        def forward(self, x):  # (N, 4, 6)
            h = self.fc1(x)
            a = -h + torch.exp(h * 0.5)
            b = torch.log(torch.exp(h) + 1.0)
            c = torch.reciprocal(h * h + 1.0)
            d = h.sin() * h.cos()
            causal = torch.arange(4)[None, :] > torch.arange(4)[:, None]
            s = torch.matmul(h, h.transpose(1, 2)).masked_fill(causal, float("-inf")).softmax(-1)
            e = torch.matmul(s, a)
            f = torch.where(h < b, e, d) * (h > 0).float() + torch.where(self.keep, c, -b)
            g = torch.where(x >= 0.5, f, torch.zeros(())) + torch.where(x <= -0.5, 0.5 * f, f)
            k = ((x * 3).long() == 1).float() + (x * 2).long().float()
            return self.head((g * (k + 1.0)).flatten(1))

    torch.manual_seed(0)
    module = MasksAndMath().train()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        torch.onnx.export(module, torch.randn(2, 4, 6), path, training=torch.onnx.TrainingMode.TRAINING,
                          opset_version=13, do_constant_folding=False, export_params=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        return onnx.load(path)


def torch_export(module, example, opset, export_params=False, fold=False):
    """A torch.nn module as torch 1.13 exports it for training (by default export_params=False), data input x with
    batch N."""
    import tempfile

    import torch

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        torch.onnx.export(module, example, path, training=torch.onnx.TrainingMode.TRAINING, opset_version=opset,
                          do_constant_folding=fold, export_params=export_params, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        return onnx.load(path)


def conv1d_net():
    """A 1-D CNN as people write one for audio or time series: Conv1d (padded, strided, dilated, depthwise), BatchNorm1d,
    MaxPool1d (ceil_mode), AvgPool1d, ConvTranspose1d, F.interpolate on (N, C, L) (linear, nearest), AdaptiveAvgPool1d(1)
    and a Linear head, at opset 13. Input (N, 3, 32), output (N, 5).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Conv1dNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(3, 8, 5, padding=2)
            self.bn1 = nn.BatchNorm1d(8)
            self.c2 = nn.Conv1d(8, 8, 3, stride=2, dilation=2, padding=1)
            self.dw = nn.Conv1d(8, 8, 3, groups=8, padding=1, bias=False)
            self.up = nn.ConvTranspose1d(8, 6, 4, stride=2, padding=1, output_padding=1)
            self.head = nn.Linear(6, 5)

        def forward(self, x):  # (N, 3, 32)
            h = F.max_pool1d(F.relu(self.bn1(self.c1(x))), 3, stride=2, ceil_mode=True)
            h = F.avg_pool1d(F.relu(self.c2(h)), 2, padding=1, count_include_pad=False)
            h = self.dw(F.interpolate(h, scale_factor=2, mode="linear", align_corners=False))
            h = F.interpolate(self.up(h), size=23, mode="nearest")
            return self.head(F.adaptive_avg_pool1d(torch.tanh(h), 1).flatten(1))

    torch.manual_seed(0)
    return torch_export(Conv1dNet().train(), torch.randn(2, 3, 32), 13)


def initializer_params():
    """Parameters stored in the file, as torch.onnx.export writes them by default (export_params=True, constants
    folded): a Linear on a 3-D input (MatMul of the transposed weight, the bias a plain Add), a learned position
    embedding added, a layer scale multiplied, an InstanceNorm1d's affine scale and bias (stored at their initial
    ones and zeros), a learned scalar temperature, a buffer of sinusoids added, and an additive causal mask buffer
    (-1e9 above the diagonal) that must stay a constant. Input (N, 4, 6), output (N, 4, 3).
    """
    import math

    import torch
    from torch import nn

    class InitializerParams(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(6, 8)
            self.pos = nn.Parameter(0.1 * torch.randn(1, 4, 8))
            self.scale = nn.Parameter(torch.full((8,), 0.5))
            self.temperature = nn.Parameter(torch.tensor(2.0))
            self.head = nn.Linear(8, 3)
            self.inorm = nn.InstanceNorm1d(4, affine=True)
            t = torch.arange(4.0).unsqueeze(1)
            self.register_buffer("sinusoid", torch.sin(t / (10.0 ** (torch.arange(8.0) / 8))).unsqueeze(0))
            self.register_buffer("mask", torch.triu(torch.full((4, 4), -1e9), 1))
            self.inv_sqrt = 1 / math.sqrt(8)

        def forward(self, x):  # (N, 4, 6)
            h = self.inorm((self.proj(x) + self.pos + self.sinusoid) * self.scale)
            scores = h @ h.transpose(1, 2) * self.inv_sqrt + self.mask
            h = torch.softmax(scores / self.temperature, dim=-1) @ h
            return self.head(h)

    torch.manual_seed(0)
    return torch_export(InitializerParams().train(), torch.randn(2, 4, 6), 13, export_params=True, fold=True)


def seg_head(opset=13):
    """A segmentation head upsampling to computed sizes, as torch exports F.interpolate(x, size=y.shape[-2:],
    mode='bilinear'): Resize's sizes = Concat(Shape/Gather/Unsqueeze of x (N, C), Cast(Slice(Shape(y), -2))), folded
    at import. Two strided convs down, bilinear up to the stem's size, a skip Add, a 1x1 head, bilinear up to the
    input's size. Input (N, 3, 20, 28), output (N, 2, 20, 28).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class SegHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.head = nn.Conv2d(8, 2, 1)

        def forward(self, x):  # (N, 3, H, W)
            f = F.relu(self.stem(x))  # (N, 8, H/2, W/2)
            g = F.relu(self.down(f))  # (N, 8, H/4, W/4)
            g = F.interpolate(g, size=f.shape[-2:], mode="bilinear", align_corners=False)
            y = self.head(g + f)
            return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)

    torch.manual_seed(0)
    return torch_export(SegHead().train(), torch.randn(2, 3, 20, 28), opset)


def reduce_scan_ops():
    """ReduceMax (torch.amax after a Relu: ties at 0), CumSum, Trilu (torch.triu and torch.tril) and Tile
    (Tensor.repeat) as torch exports them at opset 14 (Trilu's first). Input (N, 4, 6), output (N, 5).
    """
    import torch
    from torch import nn

    class ReduceScan(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)
            self.head = nn.Linear(6 * 6 + 4 + 8 * 6, 5)

        def forward(self, x):  # (N, 4, 6)
            h = self.fc(x)                                          # (N, 4, 6)
            m = torch.amax(torch.relu(h), dim=2)                    # (N, 4)
            c = torch.cumsum(h, dim=1)                              # (N, 4, 6)
            s = h.transpose(1, 2) @ h                               # (N, 6, 6)
            t = torch.triu(s, diagonal=1) + torch.tril(s, -1) * 0.5
            r = c.repeat(1, 2, 1)                                   # (N, 8, 6)
            return self.head(torch.cat([t.flatten(1), m, r.flatten(1)], 1))

    torch.manual_seed(0)
    return torch_export(ReduceScan().train(), torch.randn(2, 4, 6), 14)


def fold_shapes():
    """The fold rules of issue 38 computing a Reshape's target from Shape(x) = [N, 3, 8, 8] (lib/ir/onnx_fold.cpp):
      a = Slice(s, -1, INT64_MIN, step -2) = [8, 3];  b = Abs(Where(Greater(a, 4), a, Neg(a))) = [8, 3]
      n = Max(Slice(s, 0, 1), 1) = [N];  p = ReduceProd(a) = [24]
      k = Min(Ceil(p / 3.2), Floor(p / 2.9), Where(Less(p, 100), 9, 0)) = [8]   (ceil 7.5, floor 8.28, 9)
      y = Reshape(x, Concat(n, b, k)): (N, 8, 3, 8)
    """
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    nodes = []

    def const(name, values, dtype=i64, dims=None):
        t = helper.make_tensor(name + "_t", dtype, [len(values)] if dims is None else dims, values)
        nodes.append(helper.make_node("Constant", [], [name], value=t))
        return name

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    s = node("Shape", ["x"], "s")
    a = node("Slice", [s, const("a_start", [-1]), const("a_end", [-2**63]), const("a_axes", [0]),
                       const("a_step", [-2])], "a")
    b = node("Abs", [node("Where", [node("Greater", [a, const("four", [4, 4])], "gt"), a, node("Neg", [a], "neg")],
                          "w")], "b")
    n = node("Max", [node("Slice", [s, const("n_start", [0]), const("n_end", [1])], "s0"), const("one", [1])], "n")
    p = node("Cast", [node("ReduceProd", [a], "p_int", keepdims=1)], "p", to=f32)
    ceil = node("Ceil", [node("Div", [p, const("c32", [3.2], f32)], "p_c")], "ceil")
    floor = node("Floor", [node("Div", [p, const("c29", [2.9], f32)], "p_f")], "floor")
    nine = node("Where", [node("Less", [p, const("hundred", [100.0], f32)], "lt"), const("c9", [9.0], f32),
                          const("c0", [0.0], f32)], "nine")
    k = node("Cast", [node("Min", [ceil, floor, nine], "k_f")], "k", to=i64)
    node("Reshape", ["x", node("Concat", [n, b, k], "target", axis=0)], "y")
    x = helper.make_tensor_value_info("x", f32, ["N", 3, 8, 8])
    y = helper.make_tensor_value_info("y", f32, ["N", 8, 3, 8])
    return helper.make_model(helper.make_graph(nodes, "fold_shapes", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 13)])


def einsum_forms():
    """Einsum as torch.einsum exports it, in the forms import rewrites into Transpose/Reshape/MatMul: a Linear-like
    contraction with a parameter, a batched product of a value with itself, a permuted output, a contraction to a
    vector (no free dim on the right) and an outer product (nothing contracted)."""
    f32 = TensorProto.FLOAT
    nodes = [helper.make_node("Einsum", ["x", "w1"], ["y1"], name="linear", equation="b i j, j k -> b i k"),
             helper.make_node("Einsum", ["y1", "y1"], ["y2"], name="gram", equation="bik,bjk->bij"),
             helper.make_node("Einsum", ["y2", "y1"], ["y3"], name="permuted", equation="bij,bjk->kbi"),
             helper.make_node("Einsum", ["y3", "w2"], ["y4"], name="to_vector", equation="kbi,k->bi"),
             helper.make_node("Einsum", ["y4", "y4"], ["y"], name="outer", equation="bi,bj->bij")]
    g = helper.make_graph(nodes, "einsum_forms", [helper.make_tensor_value_info("x", f32, ["N", 3, 4]),
                                                  helper.make_tensor_value_info("w1", f32, [4, 5]),
                                                  helper.make_tensor_value_info("w2", f32, [5])],
                          [helper.make_tensor_value_info("y", f32, ["N", 3, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def input_files():
    """Data inputs beyond the first and values from files (--input NAME=FILE.npy): a bool mask input, the values of
    int_buffer_input.onnx's rel_idx, an attention mask for bert_inputs_tiny.onnx at batch 2 and, for the error rows,
    files of the wrong shape, dtype and range and a truncated one."""
    import numpy as np
    f32, b = TensorProto.FLOAT, TensorProto.BOOL
    # keep (N, 4) bool: y = where(keep[:, None, :], x, 0) * x, a per-example mask of x's columns.
    g = helper.make_graph([helper.make_node("Unsqueeze", ["keep", "axes"], ["k3"], name="unsqueeze"),
                           helper.make_node("Where", ["k3", "x", "zero"], ["kept"], name="where"),
                           helper.make_node("Mul", ["kept", "w"], ["y"], name="mul")],
                          "bool_mask_input", [helper.make_tensor_value_info("x", f32, ["N", 3, 4]),
                                              helper.make_tensor_value_info("keep", b, ["N", 4]),
                                              helper.make_tensor_value_info("w", f32, [3, 4])],
                          [helper.make_tensor_value_info("y", f32, ["N", 3, 4])],
                          [helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
                           helper.make_tensor("zero", f32, [], [0.0])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "bool_mask_input.onnx")
    # A second data input whose symbolic dimension is not one of the first input's.
    g = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"], name="add")],
                          "unknown_symbol_input", [helper.make_tensor_value_info("x", f32, ["N", 4]),
                                                   helper.make_tensor_value_info("z", f32, ["N", "T"])],
                          [helper.make_tensor_value_info("y", f32, ["N", 4])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "unknown_symbol_input.onnx")
    rng = np.random.default_rng(0)
    arrays = {
        "rel_idx.npy": (np.arange(16).reshape(4, 4) * 3 % 7).astype(np.int64),
        "rel_idx_float.npy": np.zeros((4, 4), np.float32),
        "rel_idx_shape.npy": np.zeros((16,), np.int64),
        "bert_inputs_mask.npy": (np.arange(64)[None, :] < np.array([[40], [64]])).astype(np.int32),
        "bert_inputs_bad_ids.npy": np.where(np.arange(128).reshape(2, 64) == 70, 101,
                                            rng.integers(0, 101, (2, 64))).astype(np.int64),
    }
    for name, a in arrays.items():
        np.save(os.path.join(OUT, name), a)
        print(name)
    with open(os.path.join(OUT, "rel_idx.npy"), "rb") as f:
        head = f.read(200)
    with open(os.path.join(OUT, "truncated.npy"), "wb") as f:
        f.write(head)
    print("truncated.npy")


def sdpa_forms():
    """Two attention layers as torch's ONNX exporter (opset 14 and later) writes F.scaled_dot_product_attention,
    which torch 1.13 cannot export, so the nodes are written here as its symbolic function writes them:
      scale:  1 / Sqrt(Cast(Slice(Shape(q), -1))) without an explicit scale, else a Constant; then
      S = MatMul(Mul(q, Sqrt(scale)), Mul(Transpose(k, swap last two), Sqrt(scale)))
      is_causal:  S + Where(Equal(Trilu(Expand(1.0, Concat(Slice(Shape(q), -2, -1), Slice(Shape(k), -2, -1))),
                  upper = 0), 0), -inf, 0)
      a bool mask m:  S + Where(m, 0, -inf)
      O = MatMul(Softmax(S, axis -1), v)
    Layer 1 causal with the default scale; layer 2 with scale = 0.3 and a key-padding mask `keep` (N, 1, 1, T).
    Input x (N, 8, 16), 2 heads of 8; output y (N, 5). Parameters are graph inputs (export_params=False).
    """
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    T, D, H = 8, 16, 2
    nodes, params = [], []

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    def const(name, values, dtype=i64, dims=None):
        dims = [len(values)] if dims is None else dims
        nodes.append(helper.make_node("Constant", [], [name], name=name,
                                      value=helper.make_tensor(name + "_t", dtype, dims, values)))
        return name

    def param(name, shape):
        params.append(helper.make_tensor_value_info(name, f32, shape))
        return name

    def heads(t, p):  # (N, T, D) -> (N, H, T, D / H)
        r = node("Reshape", [t, const(p + "_shape", [0, T, H, D // H])], p + "_r")
        return node("Transpose", [r], p + "_h", perm=[0, 2, 1, 3])

    def layer(x, p, causal, scale):
        qkv = node("Add", [node("MatMul", [x, param(p + ".w_qkv", [D, 3 * D])], p + "_mm"),
                           param(p + ".b_qkv", [3 * D])], p + "_qkv")
        nodes.append(helper.make_node("Split", [qkv, const(p + "_split", [D, D, D])],
                                      [p + "_q", p + "_k", p + "_v"], name=p + "_split_node", axis=2))
        q, k, v = heads(p + "_q", p + "_q"), heads(p + "_k", p + "_k"), heads(p + "_v", p + "_v")
        if scale is None:
            last = node("Slice", [node("Shape", [q], p + "_qshape"), const(p + "_m1", [-1]),
                                  const(p + "_max", [2**63 - 1])], p + "_qlast")
            size = node("Cast", [last], p + "_size", to=f32)
            s = node("Div", [const(p + "_one", [1.0], f32), node("Sqrt", [size], p + "_sqrt_size")], p + "_scale0")
            s = node("Cast", [s], p + "_scale", to=f32)
        else:
            s = const(p + "_scale", [scale], f32, [])
        kt = node("Transpose", [k], p + "_kt", perm=[0, 1, 3, 2])
        qs = node("Mul", [q, node("Sqrt", [s], p + "_sqrt_q")], p + "_qs")
        ks = node("Mul", [kt, node("Sqrt", [s], p + "_sqrt_k")], p + "_ks")
        scores = node("MatMul", [qs, ks], p + "_scores")
        zero, ninf = const(p + "_zero", [0.0], f32), const(p + "_ninf", [float("-inf")], f32)
        if causal:
            m2, m1 = const(p + "_c_m2", [-2]), const(p + "_c_m1", [-1])
            tq = node("Slice", [node("Shape", [q], p + "_c_qshape"), m2, m1], p + "_tq")
            tk = node("Slice", [node("Shape", [k], p + "_c_kshape"), m2, m1], p + "_tk")
            ones = node("Expand", [const(p + "_c_one", [1.0], f32), node("Concat", [tq, tk], p + "_c_size", axis=0)],
                        p + "_c_ones")
            tril = node("Trilu", [ones], p + "_c_tril", upper=0)
            mask = node("Where", [node("Equal", [tril, zero], p + "_c_eq"), ninf, zero], p + "_mask")
        else:
            mask = node("Where", ["keep", zero, ninf], p + "_mask")
        probs = node("Softmax", [node("Add", [scores, mask], p + "_masked")], p + "_probs", axis=-1)
        o = node("Transpose", [node("MatMul", [probs, v], p + "_o")], p + "_ot", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, const(p + "_oshape", [0, T, D])], p + "_or")
        return node("Add", [x, node("MatMul", [o, param(p + ".w_o", [D, D])], p + "_proj")], p + "_out")

    h = layer("x", "l1", True, None)
    h = layer(h, "l2", False, 0.3)
    pooled = node("ReduceMean", [h], "pooled", axes=[1], keepdims=0)
    node("MatMul", [pooled, param("head.w", [D, 5])], "y")
    inputs = [helper.make_tensor_value_info("x", f32, ["N", T, D]),
              helper.make_tensor_value_info("keep", TensorProto.BOOL, ["N", 1, 1, T])] + params
    g = helper.make_graph(nodes, "sdpa_forms", inputs, [helper.make_tensor_value_info("y", f32, ["N", 5])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


def fold_trilu():
    """Trilu and Sqrt folded at import on a constant of rank 3, k given both ways:
      c = Trilu(ones(1, 3, 4), k = 1, upper = 1) + Trilu(ones(1, 3, 4), k = -1, upper = 0) * Sqrt(9)
        = 0 on the diagonal, 1 above it, 3 below;  y = Mul(x, c)  (x (N, 3, 4))
    """
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    ones = helper.make_tensor("ones_t", f32, [1, 3, 4], [1.0] * 12)
    nodes = [helper.make_node("Constant", [], ["ones"], name="ones", value=ones),
             helper.make_node("Constant", [], ["k1"], name="k1", value=helper.make_tensor("k1_t", i64, [], [1])),
             helper.make_node("Constant", [], ["km1"], name="km1", value=helper.make_tensor("km1_t", i64, [], [-1])),
             helper.make_node("Constant", [], ["nine"], name="nine", value=helper.make_tensor("nine_t", f32, [], [9.0])),
             helper.make_node("Trilu", ["ones", "k1"], ["up"], name="up", upper=1),
             helper.make_node("Trilu", ["ones", "km1"], ["low"], name="low", upper=0),
             helper.make_node("Sqrt", ["nine"], ["three"], name="three"),
             helper.make_node("Mul", ["low", "three"], ["low3"], name="low3"),
             helper.make_node("Add", ["up", "low3"], ["c"], name="c"),
             helper.make_node("Mul", ["x", "c"], ["y"], name="y")]
    g = helper.make_graph(nodes, "fold_trilu", [helper.make_tensor_value_info("x", f32, ["N", 3, 4])],
                          [helper.make_tensor_value_info("y", f32, ["N", 3, 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


def sdpa_dynamo_forms():
    """Two attention layers as torch's dynamo exporter (onnxscript's torch_lib, opset 18) writes
    F.scaled_dot_product_attention, written node for node (Debian's torch 1.13 has neither):
      scale:  CastLike(Div(CastLike(1.0, q), Sqrt(CastLike(Gather(Shape(q), [-1]), q))), q), or CastLike(c, q)
      Kt = Reshape(Transpose(Reshape(k, [-1, Tk, d]), [0, 2, 1]), Concat(Shape(k)[:-2], [d, Tk]))
      S = MatMul(Mul(q, Sqrt(scale)), Mul(Kt, Sqrt(scale) or CastLike(Sqrt(scale), Kt)))
      is_causal:  S + CastLike(Where(Equal(Trilu(Expand(1.0, [Tq, Tk]), upper = 0), 0), -inf, 0), q)
      P = Dropout(Softmax(S), dropout_p = 0) (inference mode: the identity; its mask unread);  O = MatMul(P, v)
    Layer 1 causal with the default scale; layer 2 without a mask, scale 0.25. The mean over tokens is weighted by
    CastLike(keep, h) of the bool input keep (N, T, 1) at run time. Input x (N, 8, 16), 2 heads of 8; output (N, 5).
    """
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    T, D, H = 8, 16, 2
    nodes, params = [], []

    def node(op, ins, out, n_out=1, **kw):
        outs = [out] + [f"{out}_{i}" for i in range(1, n_out)]
        nodes.append(helper.make_node(op, ins, outs, name=out, **kw))
        return out

    def ints(name, values):
        nodes.append(helper.make_node("Constant", [], [name], name=name, value_ints=values))
        return name

    def scalar(name, value):
        nodes.append(helper.make_node("Constant", [], [name], name=name, value_float=value))
        return name

    def param(name, shape):
        params.append(helper.make_tensor_value_info(name, f32, shape))
        return name

    def heads(t, p):
        r = node("Reshape", [t, ints(p + "_shape", [0, T, H, D // H])], p + "_r")
        return node("Transpose", [r], p + "_h", perm=[0, 2, 1, 3])

    def layer(x, p, causal, scale):
        qkv = node("MatMul", [x, param(p + ".w_qkv", [D, 3 * D])], p + "_qkv")
        nodes.append(helper.make_node("Split", [qkv, ints(p + "_split", [D, D, D])],
                                      [p + "_q", p + "_k", p + "_v"], name=p + "_split_node", axis=2))
        q, k, v = heads(p + "_q", p + "_q"), heads(p + "_k", p + "_k"), heads(p + "_v", p + "_v")
        if scale is None:
            last = node("Gather", [node("Shape", [q], p + "_qshape"), ints(p + "_m1", [-1])], p + "_qlast")
            size = node("CastLike", [last, q], p + "_size")
            one = node("CastLike", [scalar(p + "_one", 1.0), q], p + "_one_q")
            s = node("Div", [one, node("Sqrt", [size], p + "_sqrt_size")], p + "_scale0")
        else:
            s = scalar(p + "_scale0", scale)
        s = node("CastLike", [s, q], p + "_scale")
        k_last = node("Shape", [k], p + "_k_last", start=-1)
        k_rows = node("Shape", [k], p + "_k_rows", start=-2, end=-1)
        k_first = node("Shape", [k], p + "_k_first", end=-2)
        k3 = node("Reshape", [k, node("Concat", [ints(p + "_minus1", [-1]), k_rows, k_last], p + "_k3_shape",
                                      axis=0)], p + "_k3")
        k3t = node("Transpose", [k3], p + "_k3t", perm=[0, 2, 1])
        kt = node("Reshape", [k3t, node("Concat", [k_first, k_last, k_rows], p + "_kt_shape", axis=0)], p + "_kt")
        qs = node("Mul", [q, node("Sqrt", [s], p + "_sqrt_q")], p + "_qs")
        sqrt_k = node("Sqrt", [s], p + "_sqrt_k")
        ks = node("Mul", [kt, sqrt_k if causal else node("CastLike", [sqrt_k, kt], p + "_sqrt_k_like")], p + "_ks")
        scores = node("MatMul", [qs, ks], p + "_scores")
        if causal:
            tq = node("Slice", [node("Shape", [q], p + "_c_qshape"), ints(p + "_c_m2", [-2]), ints(p + "_c_m1", [-1])],
                      p + "_tq")
            tk = node("Slice", [node("Shape", [k], p + "_c_kshape"), ints(p + "_c_m2k", [-2]),
                                ints(p + "_c_m1k", [-1])], p + "_tk")
            ones = node("Expand", [scalar(p + "_c_one", 1.0), node("Concat", [tq, tk], p + "_c_size", axis=0)],
                        p + "_c_ones")
            tril = node("Trilu", [ones], p + "_c_tril", upper=0)
            mask = node("Where", [node("Equal", [tril, scalar(p + "_c_zero", 0.0)], p + "_c_eq"),
                                  scalar(p + "_c_ninf", float("-inf")), scalar(p + "_c_zero2", 0.0)], p + "_mask0")
            scores = node("Add", [scores, node("CastLike", [mask, q], p + "_mask")], p + "_masked")
        probs = node("Softmax", [scores], p + "_probs", axis=-1)
        probs = node("Dropout", [probs, scalar(p + "_p", 0.0)], p + "_dropped", n_out=2)
        o = node("Transpose", [node("MatMul", [probs, v], p + "_o")], p + "_ot", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, ints(p + "_oshape", [0, T, D])], p + "_or")
        return node("Add", [x, node("MatMul", [o, param(p + ".w_o", [D, D])], p + "_proj")], p + "_out")

    h = layer("x", "l1", True, None)
    h = layer(h, "l2", False, 0.25)
    weighted = node("Mul", [h, node("CastLike", ["keep", h], "keep_f")], "weighted")
    pooled = node("ReduceMean", [weighted, ints("pool_axes", [1])], "pooled", keepdims=0)  # opset 18: axes input
    node("MatMul", [pooled, param("head.w", [D, 5])], "y")
    inputs = [helper.make_tensor_value_info("x", f32, ["N", T, D]),
              helper.make_tensor_value_info("keep", TensorProto.BOOL, ["N", T, 1])] + params
    g = helper.make_graph(nodes, "sdpa_dynamo_forms", inputs, [helper.make_tensor_value_info("y", f32, ["N", 5])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def opset20_ops():
    """Ops whose opset 18-20 forms differ from opset 13's: Gelu (opset 20, exact), Split by num_outputs (18: 5
    channels as 2, 2, 1), Resize with axes (18: scales for H and W only), ReduceMean with axes as an input (18).
    Input x (N, 3, 6, 6): Conv 3x3 to 5 channels, Gelu, the split, the first part resized 2x (nearest), each part's
    spatial mean, concatenated (N, 5), a MatMul to (N, 3).
    """
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64

    def ints(name, values):
        return helper.make_node("Constant", [], [name], name=name, value_ints=values)

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Gelu", ["c"], ["g"], name="gelu"),
             helper.make_node("Split", ["g"], ["a", "b", "d"], name="split", axis=1, num_outputs=3),
             helper.make_node("Constant", [], ["scales"], name="scales",
                              value=helper.make_tensor("scales_t", f32, [2], [2.0, 2.0])),
             helper.make_node("Resize", ["a", "", "scales"], ["r"], name="resize", axes=[2, 3], mode="nearest"),
             ints("hw", [2, 3]),
             helper.make_node("ReduceMean", ["r", "hw"], ["ma"], name="mean_a", keepdims=0),
             helper.make_node("ReduceMean", ["b", "hw"], ["mb"], name="mean_b", keepdims=0),
             helper.make_node("ReduceMean", ["d", "hw"], ["md"], name="mean_d", keepdims=0),
             helper.make_node("Concat", ["ma", "mb", "md"], ["m"], name="concat", axis=1),
             helper.make_node("MatMul", ["m", "head"], ["y"], name="head_mm")]
    g = helper.make_graph(nodes, "opset20_ops", [helper.make_tensor_value_info("x", f32, ["N", 3, 6, 6]),
                                                 helper.make_tensor_value_info("w", f32, [5, 3, 3, 3]),
                                                 helper.make_tensor_value_info("head", f32, [5, 3])],
                          [helper.make_tensor_value_info("y", f32, ["N", 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


def activations_norms():
    """LeakyReLU, PReLU (per channel and one slope), ELU, SELU, Softplus, Mish (Softplus -> Tanh -> Mul before
    opset 18), Abs, GroupNorm (Reshape, InstanceNormalization with constant ones and zeros, Reshape, its own Mul
    and Add), InstanceNorm2d with and without affine, LogSoftmax over channels and over the last dim, ReduceSum, as
    torch exports them at opset 13. Input (N, 3, 6, 6), output (N, 4).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class ActivationsNorms(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.gn = nn.GroupNorm(4, 8)
            self.inorm = nn.InstanceNorm2d(8, affine=True)
            self.plain = nn.InstanceNorm2d(8)
            self.head = nn.Linear(8, 4)
            self.prelu = nn.PReLU(8, init=0.2)
            self.prelu1 = nn.PReLU(init=-0.1)

        def forward(self, x):  # (N, 3, 6, 6)
            h = self.prelu1(self.prelu(F.leaky_relu(self.gn(self.conv(x)), 0.1)))
            h = F.mish(self.inorm(h))
            h = self.plain(h)
            h = F.elu(h) + F.selu(h) + F.softplus(h) + h.abs() + F.leaky_relu(h, -0.2)
            h = F.log_softmax(h, dim=1)
            return F.log_softmax(self.head(h.mean((2, 3)) + 0.1 * h.sum((2, 3))), dim=-1)

    torch.manual_seed(0)
    return torch_export(ActivationsNorms().train(), torch.randn(2, 3, 6, 6), 13)


def softmax_opset11():
    """Softmax and LogSoftmax before opset 13, which flatten the input to 2-D at the axis: Softmax(axis = 1) of
    (N, 3, 4) normalises over 12 values, LogSoftmax (default axis 1) likewise, Softmax(axis = -1) over the last dim.
    Input (N, 3, 4), output (N, 3, 4)."""
    f32 = TensorProto.FLOAT
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Softmax", ["h"], ["s"], name="softmax_rows", axis=1),
             helper.make_node("Mul", ["s", "h"], ["t"], name="mul"),
             helper.make_node("LogSoftmax", ["t"], ["u"], name="log_softmax_rows"),
             helper.make_node("Softmax", ["u"], ["y"], name="softmax_last", axis=-1)]
    g = helper.make_graph(nodes, "softmax_opset11", [helper.make_tensor_value_info("x", f32, ["N", 3, 4]),
                                                    helper.make_tensor_value_info("w", f32, [4, 4])],
                          [helper.make_tensor_value_info("y", f32, ["N", 3, 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])


def upsample_old(op, opset):
    """Nearest upsampling before opset 11, as torch's F.interpolate(mode='nearest') exported then: Upsample at
    opset 7 (scales an attribute) and 9 (an input), Resize at opset 10 (inputs X, scales). A convolution, an
    upsampling by (2, 1.5), a convolution. Input (N, 3, 4, 4), output (N, 2, 8, 6)."""
    f32 = TensorProto.FLOAT
    up = (helper.make_node("Upsample", ["c"], ["u"], name="up", mode="nearest", scales=[1.0, 1.0, 2.0, 1.5])
          if opset < 9 else helper.make_node(op, ["c", "scales"], ["u"], name="up", mode="nearest"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]), up,
             helper.make_node("Conv", ["u", "w2"], ["y"], name="conv2")]
    inits = [] if opset < 9 else [helper.make_tensor("scales", f32, [4], [1.0, 1.0, 2.0, 1.5])]
    g = helper.make_graph(nodes, f"{op.lower()}_opset{opset}",
                          [helper.make_tensor_value_info("x", f32, ["N", 3, 4, 4]),
                           helper.make_tensor_value_info("w", f32, [4, 3, 3, 3]),
                           helper.make_tensor_value_info("w2", f32, [2, 4, 1, 1])],
                          [helper.make_tensor_value_info("y", f32, ["N", 2, 8, 6])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def mish_opset18():
    """Opset 18's Mish op after a convolution. Input (N, 3, 8, 8), output (N, 4, 8, 8)."""
    m = conv_relu(op="Mish")
    m.opset_import[0].version = 18
    return m


def group_norm_ops():
    """Opset 21's GroupNormalization (scale and B per channel) and opset 18's (per group), with learned scales and
    biases, after a convolution. Input (N, 3, 6, 6), output (N, 8, 6, 6). Saved at opset 21 with the checker off."""
    f32 = TensorProto.FLOAT
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("GroupNormalization", ["c", "s8", "b8"], ["g"], name="gn_channel", num_groups=2,
                              epsilon=1e-3),
             helper.make_node("GroupNormalization", ["g", "s4", "b4"], ["y"], name="gn_group", num_groups=4)]
    ins = [helper.make_tensor_value_info("x", f32, ["N", 3, 6, 6]),
           helper.make_tensor_value_info("w", f32, [8, 3, 3, 3])]
    ins += [helper.make_tensor_value_info(n, f32, [k]) for n, k in (("s8", 8), ("b8", 8), ("s4", 4), ("b4", 4))]
    g = helper.make_graph(nodes, "group_norm_ops", ins, [helper.make_tensor_value_info("y", f32, ["N", 8, 6, 6])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def reductions_torch():
    """What torch exports for torch.maximum and torch.minimum (broadcast), F.normalize (ReduceL2), a 1-norm
    (ReduceL1), torch.logsumexp, torch.amin (ReduceMin), F.celu and F.pixel_shuffle (DepthToSpace, CRD), at opset 13.
    Input (N, 8, 4, 4), output (N, 2, 8, 8).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Reductions(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(8, 8, 1)
            self.b = nn.Conv2d(8, 8, 1)
            self.floor = nn.Parameter(torch.linspace(-0.5, 0.5, 8).reshape(8, 1, 1))

        def forward(self, x):  # (N, 8, 4, 4)
            a, b = self.a(x), self.b(x)
            h = torch.maximum(a, b) + torch.minimum(a, self.floor)
            h = F.normalize(h, dim=1) + h.norm(p=1, dim=(2, 3), keepdim=True) / 16
            h = h + torch.logsumexp(h, dim=1, keepdim=True) - torch.amin(h, dim=(2, 3), keepdim=True)
            return F.pixel_shuffle(F.celu(h, alpha=0.5), 2)

    torch.manual_seed(0)
    return torch_export(Reductions().train(), torch.randn(2, 8, 4, 4), 13)


def rounding_ops():
    """torch.sign, floor, ceil and round on activations (no gradient through them), and F.lp_pool2d (its export
    multiplies by the sign), at opset 13. Input (N, 3, 8, 8), output (N, 4, 4, 4).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Rounding(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):  # (N, 3, 8, 8)
            h = self.conv(x)
            p = F.lp_pool2d(h, 2, 2)
            q = 4 * F.avg_pool2d(h, 2)
            return p * (1 + 0.1 * torch.sign(q)) + torch.floor(q) + torch.ceil(q) + torch.round(q) + q

    torch.manual_seed(0)
    return torch_export(Rounding().train(), torch.randn(2, 3, 8, 8), 13)


def logic_ops():
    """Bool masks combined at run time as torch exports `&`, `|`, `^` and `~` (And, Or, Xor, Not; broadcasting),
    selecting through torch.where, at opset 13. Input (N, 4, 6), output (N, 4, 6).
    """
    import torch
    from torch import nn

    class Logic(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(6, 6)

        def forward(self, x):  # (N, 4, 6)
            h = self.proj(x)
            pos, small = h > 0, h.abs() < 0.5
            row = x[:, :, :1] > 0  # (N, 4, 1): broadcast
            keep = (pos & small) | (~pos ^ row)
            return torch.where(keep, h, -0.5 * h)

    torch.manual_seed(0)
    return torch_export(Logic().train(), torch.randn(2, 4, 6), 13)


def rnn_torch():
    """Recurrent layers as torch exports them (opset 13): a two-layer bidirectional LSTM and a GRU, batch first,
    and a Linear head. Input (N, 5, 6), output (N, 5, 3).
    """
    import torch
    from torch import nn

    class Rnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True)
            self.gru = nn.GRU(10, 4, batch_first=True)
            self.head = nn.Linear(4, 3)

        def forward(self, x):  # (N, 5, 6)
            return self.head(self.gru(self.lstm(x)[0])[0])

    torch.manual_seed(0)
    return torch_export(Rnn().train(), torch.randn(2, 5, 6), 13)


def rnn_forms_opset14():
    """The LSTM and GRU forms torch does not write: batch first (layout 1), initial states given, an LSTM without
    B, a reversed GRU with linear_before_reset 0 (ONNX's default), and Y_h read. Input (N, 4, 3), output
    (N, 4, 2) and (N, 1, 2). Weights and states are graph inputs (parameters)."""
    f32 = TensorProto.FLOAT
    nodes = [helper.make_node("LSTM", ["x", "lw", "lr", "", "", "lh", "lc"], ["ly", "lyh"], name="lstm",
                              hidden_size=3, layout=1),
             helper.make_node("Squeeze", ["ly", "ax2"], ["lys"], name="squeeze"),
             helper.make_node("GRU", ["lys", "gw", "gr", "gb", "", "gh"], ["gy", "y_h"], name="gru", hidden_size=2,
                              layout=1, direction="reverse"),
             helper.make_node("Squeeze", ["gy", "ax2"], ["y"], name="squeeze_gru")]
    ins = [helper.make_tensor_value_info("x", f32, ["N", 4, 3])]
    for nm, shape in (("lw", [1, 12, 3]), ("lr", [1, 12, 3]), ("lh", [2, 1, 3]), ("lc", [2, 1, 3]),
                      ("gw", [1, 6, 3]), ("gr", [1, 6, 2]), ("gb", [1, 12]), ("gh", [2, 1, 2])):
        ins.append(helper.make_tensor_value_info(nm, f32, shape))
    inits = [helper.make_tensor("ax2", TensorProto.INT64, [1], [2])]
    outs = [helper.make_tensor_value_info("y", f32, ["N", 4, 2])]
    g = helper.make_graph(nodes, "rnn_forms_opset14", ins, outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


def decomposed_forms_opset18():
    """The forms torch does not export: variadic Max of three, Min of one, ReduceSumSquare, ReduceL2 with opset 18's
    axes input and keepdims 0, ReduceLogSumExp and ReduceMin over axes inputs, Celu (alpha 2), DepthToSpace (DCR) and
    SpaceToDepth. Input (N, 4, 4, 4), output (N, 4, 4, 4). Saved with the checker off (opset 18)."""
    f32 = TensorProto.FLOAT
    i64 = TensorProto.INT64
    inits = [helper.make_tensor("ax1", i64, [1], [1]), helper.make_tensor("ax23", i64, [2], [2, 3]),
             helper.make_tensor("shape", i64, [4], [0, 1, 4, 4])]
    nodes = [helper.make_node("Mul", ["x", "w"], ["h"], name="scale"),
             helper.make_node("Max", ["h", "x", "c"], ["m3"], name="max3"),
             helper.make_node("Min", ["m3"], ["m1"], name="min1"),
             helper.make_node("ReduceSumSquare", ["m1", "ax1"], ["ss"], name="sum_square", keepdims=1),
             helper.make_node("ReduceL2", ["m1", "ax1"], ["l2"], name="l2", keepdims=0),
             helper.make_node("Reshape", ["l2", "shape"], ["l2r"], name="l2_back"),
             helper.make_node("ReduceLogSumExp", ["m1", "ax23"], ["lse"], name="lse"),
             helper.make_node("ReduceMin", ["m1", "ax23"], ["mn"], name="rmin", keepdims=1),
             helper.make_node("Sum", ["m1", "ss", "l2r", "lse", "mn"], ["t"], name="total"),
             helper.make_node("Celu", ["t"], ["ce"], name="celu", alpha=2.0),
             helper.make_node("DepthToSpace", ["ce"], ["d2s"], name="d2s", blocksize=2, mode="DCR"),
             helper.make_node("SpaceToDepth", ["d2s"], ["y"], name="s2d", blocksize=2)]
    ins = [helper.make_tensor_value_info("x", f32, ["N", 4, 4, 4]), helper.make_tensor_value_info("w", f32, [4, 1, 1]),
           helper.make_tensor_value_info("c", f32, [4, 4])]
    out = helper.make_tensor_value_info("y", f32, ["N", 4, 4, 4])
    g = helper.make_graph(nodes, "decomposed_forms_opset18", ins, [out], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def rms_norm_opset23():
    """Opset 23's RMSNormalization over the last dim (epsilon 1e-6) and over the last two (axis 1, the default
    epsilon), each with a learned scale, after a MatMul. Input (N, 4, 8), output (N, 4, 8). Saved with the checker
    off."""
    f32 = TensorProto.FLOAT
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
             helper.make_node("RMSNormalization", ["h", "s8"], ["r"], name="rms_last", axis=-1, epsilon=1e-6),
             helper.make_node("RMSNormalization", ["r", "s48"], ["y"], name="rms_rows", axis=1)]
    ins = [helper.make_tensor_value_info("x", f32, ["N", 4, 8]), helper.make_tensor_value_info("w", f32, [8, 8]),
           helper.make_tensor_value_info("s8", f32, [8]), helper.make_tensor_value_info("s48", f32, [4, 8])]
    g = helper.make_graph(nodes, "rms_norm_opset23", ins, [helper.make_tensor_value_info("y", f32, ["N", 4, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def attention_opset23():
    """Opset 23's Attention three times: causal on rank-3 inputs (B, T, H d) with two heads; on rank-4 inputs
    (B, H, T, d) with an explicit scale and a constant boolean mask, Q, K and V one value; the same with the bool
    padding mask `pad` (N, 1, 1, 4), a data input. Input (N, 4, 8), output (N, 4, 8). Saved with the checker off."""
    f32 = TensorProto.FLOAT
    keep = helper.make_tensor("keep", TensorProto.BOOL, [4, 4], [1, 1, 0, 1] * 4)
    split = helper.make_tensor("split", TensorProto.INT64, [4], [0, 4, 2, 4])
    join = helper.make_tensor("join", TensorProto.INT64, [3], [0, 4, 8])
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj"),
             helper.make_node("MatMul", ["x", "wk"], ["k"], name="k_proj"),
             helper.make_node("MatMul", ["x", "wv"], ["v"], name="v_proj"),
             helper.make_node("Attention", ["q", "k", "v"], ["a"], name="causal", is_causal=1, q_num_heads=2,
                              kv_num_heads=2),
             helper.make_node("Reshape", ["a", "split"], ["a4"], name="split_heads"),
             helper.make_node("Transpose", ["a4"], ["h"], name="heads", perm=[0, 2, 1, 3]),
             helper.make_node("Attention", ["h", "h", "h", "keep"], ["o"], name="masked", scale=0.3),
             helper.make_node("Attention", ["o", "o", "o", "pad"], ["o2"], name="padded"),
             helper.make_node("Transpose", ["o2"], ["ot"], name="unheads", perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["ot", "join"], ["y"], name="join_heads")]
    ins = [helper.make_tensor_value_info("x", f32, ["N", 4, 8]),
           helper.make_tensor_value_info("pad", TensorProto.BOOL, ["N", 1, 1, 4])]
    ins += [helper.make_tensor_value_info(w, f32, [8, 8]) for w in ("wq", "wk", "wv")]
    g = helper.make_graph(nodes, "attention_opset23", ins, [helper.make_tensor_value_info("y", f32, ["N", 4, 8])],
                          initializer=[keep, split, join])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def legacy_cnn():
    """A CNN as the ONNX model zoo's older models (AlexNet, CaffeNet, GoogLeNet, ZFNet) are written: opset 10, IR
    version 4 with every initializer also listed as a graph input, LRN after convolutions (size 5, and an even size 4
    whose window is not centred), GlobalMaxPool, Mean of two branches, Softsign, ThresholdedRelu, a Reshape to
    (0, -1) and Softmax over axis 1 of the flattened input. Input (N, 3, 8, 8), output (N, 10)."""
    f32 = TensorProto.FLOAT
    rng = np.random.default_rng(3)

    def weight(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [weight("w1", (8, 3, 3, 3), 0.4), weight("b1", (8,), 0.1), weight("w2", (8, 8, 3, 3), 0.2),
             weight("b2", (8,), 0.1), weight("w3", (10, 8), 0.3), weight("b3", (10,), 0.1),
             numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("LRN", ["r1"], ["n1"], name="norm1", size=5, alpha=0.02, beta=0.75, bias=1.0),
             helper.make_node("MaxPool", ["n1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["c2"], ["n2"], name="norm2", size=4, alpha=0.05, beta=0.6, bias=2.0),
             helper.make_node("Softsign", ["n2"], ["s2"], name="softsign"),
             helper.make_node("ThresholdedRelu", ["c2"], ["t2"], name="thresholded", alpha=0.1),
             helper.make_node("Mean", ["s2", "t2", "p1"], ["m2"], name="mean"),
             helper.make_node("GlobalMaxPool", ["m2"], ["g"], name="global_max"),
             helper.make_node("Reshape", ["g", "flat"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], name="fc", transB=1),
             helper.make_node("Softmax", ["logits"], ["y"], name="prob", axis=1)]
    ins = [helper.make_tensor_value_info("x", f32, ["N", 3, 8, 8])]
    ins += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    g = helper.make_graph(nodes, "legacy_cnn", ins, [helper.make_tensor_value_info("y", f32, ["N", 10])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    m.ir_version = 4
    return m


def static_batch_reshape():
    """A model exported at a fixed batch of 1 whose Reshapes write that batch into their shapes: a convolution's
    map (1, 4, 4, 4) viewed as (1, 4, 16) tokens, a MatMul, then flattened by (1, -1) into a Gemm, as static
    exports and the model zoo's older CNNs write them. Input (1, 3, 4, 4), output (1, 5); run at another batch,
    each Reshape keeps the batch."""
    f32 = TensorProto.FLOAT
    rng = np.random.default_rng(5)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [weight("w1", (4, 3, 3, 3)), weight("b1", (4,)), weight("wt", (16, 8)), weight("w2", (5, 32)),
             weight("b2", (5,)), numpy_helper.from_array(np.array([1, 4, 16], dtype=np.int64), "tokens"),
             numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "flat")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "tokens"], ["t"], name="to_tokens"),
             helper.make_node("MatMul", ["t", "wt"], ["m"], name="proj"),
             helper.make_node("Reshape", ["m", "flat"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "static_batch_reshape", [helper.make_tensor_value_info("x", f32, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", f32, [1, 5])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def gather_torch():
    """torch.gather as torch exports it (GatherElements, opset 13): log-probabilities gathered at target ids, a
    second data input `target` (N, 3) of int64 (the values monet draws below the 5 classes), and a gather along the
    last axis of a (N, 4, 6) map with indices expanded from a constant row (repeated and negative-free, as torch
    requires). Inputs x (N, 6), target (N, 3); output (N, 7)."""
    import tempfile

    import torch
    from torch import nn

    class Gathers(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 5)
            self.map = nn.Linear(6, 24)

        def forward(self, x, target):
            picked = torch.log_softmax(self.fc(x), 1).gather(1, target)  # (N, 3)
            m = self.map(x).reshape(x.shape[0], 4, 6)
            idx = torch.tensor([[[5, 0, 0, 2]]]).expand(x.shape[0], 4, -1)
            return torch.cat([picked, m.gather(2, idx).sum(1)], 1)  # (N, 3 + 4)

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        torch.onnx.export(Gathers().train(), (torch.randn(2, 6), torch.tensor([[0, 4, 4], [1, 2, 3]])), path,
                          training=torch.onnx.TrainingMode.TRAINING, opset_version=13, do_constant_folding=False,
                          export_params=False, input_names=["x", "target"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "target": {0: "N"}, "y": {0: "N"}})
        return onnx.load(path)


def t5_relative_bias():
    """Self-attention with T5's relative-position bias as torch exports it (opset 13): the buckets are computed in
    the graph from the sequence length (Range, Sub, Greater, Abs, Less, Cast, Div, Log, Mul, Min, Where), which
    import folds to constants once shapes are fixed, then an embedding of one bias per bucket. Input (N, 6, 8),
    output (N, 6, 8)."""
    import math

    import torch
    from torch import nn

    class RelativeBias(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(8, 8)
            self.bias = nn.Embedding(16, 1)

        def forward(self, x):  # (N, T, 8)
            t = x.shape[1]
            rel = torch.arange(t)[None, :] - torch.arange(t)[:, None]
            buckets = (rel > 0).to(torch.long) * 8
            rel = torch.abs(rel)
            small = rel < 2
            large = 2 + (torch.log(rel.float() / 2) / math.log(32 / 2) * 6).to(torch.long)
            large = torch.min(large, torch.full_like(large, 7))
            buckets = buckets + torch.where(small, rel, large)
            q = self.q(x)
            scores = q @ q.transpose(1, 2) / math.sqrt(8) + self.bias(buckets).squeeze(-1)
            return torch.softmax(scores, -1) @ x

    torch.manual_seed(0)
    return torch_export(RelativeBias().train(), torch.randn(2, 6, 8), 13)


def conv3d_net():
    """A small video/volume network as torch exports it (opset 13): Conv3d with padding and a bias, BatchNorm3d,
    MaxPool3d over all three dims (ceil_mode), Conv3d strided in depth, dilated in depth and grouped, a (1, 3, 3)
    Conv3d without bias, AvgPool3d over all three dims (padded, count_include_pad=False), AdaptiveAvgPool3d(1) and a
    Linear head. Input (N, 3, 6, 8, 8), output (N, 5)."""
    import torch
    from torch import nn

    class Video(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv3d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm3d(4)
            self.pool = nn.MaxPool3d(2, ceil_mode=True)
            self.c2 = nn.Conv3d(4, 6, 3, stride=(2, 1, 1), padding=(3, 1, 1), dilation=(2, 1, 1), groups=2)
            self.c3 = nn.Conv3d(6, 6, (1, 3, 3), padding=(0, 1, 1), bias=False)
            self.avg = nn.AvgPool3d(3, stride=(1, 2, 2), padding=1, count_include_pad=False)
            self.head = nn.Linear(6, 5)

        def forward(self, x):  # (N, 3, 6, 8, 8)
            h = self.pool(torch.relu(self.bn(self.c1(x))))  # (N, 4, 3, 4, 4)
            h = self.avg(self.c3(torch.relu(self.c2(h))))
            return self.head(nn.functional.adaptive_avg_pool3d(h, 1).flatten(1))

    torch.manual_seed(0)
    return torch_export(Video().train(), torch.randn(2, 3, 6, 8, 8), 13)


def trig_ops():
    """Tan, Atan, Asin, Acos, Sinh, Cosh, Asinh, Acosh and Atanh after a Linear, each inside its domain (Asin, Acos
    and Atanh of 0.9 tanh(h), Acosh of h^2 + 1.5), summed. Input (N, 6), output (N, 6)."""
    f32 = TensorProto.FLOAT
    inits = [helper.make_tensor("c09", f32, [], [0.9]), helper.make_tensor("c15", f32, [], [1.5]),
             helper.make_tensor("c05", f32, [], [0.5])]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
             helper.make_node("Tanh", ["h"], ["th"], name="tanh"),
             helper.make_node("Mul", ["th", "c09"], ["u"], name="unit"),
             helper.make_node("Mul", ["h", "h"], ["hh"], name="square"),
             helper.make_node("Add", ["hh", "c15"], ["above1"], name="above1"),
             helper.make_node("Mul", ["h", "c05"], ["half"], name="half"),
             helper.make_node("Tan", ["half"], ["tan"], name="tan"),
             helper.make_node("Atan", ["h"], ["atan"], name="atan"),
             helper.make_node("Asin", ["u"], ["asin"], name="asin"),
             helper.make_node("Acos", ["u"], ["acos"], name="acos"),
             helper.make_node("Sinh", ["h"], ["sinh"], name="sinh"),
             helper.make_node("Cosh", ["h"], ["cosh"], name="cosh"),
             helper.make_node("Asinh", ["h"], ["asinh"], name="asinh"),
             helper.make_node("Acosh", ["above1"], ["acosh"], name="acosh"),
             helper.make_node("Atanh", ["u"], ["atanh"], name="atanh"),
             helper.make_node("Sum", ["tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh"], ["y"],
                              name="total")]
    ins = [helper.make_tensor_value_info("x", f32, ["N", 6]), helper.make_tensor_value_info("w", f32, [6, 6]),
           helper.make_tensor_value_info("b", f32, [6])]
    g = helper.make_graph(nodes, "trig_ops", ins, [helper.make_tensor_value_info("y", f32, ["N", 6])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def pool3d_torch():
    """Pools over 5-D tensors whose window spans two spatial dims or fewer, as torch exports them (opset 13): a
    MaxPool3d and an AvgPool3d of kernel (1, k, k) on a clip (N, 3, 4, 8, 8) (per-frame pooling in video models),
    then a Conv2d over the frames folded into channels with nn.LocalResponseNorm, whose export pools (N, 1, C, H, W)
    with a kernel (size, 1, 1), and a Linear head. Input (N, 3, 4, 8, 8), output (N, 5)."""
    import torch
    from torch import nn

    class Pool3d(nn.Module):
        def __init__(self):
            super().__init__()
            self.max = nn.MaxPool3d((1, 2, 2), stride=(1, 2, 2))
            self.avg = nn.AvgPool3d((1, 3, 3), stride=1, padding=(0, 1, 1), count_include_pad=False)
            self.conv = nn.Conv2d(12, 6, 3, padding=1)
            self.lrn = nn.LocalResponseNorm(3, alpha=0.05, beta=0.7, k=1.5)
            self.head = nn.Linear(6 * 4 * 4, 5)

        def forward(self, x):  # (N, 3, 4, 8, 8)
            h = self.avg(self.max(x))
            h = self.lrn(torch.relu(self.conv(h.flatten(1, 2))))
            return self.head(h.flatten(1))

    torch.manual_seed(0)
    return torch_export(Pool3d().train(), torch.randn(2, 3, 4, 8, 8), 13, fold=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    save(conv_relu(), "conv_relu.onnx")                 # dynamic batch: needs --batch
    save(conv_relu(op="Hardmax"), "unsupported_op.onnx")   # Hardmax is not a monet op
    save(conv_relu(op="Crop"), "experimental_op.onnx")  # ONNX's checker warns on std::cerr about Crop
    save(conv_relu(batch=2), "static_batch.onnx")       # batch fixed in the file
    save(conv_relu(hw=("H", "W")), "dynamic_hw.onnx")   # dynamic spatial dims: needs --input-shape
    save(conv_relu(out_channels=4 * 10**18), "huge_weight.onnx")  # a weight whose size overflows int64
    # Initializers with float_data (not raw_data) and a shape subgraph folded at import.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 4], [0.1 * i for i in range(12)])
    b = helper.make_tensor("b", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
             helper.make_node("Shape", ["h"], ["s"], name="shape"),
             helper.make_node("Constant", [], ["i"], name="idx", value=helper.make_tensor("i", TensorProto.INT64, [1], [0])),
             helper.make_node("Gather", ["s", "i"], ["n"], name="gather", axis=0),
             helper.make_node("Constant", [], ["m1"], name="m1", value=helper.make_tensor("m1", TensorProto.INT64, [1], [-1])),
             helper.make_node("Concat", ["n", "m1"], ["newshape"], name="cat", axis=0),
             helper.make_node("Reshape", ["h", "newshape"], ["y"], name="reshape")]
    g = helper.make_graph(nodes, "init", [x], [y], initializer=[w, b])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "float_data_init.onnx")
    save(tiny_transformer(), "tiny_transformer.onnx")
    save(layer_norm_forms(), "layer_norm_forms.onnx")
    save(layer_norm_stats(), "layer_norm_stats.onnx")
    save(seg_head(), "seg_head.onnx")
    save(seg_head(opset=17), "seg_head_opset17.onnx")
    save(reduce_scan_ops(), "reduce_scan_ops.onnx")
    save(fold_shapes(), "fold_shapes.onnx")
    save(masks_and_math(), "masks_and_math.onnx")
    # An integer buffer exported as a graph input (export_params=False): a relative-position index into a bias table.
    i64 = TensorProto.INT64
    g = helper.make_graph([helper.make_node("Gather", ["table", "rel_idx"], ["bias"], name="gather", axis=0),
                           helper.make_node("Add", ["x", "bias"], ["y"], name="add")],
                          "int_buffer_input", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 4]),
                                               helper.make_tensor_value_info("table", TensorProto.FLOAT, [7]),
                                               helper.make_tensor_value_info("rel_idx", i64, [4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 4])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "int_buffer_input.onnx")
    input_files()
    save(einsum_forms(), "einsum_forms.onnx")
    save(sdpa_forms(), "sdpa_forms.onnx")
    save(fold_trilu(), "fold_trilu.onnx")
    save(sdpa_dynamo_forms(), "sdpa_dynamo_forms.onnx", check=False)
    save(opset20_ops(), "opset20_ops.onnx", check=False)
    save(activations_norms(), "activations_norms.onnx")
    save(conv1d_net(), "conv1d_net.onnx")
    save(initializer_params(), "initializer_params.onnx")
    save(reductions_torch(), "reductions_torch.onnx")
    save(rounding_ops(), "rounding_ops.onnx")
    save(legacy_cnn(), "legacy_cnn.onnx")
    save(trig_ops(), "trig_ops.onnx")
    save(pool3d_torch(), "pool3d_torch.onnx")
    save(static_batch_reshape(), "static_batch_reshape.onnx")
    save(gather_torch(), "gather_torch.onnx")
    save(t5_relative_bias(), "t5_relative_bias.onnx")
    save(conv3d_net(), "conv3d_net.onnx")
    save(logic_ops(), "logic_ops.onnx")
    save(rnn_torch(), "rnn_torch.onnx")
    save(rnn_forms_opset14(), "rnn_forms_opset14.onnx")
    save(decomposed_forms_opset18(), "decomposed_forms_opset18.onnx", check=False)
    save(mish_opset18(), "mish_opset18.onnx", check=False)
    save(softmax_opset11(), "softmax_opset11.onnx")
    save(upsample_old("Upsample", 7), "upsample_opset7.onnx")
    save(upsample_old("Upsample", 9), "upsample_opset9.onnx")
    save(upsample_old("Resize", 10), "resize_opset10.onnx")
    save(group_norm_ops(), "group_norm_ops.onnx", check=False)
    save(rms_norm_opset23(), "rms_norm_opset23.onnx", check=False)
    save(attention_opset23(), "attention_opset23.onnx", check=False)
    # Refused: an opset beyond monet's (24) and opset 20's Gelu with its tanh approximation.
    m = conv_relu(batch=2)
    m.opset_import[0].version = 24
    save(m, "opset24.onnx", check=False)
    m = conv_relu(op="Gelu", batch=2)
    m.graph.node[1].attribute.append(helper.make_attribute("approximate", "tanh"))
    m.opset_import[0].version = 20
    save(m, "gelu_tanh.onnx", check=False)
    g = helper.make_graph([helper.make_node("Einsum", ["x", "w"], ["y"], name="ellipsis", equation="...ij,jk->...ik")],
                          "einsum_ellipsis", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4]),
                                              helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 5])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "einsum_ellipsis.onnx")
    # A LayerNormalization whose Scale does not have X's normalised shape ([3] for (N, 3, 4) over the last dim).
    f32 = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln", axis=-1)],
                          "bad_layer_norm", [helper.make_tensor_value_info("x", f32, ["N", 3, 4]),
                                             helper.make_tensor_value_info("g", f32, [3]),
                                             helper.make_tensor_value_info("b", f32, [4])],
                          [helper.make_tensor_value_info("y", f32, ["N", 3, 4])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "bad_layer_norm.onnx")


if __name__ == "__main__":
    main()
