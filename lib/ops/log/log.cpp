// Log: y = log(x) (natural). Backward is input-activated (PyTorch's log backward): dx = dy / x, so x is kept.
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_log(GradBuilder& b) { backward_activation(b, "LogGrad", b.in(0)); }

template <class T>
void log_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::log(x); });
}

// LogGrad(dy, x) -> dx
template <class T>
void log_grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) { return dy / x; });
}

const OpDef log_op = {.name = "Log", .infer = infer_float_unary, .backward = backward_log,
                      .cpu_f32 = log_cpu<float>, .cpu_f64 = log_cpu<double>};
const OpDef log_grad = {.name = "LogGrad", .infer = infer_float_grad,
                        .cpu_f32 = log_grad_cpu<float>, .cpu_f64 = log_grad_cpu<double>,
                        .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> log_ops;
const std::vector<const OpDef*> log_ops = {&log_op, &log_grad};

}  // namespace monet::ops
