// Sigmoid: y = 1 / (1 + exp(-x)). Backward is output-activated (PyTorch's sigmoid_backward): dx = dy * (1 - y) * y,
// so only y is kept.
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_sigmoid(GradBuilder& b) { backward_activation(b, "SigmoidGrad", b.out(0)); }

template <class T>
void sigmoid_cpu(const CpuCall& c) {
  // exp(-x) overflowing to inf for very negative x still gives 1 / inf = 0.
  map1<T>(c, [](T x) { return T(1) / (T(1) + std::exp(-x)); });
}

// SigmoidGrad(dy, y) -> dx
template <class T>
void sigmoid_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T y) { return dy * (T(1) - y) * y; });
}

const OpDef sigmoid = {.name = "Sigmoid", .infer = infer_float_unary, .backward = backward_sigmoid,
                       .cpu_f32 = sigmoid_cpu<float>, .cpu_f64 = sigmoid_cpu<double>};
const OpDef sigmoid_grad = {.name = "SigmoidGrad", .infer = infer_float_grad,
                            .cpu_f32 = sigmoid_grad_cpu<float>, .cpu_f64 = sigmoid_grad_cpu<double>,
                            .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> sigmoid_ops;
const std::vector<const OpDef*> sigmoid_ops = {&sigmoid, &sigmoid_grad};

}  // namespace monet::ops
