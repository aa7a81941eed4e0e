// ONNX ops that monet runs as a few of its own, each written out at import:
//
//   Max(A, B, C, ...)            =>  Max(Max(A, B), C) ...     (one input: Identity; Min likewise)
//   Sum(A, B, ...) broadcasting  =>  Add(Add(A, B), ...)       (inputs of one shape stay one Sum)
//   ReduceSumSquare(X)           =>  ReduceSum(Mul(X, X))
//   ReduceL1(X)                  =>  ReduceSum(Abs(X))
//   ReduceL2(X)                  =>  Sqrt(ReduceSum(Mul(X, X)))
//   ReduceMin(X)                 =>  Neg(ReduceMax(Neg(X)))
//   ReduceLogSumExp(X)           =>  Add(Log(ReduceSum(Exp(Sub(X, M)))), M')     M = ReduceMax(X; keepdims 1),
//                                                                                 M' = M in the output's shape
//   Celu(X; alpha)               =>  Mul(Elu(Div(X, alpha)), alpha)              (alpha 1: Elu(X))
//   DepthToSpace(X; b, DCR)      =>  Reshape(Transpose(Reshape(X, (N, b, b, C', H, W)), (0, 3, 4, 1, 5, 2)),
//                                            (N, C', H b, W b))                    C' = C / b^2
//   DepthToSpace(X; b, CRD)      =>  the same through (N, C', b, b, H, W) and (0, 1, 4, 2, 5, 3)
//   SpaceToDepth(X; b)           =>  Reshape(Transpose(Reshape(X, (N, C, H', b, W', b)), (0, 3, 5, 1, 2, 4)),
//                                            (N, C b^2, H', W'))                  H' = H / b, W' = W / b
//
// The reductions keep the node's axes (attribute or opset 18's input), keepdims and noop_with_empty_axes. Their
// gradients are those of the nodes written out: ReduceL2's is NaN where a whole reduced slice is 0 (torch's is 0),
// ReduceLogSumExp's is NaN on a slice of -inf only (torch's is 0); the max's share of it cancels (to rounding).
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "ir/onnx_node.h"
#include "ir/onnx_translate.h"

namespace monet::onnx_import {
namespace {

bool is_reduction(const std::string& op) {
  return op == "ReduceSumSquare" || op == "ReduceL1" || op == "ReduceL2" || op == "ReduceMin" ||
         op == "ReduceLogSumExp";
}

}  // namespace

bool Translator::decomposes(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Sum") {  // broadcasting: inputs of more than one shape
    const auto shape_of = [&](const std::string& v) -> const Shape* {
      return defines(v) ? &g_.values[lookup(v, "input")].shape : nullptr;
    };
    const Shape* first = n.input_size() > 0 ? shape_of(n.input(0)) : nullptr;
    for (const std::string& in : n.input())
      if (const Shape* s = shape_of(in); first && s && *s != *first) return true;
    return false;
  }
  return ((op == "Max" || op == "Min") && n.input_size() != 2) || is_reduction(op) || op == "Celu" ||
         op == "DepthToSpace" || op == "SpaceToDepth";
}

void Translator::convert_decomposed(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  const std::string& op = n.op_type();
  if (n.output_size() < 1 || n.output(0).empty() || n.input_size() < 1 || n.input(0).empty())
    fail(where, ": expected an input and an output");
  const std::string& x = n.input(0);
  const std::string& y = n.output(0);
  if (op == "Max" || op == "Min" || op == "Sum") {
    if (n.input_size() == 1) return convert_synthetic("Identity", {x}, y, name);
    std::string acc = x;
    for (int i = 1; i < n.input_size(); ++i) {
      const bool last = i + 1 == n.input_size();
      const std::string out = last ? y : y + "/" + std::to_string(i);
      convert_synthetic(op == "Sum" ? "Add" : op, {acc, n.input(i)}, out, last ? name : out);
      acc = out;
    }
    return;
  }
  if (is_reduction(op)) {
    // The reduction `as` with the node's axes and flags, of `in` into `out`; keepdims 1 where keep_all.
    const auto reduce = [&](const char* as, const std::string& in, const std::string& out, bool keep_all) {
      onnx::NodeProto m = n;
      m.set_op_type(as);
      m.set_name(out == y ? name : name + "/" + as);
      m.set_input(0, in);
      m.clear_output();
      m.add_output(out);
      if (keep_all) set_attr(m, int_attr("keepdims", 1));
      convert_node(m);
    };
    if (op == "ReduceSumSquare") {
      convert_synthetic("Mul", {x, x}, y + "/square", name + "/square");
      return reduce("ReduceSum", y + "/square", y, false);
    }
    if (op == "ReduceL2") {
      convert_synthetic("Mul", {x, x}, y + "/square", name + "/square");
      reduce("ReduceSum", y + "/square", y + "/sum_square", false);
      return convert_synthetic("Sqrt", {y + "/sum_square"}, y, name);
    }
    if (op == "ReduceL1") {
      convert_synthetic("Abs", {x}, y + "/abs", name + "/abs");
      return reduce("ReduceSum", y + "/abs", y, false);
    }
    if (op == "ReduceMin") {
      convert_synthetic("Neg", {x}, y + "/neg", name + "/neg");
      reduce("ReduceMax", y + "/neg", y + "/max_neg", false);
      return convert_synthetic("Neg", {y + "/max_neg"}, y, name + "/min");
    }
    // ReduceLogSumExp
    reduce("ReduceMax", x, y + "/max", true);
    convert_synthetic("Sub", {x, y + "/max"}, y + "/shifted", name + "/shift");
    convert_synthetic("Exp", {y + "/shifted"}, y + "/exp", name + "/exp");
    reduce("ReduceSum", y + "/exp", y + "/sum_exp", false);
    convert_synthetic("Log", {y + "/sum_exp"}, y + "/log_sum_exp", name + "/log");
    std::string max = y + "/max";
    const Shape out = g_.values[lookup(y + "/log_sum_exp", "value")].shape;
    if (g_.values[lookup(max, "value")].shape != out) {
      convert_synthetic("Reshape", {max, add_int64_const(y + "/out_shape", out)}, y + "/max_out", name + "/max_out");
      max = y + "/max_out";
    }
    return convert_synthetic("Add", {y + "/log_sum_exp", max}, y, name);
  }
  if (op == "Celu") {
    const double alpha = attr_float(n, "alpha", 1.0);
    if (!(alpha != 0)) fail(where, ": alpha ", alpha, " is not supported (nonzero)");
    if (alpha == 1.0) return convert_synthetic("Elu", {x}, y, name);
    add_const(y + "/alpha", ConstTensor{{}, true, {alpha}});
    convert_synthetic("Div", {x, y + "/alpha"}, y + "/scaled", name + "/scale");
    convert_synthetic("Elu", {y + "/scaled"}, y + "/elu", name + "/elu");
    return convert_synthetic("Mul", {y + "/elu", y + "/alpha"}, y, name);
  }
  // DepthToSpace, SpaceToDepth
  const Shape s = g_.values[lookup(x, "input")].shape;
  const int64_t b = attr_int(n, "blocksize", 0);
  if (s.size() != 4) fail(where, ": X has shape ", shape_str(s), "; expected rank 4 (N, C, H, W)");
  if (b < 1 || b > (int64_t{1} << 16)) fail(where, ": blocksize ", b, " must be in [1, 65536]");
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  Shape split, perm, joined;
  if (op == "DepthToSpace") {
    if (C % (b * b) != 0) fail(where, ": C = ", C, " is not a multiple of blocksize^2 = ", b * b);
    const std::string mode = attr_string(n, "mode", "DCR");
    if (mode != "DCR" && mode != "CRD") fail(where, ": mode '", mode, "' is not supported (DCR, CRD)");
    const int64_t c = C / (b * b);
    split = mode == "DCR" ? Shape{N, b, b, c, H, W} : Shape{N, c, b, b, H, W};
    perm = mode == "DCR" ? Shape{0, 3, 4, 1, 5, 2} : Shape{0, 1, 4, 2, 5, 3};
    joined = {N, c, H * b, W * b};
  } else {
    if (H % b != 0 || W % b != 0) fail(where, ": H = ", H, " and W = ", W, " are not multiples of blocksize ", b);
    split = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    joined = {N, C * b * b, H / b, W / b};
  }
  convert_synthetic("Reshape", {x, add_int64_const(y + "/split_shape", split)}, y + "/split", name + "/split");
  convert_synthetic("Transpose", {y + "/split"}, y + "/moved", name + "/transpose", {ints_attr("perm", perm)});
  convert_synthetic("Reshape", {y + "/moved", add_int64_const(y + "/joined_shape", joined)}, y, name);
}

}  // namespace monet::onnx_import
