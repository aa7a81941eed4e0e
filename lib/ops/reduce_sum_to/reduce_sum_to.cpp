// ReduceSumTo(x) with attribute shape: sums x over the dimensions that numpy broadcasting expanded from `shape`.
// The gradient of any broadcasting op is its output gradient reduced this way to each input's shape.
#include "ops/common/broadcast.h"

namespace monet::ops {
namespace {

void infer_reduce_sum_to(InferCtx& c) {
  c.expect_inputs(1, 1);
  Shape target = c.attrs().ints("shape");
  auto b = broadcast_shapes(target, c.shape(0));
  if (!b || *b != c.shape(0)) c.fail("shape ", shape_str(target), " does not broadcast to ", shape_str(c.shape(0)));
  c.set_out(0, target);
}

// Broadcast(y) to the input's shape is the adjoint: dx[i] = dy[offset(i)].
void backward_reduce_sum_to(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("BroadcastTo", {b.grad_out(0)}, a));
}

template <class T>
void reduce_sum_to_cpu(const CpuCall& c) {
  const T* x = c.in[0].as<T>();   // (broadcast shape)
  T* y = c.out[0].as<T>();        // (target shape)
  std::fill(y, y + c.out[0].numel(), T(0));
  std::vector<int64_t> off = broadcast_offsets(*c.out[0].shape, *c.in[0].shape);
  for (size_t i = 0; i < off.size(); ++i) y[off[i]] += x[i];
}

void infer_broadcast_to(InferCtx& c) {
  c.expect_inputs(1, 1);
  Shape target = c.attrs().ints("shape");
  auto b = broadcast_shapes(c.shape(0), target);
  if (!b || *b != target) c.fail("cannot broadcast ", shape_str(c.shape(0)), " to ", shape_str(target));
  c.set_out(0, target);
}

void backward_broadcast_to(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("ReduceSumTo", {b.grad_out(0)}, a));
}

template <class T>
void broadcast_to_cpu(const CpuCall& c) {
  const T* x = c.in[0].as<T>();   // (input shape)
  T* y = c.out[0].as<T>();        // (target shape)
  std::vector<int64_t> off = broadcast_offsets(*c.in[0].shape, *c.out[0].shape);
  for (size_t i = 0; i < off.size(); ++i) y[i] = x[off[i]];
}

const OpDef reduce_sum_to = {.name = "ReduceSumTo", .infer = infer_reduce_sum_to, .backward = backward_reduce_sum_to,
                             .cpu_f32 = reduce_sum_to_cpu<float>, .cpu_f64 = reduce_sum_to_cpu<double>};
const OpDef broadcast_to = {.name = "BroadcastTo", .infer = infer_broadcast_to, .backward = backward_broadcast_to,
                            .cpu_f32 = broadcast_to_cpu<float>, .cpu_f64 = broadcast_to_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> reduce_sum_to_ops;
const std::vector<const OpDef*> reduce_sum_to_ops = {&reduce_sum_to, &broadcast_to};

}  // namespace monet::ops
