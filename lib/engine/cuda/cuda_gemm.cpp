// Gemm, MatMul and their gradients on cuBLAS, transcribed from the CPU kernels (lib/ops/gemm, lib/ops/matmul):
// the same row-major products with the same transposes, through gemm_rm(), which is ops::blas_gemm's contract
// on cuBLAS (column-major: C^T = op(B)^T op(A)^T, so A and B swap places). cuBLAS runs in CUBLAS_DEFAULT_MATH
// (full fp32, no TF32). Its workspace is the node's arena workspace (cublasSetWorkspace before every call), so
// cuBLAS allocates nothing during a step.
#include <algorithm>
#include <optional>

#include "engine/cuda/cuda_ops.h"
#include "ops/common/broadcast.h"
#include "ops/common/plans.h"

namespace monet::cuda {
namespace {

// Row-major C (m, n) = alpha op(A) op(B) + beta C, op(A) (m, k), op(B) (k, n); lda/ldb/ldc row strides as stored.
void gemm_rm(const CudaCall& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* out, int64_t ldc) {
  MONET_CUBLAS_CHECK(cublasSgemm(c.ctx.cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 cublas_int(n), cublas_int(m), cublas_int(k), &alpha, b, cublas_int(ldb), a,
                                 cublas_int(lda), &beta, out, cublas_int(ldc)));
}

int64_t gemm_workspace(const Graph&, const Node&, CudaContext&) { return kCublasWorkspaceBytes; }

// MatMulGradB with a_perm: cuBLAS's, then A's rows in the product's order (run_matmul_grad_b), 256-byte aligned.
int64_t matmul_grad_b_workspace(const Graph& g, const Node& n, CudaContext&) {
  if (!n.attrs.has("a_perm")) return kCublasWorkspaceBytes;
  const int64_t bytes = numel(g.values[n.inputs[0]].shape) * 4;
  return kCublasWorkspaceBytes + (bytes + 255) / 256 * 256;
}

// ---------------------------------------------------------------------------------------------- Gemm

void run_gemm(const CudaCall& c) {
  bind_cublas_workspace(c);
  const Attrs& at = c.node.attrs;
  const bool ta = at.i("transA", 0) != 0, tb = at.i("transB", 0) != 0;
  const float alpha = static_cast<float>(at.f("alpha", 1.0)), beta = static_cast<float>(at.f("beta", 1.0));
  const Shape& as = c.in_shape(0);
  const int64_t M = ta ? as[1] : as[0], K = ta ? as[0] : as[1];
  const int64_t N = c.out_shape(0)[1];
  const bool has_c = c.in.size() == 3 && beta != 0.f;
  if (has_c)  // y = C broadcast to (M, N), then y = alpha A'B' + beta y
    binary_op(c, Binary::copy_a, c.out_shape(0), c.in_shape(2), c.fin(2), c.in_shape(2), nullptr, c.fout(0));
  gemm_rm(c, ta, tb, M, N, K, alpha, c.fin(0), ta ? M : K, c.fin(1), tb ? K : N, has_c ? beta : 0.f, c.fout(0), N);
}

void run_gemm_grad_a(const CudaCall& c) {
  bind_cublas_workspace(c);
  const Attrs& at = c.node.attrs;
  const bool ta = at.i("transA") != 0, tb = at.i("transB") != 0;
  const float alpha = static_cast<float>(at.f("alpha"));
  const int64_t M = c.in_shape(0)[0], N = c.in_shape(0)[1];
  const int64_t K = tb ? c.in_shape(1)[1] : c.in_shape(1)[0];
  const int64_t ldb = tb ? K : N;
  if (!ta)  // dA (M, K) = alpha dY (M, N) B'^T (N, K)
    gemm_rm(c, false, !tb, M, K, N, alpha, c.fin(0), N, c.fin(1), ldb, 0.f, c.fout(0), K);
  else      // dA (K, M) = alpha B' (K, N) dY^T (N, M)
    gemm_rm(c, tb, true, K, M, N, alpha, c.fin(1), ldb, c.fin(0), N, 0.f, c.fout(0), M);
}

void run_gemm_grad_b(const CudaCall& c) {
  bind_cublas_workspace(c);
  const Attrs& at = c.node.attrs;
  const bool ta = at.i("transA") != 0, tb = at.i("transB") != 0;
  const float alpha = static_cast<float>(at.f("alpha"));
  const int64_t M = c.in_shape(1)[0], N = c.in_shape(1)[1];
  const int64_t K = ta ? c.in_shape(0)[0] : c.in_shape(0)[1];
  const int64_t lda = ta ? M : K;
  if (!tb)  // dB (K, N) = alpha A'^T (K, M) dY (M, N)
    gemm_rm(c, !ta, false, K, N, M, alpha, c.fin(0), lda, c.fin(1), N, 0.f, c.fout(0), N);
  else      // dB (N, K) = alpha dY^T (N, M) A' (M, K)
    gemm_rm(c, true, ta, N, K, M, alpha, c.fin(1), N, c.fin(0), lda, 0.f, c.fout(0), K);
}

// GemmGradC(dY) -> beta * (dY summed to attr shape): the reduction's divisor is 1 / beta.
void run_gemm_grad_c(const CudaCall& c) {
  const double beta = c.node.attrs.f("beta");
  MONET_CHECK(beta != 0.0);
  Shape target = c.out_shape(0);  // rank 0..2, broadcast against (M, N)
  MONET_CUDA_CHECK(reduce_to(Term::x, reduce_geom(c.in_shape(0), target), c.fin(0), nullptr, nullptr, c.fout(0),
                             1.0 / beta, c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- MatMul

// MatMul's shapes after promoting 1-D operands (lib/ops/matmul's matmul_dims; the shape rule validated them).
struct MatMulDims {
  Shape batch_a, batch_b, batch;
  int64_t n = 1, k = 1, m = 1;
};

MatMulDims matmul_dims(const Shape& a, const Shape& b) {
  MatMulDims d;
  const Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  const Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  d.n = a2[a2.size() - 2], d.k = a2.back(), d.m = b2.back();
  d.batch_a.assign(a2.begin(), a2.end() - 2);
  d.batch_b.assign(b2.begin(), b2.end() - 2);
  d.batch = *ops::broadcast_shapes(d.batch_a, d.batch_b);
  return d;
}

// B as the product reads it: stored (m, k) where the node's trans_b says so (2-D only, lib/ops/matmul).
bool trans_b(const CudaCall& c) { return c.node.attrs.i("trans_b", 0) != 0; }
Shape product_b(const CudaCall& c, const Shape& b) { return trans_b(c) ? Shape{b[1], b[0]} : b; }

// Batch entry of an operand (batch dims `own`) read by each entry of the broadcast batch.
std::vector<int64_t> entry_offsets(const Shape& own, const Shape& batch) { return ops::broadcast_offsets(own, batch); }

// With a bias (a third input, one value per column: lib/ops/matmul), Y starts as the bias broadcast and the
// products accumulate onto it (beta 1), as run_gemm does with C. With a_perm (A's rows swapped in two blocks,
// ops::matmul_row_blocks), one strided-batched call over the blocks, B shared (stride 0).
void run_matmul(const CudaCall& c) {
  bind_cublas_workspace(c);
  const float *a = c.fin(0), *b = c.fin(1);
  float* y = c.fout(0);
  float beta = 0.f;
  if (c.in.size() == 3) {
    binary_op(c, Binary::copy_a, c.out_shape(0), c.in_shape(2), c.fin(2), c.in_shape(2), nullptr, y);
    beta = 1.f;
  }
  const bool tb = trans_b(c);
  if (const std::optional<ops::RowBlocks> r = ops::matmul_row_blocks(c.node, c.in_shape(0))) {
    const int64_t k = c.in_shape(0).back(), m = c.out_shape(0).back();
    gemm_rm_batched(c, false, tb, r->rows, m, k, 1.f, a, r->stored_stride * k, r->stored_step * k, b, tb ? k : m, 0,
                    beta, y, r->product_stride * m, r->product_step * m, r->count);
    return;
  }
  const MatMulDims d = matmul_dims(c.in_shape(0), product_b(c, c.in_shape(1)));
  const int64_t n = d.n, k = d.k, m = d.m;
  if (numel(d.batch_b) == 1) {  // one B for all: A's batch stacked into rows, one GEMM
    gemm_rm(c, false, tb, numel(d.batch) * n, m, k, 1.f, a, k, b, tb ? k : m, beta, y, m);
    return;
  }
  if (d.batch_a == d.batch && d.batch_b == d.batch) {  // nothing broadcast: one strided-batched call
    gemm_rm_batched(c, false, false, n, m, k, 1.f, a, k, n * k, b, m, k * m, beta, y, m, n * m, numel(d.batch));
    return;
  }
  const std::vector<int64_t> ia = entry_offsets(d.batch_a, d.batch), ib = entry_offsets(d.batch_b, d.batch);
  for (size_t i = 0; i < ia.size(); ++i)
    gemm_rm(c, false, false, n, m, k, 1.f, a + ia[i] * n * k, k, b + ib[i] * k * m, m, beta, y + i * n * m, m);
}

// MatMulGradA(dY, B) -> dA (attr a_shape): dA_i += dY_j B_j^T over the batch entries j that read A_i.
// With a_perm, dA's blocks written as A is stored, one strided-batched call.
void run_matmul_grad_a(const CudaCall& c) {
  bind_cublas_workspace(c);
  const float *dy = c.fin(0), *b = c.fin(1);
  float* da = c.fout(0);
  const bool tb = trans_b(c);  // B stored (m, k) under trans_b is B^T as stored
  if (const std::optional<ops::RowBlocks> r = ops::matmul_row_blocks(c.node, c.out_shape(0))) {
    const int64_t k = c.out_shape(0).back(), m = c.in_shape(0).back();
    gemm_rm_batched(c, false, !tb, r->rows, k, m, 1.f, dy, r->product_stride * m, r->product_step * m, b,
                    tb ? k : m, 0, 0.f, da, r->stored_stride * k, r->stored_step * k, r->count);
    return;
  }
  const MatMulDims d = matmul_dims(c.out_shape(0), product_b(c, c.in_shape(1)));
  const int64_t n = d.n, k = d.k, m = d.m;
  if (numel(d.batch_b) == 1) {  // dA = dY B^T
    gemm_rm(c, false, !tb, numel(d.batch) * n, k, m, 1.f, dy, m, b, tb ? k : m, 0.f, da, k);
    return;
  }
  if (d.batch_a == d.batch && d.batch_b == d.batch) {
    gemm_rm_batched(c, false, true, n, k, m, 1.f, dy, m, n * m, b, m, k * m, 0.f, da, k, n * k, numel(d.batch));
    return;
  }
  MONET_CUDA_CHECK(cudaMemsetAsync(da, 0, static_cast<size_t>(c.out[0].numel()) * 4, c.ctx.stream));
  const std::vector<int64_t> ia = entry_offsets(d.batch_a, d.batch), ib = entry_offsets(d.batch_b, d.batch);
  for (size_t i = 0; i < ia.size(); ++i)
    gemm_rm(c, false, true, n, k, m, 1.f, dy + i * n * m, m, b + ib[i] * k * m, m, 1.f, da + ia[i] * n * k, k);
}

// MatMulGradB(A, dY) -> dB (attr b_shape): dB_i += A_j^T dY_j over the batch entries j that read B_i.
// With a_perm, A's rows are first copied in the product's order into the workspace (one strided copy, a transient
// copy where the graph without the rewrite kept the Transpose's output from the forward to the backward), so that
// the sum over all rows stays one GEMM: a GEMM per block of rows would take K = the block's rows (BERT: 512 of
// 16384) and read and write dB once per block.
void run_matmul_grad_b(const CudaCall& c) {
  bind_cublas_workspace(c);
  const float *a = c.fin(0), *dy = c.fin(1);
  float* db = c.fout(0);
  if (c.node.attrs.has("a_perm")) {
    const Shape& as = c.in_shape(0);
    const std::optional<ops::RowSwap> s = ops::row_swap(as, c.node.attrs.ints("a_perm"));
    MONET_CHECK(s, "MatMulGradB: a_perm is no block swap of A's rows");
    MONET_CHECK(c.workspace_bytes >= matmul_grad_b_workspace(c.g, c.node, c.ctx), "workspace too small for ",
                c.node.name);
    const int64_t k = as.back();
    float* rows = reinterpret_cast<float*>(static_cast<char*>(c.workspace) + kCublasWorkspaceBytes);
    const Shape product{s->P, s->Q, k};  // row i*Q + j = stored row j*P + i
    Strides stored;
    stored.s[0] = k, stored.s[1] = s->P * k, stored.s[2] = 1;
    MONET_CUDA_CHECK(strided_copy(4, dims_of(product), stored, 0, a, contiguous_strides(product), 0, rows,
                                  c.ctx.stream));
    a = rows;
  }
  const MatMulDims d = matmul_dims(c.in_shape(0), product_b(c, c.out_shape(0)));
  const int64_t n = d.n, k = d.k, m = d.m;
  if (numel(d.batch_b) == 1) {
    if (trans_b(c))  // dB stored (m, k) = dY^T A
      gemm_rm(c, true, false, m, k, numel(d.batch) * n, 1.f, dy, m, a, k, 0.f, db, k);
    else
      gemm_rm(c, true, false, k, m, numel(d.batch) * n, 1.f, a, k, dy, m, 0.f, db, m);
    return;
  }
  if (d.batch_a == d.batch && d.batch_b == d.batch) {
    gemm_rm_batched(c, true, false, k, m, n, 1.f, a, k, n * k, dy, m, n * m, 0.f, db, m, k * m, numel(d.batch));
    return;
  }
  MONET_CUDA_CHECK(cudaMemsetAsync(db, 0, static_cast<size_t>(c.out[0].numel()) * 4, c.ctx.stream));
  const std::vector<int64_t> ia = entry_offsets(d.batch_a, d.batch), ib = entry_offsets(d.batch_b, d.batch);
  for (size_t i = 0; i < ib.size(); ++i)
    gemm_rm(c, true, false, k, m, n, 1.f, a + ia[i] * n * k, k, dy + i * n * m, m, 1.f, db + ib[i] * k * m, m);
}

}  // namespace

void bind_cublas_workspace(const CudaCall& c) {
  MONET_CHECK(c.workspace && c.workspace_bytes >= kCublasWorkspaceBytes);
  MONET_CUBLAS_CHECK(cublasSetWorkspace(c.ctx.cublas, c.workspace, static_cast<size_t>(kCublasWorkspaceBytes)));
}

int cublas_int(int64_t v) {
  MONET_CHECK(v <= INT32_MAX, "GEMM dimension ", v, " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

void gemm_rm_batched(const CudaCall& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                     float* out, int64_t ldc, int64_t sc, int64_t count) {
  constexpr int64_t kMaxGemmBatch = 65535;
  for (int64_t b0 = 0; b0 < count; b0 += kMaxGemmBatch) {
    const int64_t nb = std::min(kMaxGemmBatch, count - b0);
    MONET_CUBLAS_CHECK(cublasSgemmStridedBatched(
        c.ctx.cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, cublas_int(n), cublas_int(m),
        cublas_int(k), &alpha, b + b0 * sb, cublas_int(ldb), sb, a + b0 * sa, cublas_int(lda), sa, &beta,
        out + b0 * sc, cublas_int(ldc), sc, cublas_int(nb)));
  }
}

void add_gemm_kernels(CudaKernelTable& t) {
  t["Gemm"] = {run_gemm, gemm_workspace};
  t["GemmGradA"] = {run_gemm_grad_a, gemm_workspace};
  t["GemmGradB"] = {run_gemm_grad_b, gemm_workspace};
  t["GemmGradC"] = {run_gemm_grad_c};
  t["MatMul"] = {run_matmul, gemm_workspace};
  t["MatMulGradA"] = {run_matmul_grad_a, gemm_workspace};
  t["MatMulGradB"] = {run_matmul_grad_b, matmul_grad_b_workspace};
}

}  // namespace monet::cuda
