// ReduceMean (opset 13): the mean over attribute `axes` (negative counts from the end; absent or empty = all
// axes), keepdims (default 1) keeps them as size 1. An opset-18 `axes` input, when constant, arrives as the same
// attribute through static_inputs. Backward ReduceMeanGrad(dY) -> dX = dY / count broadcast back over the
// reduced axes (attributes input_shape and the normalised axes). keepdims does not change the memory order of
// the kept elements, so both kernels only need the input shape and which axes are reduced.
// ReduceSum is the same op without the division (axes an input since opset 13, the same attribute here;
// noop_with_empty_axes = 1 with no axes, the identity, is refused): ReduceSumGrad(dY) -> dX = dY broadcast back.
#include <algorithm>

#include "ops/common/reduce.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

// Number of input elements averaged into each output element.
int64_t reduced_count(const Shape& x, const std::vector<bool>& reduced) {
  int64_t n = 1;
  for (size_t d = 0; d < x.size(); ++d)
    if (reduced[d]) n *= x[d];
  return n;
}

template <bool kSum>
void infer_reduce_mean(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape& x = c.shape(0);
  if (kSum && c.attrs().i("noop_with_empty_axes", 0) != 0 && c.attrs().ints("axes", std::vector<int64_t>{}).empty())
    c.fail("noop_with_empty_axes = 1 without axes (the identity) is not supported");
  const int64_t keepdims = c.attrs().i("keepdims", 1);
  if (keepdims != 0 && keepdims != 1) c.fail("keepdims must be 0 or 1, got ", keepdims);
  c.set_out(0, reduced_shape(x, reduced_axes(c, x), keepdims != 0));
}

template <bool kSum>
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
  b.set_grad(0, b.emit1(kSum ? "ReduceSumGrad" : "ReduceMeanGrad", {b.grad_out(0)}, a));
}

int64_t reduce_mean_workspace(const Graph& g, const Node& node, int) {
  return numel(g.values[node.outputs[0]].shape) * static_cast<int64_t>(sizeof(double));
}

template <class T, bool kSum>
void reduce_mean_cpu(const CpuCall& c) {
  const Shape& xs = *c.in[0].shape;
  const std::vector<bool> reduced = reduced_axes(c.node.attrs, xs);
  const T* x = c.in[0].as<T>();                      // (input shape)
  T* y = c.out[0].as<T>();                           // (kept dims)
  double* acc = static_cast<double*>(c.workspace);   // (kept dims): sums in double, as float sums drift
  const int64_t ny = c.out[0].numel();
  std::fill(acc, acc + ny, 0.0);
  for_each_reduced(xs, reduced, [&](int64_t i, int64_t o) { acc[o] += x[i]; });
  const double count = kSum ? 1.0 : static_cast<double>(reduced_count(xs, reduced));
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

template <class T, bool kSum>
void reduce_mean_grad_cpu(const CpuCall& c) {
  const Shape& xs = *c.out[0].shape;
  const std::vector<bool> reduced = reduced_axes(c.node.attrs, xs);
  const T* dy = c.in[0].as<T>();  // (kept dims)
  T* dx = c.out[0].as<T>();       // (input shape)
  const T count = kSum ? T(1) : static_cast<T>(reduced_count(xs, reduced));
  for_each_reduced(xs, reduced, [&](int64_t i, int64_t o) { dx[i] = dy[o] / count; });
}

const OpDef reduce_mean = {.name = "ReduceMean", .infer = infer_reduce_mean<false>,
                           .backward = backward_reduce_mean<false>, .cpu_f32 = reduce_mean_cpu<float, false>,
                           .cpu_f64 = reduce_mean_cpu<double, false>, .cpu_workspace_bytes = reduce_mean_workspace,
                           .static_inputs = {"", "axes"}};
const OpDef reduce_mean_grad = {.name = "ReduceMeanGrad", .infer = infer_reduce_mean_grad,
                                .cpu_f32 = reduce_mean_grad_cpu<float, false>,
                                .cpu_f64 = reduce_mean_grad_cpu<double, false>};
const OpDef reduce_sum = {.name = "ReduceSum", .infer = infer_reduce_mean<true>, .backward = backward_reduce_mean<true>,
                          .cpu_f32 = reduce_mean_cpu<float, true>, .cpu_f64 = reduce_mean_cpu<double, true>,
                          .cpu_workspace_bytes = reduce_mean_workspace, .static_inputs = {"", "axes"}};
const OpDef reduce_sum_grad = {.name = "ReduceSumGrad", .infer = infer_reduce_mean_grad,
                               .cpu_f32 = reduce_mean_grad_cpu<float, true>,
                               .cpu_f64 = reduce_mean_grad_cpu<double, true>};

}  // namespace

extern const std::vector<const OpDef*> reduce_mean_ops;
const std::vector<const OpDef*> reduce_mean_ops = {&reduce_mean, &reduce_mean_grad, &reduce_sum, &reduce_sum_grad};

}  // namespace monet::ops
