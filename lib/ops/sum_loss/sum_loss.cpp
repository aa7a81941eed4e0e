// SumLoss(x) -> loss () = sum of every element of x (MONeT's examples train on this). Gradient: dloss everywhere.
#include "ops/op.h"

namespace monet::ops {
namespace {

void infer_sum_loss(InferCtx& c) {
  c.expect_inputs(1, 1);
  c.set_out(0, {});
}

void backward_sum_loss(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("SumLossGrad", {b.grad_out(0)}, a));
}

template <class T>
void sum_loss_cpu(const CpuCall& c) {
  const T* x = c.in[0].as<T>();  // (n)
  double total = 0;
  for (int64_t i = 0, n = c.in[0].numel(); i < n; ++i) total += x[i];
  c.out[0].as<T>()[0] = static_cast<T>(total);
}

void infer_sum_loss_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  c.set_out(0, c.attrs().ints("shape"));
}

// SumLossGrad(dloss ()) -> dx filled with dloss
template <class T>
void sum_loss_grad_cpu(const CpuCall& c) {
  const T d = c.in[0].as<T>()[0];
  T* dx = c.out[0].as<T>();  // (shape)
  std::fill(dx, dx + c.out[0].numel(), d);
}

const OpDef sum_loss = {.name = "SumLoss", .infer = infer_sum_loss, .backward = backward_sum_loss,
                        .cpu_f32 = sum_loss_cpu<float>, .cpu_f64 = sum_loss_cpu<double>};
const OpDef sum_loss_grad = {.name = "SumLossGrad", .infer = infer_sum_loss_grad,
                             .cpu_f32 = sum_loss_grad_cpu<float>, .cpu_f64 = sum_loss_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> sum_loss_ops;
const std::vector<const OpDef*> sum_loss_ops = {&sum_loss, &sum_loss_grad};

}  // namespace monet::ops
