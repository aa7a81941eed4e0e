// Tanh: y = tanh(x). Backward is output-activated (PyTorch's tanh_backward): dx = dy * (1 - y * y).
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_tanh(GradBuilder& b) { backward_activation(b, "TanhGrad", b.out(0)); }

template <class T>
void tanh_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::tanh(x); });
}

// TanhGrad(dy, y) -> dx
template <class T>
void tanh_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T y) { return dy * (T(1) - y * y); });
}

const OpDef tanh_op = {.name = "Tanh", .infer = infer_float_unary, .backward = backward_tanh,
                       .cpu_f32 = tanh_cpu<float>, .cpu_f64 = tanh_cpu<double>};
const OpDef tanh_grad = {.name = "TanhGrad", .infer = infer_float_grad,
                         .cpu_f32 = tanh_grad_cpu<float>, .cpu_f64 = tanh_grad_cpu<double>,
                         .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> tanh_ops;
const std::vector<const OpDef*> tanh_ops = {&tanh_op, &tanh_grad};

}  // namespace monet::ops
