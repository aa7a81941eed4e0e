// HardSwish: y = x * hardsigmoid(x) with alpha = 1/6, beta = 1/2, computed as PyTorch does:
// x * min(max(x + 3, 0), 6) / 6. Backward is PyTorch's hardswish_backward (as of torch 1.13, the reference here):
// dx = 0 for x < -3, dy * (x / 3 + 0.5) for -3 <= x <= 3, dy for x > 3. (Later PyTorch releases moved the
// boundary points to the outer branches: 0 at x = -3, dy at x = 3.)
#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_hard_swish(GradBuilder& b) { backward_activation(b, "HardSwishGrad", b.in(0)); }

template <class T>
void hard_swish_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6); });
}

// HardSwishGrad(dy, x) -> dx
template <class T>
void hard_swish_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) {
    if (x < T(-3)) return T(0);
    if (x <= T(3)) return dy * (x / T(3) + T(0.5));
    return dy;
  });
}

const OpDef hard_swish = {.name = "HardSwish", .infer = infer_float_unary, .backward = backward_hard_swish,
                          .cpu_f32 = hard_swish_cpu<float>, .cpu_f64 = hard_swish_cpu<double>};
const OpDef hard_swish_grad = {.name = "HardSwishGrad", .infer = infer_float_grad,
                               .cpu_f32 = hard_swish_grad_cpu<float>, .cpu_f64 = hard_swish_grad_cpu<double>,
                               .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> hard_swish_ops;
const std::vector<const OpDef*> hard_swish_ops = {&hard_swish, &hard_swish_grad};

}  // namespace monet::ops
