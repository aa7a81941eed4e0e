// Expand(x) with the constant target shape as static input "shape": y = x broadcast, numpy-style, against that
// shape (ONNX broadcasts both ways, so the target may hold 1s where x is larger; torch's x.expand(n, -1, -1)
// exports as such a shape). Any dtype: it moves elements (an integer attention mask expanded before its Cast, as
// Hugging Face's models write it). Backward (floats): dx = ReduceSumTo(dy) to x's shape.
#include <cstring>

#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void infer_expand(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (!c.attrs().has("shape")) c.fail("the target shape must be constant (attribute 'shape')");
  const Shape target = c.attrs().ints("shape");
  auto out = broadcast_shapes(c.shape(0), target);
  if (!out) c.fail("input ", shape_str(c.shape(0)), " does not broadcast with shape ", shape_str(target));
  c.set_out(0, *out, c.in(0).dtype);
}

void backward_expand(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, sum_to_input(b, 0, b.grad_out(0)));
}

template <class T>
void expand_cpu(const CpuCall& c) {
  const int64_t esize = element_bytes(c.in[0].dtype, sizeof(T));
  const char* x = static_cast<const char*>(c.in[0].data);  // (x shape)
  char* y = static_cast<char*>(c.out[0].data);             // (broadcast shape)
  for_each_broadcast<1>(*c.out[0].shape, {c.in[0].shape}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    std::memcpy(y + i * esize, x + o[0] * esize, static_cast<size_t>(esize));
  });
}

const OpDef expand = {.name = "Expand", .infer = infer_expand, .backward = backward_expand,
                      .cpu_f32 = expand_cpu<float>, .cpu_f64 = expand_cpu<double>, .static_inputs = {"", "shape"}};

}  // namespace

extern const std::vector<const OpDef*> expand_ops;
const std::vector<const OpDef*> expand_ops = {&expand};

}  // namespace monet::ops
