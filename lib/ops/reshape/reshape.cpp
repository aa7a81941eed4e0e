// Reshape(x) with the opset 13 static input shape (attribute "shape") and allowzero: same elements, new shape.
// In shape, 0 copies x's dim at that position (unless allowzero = 1) and one -1 is inferred from the element count.
// ReshapeGrad(x) with a plain, fully specified attribute shape is the backward of Reshape and Flatten (and of itself).
// Both copy the data, or do nothing in place (OpDef::view); the copy moves bytes, so every dtype works.
#include <cstring>

#include "ops/common/view.h"

namespace monet::ops {
namespace {

void infer_reshape(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (!c.attrs().has("shape")) c.fail("shape must be constant (attribute 'shape')");
  const Shape& xs = c.shape(0);
  const std::vector<int64_t> spec = c.attrs().ints("shape");
  const bool allowzero = c.attrs().i("allowzero", 0) != 0;
  Shape out(spec.size());
  int infer_at = -1;
  int64_t known = 1;  // product of the dims other than the -1
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == -1) {
      if (infer_at >= 0) c.fail("shape ", shape_str(spec), " has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d == 0 && !allowzero) {
      if (i >= xs.size()) c.fail("shape ", shape_str(spec), " copies dim ", i, " of an input of rank ", xs.size());
      d = xs[i];
    }
    if (d <= 0) c.fail("shape ", shape_str(spec), " has dim ", d);
    out[i] = d;
    // Checked: a spec like [1073741822, 171798691839] must not wrap around to the input's element count.
    if (__builtin_mul_overflow(known, d, &known))
      c.fail("cannot reshape ", shape_str(xs), " to ", shape_str(spec), ": more elements than int64 can count");
  }
  const int64_t n = numel(xs);
  if (infer_at >= 0) {
    if (n % known != 0) c.fail("cannot reshape ", shape_str(xs), " to ", shape_str(spec));
    out[infer_at] = n / known;
  }
  if (numel(out) != n) c.fail("cannot reshape ", shape_str(xs), " (", n, " elements) to ", shape_str(out));
  c.set_out(0, out, c.in(0).dtype);
}

void infer_reshape_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape out = c.attrs().ints("shape");
  if (numel(out) != numel(c.shape(0))) c.fail("cannot reshape ", shape_str(c.shape(0)), " to ", shape_str(out));
  c.set_out(0, out, c.in(0).dtype);
}

const OpDef reshape = {.name = "Reshape", .infer = infer_reshape, .backward = backward_as_reshape,
                       .cpu_f32 = copy_cpu<float>, .cpu_f64 = copy_cpu<double>, .static_inputs = {"", "shape"},
                       .in_place = {0}, .view = true};
const OpDef reshape_grad = {.name = "ReshapeGrad", .infer = infer_reshape_grad, .backward = backward_as_reshape,
                          .cpu_f32 = copy_cpu<float>, .cpu_f64 = copy_cpu<double>, .in_place = {0}, .view = true};

}  // namespace

extern const std::vector<const OpDef*> reshape_ops;
const std::vector<const OpDef*> reshape_ops = {&reshape, &reshape_grad};

}  // namespace monet::ops
