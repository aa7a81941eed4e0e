// Elu and Selu: y = gamma * x for x > 0, else gamma * alpha * (exp(x) - 1). Elu has gamma = 1 and alpha = 1 by
// default; Selu's defaults are ONNX's (alpha 1.67326319..., gamma 1.05070102..., the float values of torch's
// constants). Backward as PyTorch's elu_backward from the input: dx = gamma * dy for x > 0, else
// gamma * alpha * exp(x) * dy (x = 0 takes the second branch, as torch). Both emit EluGrad(dy, x) with alpha and gamma
// set (plans.h elu_scale).
#include <cmath>

#include "ops/common/plans.h"
#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void infer_elu(InferCtx& c) {
  c.attrs().f("alpha", 1.0);  // a non-float attribute fails here, naming it
  c.attrs().f("gamma", 1.0);
  infer_float_unary(c);
}

void backward_elu(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  const EluScale s = elu_scale(b.node());
  Attrs a;
  a.set("alpha", s.alpha);
  a.set("gamma", s.gamma);
  b.set_grad(0, b.emit1("EluGrad", {b.grad_out(0), b.in(0)}, a));
}

template <class T>
void elu_cpu(const CpuCall& c) {
  const EluScale s = elu_scale(c.node);
  const T alpha = static_cast<T>(s.alpha), gamma = static_cast<T>(s.gamma);
  map1<T>(c, [=](T x) { return x > T(0) ? gamma * x : gamma * alpha * std::expm1(x); });
}

template <class T>
void elu_grad_cpu(const CpuCall& c) {
  const EluScale s = elu_scale(c.node);
  const T alpha = static_cast<T>(s.alpha), gamma = static_cast<T>(s.gamma);
  map2<T>(c, [=](T dy, T x) { return x > T(0) ? dy * gamma : dy * gamma * alpha * std::exp(x); });
}

const OpDef elu = {.name = "Elu", .infer = infer_elu, .backward = backward_elu,
                   .cpu_f32 = elu_cpu<float>, .cpu_f64 = elu_cpu<double>};
const OpDef selu = {.name = "Selu", .infer = infer_elu, .backward = backward_elu,
                    .cpu_f32 = elu_cpu<float>, .cpu_f64 = elu_cpu<double>};
const OpDef elu_grad = {.name = "EluGrad", .infer = [](InferCtx& c) {
                          c.attrs().f("alpha", 1.0);
                          c.attrs().f("gamma", 1.0);
                          infer_float_grad(c);
                        },
                        .cpu_f32 = elu_grad_cpu<float>, .cpu_f64 = elu_grad_cpu<double>, .in_place = {0}};

}  // namespace

EluScale elu_scale(const Node& n) {
  if (n.op == "Selu")
    return {n.attrs.f("alpha", 1.67326319217681884765625), n.attrs.f("gamma", 1.05070102214813232421875)};
  return {n.attrs.f("alpha", 1.0), n.attrs.f("gamma", 1.0)};  // Elu (no gamma attribute in ONNX) and EluGrad
}

extern const std::vector<const OpDef*> elu_ops;
const std::vector<const OpDef*> elu_ops = {&elu, &selu, &elu_grad};

}  // namespace monet::ops
