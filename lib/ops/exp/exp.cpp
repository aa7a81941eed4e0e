// Exp: y = exp(x). Backward is output-activated (PyTorch's exp backward): dx = dy * y, so only y is kept.
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_exp(GradBuilder& b) { backward_activation(b, "ExpGrad", b.out(0)); }

template <class T>
void exp_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::exp(x); });
}

// ExpGrad(dy, y) -> dx
template <class T>
void exp_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T y) { return dy * y; });
}

const OpDef exp_op = {.name = "Exp", .infer = infer_float_unary, .backward = backward_exp,
                      .cpu_f32 = exp_cpu<float>, .cpu_f64 = exp_cpu<double>};
const OpDef exp_grad = {.name = "ExpGrad", .infer = infer_float_grad,
                        .cpu_f32 = exp_grad_cpu<float>, .cpu_f64 = exp_grad_cpu<double>,
                        .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> exp_ops;
const std::vector<const OpDef*> exp_ops = {&exp_op, &exp_grad};

}  // namespace monet::ops
