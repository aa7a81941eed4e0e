// Resize(x) on an (N, C, H, W) tensor, opset 13: static inputs roi, scales, sizes (attributes; an empty list or
// absence means "not given"; exactly one of scales / sizes), attributes mode = nearest | linear,
// coordinate_transformation_mode = half_pixel (default) | asymmetric | align_corners | pytorch_half_pixel |
// tf_half_pixel_for_nn, nearest_mode = round_prefer_floor (default) | round_prefer_ceil | floor | ceil. Opset 18's
// attribute axes (scales or sizes for those axes only) is read; antialias = 1 with linear and a
// keep_aspect_ratio_policy other than stretch are refused.
// N and C keep their size; H and W are resized. Each output pixel reads at most 2x2 input pixels with weights
// (nearest: one pixel, weight 1), computed once per axis. Backward: ResizeGrad(dy) -> dx adds each output
// gradient, times its weights, into the input pixels that output read.
//
// PyTorch: F.interpolate(mode='nearest') exports as asymmetric + floor and computes the source index as
// floorf(dst * float(1 / scale)) in float (with shortcuts for equal and doubled sizes); that combination is
// reproduced bit for bit so that indices agree at exact boundaries. Bilinear exports as pytorch_half_pixel or
// align_corners; PyTorch clamps negative source coordinates to 0 and reads the last pixel twice at the far edge,
// which the clamped 2-tap weights below match.
#include <algorithm>
#include <cmath>

#include "ops/op.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// Along one spatial axis: output index o reads input i0[o] with weight w0[o] and i1[o] with weight w1[o].
struct AxisTaps {
  std::vector<int64_t> i0, i1;
  std::vector<double> w0, w1;
};

struct ResizePlan {
  Shape out;          // (N, C, OH, OW)
  bool linear = false;
  AxisTaps h, w;
};

// The list attribute `name` as doubles, empty when absent.
std::vector<double> list_attr(const Attrs& a, const std::string& name) {
  return a.has(name) ? a.floats(name) : std::vector<double>{};
}

// x_original for output index o of an axis resized from `in` to `out` with scale `scale` (ONNX formulas).
double source_coord(const std::string& ctm, int64_t o, int64_t in, int64_t out, double scale) {
  const double x = static_cast<double>(o);
  if (ctm == "asymmetric") return x / scale;
  if (ctm == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  if (ctm == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (ctm == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

// Taps of one axis. from_sizes: the output size was given (PyTorch's scale is then in / out, not 1 / scale).
void axis_taps(const std::string& mode, const std::string& ctm, const std::string& nearest_mode, int64_t in,
               int64_t out, double scale, bool from_sizes, AxisTaps& t) {
  t.i0.resize(out);
  t.i1.resize(out);
  t.w0.resize(out);
  t.w1.resize(out);
  const float torch_scale = from_sizes ? static_cast<float>(in) / static_cast<float>(out)
                                       : static_cast<float>(1.0 / scale);
  for (int64_t o = 0; o < out; ++o) {
    if (mode == "nearest") {
      int64_t i;
      if (ctm == "asymmetric" && nearest_mode == "floor") {  // PyTorch's nearest_idx, in its float arithmetic
        if (out == in) i = o;
        else if (out == 2 * in) i = o >> 1;
        else i = static_cast<int64_t>(std::floor(static_cast<float>(o) * torch_scale));
      } else {
        const double x = source_coord(ctm, o, in, out, scale);
        const double f = std::floor(x);
        if (nearest_mode == "floor") i = static_cast<int64_t>(f);
        else if (nearest_mode == "ceil") i = static_cast<int64_t>(std::ceil(x));
        else if (x - f == 0.5) i = static_cast<int64_t>(nearest_mode == "round_prefer_ceil" ? f + 1 : f);
        else i = static_cast<int64_t>(x - f < 0.5 ? f : f + 1);
      }
      t.i0[o] = t.i1[o] = std::clamp<int64_t>(i, 0, in - 1);
      t.w0[o] = 1.0;
      t.w1[o] = 0.0;
    } else {  // linear: the two neighbours of the clamped source coordinate
      const double x = std::max(0.0, source_coord(ctm, o, in, out, scale));
      const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(x), in - 1);
      const double l1 = std::min(1.0, x - static_cast<double>(i0));
      t.i0[o] = i0;
      t.i1[o] = std::min<int64_t>(i0 + 1, in - 1);
      t.w0[o] = 1.0 - l1;
      t.w1[o] = l1;
    }
  }
}

// Validates the attributes against x's shape and computes the taps; an error message or "".
std::string plan_resize(const Attrs& a, const Shape& xs, ResizePlan& p) {
  if (xs.size() != 4) return "only 4-D (N, C, H, W) inputs are supported, got " + shape_str(xs);
  const std::string mode = a.s("mode", "nearest");
  const std::string ctm = a.s("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = a.s("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear") return "mode '" + mode + "' is not supported (nearest, linear)";
  if (ctm != "half_pixel" && ctm != "asymmetric" && ctm != "align_corners" && ctm != "pytorch_half_pixel" &&
      ctm != "tf_half_pixel_for_nn")
    return "coordinate_transformation_mode '" + ctm + "' is not supported";
  if (nearest_mode != "round_prefer_floor" && nearest_mode != "round_prefer_ceil" && nearest_mode != "floor" &&
      nearest_mode != "ceil")
    return "nearest_mode '" + nearest_mode + "' is not supported";
  p.linear = mode == "linear";
  // Opset 18: antialiasing (a wider filter where linear downscales) is not built; keep_aspect_ratio_policy other
  // than stretch rescales sizes, not built either.
  if (p.linear && a.i("antialias", 0) != 0) return "antialias = 1 with mode linear is not supported";
  const std::string policy = a.s("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") return "keep_aspect_ratio_policy '" + policy + "' is not supported (stretch)";
  std::vector<double> scales = list_attr(a, "scales");
  // Taps are planned per output row and column (here, at import): an output side beyond 2^24 is refused before
  // anything is sized by it, and before a double beyond int64 is converted (UB).
  constexpr double kMaxSide = 1 << 24;
  std::vector<int64_t> sizes;  // an empty float tensor may arrive as a float list
  for (double d : list_attr(a, "sizes")) {
    if (!(std::fabs(d) <= kMaxSide)) return "sizes has " + std::to_string(d) + ", beyond 2^24";
    sizes.push_back(static_cast<int64_t>(d));
  }
  if (scales.empty() == sizes.empty()) return "exactly one of scales and sizes must be given (as constants)";
  if (a.has("axes")) {
    // Opset 18: scales or sizes name only these axes; the others keep their length.
    const std::vector<int64_t> axes = a.ints("axes");
    const size_t given = scales.empty() ? sizes.size() : scales.size();
    if (axes.size() != given)
      return "axes has " + std::to_string(axes.size()) + " entries for " + std::to_string(given) + " scales or sizes";
    std::vector<double> full_scales(4, 1.0);
    std::vector<int64_t> full_sizes(xs.begin(), xs.end());
    std::vector<bool> seen(4, false);
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t d = axes[k] < 0 ? axes[k] + 4 : axes[k];
      if (d < 0 || d >= 4 || seen[static_cast<size_t>(d)])
        return "axes " + shape_str(axes) + " are not distinct axes of rank 4";
      seen[static_cast<size_t>(d)] = true;
      if (scales.empty()) full_sizes[static_cast<size_t>(d)] = sizes[k];
      else full_scales[static_cast<size_t>(d)] = scales[k];
    }
    if (scales.empty()) sizes = full_sizes;
    else scales = full_scales;
  }
  std::vector<double> scale(4);
  p.out.resize(4);
  if (!scales.empty()) {
    if (scales.size() != 4) return "scales has " + std::to_string(scales.size()) + " entries for rank 4";
    for (size_t d = 0; d < 4; ++d) {
      if (!(scales[d] > 0)) return "scales must be positive, got " + std::to_string(scales[d]);
      scale[d] = scales[d];
      const double side = std::floor(static_cast<double>(xs[d]) * scales[d]);
      if (!(side <= kMaxSide))
        return "scales[" + std::to_string(d) + "] = " + std::to_string(scales[d]) + " makes a side of " +
               std::to_string(side) + ", beyond 2^24";
      p.out[d] = static_cast<int64_t>(side);
    }
  } else {
    if (sizes.size() != 4) return "sizes has " + std::to_string(sizes.size()) + " entries for rank 4";
    for (size_t d = 0; d < 4; ++d) {
      p.out[d] = sizes[d];
      scale[d] = static_cast<double>(sizes[d]) / static_cast<double>(xs[d]);
    }
  }
  if (p.out[0] != xs[0] || p.out[1] != xs[1])
    return "only H and W can be resized; output would be " + shape_str(p.out) + " for input " + shape_str(xs);
  if (p.out[2] <= 0 || p.out[3] <= 0) return "output would be " + shape_str(p.out);
  axis_taps(mode, ctm, nearest_mode, xs[2], p.out[2], scale[2], scales.empty(), p.h);
  axis_taps(mode, ctm, nearest_mode, xs[3], p.out[3], scale[3], scales.empty(), p.w);
  return "";
}

void infer_resize(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.in(0).dtype != DType::f32) c.fail("only float tensors are supported, got ", dtype_name(c.in(0).dtype));
  ResizePlan p;
  if (std::string err = plan_resize(c.attrs(), c.shape(0), p); !err.empty()) c.fail(err);
  c.set_out(0, p.out);
}

void backward_resize(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("ResizeGrad", {b.grad_out(0)}, a));
}

template <class T>
void resize_cpu(const CpuCall& c) {
  const Shape& xs = *c.in[0].shape;
  ResizePlan p;
  MONET_CHECK(plan_resize(c.node.attrs, xs, p).empty());
  const int64_t planes = xs[0] * xs[1], H = xs[2], W = xs[3], OH = p.out[2], OW = p.out[3];
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* x = c.in[0].as<T>() + nc * H * W;      // (H, W)
    T* y = c.out[0].as<T>() + nc * OH * OW;         // (OH, OW)
    for (int64_t oh = 0; oh < OH; ++oh) {
      const T* r0 = x + p.h.i0[oh] * W;              // (W) upper input row
      const T* r1 = x + p.h.i1[oh] * W;              // (W) lower input row
      T* yr = y + oh * OW;
      if (!p.linear) {
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = r0[p.w.i0[ow]];
        continue;
      }
      const double a0 = p.h.w0[oh], a1 = p.h.w1[oh];
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t j0 = p.w.i0[ow], j1 = p.w.i1[ow];
        const double b0 = p.w.w0[ow], b1 = p.w.w1[ow];
        yr[ow] = static_cast<T>(a0 * (b0 * r0[j0] + b1 * r0[j1]) + a1 * (b0 * r1[j0] + b1 * r1[j1]));
      }
    }
  }
}

// ResizeGrad(dy) with Resize's attributes and shape = x's shape.
void infer_resize_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape xs = c.attrs().ints("shape");
  ResizePlan p;
  if (std::string err = plan_resize(c.attrs(), xs, p); !err.empty()) c.fail(err);
  if (p.out != c.shape(0)) c.fail("dy has shape ", shape_str(c.shape(0)), ", resizing ", shape_str(xs), " gives ", shape_str(p.out));
  c.set_out(0, xs);
}

template <class T>
void resize_grad_cpu(const CpuCall& c) {
  const Shape& xs = *c.out[0].shape;
  ResizePlan p;
  MONET_CHECK(plan_resize(c.node.attrs, xs, p).empty());
  const int64_t planes = xs[0] * xs[1], H = xs[2], W = xs[3], OH = p.out[2], OW = p.out[3];
  std::fill(c.out[0].as<T>(), c.out[0].as<T>() + c.out[0].numel(), T(0));
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* dy = c.in[0].as<T>() + nc * OH * OW;   // (OH, OW)
    T* dx = c.out[0].as<T>() + nc * H * W;          // (H, W)
    for (int64_t oh = 0; oh < OH; ++oh) {
      T* r0 = dx + p.h.i0[oh] * W;
      T* r1 = dx + p.h.i1[oh] * W;
      const T* g = dy + oh * OW;
      if (!p.linear) {
        for (int64_t ow = 0; ow < OW; ++ow) r0[p.w.i0[ow]] += g[ow];
        continue;
      }
      const double a0 = p.h.w0[oh], a1 = p.h.w1[oh];
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t j0 = p.w.i0[ow], j1 = p.w.i1[ow];
        const double b0 = p.w.w0[ow], b1 = p.w.w1[ow], gv = g[ow];
        r0[j0] += static_cast<T>(a0 * b0 * gv);
        r0[j1] += static_cast<T>(a0 * b1 * gv);
        r1[j0] += static_cast<T>(a1 * b0 * gv);
        r1[j1] += static_cast<T>(a1 * b1 * gv);
      }
    }
  }
}

const OpDef resize = {.name = "Resize", .infer = infer_resize, .backward = backward_resize,
                      .cpu_f32 = resize_cpu<float>, .cpu_f64 = resize_cpu<double>,
                      .static_inputs = {"", "roi", "scales", "sizes"}};
const OpDef resize_grad = {.name = "ResizeGrad", .infer = infer_resize_grad,
                           .cpu_f32 = resize_grad_cpu<float>, .cpu_f64 = resize_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> resize_ops;
const std::vector<const OpDef*> resize_ops = {&resize, &resize_grad};

// For other backends (ops/common/plans.h).
ResizeSpec resize_spec(const Attrs& a, const Shape& x) {
  ResizePlan p;
  const std::string err = plan_resize(a, x, p);
  MONET_CHECK(err.empty(), err);
  return {p.out, p.linear, p.h.i0, p.h.i1, p.w.i0, p.w.i1, p.h.w0, p.h.w1, p.w.w0, p.w.w1};
}

}  // namespace monet::ops
