// Transpose(x) with attribute perm (default: the axes reversed): y.shape[k] = x.shape[perm[k]] and
// y[i_0, ..., i_{r-1}] = x[j] with j[perm[k]] = i_k. Backward: Transpose of dy with the inverse permutation.
// The kernel moves elements of x's size, so every dtype works.
#include <cstring>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

// perm resolved against the rank; an error message or "".
std::string resolve_perm(const Attrs& a, size_t rank, std::vector<int64_t>& perm) {
  perm = a.ints("perm", std::vector<int64_t>{});
  if (!a.has("perm"))
    for (size_t k = 0; k < rank; ++k) perm.push_back(static_cast<int64_t>(rank - 1 - k));
  if (perm.size() != rank) return "perm " + shape_str(perm) + " has " + std::to_string(perm.size()) +
                                  " entries for rank " + std::to_string(rank);
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) return "perm " + shape_str(perm) + " is not a permutation";
    seen[p] = true;
  }
  return "";
}

void infer_transpose(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape& xs = c.shape(0);
  std::vector<int64_t> perm;
  if (std::string err = resolve_perm(c.attrs(), xs.size(), perm); !err.empty()) c.fail(err);
  Shape out(xs.size());
  for (size_t k = 0; k < xs.size(); ++k) out[k] = xs[perm[k]];
  c.set_out(0, out, c.in(0).dtype);
}

void backward_transpose(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  std::vector<int64_t> perm, inverse;
  resolve_perm(b.node().attrs, b.value(b.in(0)).shape.size(), perm);
  inverse.resize(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int64_t>(k);
  Attrs a;
  a.set("perm", inverse);
  b.set_grad(0, b.emit1("Transpose", {b.grad_out(0)}, a));
}

// Walks y in order with an odometer; the x offset follows with x's stride of each y axis.
template <class E>
void transpose_impl(const CpuCall& c) {
  const Shape& xs = *c.in[0].shape;
  const Shape& ys = *c.out[0].shape;
  const size_t rank = xs.size();
  std::vector<int64_t> perm;
  resolve_perm(c.node.attrs, rank, perm);
  const E* x = static_cast<const E*>(c.in[0].data);  // (x shape)
  E* y = static_cast<E*>(c.out[0].data);             // (x.shape[perm])
  const int64_t n = c.out[0].numel();
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  std::vector<int64_t> x_stride(rank, 1), step(rank);  // step[k]: x stride of y axis k
  for (size_t d = rank - 1; d-- > 0;) x_stride[d] = x_stride[d + 1] * xs[d + 1];
  for (size_t k = 0; k < rank; ++k) step[k] = x_stride[perm[k]];
  const int64_t inner = ys[rank - 1], inner_step = step[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t base = 0;
  for (int64_t o = 0; o < n; o += inner) {
    for (int64_t j = 0; j < inner; ++j) y[o + j] = x[base + j * inner_step];
    for (size_t k = rank - 1; k-- > 0;) {
      base += step[k];
      if (++idx[k] < ys[k]) break;
      base -= step[k] * ys[k];
      idx[k] = 0;
    }
  }
}

template <class T>
void transpose_cpu(const CpuCall& c) {
  switch (element_bytes(c.in[0].dtype, sizeof(T))) {
    case 1: transpose_impl<uint8_t>(c); break;
    case 4: transpose_impl<uint32_t>(c); break;
    case 8: transpose_impl<uint64_t>(c); break;
    default: MONET_CHECK(false, "element size");
  }
}

const OpDef transpose = {.name = "Transpose", .infer = infer_transpose, .backward = backward_transpose,
                         .cpu_f32 = transpose_cpu<float>, .cpu_f64 = transpose_cpu<double>};

}  // namespace

// For other backends and the import's rewrites (ops/common/plans.h).
std::vector<int64_t> transpose_perm(const Attrs& a, size_t rank) {
  std::vector<int64_t> perm;
  if (std::string err = resolve_perm(a, rank, perm); !err.empty()) fail("Transpose: ", err);
  return perm;
}

extern const std::vector<const OpDef*> transpose_ops;
const std::vector<const OpDef*> transpose_ops = {&transpose};

}  // namespace monet::ops
