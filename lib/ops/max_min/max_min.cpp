// Max and Min of two float tensors with numpy broadcasting (torch.maximum, torch.minimum, clamp with tensor bounds;
// ONNX's variadic form is chained pairwise at import). A NaN in either operand gives NaN, as in torch. Gradients as
// PyTorch's maximum/minimum backward, each summed to its input's shape inside the gradient op (binary.h
// grad_sum_to): where a == b both operands take half of dY; otherwise the operand that is not the smaller (Max) or
// not the larger (Min) takes all of it, so a NaN pair gives both the whole dY, as torch's masks do.
//   MaxGradA(dY, A, B) -> a == b ? dY / 2 : (a < b ? 0 : dY)
//   MaxGradB(dY, A, B) -> a == b ? dY / 2 : (a > b ? 0 : dY)
//   MinGradA(dY, A, B) -> a == b ? dY / 2 : (a > b ? 0 : dY)
//   MinGradB(dY, A, B) -> a == b ? dY / 2 : (a < b ? 0 : dY)
#include <cmath>

#include "ops/common/binary.h"

namespace monet::ops {
namespace {

template <bool kMax>
void backward_max_min(GradBuilder& b) {
  const int dy = b.grad_out(0);
  if (dy < 0) return;
  const char* ga = kMax ? "MaxGradA" : "MinGradA";
  const char* gb = kMax ? "MaxGradB" : "MinGradB";
  if (b.needs_grad(0)) b.set_grad(0, b.emit1(ga, {dy, b.in(0), b.in(1)}, input_shape_attr(b, 0)));
  if (b.needs_grad(1)) b.set_grad(1, b.emit1(gb, {dy, b.in(0), b.in(1)}, input_shape_attr(b, 1)));
}

template <class T, bool kMax>
void max_min_cpu(const CpuCall& c) {
  broadcast_map2<T>(c, [](T a, T b) { return (kMax ? a > b : a < b) || std::isnan(a) ? a : b; });
}

// The gradient of operand A (kFirst) or B: half of dY on a tie, none where the operand loses, else all of it.
template <class T, bool kMax, bool kFirst>
void max_min_grad_cpu(const CpuCall& c) {
  grad_sum_to<T, 2>(c, [](T dy, T a, T b) {
    if (a == b) return dy / T(2);
    const bool loses = kMax == kFirst ? a < b : a > b;
    return loses ? T(0) : dy;
  });
}

void infer_grad(InferCtx& c) { infer_grad_sum_to(c, 2); }

const OpDef max_op = {.name = "Max", .infer = infer_broadcast_binary, .backward = backward_max_min<true>,
                      .cpu_f32 = max_min_cpu<float, true>, .cpu_f64 = max_min_cpu<double, true>};
const OpDef min_op = {.name = "Min", .infer = infer_broadcast_binary, .backward = backward_max_min<false>,
                      .cpu_f32 = max_min_cpu<float, false>, .cpu_f64 = max_min_cpu<double, false>};
const OpDef max_grad_a = {.name = "MaxGradA", .infer = infer_grad, .cpu_f32 = max_min_grad_cpu<float, true, true>,
                          .cpu_f64 = max_min_grad_cpu<double, true, true>};
const OpDef max_grad_b = {.name = "MaxGradB", .infer = infer_grad, .cpu_f32 = max_min_grad_cpu<float, true, false>,
                          .cpu_f64 = max_min_grad_cpu<double, true, false>};
const OpDef min_grad_a = {.name = "MinGradA", .infer = infer_grad, .cpu_f32 = max_min_grad_cpu<float, false, true>,
                          .cpu_f64 = max_min_grad_cpu<double, false, true>};
const OpDef min_grad_b = {.name = "MinGradB", .infer = infer_grad, .cpu_f32 = max_min_grad_cpu<float, false, false>,
                          .cpu_f64 = max_min_grad_cpu<double, false, false>};

}  // namespace

extern const std::vector<const OpDef*> max_min_ops;
const std::vector<const OpDef*> max_min_ops = {&max_op, &min_op, &max_grad_a, &max_grad_b, &min_grad_a, &min_grad_b};

}  // namespace monet::ops
