// HardSigmoid: y = max(0, min(1, alpha * x + beta)), alpha = 0.2 and beta = 0.5 by default (torch's hardsigmoid
// exports as alpha = 1/6). Backward as PyTorch's hardsigmoid_backward: dx = alpha * dy strictly inside the linear
// part (0 < alpha * x + beta < 1), 0 at and beyond the kinks.
#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void infer_hard_sigmoid(InferCtx& c) {
  c.attrs().f("alpha", 0.2);  // a non-float attribute fails here, naming it
  c.attrs().f("beta", 0.5);
  infer_float_unary(c);
}

void backward_hard_sigmoid(GradBuilder& b) { backward_activation(b, "HardSigmoidGrad", b.in(0)); }

template <class T>
void hard_sigmoid_cpu(const CpuCall& c) {
  const T alpha = static_cast<T>(c.node.attrs.f("alpha", 0.2));
  const T beta = static_cast<T>(c.node.attrs.f("beta", 0.5));
  map1<T>(c, [=](T x) { return std::max(T(0), std::min(T(1), alpha * x + beta)); });
}

// HardSigmoidGrad(dy, x) with the forward's alpha, beta -> dx
void infer_hard_sigmoid_grad(InferCtx& c) {
  c.attrs().f("alpha", 0.2);
  c.attrs().f("beta", 0.5);
  infer_float_grad(c);
}

template <class T>
void hard_sigmoid_grad_cpu(const CpuCall& c) {
  const T alpha = static_cast<T>(c.node.attrs.f("alpha", 0.2));
  const T beta = static_cast<T>(c.node.attrs.f("beta", 0.5));
  map2<T>(c, [=](T dy, T x) {
    const T v = alpha * x + beta;
    return v > T(0) && v < T(1) ? dy * alpha : T(0);
  });
}

const OpDef hard_sigmoid = {.name = "HardSigmoid", .infer = infer_hard_sigmoid, .backward = backward_hard_sigmoid,
                            .cpu_f32 = hard_sigmoid_cpu<float>, .cpu_f64 = hard_sigmoid_cpu<double>};
const OpDef hard_sigmoid_grad = {.name = "HardSigmoidGrad", .infer = infer_hard_sigmoid_grad,
                                 .cpu_f32 = hard_sigmoid_grad_cpu<float>, .cpu_f64 = hard_sigmoid_grad_cpu<double>,
                                 .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> hard_sigmoid_ops;
const std::vector<const OpDef*> hard_sigmoid_ops = {&hard_sigmoid, &hard_sigmoid_grad};

}  // namespace monet::ops
