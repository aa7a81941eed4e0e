// GlobalAveragePool: (N, C, spatial...) -> (N, C, 1, ...), the mean over all spatial positions of each channel.
// Backward GlobalAveragePoolGrad(dY) -> dX = dY / S broadcast over the S spatial positions (attribute input_shape).
#include <algorithm>

#include "ops/op.h"

namespace monet::ops {
namespace {

void infer_global_average_pool(InferCtx& c) {
  c.expect_inputs(1, 1);
  c.expect_rank(0, 3, 64);
  Shape y = c.shape(0);
  std::fill(y.begin() + 2, y.end(), 1);
  c.set_out(0, y);
}

void backward_global_average_pool(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("input_shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("GlobalAveragePoolGrad", {b.grad_out(0)}, a));
}

template <class T>
void global_average_pool_cpu(const CpuCall& c) {
  const Shape& xs = *c.in[0].shape;
  const int64_t NC = xs[0] * xs[1];
  const int64_t S = c.in[0].numel() / NC;
  const T* x = c.in[0].as<T>();   // (N*C, S)
  T* y = c.out[0].as<T>();        // (N*C)
  for (int64_t i = 0; i < NC; ++i) {
    double sum = 0;
    for (int64_t s = 0; s < S; ++s) sum += x[i * S + s];
    y[i] = static_cast<T>(sum / static_cast<double>(S));
  }
}

// GlobalAveragePoolGrad(dY) -> dX with attribute input_shape.
void infer_global_average_pool_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape x = c.attrs().ints("input_shape");
  if (x.size() < 3) c.fail("input_shape ", shape_str(x), " must have rank >= 3");
  Shape y = x;
  std::fill(y.begin() + 2, y.end(), 1);
  if (c.shape(0) != y) c.fail("dY has shape ", shape_str(c.shape(0)), ", expected ", shape_str(y));
  c.set_out(0, x);
}

template <class T>
void global_average_pool_grad_cpu(const CpuCall& c) {
  const Shape& xs = *c.out[0].shape;
  const int64_t NC = xs[0] * xs[1];
  const int64_t S = c.out[0].numel() / NC;
  const T* dy = c.in[0].as<T>();  // (N*C)
  T* dx = c.out[0].as<T>();       // (N*C, S)
  for (int64_t i = 0; i < NC; ++i) {
    const T g = dy[i] / static_cast<T>(S);
    for (int64_t s = 0; s < S; ++s) dx[i * S + s] = g;
  }
}

const OpDef global_average_pool = {.name = "GlobalAveragePool", .infer = infer_global_average_pool,
                                   .backward = backward_global_average_pool,
                                   .cpu_f32 = global_average_pool_cpu<float>,
                                   .cpu_f64 = global_average_pool_cpu<double>};
const OpDef global_average_pool_grad = {.name = "GlobalAveragePoolGrad", .infer = infer_global_average_pool_grad,
                                        .cpu_f32 = global_average_pool_grad_cpu<float>,
                                        .cpu_f64 = global_average_pool_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> global_average_pool_ops;
const std::vector<const OpDef*> global_average_pool_ops = {&global_average_pool, &global_average_pool_grad};

}  // namespace monet::ops
