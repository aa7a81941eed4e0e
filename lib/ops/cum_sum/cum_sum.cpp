// CumSum(x) with the axis as static input "axis" (a constant scalar or one-element tensor, negative from the end):
// y[.., j, ..] = sum of x[.., i, ..] over i <= j along the axis; exclusive = 1 leaves x[j] out (i < j), reverse = 1
// sums from the end (i >= j, or i > j when exclusive). Sums run in double per column.
// Backward: the adjoint of a prefix sum is the suffix sum, so dx = CumSum(dy) with reverse flipped and exclusive
// kept: y_j = sum_{i <= j} x_i gives dx_i = sum_{j >= i} dy_j.
#include "ops/cum_sum/cum_sum.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

// The axis of x the sum runs along; reason set when the attribute is missing or out of range.
int64_t cum_axis(const Attrs& a, const Shape& x, std::string* reason) {
  const int64_t r = static_cast<int64_t>(x.size());
  if (!a.has("axis")) {
    *reason = "the axis must be constant (attribute 'axis')";
    return 0;
  }
  const std::vector<int64_t> axis = a.ints("axis");
  if (axis.size() != 1) {
    *reason = "axis must be one value, got " + std::to_string(axis.size());
    return 0;
  }
  if (axis[0] < -r || axis[0] >= r) {
    *reason = "axis " + std::to_string(axis[0]) + " is out of range for input shape " + shape_str(x);
    return 0;
  }
  return axis[0] < 0 ? axis[0] + r : axis[0];
}

void infer_cum_sum(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.in(0).dtype != DType::f32) c.fail("only float tensors are supported, got ", dtype_name(c.in(0).dtype));
  if (c.shape(0).empty()) c.fail("CumSum of a scalar");
  for (const char* flag : {"exclusive", "reverse"})
    if (int64_t v = c.attrs().i(flag, 0); v != 0 && v != 1) c.fail(flag, " must be 0 or 1, got ", v);
  std::string reason;
  cum_axis(c.attrs(), c.shape(0), &reason);
  if (!reason.empty()) c.fail(reason);
  c.set_out(0, c.shape(0));
}

void backward_cum_sum(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("reverse", int64_t{1} - b.node().attrs.i("reverse", 0));
  b.set_grad(0, b.emit1("CumSum", {b.grad_out(0)}, a));
}

template <class T>
void cum_sum_cpu(const CpuCall& c) {
  const CumSumSpec s = cum_sum_spec(c.node.attrs, *c.in[0].shape);
  const T* x = c.in[0].as<T>();  // (outer, A, inner)
  T* y = c.out[0].as<T>();       // (outer, A, inner)
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < s.inner; ++k) {
      double acc = 0;
      for (int64_t step = 0; step < s.A; ++step) {
        const int64_t j = s.reverse ? s.A - 1 - step : step;
        const int64_t at = (o * s.A + j) * s.inner + k;
        const double v = x[at];  // read before y is written: y may be x
        if (!s.exclusive) acc += v;
        y[at] = static_cast<T>(acc);
        if (s.exclusive) acc += v;
      }
    }
}

const OpDef cum_sum = {.name = "CumSum", .infer = infer_cum_sum, .backward = backward_cum_sum,
                       .cpu_f32 = cum_sum_cpu<float>, .cpu_f64 = cum_sum_cpu<double>,
                       .static_inputs = {"", "axis"}, .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> cum_sum_ops;
const std::vector<const OpDef*> cum_sum_ops = {&cum_sum};

// For other backends (cum_sum.h).
CumSumSpec cum_sum_spec(const Attrs& a, const Shape& x) {
  std::string reason;
  const int64_t axis = cum_axis(a, x, &reason);
  MONET_CHECK(reason.empty(), reason);
  CumSumSpec s;
  s.A = x[axis];
  for (int64_t d = 0; d < axis; ++d) s.outer *= x[d];
  for (size_t d = axis + 1; d < x.size(); ++d) s.inner *= x[d];
  s.exclusive = a.i("exclusive", 0) != 0;
  s.reverse = a.i("reverse", 0) != 0;
  return s;
}

}  // namespace monet::ops
