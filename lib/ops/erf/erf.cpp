// Erf: y = erf(x), the core of exact GELU (x/2 * (1 + erf(x / sqrt 2)) as torch exports it).
// Backward (PyTorch's erf backward): dx = dy * 2/sqrt(pi) * exp(-x^2), so x is kept.
#include <cmath>
#include <numbers>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_erf(GradBuilder& b) { backward_activation(b, "ErfGrad", b.in(0)); }

template <class T>
void erf_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::erf(x); });
}

// ErfGrad(dy, x) -> dx
template <class T>
void erf_grad_cpu(const CpuCall& c) {
  const T two_over_sqrt_pi = static_cast<T>(2.0 * std::numbers::inv_sqrtpi);
  map2<T>(c, [two_over_sqrt_pi](T dy, T x) { return dy * two_over_sqrt_pi * std::exp(-x * x); });
}

const OpDef erf_op = {.name = "Erf", .infer = infer_float_unary, .backward = backward_erf,
                      .cpu_f32 = erf_cpu<float>, .cpu_f64 = erf_cpu<double>};
const OpDef erf_grad = {.name = "ErfGrad", .infer = infer_float_grad,
                        .cpu_f32 = erf_grad_cpu<float>, .cpu_f64 = erf_grad_cpu<double>,
                        .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> erf_ops;
const std::vector<const OpDef*> erf_ops = {&erf_op, &erf_grad};

}  // namespace monet::ops
