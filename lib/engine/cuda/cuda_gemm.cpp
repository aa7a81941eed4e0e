// Gemm, MatMul and their gradients on cuBLAS, transcribed from the CPU kernels (lib/ops/gemm, lib/ops/matmul):
// the same row-major products with the same transposes, through gemm_rm(), which is ops::blas_gemm's contract
// on cuBLAS (column-major: C^T = op(B)^T op(A)^T, so A and B swap places). cuBLAS runs in CUBLAS_DEFAULT_MATH
// (full fp32, no TF32). Its workspace is the node's arena workspace (cublasSetWorkspace before every call), so
// cuBLAS allocates nothing during a step.
#include "engine/cuda/cuda_ops.h"
#include "ops/common/broadcast.h"

namespace monet::cuda {
namespace {

// cuBLAS's recommended workspace on Hopper (32 MiB; 4 MiB suffices before it).
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

void bind_workspace(const CudaCall& c) {
  MONET_CHECK(c.workspace_bytes >= kCublasWorkspaceBytes && c.workspace);
  MONET_CUBLAS_CHECK(cublasSetWorkspace(c.ctx.cublas, c.workspace, static_cast<size_t>(c.workspace_bytes)));
}

int i32(int64_t v) {
  MONET_CHECK(v <= INT32_MAX, "GEMM dimension ", v, " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

// Row-major C (m, n) = alpha op(A) op(B) + beta C, op(A) (m, k), op(B) (k, n); lda/ldb/ldc row strides as stored.
void gemm_rm(const CudaCall& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* out, int64_t ldc) {
  MONET_CUBLAS_CHECK(cublasSgemm(c.ctx.cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, i32(n),
                                 i32(m), i32(k), &alpha, b, i32(ldb), a, i32(lda), &beta, out, i32(ldc)));
}

// The same for `count` products at element strides sa, sb, sc.
void gemm_rm_batched(const CudaCall& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                     float* out, int64_t ldc, int64_t sc, int64_t count) {
  MONET_CUBLAS_CHECK(cublasSgemmStridedBatched(c.ctx.cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                               ta ? CUBLAS_OP_T : CUBLAS_OP_N, i32(n), i32(m), i32(k), &alpha, b,
                                               i32(ldb), sb, a, i32(lda), sa, &beta, out, i32(ldc), sc, i32(count)));
}

int64_t gemm_workspace(const Graph&, const Node&, CudaContext&) { return kCublasWorkspaceBytes; }

// ---------------------------------------------------------------------------------------------- Gemm

void run_gemm(const CudaCall& c) {
  bind_workspace(c);
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
  bind_workspace(c);
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
  bind_workspace(c);
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
// products accumulate onto it (beta 1), as run_gemm does with C.
void run_matmul(const CudaCall& c) {
  bind_workspace(c);
  const MatMulDims d = matmul_dims(c.in_shape(0), product_b(c, c.in_shape(1)));
  const int64_t n = d.n, k = d.k, m = d.m;
  const float *a = c.fin(0), *b = c.fin(1);
  float* y = c.fout(0);
  float beta = 0.f;
  if (c.in.size() == 3) {
    binary_op(c, Binary::copy_a, c.out_shape(0), c.in_shape(2), c.fin(2), c.in_shape(2), nullptr, y);
    beta = 1.f;
  }
  if (numel(d.batch_b) == 1) {  // one B for all: A's batch stacked into rows, one GEMM
    const bool tb = trans_b(c);
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
void run_matmul_grad_a(const CudaCall& c) {
  bind_workspace(c);
  const MatMulDims d = matmul_dims(c.out_shape(0), product_b(c, c.in_shape(1)));
  const int64_t n = d.n, k = d.k, m = d.m;
  const float *dy = c.fin(0), *b = c.fin(1);
  float* da = c.fout(0);
  if (numel(d.batch_b) == 1) {  // dA = dY B^T; B stored (m, k) under trans_b is B^T as stored
    const bool tb = trans_b(c);
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
void run_matmul_grad_b(const CudaCall& c) {
  bind_workspace(c);
  const MatMulDims d = matmul_dims(c.in_shape(0), product_b(c, c.out_shape(0)));
  const int64_t n = d.n, k = d.k, m = d.m;
  const float *a = c.fin(0), *dy = c.fin(1);
  float* db = c.fout(0);
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

void add_gemm_kernels(CudaKernelTable& t) {
  t["Gemm"] = {run_gemm, gemm_workspace};
  t["GemmGradA"] = {run_gemm_grad_a, gemm_workspace};
  t["GemmGradB"] = {run_gemm_grad_b, gemm_workspace};
  t["GemmGradC"] = {run_gemm_grad_c};
  t["MatMul"] = {run_matmul, gemm_workspace};
  t["MatMulGradA"] = {run_matmul_grad_a, gemm_workspace};
  t["MatMulGradB"] = {run_matmul_grad_b, gemm_workspace};
}

}  // namespace monet::cuda
