// Mul: c = a * b with numpy broadcasting. Gradient (PyTorch's mul backward): da = dc * b, db = dc * a, each summed
// to its input's shape inside MulGrad (no full-size product is materialised when the input was broadcast, e.g. the
// (N, C, 1, 1) gate of a squeeze-excitation block).
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void backward_mul(GradBuilder& b) {
  const int dc = b.grad_out(0);
  if (dc < 0) return;
  if (b.needs_grad(0)) b.set_grad(0, b.emit1("MulGrad", {dc, b.in(1)}, input_shape_attr(b, 0)));
  if (b.needs_grad(1)) b.set_grad(1, b.emit1("MulGrad", {dc, b.in(0)}, input_shape_attr(b, 1)));
}

template <class T>
void mul_cpu(const CpuCall& c) {
  broadcast_map2<T>(c, [](T a, T b) { return a * b; });
}

// MulGrad(dc, other) with attr shape -> dx = ReduceSumTo(dc * other, shape)
void infer_mul_grad(InferCtx& c) { infer_grad_sum_to(c, 1); }

template <class T>
void mul_grad_cpu(const CpuCall& c) {
  grad_sum_to<T, 1>(c, [](T dc, T other) { return dc * other; });
}

const OpDef mul = {.name = "Mul", .infer = infer_broadcast_binary, .backward = backward_mul,
                   .cpu_f32 = mul_cpu<float>, .cpu_f64 = mul_cpu<double>};
const OpDef mul_grad = {.name = "MulGrad", .infer = infer_mul_grad,
                        .cpu_f32 = mul_grad_cpu<float>, .cpu_f64 = mul_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> mul_ops;
const std::vector<const OpDef*> mul_ops = {&mul, &mul_grad};

}  // namespace monet::ops
