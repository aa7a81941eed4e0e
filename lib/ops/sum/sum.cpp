// Sum: y = x0 + x1 + ... (same shapes). Autodiff uses it to accumulate gradient contributions.
#include "ops/common/elementwise.h"

namespace monet::ops {
namespace {

void infer_sum(InferCtx& c) {
  if (c.num_inputs() < 1) c.fail("expects at least one input");
  infer_like_input0(c);
}

void backward_sum(GradBuilder& b) {
  if (b.grad_out(0) < 0) return;
  for (int i = 0; i < static_cast<int>(b.node().inputs.size()); ++i)
    if (b.needs_grad(i)) b.set_grad(i, b.grad_out(0));
}

template <class T>
void sum_cpu(const CpuCall& c) {
  T* y = c.out[0].as<T>();  // (n)
  const int64_t n = c.out[0].numel();
  // y may be x0 or x1 (in place): both are read in the first pass, before any element of y is written.
  const T* x0 = c.in[0].as<T>();
  const T* x1 = c.in.size() > 1 ? c.in[1].as<T>() : nullptr;
  for (int64_t i = 0; i < n; ++i) y[i] = x1 ? x0[i] + x1[i] : x0[i];
  for (size_t k = 2; k < c.in.size(); ++k) {
    const T* xk = c.in[k].as<T>();
    for (int64_t i = 0; i < n; ++i) y[i] += xk[i];
  }
}

const OpDef sum = {.name = "Sum", .infer = infer_sum, .backward = backward_sum,
                   .cpu_f32 = sum_cpu<float>, .cpu_f64 = sum_cpu<double>, .in_place = {0, 1}};

}  // namespace

extern const std::vector<const OpDef*> sum_ops;
const std::vector<const OpDef*> sum_ops = {&sum};

}  // namespace monet::ops
