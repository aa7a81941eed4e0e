// Relu: y = max(x, 0). ReluGrad(dy, y, x) -> dx has two implementations that give identical results (y > 0
// exactly where x > 0): output-activated (the default, reads y: the tensor the next layer keeps anyway) and
// input-activated (reads x). The planner picks per run which saved tensor backward needs.
#include "ops/common/elementwise.h"

namespace monet::ops {
namespace {

void infer_relu(InferCtx& c) {
  c.expect_inputs(1, 1);
  infer_like_input0(c);
}

void backward_relu(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("ReluGrad", {b.grad_out(0), b.out(0), b.in(0)}));
}

template <class T>
void relu_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return x > T(0) ? x : T(0); });
}

// ReluGrad(dy, y, x) -> dx = dy where y > 0 (impl "output") or where x > 0 (impl "input").
template <class T>
void relu_grad_cpu(const CpuCall& c) {
  const T* dy = c.in[0].as<T>();                        // (n)
  const T* saved = c.in[c.impl == 0 ? 1 : 2].as<T>();   // y or x (n)
  T* dx = c.out[0].as<T>();                             // (n)
  const int64_t n = c.in[0].numel();
  for (int64_t i = 0; i < n; ++i) dx[i] = saved[i] > T(0) ? dy[i] : T(0);
}

const OpDef relu = {.name = "Relu", .infer = infer_relu, .backward = backward_relu,
                    .cpu_f32 = relu_cpu<float>, .cpu_f64 = relu_cpu<double>};
const OpDef relu_grad = {.name = "ReluGrad", .infer = infer_like_input0,
                         .cpu_f32 = relu_grad_cpu<float>, .cpu_f64 = relu_grad_cpu<double>,
                         .impls = {{"output", 0b011}, {"input", 0b101}}};

}  // namespace

extern const std::vector<const OpDef*> relu_ops;
const std::vector<const OpDef*> relu_ops = {&relu, &relu_grad};

}  // namespace monet::ops
