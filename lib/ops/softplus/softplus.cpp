// Softplus: y = log(1 + exp(x)), and Mish (opset 18): y = x * tanh(softplus(x)). Softplus is computed without
// overflow as max(x, 0) + log1p(exp(-|x|)). Backward from the input x, as PyTorch's softplus_backward (beta 1) and
// mish_backward: SoftplusGrad dx = dy * sigmoid(x); MishGrad dx = dy * (t + x * sigmoid(x) * (1 - t * t)) with
// t = tanh(softplus(x)). (torch's softplus passes x through above its threshold 20, where exp(-x) < 2.1e-9 of it;
// ONNX's Softplus has no threshold.)
#include <algorithm>
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

template <class T>
T softplus_of(T x) {
  return std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x)));
}

template <class T>
T sigmoid_of(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

void backward_softplus(GradBuilder& b) { backward_activation(b, "SoftplusGrad", b.in(0)); }
void backward_mish(GradBuilder& b) { backward_activation(b, "MishGrad", b.in(0)); }

template <class T>
void softplus_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return softplus_of(x); });
}

template <class T>
void softplus_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) { return dy * sigmoid_of(x); });
}

template <class T>
void mish_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return x * std::tanh(softplus_of(x)); });
}

template <class T>
void mish_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) {
    const T t = std::tanh(softplus_of(x));
    return dy * (t + x * sigmoid_of(x) * (T(1) - t * t));
  });
}

const OpDef softplus = {.name = "Softplus", .infer = infer_float_unary, .backward = backward_softplus,
                        .cpu_f32 = softplus_cpu<float>, .cpu_f64 = softplus_cpu<double>};
const OpDef softplus_grad = {.name = "SoftplusGrad", .infer = infer_float_grad,
                             .cpu_f32 = softplus_grad_cpu<float>, .cpu_f64 = softplus_grad_cpu<double>,
                             .in_place = {0}};
const OpDef mish = {.name = "Mish", .infer = infer_float_unary, .backward = backward_mish,
                    .cpu_f32 = mish_cpu<float>, .cpu_f64 = mish_cpu<double>};
const OpDef mish_grad = {.name = "MishGrad", .infer = infer_float_grad,
                         .cpu_f32 = mish_grad_cpu<float>, .cpu_f64 = mish_grad_cpu<double>, .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> softplus_ops;
const std::vector<const OpDef*> softplus_ops = {&softplus, &softplus_grad, &mish, &mish_grad};

}  // namespace monet::ops
