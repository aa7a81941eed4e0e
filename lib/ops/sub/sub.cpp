// Sub: c = a - b with numpy broadcasting. Gradient: da = dc summed to a's shape; db = -(dc summed to b's shape),
// negated inside the reduction by SubGradB so no negated full-size copy exists.
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void backward_sub(GradBuilder& b) {
  const int dc = b.grad_out(0);
  if (dc < 0) return;
  if (b.needs_grad(0)) b.set_grad(0, sum_to_input(b, 0, dc));
  if (b.needs_grad(1)) b.set_grad(1, b.emit1("SubGradB", {dc}, input_shape_attr(b, 1)));
}

template <class T>
void sub_cpu(const CpuCall& c) {
  broadcast_map2<T>(c, [](T a, T b) { return a - b; });
}

// SubGradB(dc) with attr shape -> db = -ReduceSumTo(dc, shape)
void infer_sub_grad_b(InferCtx& c) { infer_grad_sum_to(c, 0); }

template <class T>
void sub_grad_b_cpu(const CpuCall& c) {
  grad_sum_to<T, 0>(c, [](T dc) { return -dc; });
}

const OpDef sub = {.name = "Sub", .infer = infer_broadcast_binary, .backward = backward_sub,
                   .cpu_f32 = sub_cpu<float>, .cpu_f64 = sub_cpu<double>};
const OpDef sub_grad_b = {.name = "SubGradB", .infer = infer_sub_grad_b,
                          .cpu_f32 = sub_grad_b_cpu<float>, .cpu_f64 = sub_grad_b_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> sub_ops;
const std::vector<const OpDef*> sub_ops = {&sub, &sub_grad_b};

}  // namespace monet::ops
