#!/usr/bin/python3
"""Self-test of scripts/torch_reference.py: small ONNX graphs built with onnx.helper, each run through the script
and compared, loss and gradients, with the same computation written by hand in torch.

Usage: /usr/bin/python3 scripts/test_torch_reference.py     (exit 0 when every case passes)
The graphs pick the cases the exported models do not reach: asymmetric and auto pads, dilations, ceil-mode
pooling, the Resize modes, negative Slice steps, shape arithmetic.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "torch_reference.py")
INT64_MAX = np.iinfo(np.int64).max


# ---------------------------------------------------------------------------------------------------------------
# Building graphs

def const(name, values, dtype=np.int64):
    """A Constant node whose output is named name."""
    array = np.array(values, dtype=dtype)
    return helper.make_node("Constant", [], [name], name=f"const_{name}",
                            value=numpy_helper.from_array(array, name))


def make_model(nodes, inputs, output, output_shape, opset=13):
    """inputs: {name: shape}, all float."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in inputs.items()],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, output_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


# ---------------------------------------------------------------------------------------------------------------
# Case 1: Conv (asymmetric pads) + BatchNorm + Relu + MaxPool (ceil) + grouped dilated Conv (SAME_UPPER)
#         + GlobalAveragePool + Flatten + Dropout (mask) + Gemm, cross-entropy

def case_conv_net():
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[0, 1, 1, 2]),
        # Conv without bias: BatchNorm would cancel it (exact zero gradient).
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"],
                         ["bn", "bn_mean", "bn_var", "bn_saved_mean", "bn_saved_var"], name="bn", epsilon=1e-3,
                         momentum=0.9),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("Conv", ["p", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 2], dilations=[2, 1],
                         group=2, auto_pad="SAME_UPPER"),
        helper.make_node("GlobalAveragePool", ["c2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        const("ratio", 0.25, np.float32),
        const("training", True, np.bool_),
        helper.make_node("Dropout", ["flat", "ratio", "training"], ["drop", "drop_mask"], name="dropout"),
        helper.make_node("Gemm", ["drop", "wfc", "bfc"], ["out"], name="fc", transB=1),
    ]
    shapes = {"x": [2, 3, 9, 9], "w1": [4, 3, 3, 3], "g": [4], "beta": [4], "mean": [4], "var": [4],
              "w2": [4, 2, 3, 2], "b2": [4], "wfc": [5, 4], "bfc": [5]}
    mask = np.array([[1, 0, 1, 1], [1, 1, 0, 1]], dtype=np.uint8)

    def by_hand(t):
        # ONNX pads [H begin, W begin, H end, W end] = [0, 1, 1, 2]; F.pad lists W first.
        y = F.conv2d(F.pad(t["x"], (1, 2, 0, 1)), t["w1"], None, stride=2)
        y = F.batch_norm(y, t["mean"].detach().clone(), t["var"].detach().clone(), t["g"], t["beta"],
                         training=True, momentum=0.1, eps=1e-3)
        y = F.max_pool2d(F.relu(y), 3, 2, 1, ceil_mode=True)
        # SAME_UPPER, effective kernel 5 x 2 at stride 1: H 2 pixels each side, W the odd pixel at the end.
        y = F.conv2d(F.pad(y, (0, 1, 2, 2)), t["w2"], t["b2"], dilation=(2, 1), groups=2)
        y = y.mean(dim=(2, 3))
        y = y * torch.from_numpy(mask).to(y.dtype) / (1 - float(np.float32(0.25)))
        return F.linear(y, t["wfc"], t["bfc"])

    labels = np.array([3, 1], dtype=np.int64)
    return make_model(nodes, shapes, "out", [2, 5]), shapes, by_hand, {"dropout": mask}, labels


# ---------------------------------------------------------------------------------------------------------------
# Case 2: Resize in four modes + Concat + Conv + HardSwish/HardSigmoid + Clip (Cast bounds)
#         + AveragePool (excluding pads, symmetric and asymmetric) + ConvTranspose, sum loss

def case_resize_net():
    f32 = np.float32
    nodes = [
        const("scales2", [1, 1, 2, 2], f32),
        const("sizes", [1, 2, 6, 8]),
        helper.make_node("Resize", ["x", "", "scales2"], ["up_nearest"], name="up_nearest", mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["up_corners"], name="up_corners", mode="linear",
                         coordinate_transformation_mode="align_corners"),
        helper.make_node("Resize", ["x", "", "scales2"], ["up_linear"], name="up_linear", mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["up_exact"], name="up_exact", mode="nearest",
                         coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil"),
        helper.make_node("Concat", ["up_nearest", "up_corners", "up_linear", "up_exact"], ["cat"], name="cat",
                         axis=1),
        # Halving with half_pixel puts every source coordinate on a tie (2i + 0.5): the rounding mode decides.
        const("half_sizes", [1, 8, 3, 4]),
        helper.make_node("Resize", ["cat", "", "", "half_sizes"], ["down_ceil"], name="down_ceil", mode="nearest",
                         coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil"),
        helper.make_node("Resize", ["cat", "", "", "half_sizes"], ["down_floor"], name="down_floor",
                         mode="nearest", coordinate_transformation_mode="half_pixel"),
        helper.make_node("Add", ["down_ceil", "down_floor"], ["down"], name="add_down"),
        helper.make_node("Resize", ["down", "", "scales2"], ["down_up"], name="down_up", mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Add", ["cat", "down_up"], ["mixed"], name="add_mixed"),
        helper.make_node("Conv", ["mixed", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node("HardSwish", ["c"], ["hs"], name="hswish"),
        helper.make_node("HardSigmoid", ["c"], ["hsig"], name="hsigmoid", alpha=0.3, beta=0.4),
        helper.make_node("Mul", ["hs", "hsig"], ["m"], name="mul"),
        const("lo", -0.1, np.float64),
        const("hi", 0.8, np.float64),
        helper.make_node("Cast", ["lo"], ["lo32"], name="cast_lo", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["hi"], ["hi32"], name="cast_hi", to=TensorProto.FLOAT),
        helper.make_node("Clip", ["m", "lo32", "hi32"], ["clip"], name="clip"),
        helper.make_node("AveragePool", ["clip"], ["avg_sym"], name="avg_sym", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["clip"], ["avg_asym"], name="avg_asym", kernel_shape=[2, 3],
                         strides=[2, 2], pads=[0, 1, 1, 0], count_include_pad=0),
        helper.make_node("Add", ["avg_sym", "avg_asym"], ["avg"], name="add"),
        helper.make_node("ConvTranspose", ["avg", "wt", "bt"], ["ct"], name="convt", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 1]),
        helper.make_node("Sigmoid", ["ct"], ["out"], name="sigmoid"),
    ]
    shapes = {"x": [1, 2, 3, 4], "w": [3, 8, 1, 1], "wt": [3, 2, 3, 3], "bt": [2]}

    def avg_pool_real_pixels(x, kernel, stride, begin, end):
        """Average of the real (unpadded) pixels in each window, by loops: independent of any torch pooling."""
        h, w = x.shape[2:]
        out_h = (h + begin[0] + end[0] - kernel[0]) // stride[0] + 1
        out_w = (w + begin[1] + end[1] - kernel[1]) // stride[1] + 1
        rows = []
        for i in range(out_h):
            cols = []
            for j in range(out_w):
                top, left = i * stride[0] - begin[0], j * stride[1] - begin[1]
                window = x[:, :, max(top, 0):min(top + kernel[0], h), max(left, 0):min(left + kernel[1], w)]
                cols.append(window.mean(dim=(2, 3)))
            rows.append(torch.stack(cols, dim=-1))
        return torch.stack(rows, dim=-2)

    def by_hand(t):
        x = t["x"]
        y = torch.cat([F.interpolate(x, scale_factor=2, mode="nearest"),
                       F.interpolate(x, size=(6, 8), mode="bilinear", align_corners=True),
                       F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
                       F.interpolate(x, size=(6, 8), mode="nearest-exact")], dim=1)
        down = y[:, :, 1::2, 1::2] + y[:, :, ::2, ::2]  # round_prefer_ceil, round_prefer_floor
        y = y + F.interpolate(down, scale_factor=2, mode="nearest")
        y = F.conv2d(y, t["w"])
        alpha, beta = float(np.float32(0.3)), float(np.float32(0.4))  # ONNX float attributes are float32
        y = F.hardswish(y) * torch.clamp(alpha * y + beta, 0, 1)
        y = torch.clamp(y, -0.1, 0.8)
        y = (F.avg_pool2d(y, 3, 2, 1, count_include_pad=False)
             + avg_pool_real_pixels(y, (2, 3), (2, 2), (0, 1), (1, 0)))
        # pads [H begin 1, W begin 0, H end 1, W end 1]: torch pads symmetrically, so crop W by hand.
        y = F.conv_transpose2d(y, t["wt"], t["bt"], stride=2, padding=(1, 0), output_padding=1)
        return torch.sigmoid(y[:, :, :, :-1])

    # HardSwish came in opset 14.
    return make_model(nodes, shapes, "out", [1, 2, 6, 9], opset=14), shapes, by_hand, {}, None


# ---------------------------------------------------------------------------------------------------------------
# Case 3: Slice (negative step) + Pad (constant, reflect) + Transpose + shape arithmetic (Shape, Gather,
#         Unsqueeze, Concat, ConstantOfShape, Cast) + Reshape + MatMul + Split + Sub/Div + ReduceMean + Softmax,
#         cross-entropy over spatial positions

def case_shape_net():
    nodes = [
        const("starts", [0, 4]), const("ends", [INT64_MAX, -INT64_MAX]), const("axes", [1, 3]),
        const("steps", [1, -2]),
        helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"], name="slice"),  # (2,3,4,3)
        const("pads", [0, 0, 1, 0, 0, 0, 0, 2]), const("pad_value", 0.5, np.float32),
        helper.make_node("Pad", ["s", "pads", "pad_value"], ["p"], name="pad"),  # (2,3,5,5)
        const("pads_reflect", [0, 0, 1, 1, 0, 0, 1, 1]),
        helper.make_node("Pad", ["p", "pads_reflect"], ["pr"], name="pad_reflect", mode="reflect"),  # (2,3,7,7)
        helper.make_node("Transpose", ["pr"], ["t"], name="transpose", perm=[0, 2, 3, 1]),  # (2,7,7,3)
        helper.make_node("Shape", ["t"], ["shape"], name="shape"),
        const("zero", [0]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="gather", axis=0),
        const("rest", [-1, 3]),
        helper.make_node("Concat", ["batch", "rest"], ["new_shape"], name="shape_cat", axis=0),
        helper.make_node("Reshape", ["t", "new_shape"], ["r"], name="reshape"),  # (2,49,3)
        helper.make_node("MatMul", ["r", "wm"], ["mm"], name="matmul"),  # (2,49,4)
        helper.make_node("Add", ["mm", "bm"], ["mmb"], name="bias"),
        helper.make_node("Tanh", ["mmb"], ["th"], name="tanh"),
        const("split", [1, 3]),
        helper.make_node("Split", ["th", "split"], ["first", "others"], name="split", axis=2),
        helper.make_node("Concat", ["others", "first"], ["rot"], name="rotate", axis=2),
        helper.make_node("ReduceMean", ["rot"], ["avg"], name="reduce_mean", axes=[1], keepdims=1),
        helper.make_node("Sub", ["rot", "avg"], ["centred"], name="sub"),
        helper.make_node("Shape", ["centred"], ["centred_shape"], name="shape2"),
        helper.make_node("ConstantOfShape", ["centred_shape"], ["twos"], name="twos",
                         value=numpy_helper.from_array(np.array([2.0], dtype=np.float32))),
        helper.make_node("Div", ["centred", "twos"], ["halved"], name="div"),
        helper.make_node("Transpose", ["halved"], ["ht"], name="transpose2", perm=[0, 2, 1]),  # (2,4,49)
        const("grid", [0, 0, 7, 7]),
        helper.make_node("Reshape", ["ht", "grid"], ["g"], name="reshape2"),  # (2,4,7,7)
        helper.make_node("Softmax", ["g"], ["out"], name="softmax", axis=1),
    ]
    shapes = {"x": [2, 3, 4, 5], "wm": [3, 4], "bm": [4]}

    def by_hand(t):
        y = t["x"][:, :, :, [4, 2, 0]]
        y = F.pad(y, (0, 2, 1, 0), value=0.5)
        y = F.pad(y, (1, 1, 1, 1), mode="reflect")
        y = y.permute(0, 2, 3, 1).reshape(2, 49, 3)
        y = torch.tanh(y @ t["wm"] + t["bm"])
        y = torch.cat([y[:, :, 1:], y[:, :, :1]], dim=2)
        y = (y - y.mean(dim=1, keepdim=True)) / 2
        return F.softmax(y.permute(0, 2, 1).reshape(2, 4, 7, 7), dim=1)

    labels = np.random.default_rng(3).integers(0, 4, size=(2, 7, 7))
    return make_model(nodes, shapes, "out", [2, 4, 7, 7]), shapes, by_hand, {}, labels


# ---------------------------------------------------------------------------------------------------------------
# Case 4: transformer pieces: class token through torch's expand(n, -1, -1) lowering (Reshape, ConstantOfShape,
#         Equal, Where, Expand), a token permutation from Range + Mod (Gather), a mask from Not + Where, LayerNorm
#         decomposed (Pow, Sqrt), softmax attention, exact GELU (Erf), x[:, 0] (Gather, scalar index), cross-entropy

def case_transformer_net():
    f32 = np.float32
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        const("zero", 0),
        helper.make_node("Gather", ["shape", "zero"], ["n"], name="batch", axis=0),
        const("axis0", [0]),
        helper.make_node("Unsqueeze", ["n", "axis0"], ["n_1d"], name="n_1d"),
        const("minus_ones", [-1, -1]),
        helper.make_node("Concat", ["n_1d", "minus_ones"], ["spec"], name="spec", axis=0),
        const("flat", [-1]),
        helper.make_node("Reshape", ["spec", "flat"], ["spec_flat"], name="spec_flat"),
        helper.make_node("Shape", ["spec_flat"], ["spec_shape"], name="spec_shape"),
        helper.make_node("ConstantOfShape", ["spec_shape"], ["ones"], name="ones",
                         value=numpy_helper.from_array(np.array([1], dtype=np.int64))),
        const("minus_one", -1),
        helper.make_node("Mul", ["ones", "minus_one"], ["minus"], name="minus"),
        helper.make_node("Equal", ["spec_flat", "minus"], ["is_minus"], name="is_minus"),
        helper.make_node("Where", ["is_minus", "ones", "spec_flat"], ["target"], name="target"),
        helper.make_node("Expand", ["cls", "target"], ["cls_n"], name="expand"),  # (2,1,4)
        helper.make_node("Concat", ["cls_n", "x"], ["tokens"], name="with_cls", axis=1),  # (2,4,4)
        # Tokens permuted by Range(0, 4, 1) mod 3 = [0, 1, 2, 0]; tokens where the index is odd scaled by 2.
        const("start", 0), const("limit", 4), const("delta", 1), const("three", 3), const("two", 2),
        helper.make_node("Range", ["start", "limit", "delta"], ["range"], name="range"),
        helper.make_node("Mod", ["range", "three"], ["perm"], name="mod"),
        helper.make_node("Gather", ["tokens", "perm"], ["permuted"], name="permute", axis=1),
        helper.make_node("Mod", ["range", "two"], ["parity"], name="parity"),
        helper.make_node("Equal", ["parity", "zero"], ["even"], name="even"),
        helper.make_node("Not", ["even"], ["odd"], name="odd"),
        const("two_f", [2.0] * 4, f32), const("one_f", [1.0] * 4, f32),
        helper.make_node("Where", ["odd", "two_f", "one_f"], ["scale_1d"], name="scale"),
        const("axes_01", [0, 2]),
        helper.make_node("Unsqueeze", ["scale_1d", "axes_01"], ["scale"], name="scale_3d"),  # (1,4,1)
        helper.make_node("Mul", ["permuted", "scale"], ["h0"], name="scaled"),
        # LayerNorm over the last axis.
        helper.make_node("ReduceMean", ["h0"], ["mu"], name="mu", axes=[-1]),
        helper.make_node("Sub", ["h0", "mu"], ["d"], name="d"),
        const("p2", 2.0, f32),
        helper.make_node("Pow", ["d", "p2"], ["d2"], name="pow"),
        helper.make_node("ReduceMean", ["d2"], ["var"], name="var", axes=[-1]),
        const("eps", 1e-5, f32),
        helper.make_node("Add", ["var", "eps"], ["var_eps"], name="var_eps"),
        helper.make_node("Sqrt", ["var_eps"], ["sd"], name="sqrt"),
        helper.make_node("Div", ["d", "sd"], ["normed"], name="normed"),
        helper.make_node("Mul", ["normed", "g"], ["scaled_ln"], name="gamma"),
        helper.make_node("Add", ["scaled_ln", "b"], ["h1"], name="beta"),
        # Attention with q = k = v = h1, then exact GELU.
        helper.make_node("Transpose", ["h1"], ["h1_t"], name="keys", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["h1", "h1_t"], ["scores"], name="scores"),
        helper.make_node("Softmax", ["scores"], ["attn"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["attn", "h1"], ["mixed"], name="mix"),
        const("sqrt2", 1.4142135381698608, f32),
        helper.make_node("Div", ["mixed", "sqrt2"], ["u"], name="gelu_div"),
        helper.make_node("Erf", ["u"], ["erf"], name="erf"),
        const("one", 1.0, f32), const("half", 0.5, f32),
        helper.make_node("Add", ["erf", "one"], ["erf1"], name="gelu_add"),
        helper.make_node("Mul", ["mixed", "erf1"], ["gm"], name="gelu_mul"),
        helper.make_node("Mul", ["gm", "half"], ["gelu"], name="gelu"),
        helper.make_node("Gather", ["gelu", "zero"], ["first"], name="first", axis=1),  # (2,4)
        helper.make_node("Gemm", ["first", "w", "bias"], ["out"], name="head", transB=1),
    ]
    shapes = {"x": [2, 3, 4], "cls": [1, 1, 4], "g": [4], "b": [4], "w": [3, 4], "bias": [3]}

    def by_hand(t):
        y = torch.cat([t["cls"].expand(2, -1, -1), t["x"]], dim=1)
        y = y[:, [0, 1, 2, 0]] * torch.tensor([1.0, 2.0, 1.0, 2.0], dtype=y.dtype).reshape(1, 4, 1)
        y = F.layer_norm(y, (4,), t["g"], t["b"], eps=float(np.float32(1e-5)))
        y = torch.softmax(y @ y.transpose(1, 2), dim=-1) @ y
        y = 0.5 * y * (1 + torch.erf(y / float(np.float32(2 ** 0.5))))  # F.gelu, with the exported float32 sqrt(2)
        return F.linear(y[:, 0], t["w"], t["bias"])

    labels = np.array([2, 0], dtype=np.int64)
    return make_model(nodes, shapes, "out", [2, 3]), shapes, by_hand, {}, labels


# ---------------------------------------------------------------------------------------------------------------
# Harness

def write_case(dir_path, model, shapes, masks, labels, dtype):
    rng = np.random.default_rng(7)
    arrays = {n: rng.standard_normal(shape).astype(dtype) for n, shape in shapes.items()}
    if "var" in arrays:
        arrays["var"] = np.abs(arrays["var"]) + 0.5
    onnx.save(model, os.path.join(dir_path, "model.onnx"))
    manifest = {"model": "model.onnx", "dtype": dtype, "loss": "cross_entropy" if labels is not None else "sum",
                "output": "out", "tensors": {}, "grads": [n for n in shapes if n not in ("mean", "var")],
                "dropout_masks": {}}
    for name, array in arrays.items():
        np.save(os.path.join(dir_path, f"{name}.npy"), array)
        manifest["tensors"][name] = f"{name}.npy"
    for node, mask in masks.items():
        np.save(os.path.join(dir_path, f"mask_{node}.npy"), mask)
        manifest["dropout_masks"][node] = f"mask_{node}.npy"
    if labels is not None:
        np.save(os.path.join(dir_path, "labels.npy"), labels)
        manifest["labels"] = "labels.npy"
    with open(os.path.join(dir_path, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return arrays, manifest


def run_reference(dir_path):
    return subprocess.run([sys.executable, REFERENCE, dir_path], capture_output=True, text=True)


def check_case(name, build, dtype):
    """Returns a list of failure messages (empty when the case passes)."""
    model, shapes, by_hand, masks, labels = build()
    tolerance = {"float64": 1e-10, "float32": 1e-5}[dtype]
    with tempfile.TemporaryDirectory(prefix=f"test_torch_ref_{name}_") as dir_path:
        arrays, manifest = write_case(dir_path, model, shapes, masks, labels, dtype)
        run = run_reference(dir_path)
        if run.returncode != 0:
            return [f"torch_reference exit {run.returncode}: {run.stderr.strip()}"]
        with open(os.path.join(dir_path, "result.json")) as f:
            result = json.load(f)
        got = {n: np.load(os.path.join(dir_path, file)) for n, file in result["grads"].items()}

    t = {n: torch.from_numpy(a.copy()).requires_grad_(n in manifest["grads"]) for n, a in arrays.items()}
    out = by_hand(t)
    loss = F.cross_entropy(out, torch.from_numpy(labels)) if labels is not None else out.sum()
    loss.backward()
    failures = []
    if result["output_shape"] != list(out.shape):
        failures.append(f"output shape {result['output_shape']}, by hand {list(out.shape)}")
    if abs(result["loss"] - loss.item()) > tolerance * max(1.0, abs(loss.item())):
        failures.append(f"loss {result['loss']!r}, by hand {loss.item()!r}")
    for n in manifest["grads"]:
        want = t[n].grad.numpy()
        if got[n].dtype != np.dtype(dtype) or got[n].shape != want.shape:
            failures.append(f"grad {n}: {got[n].dtype}{list(got[n].shape)}, want {dtype}{list(want.shape)}")
            continue
        err = np.linalg.norm(got[n] - want) / max(np.linalg.norm(want), 1e-30)
        if err > tolerance:
            failures.append(f"grad {n}: relative error {err:.2e}")
    return failures


def check_errors():
    """An unsupported op gives exit 1 and one stderr line naming op and node; a missing mask gives exit 2."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="test_torch_ref_errors_") as dir_path:
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                 helper.make_node("Hardmax", ["r"], ["out"], name="my_hardmax")]
        shapes = {"x": [1, 2, 3, 3]}
        write_case(dir_path, make_model(nodes, shapes, "out", [1, 2, 3, 3]), shapes, {}, None, "float32")
        run = run_reference(dir_path)
        lines = run.stderr.strip().splitlines()
        if run.returncode != 1 or len(lines) != 1 or "Hardmax" not in lines[0] or "my_hardmax" not in lines[0]:
            failures.append(f"unsupported op: exit {run.returncode}, stderr {run.stderr.strip()!r}")
    with tempfile.TemporaryDirectory(prefix="test_torch_ref_errors_") as dir_path:
        model, shapes, _, _, labels = case_conv_net()
        write_case(dir_path, model, shapes, {}, labels, "float32")
        run = run_reference(dir_path)
        if run.returncode != 2 or "dropout" not in run.stderr:
            failures.append(f"missing dropout mask: exit {run.returncode}, stderr {run.stderr.strip()!r}")
    return failures


CASES = {"conv_net": case_conv_net, "resize_net": case_resize_net, "shape_net": case_shape_net,
         "transformer": case_transformer_net}


def main():
    failed = False
    for name, build in CASES.items():
        for dtype in ("float64", "float32"):
            failures = check_case(name, build, dtype)
            failed |= bool(failures)
            print(f"{name:<12} {dtype}: " + ("ok" if not failures else "FAILED\n  " + "\n  ".join(failures)))
    failures = check_errors()
    failed |= bool(failures)
    print("errors       : " + ("ok" if not failures else "FAILED\n  " + "\n  ".join(failures)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
