// Div: c = a / b with numpy broadcasting. Gradient as PyTorch writes it: da = dc / b, db = -dc * ((a / b) / b), each
// summed to its input's shape inside the gradient op. When b is a constant (x / 255) only b is kept for backward.
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void backward_div(GradBuilder& b) {
  const int dc = b.grad_out(0);
  if (dc < 0) return;
  if (b.needs_grad(0)) b.set_grad(0, b.emit1("DivGradA", {dc, b.in(1)}, input_shape_attr(b, 0)));
  if (b.needs_grad(1)) b.set_grad(1, b.emit1("DivGradB", {dc, b.in(0), b.in(1)}, input_shape_attr(b, 1)));
}

template <class T>
void div_cpu(const CpuCall& c) {
  broadcast_map2<T>(c, [](T a, T b) { return a / b; });
}

// DivGradA(dc, b) with attr shape -> da = ReduceSumTo(dc / b, shape)
void infer_div_grad_a(InferCtx& c) { infer_grad_sum_to(c, 1); }

template <class T>
void div_grad_a_cpu(const CpuCall& c) {
  grad_sum_to<T, 1>(c, [](T dc, T b) { return dc / b; });
}

// DivGradB(dc, a, b) with attr shape -> db = ReduceSumTo(-dc * ((a / b) / b), shape)
void infer_div_grad_b(InferCtx& c) { infer_grad_sum_to(c, 2); }

template <class T>
void div_grad_b_cpu(const CpuCall& c) {
  grad_sum_to<T, 2>(c, [](T dc, T a, T b) { return -dc * ((a / b) / b); });
}

const OpDef divide = {.name = "Div", .infer = infer_broadcast_binary, .backward = backward_div,
                      .cpu_f32 = div_cpu<float>, .cpu_f64 = div_cpu<double>};
const OpDef div_grad_a = {.name = "DivGradA", .infer = infer_div_grad_a,
                          .cpu_f32 = div_grad_a_cpu<float>, .cpu_f64 = div_grad_a_cpu<double>};
const OpDef div_grad_b = {.name = "DivGradB", .infer = infer_div_grad_b,
                          .cpu_f32 = div_grad_b_cpu<float>, .cpu_f64 = div_grad_b_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> div_ops;
const std::vector<const OpDef*> div_ops = {&divide, &div_grad_a, &div_grad_b};

}  // namespace monet::ops
