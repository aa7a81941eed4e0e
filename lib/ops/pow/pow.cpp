// Pow(x, p) with a constant scalar exponent p (static input "exponent"; LayerNorm's decomposition squares with
// p = 2): y = x^p. Backward (PyTorch's pow_backward): dx = dy * p * x^(p-1), so x is kept.
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void infer_pow(InferCtx& c) {
  c.expect_inputs(1, 1);
  expect_float_inputs(c);
  if (!c.attrs().has("exponent")) c.fail("the exponent must be a constant (attribute 'exponent')");
  const std::vector<double> p = c.attrs().floats("exponent");
  if (p.size() != 1) c.fail("the exponent must be a scalar, got ", p.size(), " values");
  infer_like_input0(c);
}

double exponent_of(const Node& node) { return node.attrs.floats("exponent")[0]; }

void backward_pow(GradBuilder& b) { backward_activation(b, "PowGrad", b.in(0)); }

template <class T>
void pow_cpu(const CpuCall& c) {
  const T p = static_cast<T>(exponent_of(c.node));
  if (p == T(2)) map1<T>(c, [](T x) { return x * x; });  // exact, as torch computes x^2
  else map1<T>(c, [p](T x) { return std::pow(x, p); });
}

// PowGrad(dy, x) -> dx
template <class T>
void pow_grad_cpu(const CpuCall& c) {
  const T p = static_cast<T>(exponent_of(c.node));
  map2<T>(c, [p](T dy, T x) { return dy * p * std::pow(x, p - T(1)); });
}

const OpDef pow_op = {.name = "Pow", .infer = infer_pow, .backward = backward_pow,
                      .cpu_f32 = pow_cpu<float>, .cpu_f64 = pow_cpu<double>, .static_inputs = {"", "exponent"}};
const OpDef pow_grad = {.name = "PowGrad", .infer = infer_float_grad,
                        .cpu_f32 = pow_grad_cpu<float>, .cpu_f64 = pow_grad_cpu<double>,
                        .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> pow_ops;
const std::vector<const OpDef*> pow_ops = {&pow_op, &pow_grad};

}  // namespace monet::ops
