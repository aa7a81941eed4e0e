// ReduceMean (opset 13): the mean over attribute `axes` (negative counts from the end; absent or empty = all
// axes), keepdims (default 1) keeps them as size 1. An opset-18 `axes` input, when constant, arrives as the same
// attribute through static_inputs. Backward ReduceMeanGrad(dY) -> dX = dY / count broadcast back over the
// reduced axes (attributes input_shape and the normalised axes). keepdims does not change the memory order of
// the kept elements, so both kernels only need the input shape and which axes are reduced.
#include <algorithm>

#include "ops/op.h"

namespace monet::ops {
namespace {

// Which axes of input shape x are reduced; rejects out-of-range and repeated axes.
std::vector<bool> reduced_axes(InferCtx& c, const Shape& x) {
  const int64_t r = static_cast<int64_t>(x.size());
  const std::vector<int64_t> axes = c.attrs().ints("axes", std::vector<int64_t>{});
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t a : axes) {
    if (a < -r || a >= r) c.fail("axis ", a, " is out of range for input shape ", shape_str(x));
    const int64_t d = a < 0 ? a + r : a;
    if (reduced[d]) c.fail("axis ", a, " is listed twice");
    reduced[d] = true;
  }
  return reduced;
}

// The same for kernels: the shape rule has validated the attribute.
std::vector<bool> reduced_axes(const Attrs& attrs, const Shape& x) {
  const int64_t r = static_cast<int64_t>(x.size());
  const std::vector<int64_t> axes = attrs.ints("axes", std::vector<int64_t>{});
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + r : a] = true;
  return reduced;
}

// Number of input elements averaged into each output element.
int64_t reduced_count(const Shape& x, const std::vector<bool>& reduced) {
  int64_t n = 1;
  for (size_t d = 0; d < x.size(); ++d)
    if (reduced[d]) n *= x[d];
  return n;
}

// Calls f(i, o) for every element i of x (row-major) with o the output element it averages into.
template <class F>
void for_each_reduced(const Shape& x, const std::vector<bool>& reduced, F f) {
  const size_t r = x.size();
  std::vector<int64_t> ostride(r, 0);  // output stride per input dim, 0 on reduced dims
  int64_t s = 1;
  for (size_t d = r; d-- > 0;)
    if (!reduced[d]) {
      ostride[d] = s;
      s *= x[d];
    }
  std::vector<int64_t> idx(r, 0);
  int64_t o = 0;
  const int64_t n = numel(x);
  for (int64_t i = 0; i < n; ++i) {
    f(i, o);
    for (size_t d = r; d-- > 0;) {  // odometer increment over the input index
      o += ostride[d];
      if (++idx[d] < x[d]) break;
      o -= ostride[d] * x[d];
      idx[d] = 0;
    }
  }
}

void infer_reduce_mean(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape& x = c.shape(0);
  const int64_t keepdims = c.attrs().i("keepdims", 1);
  if (keepdims != 0 && keepdims != 1) c.fail("keepdims must be 0 or 1, got ", keepdims);
  const std::vector<bool> reduced = reduced_axes(c, x);
  Shape y;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!reduced[d]) y.push_back(x[d]);
    else if (keepdims) y.push_back(1);
  }
  c.set_out(0, y);
}

void backward_reduce_mean(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  const Shape& x = b.value(b.in(0)).shape;
  const std::vector<bool> reduced = reduced_axes(b.node().attrs, x);
  std::vector<int64_t> axes;
  for (size_t d = 0; d < x.size(); ++d)
    if (reduced[d]) axes.push_back(static_cast<int64_t>(d));
  Attrs a;
  a.set("input_shape", x);
  a.set("axes", axes);
  b.set_grad(0, b.emit1("ReduceMeanGrad", {b.grad_out(0)}, a));
}

int64_t reduce_mean_workspace(const Graph& g, const Node& node, int) {
  return numel(g.values[node.outputs[0]].shape) * static_cast<int64_t>(sizeof(double));
}

template <class T>
void reduce_mean_cpu(const CpuCall& c) {
  const Shape& xs = *c.in[0].shape;
  const std::vector<bool> reduced = reduced_axes(c.node.attrs, xs);
  const T* x = c.in[0].as<T>();                      // (input shape)
  T* y = c.out[0].as<T>();                           // (kept dims)
  double* acc = static_cast<double*>(c.workspace);   // (kept dims): sums in double, as float sums drift
  const int64_t ny = c.out[0].numel();
  std::fill(acc, acc + ny, 0.0);
  for_each_reduced(xs, reduced, [&](int64_t i, int64_t o) { acc[o] += x[i]; });
  const double count = static_cast<double>(reduced_count(xs, reduced));
  for (int64_t o = 0; o < ny; ++o) y[o] = static_cast<T>(acc[o] / count);
}

// ReduceMeanGrad(dY) -> dX with attributes input_shape and axes (non-negative, explicit).
void infer_reduce_mean_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape x = c.attrs().ints("input_shape");
  const std::vector<bool> reduced = reduced_axes(c, x);
  if (numel(c.shape(0)) * reduced_count(x, reduced) != numel(x))
    c.fail("dY of shape ", shape_str(c.shape(0)), " does not match input ", shape_str(x), " reduced");
  c.set_out(0, x);
}

template <class T>
void reduce_mean_grad_cpu(const CpuCall& c) {
  const Shape& xs = *c.out[0].shape;
  const std::vector<bool> reduced = reduced_axes(c.node.attrs, xs);
  const T* dy = c.in[0].as<T>();  // (kept dims)
  T* dx = c.out[0].as<T>();       // (input shape)
  const T count = static_cast<T>(reduced_count(xs, reduced));
  for_each_reduced(xs, reduced, [&](int64_t i, int64_t o) { dx[i] = dy[o] / count; });
}

const OpDef reduce_mean = {.name = "ReduceMean", .infer = infer_reduce_mean, .backward = backward_reduce_mean,
                           .cpu_f32 = reduce_mean_cpu<float>, .cpu_f64 = reduce_mean_cpu<double>,
                           .cpu_workspace_bytes = reduce_mean_workspace, .static_inputs = {"", "axes"}};
const OpDef reduce_mean_grad = {.name = "ReduceMeanGrad", .infer = infer_reduce_mean_grad,
                                .cpu_f32 = reduce_mean_grad_cpu<float>, .cpu_f64 = reduce_mean_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> reduce_mean_ops;
const std::vector<const OpDef*> reduce_mean_ops = {&reduce_mean, &reduce_mean_grad};

}  // namespace monet::ops
