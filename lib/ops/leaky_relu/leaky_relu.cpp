// LeakyRelu: y = x for x > 0, else alpha * x (alpha = 0.01 by default). Backward as PyTorch's leaky_relu_backward:
// dx = dy where the saved tensor is > 0, else alpha * dy. For alpha >= 0, y > 0 exactly where x > 0, so the
// gradient reads y (output-activated: the tensor the next layer keeps anyway, as Relu's default); for a negative
// alpha it reads x.
#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void infer_leaky_relu(InferCtx& c) {
  c.attrs().f("alpha", 0.01);  // a non-float attribute fails here, naming it
  infer_float_unary(c);
}

void backward_leaky_relu(GradBuilder& b) {
  const bool from_output = b.node().attrs.f("alpha", 0.01) >= 0;
  backward_activation(b, "LeakyReluGrad", from_output ? b.out(0) : b.in(0));
}

template <class T>
void leaky_relu_cpu(const CpuCall& c) {
  const T alpha = static_cast<T>(c.node.attrs.f("alpha", 0.01));
  map1<T>(c, [=](T x) { return x > T(0) ? x : alpha * x; });
}

// LeakyReluGrad(dy, s) with the forward's alpha -> dx; s is y (alpha >= 0) or x, positive at the same elements.
void infer_leaky_relu_grad(InferCtx& c) {
  c.attrs().f("alpha", 0.01);
  infer_float_grad(c);
}

template <class T>
void leaky_relu_grad_cpu(const CpuCall& c) {
  const T alpha = static_cast<T>(c.node.attrs.f("alpha", 0.01));
  map2<T>(c, [=](T dy, T s) { return s > T(0) ? dy : dy * alpha; });
}

const OpDef leaky_relu = {.name = "LeakyRelu", .infer = infer_leaky_relu, .backward = backward_leaky_relu,
                          .cpu_f32 = leaky_relu_cpu<float>, .cpu_f64 = leaky_relu_cpu<double>};
const OpDef leaky_relu_grad = {.name = "LeakyReluGrad", .infer = infer_leaky_relu_grad,
                               .cpu_f32 = leaky_relu_grad_cpu<float>, .cpu_f64 = leaky_relu_grad_cpu<double>,
                               .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> leaky_relu_ops;
const std::vector<const OpDef*> leaky_relu_ops = {&leaky_relu, &leaky_relu_grad};

}  // namespace monet::ops
