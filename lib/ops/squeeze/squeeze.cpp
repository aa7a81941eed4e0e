// Squeeze(x) with optional axes (opset 13 static input, earlier an attribute; both arrive as attribute "axes"):
// y has x's elements without the listed dimensions, each of which must have size 1; without axes every size-1
// dimension goes. Backward: ReshapeGrad (lib/ops/reshape) back to x's shape. Copies the data like Reshape; every
// dtype works. Shape-computing Squeezes on constants never get here: the importer folds them.
#include <cstring>

#include "ops/common/view.h"

namespace monet::ops {
namespace {

void infer_squeeze(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape& xs = c.shape(0);
  const int64_t r = static_cast<int64_t>(xs.size());
  const std::vector<int64_t> axes = c.attrs().ints("axes", std::vector<int64_t>{});
  std::vector<bool> drop(xs.size(), false);
  for (int64_t d = 0; d < r && axes.empty(); ++d) drop[d] = xs[d] == 1;
  for (int64_t a : axes) {
    if (a < -r || a >= r) c.fail("axis ", a, " is out of range for input shape ", shape_str(xs));
    const int64_t d = a < 0 ? a + r : a;
    if (xs[d] != 1) c.fail("axis ", a, " of input shape ", shape_str(xs), " has size ", xs[d], ", not 1");
    drop[d] = true;
  }
  Shape out;
  for (int64_t d = 0; d < r; ++d)
    if (!drop[d]) out.push_back(xs[d]);
  c.set_out(0, out, c.in(0).dtype);
}

const OpDef squeeze = {.name = "Squeeze", .infer = infer_squeeze, .backward = backward_as_reshape,
                       .cpu_f32 = copy_cpu<float>, .cpu_f64 = copy_cpu<double>, .static_inputs = {"", "axes"},
                       .in_place = {0}, .view = true};

}  // namespace

extern const std::vector<const OpDef*> squeeze_ops;
const std::vector<const OpDef*> squeeze_ops = {&squeeze};

}  // namespace monet::ops
