// Softmax (opset 13): y = exp(x - max) / sum(exp(x - max)) along one axis (default -1). Backward is
// output-activated: SoftmaxGrad(dY, Y) -> dX = Y * (dY - sum(dY * Y)) along the same axis, so only Y is kept.
// LogSoftmax (opset 13): y = (x - max) - log(sum(exp(x - max))); LogSoftmaxGrad(dY, Y) -> dX = dY - exp(Y) * sum(dY),
// also from Y alone (PyTorch's _log_softmax_backward_data).
#include <algorithm>
#include <cmath>

#include "ops/common/elementwise.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

void check_axis(InferCtx& c) {
  const int64_t r = static_cast<int64_t>(c.shape(0).size());
  const int64_t axis = c.attrs().i("axis", -1);
  if (r == 0) c.fail("expects an input of rank >= 1");
  if (axis < -r || axis >= r) c.fail("axis ", axis, " is out of range for input shape ", shape_str(c.shape(0)));
}

void infer_softmax(InferCtx& c) {
  c.expect_inputs(1, 1);
  check_axis(c);
  infer_like_input0(c);
}

template <bool kLog>
void backward_softmax(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("axis", b.node().attrs.i("axis", -1));
  b.set_grad(0, b.emit1(kLog ? "LogSoftmaxGrad" : "SoftmaxGrad", {b.grad_out(0), b.out(0)}, a));
}

template <class T, bool kLog>
void softmax_cpu(const CpuCall& c) {
  const AxisSplit s = softmax_split(*c.in[0].shape, c.node.attrs.i("axis", -1));
  const T* x = c.in[0].as<T>();  // (outer, A, inner)
  T* y = c.out[0].as<T>();       // (outer, A, inner)
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const T* xr = x + o * s.A * s.inner + i;  // one softmax row, stride inner
      T* yr = y + o * s.A * s.inner + i;
      T maxval = xr[0];
      for (int64_t a = 1; a < s.A; ++a) maxval = std::max(maxval, xr[a * s.inner]);
      double sum = 0;
      for (int64_t a = 0; a < s.A; ++a) {
        yr[a * s.inner] = std::exp(xr[a * s.inner] - maxval);
        sum += yr[a * s.inner];
      }
      if constexpr (kLog) {
        const T log_sum = static_cast<T>(std::log(sum));
        for (int64_t a = 0; a < s.A; ++a) yr[a * s.inner] = (xr[a * s.inner] - maxval) - log_sum;
      } else {
        const T inv_sum = static_cast<T>(1.0 / sum);
        for (int64_t a = 0; a < s.A; ++a) yr[a * s.inner] *= inv_sum;
      }
    }
}

// SoftmaxGrad(dY, Y) -> dX with attribute axis.
void infer_softmax_grad(InferCtx& c) {
  c.expect_inputs(2, 2);
  check_axis(c);
  infer_like_input0(c);
}

template <class T, bool kLog>
void softmax_grad_cpu(const CpuCall& c) {
  const AxisSplit s = softmax_split(*c.in[0].shape, c.node.attrs.i("axis", -1));
  const T* dy = c.in[0].as<T>();  // (outer, A, inner)
  const T* y = c.in[1].as<T>();   // (outer, A, inner)
  T* dx = c.out[0].as<T>();       // (outer, A, inner)
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.A * s.inner + i;
      double dot = 0;  // sum over the axis of dY * Y (LogSoftmax: of dY)
      for (int64_t a = 0; a < s.A; ++a) dot += dy[base + a * s.inner] * (kLog ? T(1) : y[base + a * s.inner]);
      for (int64_t a = 0; a < s.A; ++a) {
        const int64_t k = base + a * s.inner;
        if constexpr (kLog) dx[k] = dy[k] - std::exp(y[k]) * static_cast<T>(dot);
        else dx[k] = y[k] * (dy[k] - static_cast<T>(dot));
      }
    }
}

const OpDef softmax = {.name = "Softmax", .infer = infer_softmax, .backward = backward_softmax<false>,
                       .cpu_f32 = softmax_cpu<float, false>, .cpu_f64 = softmax_cpu<double, false>};
const OpDef softmax_grad = {.name = "SoftmaxGrad", .infer = infer_softmax_grad,
                            .cpu_f32 = softmax_grad_cpu<float, false>, .cpu_f64 = softmax_grad_cpu<double, false>};
const OpDef log_softmax = {.name = "LogSoftmax", .infer = infer_softmax, .backward = backward_softmax<true>,
                           .cpu_f32 = softmax_cpu<float, true>, .cpu_f64 = softmax_cpu<double, true>};
const OpDef log_softmax_grad = {.name = "LogSoftmaxGrad", .infer = infer_softmax_grad,
                                .cpu_f32 = softmax_grad_cpu<float, true>, .cpu_f64 = softmax_grad_cpu<double, true>};

}  // namespace

// For other backends (ops/common/plans.h).
AxisSplit softmax_split(const Shape& x, int64_t axis) {
  const int64_t r = static_cast<int64_t>(x.size());
  const int64_t a = axis < 0 ? axis + r : axis;
  AxisSplit s;
  for (int64_t d = 0; d < r; ++d) {
    if (d < a) s.outer *= x[d];
    else if (d == a) s.A = x[d];
    else s.inner *= x[d];
  }
  return s;
}

extern const std::vector<const OpDef*> softmax_ops;
const std::vector<const OpDef*> softmax_ops = {&softmax, &softmax_grad, &log_softmax, &log_softmax_grad};

}  // namespace monet::ops
