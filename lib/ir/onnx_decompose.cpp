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
//   Mean(A, B, ...)              =>  Div(Add(Add(A, B), ...), n)                (n inputs; one: Identity)
//   Softsign(X)                  =>  Div(X, Add(Abs(X), 1))
//   ThresholdedRelu(X; alpha)    =>  Where(Greater(X, alpha), X, 0)
//   GlobalMaxPool(X)             =>  ReduceMax(X; axes 2..r-1, keepdims 1)
//   LRN(X; size, alpha, beta, bias), X (N, C, d...)  =>  Div(X, Pow(Add(Mul(S, alpha), bias), beta)) where
//       S = Reshape(AveragePool(Reshape(Mul(X, X), (N, 1, C, D)); kernel (size, 1), pads (a, 0, b, 0),
//                   count_include_pad 1), X's shape)      D = prod(d...), a = floor((size-1)/2), b = ceil((size-1)/2)
//     (the pool's mean over the window of `size` channels, zeros past the ends, is ONNX's alpha / size * square sum)
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
         op == "DepthToSpace" || op == "SpaceToDepth" || op == "Mean" || op == "Softsign" ||
         op == "ThresholdedRelu" || op == "GlobalMaxPool" || op == "LRN";
}

void Translator::convert_decomposed(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  const std::string& op = n.op_type();
  if (n.output_size() < 1 || n.output(0).empty() || n.input_size() < 1 || n.input(0).empty())
    fail(where, ": expected an input and an output");
  const std::string& x = n.input(0);
  const std::string& y = n.output(0);
  const auto scalar = [&](const std::string& v, double value) {
    add_const(v, ConstTensor{{}, true, {value}});
    return v;
  };
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    if (n.input_size() == 1) return convert_synthetic("Identity", {x}, y, name);
    const bool mean = op == "Mean";
    std::string acc = x;
    for (int i = 1; i < n.input_size(); ++i) {
      const bool last = i + 1 == n.input_size() && !mean;
      const std::string out = last ? y : y + "/" + std::to_string(i);
      convert_synthetic(op == "Sum" || mean ? "Add" : op, {acc, n.input(i)}, out, last ? name : out);
      acc = out;
    }
    if (mean) convert_synthetic("Div", {acc, scalar(y + "/count", n.input_size())}, y, name);
    return;
  }
  if (op == "Softsign") {
    convert_synthetic("Abs", {x}, y + "/abs", name + "/abs");
    convert_synthetic("Add", {y + "/abs", scalar(y + "/one", 1.0)}, y + "/denominator", name + "/denominator");
    return convert_synthetic("Div", {x, y + "/denominator"}, y, name);
  }
  if (op == "ThresholdedRelu") {
    convert_synthetic("Greater", {x, scalar(y + "/alpha", attr_float(n, "alpha", 1.0))}, y + "/above",
                      name + "/above");
    return convert_synthetic("Where", {y + "/above", x, scalar(y + "/zero", 0.0)}, y, name);
  }
  if (op == "GlobalMaxPool" || op == "LRN") {
    const Shape s = g_.values[lookup(x, "input")].shape;  // a copy: the nodes below add values
    if (s.size() < 3) fail(where, ": X has shape ", shape_str(s), "; expected (N, C, d1, ...)");
    if (op == "GlobalMaxPool") {
      std::vector<int64_t> axes;
      for (size_t d = 2; d < s.size(); ++d) axes.push_back(static_cast<int64_t>(d));
      return convert_synthetic("ReduceMax", {x}, y, name, {ints_attr("axes", axes), int_attr("keepdims", 1)});
    }
    const int64_t size = attr_int(n, "size", 0);
    if (size < 1 || size > (int64_t{1} << 16)) fail(where, ": size ", size, " must be in [1, 65536]");
    const int64_t N = s[0], C = s[1], D = numel(Shape(s.begin() + 2, s.end()));
    convert_synthetic("Mul", {x, x}, y + "/square", name + "/square");
    convert_synthetic("Reshape", {y + "/square", add_int64_const(y + "/rows_shape", {N, 1, C, D})}, y + "/rows",
                      name + "/rows");
    convert_synthetic("AveragePool", {y + "/rows"}, y + "/window_mean", name + "/window_mean",
                      {ints_attr("kernel_shape", {size, 1}), ints_attr("pads", {(size - 1) / 2, 0, size / 2, 0}),
                       int_attr("count_include_pad", 1)});
    convert_synthetic("Reshape", {y + "/window_mean", add_int64_const(y + "/shape", s)}, y + "/mean_square",
                      name + "/mean_square");
    convert_synthetic("Mul", {y + "/mean_square", scalar(y + "/alpha", attr_float(n, "alpha", 1e-4))},
                      y + "/scaled", name + "/scaled");
    convert_synthetic("Add", {y + "/scaled", scalar(y + "/bias", attr_float(n, "bias", 1.0))}, y + "/shifted",
                      name + "/shifted");
    convert_synthetic("Pow", {y + "/shifted", scalar(y + "/beta", attr_float(n, "beta", 0.75))}, y + "/divisor",
                      name + "/divisor");
    return convert_synthetic("Div", {x, y + "/divisor"}, y, name);
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
    convert_synthetic("Div", {x, scalar(y + "/alpha", alpha)}, y + "/scaled", name + "/scale");
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
