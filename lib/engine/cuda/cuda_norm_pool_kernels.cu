// Normalisation, softmax and loss kernels: Softmax and its gradient, SoftmaxCrossEntropy and its gradient, LayerNorm
// and its gradients, BatchNormStatGrad, batch norm on our kernels with the output-activated BatchNormGrad, the
// per-channel sums (ConvGradBias), ReduceMax and CumSum. (Pooling: cuda_pool_kernels.cu.) Each follows the CPU
// kernel of its op.
// Speed: rows are reduced by a warp (the row in registers) or a block, never by one thread walking a contiguous
// row; column and channel sums are split over many blocks (kernels.h gives each kernel's layout and workspace).
// Determinism: no atomics; every sum in an order fixed by the shapes alone (kernels.h).
#include <cmath>
#include <type_traits>

#include "engine/cuda/launch.cuh"
#include "engine/cuda/reduce.cuh"
#include "engine/cuda/rows.cuh"

namespace monet::cuda {
namespace {

// ----------------------------------------------------------------------------------------------- reductions
// Warp and block trees, warp indices and float4 units: reduce.cuh.

// A running max and sum of exp(v - max) (Milakov & Gimelshein's online softmax): one pass over a row instead of
// two. exp in float, the sum in double. A -inf element adds 0 (also while the max is still -inf); NaN propagates.
struct MaxSum {
  float m = -INFINITY;
  double s = 0;
};
__device__ __forceinline__ void online_add(MaxSum& a, float v) {
  if (v > a.m) {
    a.s = a.s * static_cast<double>(expf(a.m - v)) + 1.0;
    a.m = v;
  } else {
    a.s += v == -INFINITY ? 0.0 : static_cast<double>(expf(v - a.m));
  }
}
// Symmetric in a and b (so every lane of a butterfly gets the same bits); an empty side adds 0.
__device__ __forceinline__ MaxSum combine(const MaxSum& a, const MaxSum& b) {
  MaxSum r;
  r.m = fmaxf(a.m, b.m);
  const double sa = a.s == 0.0 ? 0.0 : a.s * static_cast<double>(expf(a.m - r.m));
  const double sb = b.s == 0.0 ? 0.0 : b.s * static_cast<double>(expf(b.m - r.m));
  r.s = sa + sb;
  return r;
}
__device__ __forceinline__ MaxSum warp_combine(MaxSum a) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    MaxSum b;
    b.m = __shfl_xor_sync(kFullMask, a.m, m);
    b.s = __shfl_xor_sync(kFullMask, a.s, m);
    a = combine(a, b);
  }
  return a;
}
__device__ MaxSum block_combine(MaxSum a) {
  __shared__ float pm[32];
  __shared__ double ps[32];
  a = warp_combine(a);
  if (threadIdx.x % 32 == 0) {
    pm[threadIdx.x / 32] = a.m;
    ps[threadIdx.x / 32] = a.s;
  }
  __syncthreads();
  MaxSum r;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) {
    MaxSum b;
    b.m = pm[w];
    b.s = ps[w];
    r = combine(r, b);
  }
  __syncthreads();
  return r;
}

// ----------------------------------------------------------------------------------------------- rows in registers

// ----------------------------------------------------------------------------------------------- softmax

// inner == 1, A <= 32 * N: one warp per row, the row in registers. LOG: log-softmax, y = (x - max) - log(sum).
template <int N, bool VEC, bool LOG>
__global__ void softmax_warp_kernel(int64_t rows, int A, const float* x, float* y) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t r = warp_index(); r < rows; r += warp_count()) {  // warp-uniform
    float v[N];
    load_row<N, VEC>(x + r * A, A, lane, v, -INFINITY);
    float m = v[0];
#pragma unroll
    for (int i = 1; i < N; ++i) m = fmaxf(m, v[i]);
    m = warp_max(m);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float e = column_of<N, VEC>(lane, i) < A ? expf(v[i] - m) : 0.f;
      s += e;
      if constexpr (!LOG) v[i] = e;
    }
    if constexpr (LOG) {
      const float log_sum = logf(warp_sum(s));
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = (v[i] - m) - log_sum;
    } else {
      const float inv = 1.f / warp_sum(s);
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] *= inv;
    }
    store_row<N, VEC>(y + r * A, A, lane, v);
  }
}

// dx may be dy: the warp holds the row of dy before it writes dx. LOG: dx = dy - exp(y) * sum(dy).
template <int N, bool VEC, bool LOG>
__global__ void softmax_grad_warp_kernel(int64_t rows, int A, const float* dy, const float* y, float* dx) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t r = warp_index(); r < rows; r += warp_count()) {
    float g[N], v[N];
    load_row<N, VEC>(dy + r * A, A, lane, g, 0.f);
    load_row<N, VEC>(y + r * A, A, lane, v, 0.f);
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < N; ++i) dot += LOG ? g[i] : g[i] * v[i];  // padding lanes hold g = 0
    dot = warp_sum(dot);
#pragma unroll
    for (int i = 0; i < N; ++i) g[i] = LOG ? g[i] - expf(v[i]) * dot : v[i] * (g[i] - dot);
    store_row<N, VEC>(dx + r * A, A, lane, g);
  }
}

// inner == 1, long rows: one block per row, three passes (max, sum, write; the later ones mostly from L2).
template <int W, bool LOG>
__global__ void softmax_block_kernel(int64_t rows, int64_t A, const float* x, float* y) {
  const int64_t units = A / W;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {  // block-uniform
    const float* xr = x + r * A;
    float* yr = y + r * A;
    float m = -INFINITY;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float v[W];
      load_units<W>(xr, u, v);
#pragma unroll
      for (int j = 0; j < W; ++j) m = fmaxf(m, v[j]);
    }
    m = block_allmax(m);
    double s = 0;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float v[W];
      load_units<W>(xr, u, v);
#pragma unroll
      for (int j = 0; j < W; ++j) s += expf(v[j] - m);
    }
    const double total = block_allsum(s);
    const float inv = static_cast<float>(1.0 / total), log_sum = static_cast<float>(log(total));
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float v[W];
      load_units<W>(xr, u, v);
#pragma unroll
      for (int j = 0; j < W; ++j) v[j] = LOG ? (v[j] - m) - log_sum : expf(v[j] - m) * inv;
      store_units<W>(yr, u, v);
    }
  }
}

// Pass 2 reads each element again before the same thread writes it (dx may be dy); pass 1 is complete for the
// whole block when block_allsum returns.
template <int W, bool LOG>
__global__ void softmax_grad_block_kernel(int64_t rows, int64_t A, const float* dy, const float* y, float* dx) {
  const int64_t units = A / W;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* gr = dy + r * A;
    const float* yr = y + r * A;
    double dot = 0;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float g[W], v[W];
      load_units<W>(gr, u, g);
      load_units<W>(yr, u, v);
#pragma unroll
      for (int j = 0; j < W; ++j) dot += LOG ? static_cast<double>(g[j]) : static_cast<double>(g[j]) * v[j];
    }
    const float d = static_cast<float>(block_allsum(dot));
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float g[W], v[W];
      load_units<W>(gr, u, g);
      load_units<W>(yr, u, v);
#pragma unroll
      for (int j = 0; j < W; ++j) g[j] = LOG ? g[j] - expf(v[j]) * d : v[j] * (g[j] - d);
      store_units<W>(dx + r * A, u, g);
    }
  }
}

// inner > 1: one thread per (outer, inner) column, stride inner along the axis (neighbouring threads read
// neighbouring addresses). I: int32_t when outer * A * inner < 2^31.
template <class I, bool LOG>
__global__ void softmax_strided_kernel(I outer, I A, I inner, const float* x, float* y) {
  MONET_GRID_LOOP(rl, static_cast<int64_t>(outer) * inner) {
    const I r = static_cast<I>(rl), o = r / inner;
    const I base = o * A * inner + (r - o * inner);
    const float* xr = x + base;
    float* yr = y + base;
    float m = xr[0];
    for (I a = 1; a < A; ++a) m = fmaxf(m, xr[a * inner]);
    double s = 0;
    for (I a = 0; a < A; ++a) s += expf(xr[a * inner] - m);
    const float inv = static_cast<float>(1.0 / s), log_sum = static_cast<float>(log(s));
    for (I a = 0; a < A; ++a) yr[a * inner] = LOG ? (xr[a * inner] - m) - log_sum : expf(xr[a * inner] - m) * inv;
  }
}

template <class I, bool LOG>
__global__ void softmax_grad_strided_kernel(I outer, I A, I inner, const float* dy, const float* y, float* dx) {
  MONET_GRID_LOOP(rl, static_cast<int64_t>(outer) * inner) {
    const I r = static_cast<I>(rl), o = r / inner;
    const I base = o * A * inner + (r - o * inner);
    double dot = 0;
    for (I a = 0; a < A; ++a)
      dot += LOG ? static_cast<double>(dy[base + a * inner])
                 : static_cast<double>(dy[base + a * inner]) * y[base + a * inner];
    const float d = static_cast<float>(dot);
    for (I a = 0; a < A; ++a) {
      const I k = base + a * inner;
      dx[k] = LOG ? dy[k] - expf(y[k]) * d : y[k] * (dy[k] - d);
    }
  }
}

// ----------------------------------------------------------------------------------------------- layer norm

// D <= 32 * N: one warp per row. The statistics in double (two passes over the registers), y in float. y may be
// x: the row is in registers before y is written.
template <int N, bool VEC>
__global__ void layer_norm_warp_kernel(int64_t R, int D, double eps, const float* x, const float* scale,
                                       const float* bias, float* y, float* mean_out, float* invstd_out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t r = warp_index(); r < R; r += warp_count()) {
    float v[N];
    load_row<N, VEC>(x + r * D, D, lane, v, 0.f);
    double s = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) s += v[i];
    const double mean = warp_sum(s) / D;
    double q = 0;
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (column_of<N, VEC>(lane, i) < D) q += (v[i] - mean) * (v[i] - mean);
    const double invstd = 1.0 / sqrt(warp_sum(q) / D + eps);
    if (lane == 0) {
      mean_out[r] = static_cast<float>(mean);
      invstd_out[r] = static_cast<float>(invstd);
    }
    const float mf = static_cast<float>(mean), isf = static_cast<float>(invstd);
    float sc[N], bi[N];
    load_row<N, VEC>(scale, D, lane, sc, 0.f);
    load_row<N, VEC>(bias, D, lane, bi, 0.f);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = (v[i] - mf) * isf * sc[i] + bi[i];
    store_row<N, VEC>(y + r * D, D, lane, v);
  }
}

// D > 1024: one block per row, three passes (sum, centred squares, write). y may be x: the passes that read the
// whole row end at a block_allsum, and each element of the last pass is read and written by one thread.
template <int W>
__global__ void layer_norm_block_kernel(int64_t R, int64_t D, double eps, const float* x, const float* scale,
                                        const float* bias, float* y, float* mean_out, float* invstd_out) {
  const int64_t units = D / W;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    double s = 0;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float v[W];
      load_units<W>(xr, u, v);
#pragma unroll
      for (int j = 0; j < W; ++j) s += v[j];
    }
    const double mean = block_allsum(s) / static_cast<double>(D);
    double q = 0;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float v[W];
      load_units<W>(xr, u, v);
#pragma unroll
      for (int j = 0; j < W; ++j) q += (v[j] - mean) * (v[j] - mean);
    }
    const double invstd = 1.0 / sqrt(block_allsum(q) / static_cast<double>(D) + eps);
    if (threadIdx.x == 0) {
      mean_out[r] = static_cast<float>(mean);
      invstd_out[r] = static_cast<float>(invstd);
    }
    const float mf = static_cast<float>(mean), isf = static_cast<float>(invstd);
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float v[W], sc[W], bi[W];
      load_units<W>(xr, u, v);
      load_units<W>(scale, u, sc);
      load_units<W>(bias, u, bi);
#pragma unroll
      for (int j = 0; j < W; ++j) v[j] = (v[j] - mf) * isf * sc[j] + bi[j];
      store_units<W>(yr, u, v);
    }
  }
}

// LayerNormGrad, fused (D <= 32 * N, float4 rows): block `part` (8 warps) owns rows [R * part / P,
// R * (part + 1) / P), a warp every 8th of them. Per row: dy and xhat in registers, the row sums by shuffle, dx
// stored; the lane's columns' sums of dy and dy * xhat kept in registers across the warp's rows. Then the 8 warps'
// column sums are added in warp order in shared memory and written as this part's partials: dbias at
// partial[part * D + d], dscale at partial[(P + part) * D + d]. dx may be dy: each row is read before it is written.
// Registers: the scale and bias are read element by element where used (the same few KB for every row: L1), not
// held as rows, so that rows of up to 768 (N <= 24) fit two blocks a multiprocessor (at most 128 a thread) where
// five rows in registers took one (136 for N = 24: a quarter of the warps a multiprocessor can hold).
template <int N, bool FROM_Y>
__global__ void __launch_bounds__(kThreads, N <= 24 ? 2 : 1) layer_norm_grad_fused_kernel(
    int64_t R, int D, int64_t P, const float* dy, const float* x, const float* mean, const float* invstd,
    const float* y, const float* bias, const float* scale, float* dx, float* __restrict__ partial) {
  __shared__ float col[2][1024];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  const int64_t part = blockIdx.x;
  const int64_t r0 = R * part / P, r1 = R * (part + 1) / P;
  float cdy[N], cdyx[N];
#pragma unroll
  for (int i = 0; i < N; ++i) cdy[i] = cdyx[i] = 0.f;
  for (int64_t r = r0 + warp; r < r1; r += warps) {  // warp-uniform
    float g[N], h[N];
    load_row<N, true>(dy + r * D, D, lane, g, 0.f);
    if constexpr (FROM_Y) {
      load_row<N, true>(y + r * D, D, lane, h, 0.f);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int c = column_of<N, true>(lane, i);
        h[i] = c < D ? (h[i] - __ldg(bias + c)) / __ldg(scale + c) : 0.f;
      }
    } else {
      load_row<N, true>(x + r * D, D, lane, h, 0.f);
      const float mu = mean[r], is = invstd[r];
#pragma unroll
      for (int i = 0; i < N; ++i) h[i] = column_of<N, true>(lane, i) < D ? (h[i] - mu) * is : 0.f;
    }
    float sg = 0.f, sgh = 0.f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = column_of<N, true>(lane, i);
      cdy[i] += g[i];
      cdyx[i] += g[i] * h[i];
      g[i] *= c < D ? __ldg(scale + c) : 1.f;
      sg += g[i];
      sgh += g[i] * h[i];
    }
    const float mean_g = warp_sum(sg) / D, mean_gh = warp_sum(sgh) / D;
    const float is = invstd[r];
#pragma unroll
    for (int i = 0; i < N; ++i) g[i] = is * (g[i] - mean_g - h[i] * mean_gh);
    store_row<N, true>(dx + r * D, D, lane, g);
  }
  for (int w = 0; w < warps; ++w) {  // block-uniform: every thread reaches each __syncthreads
    if (warp == w) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int c = column_of<N, true>(lane, i);
        if (c < D) {
          col[0][c] = (w == 0 ? 0.f : col[0][c]) + cdy[i];
          col[1][c] = (w == 0 ? 0.f : col[1][c]) + cdyx[i];
        }
      }
    }
    __syncthreads();
  }
  for (int d = static_cast<int>(threadIdx.x); d < D; d += static_cast<int>(blockDim.x)) {
    partial[part * D + d] = col[0][d];
    partial[(P + part) * D + d] = col[1][d];
  }
}

// xhat of element (r, d) in double: from x and the row's mean, or from y, bias and scale.
template <bool FROM_Y>
__device__ __forceinline__ double ln_xhat(int64_t e, int64_t r, int64_t d, const float* x, const float* mean,
                                          const float* invstd, const float* y, const float* bias, const float* scale) {
  if constexpr (FROM_Y) return (static_cast<double>(y[e]) - bias[d]) / static_cast<double>(scale[d]);
  else return (static_cast<double>(x[e]) - mean[r]) * static_cast<double>(invstd[r]);
}

// LayerNormGrad's column partials, unfused: block (column tile blockIdx.x, part blockIdx.y), 32 columns x 8
// row-threads; each thread sums its rows of the part in double, the 8 row-threads added in order.
template <bool FROM_Y>
__global__ void layer_norm_grad_columns_kernel(int64_t R, int64_t D, int64_t P, const float* dy, const float* x,
                                               const float* mean, const float* invstd, const float* y,
                                               const float* bias, const float* scale, float* __restrict__ partial) {
  __shared__ double sh[2][8][32];
  const int tx = static_cast<int>(threadIdx.x % 32), ty = static_cast<int>(threadIdx.x / 32);
  const int64_t d = static_cast<int64_t>(blockIdx.x) * 32 + tx, part = blockIdx.y;
  const int64_t r0 = R * part / P, r1 = R * (part + 1) / P;
  double sdy = 0, sdyx = 0;
  if (d < D)
    for (int64_t r = r0 + ty; r < r1; r += 8) {
      const int64_t e = r * D + d;
      const double g = dy[e];
      sdy += g;
      sdyx += g * ln_xhat<FROM_Y>(e, r, d, x, mean, invstd, y, bias, scale);
    }
  sh[0][ty][tx] = sdy;
  sh[1][ty][tx] = sdyx;
  __syncthreads();
  if (ty == 0 && d < D) {
    double a = 0, b = 0;
    for (int k = 0; k < 8; ++k) {
      a += sh[0][k][tx];
      b += sh[1][k][tx];
    }
    partial[part * D + d] = static_cast<float>(a);
    partial[(P + part) * D + d] = static_cast<float>(b);
  }
}

// dx, unfused: one block per row, the row sums in double, then each thread's dx from the elements it reads again
// (dx may be dy: all of the row's reads of the first pass end at block_allsum).
template <int W, bool FROM_Y>
__global__ void layer_norm_grad_rows_kernel(int64_t R, int64_t D, const float* dy, const float* x, const float* mean,
                                            const float* invstd, const float* y, const float* bias,
                                            const float* scale, float* dx) {
  const int64_t units = D / W;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    double sg = 0, sgh = 0;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x)
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const int64_t d = u * W + j, e = r * D + d;
        const double g = static_cast<double>(dy[e]) * scale[d];
        sg += g;
        sgh += g * ln_xhat<FROM_Y>(e, r, d, x, mean, invstd, y, bias, scale);
      }
    const double mean_g = block_allsum(sg) / static_cast<double>(D);
    const double mean_gh = block_allsum(sgh) / static_cast<double>(D);
    const double is = invstd[r];
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      float out[W];
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const int64_t d = u * W + j, e = r * D + d;
        const double g = static_cast<double>(dy[e]) * scale[d];
        out[j] = static_cast<float>(is * (g - mean_g - ln_xhat<FROM_Y>(e, r, d, x, mean, invstd, y, bias, scale) *
                                                           mean_gh));
      }
      store_units<W>(dx + r * D, u, out);
    }
  }
}

// The last pass: column d's P partials (dbias, then dscale) added in part order in double; blocks of 32 columns x
// 8 part-threads, the 8 added in order.
__global__ void layer_norm_grad_finish_kernel(int64_t P, int64_t D, const float* partial, float* dbias,
                                              float* dscale) {
  __shared__ double sh[2][8][32];
  const int tx = static_cast<int>(threadIdx.x % 32), ty = static_cast<int>(threadIdx.x / 32);
  const int64_t d = static_cast<int64_t>(blockIdx.x) * 32 + tx;
  double a = 0, b = 0;
  if (d < D)
    for (int64_t p = ty; p < P; p += 8) {
      a += partial[p * D + d];
      b += partial[(P + p) * D + d];
    }
  sh[0][ty][tx] = a;
  sh[1][ty][tx] = b;
  __syncthreads();
  if (ty == 0 && d < D) {
    a = b = 0;
    for (int k = 0; k < 8; ++k) {
      a += sh[0][k][tx];
      b += sh[1][k][tx];
    }
    dbias[d] = static_cast<float>(a);
    dscale[d] = static_cast<float>(b);
  }
}

template <class I>
__global__ void layer_norm_stat_grad_kernel(I R, I D, bool is_mean, const float* dstat, const float* x,
                                            const float* mean, const float* invstd, float* dx) {
  MONET_GRID_LOOP(el, static_cast<int64_t>(R) * D) {
    const I e = static_cast<I>(el), r = e / D;
    const double is = invstd[r];
    dx[e] = static_cast<float>(is_mean ? dstat[r] / static_cast<double>(D)
                                       : -dstat[r] * is * is * is * (x[e] - mean[r]) / static_cast<double>(D));
  }
}

// ----------------------------------------------------------------------------------------------- cross-entropy

// The term of one row from its max and sum of exponentials: log(sum) + max - x[label], in double. A bad label
// sets the flag (a plain store of 1 from whichever threads see one) and adds 0.
__device__ __forceinline__ double ce_term(const MaxSum& ms, const float* row, int64_t stride, int64_t C,
                                          int64_t label, int* bad_label) {
  if (label < 0 || label >= C) {
    *bad_label = 1;
    return 0;
  }
  return log(ms.s) + static_cast<double>(ms.m) - static_cast<double>(row[label * stride]);
}

// P == 1, C <= 1024: block g's warp w takes rows g * 8 + w + k * 8 * G (G = gridDim.x), lane 0 adding the terms
// in k order; the block's 8 warp totals are added in warp order into partial[g]. With terms (not null) each row's
// term is written there too, as a float.
__global__ void ce_rows_warp_kernel(int64_t R, int64_t C, const float* x, const int64_t* labels, double* partial,
                                    int* bad_label, float* terms) {
  __shared__ double sh[32];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t warps = blockDim.x / 32;
  double acc = 0;
  for (int64_t r = blockIdx.x * warps + warp; r < R; r += gridDim.x * warps) {  // warp-uniform
    const float* row = x + r * C;
    MaxSum ms;
    for (int64_t c = lane; c < C; c += 32) online_add(ms, row[c]);
    ms = warp_combine(ms);
    if (lane == 0) {
      const double term = ce_term(ms, row, 1, C, labels[r], bad_label);
      acc += term;
      if (terms) terms[r] = static_cast<float>(term);
    }
  }
  if (lane == 0) sh[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int w = 0; w < warps; ++w) t += sh[w];
    partial[blockIdx.x] = t;
  }
}

// Rows of C > 1024 logits, a block per row: thread t takes columns t, t + T, t + 2T, ... (T = blockDim.x) in that
// order, use(c, row[c]) for each, kCeUnroll of them loaded before any is used. One load in flight per thread left
// GPT-2's rows of 50257 (odd: no float4) latency-bound, at about a third of the bandwidth; the order, and so the
// bits, are those of one column at a time.
constexpr int kCeUnroll = 8;

template <class Use>
__device__ __forceinline__ void for_row_columns(const float* row, int64_t C, Use use) {
  const int64_t T = blockDim.x;
  int64_t c = threadIdx.x;
  for (; c + (kCeUnroll - 1) * T < C; c += kCeUnroll * T) {
    float v[kCeUnroll];
#pragma unroll
    for (int u = 0; u < kCeUnroll; ++u) v[u] = row[c + u * T];
#pragma unroll
    for (int u = 0; u < kCeUnroll; ++u) use(c + u * T, v[u]);
  }
  for (; c < C; c += T) use(c, row[c]);
}

__device__ __forceinline__ MaxSum thread_max_sum(const float* row, int64_t C) {
  MaxSum ms;
  for_row_columns(row, C, [&](int64_t, float v) { online_add(ms, v); });
  return ms;
}

// P == 1, C > 1024: block g takes rows g, g + G, ...; thread 0 adds their terms in that order into partial[g]
// (and writes each to terms, when not null).
__global__ void ce_rows_block_kernel(int64_t R, int64_t C, const float* x, const int64_t* labels, double* partial,
                                     int* bad_label, float* terms) {
  double acc = 0;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {  // block-uniform
    const float* row = x + r * C;
    MaxSum ms = thread_max_sum(row, C);
    ms = block_combine(ms);
    if (threadIdx.x == 0) {
      const double term = ce_term(ms, row, 1, C, labels[r], bad_label);
      acc += term;
      if (terms) terms[r] = static_cast<float>(term);
    }
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// P > 1: one thread per row (n, p) at stride P: thread t of block g takes rows g * B + t + k * B * G (B =
// blockDim.x) in k order; the block's threads are added by block_allsum's fixed tree into partial[g].
__global__ void ce_rows_thread_kernel(int64_t N, int64_t C, int64_t P, const float* x, const int64_t* labels,
                                      double* partial, int* bad_label) {
  double acc = 0;
  MONET_GRID_LOOP(r, N * P) {
    const int64_t n = r / P, p = r - n * P;
    const float* row = x + n * C * P + p;
    MaxSum ms;
    for (int64_t k = 0; k < C; ++k) online_add(ms, row[k * P]);
    acc += ce_term(ms, row, P, C, labels[r], bad_label);
  }
  acc = block_allsum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void ce_sum_kernel(int64_t G, int64_t rows, const double* partial, float* loss) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < G; i += blockDim.x) acc += partial[i];
  const double total = block_allsum(acc);
  if (threadIdx.x == 0) loss[0] = static_cast<float>(total / static_cast<double>(rows));
}

// dx of one element from the row's max, 1 / sum and scale = dloss / (N * P).
__device__ __forceinline__ float ce_grad_of(float v, const MaxSum& ms, double inv_sum, bool is_label, double scale) {
  return static_cast<float>((static_cast<double>(expf(v - ms.m)) * inv_sum - (is_label ? 1.0 : 0.0)) * scale);
}

// kPerRow: row r's scale is dloss[r] (LinearCrossEntropyGrad's dlosses), else dloss[0] / R (the mean's).
__device__ __forceinline__ double ce_grad_scale(bool per_row, const float* dloss, int64_t r, int64_t R) {
  return per_row ? static_cast<double>(dloss[r]) : static_cast<double>(dloss[0]) / static_cast<double>(R);
}

template <bool kPerRow>
__global__ void ce_grad_warp_kernel(int64_t R, int64_t C, const float* dloss, const float* x, const int64_t* labels,
                                    float* dx) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t r = warp_index(); r < R; r += warp_count()) {
    const float* row = x + r * C;
    MaxSum ms;
    for (int64_t c = lane; c < C; c += 32) online_add(ms, row[c]);
    ms = warp_combine(ms);
    const double inv_sum = 1.0 / ms.s, scale = ce_grad_scale(kPerRow, dloss, r, R);
    const int64_t label = labels[r];
    for (int64_t c = lane; c < C; c += 32) dx[r * C + c] = ce_grad_of(row[c], ms, inv_sum, c == label, scale);
  }
}

template <bool kPerRow>
__global__ void ce_grad_block_kernel(int64_t R, int64_t C, const float* dloss, const float* x, const int64_t* labels,
                                     float* dx) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float* row = x + r * C;
    float* drow = dx + r * C;
    MaxSum ms = thread_max_sum(row, C);
    ms = block_combine(ms);
    const double inv_sum = 1.0 / ms.s, scale = ce_grad_scale(kPerRow, dloss, r, R);
    const int64_t label = labels[r];
    for_row_columns(row, C, [&](int64_t c, float v) { drow[c] = ce_grad_of(v, ms, inv_sum, c == label, scale); });
  }
}

__global__ void ce_grad_thread_kernel(int64_t N, int64_t C, int64_t P, const float* dloss, const float* x,
                                      const int64_t* labels, float* dx) {
  const double scale = static_cast<double>(dloss[0]) / static_cast<double>(N * P);
  MONET_GRID_LOOP(r, N * P) {
    const int64_t n = r / P, p = r - n * P;
    const float* row = x + n * C * P + p;
    float* drow = dx + n * C * P + p;
    MaxSum ms;
    for (int64_t k = 0; k < C; ++k) online_add(ms, row[k * P]);
    const double inv_sum = 1.0 / ms.s;
    const int64_t label = labels[r];
    for (int64_t k = 0; k < C; ++k) drow[k * P] = ce_grad_of(row[k * P], ms, inv_sum, k == label, scale);
  }
}

// ----------------------------------------------------------------------------------------------- batch norm

template <class I>
__global__ void bn_stat_grad_kernel(I N, I C, I S, bool is_mean, const float* dstat, const float* x,
                                    const float* mean, const float* invstd, float* dx) {
  const double M = static_cast<double>(N) * static_cast<double>(S);
  MONET_GRID_LOOP(il, static_cast<int64_t>(N) * C * S) {
    const I i = static_cast<I>(il);
    const I ch = (i / S) % C;
    const double m = mean[ch], is = invstd[ch];
    const double k = is_mean ? 0.0 : -static_cast<double>(dstat[ch]) * is * is * is / M;
    const double d0 = is_mean ? static_cast<double>(dstat[ch]) / M : 0.0;
    dx[i] = static_cast<float>(d0 + k * (static_cast<double>(x[i]) - m));
  }
}

// This thread's units u of range [m0, m1) of channel ch of (N, C, Su) (units of W floats, Su = S / W), taken in
// (n, s) order: m = m0 + threadIdx.x, stepping by blockDim.x, with (n, s) carried along instead of divided out per
// unit. kChannelUnroll at a time: load(k, u) for each (its loads in flight together), then use(k) for each in the
// same order; the rest one at a time (load(0, u), use(0)). The units are used in the order of one at a time, so
// sums keep their bits. One unit in flight per thread left the 7x7 and 14x14 channels of ResNet-50 b184 at 17-30%
// of the bandwidth on the H200 (2026-11-27), against about 50% for the 56x56 ones.
constexpr int kChannelUnroll = 4;

template <class Load, class Use>
__device__ __forceinline__ void for_channel_range(int64_t C, int64_t Su, int64_t ch, int64_t m0, int64_t m1,
                                                  Load load, Use use) {
  int64_t m = m0 + threadIdx.x;
  if (m >= m1) return;
  int64_t n = m / Su, s = m - n * Su;
  const int64_t step = blockDim.x, qn = step / Su, qs = step - qn * Su;  // step = qn * Su + qs, qs < Su
  auto next = [&] {
    s += qs;
    n += qn;
    if (s >= Su) {
      s -= Su;
      ++n;
    }
  };
  for (; m + (kChannelUnroll - 1) * step < m1; m += kChannelUnroll * step) {
#pragma unroll
    for (int k = 0; k < kChannelUnroll; ++k) {
      load(k, (n * C + ch) * Su + s);
      next();
    }
#pragma unroll
    for (int k = 0; k < kChannelUnroll; ++k) use(k);
  }
  for (; m < m1; m += step) {
    load(0, (n * C + ch) * Su + s);
    use(0);
    next();
  }
}

// A fused batch norm's activation (kernels.h BnActivation), as the CPU kernel applies it and gates its gradient.
__device__ __forceinline__ float bn_activate(const BnActivation& a, float v) {
  if (a.kind == 1) return v > 0.f ? v : 0.f;
  if (a.kind == 2) {
    v = v < a.lo ? a.lo : v;     // std::max(v, lo)
    return a.hi < v ? a.hi : v;  // std::min(v, hi)
  }
  return v;
}
__device__ __forceinline__ bool bn_passes(const BnActivation& a, float y) {
  return a.kind == 1 ? y > 0.f : y > a.lo && y < a.hi;
}

// BatchNormActGrad's gate: the activated output y (GATE 1) or the mask bits (GATE 2, Relu's layout).
struct BnGate {
  const float* y = nullptr;
  const uint32_t* mask = nullptr;
  BnActivation act;
};
// g (unit u of W elements of dy) set to 0 where the activation does not pass; nothing for GATE 0.
template <int W, int GATE>
__device__ __forceinline__ void gate_units(const BnGate& gate, int64_t u, float (&g)[W]) {
  if constexpr (GATE == 1) {
    float y[W];
    load_units<W>(gate.y, u, y);
#pragma unroll
    for (int j = 0; j < W; ++j) g[j] = bn_passes(gate.act, y[j]) ? g[j] : 0.f;
  } else if constexpr (GATE == 2) {
    const int64_t e0 = u * W;  // W divides 32: a unit's bits lie in one word
    const uint32_t bits = gate.mask[e0 >> 5] >> (e0 & 31);
#pragma unroll
    for (int j = 0; j < W; ++j) g[j] = (bits >> j) & 1u ? g[j] : 0.f;
  }
}

// BatchNormGrad's sums in either form: xhat = (v - center) * inv, with v, center, inv = y, bias, 1 / scale
// (output-activated) or x, saved_mean, saved_invstd (input-activated, from_input).
// First pass: block b sums range b % P of channel b / P into partial[b] (sum dy) and partial[C * P + b]
// (sum dy * (v - center)), per-thread double, block_allsum's fixed tree.
// GATE (BatchNormActGrad): dy taken where the activation passes, else 0: 1 where act passes at the activated output
// gate.y, 2 where gate.mask's bit is set (gate_units).
template <int W, int GATE = 0>
__global__ void bn_grad_partial_kernel(int64_t N, int64_t C, int64_t Su, int64_t P, const float* dy, const float* v_,
                                       const float* center, double* __restrict__ partial, BnGate gate = {}) {
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {  // block-uniform
    const int64_t ch = b / P, part = b - ch * P, M = N * Su;
    const double ce = center[ch];
    double sum_dy = 0, dot = 0;
    float g[kChannelUnroll][W], v[kChannelUnroll][W];
    for_channel_range(
        C, Su, ch, M * part / P, M * (part + 1) / P,
        [&](int k, int64_t u) {
          load_units<W>(dy, u, g[k]);
          load_units<W>(v_, u, v[k]);
          gate_units<W, GATE>(gate, u, g[k]);
        },
        [&](int k) {
#pragma unroll
          for (int j = 0; j < W; ++j) {
            sum_dy += g[k][j];
            dot += static_cast<double>(g[k][j]) * (static_cast<double>(v[k][j]) - ce);
          }
        });
    sum_dy = block_allsum(sum_dy);
    dot = block_allsum(dot);
    if (threadIdx.x == 0) {
      partial[b] = sum_dy;
      partial[C * P + b] = dot;
    }
  }
}

// The factor that turns v - center into xhat: 1 / scale (output-activated) or invstd (input-activated).
__device__ __forceinline__ double bn_inv(bool from_input, const float* scale, const float* invstd, int64_t ch) {
  return from_input ? static_cast<double>(invstd[ch]) : 1.0 / static_cast<double>(scale[ch]);
}

// Channel ch's two sums of its P partials (partial[ch * P + k], then partial[C * P + ch * P + k]), added by a warp
// in order (lanes take every 32nd, then the butterfly); every lane gets them.
__device__ __forceinline__ void channel_sum_pair(int64_t C, int64_t P, const double* partial, int64_t ch, int lane,
                                                 double& a, double& b) {
  a = 0, b = 0;
  for (int64_t k = lane; k < P; k += 32) {
    a += partial[ch * P + k];
    b += partial[C * P + ch * P + k];
  }
  a = warp_sum(a);
  b = warp_sum(b);
}

// One warp per channel adds its P partials (channel_sum_pair).
__global__ void bn_grad_sums_kernel(int64_t C, int64_t P, const double* partial, bool from_input, const float* scale,
                                    const float* invstd, float* dscale, float* dbias) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t ch = warp_index(); ch < C; ch += warp_count()) {
    double sum_dy, dot;
    channel_sum_pair(C, P, partial, ch, lane, sum_dy, dot);
    if (lane == 0) {
      dbias[ch] = static_cast<float>(sum_dy);
      dscale[ch] = static_cast<float>(from_input ? dot * bn_inv(true, scale, invstd, ch)
                                                 : dot / static_cast<double>(scale[ch]));
    }
  }
}

// dx over units of W floats (S % W == 0, Su = S / W); I: int32_t when N * C * S < 2^31.
template <class I, int W, int GATE = 0>
__global__ void bn_grad_dx_kernel(I C, I Su, const float* dy, const float* v_, const float* center, bool from_input,
                                  const float* scale, const float* invstd, const float* dscale, const float* dbias,
                                  float* dx, int64_t units, double M, BnGate gate = {}) {
  MONET_GRID_LOOP(ul, units) {
    const I u = static_cast<I>(ul);
    const I ch = (u / Su) % C;
    const double k = static_cast<double>(dscale[ch]) * bn_inv(from_input, scale, invstd, ch) / M;
    const double w = static_cast<double>(invstd[ch]) * scale[ch];
    const double ce = center[ch], mean_dy = dbias[ch] / M;
    float g[W], v[W];
    load_units<W>(dy, u, g);
    load_units<W>(v_, u, v);
    gate_units<W, GATE>(gate, u, g);
#pragma unroll
    for (int j = 0; j < W; ++j) g[j] = static_cast<float>((g[j] - mean_dy - (static_cast<double>(v[j]) - ce) * k) * w);
    store_units<W>(dx, u, g);
  }
}

// BatchNormalization's statistics in one pass over x: block b sums range b % P of channel b / P of d = x - K and
// d * d (K: the channel's first element, a shift that keeps E[d^2] - E[d]^2 free of cancellation) into partial[b]
// and partial[C * P + b], per-thread double, block_allsum's fixed tree.
template <int W>
__global__ void bn_stats_partial_kernel(int64_t N, int64_t C, int64_t Su, int64_t P, const float* x,
                                        double* __restrict__ partial) {
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {  // block-uniform
    const int64_t ch = b / P, part = b - ch * P, M = N * Su;
    const double K = x[ch * Su * W];
    double sum = 0, sq = 0;
    float v[kChannelUnroll][W];
    for_channel_range(
        C, Su, ch, M * part / P, M * (part + 1) / P, [&](int k, int64_t u) { load_units<W>(x, u, v[k]); },
        [&](int k) {
#pragma unroll
          for (int j = 0; j < W; ++j) {
            const double d = static_cast<double>(v[k][j]) - K;
            sum += d;
            sq += d * d;
          }
        });
    sum = block_allsum(sum);
    sq = block_allsum(sq);
    if (threadIdx.x == 0) {
      partial[b] = sum;
      partial[C * P + b] = sq;
    }
  }
}

// One warp per channel adds its P partials in order, then lane 0 writes the saved statistics, the running ones
// (unless null: a recomputation) and the channel's y = x * alpha + beta coefficients (coef[ch], coef[C + ch]) as
// the CPU kernel folds them.
__global__ void bn_stats_finish_kernel(int64_t C, int64_t P, const double* partial, const float* x, int64_t S, double M,
                                       double eps, double momentum, const float* scale, const float* bias,
                                       float* saved_mean, float* saved_invstd, float* running_mean,
                                       float* running_var, float* coef) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t ch = warp_index(); ch < C; ch += warp_count()) {
    double sum, sq;
    channel_sum_pair(C, P, partial, ch, lane, sum, sq);
    if (lane == 0) {
      const double shift = sum / M;
      const double mean = static_cast<double>(x[ch * S]) + shift;
      double var = sq / M - shift * shift;
      if (var < 0) var = 0;  // rounding; a NaN stays NaN (fmax would make it 0), as on the CPU
      const double invstd = 1.0 / sqrt(var + eps);
      saved_mean[ch] = static_cast<float>(mean);
      saved_invstd[ch] = static_cast<float>(invstd);
      coef[ch] = static_cast<float>(invstd * scale[ch]);
      coef[C + ch] = static_cast<float>(bias[ch] - mean * invstd * scale[ch]);
      if (running_mean) {
        running_mean[ch] = static_cast<float>(running_mean[ch] * momentum + mean * (1 - momentum));
        running_var[ch] = static_cast<float>(running_var[ch] * momentum + var * M / (M - 1) * (1 - momentum));
      }
    }
  }
}

// y = x * alpha + beta over units of W floats; y may be x (each unit read before it is written).
template <class I, int W>
__global__ void bn_apply_kernel(I C, I Su, const float* x, const float* coef, float* y, int64_t units,
                                BnActivation act) {
  MONET_GRID_LOOP(ul, units) {
    const I u = static_cast<I>(ul);
    const I ch = (u / Su) % C;
    const float a = coef[ch], b = coef[C + ch];
    float v[W];
    load_units<W>(x, u, v);
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = bn_activate(act, v[j] * a + b);
    store_units<W>(y, u, v);
  }
}

// y = act(y) in place where `activate` (after cuDNN's batch norm), and mask (non-null) = where act passes at the
// activated y (mask_words: one warp per 32-element word).
__global__ void bn_activate_mask_kernel(int64_t n, float* y, BnActivation act, bool activate,
                                        uint32_t* __restrict__ mask) {
  mask_words(n, mask, [&](int64_t i) {
    float v = y[i];
    if (activate) y[i] = v = bn_activate(act, v);
    return bn_passes(act, v);
  });
}

template <int W>
__global__ void channel_partial_kernel(int64_t N, int64_t C, int64_t Su, int64_t P, const float* x,
                                       double* __restrict__ partial) {
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {
    const int64_t ch = b / P, part = b - ch * P, M = N * Su;
    double acc = 0;
    float v[kChannelUnroll][W];
    for_channel_range(
        C, Su, ch, M * part / P, M * (part + 1) / P, [&](int k, int64_t u) { load_units<W>(x, u, v[k]); },
        [&](int k) {
#pragma unroll
          for (int j = 0; j < W; ++j) acc += v[k][j];
        });
    acc = block_allsum(acc);
    if (threadIdx.x == 0) partial[b] = acc;
  }
}

__global__ void channel_sum_kernel(int64_t C, int64_t P, const double* partial, float* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t ch = warp_index(); ch < C; ch += warp_count()) {
    double acc = 0;
    for (int64_t k = lane; k < P; k += 32) acc += partial[ch * P + k];
    acc = warp_sum(acc);
    if (lane == 0) out[ch] = static_cast<float>(acc);
  }
}


}  // namespace

namespace {

constexpr int64_t kWarpRowMax = 1024;  // the longest row one warp holds in registers (32 floats per lane)

bool fits32(int64_t n) { return n < (int64_t{1} << 31); }

}  // namespace

template <bool LOG>
cudaError_t softmax_rows(int64_t outer, int64_t A, int64_t inner, const float* x, float* y, cudaStream_t stream) {
  if (outer * A * inner == 0) return cudaSuccess;
  if (inner == 1 && A <= kWarpRowMax) {
    const bool vec = A % 4 == 0 && aligned16(x) && aligned16(y);
    with_row_width(A, vec, [&](auto n, auto v) {
      launch_kernel(softmax_warp_kernel<decltype(n)::value, decltype(v)::value, LOG>, blocks_for(outer * 32), kThreads, 0,
                    stream, outer, static_cast<int>(A), x, y);
    });
  } else if (inner == 1) {
    if (A % 4 == 0 && aligned16(x) && aligned16(y))
      launch_kernel(softmax_block_kernel<4, LOG>, blocks_for_rows(outer), kThreads, 0, stream, outer, A, x, y);
    else
      launch_kernel(softmax_block_kernel<1, LOG>, blocks_for_rows(outer), kThreads, 0, stream, outer, A, x, y);
  } else if (fits32(outer * A * inner)) {
    launch_kernel(softmax_strided_kernel<int32_t, LOG>, blocks_for(outer * inner), kThreads, 0, stream,
                  static_cast<int32_t>(outer), static_cast<int32_t>(A), static_cast<int32_t>(inner), x, y);
  } else {
    launch_kernel(softmax_strided_kernel<int64_t, LOG>, blocks_for(outer * inner), kThreads, 0, stream, outer, A, inner, x,
                  y);
  }
  return cudaGetLastError();
}

template <bool LOG>
cudaError_t softmax_grad_rows(int64_t outer, int64_t A, int64_t inner, const float* dy, const float* y, float* dx,
                              cudaStream_t stream) {
  if (outer * A * inner == 0) return cudaSuccess;
  if (inner == 1 && A <= kWarpRowMax) {
    const bool vec = A % 4 == 0 && aligned16(dy) && aligned16(y) && aligned16(dx);
    with_row_width(A, vec, [&](auto n, auto v) {
      launch_kernel(softmax_grad_warp_kernel<decltype(n)::value, decltype(v)::value, LOG>, blocks_for(outer * 32), kThreads,
                    0, stream, outer, static_cast<int>(A), dy, y, dx);
    });
  } else if (inner == 1) {
    if (A % 4 == 0 && aligned16(dy) && aligned16(y) && aligned16(dx))
      launch_kernel(softmax_grad_block_kernel<4, LOG>, blocks_for_rows(outer), kThreads, 0, stream, outer, A, dy, y, dx);
    else
      launch_kernel(softmax_grad_block_kernel<1, LOG>, blocks_for_rows(outer), kThreads, 0, stream, outer, A, dy, y, dx);
  } else if (fits32(outer * A * inner)) {
    launch_kernel(softmax_grad_strided_kernel<int32_t, LOG>, blocks_for(outer * inner), kThreads, 0, stream,
                  static_cast<int32_t>(outer), static_cast<int32_t>(A), static_cast<int32_t>(inner), dy, y, dx);
  } else {
    launch_kernel(softmax_grad_strided_kernel<int64_t, LOG>, blocks_for(outer * inner), kThreads, 0, stream, outer, A, inner,
                  dy, y, dx);
  }
  return cudaGetLastError();
}

cudaError_t softmax(int64_t outer, int64_t A, int64_t inner, const float* x, float* y, bool log,
                    cudaStream_t stream) {
  return log ? softmax_rows<true>(outer, A, inner, x, y, stream) : softmax_rows<false>(outer, A, inner, x, y, stream);
}

cudaError_t softmax_grad(int64_t outer, int64_t A, int64_t inner, const float* dy, const float* y, float* dx, bool log,
                         cudaStream_t stream) {
  return log ? softmax_grad_rows<true>(outer, A, inner, dy, y, dx, stream)
             : softmax_grad_rows<false>(outer, A, inner, dy, y, dx, stream);
}

int64_t softmax_cross_entropy_parts(int64_t N, int64_t C, int64_t P) {
  const int64_t R = N * P;
  const int64_t rows_per_block = P > 1 ? kThreads : (C <= kWarpRowMax ? kThreads / 32 : 1);
  const int64_t g = (R + rows_per_block - 1) / rows_per_block;
  return g < 1 ? 1 : (g > 1024 ? 1024 : g);
}

cudaError_t softmax_cross_entropy(int64_t N, int64_t C, int64_t P, const float* x, const int64_t* labels,
                                  double* partial, int* bad_label, float* loss, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(bad_label, 0, sizeof(int), stream);
  if (err != cudaSuccess) return err;
  const int64_t G = softmax_cross_entropy_parts(N, C, P), R = N * P;
  const unsigned g = static_cast<unsigned>(G);
  // Every group writes its partial (0 without rows), so the sum never reads unwritten workspace.
  float* const no_terms = nullptr;
  if (P == 1 && C <= kWarpRowMax)
    launch_kernel(ce_rows_warp_kernel, g, kThreads, 0, stream, R, C, x, labels, partial, bad_label, no_terms);
  else if (P == 1)
    launch_kernel(ce_rows_block_kernel, g, kThreads, 0, stream, R, C, x, labels, partial, bad_label, no_terms);
  else launch_kernel(ce_rows_thread_kernel, g, kThreads, 0, stream, N, C, P, x, labels, partial, bad_label);
  launch_kernel(ce_sum_kernel, 1, kThreads, 0, stream, G, R, partial, loss);
  return cudaGetLastError();
}

cudaError_t softmax_cross_entropy_grad(int64_t N, int64_t C, int64_t P, const float* dloss, const float* x,
                                       const int64_t* labels, float* dx, cudaStream_t stream) {
  const int64_t R = N * P;
  if (R == 0) return cudaSuccess;
  if (P == 1 && C <= kWarpRowMax)
    launch_kernel(ce_grad_warp_kernel<false>, blocks_for(R * 32), kThreads, 0, stream, R, C, dloss, x, labels, dx);
  else if (P == 1)
    launch_kernel(ce_grad_block_kernel<false>, blocks_for_rows(R), kThreads, 0, stream, R, C, dloss, x, labels, dx);
  else
    launch_kernel(ce_grad_thread_kernel, blocks_for(R), kThreads, 0, stream, N, C, P, dloss, x, labels, dx);
  return cudaGetLastError();
}

cudaError_t cross_entropy_rows(int64_t R, int64_t C, const float* x, const int64_t* labels, double* partial,
                               int* bad_label, float* terms, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(bad_label, 0, sizeof(int), stream);
  if (err != cudaSuccess || R == 0) return err;
  const unsigned g = static_cast<unsigned>(softmax_cross_entropy_parts(R, C, 1));
  if (C <= kWarpRowMax)
    launch_kernel(ce_rows_warp_kernel, g, kThreads, 0, stream, R, C, x, labels, partial, bad_label, terms);
  else
    launch_kernel(ce_rows_block_kernel, g, kThreads, 0, stream, R, C, x, labels, partial, bad_label, terms);
  return cudaGetLastError();
}

cudaError_t cross_entropy_rows_grad(int64_t R, int64_t C, const float* dterms, const float* x, const int64_t* labels,
                                    float* dx, cudaStream_t stream) {
  if (R == 0) return cudaSuccess;
  if (C <= kWarpRowMax)
    launch_kernel(ce_grad_warp_kernel<true>, blocks_for(R * 32), kThreads, 0, stream, R, C, dterms, x, labels, dx);
  else
    launch_kernel(ce_grad_block_kernel<true>, blocks_for_rows(R), kThreads, 0, stream, R, C, dterms, x, labels, dx);
  return cudaGetLastError();
}

cudaError_t layer_norm(int64_t R, int64_t D, double epsilon, const float* x, const float* scale, const float* bias,
                       float* y, float* mean, float* invstd, cudaStream_t stream) {
  if (R * D == 0) return cudaSuccess;
  const bool aligned = aligned16(x) && aligned16(y) && aligned16(scale) && aligned16(bias);
  if (D <= kWarpRowMax) {
    with_row_width(D, D % 4 == 0 && aligned, [&](auto n, auto v) {
      launch_kernel(layer_norm_warp_kernel<decltype(n)::value, decltype(v)::value>, blocks_for(R * 32), kThreads, 0,
                    stream, R, static_cast<int>(D), epsilon, x, scale, bias, y, mean, invstd);
    });
  } else if (D % 4 == 0 && aligned) {
    launch_kernel(layer_norm_block_kernel<4>, blocks_for_rows(R), kThreads, 0, stream, R, D, epsilon, x, scale, bias, y,
                  mean, invstd);
  } else {
    launch_kernel(layer_norm_block_kernel<1>, blocks_for_rows(R), kThreads, 0, stream, R, D, epsilon, x, scale, bias, y,
                  mean, invstd);
  }
  return cudaGetLastError();
}

int64_t layer_norm_grad_parts(int64_t R) {
  const int64_t p = (R + 31) / 32;
  return p < 1 ? 1 : (p > 512 ? 512 : p);
}

int64_t layer_norm_grad_workspace_bytes(int64_t R, int64_t D) {
  return 2 * layer_norm_grad_parts(R) * D * static_cast<int64_t>(sizeof(float));
}

cudaError_t layer_norm_grad(int64_t R, int64_t D, const float* dy, const float* x, const float* mean, const float* y,
                            const float* bias, const float* scale, const float* invstd, float* dx, float* dscale,
                            float* dbias, float* partial, cudaStream_t stream) {
  if (D == 0) return cudaSuccess;
  const int64_t P = layer_norm_grad_parts(R);
  const bool from_y = x == nullptr;
  const bool fused = D <= kWarpRowMax && D % 4 == 0 && aligned16(dy) && aligned16(dx) &&
                     (from_y ? aligned16(y) : aligned16(x));  // scale and bias are read element by element
  if (fused) {
    with_row_width(D, true, [&](auto n, auto) {
      constexpr int N = decltype(n)::value;
      if (from_y)
        launch_kernel(layer_norm_grad_fused_kernel<N, true>, static_cast<unsigned>(P), kThreads, 0, stream, R,
                      static_cast<int>(D), P, dy, x, mean, invstd, y, bias, scale, dx, partial);
      else
        launch_kernel(layer_norm_grad_fused_kernel<N, false>, static_cast<unsigned>(P), kThreads, 0, stream, R,
                      static_cast<int>(D), P, dy, x, mean, invstd, y, bias, scale, dx, partial);
    });
  } else {
    // The column partials first: dx may be dy, which the row kernel overwrites.
    const dim3 grid(static_cast<unsigned>((D + 31) / 32), static_cast<unsigned>(P));
    if (from_y)
      launch_kernel(layer_norm_grad_columns_kernel<true>, grid, kThreads, 0, stream, R, D, P, dy, x, mean, invstd, y,
                    bias, scale, partial);
    else
      launch_kernel(layer_norm_grad_columns_kernel<false>, grid, kThreads, 0, stream, R, D, P, dy, x, mean, invstd, y,
                    bias, scale, partial);
    const bool w4 = D % 4 == 0 && aligned16(dx);
    const unsigned b = blocks_for_rows(R);
    if (w4 && from_y)
      launch_kernel(layer_norm_grad_rows_kernel<4, true>, b, kThreads, 0, stream, R, D, dy, x, mean, invstd, y, bias,
                    scale, dx);
    else if (w4)
      launch_kernel(layer_norm_grad_rows_kernel<4, false>, b, kThreads, 0, stream, R, D, dy, x, mean, invstd, y, bias,
                    scale, dx);
    else if (from_y)
      launch_kernel(layer_norm_grad_rows_kernel<1, true>, b, kThreads, 0, stream, R, D, dy, x, mean, invstd, y, bias,
                    scale, dx);
    else
      launch_kernel(layer_norm_grad_rows_kernel<1, false>, b, kThreads, 0, stream, R, D, dy, x, mean, invstd, y, bias,
                    scale, dx);
  }
  launch_kernel(layer_norm_grad_finish_kernel, static_cast<unsigned>((D + 31) / 32), kThreads, 0, stream, P, D, partial,
                dbias, dscale);
  return cudaGetLastError();
}

cudaError_t layer_norm_stat_grad(int64_t R, int64_t D, bool is_mean, const float* dstat, const float* x,
                                 const float* mean, const float* invstd, float* dx, cudaStream_t stream) {
  if (R * D == 0) return cudaSuccess;
  if (fits32(R * D))
    launch_kernel(layer_norm_stat_grad_kernel<int32_t>, blocks_for(R * D), kThreads, 0, stream, static_cast<int32_t>(R),
                  static_cast<int32_t>(D), is_mean, dstat, x, mean, invstd, dx);
  else
    launch_kernel(layer_norm_stat_grad_kernel<int64_t>, blocks_for(R * D), kThreads, 0, stream, R, D, is_mean, dstat, x,
                  mean, invstd, dx);
  return cudaGetLastError();
}

cudaError_t batch_norm_stat_grad(int64_t N, int64_t C, int64_t S, bool is_mean, const float* dstat, const float* x,
                                 const float* mean, const float* invstd, float* dx, cudaStream_t stream) {
  const int64_t n = N * C * S;
  if (n == 0) return cudaSuccess;
  if (fits32(n))
    launch_kernel(bn_stat_grad_kernel<int32_t>, blocks_for(n), kThreads, 0, stream, static_cast<int32_t>(N),
                  static_cast<int32_t>(C), static_cast<int32_t>(S), is_mean, dstat, x, mean, invstd, dx);
  else
    launch_kernel(bn_stat_grad_kernel<int64_t>, blocks_for(n), kThreads, 0, stream, N, C, S, is_mean, dstat, x, mean,
                  invstd, dx);
  return cudaGetLastError();
}

int64_t channel_parts(int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return 1;
  const int64_t p = (2048 + C - 1) / C;  // about 2048 blocks in all
  return p > 1024 ? 1024 : p;
}

namespace {
unsigned blocks_of_parts(int64_t C, int64_t P) {
  const int64_t b = C * P;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (int64_t{1} << 30) ? int64_t{1} << 30 : b));
}
}  // namespace

namespace {

// Both forms of BatchNormGrad: v, center = y, bias (output-activated) or x, saved_mean (from_input); GATE 1 or 2: dy
// gated as BatchNormActGrad's (gate_units).
template <int GATE>
cudaError_t bn_grad(int64_t N, int64_t C, int64_t S, const float* dy, const float* v, const float* center,
                    bool from_input, const float* scale, const float* invstd, float* dx, float* dscale, float* dbias,
                    double* partial, cudaStream_t stream, BnGate gate = {}) {
  if (C == 0) return cudaSuccess;
  const int64_t P = channel_parts(N, C);
  const unsigned pb = blocks_of_parts(C, P);
  const bool sums4 = S % 4 == 0 && aligned16(dy) && aligned16(v) && (GATE != 1 || aligned16(gate.y));
  if (sums4)
    launch_kernel(bn_grad_partial_kernel<4, GATE>, pb, kThreads, 0, stream, N, C, S / 4, P, dy, v, center, partial,
                  gate);
  else
    launch_kernel(bn_grad_partial_kernel<1, GATE>, pb, kThreads, 0, stream, N, C, S, P, dy, v, center, partial, gate);
  launch_kernel(bn_grad_sums_kernel, blocks_for(C * 32), kThreads, 0, stream, C, P, partial, from_input, scale, invstd,
                dscale, dbias);
  const int64_t n = N * C * S;
  if (n == 0) return cudaGetLastError();
  const double M = static_cast<double>(N * S);
  const bool w4 = sums4 && aligned16(dx);
  const int64_t units = w4 ? n / 4 : n, Su = w4 ? S / 4 : S;
  const unsigned b = blocks_for(units);
  if (fits32(n) && w4)
    launch_kernel(bn_grad_dx_kernel<int32_t, 4, GATE>, b, kThreads, 0, stream, static_cast<int32_t>(C),
                  static_cast<int32_t>(Su), dy, v, center, from_input, scale, invstd, dscale, dbias, dx, units, M,
                  gate);
  else if (fits32(n))
    launch_kernel(bn_grad_dx_kernel<int32_t, 1, GATE>, b, kThreads, 0, stream, static_cast<int32_t>(C),
                  static_cast<int32_t>(Su), dy, v, center, from_input, scale, invstd, dscale, dbias, dx, units, M,
                  gate);
  else if (w4)
    launch_kernel(bn_grad_dx_kernel<int64_t, 4, GATE>, b, kThreads, 0, stream, C, Su, dy, v, center, from_input,
                  scale, invstd, dscale, dbias, dx, units, M, gate);
  else
    launch_kernel(bn_grad_dx_kernel<int64_t, 1, GATE>, b, kThreads, 0, stream, C, Su, dy, v, center, from_input,
                  scale, invstd, dscale, dbias, dx, units, M, gate);
  return cudaGetLastError();
}

}  // namespace

cudaError_t batch_norm_grad_from_output(int64_t N, int64_t C, int64_t S, const float* dy, const float* y,
                                        const float* scale, const float* bias, const float* invstd, float* dx,
                                        float* dscale, float* dbias, double* partial, cudaStream_t stream) {
  return bn_grad<0>(N, C, S, dy, y, bias, false, scale, invstd, dx, dscale, dbias, partial, stream);
}

cudaError_t batch_norm_grad_from_input(int64_t N, int64_t C, int64_t S, const float* dy, const float* x,
                                       const float* scale, const float* mean, const float* invstd, float* dx,
                                       float* dscale, float* dbias, double* partial, cudaStream_t stream) {
  return bn_grad<0>(N, C, S, dy, x, mean, true, scale, invstd, dx, dscale, dbias, partial, stream);
}

cudaError_t batch_norm_act_grad(int64_t N, int64_t C, int64_t S, const float* dy, const float* x, const float* y,
                                const uint32_t* mask, BnActivation act, const float* scale, const float* mean,
                                const float* invstd, float* dx, float* dscale, float* dbias, double* partial,
                                cudaStream_t stream) {
  BnGate gate;
  gate.y = y, gate.mask = mask, gate.act = act;
  if (mask) return bn_grad<2>(N, C, S, dy, x, mean, true, scale, invstd, dx, dscale, dbias, partial, stream, gate);
  return bn_grad<1>(N, C, S, dy, x, mean, true, scale, invstd, dx, dscale, dbias, partial, stream, gate);
}

int64_t batch_norm_workspace(int64_t N, int64_t C) {
  return 2 * C * channel_parts(N, C) * static_cast<int64_t>(sizeof(double)) +
         2 * C * static_cast<int64_t>(sizeof(float));
}

cudaError_t batch_norm(int64_t N, int64_t C, int64_t S, const float* x, const float* scale, const float* bias,
                       double eps, double momentum, float* running_mean, float* running_var, float* y,
                       float* saved_mean, float* saved_invstd, void* workspace, cudaStream_t stream,
                       BnActivation act) {
  if (C == 0) return cudaSuccess;
  const int64_t P = channel_parts(N, C);
  double* partial = static_cast<double*>(workspace);
  float* coef = reinterpret_cast<float*>(partial + 2 * C * P);
  const unsigned pb = blocks_of_parts(C, P);
  if (S % 4 == 0 && aligned16(x))
    launch_kernel(bn_stats_partial_kernel<4>, pb, kThreads, 0, stream, N, C, S / 4, P, x, partial);
  else
    launch_kernel(bn_stats_partial_kernel<1>, pb, kThreads, 0, stream, N, C, S, P, x, partial);
  const double M = static_cast<double>(N * S);
  launch_kernel(bn_stats_finish_kernel, blocks_for(C * 32), kThreads, 0, stream, C, P, partial, x, S, M, eps, momentum,
                scale, bias, saved_mean, saved_invstd, running_mean, running_var, coef);
  const int64_t n = N * C * S;
  const bool w4 = S % 4 == 0 && aligned16(x) && aligned16(y);
  const int64_t units = w4 ? n / 4 : n, Su = w4 ? S / 4 : S;
  const unsigned b = blocks_for(units);
  if (fits32(n) && w4)
    launch_kernel(bn_apply_kernel<int32_t, 4>, b, kThreads, 0, stream, static_cast<int32_t>(C),
                  static_cast<int32_t>(Su), x, coef, y, units, act);
  else if (fits32(n))
    launch_kernel(bn_apply_kernel<int32_t, 1>, b, kThreads, 0, stream, static_cast<int32_t>(C),
                  static_cast<int32_t>(Su), x, coef, y, units, act);
  else if (w4)
    launch_kernel(bn_apply_kernel<int64_t, 4>, b, kThreads, 0, stream, C, Su, x, coef, y, units, act);
  else
    launch_kernel(bn_apply_kernel<int64_t, 1>, b, kThreads, 0, stream, C, Su, x, coef, y, units, act);
  return cudaGetLastError();
}

cudaError_t batch_norm_activate(int64_t n, float* y, BnActivation act, bool activate, uint32_t* mask,
                                cudaStream_t stream) {
  if (n == 0 || act.kind == 0 || (!activate && !mask)) return cudaSuccess;
  launch_kernel(bn_activate_mask_kernel, blocks_for((n + 31) / 32 * 32), kThreads, 0, stream, n, y, act, activate,
                mask);
  return cudaGetLastError();
}

cudaError_t channel_sum(int64_t N, int64_t C, int64_t S, const float* x, float* out, double* partial,
                        cudaStream_t stream) {
  if (C == 0) return cudaSuccess;
  const int64_t P = channel_parts(N, C);
  const unsigned pb = blocks_of_parts(C, P);
  if (S % 4 == 0 && aligned16(x))
    launch_kernel(channel_partial_kernel<4>, pb, kThreads, 0, stream, N, C, S / 4, P, x, partial);
  else
    launch_kernel(channel_partial_kernel<1>, pb, kThreads, 0, stream, N, C, S, P, x, partial);
  launch_kernel(channel_sum_kernel, blocks_for(C * 32), kThreads, 0, stream, C, P, partial, out);
  return cudaGetLastError();
}

// ----------------------------------------------------------------------------------------------- ReduceMax, CumSum
// One thread per output (ReduceMax) or per column (CumSum), walking its elements in index order as the CPU does:
// the maximum is exact, and CumSum's running sum in double equals the CPU's bit for bit.

namespace {

// x's offset of kept element o (row-major over the kept dims) and of reduced element r, in a ReduceGeom.
__device__ __forceinline__ int64_t geom_offset(const int64_t* size, const int64_t* stride, int rank, int64_t i) {
  int64_t off = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d >= rank) continue;
    off += (i % size[d]) * stride[d];
    i /= size[d];
  }
  return off;
}

__global__ void reduce_max_kernel(ReduceGeom g, const float* x, float* y) {
  MONET_GRID_LOOP(o, g.out_n) {
    const float* xo = x + geom_offset(g.kept_size, g.kept_stride[0], g.kept_rank, o);
    float m = -INFINITY;
    for (int64_t r = 0; r < g.red_n; ++r) {
      const float v = xo[geom_offset(g.red_size, g.red_stride[0], g.red_rank, r)];
      if (!isnan(m) && (v > m || isnan(v))) m = v;
    }
    y[o] = m;
  }
}

__global__ void reduce_max_grad_kernel(ReduceGeom g, const float* dy, const float* x, const float* y, float* dx) {
  MONET_GRID_LOOP(o, g.out_n) {
    const int64_t base = geom_offset(g.kept_size, g.kept_stride[0], g.kept_rank, o);
    const float m = y[o];
    int64_t ties = 0;
    for (int64_t r = 0; r < g.red_n; ++r)
      ties += x[base + geom_offset(g.red_size, g.red_stride[0], g.red_rank, r)] == m;
    const float share = ties > 0 ? dy[o] / static_cast<float>(ties) : 0.f;
    for (int64_t r = 0; r < g.red_n; ++r) {
      const int64_t at = base + geom_offset(g.red_size, g.red_stride[0], g.red_rank, r);
      dx[at] = x[at] == m ? share : 0.f;
    }
  }
}

__global__ void cum_sum_kernel(int64_t outer, int64_t A, int64_t inner, bool exclusive, bool reverse, const float* x,
                               float* y) {
  MONET_GRID_LOOP(col, outer * inner) {
    const int64_t o = col / inner, k = col % inner;
    double acc = 0;
    for (int64_t step = 0; step < A; ++step) {
      const int64_t j = reverse ? A - 1 - step : step;
      const int64_t at = (o * A + j) * inner + k;
      const double v = x[at];  // read before y is written: y may be x
      if (!exclusive) acc += v;
      y[at] = static_cast<float>(acc);
      if (exclusive) acc += v;
    }
  }
}

}  // namespace

cudaError_t reduce_max(const ReduceGeom& g, const float* x, float* y, cudaStream_t stream) {
  launch_kernel(reduce_max_kernel, blocks_for(g.out_n), kThreads, 0, stream, g, x, y);
  return cudaGetLastError();
}

cudaError_t reduce_max_grad(const ReduceGeom& g, const float* dy, const float* x, const float* y, float* dx,
                            cudaStream_t stream) {
  launch_kernel(reduce_max_grad_kernel, blocks_for(g.out_n), kThreads, 0, stream, g, dy, x, y, dx);
  return cudaGetLastError();
}

cudaError_t cum_sum(int64_t outer, int64_t A, int64_t inner, bool exclusive, bool reverse, const float* x, float* y,
                    cudaStream_t stream) {
  launch_kernel(cum_sum_kernel, blocks_for(outer * inner), kThreads, 0, stream, outer, A, inner, exclusive, reverse, x,
                y);
  return cudaGetLastError();
}

}  // namespace monet::cuda
