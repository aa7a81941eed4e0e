// Relu: y = max(x, 0). Backward is output-activated: dx = dy * (y > 0), so only y is kept.
#include "ops/common/elementwise.h"

namespace monet::ops {
namespace {

void infer_relu(InferCtx& c) {
  c.expect_inputs(1, 1);
  infer_like_input0(c);
}

void backward_relu(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("ReluGrad", {b.grad_out(0), b.out(0)}));
}

template <class T>
void relu_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return x > T(0) ? x : T(0); });
}

// ReluGrad(dy, y) -> dx
template <class T>
void relu_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T y) { return y > T(0) ? dy : T(0); });
}

const OpDef relu = {.name = "Relu", .infer = infer_relu, .backward = backward_relu,
                    .cpu_f32 = relu_cpu<float>, .cpu_f64 = relu_cpu<double>};
const OpDef relu_grad = {.name = "ReluGrad", .infer = infer_like_input0,
                         .cpu_f32 = relu_grad_cpu<float>, .cpu_f64 = relu_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> relu_ops;
const std::vector<const OpDef*> relu_ops = {&relu, &relu_grad};

}  // namespace monet::ops
