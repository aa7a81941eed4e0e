// Launchers of the fused Attention op's own CUDA kernels (attention_kernels.cu; the host side, with the cuBLAS
// products, is cuda_attention.cpp). Included by nvcc (C++17) and by the C++20 host code: plain structs and
// declarations only, as kernels.h. Every launcher enqueues on `stream` and returns cudaGetLastError() (or the error
// of a launch it could not configure) for the caller to check with MONET_CUDA_CHECK.
//
// One attention is B heads (the batch dims flattened, lib/ops/common/plans.h AttentionGeom) of
//   Q (B, Tq, d), Kt (B, d, Tk), V (B, Tk, dv):  S = scale(Q Kt) + mask,  P = softmax(S),  O = P V,
//   L (B, Tq) = the log-sum-exp of each row of S,
// Q, Kt, V, O (and dQ, dKt, dV, dO) as their layouts in AttentionDims place them; P, dP, L and the scores in
// workspace are contiguous.
// scale(x) = x * scale, or x / scale where `divides` (the unfused graph's Mul or Div, rounded as the CPU rounds it).
// Determinism: no atomics; every sum runs in an order fixed by the shapes alone (a thread's own terms in index
// order, then fixed shuffle trees; the tiled kernels add their tiles in tile order), so two runs give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace monet::cuda {

// The mask: element (e, i, j) of the scores at data[batch_offset(e) + i * si + j * sj], where batch_offset(e) =
// sum_k idx_k(e) * stride[k] with e = sum_k idx_k * prod(size[k+1..]) (row-major over `size`, the batch dims the
// mask does not broadcast along merged where they can be). data null: no mask.
inline constexpr int kAttentionMaskDims = 8;
struct AttentionMask {
  const float* data = nullptr;
  int rank = 0;
  int64_t size[kAttentionMaskDims] = {};
  int64_t stride[kAttentionMaskDims] = {};
  int64_t si = 0, sj = 0;
};

// Where one operand lies (lib/ops/common/plans.h AttentionView, the node's q_perm, kt_perm, v_perm, o_perm): element
// (head e, row r, column c) at offset(e) + r * rs + c * cs, offset(e) = sum_k idx_k(e) * stride[k] over `size`
// (row-major, the batch dims of size 1 dropped and adjacent ones merged where one stride continues the other).
// One of rs and cs is 1. Contiguous: rank 1, size {B}, stride {rows * cols}, rs = cols, cs = 1.
inline constexpr int kAttentionLayoutDims = 4;
struct AttentionLayout {
  int rank = 0;
  int64_t size[kAttentionLayoutDims] = {};
  int64_t stride[kAttentionLayoutDims] = {};
  int64_t rs = 0, cs = 1;
};

// Where head e of an operand starts.
__host__ __device__ inline int64_t attention_head_offset(const AttentionLayout& l, int64_t e) {
  int64_t off = 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int k = kAttentionLayoutDims - 1; k >= 0; --k) {
    if (k >= l.rank) continue;
    off += (e % l.size[k]) * l.stride[k];
    e /= l.size[k];
  }
  return off;
}

struct AttentionDims {
  int64_t B = 1, Tq = 1, Tk = 1, d = 1, dv = 1;
  float scale = 1.f;
  bool divides = false;
  AttentionLayout q, kt, v, o;  // dQ, dKt, dV and dO lie as Q, Kt, V and O
};

// The fused (tiled, flash-attention-2 style) kernels take head widths d, dv up to this; wider heads take the
// materialised path of cuda_attention.cpp (cuBLAS products over chunks of heads in workspace).
inline constexpr int64_t kAttentionFusedMaxWidth = 128;

// ------------------------------------------------------------------------------------------ row kernels

// Rows of heads e0 .. e0 + heads - 1 (their scores s (heads, Tq, Tk), in place): s = softmax(scale(s) + mask) and
// lse (heads, Tq) = max + log(sum of exp(s - max)) per row. One warp per row up to Tk = 1024 (the row in
// registers, float4 groups where Tk % 4 == 0: rows.cuh), one block of 256 threads per row beyond (three passes over
// the row). Row sums: float in a warp (at
// most 32 terms per lane, then a 5-level tree), double per thread in a block. A row whose every score is -inf gives
// NaN, as the CPU.
cudaError_t attention_softmax_rows(const AttentionDims& g, const AttentionMask& mask, int64_t e0, int64_t heads,
                                   float* s, float* lse, cudaStream_t stream);

// The same rows: s = exp(scale(s) + mask - lse) (the probabilities recomputed from the saved log-sum-exp). One
// warp per row, columns lane, lane + 32, ...
cudaError_t attention_recompute_probs(const AttentionDims& g, const AttentionMask& mask, int64_t e0, int64_t heads,
                                      const float* lse, float* s, cudaStream_t stream);

// rows rows of Tk: dp = scale(p * (dp - D)) in place, D = rowsum(dp * p) when rowdot is null (AttentionGrad's
// probs), else rowdot[row] (= rowsum(dO * O), recompute). Warp or block per row as attention_softmax_rows.
cudaError_t attention_grad_scores(const AttentionDims& g, int64_t rows, const float* p, float* dp,
                                  const float* rowdot, cudaStream_t stream);

// rowdot (B, Tq) = rowsum(dout * o) over the dv columns of every row (both as g.o places them): one warp per row,
// double per lane, a fixed tree.
cudaError_t attention_row_dot(const AttentionDims& g, const float* dout, const float* o, float* rowdot,
                              cudaStream_t stream);

// ------------------------------------------------------------------------------------------ fused kernels
// d, dv <= kAttentionFusedMaxWidth. 256 threads as a 16 x 16 grid (tx, ty); a thread owns rows ty + 16 i and
// columns tx + 16 j of every tile product, so a row's statistics live in the 16 lanes of one half-warp. Head
// widths are padded with zeros in shared memory to KW = 16 * NW, NW in {2, 4, 5, 6, 8} (the smallest that holds
// max(d, dv)). Tiles past Tq or Tk are zero-filled and their scores excluded. fp32 FMA (no tensor cores).
// Dynamic shared memory above 48 KB (at most 146 KB: within sm80's 163 KB and sm90's 227 KB per block; on sm86 and
// sm89, 99 KB, widths up to 80 fit: the host checks attention_fused_smem_bytes against the device).

// The bytes of dynamic shared memory each fused kernel takes for these widths (0 when they exceed the maximum).
int64_t attention_fused_smem_bytes(int64_t d, int64_t dv, int kernel /* 0 forward, 1 grad_kv, 2 grad_q */);

// O and lse without P: one block per (head, 64 query rows); loops over K/V tiles of 64 keys with an online
// softmax (running max m, running sum l, O rescaled by exp(m_old - m_new); while a row's max is still -inf it
// subtracts 0, so a fully masked tile adds nothing and gives no NaN). O = acc / l, lse = m + log(l) at the end.
cudaError_t attention_fused_forward(const AttentionDims& g, const AttentionMask& mask, const float* q,
                                    const float* kt, const float* v, float* o, float* lse, cudaStream_t stream);

// dKt (B, d, Tk) and dV (B, Tk, dv) for AttentionGrad's recompute: one block per (head, 64 keys), its Kt and V
// tiles in shared memory, looping over the queries in steps of 32 rows: P = exp(scale(Q Kt) + mask - lse),
// dP = dO V^T, dS = scale(P (dP - rowdot)); dV += P^T dO and dKt += Q^T dS in registers, in query order.
cudaError_t attention_fused_grad_kv(const AttentionDims& g, const AttentionMask& mask, const float* q,
                                    const float* kt, const float* v, const float* dout, const float* lse,
                                    const float* rowdot, float* dkt, float* dv, cudaStream_t stream);

// dQ (B, Tq, d) for the recompute: one block per (head, 64 query rows), looping over the K/V tiles of 64 keys:
// the same P, dP and dS recomputed, dQ += dS Kt^T in registers, in key order.
cudaError_t attention_fused_grad_q(const AttentionDims& g, const AttentionMask& mask, const float* q,
                                   const float* kt, const float* v, const float* dout, const float* lse,
                                   const float* rowdot, float* dq, cudaStream_t stream);

}  // namespace monet::cuda
