// Where(cond, X, Y): out = X where cond else Y, the three broadcasting numpy-style to the output. cond is a bool
// mask: DType::u8 when computed (Equal/Less/Greater, Cast to BOOL) or DType::i64 when it is a constant (the
// importer keeps bool initializers and folded masks as int64); nonzero = true. X and Y are floats. torch's
// x.masked_fill(mask, v) exports as Where(mask, v, x) with v a scalar constant, which takes no gradient.
// Backward (PyTorch's where backward): dX = ReduceSumTo(where(cond, dY, 0), X's shape), dY likewise with the
// condition negated, each one WhereGrad node; cond gets no gradient.
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void expect_mask(const InferCtx& c, int i) {
  if (c.in(i).dtype == DType::f32) c.fail("condition (input ", i, ") must be a bool mask, got a float tensor");
}

void infer_where(InferCtx& c) {
  c.expect_inputs(3, 3);
  expect_mask(c, 0);
  for (int i = 1; i <= 2; ++i)
    if (c.in(i).dtype != DType::f32)
      c.fail("input ", i, " has dtype ", dtype_name(c.in(i).dtype), "; only float branches are supported");
  std::optional<Shape> out = broadcast_shapes(c.shape(0), c.shape(1));
  if (out) out = broadcast_shapes(*out, c.shape(2));
  if (!out)
    c.fail("shapes ", shape_str(c.shape(0)), ", ", shape_str(c.shape(1)), " and ", shape_str(c.shape(2)),
           " do not broadcast");
  c.set_out(0, *out);
}

void backward_where(GradBuilder& b) {
  const int dy = b.grad_out(0);
  if (dy < 0) return;
  for (int i = 1; i <= 2; ++i) {
    if (!b.needs_grad(i)) continue;
    Attrs a = input_shape_attr(b, i);
    a.set("pick", int64_t{i == 1 ? 1 : 0});
    b.set_grad(i, b.emit1("WhereGrad", {dy, b.in(0)}, a));
  }
}

template <class T, class C>
void where_as(const CpuCall& c) {
  const C* cond = c.in[0].as<C>();  // (cond shape)
  const T* x = c.in[1].as<T>();     // (X shape)
  const T* y = c.in[2].as<T>();     // (Y shape)
  T* out = c.out[0].as<T>();        // (broadcast shape)
  for_each_broadcast<3>(*c.out[0].shape, {c.in[0].shape, c.in[1].shape, c.in[2].shape},
                        [&](int64_t i, const std::array<int64_t, 3>& o) {
                          out[i] = cond[o[0]] != 0 ? x[o[1]] : y[o[2]];
                        });
}

template <class T>
void where_cpu(const CpuCall& c) {
  if (c.in[0].dtype == DType::u8) where_as<T, uint8_t>(c);
  else where_as<T, int64_t>(c);
}

// WhereGrad(dy, cond) with attributes shape (the branch's shape) and pick (1: X, kept where cond holds; 0: Y, kept
// where it does not) -> ReduceSumTo(where(cond == pick, dy, 0), shape).
void infer_where_grad(InferCtx& c) {
  c.expect_inputs(2, 2);
  if (c.in(0).dtype != DType::f32) c.fail("dy must be float");
  expect_mask(c, 1);
  const Shape& dy = c.shape(0);
  auto b = broadcast_shapes(c.shape(1), dy);
  if (!b || *b != dy) c.fail("condition of shape ", shape_str(c.shape(1)), " does not broadcast to ", shape_str(dy));
  const Shape target = c.attrs().ints("shape");
  b = broadcast_shapes(target, dy);
  if (!b || *b != dy) c.fail("shape ", shape_str(target), " does not broadcast to ", shape_str(dy));
  const int64_t pick = c.attrs().i("pick");
  if (pick != 0 && pick != 1) c.fail("pick must be 0 or 1, got ", pick);
  c.set_out(0, target);
}

template <class T, class C>
void where_grad_as(const CpuCall& c) {
  const T* dy = c.in[0].as<T>();    // (forward output shape)
  const C* cond = c.in[1].as<C>();  // (cond shape)
  T* dx = c.out[0].as<T>();         // (attr shape)
  const bool pick = c.node.attrs.i("pick") != 0;
  const Shape& ys = *c.in[0].shape;
  if (*c.out[0].shape == ys && *c.in[1].shape == ys) {
    const int64_t n = c.in[0].numel();
    for (int64_t i = 0; i < n; ++i) dx[i] = (cond[i] != 0) == pick ? dy[i] : T(0);
    return;
  }
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for_each_broadcast<2>(ys, {c.out[0].shape, c.in[1].shape}, [&](int64_t i, const std::array<int64_t, 2>& o) {
    if ((cond[o[1]] != 0) == pick) dx[o[0]] += dy[i];
  });
}

template <class T>
void where_grad_cpu(const CpuCall& c) {
  if (c.in[1].dtype == DType::u8) where_grad_as<T, uint8_t>(c);
  else where_grad_as<T, int64_t>(c);
}

const OpDef where = {.name = "Where", .infer = infer_where, .backward = backward_where,
                     .cpu_f32 = where_cpu<float>, .cpu_f64 = where_cpu<double>};
const OpDef where_grad = {.name = "WhereGrad", .infer = infer_where_grad,
                          .cpu_f32 = where_grad_cpu<float>, .cpu_f64 = where_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> where_ops;
const std::vector<const OpDef*> where_ops = {&where, &where_grad};

}  // namespace monet::ops
