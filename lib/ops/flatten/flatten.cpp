// Flatten(x) with attribute axis (default 1, negative counts from the end): y has shape
// (prod(x.shape[:axis]), prod(x.shape[axis:])), same elements. Backward: ReshapeGrad (lib/ops/reshape) back to x's
// shape. Copies the data for now (aliasing comes later); the copy moves bytes, so every dtype works.
#include <cstring>

#include "ops/common/view.h"

namespace monet::ops {
namespace {

void infer_flatten(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape& xs = c.shape(0);
  const int64_t rank = static_cast<int64_t>(xs.size());
  int64_t axis = c.attrs().i("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) c.fail("axis ", c.attrs().i("axis", 1), " out of range for rank ", rank);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= xs[d];
  c.set_out(0, {outer, inner}, c.in(0).dtype);
}

const OpDef flatten = {.name = "Flatten", .infer = infer_flatten, .backward = backward_as_reshape,
                       .cpu_f32 = copy_cpu<float>, .cpu_f64 = copy_cpu<double>, .in_place = {0}, .view = true};

}  // namespace

extern const std::vector<const OpDef*> flatten_ops;
const std::vector<const OpDef*> flatten_ops = {&flatten};

}  // namespace monet::ops
