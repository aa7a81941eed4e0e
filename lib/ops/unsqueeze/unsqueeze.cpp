// Unsqueeze(x) with axes (opset 13 static input, earlier an attribute; both arrive as attribute "axes"): y has
// x's elements with a dimension of size 1 inserted at each axis of y (negative axes count from y's rank).
// Backward: ReshapeGrad (lib/ops/reshape) back to x's shape. Copies the data like Reshape; every dtype works.
// Shape-computing Unsqueezes on constants never get here: the importer folds them.
#include <algorithm>
#include <cstring>

#include "ops/common/view.h"

namespace monet::ops {
namespace {

void infer_unsqueeze(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (!c.attrs().has("axes")) c.fail("axes must be constant (attribute 'axes')");
  const Shape& xs = c.shape(0);
  std::vector<int64_t> axes = c.attrs().ints("axes");
  const int64_t r = static_cast<int64_t>(xs.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    if (a < -r || a >= r) c.fail("axis ", a, " is out of range for an output of rank ", r);
    const int64_t d = a < 0 ? a + r : a;
    if (inserted[d]) c.fail("axis ", a, " is listed twice");
    inserted[d] = true;
  }
  Shape out;
  size_t next = 0;  // next dim of x
  for (int64_t d = 0; d < r; ++d) out.push_back(inserted[d] ? 1 : xs[next++]);
  c.set_out(0, out, c.in(0).dtype);
}

const OpDef unsqueeze = {.name = "Unsqueeze", .infer = infer_unsqueeze, .backward = backward_as_reshape,
                         .cpu_f32 = copy_cpu<float>, .cpu_f64 = copy_cpu<double>, .static_inputs = {"", "axes"},
                         .in_place = {0}, .view = true};

}  // namespace

extern const std::vector<const OpDef*> unsqueeze_ops;
const std::vector<const OpDef*> unsqueeze_ops = {&unsqueeze};

}  // namespace monet::ops
