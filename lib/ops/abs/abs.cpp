// Abs: y = |x|. Backward from the input, as PyTorch's: dx = dy * sign(x), 0 at x = 0.
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_abs(GradBuilder& b) { backward_activation(b, "AbsGrad", b.in(0)); }

template <class T>
void abs_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::abs(x); });
}

template <class T>
void abs_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) { return x > T(0) ? dy : x < T(0) ? -dy : T(0); });
}

const OpDef abs_op = {.name = "Abs", .infer = infer_float_unary, .backward = backward_abs,
                      .cpu_f32 = abs_cpu<float>, .cpu_f64 = abs_cpu<double>};
const OpDef abs_grad = {.name = "AbsGrad", .infer = infer_float_grad,
                        .cpu_f32 = abs_grad_cpu<float>, .cpu_f64 = abs_grad_cpu<double>, .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> abs_ops;
const std::vector<const OpDef*> abs_ops = {&abs_op, &abs_grad};

}  // namespace monet::ops
