// One-dimensional convolutions, pools and resizes at import: torch's Conv1d, ConvTranspose1d, MaxPool1d,
// AvgPool1d, AdaptiveAvgPool1d(1) and F.interpolate on (N, C, L) export the ONNX ops on rank-3 tensors, which monet
// runs as the 2-D op over a height of 1:
//
//   Y = Conv(X, W, B; kernel_shape [k], strides [s], pads [b, e], dilations [d])      X (N, C, L), W (M, C/g, k)
//     =>  Y = Squeeze(Conv(Unsqueeze(X, [2]), Unsqueeze(W, [2]), B;
//                          kernel_shape [1, k], strides [1, s], pads [0, b, 0, e], dilations [1, d]), [2])
//
// Every spatial attribute gains the height's entry (a size or stride of 1, a pad of 0; output_shape the height 1),
// Resize's scales and sizes an entry of 1 and its roi (0, 1), and opset 18's Resize axes move past the new one.
// The Unsqueezes and the Squeeze are views (no copy); W stays the model's parameter, of the model's shape.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/onnx_node.h"
#include "ir/onnx_translate.h"

namespace monet::onnx_import {
namespace {

bool spatial_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "MaxPool" || op == "AveragePool" ||
         op == "GlobalAveragePool" || op == "Resize";
}

// An INTS attribute of one spatial dim given the height's entry `h` in front (before each half of pads, which hold
// the begins, then the ends); false if it does not hold one dim's entries.
bool widen(onnx::AttributeProto& a, int64_t h) {
  const int n = a.ints_size();
  if (n != (a.name() == "pads" ? 2 : 1)) return false;
  std::vector<int64_t> v(a.ints().begin(), a.ints().end());
  a.clear_ints();
  for (int64_t d : v) {
    a.add_ints(h);
    a.add_ints(d);
  }
  return true;
}

}  // namespace

bool Translator::is_spatial_1d(const onnx::NodeProto& n) {
  if (!spatial_op(n.op_type()) || n.input_size() < 1 || n.input(0).empty() || !defines(n.input(0))) return false;
  return g_.values[lookup(n.input(0), "input")].shape.size() == 3;
}

void Translator::convert_spatial_1d(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.output_size() < 1 || n.output(0).empty()) fail(where, ": expected an output");
  const std::string& y = n.output(0);
  const std::string height_axis = add_int64_const(y + "/height_axis", {2});
  onnx::NodeProto m = n;
  m.set_name(name);
  auto unsqueeze = [&](int i, const char* suffix) {
    const std::string out = y + suffix;
    convert_synthetic("Unsqueeze", {n.input(i), height_axis}, out, name + suffix);
    m.set_input(i, out);
  };
  unsqueeze(0, "/x_2d");
  const bool conv = n.op_type() == "Conv" || n.op_type() == "ConvTranspose";
  if (conv && n.input_size() > 1 && !n.input(1).empty()) {
    const Shape w = g_.values[lookup(n.input(1), "input")].shape;
    if (w.size() != 3) fail(where, ": W has shape ", shape_str(w), "; expected rank 3 for a 1-D input");
    unsqueeze(1, "/w_2d");
  }
  const bool resize_axes = n.op_type() == "Resize" && find_attr(n, "axes") != nullptr;
  for (onnx::AttributeProto& a : *m.mutable_attribute()) {
    const std::string& k = a.name();
    const bool spatial = k == "kernel_shape" || k == "strides" || k == "dilations" || k == "output_shape";
    if ((spatial || k == "pads" || k == "output_padding") && !widen(a, spatial ? 1 : 0))
      fail(where, ": attribute '", k, "' has ", a.ints_size(), " entries for a 1-D input");
    if (k == "axes" && resize_axes)
      for (int j = 0; j < a.ints_size(); ++j) {
        const int64_t d = a.ints(j) < 0 ? a.ints(j) + 3 : a.ints(j);
        a.set_ints(j, d >= 2 ? d + 1 : d);
      }
  }
  // Resize's roi (1), scales (2) and sizes (3), of every axis (without axes): the height's entry added, 1 to the
  // scales and sizes, (0, 1) to the roi's starts and ends. With axes they name only the axes, moved above.
  for (int i = 1; n.op_type() == "Resize" && !resize_axes && i <= 3 && i < n.input_size(); ++i) {
    if (n.input(i).empty()) continue;
    if (!is_const(n.input(i))) fail(where, ": input ", i, " ('", n.input(i), "') must be a constant");
    const ConstTensor c = const_of(n.input(i));
    if (c.data.empty()) continue;
    const size_t halves = i == 1 ? 2 : 1;
    if (c.data.size() != 3 * halves) fail(where, ": input ", i, " has ", c.data.size(), " entries for a rank-3 input");
    std::vector<double> d;
    for (size_t half = 0; half < halves; ++half) {
      d.insert(d.end(), c.data.begin() + static_cast<std::ptrdiff_t>(3 * half),
               c.data.begin() + static_cast<std::ptrdiff_t>(3 * half + 2));
      d.push_back(i == 1 ? static_cast<double>(half) : 1.0);
      d.push_back(c.data[3 * half + 2]);
    }
    const std::string widened = y + "/input" + std::to_string(i) + "_2d";
    add_const(widened, ConstTensor{{static_cast<int64_t>(d.size())}, c.is_float, d});
    m.set_input(i, widened);
  }
  const std::string y2 = y + "/y_2d";
  m.set_output(0, y2);
  convert_node(m);
  convert_synthetic("Squeeze", {y2, height_axis}, y, name + "/squeeze");
}

}  // namespace monet::onnx_import
