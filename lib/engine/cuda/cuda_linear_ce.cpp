// LinearCrossEntropy and its gradient on the GPU (lib/ops/linear_cross_entropy: the spec and the CPU reference), in
// the CPU kernel's chunks of rows and order:
//   forward, per chunk: Z_c = H_c op(W) [+ B] by cuBLAS into workspace (with a bias each row first set to it, then
//     the product added, as MatMul does) (copied to the logits output where it is written:
//     the same call either way, so the same bits, also when the gradient recomputes it); the cross-entropy row kernels (kernels.h cross_entropy_rows) write each row's term into the losses. A label
//     outside [0, V) fails the node once the chunks are done (one flag per chunk, read back together).
//   gradient, per chunk: Z_c recomputed by cuBLAS into workspace (recompute) or read from the logits (logits); the
//     row kernels turn it into dZ_c = (softmax - onehot) * dlosses in workspace (in place where recomputed);
//     dH_c = dZ_c op(W)^T and dW (+)= H_c^T dZ_c (dZ_c^T H_c with trans_b) by cuBLAS, dW accumulated over the chunks
//     in order (beta 1 after the first); dB, the first chunk's column sums (reduce_to, in double), then each later
//     chunk's added to it: the same bits on every run.
// cuBLAS runs in full fp32 on the first kCublasWorkspaceBytes of the node's workspace (cuda_gemm.cpp).
//
// Workspace (a pure function of the shapes; 256-byte-aligned pieces):
//   [cublas | one chunk of logits, chunk_rows x V floats | the row kernels' partials | one flag per chunk
//    | with a bias: the column sums' partials | one chunk's column sums, V floats]
#include <algorithm>
#include <vector>

#include "engine/cuda/cuda_ops.h"
#include "ops/common/plans.h"

namespace monet::cuda {
namespace {

struct Layout {
  ops::LinearCeGeom g;
  int64_t chunks = 0;
  int64_t logits_at = 0, partial_at = 0, flags_at = 0, sum_partial_at = 0, sums_at = 0, bytes = 0;
};

// The column sums of a chunk of `rows` rows of V logits.
ReduceGeom column_sums(int64_t rows, int64_t V) { return reduce_geom(Shape{rows, V}, Shape{V}); }

// The node's geometry; h and w as LinearCrossEntropy takes them (its inputs 0 and 1, the gradient's 1 and 2);
// bias: the gradient of a head with a bias (its column sums' room).
Layout layout(const Node& n, const Shape& h, const Shape& w, bool bias) {
  Layout l;
  l.g = ops::linear_ce_geometry(n, h, w);
  l.chunks = (l.g.R + l.g.chunk - 1) / l.g.chunk;
  l.logits_at = kCublasWorkspaceBytes;
  l.partial_at = l.logits_at + align_up(l.g.chunk * l.g.V * 4);
  l.flags_at = l.partial_at + align_up(softmax_cross_entropy_parts(l.g.chunk, l.g.V, 1) * 8);
  l.sum_partial_at = l.flags_at + align_up(std::max<int64_t>(l.chunks, 1) * 4);
  l.sums_at = l.sum_partial_at;
  if (bias) {
    // The widest split of the chunks' two row counts (a full chunk, the last one).
    const int64_t last = l.g.R - (l.chunks - 1) * l.g.chunk;
    l.sums_at += align_up(std::max(reduce_to_workspace_bytes(column_sums(l.g.chunk, l.g.V)),
                                   reduce_to_workspace_bytes(column_sums(std::max<int64_t>(last, 1), l.g.V))));
  }
  l.bytes = l.sums_at + (bias ? align_up(l.g.V * 4) : 0);
  return l;
}

template <class T>
T* at(const CudaCall& c, int64_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(c.workspace) + offset);
}

// Z_c (rows, V) = H_c op(W) [+ bias] for rows [r0, r0 + rows).
void chunk_logits(const CudaCall& c, const ops::LinearCeGeom& g, const float* h, const float* w, const float* bias,
                  int64_t r0, int64_t rows, float* z) {
  // The bias is V contiguous floats whatever its shape ((V) or (1, ..., 1, V)).
  if (bias) binary_op(c, Binary::copy_a, Shape{rows, g.V}, Shape{g.V}, bias, Shape{g.V}, nullptr, z);
  gemm_rm_batched(c, false, g.trans_b, rows, g.V, g.D, 1.f, h + r0 * g.D, g.D, 0, w, g.trans_b ? g.D : g.V, 0,
                  bias ? 1.f : 0.f, z, g.V, 0, 1);
}

int64_t lce_workspace(const Graph& gr, const Node& n, CudaContext&) {
  return layout(n, gr.values[n.inputs[0]].shape, gr.values[n.inputs[1]].shape, false).bytes;
}

int64_t lce_grad_workspace(const Graph& gr, const Node& n, CudaContext&) {
  return layout(n, gr.values[n.inputs[1]].shape, gr.values[n.inputs[2]].shape, n.inputs.size() == 6).bytes;
}

void run_lce(const CudaCall& c) {
  const Layout l = layout(c.node, c.in_shape(0), c.in_shape(1), false);
  const ops::LinearCeGeom& g = l.g;
  MONET_CHECK(c.workspace_bytes >= l.bytes, "LinearCrossEntropy workspace too small");
  bind_cublas_workspace(c);
  const float* h = c.fin(0);
  const float* w = c.fin(1);
  const auto* labels = static_cast<const int64_t*>(c.in[2].data);
  const bool has_bias = c.in.size() == 4;
  const float* bias = has_bias ? c.fin(3) : nullptr;
  float* losses = c.fout(0);
  float* logits = c.fout(1);  // null where no step reads them
  int* flags = at<int>(c, l.flags_at);
  for (int64_t k = 0, r0 = 0; r0 < g.R; ++k, r0 += g.chunk) {
    const int64_t rows = std::min(g.chunk, g.R - r0);
    float* z = at<float>(c, l.logits_at);
    chunk_logits(c, g, h, w, bias, r0, rows, z);
    if (logits)
      MONET_CUDA_CHECK(cudaMemcpyAsync(logits + r0 * g.V, z, static_cast<size_t>(rows * g.V * 4),
                                       cudaMemcpyDeviceToDevice, c.ctx.stream));
    MONET_CUDA_CHECK(cross_entropy_rows(rows, g.V, z, labels + r0, at<double>(c, l.partial_at), flags + k,
                                        losses + r0, c.ctx.stream));
  }
  std::vector<int> bad(static_cast<size_t>(l.chunks), 0);
  if (l.chunks > 0)  // once per step
    MONET_CUDA_CHECK(cudaMemcpy(bad.data(), flags, bad.size() * sizeof(int), cudaMemcpyDeviceToHost));
  if (std::any_of(bad.begin(), bad.end(), [](int b) { return b != 0; }))
    fail("LinearCrossEntropy: a label is out of range [0, ", g.V, ")");
}

void run_lce_grad(const CudaCall& c) {
  const bool has_bias = c.in.size() == 6;
  const Layout l = layout(c.node, c.in_shape(1), c.in_shape(2), has_bias);
  const ops::LinearCeGeom& g = l.g;
  MONET_CHECK(c.workspace_bytes >= l.bytes, "LinearCrossEntropyGrad workspace too small");
  bind_cublas_workspace(c);
  const bool recompute = c.impl == 1;
  const float* dl = c.fin(0);
  const float* h = c.fin(1);
  const float* w = c.fin(2);
  const auto* labels = static_cast<const int64_t*>(c.in[3].data);
  const float* logits = c.fin(4);  // the logits implementation only
  const float* bias = has_bias ? c.fin(5) : nullptr;  // the recompute implementation only
  float* dh = c.fout(0);
  float* dw = c.fout(1);
  float* db = has_bias ? c.fout(2) : nullptr;
  float* dz = at<float>(c, l.logits_at);
  for (int64_t r0 = 0; r0 < g.R; r0 += g.chunk) {
    const int64_t rows = std::min(g.chunk, g.R - r0);
    if (recompute) chunk_logits(c, g, h, w, bias, r0, rows, dz);
    const float* z = recompute ? dz : logits + r0 * g.V;
    MONET_CUDA_CHECK(cross_entropy_rows_grad(rows, g.V, dl + r0, z, labels + r0, dz, c.ctx.stream));
    gemm_rm_batched(c, false, !g.trans_b, rows, g.D, g.V, 1.f, dz, g.V, 0, w, g.trans_b ? g.D : g.V, 0, 0.f,
                    dh + r0 * g.D, g.D, 0, 1);
    const float beta = r0 == 0 ? 0.f : 1.f;
    if (g.trans_b)
      gemm_rm_batched(c, true, false, g.V, g.D, rows, 1.f, dz, g.V, 0, h + r0 * g.D, g.D, 0, beta, dw, g.D, 0, 1);
    else
      gemm_rm_batched(c, true, false, g.D, g.V, rows, 1.f, h + r0 * g.D, g.D, 0, dz, g.V, 0, beta, dw, g.V, 0, 1);
    if (db) {
      float* sums = r0 == 0 ? db : at<float>(c, l.sums_at);
      MONET_CUDA_CHECK(reduce_to(Term::x, column_sums(rows, g.V), dz, nullptr, nullptr, sums, 1.0,
                                 at<double>(c, l.sum_partial_at), c.ctx.stream));
      if (r0 > 0) binary_op(c, Binary::add, Shape{g.V}, Shape{g.V}, db, Shape{g.V}, sums, db);
    }
  }
  if (g.R == 0) MONET_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(g.D * g.V * 4), c.ctx.stream));
  if (db && g.R == 0) MONET_CUDA_CHECK(cudaMemsetAsync(db, 0, static_cast<size_t>(g.V * 4), c.ctx.stream));
}

}  // namespace

void add_linear_ce_kernels(CudaKernelTable& t) {
  t["LinearCrossEntropy"] = {run_lce, lce_workspace};
  t["LinearCrossEntropyGrad"] = {run_lce_grad, lce_grad_workspace};
}

}  // namespace monet::cuda
