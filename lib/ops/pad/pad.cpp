// Pad(x) with opset 13 static inputs pads (attribute "pads": [b_0, ..., b_{r-1}, e_0, ..., e_{r-1}]) and
// constant_value (attribute "constant_value", default 0), attribute mode = constant | reflect | edge.
// Axis d of y has length b_d + x.shape[d] + e_d; negative pads crop. Cropping comes first, then padding reads the
// cropped tensor (reflect mirrors around its first/last element without repeating it, edge repeats them).
// Backward: PadGrad(dy) -> dx adds each dy element into the x element it was read from (several for
// reflect/edge; the constant border reads nothing).
#include <algorithm>
#include <cstdlib>

#include "ops/op.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

enum class PadMode { constant, reflect, edge };

// The constant as a scalar or a one-element list (how the importer delivers a static input); 0 when absent.
double pad_constant(const Attrs& a) {
  if (!a.has("constant_value")) return a.f("value", 0.0);  // opset < 11 spelled it "value"
  if (std::holds_alternative<double>(a.all().at("constant_value")) ||
      std::holds_alternative<int64_t>(a.all().at("constant_value")))
    return a.f("constant_value");
  std::vector<double> v = a.floats("constant_value");
  return v.empty() ? 0.0 : v[0];
}

// For every axis, src[d][o] = the x index that y index o reads, or -1 for the constant border.
struct PadPlan {
  PadMode mode = PadMode::constant;
  Shape out;
  std::vector<std::vector<int64_t>> src;
};

std::string plan_pad(const Attrs& a, const Shape& xs, PadPlan& p) {
  const size_t rank = xs.size();
  const std::string mode = a.s("mode", "constant");
  if (mode == "constant") p.mode = PadMode::constant;
  else if (mode == "reflect") p.mode = PadMode::reflect;
  else if (mode == "edge") p.mode = PadMode::edge;
  else return "mode '" + mode + "' is not supported (constant, reflect, edge)";
  if (!a.has("pads")) return "pads must be constant (attribute 'pads')";
  if (a.has("axes")) return "the axes input (opset 18) is not supported";
  const std::vector<int64_t> pads = a.ints("pads");
  if (pads.size() != 2 * rank) return "pads has " + std::to_string(pads.size()) + " entries for rank " + std::to_string(rank);
  p.out.resize(rank);
  p.src.assign(rank, {});
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = pads[d], e = pads[d + rank], n = xs[d];
    // Each output position is planned here: an axis beyond 2^24 is refused before anything is sized by it (and
    // before b + n + e could overflow).
    constexpr int64_t kMaxSide = int64_t{1} << 24;
    if (std::abs(b) > kMaxSide || std::abs(e) > kMaxSide || n + b + e > kMaxSide)
      return "pads " + shape_str(pads) + " make axis " + std::to_string(d) + " longer than 2^24";
    p.out[d] = b + n + e;
    if (p.out[d] <= 0) return "pads " + shape_str(pads) + " leave nothing of axis " + std::to_string(d);
    const int64_t lo = std::max<int64_t>(0, -b), hi = n - std::max<int64_t>(0, -e);  // the kept range of x
    if (hi <= lo && p.mode != PadMode::constant) return "pads " + shape_str(pads) + " crop away axis " + std::to_string(d);
    if (p.mode == PadMode::reflect && std::max(b, e) >= hi - lo)
      return "reflect pads " + shape_str(pads) + " must be smaller than axis " + std::to_string(d) + " (length " +
             std::to_string(hi - lo) + " after cropping)";
    std::vector<int64_t>& src = p.src[d];
    src.resize(p.out[d]);
    for (int64_t o = 0; o < p.out[d]; ++o) {
      int64_t i = o - b;  // x index before border handling
      if (i < lo || i >= hi) {
        switch (p.mode) {
          case PadMode::constant: i = -1; break;
          case PadMode::edge: i = std::clamp(i, lo, hi - 1); break;
          case PadMode::reflect: i = i < lo ? 2 * lo - i : 2 * (hi - 1) - i; break;
        }
      }
      src[o] = i;
    }
  }
  return "";
}

void infer_pad(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.in(0).dtype != DType::f32) c.fail("only float tensors are supported, got ", dtype_name(c.in(0).dtype));
  PadPlan p;
  if (std::string err = plan_pad(c.attrs(), c.shape(0), p); !err.empty()) c.fail(err);
  c.set_out(0, p.out);
}

void backward_pad(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("PadGrad", {b.grad_out(0)}, a));
}

// Calls f(x_offset or -1, y_offset) for every element of y, in y's order.
template <class F>
void for_each_padded(const Shape& xs, const PadPlan& p, F f) {
  const size_t rank = xs.size();
  if (rank == 0) {
    f(0, 0);
    return;
  }
  std::vector<int64_t> stride(rank, 1);  // x strides
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * xs[d + 1];
  const int64_t inner = p.out[rank - 1];
  const std::vector<int64_t>& src_inner = p.src[rank - 1];
  const int64_t n = numel(p.out);
  std::vector<int64_t> idx(rank, 0);     // odometer over the outer axes of y
  for (int64_t row = 0; row < n; row += inner) {
    int64_t base = 0;                    // x offset of the row, -1 if it lies in a constant border
    for (size_t d = 0; d + 1 < rank && base >= 0; ++d)
      base = p.src[d][idx[d]] < 0 ? -1 : base + p.src[d][idx[d]] * stride[d];
    for (int64_t j = 0; j < inner; ++j) f(base < 0 || src_inner[j] < 0 ? -1 : base + src_inner[j], row + j);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < p.out[d]) break;
      idx[d] = 0;
    }
  }
}

template <class T>
void pad_cpu(const CpuCall& c) {
  PadPlan p;
  MONET_CHECK(plan_pad(c.node.attrs, *c.in[0].shape, p).empty());
  const T value = static_cast<T>(pad_constant(c.node.attrs));
  const T* x = c.in[0].as<T>();  // (x shape)
  T* y = c.out[0].as<T>();       // (x shape + pads)
  for_each_padded(*c.in[0].shape, p, [&](int64_t xo, int64_t yo) { y[yo] = xo < 0 ? value : x[xo]; });
}

// PadGrad(dy) with Pad's attributes and shape = x's shape.
void infer_pad_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape xs = c.attrs().ints("shape");
  PadPlan p;
  if (std::string err = plan_pad(c.attrs(), xs, p); !err.empty()) c.fail(err);
  if (p.out != c.shape(0)) c.fail("dy has shape ", shape_str(c.shape(0)), ", padding ", shape_str(xs), " gives ", shape_str(p.out));
  c.set_out(0, xs);
}

template <class T>
void pad_grad_cpu(const CpuCall& c) {
  PadPlan p;
  MONET_CHECK(plan_pad(c.node.attrs, *c.out[0].shape, p).empty());
  const T* dy = c.in[0].as<T>();  // (x shape + pads)
  T* dx = c.out[0].as<T>();       // (x shape)
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for_each_padded(*c.out[0].shape, p, [&](int64_t xo, int64_t yo) {
    if (xo >= 0) dx[xo] += dy[yo];
  });
}

const OpDef pad = {.name = "Pad", .infer = infer_pad, .backward = backward_pad,
                   .cpu_f32 = pad_cpu<float>, .cpu_f64 = pad_cpu<double>,
                   .static_inputs = {"", "pads", "constant_value"}};
const OpDef pad_grad = {.name = "PadGrad", .infer = infer_pad_grad,
                        .cpu_f32 = pad_grad_cpu<float>, .cpu_f64 = pad_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> pad_ops;
const std::vector<const OpDef*> pad_ops = {&pad, &pad_grad};

// For other backends (ops/common/plans.h).
PadSpec pad_spec(const Attrs& a, const Shape& x) {
  PadPlan p;
  const std::string err = plan_pad(a, x, p);
  MONET_CHECK(err.empty(), err);
  return {p.out, p.src, pad_constant(a)};
}

}  // namespace monet::ops
