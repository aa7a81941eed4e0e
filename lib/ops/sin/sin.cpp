// Sin: y = sin(x) (rotary and sinusoidal position embeddings). Backward is input-activated: dx = dy * cos(x).
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_sin(GradBuilder& b) { backward_activation(b, "SinGrad", b.in(0)); }

template <class T>
void sin_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::sin(x); });
}

// SinGrad(dy, x) -> dx
template <class T>
void sin_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) { return dy * std::cos(x); });
}

const OpDef sin_op = {.name = "Sin", .infer = infer_float_unary, .backward = backward_sin,
                      .cpu_f32 = sin_cpu<float>, .cpu_f64 = sin_cpu<double>};
const OpDef sin_grad = {.name = "SinGrad", .infer = infer_float_grad,
                        .cpu_f32 = sin_grad_cpu<float>, .cpu_f64 = sin_grad_cpu<double>,
                        .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> sin_ops;
const std::vector<const OpDef*> sin_ops = {&sin_op, &sin_grad};

}  // namespace monet::ops
