// Pools of rank 5 and above whose window spans at most two spatial dims, at import, as the 2-D op monet runs:
// torch's MaxPool3d and AvgPool3d with a kernel of (1, k, k), and nn.LocalResponseNorm on (N, C, H, W), which
// exports an AveragePool of kernel (size, 1, 1) over (N, 1, C, H, W). A spatial dim the window leaves alone (kernel
// 1, stride 1, dilation 1, no pads) is pooled elementwise, so it can join a neighbour: next to C it joins the
// channels, next to another such dim the two become one. Where two spatial dims or fewer are left:
//
//   Y = AveragePool(X; kernel (1, 3, 3), strides (1, 2, 2), pads (0, 1, 1, 0, 1, 1))      X (N, C, D, H, W)
//     =>  Y = Reshape(AveragePool(Reshape(X, (N, C D, H, W)); kernel (3, 3), strides (2, 2), pads (1, 1, 1, 1)),
//                     (N, C, D, H', W'))
//   Y = AveragePool(X; kernel (5, 1, 1), pads (2, 0, 0, 2, 0, 0))                        X (N, 1, C, H, W)
//     =>  Y = Reshape(AveragePool(Reshape(X, (N, 1, C, H W)); kernel (5, 1), pads (2, 0, 2, 0)), (N, 1, C, H, W))
//
// A group of one dim of length 1 stands in where fewer than two are left. The Reshapes are views; the pool's
// other attributes (ceil_mode, auto_pad, count_include_pad) carry over. A window over all three spatial dims of a
// 5-D tensor runs as two 2-D pools (convert_pool_3d, below); MaxPool's Indices output is refused.
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "ir/onnx_node.h"
#include "ir/onnx_translate.h"

namespace monet::onnx_import {

bool Translator::is_pool_nd(const onnx::NodeProto& n) {
  if ((n.op_type() != "MaxPool" && n.op_type() != "AveragePool") || n.input_size() < 1 || n.input(0).empty() ||
      !defines(n.input(0)))
    return false;
  return g_.values[lookup(n.input(0), "input")].shape.size() >= 5;
}

void Translator::convert_pool_nd(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.output_size() < 1 || n.output(0).empty()) fail(where, ": expected an output");
  if (n.output_size() > 1 && !n.output(1).empty()) fail(where, ": the Indices output is not supported");
  const Shape x = g_.values[lookup(n.input(0), "input")].shape;  // a copy: the nodes below add values
  const size_t k = x.size() - 2;                                  // spatial dims
  const auto given = [&](const char* key, int64_t fill, size_t count) {
    std::vector<int64_t> v = attr_ints(n, key);
    if (v.empty()) v.assign(count, fill);
    if (v.size() != count) fail(where, ": attribute '", key, "' has ", v.size(), " entries; expected ", count);
    return v;
  };
  const std::vector<int64_t> kernel = given("kernel_shape", 0, k), strides = given("strides", 1, k),
                             dilations = given("dilations", 1, k), pads = given("pads", 0, 2 * k);
  if (!find_attr(n, "kernel_shape")) fail(where, ": attribute 'kernel_shape' is required");
  const auto unit = [&](size_t d) {
    return kernel[d] == 1 && strides[d] == 1 && dilations[d] == 1 && pads[d] == 0 && pads[d + k] == 0;
  };
  // The spatial groups: each the dims it joins and whether the window leaves them alone.
  struct Group {
    std::vector<size_t> dims;
    bool unit = true;
  };
  int64_t channels = x[1];
  std::vector<Group> groups;
  for (size_t d = 0; d < k; ++d) {
    if (unit(d) && groups.empty()) {
      channels *= x[d + 2];
    } else if (unit(d) && groups.back().unit) {
      groups.back().dims.push_back(d);
    } else {
      groups.push_back({{d}, unit(d)});
    }
  }
  if (groups.size() > 2) {
    const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
    if (k != 3 || (auto_pad != "NOTSET" && auto_pad != "VALID"))
      fail(where, ": a window over ", groups.size(), " spatial dims (kernel ", shape_str(kernel), ", X ", shape_str(x),
           ") is supported on (N, C, D, H, W) without SAME padding only");
    return convert_pool_3d(n, name, x, kernel, strides, dilations, pads);
  }
  while (groups.size() < 2) groups.push_back({});  // a dim of length 1
  Shape x4 = {x[0], channels};
  std::vector<int64_t> kernel2, strides2, dilations2, begins, ends;
  for (const Group& grp : groups) {
    int64_t length = 1;
    for (size_t d : grp.dims) length *= x[d + 2];
    x4.push_back(length);
    const size_t d = grp.dims.empty() ? 0 : grp.dims[0];
    kernel2.push_back(grp.unit ? 1 : kernel[d]);
    strides2.push_back(grp.unit ? 1 : strides[d]);
    dilations2.push_back(grp.unit ? 1 : dilations[d]);
    begins.push_back(grp.unit ? 0 : pads[d]);
    ends.push_back(grp.unit ? 0 : pads[d + k]);
  }
  const std::string& y = n.output(0);
  convert_synthetic("Reshape", {n.input(0), add_int64_const(y + "/x_2d_shape", x4)}, y + "/x_2d", name + "/x_2d");
  onnx::NodeProto m = n;
  m.set_name(name);
  m.set_input(0, y + "/x_2d");
  m.clear_output();
  m.add_output(y + "/y_2d");
  set_attr(m, ints_attr("kernel_shape", kernel2));
  set_attr(m, ints_attr("strides", strides2));
  if (find_attr(n, "dilations")) set_attr(m, ints_attr("dilations", dilations2));
  if (find_attr(n, "pads")) {
    begins.insert(begins.end(), ends.begin(), ends.end());
    set_attr(m, ints_attr("pads", begins));
  }
  convert_node(m);
  // Y: X's shape with each windowed dim's pooled length.
  const Shape y4 = g_.values[lookup(y + "/y_2d", "value")].shape;
  Shape y_shape = x;
  for (size_t i = 0; i < groups.size(); ++i)
    if (!groups[i].unit) y_shape[groups[i].dims[0] + 2] = y4[i + 2];
  convert_synthetic("Reshape", {y + "/y_2d", add_int64_const(y + "/shape", y_shape)}, y, name + "/shape");
}

// A window over all three spatial dims of (N, C, D, H, W) (MaxPool3d, AvgPool3d) in two 2-D pools: over (H, W)
// with D folded into the channels, then over D with H and W folded into one dim. A max over a box is the max over
// D of the maxima over (H, W); an average, the average over D of the averages over (H, W), each stage dividing by
// its own count (the padded window's with count_include_pad, the real elements' without: the box's count is the
// product), so the two stages give the 3-D pool; ceil_mode and pads apply per dim as in 3-D.
void Translator::convert_pool_3d(const onnx::NodeProto& n, const std::string& name, const Shape& x,
                                 const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads) {
  const std::string& y = n.output(0);
  const bool dilated = find_attr(n, "dilations") != nullptr;
  const auto stage = [&](const std::string& in, const std::string& out, const std::string& tag, size_t a, size_t b) {
    onnx::NodeProto m = n;
    m.set_name(name + tag);
    m.set_input(0, in);
    m.clear_output();
    m.add_output(out);
    const auto pick = [](const std::vector<int64_t>& v, size_t i, int64_t unit) { return i < 3 ? v[i] : unit; };
    set_attr(m, ints_attr("kernel_shape", {pick(kernel, a, 1), pick(kernel, b, 1)}));
    set_attr(m, ints_attr("strides", {pick(strides, a, 1), pick(strides, b, 1)}));
    if (dilated) set_attr(m, ints_attr("dilations", {pick(dilations, a, 1), pick(dilations, b, 1)}));
    if (find_attr(n, "pads")) {
      const auto begin = [&](size_t i) { return i < 3 ? pads[i] : 0; };
      const auto end = [&](size_t i) { return i < 3 ? pads[i + 3] : 0; };
      set_attr(m, ints_attr("pads", {begin(a), begin(b), end(a), end(b)}));
    }
    convert_node(m);
  };
  // (H, W) with D among the channels.
  convert_synthetic("Reshape", {n.input(0), add_int64_const(y + "/planes_shape", {x[0], x[1] * x[2], x[3], x[4]})},
                    y + "/planes", name + "/planes");
  stage(y + "/planes", y + "/pooled_hw", "/hw", 1, 2);
  const Shape hw = g_.values[lookup(y + "/pooled_hw", "value")].shape;  // (N, C D, oH, oW)
  // D, with (oH, oW) one dim the window leaves alone (index 3: kernel 1, stride 1, no pads).
  const std::string depth_shape = add_int64_const(y + "/depth_shape", {x[0], x[1], x[2], hw[2] * hw[3]});
  convert_synthetic("Reshape", {y + "/pooled_hw", depth_shape}, y + "/depth_rows", name + "/depth_rows");
  stage(y + "/depth_rows", y + "/pooled", "/d", 0, 3);
  const Shape d = g_.values[lookup(y + "/pooled", "value")].shape;  // (N, C, oD, oH oW)
  convert_synthetic("Reshape", {y + "/pooled", add_int64_const(y + "/shape", {x[0], x[1], d[2], hw[2], hw[3]})}, y,
                    name + "/shape");
}

}  // namespace monet::onnx_import
