// Sqrt: y = sqrt(x). Backward is output-activated (PyTorch's sqrt backward): dx = dy / (2 y), so only y is kept.
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_sqrt(GradBuilder& b) { backward_activation(b, "SqrtGrad", b.out(0)); }

template <class T>
void sqrt_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::sqrt(x); });
}

// SqrtGrad(dy, y) -> dx
template <class T>
void sqrt_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T y) { return dy / (T(2) * y); });
}

const OpDef sqrt_op = {.name = "Sqrt", .infer = infer_float_unary, .backward = backward_sqrt,
                       .cpu_f32 = sqrt_cpu<float>, .cpu_f64 = sqrt_cpu<double>};
const OpDef sqrt_grad = {.name = "SqrtGrad", .infer = infer_float_grad,
                         .cpu_f32 = sqrt_grad_cpu<float>, .cpu_f64 = sqrt_grad_cpu<double>,
                         .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> sqrt_ops;
const std::vector<const OpDef*> sqrt_ops = {&sqrt_op, &sqrt_grad};

}  // namespace monet::ops
