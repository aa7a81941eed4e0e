// The fused Attention op's own kernels (attention_kernels.h): the row kernels of the materialised path (softmax of
// the scores with the log-sum-exp, the probabilities recomputed from it, the score gradient), D = rowsum(dO * O),
// and the tiled kernels that never hold more than a tile of scores: the forward with an online softmax and the
// recompute backward's dKt/dV and dQ kernels (FlashAttention-2's algorithm, arXiv:2307.08691, in plain fp32 FMA).
// Reference: the CPU kernels of lib/ops/attention (attention_cpu, attention_grad_cpu).
// Determinism: no atomics. Every sum runs in an order fixed by the shapes: a thread's terms in index order, fixed
// shuffle trees over a warp or a half-warp, a block's warp totals in warp order, and the tiled kernels add their
// tiles in tile order into registers of one thread (the dQ and the dKt/dV sums are split by output, never by term).
// Tiles a mask hides wholly (a causal mask's above the diagonal) are skipped where that changes no bit (tile_counts).
#include <cmath>
#include <type_traits>

#include "engine/cuda/attention_kernels.h"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/reduce.cuh"
#include "engine/cuda/rows.cuh"

namespace monet::cuda {
namespace {

constexpr int kAttnThreads = 256;  // every kernel here: 8 warps; the tiled ones as a 16 x 16 grid
constexpr int kBr = 64;            // query rows per block: forward, grad_q
constexpr int kBc = 64;            // keys per K/V tile
constexpr int kBrKv = 32;          // query rows per step of grad_kv (keeps its shared memory within sm80's)
constexpr int64_t kWarpRowMax = 1024;

__device__ __forceinline__ float apply_scale(float x, float scale, bool divides) {
  return divides ? x / scale : x * scale;
}

// The mask's offset for head e (attention_kernels.h AttentionMask). Unrolled over the constant bound so that every
// index into the by-value parameter arrays is a compile-time constant (no local-memory copy of the struct).
__device__ __forceinline__ int64_t mask_batch_offset(const AttentionMask& m, int64_t e) {
  int64_t off = 0;
#pragma unroll
  for (int k = kAttentionMaskDims - 1; k >= 0; --k) {
    if (k >= m.rank) continue;
    off += (e % m.size[k]) * m.stride[k];
    e /= m.size[k];
  }
  return off;
}

__device__ __forceinline__ int64_t head_offset(const AttentionLayout& l, int64_t e) {
  return attention_head_offset(l, e);
}

// ----------------------------------------------------------------------------------------------- reductions

// Warp and block trees: reduce.cuh. Over the 16 lanes of a half-warp (the 16 threads tx = 0..15 that share a row ty in the tiled kernels).
__device__ __forceinline__ float half_sum(float v) {
#pragma unroll
  for (int m = 8; m > 0; m >>= 1) v += __shfl_xor_sync(kFullMask, v, m);
  return v;
}
__device__ __forceinline__ float half_max(float v) {
#pragma unroll
  for (int m = 8; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}

// ----------------------------------------------------------------------------------------------- row kernels
// Row r of a launch is query i = r % Tq of head e0 + r / Tq; s, lse and p start at the launch's first row.

// Tk <= 32 * N: one warp per row, the row in registers (rows.cuh: float4 groups with VEC).
template <int N, bool VEC>
__global__ void softmax_rows_warp_kernel(AttentionDims g, AttentionMask mask, int64_t e0, int64_t rows, float* s,
                                         float* lse) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int Tk = static_cast<int>(g.Tk);
  for (int64_t r = warp_index(); r < rows; r += warp_count()) {  // warp-uniform
    const int64_t e = e0 + r / g.Tq, i = r % g.Tq;
    float* row = s + r * g.Tk;
    const float* mrow = mask.data ? mask.data + mask_batch_offset(mask, e) + i * mask.si : nullptr;
    float v[N];
    load_row<N, VEC>(row, Tk, lane, v, 0.f);
    float m = -INFINITY;
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int c = column_of<N, VEC>(lane, t);
      float x = -INFINITY;
      if (c < Tk) {
        x = apply_scale(v[t], g.scale, g.divides);
        if (mrow) x += mrow[c * mask.sj];
      }
      v[t] = x;
      m = fmaxf(m, x);
    }
    m = warp_max(m);
    float sum = 0.f;
#pragma unroll
    for (int t = 0; t < N; ++t) {
      v[t] = column_of<N, VEC>(lane, t) < Tk ? expf(v[t] - m) : 0.f;
      sum += v[t];
    }
    sum = warp_sum(sum);
    const float inv = 1.f / sum;
#pragma unroll
    for (int t = 0; t < N; ++t) v[t] *= inv;
    store_row<N, VEC>(row, Tk, lane, v);
    if (lane == 0) lse[r] = m + logf(sum);
  }
}

// Longer rows: one block per row, three passes; each thread rereads only the elements it wrote itself.
__global__ void softmax_rows_block_kernel(AttentionDims g, AttentionMask mask, int64_t e0, int64_t rows, float* s,
                                          float* lse) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {  // block-uniform
    const int64_t e = e0 + r / g.Tq, i = r % g.Tq;
    float* row = s + r * g.Tk;
    const float* mrow = mask.data ? mask.data + mask_batch_offset(mask, e) + i * mask.si : nullptr;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < g.Tk; c += blockDim.x) {
      float x = apply_scale(row[c], g.scale, g.divides);
      if (mrow) x += mrow[c * mask.sj];
      row[c] = x;
      m = fmaxf(m, x);
    }
    m = block_allmax(m);
    double sum = 0;
    for (int64_t c = threadIdx.x; c < g.Tk; c += blockDim.x) {
      const float x = expf(row[c] - m);
      row[c] = x;
      sum += x;
    }
    sum = block_allsum(sum);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = threadIdx.x; c < g.Tk; c += blockDim.x) row[c] *= inv;
    if (threadIdx.x == 0) lse[r] = m + static_cast<float>(log(sum));
  }
}

__global__ void recompute_probs_kernel(AttentionDims g, AttentionMask mask, int64_t e0, int64_t rows,
                                       const float* lse, float* s) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t r = warp_index(); r < rows; r += warp_count()) {
    const int64_t e = e0 + r / g.Tq, i = r % g.Tq;
    float* row = s + r * g.Tk;
    const float* mrow = mask.data ? mask.data + mask_batch_offset(mask, e) + i * mask.si : nullptr;
    const float l = lse[r];
    for (int64_t c = lane; c < g.Tk; c += 32) {
      float x = apply_scale(row[c], g.scale, g.divides);
      if (mrow) x += mrow[c * mask.sj];
      row[c] = expf(x - l);
    }
  }
}

// dp = scale(p * (dp - D)): the warp holds both rows in registers (float4 groups with VEC).
template <int N, bool VEC>
__global__ void grad_scores_warp_kernel(AttentionDims g, int64_t rows, const float* p, float* dp,
                                        const float* rowdot) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int Tk = static_cast<int>(g.Tk);
  for (int64_t r = warp_index(); r < rows; r += warp_count()) {
    const float* pr = p + r * g.Tk;
    float* dr = dp + r * g.Tk;
    float pv[N], gv[N];
    load_row<N, VEC>(pr, Tk, lane, pv, 0.f);
    load_row<N, VEC>(dr, Tk, lane, gv, 0.f);
    float dot;
    if (rowdot) {
      dot = rowdot[r];
    } else {
      float acc = 0.f;
#pragma unroll
      for (int t = 0; t < N; ++t) acc += gv[t] * pv[t];
      dot = warp_sum(acc);
    }
#pragma unroll
    for (int t = 0; t < N; ++t) gv[t] = apply_scale(pv[t] * (gv[t] - dot), g.scale, g.divides);
    store_row<N, VEC>(dr, Tk, lane, gv);
  }
}

__global__ void grad_scores_block_kernel(AttentionDims g, int64_t rows, const float* p, float* dp,
                                         const float* rowdot) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* pr = p + r * g.Tk;
    float* dr = dp + r * g.Tk;
    float dot;
    if (rowdot) {
      dot = rowdot[r];
    } else {
      double acc = 0;
      for (int64_t c = threadIdx.x; c < g.Tk; c += blockDim.x) acc += static_cast<double>(dr[c]) * pr[c];
      dot = static_cast<float>(block_allsum(acc));  // every thread has read its dp before any writes
    }
    for (int64_t c = threadIdx.x; c < g.Tk; c += blockDim.x)
      dr[c] = apply_scale(pr[c] * (dr[c] - dot), g.scale, g.divides);
  }
}

__global__ void row_dot_kernel(AttentionDims g, const float* a, const float* b, float* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t rows = g.B * g.Tq, cs = g.o.cs;
  for (int64_t r = warp_index(); r < rows; r += warp_count()) {
    const int64_t at = head_offset(g.o, r / g.Tq) + r % g.Tq * g.o.rs;
    double acc = 0;
    for (int64_t k = lane; k < g.dv; k += 32) acc += static_cast<double>(a[at + k * cs]) * b[at + k * cs];
    acc = warp_sum(acc);
    if (lane == 0) out[r] = static_cast<float>(acc);
  }
}

// ----------------------------------------------------------------------------------------------- tiled kernels
// A thread (tx, ty) = (threadIdx.x % 16, threadIdx.x / 16) owns rows ty + 16 i and columns tx + 16 j of each tile
// product. Every product sums over an index k that is contiguous in shared memory for both operands (an operand
// whose k is its column is kept as stored, one whose k is its row is kept transposed), so a thread reads four
// consecutive k of a row as one float4: 2 (I + J) / 4 vector loads for 4 I J multiply-adds (tile_product), where
// one float per k of each operand took 4 I J / (I + J) scalar loads. The sums still run in k order, one fmaf at a
// time, so the bits are those of the scalar loops. Row strides are 4 more than the width (a multiple of 4, and
// 4 mod 32 or 20 mod 32 at every width here): the 8 threads of a quarter-warp reading rows tx + 16 j meet 8
// different 4-bank groups; the two row-threads ty of a warp read rows 1 apart, also in different banks.
// Head widths are padded with zeros to KW = 16 * NW in shared memory, so the products run over KW unguarded.

__host__ __device__ constexpr int pad4(int w) { return w + 4; }  // the row stride of a shared array w floats wide

// Shared-memory floats of each kernel (the launchers and the kernels' carving agree through these).
__host__ __device__ constexpr int64_t fwd_smem_floats(int KW) {
  return int64_t{kBr} * pad4(KW) + int64_t{kBc} * pad4(KW) + int64_t{KW} * pad4(kBc) + int64_t{kBr} * pad4(kBc);
}
__host__ __device__ constexpr int64_t kv_smem_floats(int KW) {
  return 2 * int64_t{kBc} * pad4(KW) + 2 * int64_t{kBrKv} * pad4(KW) + 2 * int64_t{KW} * pad4(kBrKv) +
         2 * int64_t{kBc} * pad4(kBrKv);
}
__host__ __device__ constexpr int64_t q_smem_floats(int KW) {
  return 2 * int64_t{kBr} * pad4(KW) + 2 * int64_t{kBc} * pad4(KW) + int64_t{kBr} * pad4(kBc);
}
static_assert(fwd_smem_floats(128) * 4 <= 163 * 1024 && kv_smem_floats(128) * 4 <= 163 * 1024 &&
                  q_smem_floats(128) * 4 <= 163 * 1024,
              "the tiles must fit sm80's shared memory per block");

// dst (R, C) at row stride ld = the (rows_valid, cols_valid) corner of src, element (r, c) at src[r * rs + c * cs],
// zeros elsewhere; with TRANSPOSE, dst (C, R) = its transpose (element (r, c) at dst[c * ld + r]). With cs = 1
// warp w takes rows w, w + 8, ..., its lanes consecutive columns; otherwise (rs = 1) columns w, w + 8, ..., its
// lanes consecutive rows: the global reads coalesce either way. (The shared writes of a transposing load, or of a
// plain one from rs = 1, meet each bank up to four times; a tile is loaded once for 64 or 32 steps of products.)
template <int R, int C, bool TRANSPOSE = false>
__device__ __forceinline__ void load_tile(float* dst, int ld, const float* src, int64_t rs, int64_t cs,
                                          int64_t rows_valid, int64_t cols_valid) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  auto put = [&](int r, int c, float x) { (TRANSPOSE ? dst[c * ld + r] : dst[r * ld + c]) = x; };
  if (cs == 1) {
    for (int r = warp; r < R; r += kAttnThreads / 32)
      for (int c = lane; c < C; c += 32) put(r, c, r < rows_valid && c < cols_valid ? src[r * rs + c] : 0.f);
  } else {
    for (int c = warp; c < C; c += kAttnThreads / 32)
      for (int r = lane; r < R; r += 32) put(r, c, r < rows_valid && c < cols_valid ? src[r + c * cs] : 0.f);
  }
}

// acc[i][j] += sum over k < K, in k order, of A[(ty + 16 i) * lda + k] * B[(tx + 16 j) * ldb + k]: both operands
// with k contiguous, read as float4 (lda, ldb and the arrays' starts multiples of 4 floats).
template <int I, int J, int K>
__device__ __forceinline__ void tile_product(float (&acc)[I][J], const float* A, int lda, const float* B, int ldb,
                                             int tx, int ty) {
#pragma unroll 2
  for (int k = 0; k < K; k += 4) {
    float4 a[I], b[J];
#pragma unroll
    for (int i = 0; i < I; ++i) a[i] = *reinterpret_cast<const float4*>(A + (ty + 16 * i) * lda + k);
#pragma unroll
    for (int j = 0; j < J; ++j) b[j] = *reinterpret_cast<const float4*>(B + (tx + 16 * j) * ldb + k);
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int j = 0; j < J; ++j) {
        acc[i][j] = fmaf(a[i].x, b[j].x, acc[i][j]);
        acc[i][j] = fmaf(a[i].y, b[j].y, acc[i][j]);
        acc[i][j] = fmaf(a[i].z, b[j].z, acc[i][j]);
        acc[i][j] = fmaf(a[i].w, b[j].w, acc[i][j]);
      }
  }
}

// As tile_product, with B's k its row: B[k * ldb + tx + 16 j], one float per k and column (the 16 column-threads
// read 16 consecutive floats). For a product whose second operand the kernel keeps only the other way round.
template <int I, int J, int K>
__device__ __forceinline__ void tile_product_rows(float (&acc)[I][J], const float* A, int lda, const float* B,
                                                  int ldb, int tx, int ty) {
#pragma unroll 2
  for (int k = 0; k < K; k += 4) {
    float4 a[I];
#pragma unroll
    for (int i = 0; i < I; ++i) a[i] = *reinterpret_cast<const float4*>(A + (ty + 16 * i) * lda + k);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float b[J];
#pragma unroll
      for (int j = 0; j < J; ++j) b[j] = B[(k + q) * ldb + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < I; ++i) {
        const float x = q == 0 ? a[i].x : q == 1 ? a[i].y : q == 2 ? a[i].z : a[i].w;
#pragma unroll
        for (int j = 0; j < J; ++j) acc[i][j] = fmaf(x, b[j], acc[i][j]);
      }
    }
  }
}

// Masked tiles. Where every mask entry of a tile of scores is at most kMaskedBelow (-inf, or a "most negative
// float" fill such as PyTorch's finfo.min), the tile adds exactly nothing to a row that has met a score above
// kMetAbove (its running maximum, or its log-sum-exp, is above it): the exponentials underflow to 0 and the running
// maximum does not move, for scores below 1e29 in magnitude. The tiled kernels skip such a tile whole when every
// row of the block has met one: a causal mask's tiles above the diagonal, a padding mask's trailing keys. A row that
// has met none (every score so far masked; a fully masked row under a finite fill, whose softmax is uniform) takes
// every tile, as does every row without a mask. NaN counts as a score.
constexpr float kMaskedBelow = -1e30f, kMetAbove = -1e29f;

// Whether the tile rows row0 + 16 i (i < RI) and columns col0 + 16 j (16 j < kBc) this thread owns may add anything:
// met[i] is row i's running maximum or log-sum-exp. Rows past Tq and columns past Tk count for nothing.
template <int RI>
__device__ __forceinline__ bool tile_counts(const AttentionDims& g, const AttentionMask& mask, const float* mask_e,
                                            int64_t row0, int64_t col0, const float (&met)[RI]) {
  if (!mask_e) return true;
  bool met_all = true;
#pragma unroll
  for (int i = 0; i < RI; ++i) met_all = met_all && (row0 + 16 * i >= g.Tq || met[i] > kMetAbove);
  if (!met_all) return true;
  bool counts = false;
#pragma unroll 1
  for (int64_t row = row0; row < row0 + 16 * RI && row < g.Tq; row += 16) {
    const float* mrow = mask_e + row * mask.si + col0 * mask.sj;
#pragma unroll 1
    for (int64_t c = 0; c < kBc && col0 + c < g.Tk; c += 16) counts = counts || !(mrow[c * mask.sj] <= kMaskedBelow);
  }
  return counts;
}

// O and lse, one block per (head e, 64 query rows from i0).
template <int NW>
__global__ void __launch_bounds__(kAttnThreads) fused_forward_kernel(AttentionDims g, AttentionMask mask,
                                                                     const float* __restrict__ q,
                                                                     const float* __restrict__ kt,
                                                                     const float* __restrict__ v,
                                                                     float* __restrict__ o, float* __restrict__ lse) {
  constexpr int KW = 16 * NW, LDQ = pad4(KW), LDK = pad4(KW), LDV = pad4(kBc), LDP = pad4(kBc);
  MONET_DYNAMIC_SHARED(float, smem);
  float* qs = smem;             // (kBr, LDQ): the Q tile
  float* ks = qs + kBr * LDQ;   // (kBc, LDK): the K tile (Kt's transpose)
  float* vts = ks + kBc * LDK;  // (KW, LDV): the V tile's transpose
  float* ps = vts + KW * LDV;   // (kBr, LDP): exp(S - m) of the tile
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  const int64_t q_tiles = (g.Tq + kBr - 1) / kBr;
  const int64_t e = blockIdx.x / q_tiles, i0 = (blockIdx.x % q_tiles) * kBr;
  const float* q_e = q + head_offset(g.q, e);
  const float* kt_e = kt + head_offset(g.kt, e);
  const float* v_e = v + head_offset(g.v, e);
  const float* mask_e = mask.data ? mask.data + mask_batch_offset(mask, e) : nullptr;
  load_tile<kBr, KW>(qs, LDQ, q_e + i0 * g.q.rs, g.q.rs, g.q.cs, g.Tq - i0, g.d);

  float m[4], l[4], acc[4][NW];  // per owned row: running max, running sum, unnormalised O
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < NW; ++j) acc[i][j] = 0.f;
  }
  for (int64_t j0 = 0; j0 < g.Tk; j0 += kBc) {
    // The barrier: the Q tile is in; the previous tile's P V is done with ks, vts and ps.
    if (!__syncthreads_or(tile_counts<4>(g, mask, mask_e, i0 + ty, j0 + tx, m))) continue;  // block-uniform
    load_tile<KW, kBc, true>(ks, LDK, kt_e + j0 * g.kt.cs, g.kt.rs, g.kt.cs, g.d, g.Tk - j0);
    load_tile<kBc, KW, true>(vts, LDV, v_e + j0 * g.v.rs, g.v.rs, g.v.cs, g.Tk - j0, g.dv);
    __syncthreads();
    float s[4][4] = {};
    tile_product<4, 4, KW>(s, qs, LDQ, ks, LDK, tx, ty);  // S = Q Kt
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = i0 + ty + 16 * i;
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = j0 + tx + 16 * j;
        float x = apply_scale(s[i][j], g.scale, g.divides);
        if (col >= g.Tk) x = -INFINITY;  // past the keys: no weight
        else if (mask_e && row < g.Tq) x += mask_e[row * mask.si + col * mask.sj];
        s[i][j] = x;
        tile_max = fmaxf(tile_max, x);
      }
      const float m_new = fmaxf(m[i], half_max(tile_max));
      // While every score so far is -inf, subtract 0: exp(-inf - 0) = 0 where -inf - -inf would be NaN.
      const float m_ref = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = expf(m[i] - m_ref);  // 0 while m[i] is -inf (l and acc are 0 then)
      float tile_sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = expf(s[i][j] - m_ref);
        tile_sum += s[i][j];
        ps[(ty + 16 * i) * LDP + tx + 16 * j] = s[i][j];
      }
      l[i] = l[i] * alpha + half_sum(tile_sum);
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < NW; ++j) acc[i][j] *= alpha;
    }
    __syncthreads();
    tile_product<4, NW, kBc>(acc, ps, LDP, vts, LDV, tx, ty);  // O += P V
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = i0 + ty + 16 * i;
    if (row >= g.Tq) continue;
    float* o_r = o + head_offset(g.o, e) + row * g.o.rs;
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      const int n = tx + 16 * j;
      if (n < g.dv) o_r[n * g.o.cs] = acc[i][j] / l[i];
    }
    if (tx == 0) lse[e * g.Tq + row] = m[i] + logf(l[i]);
  }
}

// dKt and dV of one block of keys (head e, keys j0 .. j0 + 63), over all queries in steps of kBrKv rows.
template <int NW>
__global__ void __launch_bounds__(kAttnThreads) fused_grad_kv_kernel(
    AttentionDims g, AttentionMask mask, const float* __restrict__ q, const float* __restrict__ kt,
    const float* __restrict__ v, const float* __restrict__ dout, const float* __restrict__ lse,
    const float* __restrict__ rowdot, float* __restrict__ dkt, float* __restrict__ dv) {
  constexpr int KW = 16 * NW, LDK = pad4(KW), LDV = pad4(KW), LDQ = pad4(KW), LDT = pad4(kBrKv);
  MONET_DYNAMIC_SHARED(float, smem);
  float* ks = smem;               // (kBc, LDK): the K tile (Kt's transpose)
  float* vs = ks + kBc * LDK;     // (kBc, LDV): the V tile
  float* qs = vs + kBc * LDV;     // (kBrKv, LDQ): the Q rows of the step
  float* dos = qs + kBrKv * LDQ;  // (kBrKv, LDQ): their dO rows
  float* qts = dos + kBrKv * LDQ; // (KW, LDT): the Q rows' transpose
  float* dots = qts + KW * LDT;   // (KW, LDT): the dO rows' transpose
  float* pts = dots + KW * LDT;   // (kBc, LDT): P of the step, transposed
  float* dsts = pts + kBc * LDT;  // (kBc, LDT): dS of the step (scaled), transposed
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  const int64_t k_tiles = (g.Tk + kBc - 1) / kBc;
  const int64_t e = blockIdx.x / k_tiles, j0 = (blockIdx.x % k_tiles) * kBc;
  const float* q_e = q + head_offset(g.q, e);
  const float* do_e = dout + head_offset(g.o, e);
  const float* mask_e = mask.data ? mask.data + mask_batch_offset(mask, e) : nullptr;
  load_tile<KW, kBc, true>(ks, LDK, kt + head_offset(g.kt, e) + j0 * g.kt.cs, g.kt.rs, g.kt.cs, g.d, g.Tk - j0);
  load_tile<kBc, KW>(vs, LDV, v + head_offset(g.v, e) + j0 * g.v.rs, g.v.rs, g.v.cs, g.Tk - j0, g.dv);

  float dv_acc[4][NW];  // keys ty + 16 i, dv columns tx + 16 j
  float dk_acc[NW][4];  // d rows ty + 16 i, keys tx + 16 j
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < NW; ++j) dv_acc[i][j] = dk_acc[j][i] = 0.f;
  for (int64_t i0 = 0; i0 < g.Tq; i0 += kBrKv) {
    float l[2], dd[2];  // the step's rows ty + 16 i: log-sum-exp and rowsum(dO O)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int64_t row = i0 + ty + 16 * i;
      l[i] = row < g.Tq ? lse[e * g.Tq + row] : 0.f;
      dd[i] = row < g.Tq ? rowdot[e * g.Tq + row] : 0.f;
    }
    // The barrier: K and V are in; the previous step's products are done with the step's arrays.
    if (!__syncthreads_or(tile_counts<2>(g, mask, mask_e, i0 + ty, j0 + tx, l))) continue;  // block-uniform
    const float* q_i = q_e + i0 * g.q.rs;
    const float* do_i = do_e + i0 * g.o.rs;
    load_tile<kBrKv, KW>(qs, LDQ, q_i, g.q.rs, g.q.cs, g.Tq - i0, g.d);
    load_tile<kBrKv, KW>(dos, LDQ, do_i, g.o.rs, g.o.cs, g.Tq - i0, g.dv);
    load_tile<kBrKv, KW, true>(qts, LDT, q_i, g.q.rs, g.q.cs, g.Tq - i0, g.d);
    load_tile<kBrKv, KW, true>(dots, LDT, do_i, g.o.rs, g.o.cs, g.Tq - i0, g.dv);
    __syncthreads();
    float s[2][4] = {}, dp[2][4] = {};  // rows ty + 16 i of the step, keys tx + 16 j
    tile_product<2, 4, KW>(s, qs, LDQ, ks, LDK, tx, ty);    // S = Q Kt
    tile_product<2, 4, KW>(dp, dos, LDQ, vs, LDV, tx, ty);  // dP = dO V^T
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int64_t row = i0 + ty + 16 * i;
      const bool row_ok = row < g.Tq;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = j0 + tx + 16 * j;
        float p = 0.f, ds = 0.f;
        if (row_ok && col < g.Tk) {
          float x = apply_scale(s[i][j], g.scale, g.divides);
          if (mask_e) x += mask_e[row * mask.si + col * mask.sj];
          p = expf(x - l[i]);
          ds = apply_scale(p * (dp[i][j] - dd[i]), g.scale, g.divides);
        }
        pts[(tx + 16 * j) * LDT + ty + 16 * i] = p;
        dsts[(tx + 16 * j) * LDT + ty + 16 * i] = ds;
      }
    }
    __syncthreads();
    tile_product<4, NW, kBrKv>(dv_acc, pts, LDT, dots, LDT, tx, ty);  // dV += P^T dO
    tile_product<NW, 4, kBrKv>(dk_acc, qts, LDT, dsts, LDT, tx, ty);  // dKt += Q^T dS
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t key = j0 + ty + 16 * i;
    if (key >= g.Tk) continue;
    float* dv_r = dv + head_offset(g.v, e) + key * g.v.rs;
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      const int n = tx + 16 * j;
      if (n < g.dv) dv_r[n * g.v.cs] = dv_acc[i][j];
    }
  }
#pragma unroll
  for (int i = 0; i < NW; ++i) {
    const int k = ty + 16 * i;
    if (k >= g.d) continue;
    float* dk_r = dkt + head_offset(g.kt, e) + k * g.kt.rs;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t key = j0 + tx + 16 * j;
      if (key < g.Tk) dk_r[key * g.kt.cs] = dk_acc[i][j];
    }
  }
}

// dQ of one block of queries (head e, rows i0 .. i0 + 63), over all K/V tiles.
template <int NW>
__global__ void __launch_bounds__(kAttnThreads) fused_grad_q_kernel(
    AttentionDims g, AttentionMask mask, const float* __restrict__ q, const float* __restrict__ kt,
    const float* __restrict__ v, const float* __restrict__ dout, const float* __restrict__ lse,
    const float* __restrict__ rowdot, float* __restrict__ dq) {
  constexpr int KW = 16 * NW, LDQ = pad4(KW), LDK = pad4(KW), LDV = pad4(KW), LDS = pad4(kBc);
  MONET_DYNAMIC_SHARED(float, smem);
  float* qs = smem;             // (kBr, LDQ): the Q tile
  float* dos = qs + kBr * LDQ;  // (kBr, LDQ): its dO rows
  float* ks = dos + kBr * LDQ;  // (kBc, LDK): the K tile (Kt's transpose)
  float* vs = ks + kBc * LDK;   // (kBc, LDV): the V tile
  float* dss = vs + kBc * LDV;  // (kBr, LDS): dS of the tile (scaled)
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  const int64_t q_tiles = (g.Tq + kBr - 1) / kBr;
  const int64_t e = blockIdx.x / q_tiles, i0 = (blockIdx.x % q_tiles) * kBr;
  const float* kt_e = kt + head_offset(g.kt, e);
  const float* v_e = v + head_offset(g.v, e);
  const float* mask_e = mask.data ? mask.data + mask_batch_offset(mask, e) : nullptr;
  load_tile<kBr, KW>(qs, LDQ, q + head_offset(g.q, e) + i0 * g.q.rs, g.q.rs, g.q.cs, g.Tq - i0, g.d);
  load_tile<kBr, KW>(dos, LDQ, dout + head_offset(g.o, e) + i0 * g.o.rs, g.o.rs, g.o.cs, g.Tq - i0, g.dv);

  float l[4], dd[4], dq_acc[4][NW];  // rows ty + 16 i; dQ's d columns tx + 16 j
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = i0 + ty + 16 * i;
    l[i] = row < g.Tq ? lse[e * g.Tq + row] : 0.f;
    dd[i] = row < g.Tq ? rowdot[e * g.Tq + row] : 0.f;
#pragma unroll
    for (int j = 0; j < NW; ++j) dq_acc[i][j] = 0.f;
  }
  for (int64_t j0 = 0; j0 < g.Tk; j0 += kBc) {
    // The barrier: Q and dO are in; the previous tile's dQ product is done with ks and dss.
    if (!__syncthreads_or(tile_counts<4>(g, mask, mask_e, i0 + ty, j0 + tx, l))) continue;  // block-uniform
    load_tile<KW, kBc, true>(ks, LDK, kt_e + j0 * g.kt.cs, g.kt.rs, g.kt.cs, g.d, g.Tk - j0);
    load_tile<kBc, KW>(vs, LDV, v_e + j0 * g.v.rs, g.v.rs, g.v.cs, g.Tk - j0, g.dv);
    __syncthreads();
    float s[4][4] = {}, dp[4][4] = {};
    tile_product<4, 4, KW>(s, qs, LDQ, ks, LDK, tx, ty);    // S = Q Kt
    tile_product<4, 4, KW>(dp, dos, LDQ, vs, LDV, tx, ty);  // dP = dO V^T
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = i0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = j0 + tx + 16 * j;
        float ds = 0.f;
        if (row < g.Tq && col < g.Tk) {
          float x = apply_scale(s[i][j], g.scale, g.divides);
          if (mask_e) x += mask_e[row * mask.si + col * mask.sj];
          const float p = expf(x - l[i]);
          ds = apply_scale(p * (dp[i][j] - dd[i]), g.scale, g.divides);
        }
        dss[(ty + 16 * i) * LDS + tx + 16 * j] = ds;
      }
    }
    __syncthreads();
    tile_product_rows<4, NW, kBc>(dq_acc, dss, LDS, ks, LDK, tx, ty);  // dQ += dS K (Kt^T)
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = i0 + ty + 16 * i;
    if (row >= g.Tq) continue;
    float* dq_r = dq + head_offset(g.q, e) + row * g.q.rs;
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      const int k = tx + 16 * j;
      if (k < g.d) dq_r[k * g.q.cs] = dq_acc[i][j];
    }
  }
}

// ----------------------------------------------------------------------------------------------- launch helpers

// Blocks of kAttnThreads for one warp per row (a grid-stride loop covers rows beyond 2^20 blocks).
unsigned warp_row_blocks(int64_t rows) { return blocks_for_rows((rows + kAttnThreads / 32 - 1) / (kAttnThreads / 32)); }

// Rows of Tk floats from `base` (row r at base + r Tk) load as float4 groups where Tk % 4 == 0 and base is aligned.
bool float4_rows(int64_t Tk, const void* base) { return Tk % 4 == 0 && aligned16(base); }

// NW for head widths d and dv: the smallest of 2, 4, 5, 6, 8 with 16 * NW >= max(d, dv); 0 beyond 128.
int fused_nw(int64_t d, int64_t dv) {
  const int64_t w = d > dv ? d : dv;
  return w <= 32 ? 2 : w <= 64 ? 4 : w <= 80 ? 5 : w <= 96 ? 6 : w <= kAttentionFusedMaxWidth ? 8 : 0;
}

template <class F>
cudaError_t with_nw(int nw, F f) {
  switch (nw) {
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: return cudaErrorInvalidValue;
  }
}

// Raises the kernel's dynamic shared memory limit (above 48 KB needs the opt-in; per kernel, cheap) and launches
// `blocks` blocks.
template <class Kernel, class... Args>
cudaError_t launch_tiled(Kernel kernel, int64_t smem_floats, int64_t blocks, cudaStream_t stream, Args... args) {
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const int smem = static_cast<int>(smem_floats * 4);
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  launch_kernel(kernel, static_cast<unsigned>(blocks), kAttnThreads, static_cast<size_t>(smem), stream, args...);
  return cudaGetLastError();
}

bool empty(const AttentionDims& g) { return g.B == 0 || g.Tq == 0 || g.Tk == 0; }

}  // namespace

cudaError_t attention_softmax_rows(const AttentionDims& g, const AttentionMask& mask, int64_t e0, int64_t heads,
                                   float* s, float* lse, cudaStream_t stream) {
  const int64_t rows = heads * g.Tq;
  if (rows == 0 || g.Tk == 0) return cudaSuccess;
  if (g.Tk <= kWarpRowMax) {
    with_row_width(g.Tk, float4_rows(g.Tk, s), [&](auto n, auto vec) {
      launch_kernel(softmax_rows_warp_kernel<decltype(n)::value, decltype(vec)::value>, warp_row_blocks(rows),
                    kAttnThreads, 0, stream, g, mask, e0, rows, s, lse);
    });
  } else {
    launch_kernel(softmax_rows_block_kernel, blocks_for_rows(rows), kAttnThreads, 0, stream, g, mask, e0, rows, s, lse);
  }
  return cudaGetLastError();
}

cudaError_t attention_recompute_probs(const AttentionDims& g, const AttentionMask& mask, int64_t e0, int64_t heads,
                                      const float* lse, float* s, cudaStream_t stream) {
  const int64_t rows = heads * g.Tq;
  if (rows == 0 || g.Tk == 0) return cudaSuccess;
  launch_kernel(recompute_probs_kernel, warp_row_blocks(rows), kAttnThreads, 0, stream, g, mask, e0, rows, lse, s);
  return cudaGetLastError();
}

cudaError_t attention_grad_scores(const AttentionDims& g, int64_t rows, const float* p, float* dp,
                                  const float* rowdot, cudaStream_t stream) {
  if (rows == 0 || g.Tk == 0) return cudaSuccess;
  if (g.Tk <= kWarpRowMax) {
    with_row_width(g.Tk, float4_rows(g.Tk, p) && float4_rows(g.Tk, dp), [&](auto n, auto vec) {
      launch_kernel(grad_scores_warp_kernel<decltype(n)::value, decltype(vec)::value>, warp_row_blocks(rows),
                    kAttnThreads, 0, stream, g, rows, p, dp, rowdot);
    });
  } else {
    launch_kernel(grad_scores_block_kernel, blocks_for_rows(rows), kAttnThreads, 0, stream, g, rows, p, dp, rowdot);
  }
  return cudaGetLastError();
}

cudaError_t attention_row_dot(const AttentionDims& g, const float* dout, const float* o, float* rowdot,
                              cudaStream_t stream) {
  const int64_t rows = g.B * g.Tq;
  if (rows == 0) return cudaSuccess;
  launch_kernel(row_dot_kernel, warp_row_blocks(rows), kAttnThreads, 0, stream, g, dout, o, rowdot);
  return cudaGetLastError();
}

int64_t attention_fused_smem_bytes(int64_t d, int64_t dv, int kernel) {
  const int nw = fused_nw(d, dv);
  if (nw == 0) return 0;
  const int KW = 16 * nw;
  return 4 * (kernel == 0 ? fwd_smem_floats(KW) : kernel == 1 ? kv_smem_floats(KW) : q_smem_floats(KW));
}

cudaError_t attention_fused_forward(const AttentionDims& g, const AttentionMask& mask, const float* q,
                                    const float* kt, const float* v, float* o, float* lse, cudaStream_t stream) {
  if (empty(g)) return cudaSuccess;
  const int64_t blocks = g.B * ((g.Tq + kBr - 1) / kBr);
  return with_nw(fused_nw(g.d, g.dv), [&](auto nw) {
    constexpr int NW = decltype(nw)::value;
    return launch_tiled(fused_forward_kernel<NW>, fwd_smem_floats(16 * NW), blocks, stream, g, mask, q, kt, v, o,
                        lse);
  });
}

cudaError_t attention_fused_grad_kv(const AttentionDims& g, const AttentionMask& mask, const float* q,
                                    const float* kt, const float* v, const float* dout, const float* lse,
                                    const float* rowdot, float* dkt, float* dv, cudaStream_t stream) {
  if (g.B == 0 || g.Tk == 0) return cudaSuccess;
  const int64_t blocks = g.B * ((g.Tk + kBc - 1) / kBc);
  return with_nw(fused_nw(g.d, g.dv), [&](auto nw) {
    constexpr int NW = decltype(nw)::value;
    return launch_tiled(fused_grad_kv_kernel<NW>, kv_smem_floats(16 * NW), blocks, stream, g, mask, q, kt, v, dout,
                        lse, rowdot, dkt, dv);
  });
}

cudaError_t attention_fused_grad_q(const AttentionDims& g, const AttentionMask& mask, const float* q,
                                   const float* kt, const float* v, const float* dout, const float* lse,
                                   const float* rowdot, float* dq, cudaStream_t stream) {
  if (g.B == 0 || g.Tq == 0) return cudaSuccess;
  const int64_t blocks = g.B * ((g.Tq + kBr - 1) / kBr);
  return with_nw(fused_nw(g.d, g.dv), [&](auto nw) {
    constexpr int NW = decltype(nw)::value;
    return launch_tiled(fused_grad_q_kernel<NW>, q_smem_floats(16 * NW), blocks, stream, g, mask, q, kt, v, dout,
                        lse, rowdot, dq);
  });
}

}  // namespace monet::cuda
