// Cos: y = cos(x) (rotary and sinusoidal position embeddings). Backward is input-activated: dx = -dy * sin(x).
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_cos(GradBuilder& b) { backward_activation(b, "CosGrad", b.in(0)); }

template <class T>
void cos_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::cos(x); });
}

// CosGrad(dy, x) -> dx
template <class T>
void cos_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) { return -dy * std::sin(x); });
}

const OpDef cos_op = {.name = "Cos", .infer = infer_float_unary, .backward = backward_cos,
                      .cpu_f32 = cos_cpu<float>, .cpu_f64 = cos_cpu<double>};
const OpDef cos_grad = {.name = "CosGrad", .infer = infer_float_grad,
                        .cpu_f32 = cos_grad_cpu<float>, .cpu_f64 = cos_grad_cpu<double>,
                        .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> cos_ops;
const std::vector<const OpDef*> cos_ops = {&cos_op, &cos_grad};

}  // namespace monet::ops
