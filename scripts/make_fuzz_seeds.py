#!/usr/bin/python3
"""Writes small ONNX models, one or a few ops each with its attributes set, to test/fuzz/seeds/: a seed corpus from
which libFuzzer's byte mutations reach the shape rules and folders of every op (mutating an attribute's integer
keeps the protobuf parseable, where mutating a large model mostly breaks it).

Usage: /usr/bin/python3 scripts/make_fuzz_seeds.py
"""
import os

import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(__file__), "..", "test", "fuzz", "seeds")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def const(name, values, dtype=I64, dims=None):
    return helper.make_node("Constant", [], [name], name=name,
                            value=helper.make_tensor(name + "_v", dtype, [len(values)] if dims is None else dims, values))


def model(name, nodes, inputs, out="y", extra_inits=()):
    ins = [helper.make_tensor_value_info(n, F, s) for n, s in inputs]
    g = helper.make_graph(nodes, name, ins, [helper.make_tensor_value_info(out, F, ["d"])], initializer=list(extra_inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


X4 = [("x", ["N", 3, 8, 8])]
X2 = [("x", ["N", 6])]


def main():
    os.makedirs(OUT, exist_ok=True)
    w = ("w", [4, 3, 3, 3])
    model("conv", [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 1, 0], strides=[2, 1],
                                    dilations=[1, 2], group=1)], X4 + [w, ("b", [4])])
    model("conv_group", [helper.make_node("Conv", ["x", "w"], ["y"], group=3, auto_pad="SAME_UPPER")],
          X4 + [("w", [3, 1, 3, 3])])
    model("conv_transpose", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                                              output_padding=[1, 1])], X4 + [("w", [3, 2, 3, 3])])
    model("batchnorm", [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"],
                                         epsilon=1e-5, momentum=0.9)],
          X4 + [("g", [3]), ("b", [3]), ("m", [3]), ("v", [3])])
    model("maxpool", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 0],
                                       ceil_mode=1)], X4)
    model("avgpool", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                                       count_include_pad=1, pads=[0, 1, 0, 1])], X4)
    model("global_pool_flatten_gemm", [helper.make_node("GlobalAveragePool", ["x"], ["p"]),
                                       helper.make_node("Flatten", ["p"], ["f"], axis=1),
                                       helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1, alpha=1.0, beta=1.0)],
          X4 + [("w", [5, 3]), ("b", [5])])
    model("activations", [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Clip", ["a", "lo", "hi"], ["c"]),
                          helper.make_node("HardSigmoid", ["c"], ["d"], alpha=0.2, beta=0.5),
                          helper.make_node("Identity", ["d"], ["e"]), helper.make_node("Sigmoid", ["e"], ["f"]),
                          helper.make_node("Tanh", ["f"], ["g"]), helper.make_node("Erf", ["g"], ["h"]),
                          helper.make_node("Sqrt", ["h"], ["i"]), helper.make_node("Softmax", ["i"], ["y"], axis=-1)],
          X4, extra_inits=[helper.make_tensor("lo", F, [], [0.0]), helper.make_tensor("hi", F, [], [6.0])])
    model("broadcast_arith", [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Sub", ["a", "b"], ["s"]),
                              helper.make_node("Mul", ["s", "b"], ["m"]), helper.make_node("Div", ["m", "b"], ["d"]),
                              helper.make_node("Pow", ["d", "two"], ["y"])],
          X4 + [("b", [3, 1, 1])], extra_inits=[helper.make_tensor("two", F, [], [2.0])])
    model("reshape_transpose", [const("shape", [0, -1, 4]), helper.make_node("Reshape", ["x", "shape"], ["r"]),
                                helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1])], X4)
    model("slice_pad", [const("starts", [1, 0]), const("ends", [7, 9223372036854775807]), const("axes", [2, 3]),
                        const("steps", [2, 1]), helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"]),
                        const("pads", [0, 0, 1, 2, 0, 0, 1, 2]),
                        helper.make_node("Pad", ["s", "pads"], ["y"], mode="reflect")], X4)
    model("resize", [const("roi", [], F, [0]), const("scales", [1.0, 1.0, 2.0, 2.0], F),
                     helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")], X4)
    model("concat_split", [helper.make_node("Concat", ["x", "x"], ["c"], axis=1), const("split", [2, 4]),
                           helper.make_node("Split", ["c", "split"], ["a", "y"], axis=1)], X4)
    model("gather_expand", [const("idx", [0, 2]), helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
                            const("shape", [2, 2, 8, 8]), helper.make_node("Expand", ["g", "shape"], ["y"])], X4)
    model("squeeze_unsqueeze_reduce", [const("axes", [1]), helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
                                       helper.make_node("Squeeze", ["u", "axes"], ["s"]),
                                       helper.make_node("ReduceMean", ["s"], ["y"], axes=[2, 3], keepdims=1)], X4)
    model("matmul_dropout", [helper.make_node("MatMul", ["x", "w"], ["m"]),
                             helper.make_node("Dropout", ["m", "ratio", "train"], ["y", "mask"])],
          X2 + [("w", [6, 4])], extra_inits=[helper.make_tensor("ratio", F, [], [0.5]),
                                             helper.make_tensor("train", TensorProto.BOOL, [], [1])])
    # The shape subgraph folders: Shape, Gather, Unsqueeze, Concat, ConstantOfShape, Equal, Where, Range, Mod, Cast.
    model("shape_folding", [
        helper.make_node("Shape", ["x"], ["s"]), const("i0", [0], dims=[]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0), const("ax", [0]),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]), const("m1", [-1]),
        helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
        helper.make_node("Shape", ["shape"], ["shape_len"]),
        helper.make_node("ConstantOfShape", ["shape_len"], ["ones"], value=helper.make_tensor("one", I64, [1], [1])),
        helper.make_node("Equal", ["shape", "m1"], ["eq"]), helper.make_node("Where", ["eq", "ones", "shape"], ["w"]),
        helper.make_node("Mul", ["w", "shape"], ["w2"]), helper.make_node("Mod", ["w2", "big"], ["w3"]),
        helper.make_node("Cast", ["w3"], ["w4"], to=I64),
        const("r0", [0], dims=[]), const("r1", [3], dims=[]), const("r2", [1], dims=[]),
        helper.make_node("Range", ["r0", "r1", "r2"], ["rng"]),
        helper.make_node("Reshape", ["x", "shape"], ["y"])], X4,
        extra_inits=[helper.make_tensor("big", I64, [], [1000000])])


if __name__ == "__main__":
    main()
