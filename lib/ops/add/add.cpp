// Add: c = a + b with numpy broadcasting. Gradient: dc summed to each input's shape (ReduceSumTo where broadcast).
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void backward_add(GradBuilder& b) {
  if (b.grad_out(0) < 0) return;
  for (int i = 0; i < 2; ++i)
    if (b.needs_grad(i)) b.set_grad(i, sum_to_input(b, i, b.grad_out(0)));
}

template <class T>
void add_cpu(const CpuCall& c) {
  broadcast_map2<T>(c, [](T a, T b) { return a + b; });
}

const OpDef add = {.name = "Add", .infer = infer_broadcast_binary, .backward = backward_add,
                   .cpu_f32 = add_cpu<float>, .cpu_f64 = add_cpu<double>, .in_place = {0, 1}};

}  // namespace

extern const std::vector<const OpDef*> add_ops;
const std::vector<const OpDef*> add_ops = {&add};

}  // namespace monet::ops
