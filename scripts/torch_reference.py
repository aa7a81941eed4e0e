#!/usr/bin/python3
"""PyTorch reference for one training step of an ONNX graph, for monet-check.

Usage: /usr/bin/python3 scripts/torch_reference.py DIR
Runs the graph node by node with torch / torch.nn.functional and lets autograd take the gradients, so no part of
the reference shares code with monet's engine.

DIR/manifest.json (written by monet):
  {"model": "/abs/model.onnx", "dtype": "float32" | "float64", "loss": "cross_entropy" | "sum",
   "output": "<graph output the loss is taken on>",
   "tensors": {"<graph input>": "<file.npy>", ...},        data input and every parameter / running statistic
   "labels": "labels.npy",                                   int64, output shape without the class axis
   "class_axis": 1 | -1,                                     where the classes are (cross_entropy; default 1)
   "dropout_masks": {"<Dropout node name>": "<file.npy>"},  uint8, shape of the Dropout input, 1 = kept
   "grads": ["<graph input>", ...]}                          inputs whose gradients are wanted
File names are relative to DIR. DIR/result.json (written last, atomically, like every file here):
  {"loss": <float>, "grads": {"<graph input>": "<file.npy>"}, "output_shape": [...]}
Exit status: 0 done; 1 an op (or an op's mode) this script does not implement, named on one stderr line;
2 a manifest or graph it cannot use.
"""
import json
import math
import os
import re
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class Unsupported(Exception):
    """An op or an op's mode with no implementation here; exit status 1."""


class BadInput(Exception):
    """A manifest or graph that cannot be run as given; exit status 2."""


class Ctx:
    """What an op needs beyond its inputs and attributes."""

    def __init__(self, node, opset, dtype, masks, rebatch=None):
        self.node = node
        self.opset = opset
        self.dtype = dtype  # every floating tensor is computed in this dtype
        self.masks = masks  # Dropout node name -> uint8 tensor
        self.rebatch = rebatch  # (the file's fixed batch, the batch fed) where they differ

    def unsupported(self, why):
        return Unsupported(f"{self.node.op_type} ({why})")


# ---------------------------------------------------------------------------------------------------------------
# Small helpers

def ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def floats(t):
    return [float(v) for v in t.reshape(-1).tolist()]


def given(ins, i):
    """Input i if the node has it and it is not an empty optional input."""
    return ins[i] if len(ins) > i and ins[i] is not None else None


def to_torch(array, dtype):
    """numpy -> torch; floating arrays take the compute dtype so that float64 runs have no float32 islands."""
    t = torch.from_numpy(np.array(array, copy=True))
    return t.to(dtype) if t.is_floating_point() else t


def torch_type(onnx_type, compute):
    T = onnx.TensorProto
    if onnx_type in (T.FLOAT, T.DOUBLE, T.FLOAT16, T.BFLOAT16):
        return compute
    table = {T.INT64: torch.int64, T.INT32: torch.int32, T.INT16: torch.int16, T.INT8: torch.int8,
             T.UINT8: torch.uint8, T.BOOL: torch.bool}
    if onnx_type not in table:
        raise Unsupported(f"Cast (to={onnx.TensorProto.DataType.Name(onnx_type)})")
    return table[onnx_type]


def attrs_of(node):
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode() for s in v]
        out[a.name] = v
    return out


def torch_pads(begin, end):
    """Per-dim (begin, end) lists, first spatial dim first -> F.pad's order, last dim first."""
    out = []
    for b, e in zip(reversed(begin), reversed(end)):
        out += [b, e]
    return out


def window_pads(at, in_sizes, kernel, strides, dilations):
    """(begin, end) pads per spatial dim for Conv and the pools, auto_pad resolved."""
    n = len(kernel)
    auto = at.get("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = list(at.get("pads", [0] * 2 * n))
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise BadInput(f"auto_pad={auto}")
    begin, end = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        # SAME_UPPER puts the odd extra pixel at the end.
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin, end


def fits_torch_padding(begin, end, kernel, dilations):
    """torch's pools take only symmetric pads of at most half the effective kernel."""
    return begin == end and all(p <= ((k - 1) * d + 1) // 2 for p, k, d in zip(begin, kernel, dilations))


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def by_rank(table, n, ctx):
    if n not in table:
        raise ctx.unsupported(f"{n} spatial dims")
    return table[n]


# ---------------------------------------------------------------------------------------------------------------
# Ops: fn(ctx, ins, at) -> tensor or list of tensors (one per node output; extra outputs may be left off)

def op_conv(ctx, ins, at):
    x, w, b = ins[0], ins[1], given(ins, 2)
    kernel = list(w.shape[2:])
    n = len(kernel)
    strides, dilations = at.get("strides", [1] * n), at.get("dilations", [1] * n)
    begin, end = window_pads(at, x.shape[2:], kernel, strides, dilations)
    if begin != end:
        x = F.pad(x, torch_pads(begin, end))
        begin = [0] * n
    return by_rank(CONV, n, ctx)(x, w, b, strides, begin, dilations, at.get("group", 1))


def op_conv_transpose(ctx, ins, at):
    x, w, b = ins[0], ins[1], given(ins, 2)
    kernel = list(w.shape[2:])
    n = len(kernel)
    strides, dilations = at.get("strides", [1] * n), at.get("dilations", [1] * n)
    out_pad = at.get("output_padding", [0] * n)
    auto = at.get("auto_pad", "NOTSET")
    full = [s * (i - 1) + op + (k - 1) * d + 1
            for i, s, op, k, d in zip(x.shape[2:], strides, out_pad, kernel, dilations)]
    if "output_shape" in at or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = at.get("output_shape", [i * s for i, s in zip(x.shape[2:], strides)])[-n:]
        totals = [f - t for f, t in zip(full, target)]
        if auto == "SAME_LOWER":
            begin, end = [t - t // 2 for t in totals], [t // 2 for t in totals]
        else:
            begin, end = [t // 2 for t in totals], [t - t // 2 for t in totals]
    elif auto == "VALID":
        begin, end = [0] * n, [0] * n
    else:
        pads = list(at.get("pads", [0] * 2 * n))
        begin, end = pads[:n], pads[n:]
    # Transposed conv without padding, then output_padding as zeros at the end and ONNX pads as crops; the bias
    # goes on last so that the output_padding rows hold it too, as in ONNX and torch.
    y = by_rank(CONV_T, n, ctx)(x, w, None, strides, 0, 0, at.get("group", 1), dilations)
    y = F.pad(y, torch_pads([-p for p in begin], [op - p for op, p in zip(out_pad, end)]))
    if b is not None:
        y = y + b.reshape([1, -1] + [1] * n)
    return y


def op_batch_norm(ctx, ins, at):
    x, scale, bias, mean, var = ins[:5]
    # monet trains the graph, so batch statistics unless the node explicitly asks for inference (opset 14+).
    training = bool(at.get("training_mode", 1))
    momentum = at.get("momentum", 0.9)
    running_mean, running_var = mean.detach().clone(), var.detach().clone()
    # ONNX: running = running * m + batch * (1 - m); torch weighs the batch by its momentum, hence 1 - m.
    y = F.batch_norm(x, running_mean, running_var, scale, bias, training=training, momentum=1.0 - momentum,
                     eps=at.get("epsilon", 1e-5))
    return [y, running_mean, running_var]


def op_max_pool(ctx, ins, at):
    x = ins[0]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.unsupported("Indices output")
    kernel = list(at["kernel_shape"])
    n = len(kernel)
    strides, dilations = at.get("strides", [1] * n), at.get("dilations", [1] * n)
    begin, end = window_pads(at, x.shape[2:], kernel, strides, dilations)
    ceil = bool(at.get("ceil_mode", 0))
    if not fits_torch_padding(begin, end, kernel, dilations):
        x = F.pad(x, torch_pads(begin, end), value=-math.inf)
        begin = [0] * n
    return by_rank(MAX_POOL, n, ctx)(x, kernel, strides, begin, dilations, ceil_mode=ceil)


def op_average_pool(ctx, ins, at):
    x = ins[0]
    kernel = list(at["kernel_shape"])
    n = len(kernel)
    strides = at.get("strides", [1] * n)
    if any(d != 1 for d in at.get("dilations", [1] * n)):
        raise ctx.unsupported("dilations")
    begin, end = window_pads(at, x.shape[2:], kernel, strides, [1] * n)
    ceil, include_pad = bool(at.get("ceil_mode", 0)), bool(at.get("count_include_pad", 0))
    pool = by_rank(AVG_POOL, n, ctx)
    if fits_torch_padding(begin, end, kernel, [1] * n):
        return pool(x, kernel, strides, begin, ceil, include_pad)
    # Pads torch cannot take: average over the zero-padded map; without count_include_pad, divide by the share of
    # real pixels in each window.
    pads = torch_pads(begin, end)
    padded_mean = pool(F.pad(x, pads), kernel, strides, 0, ceil, True)
    if include_pad:
        return padded_mean
    ones = torch.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype)
    return padded_mean / pool(F.pad(ones, pads), kernel, strides, 0, ceil, True)


def op_global_average_pool(ctx, ins, at):
    x = ins[0]
    return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)


def op_global_max_pool(ctx, ins, at):
    x = ins[0]
    return x.flatten(2).max(dim=2).values.reshape(x.shape[:2] + (1,) * (x.dim() - 2))


def op_clip(ctx, ins, at):
    if ctx.opset < 11:
        lo, hi = at.get("min"), at.get("max")
    else:
        lo, hi = given(ins, 1), given(ins, 2)
        lo, hi = (None if lo is None else lo.item()), (None if hi is None else hi.item())
    return ins[0] if lo is None and hi is None else torch.clamp(ins[0], min=lo, max=hi)


def op_hard_sigmoid(ctx, ins, at):
    return torch.clamp(at.get("alpha", 0.2) * ins[0] + at.get("beta", 0.5), 0.0, 1.0)


def op_leaky_relu(ctx, ins, at):
    return F.leaky_relu(ins[0], at.get("alpha", 0.01))


def op_instance_norm(ctx, ins, at):
    x, scale, bias = ins
    return F.instance_norm(x, weight=scale, bias=bias, eps=at.get("epsilon", 1e-5))


def op_group_norm(ctx, ins, at):
    """Scale and B per channel (opset 21) or per group (opset 18; the shapes tell them apart)."""
    x, scale, bias = ins
    groups, channels = at["num_groups"], ins[0].shape[1]
    if scale.shape[0] != channels:
        scale, bias = (t.repeat_interleave(channels // groups) for t in (scale, bias))
    return F.group_norm(x, groups, weight=scale, bias=bias, eps=at.get("epsilon", 1e-5))


def op_attention(ctx, ins, at):
    """Opset 23's Attention without a KV cache, grouped heads or softcap: Q, K, V of rank 4 (B, H, T, d), or of rank 3
    (B, T, H d) with q_num_heads = kv_num_heads; an optional boolean (True takes part) or additive mask; is_causal
    masks key j > query i; scale defaults to 1 / sqrt(d)."""
    q, k, v = ins[:3]
    mask = ins[3] if len(ins) > 3 else None
    if any(t is not None for t in ins[4:]) or at.get("softcap", 0.0) != 0.0 or at.get("qk_matmul_output_mode", 0):
        raise ctx.unsupported("Attention with a KV cache, softcap or qk_matmul_output_mode")
    rank3 = q.dim() == 3
    if rank3:
        heads = at["q_num_heads"]
        q, k, v = (t.reshape(t.shape[0], t.shape[1], heads, -1).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) * at.get("scale", 1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores + (torch.zeros_like(mask, dtype=scores.dtype).masked_fill(~mask, -math.inf)
                           if mask.dtype == torch.bool else mask)
    if at.get("is_causal", 0):
        t_q, t_k = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(t_q, t_k, dtype=torch.bool).triu(1), -math.inf)
    y = torch.softmax(scores, dim=-1) @ v
    return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1) if rank3 else y


def op_rms_norm(ctx, ins, at):
    """Opset 23's RMSNormalization: X / sqrt(mean of X^2 over the dims from axis on + epsilon) * scale."""
    x, scale = ins
    dims = tuple(range(at.get("axis", -1) % x.dim(), x.dim()))
    return x / torch.sqrt(x.pow(2).mean(dim=dims, keepdim=True) + at.get("epsilon", 1e-5)) * scale


def op_prelu(ctx, ins, at):
    x, slope = ins
    return torch.where(x > 0, x, slope * x)


def op_elu(ctx, ins, at):
    return F.elu(ins[0], at.get("alpha", 1.0))


def op_selu(ctx, ins, at):
    """ONNX's Selu with its float defaults (torch's F.selu has the double constants)."""
    alpha, gamma = at.get("alpha", 1.67326319217681884765625), at.get("gamma", 1.05070102214813232421875)
    return gamma * F.elu(ins[0], alpha)


def op_softplus(ctx, ins, at):
    """ONNX's Softplus, log(1 + exp(x)), without torch's threshold."""
    x = ins[0]
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))


def op_mish(ctx, ins, at):
    return ins[0] * torch.tanh(op_softplus(ctx, ins, at))


def op_div(ctx, ins, at):
    a, b = ins
    if a.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode="trunc")  # ONNX integer division truncates


def op_concat(ctx, ins, at):
    return torch.cat([t for t in ins if t is not None], dim=at["axis"])


def op_split(ctx, ins, at):
    x, axis = ins[0], at.get("axis", 0)
    parts = len(ctx.node.output)
    if given(ins, 1) is not None:
        sizes = ints(ins[1])
    elif "split" in at:
        sizes = list(at["split"])
    else:
        # Equal parts, the last one smaller if the dim does not divide (opset 18's num_outputs rule).
        dim = x.shape[axis]
        chunk = math.ceil(dim / parts)
        sizes = [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]
    return list(torch.split(x, sizes, dim=axis))


def slice_range(start, end, step, dim):
    """ONNX Slice's clamping (it differs from Python's for negative steps)."""
    if step == 0:
        raise BadInput("Slice step 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


def op_slice(ctx, ins, at):
    x = ins[0]
    if ctx.opset < 10:
        starts, ends = list(at["starts"]), list(at["ends"])
        axes, steps = at.get("axes"), None
    else:
        starts, ends = ints(ins[1]), ints(ins[2])
        axes = ints(ins[3]) if given(ins, 3) is not None else None
        steps = ints(ins[4]) if given(ins, 4) is not None else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= x.dim()
        start, end = slice_range(start, end, step, x.shape[axis])
        if step > 0:
            x = x[(slice(None),) * axis + (slice(start, end, step),)]
        else:  # torch views take no negative steps
            x = x.index_select(axis, torch.arange(start, end, step, dtype=torch.int64))
    return x


def op_flatten(ctx, ins, at):
    x, axis = ins[0], at.get("axis", 1)
    axis = axis + x.dim() if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def op_reshape(ctx, ins, at):
    x, shape = ins[0], ints(ins[1])
    if not at.get("allowzero", 0):
        shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]  # 0 copies the input dim
        # A file of a fixed batch run at another: a shape that keeps each example whole, written with the file's
        # batch, keeps the batch fed (monet's import reads it so: docs/models.md, "A batch other than the file's").
        if ctx.rebatch and shape and x.dim() and (shape[0], x.shape[0]) == ctx.rebatch:
            per_example, rest = x[0].numel(), shape[1:]
            known = math.prod(v for v in rest if v != -1)
            wild = rest.count(-1)
            if (wild == 0 and known == per_example) or (wild == 1 and known > 0 and per_example % known == 0):
                shape = [x.shape[0]] + rest
    return x.reshape(shape)


def op_transpose(ctx, ins, at):
    x = ins[0]
    return x.permute(at.get("perm", list(reversed(range(x.dim())))))


PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def op_pad(ctx, ins, at):
    x, rank = ins[0], ins[0].dim()
    mode = at.get("mode", "constant")
    if mode not in PAD_MODES:
        raise ctx.unsupported(f"mode={mode}")
    if ctx.opset < 11:
        pads, value, axes = list(at["pads"]), at.get("value", 0.0), list(range(rank))
    else:
        pads = ints(ins[1])
        value = ins[2].item() if given(ins, 2) is not None and ins[2].numel() else 0.0
        axes = [a % rank for a in ints(ins[3])] if given(ins, 3) is not None else list(range(rank))
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[i + len(axes)]
    if mode == "constant":
        return F.pad(x, torch_pads(begin, end), value=value)
    # torch pads only the spatial dims of an (N, C, ...) tensor in the other modes.
    if any(begin[:2]) or any(end[:2]) or not 3 <= rank <= 5:
        raise ctx.unsupported(f"mode={mode} on a non-spatial dim or rank {rank}")
    return F.pad(x, torch_pads(begin[2:], end[2:]), mode=PAD_MODES[mode])


def source_coords(ctm, out_index, scale, size_in, size_out):
    """ONNX Resize's coordinate_transformation_mode: output pixel -> input coordinate."""
    if ctm == "half_pixel":
        return (out_index + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (out_index + 0.5) / scale - 0.5 if size_out > 1 else np.zeros_like(out_index)
    if ctm == "align_corners":
        return out_index * ((size_in - 1) / (size_out - 1)) if size_out > 1 else np.zeros_like(out_index)
    if ctm == "asymmetric":
        return out_index / scale
    if ctm == "tf_half_pixel_for_nn":
        return (out_index + 0.5) / scale
    return None


NEAREST = {"round_prefer_floor": lambda v: np.ceil(v - 0.5), "round_prefer_ceil": lambda v: np.floor(v + 0.5),
           "floor": np.floor, "ceil": np.ceil}
LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


def op_resize(ctx, ins, at):
    x = ins[0]
    n = x.dim() - 2
    if ctx.opset < 11:  # Resize-10 and Upsample: scales alone, torch's nearest (asymmetric, floor)
        if at.get("mode", "nearest") != "nearest":
            raise ctx.unsupported("linear before opset 11")
        scales = floats(ins[1]) if len(ins) > 1 and ins[1] is not None else list(at["scales"])
        if scales[:2] != [1.0, 1.0]:
            raise ctx.unsupported("resizing batch or channel dims")
        return F.interpolate(x, mode="nearest", scale_factor=scales[2:])
    scales, sizes = given(ins, 2), given(ins, 3)
    scales = floats(scales) if scales is not None and scales.numel() else None
    sizes = ints(sizes) if sizes is not None and sizes.numel() else None
    if at.get("antialias", 0) and at.get("mode", "nearest") != "nearest":
        raise ctx.unsupported("antialias")
    if "axes" in at:  # opset 18: scales or sizes of these axes only, the others kept
        full_scales, full_sizes = [1.0] * x.dim(), list(x.shape)
        for k, axis in enumerate(at["axes"]):
            if scales is not None:
                full_scales[axis % x.dim()] = scales[k]
            else:
                full_sizes[axis % x.dim()] = sizes[k]
        scales, sizes = (full_scales, None) if scales is not None else (None, full_sizes)
    if (scales is not None and scales[:2] != [1.0, 1.0]) or (sizes is not None and sizes[:2] != list(x.shape[:2])):
        raise ctx.unsupported("resizing batch or channel dims")
    size_in = list(x.shape[2:])
    size_out = sizes[2:] if sizes is not None else [math.floor(i * s) for i, s in zip(size_in, scales[2:])]
    scale = scales[2:] if scales is not None else [o / i for o, i in zip(size_out, size_in)]
    mode, ctm = at.get("mode", "nearest"), at.get("coordinate_transformation_mode", "half_pixel")
    # Given scales are passed on as scale_factor: torch then maps pixels with 1/scale, as ONNX does.
    resize = dict(size=None, scale_factor=scale) if sizes is None else dict(size=size_out)
    if mode == "nearest":
        nearest_mode = at.get("nearest_mode", "round_prefer_floor")
        if ctm == "asymmetric" and nearest_mode == "floor":  # what torch's 'nearest' exports to
            return F.interpolate(x, mode="nearest", **resize)
        if nearest_mode not in NEAREST:
            raise ctx.unsupported(f"nearest_mode={nearest_mode}")
        for axis in range(n):
            coords = source_coords(ctm, np.arange(size_out[axis], dtype=np.float64), scale[axis], size_in[axis],
                                   size_out[axis])
            if coords is None:
                raise ctx.unsupported(f"coordinate_transformation_mode={ctm}")
            index = np.clip(NEAREST[nearest_mode](coords), 0, size_in[axis] - 1).astype(np.int64)
            x = x.index_select(2 + axis, torch.from_numpy(index))
        return x
    if mode == "linear":
        if ctm not in ("half_pixel", "pytorch_half_pixel", "align_corners"):
            raise ctx.unsupported(f"linear with coordinate_transformation_mode={ctm}")
        return F.interpolate(x, mode=by_rank(LINEAR, n, ctx), align_corners=(ctm == "align_corners"), **resize)
    raise ctx.unsupported(f"mode={mode}")


def op_gemm(ctx, ins, at):
    a, b, c = ins[0], ins[1], given(ins, 2)
    a = a.t() if at.get("transA", 0) else a
    b = b.t() if at.get("transB", 0) else b
    alpha, beta = at.get("alpha", 1.0), at.get("beta", 1.0)
    if c is None:
        return alpha * (a @ b) if alpha != 1.0 else a @ b
    return torch.addmm(c, a, b, beta=beta, alpha=alpha)  # what nn.Linear runs


def op_dropout(ctx, ins, at):
    x, name = ins[0], ctx.node.name
    ratio = ins[1].item() if given(ins, 1) is not None else at.get("ratio", 0.5)
    # Before opset 12 there is no training_mode input; a mask in the manifest then says it is training.
    training = bool(ins[2].item()) if given(ins, 2) is not None else name in ctx.masks
    if not training or ratio == 0:  # the identity (monet imports it as no node)
        return [x, torch.ones_like(x, dtype=torch.bool)]
    if name not in ctx.masks:
        raise BadInput(f"Dropout node '{name}' trains but the manifest has no mask for it")
    mask = ctx.masks[name]
    if tuple(mask.shape) != tuple(x.shape):
        raise BadInput(f"dropout mask for '{name}' has shape {list(mask.shape)}, input is {list(x.shape)}")
    keep = mask.to(x.dtype)
    y = x * keep / (1.0 - ratio) if ratio < 1.0 else x * 0.0
    return [y, mask.bool()]


def op_layer_norm(ctx, ins, at):
    """LayerNormalization (opset 17): normalised over the dims from axis on; the optional Mean and InvStdDev (X's
    shape with the normalised dims 1, the biased variance) when the node names them."""
    x, scale = ins[0], ins[1]
    bias = given(ins, 2)
    axis = at.get("axis", -1) % x.dim()
    eps = at.get("epsilon", 1e-5)
    y = F.layer_norm(x, x.shape[axis:], scale, bias, eps)
    if len(ctx.node.output) == 1:
        return y
    dims = list(range(axis, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    invstd = torch.rsqrt(x.var(dim=dims, unbiased=False, keepdim=True) + eps)
    return [y, mean, invstd][:len(ctx.node.output)]


def op_softmax(ctx, ins, at, fn=F.softmax):
    x = ins[0]
    if ctx.opset >= 13:
        return fn(x, dim=at.get("axis", -1))
    # Before opset 13 the op works on the input flattened to 2-D at axis.
    axis = at.get("axis", 1) % x.dim()
    return fn(x.reshape(math.prod(x.shape[:axis]), -1), dim=1).reshape(x.shape)


def op_log_softmax(ctx, ins, at):
    return op_softmax(ctx, ins, at, fn=F.log_softmax)


def reduce_axes(ctx, ins, at, axes_input_since):
    """Axes of a Reduce* op (attribute, or input from the opset given); None means leave the input as is."""
    if ctx.opset >= axes_input_since:
        axes = ints(ins[1]) if given(ins, 1) is not None else []
    else:
        axes = list(at.get("axes", []))
    if not axes:
        return None if at.get("noop_with_empty_axes", 0) else list(range(ins[0].dim()))
    return axes


def op_reduce_mean(ctx, ins, at):
    axes = reduce_axes(ctx, ins, at, 18)
    return ins[0] if axes is None else ins[0].mean(dim=axes, keepdim=bool(at.get("keepdims", 1)))


def op_reduce_sum(ctx, ins, at):
    axes = reduce_axes(ctx, ins, at, 13)
    return ins[0] if axes is None else ins[0].sum(dim=axes, keepdim=bool(at.get("keepdims", 1)))


def op_reduce_max(ctx, ins, at):
    axes = reduce_axes(ctx, ins, at, 18)
    return ins[0] if axes is None else torch.amax(ins[0], dim=axes, keepdim=bool(at.get("keepdims", 1)))


# Shape-computing ops: evaluated eagerly like the rest, on int64 tensors.

def op_constant(ctx, ins, at):
    if "value" in at:
        return to_torch(at["value"], ctx.dtype)
    for key, make in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                      ("value_ints", np.int64)):
        if key in at:
            return to_torch(np.array(at[key], dtype=make), ctx.dtype)
    raise ctx.unsupported(f"attribute {', '.join(at) or 'none'}")


def op_shape(ctx, ins, at):
    dims = list(ins[0].shape)
    start, end = at.get("start", 0), at.get("end", len(dims))
    return torch.tensor(dims[start:end], dtype=torch.int64)


def op_gather(ctx, ins, at):
    x, index = ins
    axis = at.get("axis", 0) % x.dim()
    index = torch.where(index < 0, index + x.shape[axis], index).to(torch.int64)
    picked = x.index_select(axis, index.reshape(-1))
    return picked.reshape(x.shape[:axis] + index.shape + x.shape[axis + 1:])


def op_unsqueeze(ctx, ins, at):
    x = ins[0]
    axes = ints(ins[1]) if ctx.opset >= 13 else list(at["axes"])
    rank = x.dim() + len(axes)
    for axis in sorted(a % rank for a in axes):
        x = x.unsqueeze(axis)
    return x


def op_squeeze(ctx, ins, at):
    x = ins[0]
    axes = (ints(ins[1]) if given(ins, 1) is not None else None) if ctx.opset >= 13 else at.get("axes")
    if axes is None:
        return x.squeeze()
    for axis in sorted((a % x.dim() for a in axes), reverse=True):
        x = x.squeeze(axis)
    return x


def op_cast(ctx, ins, at):
    return ins[0].to(torch_type(at["to"], ctx.dtype))


def op_cast_like(ctx, ins, at):
    """CastLike (opset 15): to the second input's type."""
    return ins[0].to(ins[1].dtype)


def op_gelu(ctx, ins, at):
    """Gelu (opset 20): exact, or its tanh approximation."""
    approximate = at.get("approximate", "none")
    return F.gelu(ins[0], approximate=approximate.decode() if isinstance(approximate, bytes) else approximate)


def op_constant_of_shape(ctx, ins, at):
    value = to_torch(at.get("value", np.zeros(1, dtype=np.float32)), ctx.dtype).reshape(-1)
    return torch.full(ints(ins[0]), value[0].item(), dtype=value.dtype)


def op_expand(ctx, ins, at):
    x = ins[0]
    return x.expand(torch.broadcast_shapes(x.shape, tuple(ints(ins[1]))))


def op_scatter_nd(ctx, ins, at):
    """ScatterND without reduction: a copy of data with the slices indices (..., k) address replaced by updates."""
    if at.get("reduction", b"none") not in (b"none", "none"):
        raise ctx.unsupported(f"reduction {at['reduction']}")
    data, indices, updates = ins
    k = indices.shape[-1]
    out = data.clone()
    index = indices.reshape(-1, k).to(torch.int64)
    out[tuple(index.t())] = updates.reshape((index.shape[0],) + tuple(data.shape[k:])).to(out.dtype)
    return out


def op_mod(ctx, ins, at):
    a, b = ins
    # fmod=1: the dividend's sign (C fmod); fmod=0 (integers only): the divisor's sign, as Python's %.
    return torch.fmod(a, b) if at.get("fmod", 0) else torch.remainder(a, b)


def op_range(ctx, ins, at):
    start, limit, delta = (t.item() for t in ins)
    return torch.arange(start, limit, delta, dtype=ins[0].dtype)


def unary(fn):
    return lambda ctx, ins, at: fn(ins[0])


def binary(fn):
    return lambda ctx, ins, at: fn(ins[0], ins[1])


OPS = {
    "Conv": op_conv,
    "ConvTranspose": op_conv_transpose,
    "BatchNormalization": op_batch_norm,
    "MaxPool": op_max_pool,
    "AveragePool": op_average_pool,
    "GlobalAveragePool": op_global_average_pool,
    "GlobalMaxPool": op_global_max_pool,
    "Relu": unary(F.relu),
    "Sigmoid": unary(torch.sigmoid),
    "Tanh": unary(torch.tanh),
    "HardSigmoid": op_hard_sigmoid,
    "HardSwish": unary(F.hardswish),
    "LeakyRelu": op_leaky_relu,
    "PRelu": op_prelu,
    "Elu": op_elu,
    "Selu": op_selu,
    "Softplus": op_softplus,
    "Mish": op_mish,
    "Clip": op_clip,
    "Exp": unary(torch.exp),
    "Log": unary(torch.log),
    "Sqrt": unary(torch.sqrt),
    "Erf": unary(torch.erf),
    "Neg": unary(torch.neg),
    "Abs": unary(torch.abs),
    "Reciprocal": unary(torch.reciprocal),
    "Identity": unary(lambda x: x),
    "Add": binary(torch.add),
    "Sub": binary(torch.sub),
    "Mul": binary(torch.mul),
    "Div": op_div,
    "Pow": binary(torch.pow),
    "Gemm": op_gemm,
    "MatMul": binary(torch.matmul),
    "Concat": op_concat,
    "Split": op_split,
    "Slice": op_slice,
    "Flatten": op_flatten,
    "Reshape": op_reshape,
    "Transpose": op_transpose,
    "Pad": op_pad,
    "Resize": op_resize,
    "Upsample": op_resize,
    "Dropout": op_dropout,
    "Softmax": op_softmax,
    "LayerNormalization": op_layer_norm,
    "InstanceNormalization": op_instance_norm,
    "GroupNormalization": op_group_norm,
    "RMSNormalization": op_rms_norm,
    "Attention": op_attention,
    "LogSoftmax": op_log_softmax,
    "ReduceMean": op_reduce_mean,
    "ReduceSum": op_reduce_sum,
    "ReduceMax": op_reduce_max,
    "Constant": op_constant,
    "Shape": op_shape,
    "Gather": op_gather,
    "Unsqueeze": op_unsqueeze,
    "Squeeze": op_squeeze,
    "Cast": op_cast,
    "CastLike": op_cast_like,
    "Gelu": op_gelu,
    "ConstantOfShape": op_constant_of_shape,
    "Expand": op_expand,
    "Equal": binary(torch.eq),
    "Less": binary(torch.lt),
    "Greater": binary(torch.gt),
    "LessOrEqual": binary(torch.le),
    "GreaterOrEqual": binary(torch.ge),
    "Sin": unary(torch.sin),
    "Cos": unary(torch.cos),
    "Not": unary(torch.logical_not),
    "And": binary(torch.logical_and),
    "Or": binary(torch.logical_or),
    "Xor": binary(torch.logical_xor),
    "Where": lambda ctx, ins, at: torch.where(ins[0].bool(), ins[1], ins[2]),
    "Mod": op_mod,
    "Range": op_range,
}


# Issue 38: ReduceMax (above), CumSum, Trilu, Tile, and the shape arithmetic lib/ir/onnx_fold.cpp folds.

def op_cum_sum(ctx, ins, at):
    x, dim = ins[0], ints(ins[1])[0] % ins[0].dim()
    if at.get("reverse", 0):
        x = x.flip(dim)
    y = torch.cumsum(x, dim)
    if at.get("exclusive", 0):  # shifted by one, a zero first: no subtraction, so no rounding of its own
        y = torch.cat([torch.zeros_like(y.narrow(dim, 0, 1)), y.narrow(dim, 0, y.shape[dim] - 1)], dim)
    return y.flip(dim) if at.get("reverse", 0) else y


def op_trilu(ctx, ins, at):
    k = ints(ins[1])[0] if given(ins, 1) is not None else 0
    return torch.triu(ins[0], k) if at.get("upper", 1) else torch.tril(ins[0], k)


def op_reduce_prod(ctx, ins, at):
    axes = reduce_axes(ctx, ins, at, 18)
    if axes is None:
        return ins[0]
    y, keep = ins[0], bool(at.get("keepdims", 1))
    for axis in sorted((a % y.dim() for a in axes), reverse=True):
        y = y.prod(dim=axis, keepdim=keep)
    return y


def reduction(fn):
    """A Reduce* op of opset 18's form (axes an input; an attribute before) as fn(x, dims, keepdim)."""
    def run(ctx, ins, at):
        axes = reduce_axes(ctx, ins, at, 18)
        return ins[0] if axes is None else fn(ins[0], axes, bool(at.get("keepdims", 1)))
    return run


def op_depth_to_space(ctx, ins, at):
    x, b = ins[0], at["blocksize"]
    n, c, h, w = x.shape
    mode = at.get("mode", b"DCR")
    if (mode.decode() if isinstance(mode, bytes) else mode) == "CRD":
        return F.pixel_shuffle(x, b)
    return x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, c // (b * b), h * b, w * b)


def op_space_to_depth(ctx, ins, at):
    x, b = ins[0], at["blocksize"]
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w // b)


def op_rnn(ctx, ins, at):
    """LSTM and GRU on torch's own kernels (torch.lstm, torch.gru): ONNX's gate order (LSTM i, o, f, c; GRU z, r,
    h) reordered to torch's (i, f, g, o; r, z, n). GRU with linear_before_reset = 0, which torch has no kernel for,
    runs as a loop over the steps."""
    lstm = ctx.node.op_type == "LSTM"
    x, w, r, b = ins[0], ins[1], ins[2], given(ins, 3)
    if given(ins, 4) is not None or (lstm and given(ins, 7) is not None):
        raise ctx.unsupported("sequence_lens or peepholes")
    hidden, layout = at["hidden_size"], at.get("layout", 0)
    direction = at.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if layout:
        x = x.transpose(0, 1)
    steps, batch, dirs = x.shape[0], x.shape[1], w.shape[0]
    def state(i):
        s = given(ins, i)
        if s is None:
            return x.new_zeros(dirs, batch, hidden)
        return s.transpose(0, 1) if layout else s
    order = [0, 2, 3, 1] if lstm else [1, 0, 2]
    def reorder(m):
        return torch.cat([m[k * hidden:(k + 1) * hidden] for k in order])
    gates = 4 if lstm else 3
    reverse = direction == "reverse"
    xs = x.flip(0) if reverse else x
    if lstm or at.get("linear_before_reset", 0):
        params = []
        for d in range(dirs):
            params += [reorder(w[d]), reorder(r[d])]
            if b is not None:
                params += [reorder(b[d][:gates * hidden]), reorder(b[d][gates * hidden:])]
        hx = (state(5), state(6)) if lstm else state(5)
        args = (params, b is not None, 1, 0.0, True, dirs == 2, False)
        y, *last = torch.lstm(xs, hx, *args) if lstm else torch.gru(xs, hx, *args)
        y = y.reshape(steps, batch, dirs, hidden).transpose(1, 2)
    else:
        h = state(5)
        ys, last_h = [], []
        for d in range(dirs):
            hd, out = h[d], [None] * steps
            wb = b[d][:3 * hidden] if b is not None else 0
            rb = b[d][3 * hidden:] if b is not None else x.new_zeros(3 * hidden)
            for k in range(steps):
                t = steps - 1 - k if (reverse or d == 1) else k
                xw = x[t] @ w[d].T + wb
                z = torch.sigmoid(xw[:, :hidden] + hd @ r[d][:hidden].T + rb[:hidden])
                rr = torch.sigmoid(xw[:, hidden:2 * hidden] + hd @ r[d][hidden:2 * hidden].T + rb[hidden:2 * hidden])
                hh = torch.tanh(xw[:, 2 * hidden:] + (rr * hd) @ r[d][2 * hidden:].T + rb[2 * hidden:])
                hd = (1 - z) * hh + z * hd
                out[t] = hd
            ys.append(torch.stack(out))
            last_h.append(hd)
        y, last = torch.stack(ys, 1), [torch.stack(last_h)]
        reverse = False  # the loop ran each direction in its own order
    if reverse:
        y = y.flip(0)
    outs = [y] + list(last)
    if layout:
        outs = [outs[0].permute(2, 0, 1, 3)] + [o.transpose(0, 1) for o in outs[1:]]
    return outs


def variadic(fn):
    def run(ctx, ins, at):
        y = ins[0]
        for x in ins[1:]:
            y = fn(y, x)
        return y
    return run


OPS.update({
    "ScatterND": op_scatter_nd,
    "Einsum": lambda ctx, ins, at: torch.einsum(at["equation"].decode() if isinstance(at["equation"], bytes)
                                                else at["equation"], *ins),
    "CumSum": op_cum_sum,
    "Trilu": op_trilu,
    "Tile": lambda ctx, ins, at: ins[0].repeat(*ints(ins[1])),
    "ReduceProd": op_reduce_prod,
    "Sum": variadic(torch.add),
    "LSTM": op_rnn,
    "GRU": op_rnn,
    "Max": variadic(torch.maximum),
    "Min": variadic(torch.minimum),
    "ReduceMin": reduction(lambda x, d, k: torch.amin(x, dim=d, keepdim=k)),
    "ReduceL1": reduction(lambda x, d, k: torch.linalg.vector_norm(x, 1, dim=d, keepdim=k)),
    "ReduceL2": reduction(lambda x, d, k: torch.linalg.vector_norm(x, 2, dim=d, keepdim=k)),
    "ReduceSumSquare": reduction(lambda x, d, k: (x * x).sum(dim=d, keepdim=k)),
    "ReduceLogSumExp": reduction(lambda x, d, k: torch.logsumexp(x, dim=d, keepdim=k)),
    "Celu": lambda ctx, ins, at: F.celu(ins[0], at.get("alpha", 1.0)),
    "DepthToSpace": op_depth_to_space,
    "SpaceToDepth": op_space_to_depth,
    "Sign": unary(torch.sign),
    "Round": unary(torch.round),
    "Floor": unary(torch.floor),
    "Ceil": unary(torch.ceil),
})


# Legacy CNN ops (the ONNX model zoo's AlexNet, CaffeNet, GoogLeNet, ZFNet), Mean, Softsign, ThresholdedRelu, and
# the trigonometric functions: ONNX's definitions written directly in torch.

def op_lrn(ctx, ins, at):
    """ONNX LRN: x / (bias + alpha / size * sum of x^2 over channels [c - floor((size-1)/2), c + ceil((size-1)/2)])
    ^ beta. Written out (not F.local_response_norm, which centres an even window the other way)."""
    x, size = ins[0], int(at["size"])
    alpha, beta, bias = at.get("alpha", 1e-4), at.get("beta", 0.75), at.get("bias", 1.0)
    sq = F.pad((x * x).unsqueeze(1).flatten(3), (0, 0, (size - 1) // 2, size // 2))  # (N, 1, C + size - 1, D)
    channels = x.shape[1]
    window = sum(sq[:, 0, i:i + channels] for i in range(size))  # (N, C, D)
    return x / (bias + alpha / size * window.reshape(x.shape)) ** beta


OPS.update({
    "LRN": op_lrn,
    "GatherElements": lambda ctx, ins, at: torch.gather(
        ins[0], at.get("axis", 0), torch.where(ins[1] < 0, ins[1] + ins[0].shape[at.get("axis", 0)], ins[1]).long()),
    "Mean": lambda ctx, ins, at: variadic(torch.add)(ctx, ins, at) / len(ins),
    "Softsign": unary(F.softsign),
    "ThresholdedRelu": lambda ctx, ins, at: torch.where(ins[0] > at.get("alpha", 1.0), ins[0],
                                                        torch.zeros_like(ins[0])),
    "Tan": unary(torch.tan),
    "Atan": unary(torch.atan),
    "Asin": unary(torch.asin),
    "Acos": unary(torch.acos),
    "Sinh": unary(torch.sinh),
    "Cosh": unary(torch.cosh),
    "Asinh": unary(torch.asinh),
    "Acosh": unary(torch.acosh),
    "Atanh": unary(torch.atanh),
})


# ---------------------------------------------------------------------------------------------------------------
# Graph execution

def node_label(node):
    return node.name or (node.output[0] if node.output else "?")


def subgraph_reads(node):
    """The names the nodes of node's subgraphs (an If's branches) read, theirs included."""
    names = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            for n in a.g.node:
                names += list(n.input) + subgraph_reads(n)
    return names


def run_nodes(graph, values, opset, dtype, masks, keep, rebatch=None):
    """Runs graph's nodes in order (ONNX graphs are stored topologically sorted) over values, which it extends; an
    If runs the branch its condition takes. Each value no later node reads is dropped, unless in keep, so that memory
    stays near what the module itself would hold."""
    for init in graph.initializer:
        values.setdefault(init.name, to_torch(numpy_helper.to_array(init), dtype))
    last_read = {}
    for i, node in enumerate(graph.node):
        for name in list(node.input) + subgraph_reads(node):
            last_read[name] = i
    for i, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or (node.op_type not in OPS and node.op_type != "If"):
            op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            raise Unsupported(f"{op} in node '{node_label(node)}'")
        ins = []
        for name in node.input:
            if name and name not in values:
                raise BadInput(f"node '{node_label(node)}' reads '{name}', which neither the manifest nor an "
                               "earlier node provides")
            ins.append(values[name] if name else None)
        if node.op_type == "If":
            taken = "then_branch" if bool(ins[0].reshape(-1)[0]) else "else_branch"
            branch = next(a.g for a in node.attribute if a.name == taken)
            inner = run_nodes(branch, dict(values), opset, dtype, masks, {o.name for o in branch.output}, rebatch)
            outs = [inner[o.name] for o in branch.output]
        else:
            try:
                outs = OPS[node.op_type](Ctx(node, opset, dtype, masks, rebatch), ins, attrs_of(node))
            except Unsupported as e:
                raise Unsupported(f"{e} in node '{node_label(node)}'") from None
            except (RuntimeError, ValueError, IndexError, KeyError, TypeError) as e:
                raise BadInput(f"{node.op_type} node '{node_label(node)}': {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}") from None
        outs = [outs] if isinstance(outs, torch.Tensor) else outs
        for name, t in zip(node.output, outs):
            if name:
                values[name] = t
        for name in set(node.input) | set(subgraph_reads(node)):
            if last_read.get(name) == i and name not in keep:
                values.pop(name, None)
    return values


def run_graph(model, feeds, masks, dtype, wanted):
    """Runs the model's graph on feeds; returns the tensor named wanted."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    # The data input: the first graph input without an initializer. Its batch fixed in the file and fed otherwise
    # makes Reshape keep the batch fed (op_reshape).
    rebatch = None
    initialized = {i.name for i in model.graph.initializer}
    data = next((i for i in model.graph.input if i.name not in initialized), None)
    if data is not None and data.name in feeds and data.type.tensor_type.shape.dim:
        fixed = data.type.tensor_type.shape.dim[0].dim_value
        fed = feeds[data.name].shape[0] if feeds[data.name].dim() else fixed
        if fixed > 0 and fed != fixed:
            rebatch = (fixed, fed)
    values = run_nodes(model.graph, dict(feeds), opset, dtype, masks, {wanted}, rebatch)
    if wanted not in values:
        raise BadInput(f"no value named '{wanted}' after running the graph")
    return values[wanted]


def load_manifest(dir_path):
    with open(os.path.join(dir_path, "manifest.json")) as f:
        manifest = json.load(f)
    for key in ("model", "tensors", "output"):
        if key not in manifest:
            raise BadInput(f"manifest.json has no '{key}'")
    if manifest.get("dtype", "float32") not in DTYPES:
        raise BadInput(f"dtype '{manifest['dtype']}' is not one of {sorted(DTYPES)}")
    if manifest.get("loss", "cross_entropy") not in ("cross_entropy", "sum"):
        raise BadInput(f"loss '{manifest['loss']}' is not cross_entropy or sum")
    return manifest


def step(dir_path, manifest):
    """One forward and backward pass as the manifest describes; returns (loss, {name: grad}, output shape)."""
    dtype = DTYPES[manifest.get("dtype", "float32")]
    model = onnx.load(os.path.join(dir_path, manifest["model"]))
    known = {i.name for i in model.graph.input} | {i.name for i in model.graph.initializer}
    wanted = set(manifest.get("grads", []))
    feeds = {}
    for name, file in manifest["tensors"].items():
        if name not in known:
            raise BadInput(f"manifest tensor '{name}' is not a graph input of {manifest['model']}")
        feeds[name] = to_torch(np.load(os.path.join(dir_path, file)), dtype)
        if name in wanted:
            if not feeds[name].is_floating_point():
                raise BadInput(f"gradient wanted for non-float input '{name}'")
            feeds[name].requires_grad_(True)
    if wanted - set(feeds):
        raise BadInput(f"gradients wanted for inputs the manifest does not give: {sorted(wanted - set(feeds))}")
    masks = {node: torch.from_numpy(np.load(os.path.join(dir_path, file)))
             for node, file in manifest.get("dropout_masks", {}).items()}

    output = run_graph(model, feeds, masks, dtype, manifest["output"])
    if manifest.get("loss", "cross_entropy") == "cross_entropy":
        if "labels" not in manifest:
            raise BadInput("cross_entropy loss needs 'labels'")
        labels = torch.from_numpy(np.load(os.path.join(dir_path, manifest["labels"])).astype(np.int64))
        axis = manifest.get("class_axis", 1)  # -1: (N, T, V) logits of a token model
        loss = F.cross_entropy(output.movedim(axis, 1), labels)
    else:
        loss = output.sum()
    loss.backward()
    grads = {name: (feeds[name].grad if feeds[name].grad is not None else torch.zeros_like(feeds[name]))
             for name in manifest.get("grads", [])}
    return loss.item(), grads, list(output.shape)


def save_atomic(path, write):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


def write_result(dir_path, loss, grads, output_shape, dtype_name):
    files, taken = {}, set()
    for name, grad in grads.items():
        stem = "grad_" + re.sub(r"[^A-Za-z0-9._-]", "_", name)
        file, k = stem + ".npy", 1
        while file in taken:  # two names that sanitize alike
            file, k = f"{stem}_{k}.npy", k + 1
        taken.add(file)
        array = grad.detach().numpy().astype(dtype_name)
        save_atomic(os.path.join(dir_path, file), lambda f, a=array: np.save(f, a))
        files[name] = file
    result = {"loss": loss, "grads": files, "output_shape": output_shape}
    save_atomic(os.path.join(dir_path, "result.json"), lambda f: f.write(json.dumps(result, indent=1).encode()))


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DIR", file=sys.stderr)
        return 2
    dir_path = argv[1]
    try:
        manifest = load_manifest(dir_path)
        loss, grads, output_shape = step(dir_path, manifest)
        if not math.isfinite(loss):
            raise BadInput(f"the reference's loss is {loss}: the model overflows on these values (a parameter "
                           "initialised where the model expects a buffer's value, such as a frozen BatchNorm's "
                           "statistics?)")
        write_result(dir_path, loss, grads, output_shape, manifest.get("dtype", "float32"))
    except Unsupported as e:
        print(f"torch_reference: unsupported op {e}", file=sys.stderr)
        return 1
    except (BadInput, OSError, ValueError) as e:  # JSONDecodeError is a ValueError
        print(f"torch_reference: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
