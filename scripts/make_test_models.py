#!/usr/bin/python3
"""Writes the small hand-built ONNX files the tests use (test/data/): bad inputs and edge cases.

Usage: /usr/bin/python3 scripts/make_test_models.py
"""
import os

import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(__file__), "..", "test", "data")


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name))
    print(name)


def conv_relu(op="Relu", batch="N", name="g"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c"], ["y"], name="act")]
    g = helper.make_graph(nodes, name, [x, w], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def main():
    os.makedirs(OUT, exist_ok=True)
    save(conv_relu(), "conv_relu.onnx")                 # dynamic batch: needs --batch
    save(conv_relu(op="Elu"), "unsupported_op.onnx")    # Elu is not a monet op
    save(conv_relu(batch=2), "static_batch.onnx")       # batch fixed in the file
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


if __name__ == "__main__":
    main()
