// Slice(x) with opset 13 static inputs starts, ends, axes (default 0..k-1), steps (default 1): y takes, on each
// listed axis, x[start], x[start + step], ... up to (not including) end, with ONNX clamping (negative indices count
// from the end, INT64_MAX / INT64_MIN mean "to the end", negative steps walk backwards).
// Backward: SliceGrad(dy) writes dy into a zero tensor of x's shape at the sliced positions.
#include <algorithm>
#include <climits>
#include <cstring>

#include "ops/op.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// The slice resolved on every axis of x: y[.., j, ..] = x[.., start + j * step, ..], j < len.
struct SliceAxes {
  std::vector<int64_t> start, step, len;
};

// Resolves the attributes against x's shape per the ONNX rules; returns an error message or "".
std::string resolve_slice(const Attrs& a, const Shape& xs, SliceAxes& s) {
  const int64_t rank = static_cast<int64_t>(xs.size());
  const std::vector<int64_t> starts = a.ints("starts"), ends = a.ints("ends");
  const size_t k = starts.size();
  std::vector<int64_t> axes = a.ints("axes", std::vector<int64_t>{});
  std::vector<int64_t> steps = a.ints("steps", std::vector<int64_t>{});
  if (axes.empty())
    for (size_t i = 0; i < k; ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(k, 1);
  if (ends.size() != k || axes.size() != k || steps.size() != k)
    return "starts, ends, axes, steps have " + std::to_string(k) + ", " + std::to_string(ends.size()) + ", " +
           std::to_string(axes.size()) + ", " + std::to_string(steps.size()) + " entries";
  s.start.assign(rank, 0);
  s.step.assign(rank, 1);
  s.len = xs;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < k; ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank) return "axis " + std::to_string(axes[i]) + " out of range for rank " + std::to_string(rank);
    if (seen[axis]) return "axis " + std::to_string(axes[i]) + " listed twice";
    seen[axis] = true;
    const int64_t d = xs[axis], step = steps[i];
    if (step == 0 || step == INT64_MIN) return "step " + std::to_string(step) + " on axis " + std::to_string(axis);
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += d;  // cannot overflow: b < 0 and d > 0
    if (e < 0) e += d;
    int64_t len;
    if (step > 0) {  // start in [0, d], end in [0, d]
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      len = e > b ? (e - b - 1) / step + 1 : 0;
    } else {         // start in [0, d-1], end in [-1, d-1]
      b = std::clamp<int64_t>(b, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      len = b > e ? (b - e - 1) / -step + 1 : 0;
    }
    if (len == 0)
      return "slice [" + std::to_string(starts[i]) + ":" + std::to_string(ends[i]) + ":" + std::to_string(step) +
             "] of axis " + std::to_string(axis) + " (length " + std::to_string(d) + ") is empty";
    s.start[axis] = b;
    s.step[axis] = step;
    s.len[axis] = len;
  }
  return "";
}

void infer_slice(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.shape(0).empty()) c.fail("cannot slice a scalar");
  if (!c.attrs().has("starts") || !c.attrs().has("ends")) c.fail("starts and ends must be constant (attributes)");
  SliceAxes s;
  if (std::string err = resolve_slice(c.attrs(), c.shape(0), s); !err.empty()) c.fail(err);
  c.set_out(0, s.len, c.in(0).dtype);
}

void backward_slice(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("SliceGrad", {b.grad_out(0)}, a));
}

// Calls f(x_offset, y_offset) for every element of y, in y's order, offsets in elements. The last axis is the
// inner loop so that only one multiply-add per element is needed.
template <class F>
void for_each_sliced(const Shape& xs, const SliceAxes& s, F f) {
  const size_t rank = xs.size();
  std::vector<int64_t> stride(rank, 1);  // x strides
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * xs[d + 1];
  int64_t base = 0;                      // x offset of the first element of the current row
  for (size_t d = 0; d < rank; ++d) base += s.start[d] * stride[d];
  const int64_t inner_len = s.len[rank - 1], inner_step = s.step[rank - 1];
  const int64_t rows = numel(s.len) / inner_len;
  std::vector<int64_t> idx(rank, 0);     // odometer over the outer axes of y
  int64_t y = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < inner_len; ++j) f(base + j * inner_step, y++);
    for (size_t d = rank - 1; d-- > 0;) {
      base += s.step[d] * stride[d];
      if (++idx[d] < s.len[d]) break;
      base -= s.step[d] * stride[d] * s.len[d];
      idx[d] = 0;
    }
  }
}

// Moves bytes, so it serves every dtype.
template <class T>
void slice_cpu(const CpuCall& c) {
  SliceAxes s;
  MONET_CHECK(resolve_slice(c.node.attrs, *c.in[0].shape, s).empty());
  const int64_t esize = element_bytes(c.in[0].dtype, sizeof(T));
  const char* x = static_cast<const char*>(c.in[0].data);  // (x shape)
  char* y = static_cast<char*>(c.out[0].data);             // (len per axis)
  for_each_sliced(*c.in[0].shape, s, [&](int64_t xo, int64_t yo) { std::memcpy(y + yo * esize, x + xo * esize, esize); });
}

// SliceGrad(dy) with the Slice attributes and shape = x's shape.
void infer_slice_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape xs = c.attrs().ints("shape");
  if (xs.empty()) c.fail("shape must not be empty");
  SliceAxes s;
  if (std::string err = resolve_slice(c.attrs(), xs, s); !err.empty()) c.fail(err);
  if (s.len != c.shape(0)) c.fail("dy has shape ", shape_str(c.shape(0)), ", the slice of ", shape_str(xs), " has ", shape_str(s.len));
  c.set_out(0, xs);
}

template <class T>
void slice_grad_cpu(const CpuCall& c) {
  SliceAxes s;
  MONET_CHECK(resolve_slice(c.node.attrs, *c.out[0].shape, s).empty());
  const T* dy = c.in[0].as<T>();  // (len per axis)
  T* dx = c.out[0].as<T>();       // (x shape)
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for_each_sliced(*c.out[0].shape, s, [&](int64_t xo, int64_t yo) { dx[xo] = dy[yo]; });  // positions are distinct
}

const OpDef slice = {.name = "Slice", .infer = infer_slice, .backward = backward_slice,
                     .cpu_f32 = slice_cpu<float>, .cpu_f64 = slice_cpu<double>,
                     .static_inputs = {"", "starts", "ends", "axes", "steps"}};
const OpDef slice_grad = {.name = "SliceGrad", .infer = infer_slice_grad,
                          .cpu_f32 = slice_grad_cpu<float>, .cpu_f64 = slice_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> slice_ops;
const std::vector<const OpDef*> slice_ops = {&slice, &slice_grad};

// For other backends (ops/common/plans.h).
SliceSpec slice_spec(const Attrs& a, const Shape& x) {
  SliceAxes s;
  const std::string err = resolve_slice(a, x, s);
  MONET_CHECK(err.empty(), err);
  return {s.start, s.step, s.len};
}

}  // namespace monet::ops
