// ReduceMax (opset 13): the maximum over attribute `axes` (negative counts from the end; absent or empty = all
// axes), keepdims (default 1) keeps them as size 1; an opset-18 `axes` input, when constant, arrives as the same
// attribute through static_inputs. A NaN in a reduced set makes its maximum NaN (torch.amax).
// Backward ReduceMaxGrad(dY, X, Y) -> dX: dY goes to the elements equal to their maximum, split evenly among ties,
// as torch.amax's autograd does (torch.max(x, dim) picks one index instead; amax is what ReduceMax is). Ties are
// common after a Relu (a window of zeros): the split keeps the gradient's sum dY either way.
#include <algorithm>
#include <cmath>

#include "ops/common/reduce.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

void infer_reduce_max(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.in(0).dtype != DType::f32) c.fail("only float tensors are supported, got ", dtype_name(c.in(0).dtype));
  const Shape& x = c.shape(0);
  const int64_t keepdims = c.attrs().i("keepdims", 1);
  if (keepdims != 0 && keepdims != 1) c.fail("keepdims must be 0 or 1, got ", keepdims);
  if (c.attrs().i("noop_with_empty_axes", 0) != 0 && c.attrs().ints("axes", std::vector<int64_t>{}).empty())
    c.fail("noop_with_empty_axes without axes is not supported");
  if (numel(x) == 0) c.fail("the maximum of an empty tensor");
  const std::vector<bool> reduced = reduced_axes(c, x);
  c.set_out(0, reduced_shape(x, reduced, keepdims != 0));
}

void backward_reduce_max(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  const Shape& x = b.value(b.in(0)).shape;
  const std::vector<bool> reduced = reduced_axes(b.node().attrs, x);
  std::vector<int64_t> axes;
  for (size_t d = 0; d < x.size(); ++d)
    if (reduced[d]) axes.push_back(static_cast<int64_t>(d));
  Attrs a;
  a.set("axes", axes);
  b.set_grad(0, b.emit1("ReduceMaxGrad", {b.grad_out(0), b.in(0), b.out(0)}, a));
}

template <class T>
void reduce_max_cpu(const CpuCall& c) {
  const Shape& xs = *c.in[0].shape;
  const std::vector<bool> reduced = reduced_axes(c.node.attrs, xs);
  const T* x = c.in[0].as<T>();  // (input shape)
  T* y = c.out[0].as<T>();       // (kept dims)
  std::fill(y, y + c.out[0].numel(), -INFINITY);
  for_each_reduced(xs, reduced, [&](int64_t i, int64_t o) {
    if (!std::isnan(y[o]) && (x[i] > y[o] || std::isnan(x[i]))) y[o] = x[i];
  });
}

// ReduceMaxGrad(dY, X, Y) -> dX with attribute axes (non-negative, explicit).
void infer_reduce_max_grad(InferCtx& c) {
  c.expect_inputs(3, 3);
  const Shape& x = c.shape(1);
  const std::vector<bool> reduced = reduced_axes(c, x);
  if (numel(c.shape(0)) != numel(c.shape(2)) || numel(c.shape(2)) != numel(reduced_shape(x, reduced, true)))
    c.fail("dY ", shape_str(c.shape(0)), " and Y ", shape_str(c.shape(2)), " do not match X ", shape_str(x),
           " reduced");
  c.set_out(0, x);
}

int64_t reduce_max_grad_workspace(const Graph& g, const Node& node, int) {
  return numel(g.values[node.inputs[2]].shape) * static_cast<int64_t>(sizeof(int64_t));
}

template <class T>
void reduce_max_grad_cpu(const CpuCall& c) {
  const Shape& xs = *c.in[1].shape;
  const std::vector<bool> reduced = reduced_axes(c.node.attrs, xs);
  const T* dy = c.in[0].as<T>();  // (kept dims)
  const T* x = c.in[1].as<T>();   // (input shape)
  const T* y = c.in[2].as<T>();   // (kept dims)
  T* dx = c.out[0].as<T>();       // (input shape)
  int64_t* ties = static_cast<int64_t*>(c.workspace);  // (kept dims): elements equal to the maximum
  std::fill(ties, ties + c.in[2].numel(), int64_t{0});
  for_each_reduced(xs, reduced, [&](int64_t i, int64_t o) { ties[o] += x[i] == y[o]; });
  for_each_reduced(xs, reduced, [&](int64_t i, int64_t o) {
    dx[i] = x[i] == y[o] ? static_cast<T>(dy[o] / static_cast<T>(ties[o])) : T(0);
  });
}

const OpDef reduce_max = {.name = "ReduceMax", .infer = infer_reduce_max, .backward = backward_reduce_max,
                          .cpu_f32 = reduce_max_cpu<float>, .cpu_f64 = reduce_max_cpu<double>,
                          .static_inputs = {"", "axes"}};
const OpDef reduce_max_grad = {.name = "ReduceMaxGrad", .infer = infer_reduce_max_grad,
                               .cpu_f32 = reduce_max_grad_cpu<float>, .cpu_f64 = reduce_max_grad_cpu<double>,
                               .cpu_workspace_bytes = reduce_max_grad_workspace};

}  // namespace

extern const std::vector<const OpDef*> reduce_max_ops;
const std::vector<const OpDef*> reduce_max_ops = {&reduce_max, &reduce_max_grad};

}  // namespace monet::ops
