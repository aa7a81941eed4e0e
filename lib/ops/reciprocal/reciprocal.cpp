// Reciprocal: y = 1 / x. Backward is output-activated (PyTorch's reciprocal backward): dx = -dy * y * y, so only
// y is kept.
#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_reciprocal(GradBuilder& b) { backward_activation(b, "ReciprocalGrad", b.out(0)); }

template <class T>
void reciprocal_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return T(1) / x; });
}

// ReciprocalGrad(dy, y) -> dx
template <class T>
void reciprocal_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T y) { return -dy * (y * y); });
}

const OpDef reciprocal = {.name = "Reciprocal", .infer = infer_float_unary, .backward = backward_reciprocal,
                          .cpu_f32 = reciprocal_cpu<float>, .cpu_f64 = reciprocal_cpu<double>};
const OpDef reciprocal_grad = {.name = "ReciprocalGrad", .infer = infer_float_grad,
                               .cpu_f32 = reciprocal_grad_cpu<float>, .cpu_f64 = reciprocal_grad_cpu<double>,
                               .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> reciprocal_ops;
const std::vector<const OpDef*> reciprocal_ops = {&reciprocal, &reciprocal_grad};

}  // namespace monet::ops
