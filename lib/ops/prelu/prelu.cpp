// PRelu: y = x for x > 0, else slope * x, the slope broadcasting to X (unidirectionally: torch's nn.PReLU exports
// a slope of shape (C, 1, 1), or (1)). Gradients as PyTorch's prelu backward, each summed to its input's shape
// inside the gradient op (binary.h grad_sum_to): PReluGradX(dY, X, slope) -> dX = x > 0 ? dY : slope * dY, and
// PReluGradSlope(dY, X) -> dslope = ReduceSumTo(x > 0 ? 0 : dY * x) (x = 0 takes the slope's branch, as torch).
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void infer_prelu(InferCtx& c) {
  infer_broadcast_binary(c);
  if (c.shape(0) != broadcast_shapes(c.shape(0), c.shape(1)))
    c.fail("slope of shape ", shape_str(c.shape(1)), " does not broadcast to X of shape ", shape_str(c.shape(0)));
}

void backward_prelu(GradBuilder& b) {
  const int dy = b.grad_out(0);
  if (dy < 0) return;
  if (b.needs_grad(0)) b.set_grad(0, b.emit1("PReluGradX", {dy, b.in(0), b.in(1)}, input_shape_attr(b, 0)));
  if (b.needs_grad(1)) b.set_grad(1, b.emit1("PReluGradSlope", {dy, b.in(0)}, input_shape_attr(b, 1)));
}

template <class T>
void prelu_cpu(const CpuCall& c) {
  broadcast_map2<T>(c, [](T x, T s) { return x > T(0) ? x : s * x; });
}

template <class T>
void prelu_grad_x_cpu(const CpuCall& c) {
  grad_sum_to<T, 2>(c, [](T dy, T x, T s) { return x > T(0) ? dy : s * dy; });
}

template <class T>
void prelu_grad_slope_cpu(const CpuCall& c) {
  grad_sum_to<T, 1>(c, [](T dy, T x) { return x > T(0) ? T(0) : dy * x; });
}

const OpDef prelu = {.name = "PRelu", .infer = infer_prelu, .backward = backward_prelu,
                     .cpu_f32 = prelu_cpu<float>, .cpu_f64 = prelu_cpu<double>};
const OpDef prelu_grad_x = {.name = "PReluGradX", .infer = [](InferCtx& c) { infer_grad_sum_to(c, 2); },
                            .cpu_f32 = prelu_grad_x_cpu<float>, .cpu_f64 = prelu_grad_x_cpu<double>};
const OpDef prelu_grad_slope = {.name = "PReluGradSlope", .infer = [](InferCtx& c) { infer_grad_sum_to(c, 1); },
                                .cpu_f32 = prelu_grad_slope_cpu<float>, .cpu_f64 = prelu_grad_slope_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> prelu_ops;
const std::vector<const OpDef*> prelu_ops = {&prelu, &prelu_grad_x, &prelu_grad_slope};

}  // namespace monet::ops
