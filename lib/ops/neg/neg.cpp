// Neg: y = -x (rotate_half's -x in rotary embeddings). Backward: dx = -dy, which is Neg again (no saved tensor).
#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_neg(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("Neg", {b.grad_out(0)}));
}

template <class T>
void neg_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return -x; });
}

const OpDef neg = {.name = "Neg", .infer = infer_float_unary, .backward = backward_neg,
                   .cpu_f32 = neg_cpu<float>, .cpu_f64 = neg_cpu<double>, .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> neg_ops;
const std::vector<const OpDef*> neg_ops = {&neg};

}  // namespace monet::ops
