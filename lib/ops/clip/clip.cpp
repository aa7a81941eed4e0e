// Clip: y = min(max(x, min), max). min and max are constant inputs (static, become one-element float attributes);
// an absent bound is -inf / +inf. ClipGrad(dy, x, y) has two implementations: input-activated (the default, reads
// x) follows torch.clamp: dx = dy where min <= x <= max (inclusive), else 0; output-activated (reads y, the
// tensor the next layer keeps) follows torch's hardtanh/relu6 backward: dx = dy where min < y < max (exclusive).
// They differ only where x lies exactly on a bound.
// (min > max gives y = max everywhere and dx = 0, as ONNX and torch.clamp define it.)
#include <limits>

#include "ops/common/unary.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// Value of bound `name`: a one-element float list (the importer's form of a constant input), a plain number
// (opset < 11 attribute), or `dflt` when absent. Sets *bad when the attribute is none of these.
double clip_bound(const Attrs& a, const std::string& name, double dflt, bool* bad = nullptr) {
  if (!a.has(name)) return dflt;
  const AttrValue& v = a.all().at(name);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* ds = std::get_if<std::vector<double>>(&v); ds && ds->size() == 1) return (*ds)[0];
  if (auto* is = std::get_if<std::vector<int64_t>>(&v); is && is->size() == 1) return static_cast<double>((*is)[0]);
  if (bad) *bad = true;
  return dflt;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// Clip and ClipGrad share the bound checks; ClipGrad carries the forward node's attributes.
void check_bounds(const InferCtx& c) {
  for (const char* name : {"min", "max"}) {
    bool bad = false;
    clip_bound(c.attrs(), name, 0, &bad);
    if (bad) c.fail("bound '", name, "' must be a single number (a one-element constant input)");
  }
}

void infer_clip(InferCtx& c) {
  check_bounds(c);
  infer_float_unary(c);
}

void backward_clip(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("ClipGrad", {b.grad_out(0), b.in(0), b.out(0)}, b.node().attrs));
}

template <class T>
void clip_cpu(const CpuCall& c) {
  const T lo = static_cast<T>(clip_bound(c.node.attrs, "min", -kInf));
  const T hi = static_cast<T>(clip_bound(c.node.attrs, "max", kInf));
  map1<T>(c, [=](T x) { return std::min(std::max(x, lo), hi); });
}

// ClipGrad(dy, x, y) with the bounds of the forward node -> dx
void infer_clip_grad(InferCtx& c) {
  check_bounds(c);
  c.expect_inputs(3, 3);
  expect_float_inputs(c);
  infer_like_input0(c);
}

template <class T>
void clip_grad_cpu(const CpuCall& c) {
  const T lo = static_cast<T>(clip_bound(c.node.attrs, "min", -kInf));
  const T hi = static_cast<T>(clip_bound(c.node.attrs, "max", kInf));
  const T* dy = c.in[0].as<T>();  // (n)
  T* dx = c.out[0].as<T>();       // (n)
  const int64_t n = c.in[0].numel();
  if (c.impl == 0) {
    const T* x = c.in[1].as<T>();  // (n)
    for (int64_t i = 0; i < n; ++i) dx[i] = x[i] >= lo && x[i] <= hi ? dy[i] : T(0);
  } else {
    const T* y = c.in[2].as<T>();  // (n)
    for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > lo && y[i] < hi ? dy[i] : T(0);
  }
}

const OpDef clip = {.name = "Clip", .infer = infer_clip, .backward = backward_clip,
                    .cpu_f32 = clip_cpu<float>, .cpu_f64 = clip_cpu<double>,
                    .static_inputs = {"", "min", "max"}, .in_place = {0}};
const OpDef clip_grad = {.name = "ClipGrad", .infer = infer_clip_grad,
                         .cpu_f32 = clip_grad_cpu<float>, .cpu_f64 = clip_grad_cpu<double>,
                         .impls = {{"input", 0b011}, {"output", 0b101}}, .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> clip_ops;
const std::vector<const OpDef*> clip_ops = {&clip, &clip_grad};

// For other backends (ops/common/plans.h).
std::pair<double, double> clip_bounds(const Attrs& a) {
  return {clip_bound(a, "min", -kInf), clip_bound(a, "max", kInf)};
}

}  // namespace monet::ops
