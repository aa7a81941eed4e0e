// Three-dimensional convolutions at import (torch's Conv3d: video and volumetric networks), as a sum over the
// kernel's depth of 2-D convolutions that monet runs, the depth folded into the batch:
//
//   Y = Conv(X, W, B)      X (N, C, D, H, W), W (M, C/g, kD, kH, kW), Y (N, M, oD, oH, oW)
//     =>  Xt = Pad(Transpose(X, (0, 2, 1, 3, 4)), the depth's pads)                        (N, D', C, H, W)
//         Y_k = Conv(Reshape(Slice(Xt, depth k dD .. k dD + (oD - 1) sD + 1, step sD), (N oD, C, H, W)),
//                    Reshape(Slice(W, depth k .. k + 1), (M, C/g, kH, kW)), B for k = 0 alone)
//         Y = Transpose(Reshape(Y_0 + ... + Y_{kD-1}, (N, oD, M, oH, oW)), (0, 2, 1, 3, 4))
//
// with the height's and width's strides, pads, dilations and the group on every 2-D convolution (auto_pad resolved
// to pads first, as ONNX defines it). Each slice is a copy the planner may keep or recompute; W stays the model's
// parameter, of its shape. A 3-D ConvTranspose is refused.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/onnx_node.h"
#include "ir/onnx_translate.h"

namespace monet::onnx_import {

bool Translator::is_conv_3d(const onnx::NodeProto& n) {
  if (n.op_type() != "Conv" || n.input_size() < 2 || n.input(0).empty() || !defines(n.input(0))) return false;
  return g_.values[lookup(n.input(0), "input")].shape.size() == 5;
}

void Translator::convert_conv_3d(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.output_size() != 1 || n.output(0).empty()) fail(where, ": expected one output");
  const Shape x = g_.values[lookup(n.input(0), "input")].shape;  // copies: the nodes below add values
  const Shape w = g_.values[lookup(n.input(1), "input")].shape;
  if (w.size() != 5) fail(where, ": W has shape ", shape_str(w), "; expected rank 5 (M, C/group, kD, kH, kW)");
  const auto given = [&](const char* key, int64_t fill, size_t count) {
    std::vector<int64_t> v = attr_ints(n, key);
    if (v.empty()) v.assign(count, fill);
    if (v.size() != count) fail(where, ": attribute '", key, "' has ", v.size(), " entries; expected ", count);
    return v;
  };
  const std::vector<int64_t> kernel = {w[2], w[3], w[4]};
  if (find_attr(n, "kernel_shape") && attr_ints(n, "kernel_shape") != kernel)
    fail(where, ": kernel_shape ", shape_str(attr_ints(n, "kernel_shape")), " does not match W's ", shape_str(kernel));
  const std::vector<int64_t> strides = given("strides", 1, 3), dilations = given("dilations", 1, 3);
  std::vector<int64_t> pads = given("pads", 0, 6);
  for (size_t d = 0; d < 3; ++d)
    if (strides[d] < 1 || dilations[d] < 1 || kernel[d] < 1 || pads[d] < 0 || pads[d + 3] < 0)
      fail(where, ": strides ", shape_str(strides), ", dilations ", shape_str(dilations), ", pads ", shape_str(pads),
           " and kernel ", shape_str(kernel), " must be positive (pads non-negative)");
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    pads.assign(6, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t d = 0; d < 3; ++d) {  // output ceil(input / stride); an odd total's extra pixel at the end (UPPER)
      const int64_t in = x[d + 2], out = (in + strides[d] - 1) / strides[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - in);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + 3] = total - pads[d];
    }
  } else if (auto_pad != "NOTSET") {
    fail(where, ": unknown auto_pad '", auto_pad, "'");
  }
  const int64_t N = x[0], C = x[1], D = x[2], H = x[3], Wd = x[4], M = w[0], kD = kernel[0];
  const int64_t padded = D + pads[0] + pads[3], extent = (kD - 1) * dilations[0] + 1;
  if (extent > padded)
    fail(where, ": the kernel's depth ", kD, " (dilated ", extent, ") exceeds the padded depth ", padded);
  const int64_t oD = (padded - extent) / strides[0] + 1;

  const std::string& y = n.output(0);
  std::string xt = y + "/depth_major";
  convert_synthetic("Transpose", {n.input(0)}, xt, name + "/depth_major", {ints_attr("perm", {0, 2, 1, 3, 4})});
  if (pads[0] > 0 || pads[3] > 0) {
    convert_synthetic("Pad", {xt, add_int64_const(y + "/depth_pads", {0, pads[0], 0, 0, 0, 0, pads[3], 0, 0, 0})},
                      y + "/depth_padded", name + "/depth_pad");
    xt = y + "/depth_padded";
  }
  const std::vector<onnx::AttributeProto> conv2d = {
      ints_attr("kernel_shape", {kernel[1], kernel[2]}), ints_attr("strides", {strides[1], strides[2]}),
      ints_attr("dilations", {dilations[1], dilations[2]}), ints_attr("pads", {pads[1], pads[2], pads[4], pads[5]}),
      int_attr("group", attr_int(n, "group", 1))};
  const std::string batch_shape = add_int64_const(y + "/frames_shape", {N * oD, C, H, Wd});
  const std::string w_shape = add_int64_const(y + "/w2d_shape", {M, w[1], kernel[1], kernel[2]});
  std::string sum;
  for (int64_t k = 0; k < kD; ++k) {
    const std::string tag = "/k" + std::to_string(k);
    const int64_t start = k * dilations[0];
    std::string frames = xt;
    if (!(start == 0 && oD == padded && strides[0] == 1)) {
      frames = y + tag + "/frames";
      convert_synthetic("Slice",
                        {xt, add_int64_const(y + tag + "/starts", {start}),
                         add_int64_const(y + tag + "/ends", {start + (oD - 1) * strides[0] + 1}),
                         add_int64_const(y + tag + "/axes", {1}), add_int64_const(y + tag + "/steps", {strides[0]})},
                        frames, name + tag + "/frames");
    }
    convert_synthetic("Reshape", {frames, batch_shape}, y + tag + "/x2d", name + tag + "/x2d");
    std::string wk = n.input(1);
    if (kD > 1) {
      wk = y + tag + "/w_slice";
      convert_synthetic("Slice",
                        {n.input(1), add_int64_const(y + tag + "/w_starts", {k}),
                         add_int64_const(y + tag + "/w_ends", {k + 1}), add_int64_const(y + tag + "/w_axes", {2})},
                        wk, name + tag + "/w_slice");
    }
    convert_synthetic("Reshape", {wk, w_shape}, y + tag + "/w2d", name + tag + "/w2d");
    std::vector<std::string> ins = {y + tag + "/x2d", y + tag + "/w2d"};
    if (k == 0 && n.input_size() > 2 && !n.input(2).empty()) ins.push_back(n.input(2));
    const std::string out = y + tag + "/y2d";
    convert_synthetic("Conv", ins, out, kD == 1 ? name : name + tag, conv2d);
    if (sum.empty()) {
      sum = out;
    } else {
      convert_synthetic("Add", {sum, out}, y + tag + "/sum", name + tag + "/sum");
      sum = y + tag + "/sum";
    }
  }
  const Shape y2 = g_.values[lookup(sum, "value")].shape;  // (N oD, M, oH, oW)
  convert_synthetic("Reshape", {sum, add_int64_const(y + "/y5_shape", {N, oD, M, y2[2], y2[3]})}, y + "/y5",
                    name + "/y5");
  convert_synthetic("Transpose", {y + "/y5"}, y, name + "/channels_major", {ints_attr("perm", {0, 2, 1, 3, 4})});
}

}  // namespace monet::onnx_import
