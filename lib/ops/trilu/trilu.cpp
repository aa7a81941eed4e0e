// Trilu(x) with the diagonal offset k as static input "k" (a constant scalar; default 0) and attribute upper
// (default 1): over the last two dims (rows i, columns j) of x, y keeps x where j - i >= k (upper) or j - i <= k
// (lower) and is 0 elsewhere; the leading dims are a batch. torch.triu / torch.tril export as it.
// Backward: the mask is fixed and linear, so dx = Trilu(dy) with the same k and upper.
#include "ops/op.h"
#include "ops/trilu/trilu.h"

namespace monet::ops {
namespace {

void infer_trilu(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.in(0).dtype != DType::f32) c.fail("only float tensors are supported, got ", dtype_name(c.in(0).dtype));
  if (c.shape(0).size() < 2) c.fail("needs at least 2 dims, got ", shape_str(c.shape(0)));
  if (int64_t u = c.attrs().i("upper", 1); u != 0 && u != 1) c.fail("upper must be 0 or 1, got ", u);
  if (c.attrs().has("k") && c.attrs().ints("k").size() != 1)
    c.fail("k must be one value, got ", c.attrs().ints("k").size());
  c.set_out(0, c.shape(0));
}

void backward_trilu(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("Trilu", {b.grad_out(0)}, b.node().attrs));
}

template <class T>
void trilu_cpu(const CpuCall& c) {
  const TriluSpec s = trilu_spec(c.node.attrs, *c.in[0].shape);
  const T* x = c.in[0].as<T>();  // (batch, R, C)
  T* y = c.out[0].as<T>();       // (batch, R, C)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.R; ++i)
      for (int64_t j = 0; j < s.C; ++j) {
        const int64_t at = (b * s.R + i) * s.C + j;
        y[at] = s.keeps(i, j) ? x[at] : T(0);
      }
}

const OpDef trilu = {.name = "Trilu", .infer = infer_trilu, .backward = backward_trilu, .cpu_f32 = trilu_cpu<float>,
                     .cpu_f64 = trilu_cpu<double>, .static_inputs = {"", "k"}, .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> trilu_ops;
const std::vector<const OpDef*> trilu_ops = {&trilu};

// For other backends (trilu.h).
TriluSpec trilu_spec(const Attrs& a, const Shape& x) {
  MONET_CHECK(x.size() >= 2, "Trilu of ", shape_str(x));
  TriluSpec s;
  s.R = x[x.size() - 2];
  s.C = x[x.size() - 1];
  for (size_t d = 0; d + 2 < x.size(); ++d) s.batch *= x[d];
  s.k = a.has("k") ? a.ints("k").at(0) : 0;
  s.upper = a.i("upper", 1) != 0;
  return s;
}

}  // namespace monet::ops
