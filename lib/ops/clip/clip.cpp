// Clip: y = min(max(x, min), max). min and max are constant inputs (static, become one-element float attributes);
// an absent bound is -inf / +inf. Backward follows torch.clamp: dx = dy where min <= x <= max (inclusive), else 0.
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

void backward_clip(GradBuilder& b) { backward_activation(b, "ClipGrad", b.in(0)); }

template <class T>
void clip_cpu(const CpuCall& c) {
  const T lo = static_cast<T>(clip_bound(c.node.attrs, "min", -kInf));
  const T hi = static_cast<T>(clip_bound(c.node.attrs, "max", kInf));
  map1<T>(c, [=](T x) { return std::min(std::max(x, lo), hi); });
}

// ClipGrad(dy, x) with the bounds of the forward node -> dx
void infer_clip_grad(InferCtx& c) {
  check_bounds(c);
  infer_float_grad(c);
}

template <class T>
void clip_grad_cpu(const CpuCall& c) {
  const T lo = static_cast<T>(clip_bound(c.node.attrs, "min", -kInf));
  const T hi = static_cast<T>(clip_bound(c.node.attrs, "max", kInf));
  map2<T>(c, [=](T dy, T x) { return x >= lo && x <= hi ? dy : T(0); });
}

const OpDef clip = {.name = "Clip", .infer = infer_clip, .backward = backward_clip,
                    .cpu_f32 = clip_cpu<float>, .cpu_f64 = clip_cpu<double>,
                    .static_inputs = {"", "min", "max"}};
const OpDef clip_grad = {.name = "ClipGrad", .infer = infer_clip_grad,
                         .cpu_f32 = clip_grad_cpu<float>, .cpu_f64 = clip_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> clip_ops;
const std::vector<const OpDef*> clip_ops = {&clip, &clip_grad};

// For other backends (ops/common/plans.h).
std::pair<double, double> clip_bounds(const Attrs& a) {
  return {clip_bound(a, "min", -kInf), clip_bound(a, "max", kInf)};
}

}  // namespace monet::ops
