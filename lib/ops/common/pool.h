// 2-D pooling geometry shared by MaxPool and AveragePool and their gradients: the ONNX attributes (kernel_shape,
// strides, pads, dilations, ceil_mode, auto_pad) resolved into explicit per-side pads and output sizes, with
// PyTorch's ceil_mode rule. Shape rules and kernels both call pool2d_geometry, so they can never disagree.
#pragma once

#include <algorithm>
#include <string>

#include "ops/op.h"

namespace monet::ops {

struct Pool2d {
  int64_t N = 0, C = 0, H = 0, W = 0;            // input (N, C, H, W)
  int64_t kH = 1, kW = 1;                        // kernel taps
  int64_t sH = 1, sW = 1;                        // strides
  int64_t dH = 1, dW = 1;                        // dilations (distance between taps)
  int64_t padT = 0, padL = 0, padB = 0, padR = 0;  // implicit padding per side
  int64_t OH = 0, OW = 0;                        // output (N, C, OH, OW)
  bool ceil_mode = false;
  Shape out_shape() const { return {N, C, OH, OW}; }
};

namespace pool_detail {

using monet::detail::concat;

// One spatial dimension: resolves auto_pad into (pad_begin, pad_end) and the output size; "" or an error message.
inline std::string pool_dim(const char* dim, int64_t in, int64_t k, int64_t s, int64_t d, const std::string& auto_pad,
                            bool ceil_mode, int64_t& pad_begin, int64_t& pad_end, int64_t& out) {
  const int64_t extent = (k - 1) * d + 1;  // span of one dilated window
  if (auto_pad == "VALID") {
    pad_begin = pad_end = 0;
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // ONNX: output = ceil(in / stride), the total padding split evenly, the odd one at the end (UPPER) or start.
    const int64_t want = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>(0, (want - 1) * s + extent - in);
    pad_begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pad_end = total - pad_begin;
  }
  const int64_t span = in + pad_begin + pad_end - extent;
  if (span < 0)
    return concat("window extent ", extent, " exceeds the padded ", dim, " size ", in + pad_begin + pad_end);
  // PyTorch's pooling_output_shape_pad_lr: with ceil_mode the last window must start inside the input or the
  // left padding, never entirely in the right padding.
  out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad_begin) --out;
  // Every window must read at least one real element (else max/average would be undefined).
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - pad_begin;
    bool any = false;
    for (int64_t t = 0; t < k && !any; ++t) any = start + t * d >= 0 && start + t * d < in;
    if (!any) return concat("window ", o, " along ", dim, " lies entirely in the padding");
  }
  return "";
}

}  // namespace pool_detail

// Resolves the pooling attributes for an input of shape x (rank 4). Returns "" on success or a message saying
// what is wrong. allow_dilations: MaxPool has them; AveragePool (opset 13) does not.
inline std::string pool2d_geometry(const Attrs& a, const Shape& x, bool allow_dilations, Pool2d& p) {
  using monet::detail::concat;
  if (x.size() != 4) return concat("expects a 4-D input (N, C, H, W), got shape ", shape_str(x));
  p.N = x[0], p.C = x[1], p.H = x[2], p.W = x[3];
  if (!a.has("kernel_shape")) return "attribute 'kernel_shape' is required";
  const std::vector<int64_t> k = a.ints("kernel_shape");
  const std::vector<int64_t> s = a.ints("strides", std::vector<int64_t>{1, 1});
  const std::vector<int64_t> d = a.ints("dilations", std::vector<int64_t>{1, 1});
  const std::vector<int64_t> pads = a.ints("pads", std::vector<int64_t>{0, 0, 0, 0});
  const int64_t ceil_mode = a.i("ceil_mode", 0);
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  if (k.size() != 2 || k[0] < 1 || k[1] < 1)
    return concat("kernel_shape must be 2 positive ints (2-D pooling only), got ", shape_str(k));
  if (s.size() != 2 || s[0] < 1 || s[1] < 1)
    return concat("strides must be 2 positive ints, got ", shape_str(s));
  if (d.size() != 2 || d[0] < 1 || d[1] < 1)
    return concat("dilations must be 2 positive ints, got ", shape_str(d));
  if (!allow_dilations && (d[0] != 1 || d[1] != 1)) return "dilations are not supported by this op";
  if (pads.size() != 4 || pads[0] < 0 || pads[1] < 0 || pads[2] < 0 || pads[3] < 0)
    return concat("pads must be 4 non-negative ints [top, left, bottom, right], got ", shape_str(pads));
  if (ceil_mode != 0 && ceil_mode != 1) return concat("ceil_mode must be 0 or 1, got ", ceil_mode);
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return concat("unknown auto_pad '", auto_pad, "'");
  if (auto_pad != "NOTSET" && (pads[0] || pads[1] || pads[2] || pads[3]))
    return concat("explicit pads cannot be combined with auto_pad ", auto_pad);
  p.kH = k[0], p.kW = k[1], p.sH = s[0], p.sW = s[1], p.dH = d[0], p.dW = d[1];
  p.padT = pads[0], p.padL = pads[1], p.padB = pads[2], p.padR = pads[3];
  p.ceil_mode = ceil_mode == 1;
  using pool_detail::pool_dim;
  std::string err = pool_dim("height", p.H, p.kH, p.sH, p.dH, auto_pad, p.ceil_mode, p.padT, p.padB, p.OH);
  if (err.empty()) err = pool_dim("width", p.W, p.kW, p.sW, p.dW, auto_pad, p.ceil_mode, p.padL, p.padR, p.OW);
  return err;
}

// MaxPool's argmax output: per output element, the tap (kh * kW + kw) of its window's maximum, packed in
// argmax_tap_bits bits (4 for windows of up to 16 taps, 8 up to 256, else 16), little-endian: with 4 bits output i
// is the low (even i) or high (odd i) nibble of byte i / 2; with 16 bits bytes 2 i and 2 i + 1. argmax_bytes is
// the tensor's size (its shape is [argmax_bytes]).
inline int argmax_tap_bits(int64_t taps) { return taps <= 16 ? 4 : taps <= 256 ? 8 : 16; }
inline int64_t argmax_bytes(const Pool2d& p) {
  return (p.N * p.C * p.OH * p.OW * argmax_tap_bits(p.kH * p.kW) + 7) / 8;
}

// Geometry inside a kernel: the shape rule already accepted these attributes.
inline Pool2d pool2d_checked(const Attrs& a, const Shape& x, bool allow_dilations) {
  Pool2d p;
  std::string err = pool2d_geometry(a, x, allow_dilations, p);
  MONET_CHECK(err.empty(), err);
  return p;
}

}  // namespace monet::ops
