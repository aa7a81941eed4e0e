// MatMul (ONNX opset 13) with numpy semantics: A (..., n, k) @ B (..., k, m) -> Y (..., n, m), batch dimensions
// broadcast; a 1-D A is promoted to (1, k) and a 1-D B to (k, 1), and the promoted dimension is removed from Y.
// Backward ops: MatMulGradA(dY, B) -> dA and MatMulGradB(A, dY) -> dB, each summing over the batch entries that
// broadcasting replicated its operand to (the ReduceSumTo of the batch dims, folded into the GEMM accumulation).
// Parameter roles {none, weight_kn, bias}: a MatMul weight is laid out (K, N), as PyTorch exports Linear without Gemm.
// Attribute trans_b (MatMul and both gradients): a 2-D B stored as (m, k), read transposed, and its gradient written
// so: the import's rewrite of MatMul(A, Transpose(W)) (lib/ir/matmul_transpose.h).
// An optional third input, a bias of m elements (shape (m) or (1, ..., 1, m), rank at most Y's), is added to every
// row of Y: the import's rewrite of MatMul -> Add(bias) (lib/ir/matmul_bias.h). Y is filled with the bias and the
// product accumulated onto it (beta 1): the same sum as the Add after the product to rounding (BLAS may add into Y
// once per block of k, so the bias can join the sum earlier than the Add did); its gradient is dY summed to the
// bias's shape (ReduceSumTo), as Add's.
// Attribute a_perm (MatMul and both gradients): A stored as its producer wrote it and read through a Transpose of
// its leading dims that swaps two blocks of them (ops/common/plans.h row_swap), with a 2-D B: the import's rewrite
// of MatMul(Transpose(X), W) (lib/ir/matmul_rows.h). Y has the transposed rows' shape; dA (MatMulGradA's a_shape)
// is written as A is stored. The products run over blocks of rows with one stride each (row_blocks).
#include <algorithm>

#include "ops/common/binary.h"
#include "ops/common/blas.h"
#include "ops/common/broadcast.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// Shapes of one MatMul after promoting 1-D operands: every batch entry is an (n, k) @ (k, m) product.
struct MatMulDims {
  Shape batch_a, batch_b, batch;  // batch dims of A, B and their broadcast (Y's)
  int64_t n = 1, k = 1, m = 1;
  Shape out;                      // Y's shape
};

// Throws an unprefixed monet::Error when A and B do not multiply.
MatMulDims matmul_dims(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) fail("MatMul operands must have rank >= 1, got ", shape_str(a), " and ", shape_str(b));
  MatMulDims d;
  const Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;  // (..., n, k)
  const Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;  // (..., k, m)
  d.n = a2[a2.size() - 2], d.k = a2.back(), d.m = b2.back();
  if (b2[b2.size() - 2] != d.k)
    fail("A ", shape_str(a), " and B ", shape_str(b), " do not multiply: inner dimensions ", d.k, " and ",
         b2[b2.size() - 2]);
  d.batch_a.assign(a2.begin(), a2.end() - 2);
  d.batch_b.assign(b2.begin(), b2.end() - 2);
  auto batch = broadcast_shapes(d.batch_a, d.batch_b);
  if (!batch) fail("batch dimensions of A ", shape_str(a), " and B ", shape_str(b), " do not broadcast");
  d.batch = *batch;
  d.out = d.batch;
  if (a.size() != 1) d.out.push_back(d.n);
  if (b.size() != 1) d.out.push_back(d.m);
  return d;
}

// trans_b: B is stored transposed, (m, k) for the product's (k, m); the import's rewrite of MatMul(A, Transpose(W))
// (lib/ir/matmul_transpose.h) sets it, for 2-D B only.
bool trans_b(const Node& node) { return node.attrs.i("trans_b", 0) != 0; }

// a_perm: A stored (..., k) is read as Transpose(A, a_perm), rows swapped in two blocks; nullopt without the attr.
std::optional<RowSwap> a_swap(const Node& node, const Shape& a) {
  if (!node.attrs.has("a_perm")) return std::nullopt;
  const std::vector<int64_t> perm = node.attrs.ints("a_perm");
  std::optional<RowSwap> s = row_swap(a, perm);
  if (!s) fail("a_perm ", shape_str(perm), " does not swap two blocks of the leading dims of A ", shape_str(a));
  return s;
}

// A's shape as the product reads it: `a` as stored, its dims permuted by a_perm where the node has one.
Shape product_a(const Node& node, const Shape& a) {
  if (!a_swap(node, a)) return a;
  const std::vector<int64_t> perm = node.attrs.ints("a_perm");
  Shape p(a.size());
  for (size_t i = 0; i < a.size(); ++i) p[i] = a[static_cast<size_t>(perm[i])];
  return p;
}

// `a` is A as stored (MatMul's input, MatMulGradA's a_shape, MatMulGradB's input).
MatMulDims dims_of(const Node& node, const Shape& a, const Shape& b) {
  try {
    if (trans_b(node) && b.size() != 2) fail("trans_b takes a 2-D B, got ", shape_str(b));
    const Shape pb = trans_b(node) ? Shape{b[1], b[0]} : b;
    const Shape pa = product_a(node, a);
    if (node.attrs.has("a_perm") && pb.size() != 2) fail("a_perm takes a 2-D B, got ", shape_str(b));
    return matmul_dims(pa, pb);
  } catch (const Error& e) {
    fail("node '", node.name, "' (", node.op, "): ", e.what());
  }
}

// ---------------------------------------------------------------------------------------------- MatMul

void infer_matmul(InferCtx& c) {
  c.expect_inputs(2, 3);
  const MatMulDims d = dims_of(c.node(), c.shape(0), c.shape(1));
  if (c.num_inputs() == 3 && !matmul_bias_fits(c.shape(2), d.out, c.shape(1)))
    c.fail("bias ", shape_str(c.shape(2)), " is not one value per column of Y ", shape_str(d.out));
  c.set_out(0, d.out);
}

void backward_matmul(GradBuilder& b) {
  const int dy = b.grad_out(0);
  if (dy < 0) return;
  // B's gradient (a Linear layer's weight) before A's, as for Conv (conv.cpp says why).
  const bool tb = trans_b(b.node());
  const bool perm = b.node().attrs.has("a_perm");
  auto layout = [&](Attrs& a) {  // how both gradients read A and B, as the forward does
    if (tb) a.set("trans_b", int64_t{1});
    if (perm) a.set("a_perm", b.node().attrs.ints("a_perm"));
  };
  if (b.needs_grad(1)) {
    Attrs a;
    a.set("b_shape", b.value(b.in(1)).shape);
    layout(a);
    b.set_grad(1, b.emit1("MatMulGradB", {b.in(0), dy}, a));
  }
  if (b.needs_grad(0)) {
    Attrs a;
    a.set("a_shape", b.value(b.in(0)).shape);
    layout(a);
    b.set_grad(0, b.emit1("MatMulGradA", {dy, b.in(1)}, a));
  }
  if (b.node().inputs.size() == 3 && b.needs_grad(2)) b.set_grad(2, sum_to_input(b, 2, dy));
}

template <class T>
void matmul_cpu(const CpuCall& c) {
  const MatMulDims d = dims_of(c.node, *c.in[0].shape, *c.in[1].shape);
  const int64_t n = d.n, k = d.k, m = d.m;
  const T* a = c.in[0].as<T>();  // (batch_a, n, k)
  const T* b = c.in[1].as<T>();  // (batch_b, k, m)
  T* y = c.out[0].as<T>();       // (batch, n, m)
  T beta(0);
  if (c.in.size() == 3) {        // every row of Y starts as the bias
    const T* bias = c.in[2].as<T>();
    for (int64_t r = 0; r < numel(d.batch) * n; ++r) std::copy(bias, bias + m, y + r * m);
    beta = T(1);
  }
  const bool tb = trans_b(c.node);
  if (const std::optional<RowBlocks> r = matmul_row_blocks(c.node, *c.in[0].shape)) {  // Y's rows by block
    for (int64_t i = 0; i < r->count; ++i)
      blas_gemm(false, tb, r->rows, m, k, T(1), a + i * r->stored_step * k, r->stored_stride * k, b, tb ? k : m,
                beta, y + i * r->product_step * m, r->product_stride * m);
    return;
  }
  if (numel(d.batch_b) == 1) {   // one B for all: stack A's batch into rows, one GEMM (B stored (m, k) if trans_b)
    blas_gemm(false, tb, numel(d.batch) * n, m, k, T(1), a, k, b, tb ? k : m, beta, y, m);
    return;
  }
  const std::vector<int64_t> ia = broadcast_offsets(d.batch_a, d.batch);  // batch entry of A per entry of Y
  const std::vector<int64_t> ib = broadcast_offsets(d.batch_b, d.batch);
  for (size_t i = 0; i < ia.size(); ++i)
    blas_gemm(false, false, n, m, k, T(1), a + ia[i] * n * k, k, b + ib[i] * k * m, m, beta, y + i * n * m, m);
}

// ---------------------------------------------------------------------------------------------- MatMulGradA

// MatMulGradA(dY, B) -> dA, attr a_shape (A as stored): dA_i += dY_j B_j^T over the batch entries j that read A_i.
void infer_matmul_grad_a(InferCtx& c) {
  c.expect_inputs(2, 2);
  Shape as = c.attrs().ints("a_shape");
  MatMulDims d = dims_of(c.node(), as, c.shape(1));
  if (c.shape(0) != d.out) c.fail("dY has shape ", shape_str(c.shape(0)), ", expected ", shape_str(d.out));
  c.set_out(0, as);
}

template <class T>
void matmul_grad_a_cpu(const CpuCall& c) {
  const MatMulDims d = dims_of(c.node, *c.out[0].shape, *c.in[1].shape);
  const int64_t n = d.n, k = d.k, m = d.m;
  const T* dy = c.in[0].as<T>();  // (batch, n, m)
  const T* b = c.in[1].as<T>();   // (batch_b, k, m)
  T* da = c.out[0].as<T>();       // (batch_a, n, k)
  const bool tb = trans_b(c.node);  // B stored (m, k): B^T as stored
  if (const std::optional<RowBlocks> r = matmul_row_blocks(c.node, *c.out[0].shape)) {  // dA as A is stored
    for (int64_t i = 0; i < r->count; ++i)
      blas_gemm(false, !tb, r->rows, k, m, T(1), dy + i * r->product_step * m, r->product_stride * m, b,
                tb ? k : m, T(0), da + i * r->stored_step * k, r->stored_stride * k);
    return;
  }
  if (numel(d.batch_b) == 1) {    // A is not broadcast then: dA (batch*n, k) = dY (batch*n, m) B^T (m, k)
    blas_gemm(false, !tb, numel(d.batch) * n, k, m, T(1), dy, m, b, tb ? k : m, T(0), da, k);
    return;
  }
  std::fill(da, da + c.out[0].numel(), T(0));
  const std::vector<int64_t> ia = broadcast_offsets(d.batch_a, d.batch);
  const std::vector<int64_t> ib = broadcast_offsets(d.batch_b, d.batch);
  for (size_t i = 0; i < ia.size(); ++i)
    blas_gemm(false, true, n, k, m, T(1), dy + i * n * m, m, b + ib[i] * k * m, m, T(1), da + ia[i] * n * k, k);
}

// ---------------------------------------------------------------------------------------------- MatMulGradB

// MatMulGradB(A, dY) -> dB, attr b_shape: dB_i += A_j^T dY_j over the batch entries j that read B_i.
void infer_matmul_grad_b(InferCtx& c) {
  c.expect_inputs(2, 2);
  Shape bs = c.attrs().ints("b_shape");
  MatMulDims d = dims_of(c.node(), c.shape(0), bs);
  if (c.shape(1) != d.out) c.fail("dY has shape ", shape_str(c.shape(1)), ", expected ", shape_str(d.out));
  c.set_out(0, bs);
}

template <class T>
void matmul_grad_b_cpu(const CpuCall& c) {
  const MatMulDims d = dims_of(c.node, *c.in[0].shape, *c.out[0].shape);
  const int64_t n = d.n, k = d.k, m = d.m;
  const T* a = c.in[0].as<T>();   // (batch_a, n, k)
  const T* dy = c.in[1].as<T>();  // (batch, n, m)
  T* db = c.out[0].as<T>();       // (batch_b, k, m)
  if (const std::optional<RowBlocks> r = matmul_row_blocks(c.node, *c.in[0].shape)) {  // block by block, in order
    const int64_t lda = r->stored_stride * k, ldy = r->product_stride * m;
    for (int64_t i = 0; i < r->count; ++i) {
      const T* ai = a + i * r->stored_step * k;
      const T* dyi = dy + i * r->product_step * m;
      const T beta = i == 0 ? T(0) : T(1);
      if (trans_b(c.node))
        blas_gemm(true, false, m, k, r->rows, T(1), dyi, ldy, ai, lda, beta, db, k);
      else
        blas_gemm(true, false, k, m, r->rows, T(1), ai, lda, dyi, ldy, beta, db, m);
    }
    return;
  }
  if (numel(d.batch_b) == 1) {    // one B for all: dB (k, m) = A^T (k, batch*n) dY (batch*n, m)
    if (trans_b(c.node))          // dB stored (m, k) = dY^T (m, batch*n) A (batch*n, k)
      blas_gemm(true, false, m, k, numel(d.batch) * n, T(1), dy, m, a, k, T(0), db, k);
    else
      blas_gemm(true, false, k, m, numel(d.batch) * n, T(1), a, k, dy, m, T(0), db, m);
    return;
  }
  std::fill(db, db + c.out[0].numel(), T(0));
  const std::vector<int64_t> ia = broadcast_offsets(d.batch_a, d.batch);
  const std::vector<int64_t> ib = broadcast_offsets(d.batch_b, d.batch);
  for (size_t i = 0; i < ib.size(); ++i)
    blas_gemm(true, false, k, m, n, T(1), a + ia[i] * n * k, k, dy + i * n * m, m, T(1), db + ib[i] * k * m, m);
}

// ---------------------------------------------------------------------------------------------- flops

// MatMul and both gradients: one (n, k) x (k, m) product per broadcast batch entry, 2 * batch * n * k * m.
double matmul_flops(const Graph& gr, const Node& node) {
  const MatMulDims d = dims_of(node, gr.values[node.inputs[0]].shape, gr.values[node.inputs[1]].shape);
  return 2.0 * numel(d.batch) * d.n * d.k * d.m;
}

double matmul_grad_a_flops(const Graph& gr, const Node& node) {
  const MatMulDims d = dims_of(node, node.attrs.ints("a_shape"), gr.values[node.inputs[1]].shape);
  return 2.0 * numel(d.batch) * d.n * d.k * d.m;
}

double matmul_grad_b_flops(const Graph& gr, const Node& node) {
  const MatMulDims d = dims_of(node, gr.values[node.inputs[0]].shape, node.attrs.ints("b_shape"));
  return 2.0 * numel(d.batch) * d.n * d.k * d.m;
}

const OpDef matmul = {.name = "MatMul", .infer = infer_matmul, .backward = backward_matmul,
                      .cpu_f32 = matmul_cpu<float>, .cpu_f64 = matmul_cpu<double>,
                      .param_roles = {ParamRole::none, ParamRole::weight_kn, ParamRole::bias},
                      .flops = matmul_flops};
const OpDef matmul_grad_a = {.name = "MatMulGradA", .infer = infer_matmul_grad_a,
                             .cpu_f32 = matmul_grad_a_cpu<float>, .cpu_f64 = matmul_grad_a_cpu<double>,
                             .flops = matmul_grad_a_flops};
const OpDef matmul_grad_b = {.name = "MatMulGradB", .infer = infer_matmul_grad_b,
                             .cpu_f32 = matmul_grad_b_cpu<float>, .cpu_f64 = matmul_grad_b_cpu<double>,
                             .flops = matmul_grad_b_flops};

}  // namespace

// For the import's rewrite (ops/common/plans.h).
bool matmul_bias_fits(const Shape& bias, const Shape& y, const Shape& w) {
  if (w.size() < 2 || bias.empty() || bias.size() > y.size() || bias.back() != y.back()) return false;
  return std::all_of(bias.begin(), bias.end() - 1, [](int64_t d) { return d == 1; });
}

std::optional<RowSwap> row_swap(const Shape& stored, const std::vector<int64_t>& perm) {
  const size_t r = stored.size();
  if (r < 3 || perm.size() != r || perm[r - 1] != static_cast<int64_t>(r - 1)) return std::nullopt;
  for (size_t s = 1; s + 1 < r; ++s) {  // perm's leading part = (s, ..., r-2, 0, ..., s-1)?
    bool rotation = true;
    for (size_t i = 0; i + 1 < r && rotation; ++i)
      rotation = perm[i] == static_cast<int64_t>(i + s < r - 1 ? i + s : i + s - (r - 1));
    if (!rotation) continue;
    RowSwap w;
    for (size_t i = 0; i < s; ++i) w.Q *= stored[i];
    for (size_t i = s; i + 1 < r; ++i) w.P *= stored[i];
    return w;
  }
  return std::nullopt;
}

RowBlocks row_blocks(RowSwap s) {
  RowBlocks b;
  if (s.Q <= s.P) {  // block j < Q: stored rows j*P .. j*P + P-1, product rows j, j + Q, ...
    b.count = s.Q, b.rows = s.P;
    b.stored_step = s.P, b.stored_stride = 1, b.product_step = 1, b.product_stride = s.Q;
  } else {           // block i < P: stored rows i, i + P, ..., product rows i*Q .. i*Q + Q-1
    b.count = s.P, b.rows = s.Q;
    b.stored_step = 1, b.stored_stride = s.P, b.product_step = s.Q, b.product_stride = 1;
  }
  return b;
}

std::optional<RowBlocks> matmul_row_blocks(const Node& node, const Shape& stored_a) {
  const std::optional<RowSwap> s = a_swap(node, stored_a);
  return s ? std::optional<RowBlocks>(row_blocks(*s)) : std::nullopt;
}

extern const std::vector<const OpDef*> matmul_ops;
const std::vector<const OpDef*> matmul_ops = {&matmul, &matmul_grad_a, &matmul_grad_b};

}  // namespace monet::ops
