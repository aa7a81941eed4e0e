// Normalisation, pooling, softmax and loss kernels: Softmax and its gradient, SoftmaxCrossEntropy and its
// gradient, LayerNorm and its gradients, BatchNormStatGrad, MaxPool and AveragePool with their gradients.
// (BatchNormalization and its gradient run on cuDNN: cuda_norm_pool.cpp.) Each follows the CPU kernel of its op, including the order in which
// values are accumulated where that order is cheap to keep (pool gradients gather in the CPU's scatter order, so
// they match it bit for bit, and no kernel here uses atomics: every result is deterministic).
#include <cmath>

#include "engine/cuda/launch.cuh"

namespace monet::cuda {
namespace {

// ----------------------------------------------------------------------------------------------- softmax

__global__ void softmax_kernel(int64_t outer, int64_t A, int64_t inner, const float* x, float* y) {
  MONET_GRID_LOOP(r, outer * inner) {
    const int64_t base = (r / inner) * A * inner + r % inner;
    const float* xr = x + base;  // stride inner along the axis
    float* yr = y + base;
    float maxval = xr[0];
    for (int64_t a = 1; a < A; ++a) maxval = maxval < xr[a * inner] ? xr[a * inner] : maxval;
    double sum = 0;
    for (int64_t a = 0; a < A; ++a) {
      const float e = expf(xr[a * inner] - maxval);
      yr[a * inner] = e;
      sum += e;
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int64_t a = 0; a < A; ++a) yr[a * inner] *= inv_sum;
  }
}

__global__ void softmax_grad_kernel(int64_t outer, int64_t A, int64_t inner, const float* dy, const float* y,
                                    float* dx) {
  MONET_GRID_LOOP(r, outer * inner) {
    const int64_t base = (r / inner) * A * inner + r % inner;
    double dot = 0;
    for (int64_t a = 0; a < A; ++a) dot += __fmul_rn(dy[base + a * inner], y[base + a * inner]);
    const float d = static_cast<float>(dot);
    for (int64_t a = 0; a < A; ++a) {
      const int64_t k = base + a * inner;
      dx[k] = y[k] * (dy[k] - d);
    }
  }
}

// ----------------------------------------------------------------------------------------------- layer norm

// One block per row: the statistics in double (each thread's strided share, then block_sum's fixed tree:
// deterministic), then each thread writes the y of the elements it read. y may be x: block_sum synchronises the
// block after the last read of x and before the first write.
__global__ void layer_norm_kernel(int64_t R, int64_t D, double eps, const float* x, const float* scale,
                                  const float* bias, float* y, float* mean_out, float* invstd_out) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    double acc = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) acc += xr[d];
    const double mean = block_sum(acc) / static_cast<double>(D);
    acc = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) acc += (xr[d] - mean) * (xr[d] - mean);
    const double invstd = 1.0 / sqrt(block_sum(acc) / static_cast<double>(D) + eps);
    if (threadIdx.x == 0) {
      mean_out[r] = static_cast<float>(mean);
      invstd_out[r] = static_cast<float>(invstd);
    }
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
      yr[d] = static_cast<float>((xr[d] - mean) * invstd * scale[d] + bias[d]);
  }
}

// xhat of element (r, d): from x and the row's mean (x non-null), else from y, bias and scale.
__device__ __forceinline__ double ln_xhat(int64_t r, int64_t d, int64_t D, const float* x, const float* mean,
                                          const float* invstd, const float* y, const float* bias,
                                          const float* scale) {
  const int64_t e = r * D + d;
  return x ? (static_cast<double>(x[e]) - mean[r]) * static_cast<double>(invstd[r])
           : (static_cast<double>(y[e]) - bias[d]) / static_cast<double>(scale[d]);
}

__global__ void layer_norm_grad_columns_kernel(int64_t R, int64_t D, const float* dy, const float* x,
                                               const float* mean, const float* invstd, const float* y,
                                               const float* bias, const float* scale, float* dscale, float* dbias) {
  MONET_GRID_LOOP(d, D) {
    double sum_dy = 0, dot = 0;
    for (int64_t r = 0; r < R; ++r) {
      sum_dy += dy[r * D + d];
      dot += dy[r * D + d] * ln_xhat(r, d, D, x, mean, invstd, y, bias, scale);
    }
    dbias[d] = static_cast<float>(sum_dy);
    dscale[d] = static_cast<float>(dot);
  }
}

// One block per row, as layer_norm_kernel: the row's two sums, then each thread's dx from the dy it read (dx may
// be dy).
__global__ void layer_norm_grad_rows_kernel(int64_t R, int64_t D, const float* dy, const float* x, const float* mean,
                                            const float* invstd, const float* y, const float* bias,
                                            const float* scale, float* dx) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    double sum_g = 0, dot_g = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const double g = static_cast<double>(dy[r * D + d]) * scale[d];
      sum_g += g;
      dot_g += g * ln_xhat(r, d, D, x, mean, invstd, y, bias, scale);
    }
    const double mean_g = block_sum(sum_g) / static_cast<double>(D);
    const double mean_gx = block_sum(dot_g) / static_cast<double>(D);
    const double is = invstd[r];
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const double g = static_cast<double>(dy[r * D + d]) * scale[d];
      const double xhat = ln_xhat(r, d, D, x, mean, invstd, y, bias, scale);
      dx[r * D + d] = static_cast<float>(is * (g - mean_g - xhat * mean_gx));
    }
  }
}

__global__ void layer_norm_stat_grad_kernel(int64_t R, int64_t D, bool is_mean, const float* dstat, const float* x,
                                            const float* mean, const float* invstd, float* dx) {
  MONET_GRID_LOOP(e, R * D) {
    const int64_t r = e / D;
    const double is = invstd[r];
    dx[e] = static_cast<float>(is_mean ? dstat[r] / static_cast<double>(D)
                                       : -dstat[r] * is * is * is * (x[e] - mean[r]) / static_cast<double>(D));
  }
}

// ----------------------------------------------------------------------------------------------- cross-entropy

// One thread per (n, p): -log softmax(x)[label] in double, as the CPU computes it.
__global__ void ce_rows_kernel(int64_t N, int64_t C, int64_t P, const float* x, const int64_t* labels, double* rows,
                               int* bad_label) {
  MONET_GRID_LOOP(r, N * P) {
    const int64_t n = r / P, p = r % P;
    const float* row = x + n * C * P + p;
    double mx = row[0];
    for (int64_t k = 1; k < C; ++k) mx = fmax(mx, static_cast<double>(row[k * P]));
    double sum = 0;
    for (int64_t k = 0; k < C; ++k) sum += exp(static_cast<double>(row[k * P]) - mx);
    const int64_t label = labels[r];
    if (label < 0 || label >= C) {
      *bad_label = 1;
      rows[r] = 0;
      continue;
    }
    rows[r] = log(sum) + mx - static_cast<double>(row[label * P]);
  }
}

// Blocks of one row each when the classes are contiguous (P == 1, ImageNet's 1000): the max and the sum of
// exponentials reduced in shared memory in a fixed order (deterministic), instead of one thread walking 1000
// classes three times.
__device__ inline double block_max(double v) {
  __shared__ double buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) buf[threadIdx.x] = fmax(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  const double r = buf[0];
  __syncthreads();
  return r;
}

// The row's max and sum of exp(x - max), both in double; every thread of the block gets them.
__device__ inline void row_max_sum(const float* row, int64_t C, double& mx, double& sum) {
  double m = -INFINITY;
  for (int64_t k = threadIdx.x; k < C; k += blockDim.x) m = fmax(m, static_cast<double>(row[k]));
  mx = block_max(m);
  double acc = 0;
  for (int64_t k = threadIdx.x; k < C; k += blockDim.x) acc += exp(static_cast<double>(row[k]) - mx);
  sum = block_sum(acc);
}

__global__ void ce_rows_block_kernel(int64_t N, int64_t C, const float* x, const int64_t* labels, double* rows,
                                     int* bad_label) {
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float* row = x + r * C;
    double mx, sum;
    row_max_sum(row, C, mx, sum);
    if (threadIdx.x == 0) {
      const int64_t label = labels[r];
      if (label < 0 || label >= C) {
        *bad_label = 1;
        rows[r] = 0;
      } else {
        rows[r] = log(sum) + mx - static_cast<double>(row[label]);
      }
    }
  }
}

__global__ void ce_grad_block_kernel(int64_t N, int64_t C, const float* dloss, const float* x, const int64_t* labels,
                                     float* dx) {
  const double scale = static_cast<double>(dloss[0]) / static_cast<double>(N);
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float* row = x + r * C;
    double mx, sum;
    row_max_sum(row, C, mx, sum);
    const int64_t label = labels[r];
    for (int64_t k = threadIdx.x; k < C; k += blockDim.x) {
      const double s = exp(static_cast<double>(row[k]) - mx) / sum - (k == label ? 1.0 : 0.0);
      dx[r * C + k] = static_cast<float>(s * scale);
    }
  }
}

__global__ void ce_sum_kernel(int64_t n, const double* rows, float* loss) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += rows[i];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) loss[0] = static_cast<float>(total / static_cast<double>(n));
}

__global__ void ce_grad_kernel(int64_t N, int64_t C, int64_t P, const float* dloss, const float* x,
                               const int64_t* labels, float* dx) {
  const double scale = static_cast<double>(dloss[0]) / static_cast<double>(N * P);
  MONET_GRID_LOOP(r, N * P) {
    const int64_t n = r / P, p = r % P;
    const float* row = x + n * C * P + p;
    float* drow = dx + n * C * P + p;
    double mx = row[0];
    for (int64_t k = 1; k < C; ++k) mx = fmax(mx, static_cast<double>(row[k * P]));
    double sum = 0;
    for (int64_t k = 0; k < C; ++k) sum += exp(static_cast<double>(row[k * P]) - mx);
    const int64_t label = labels[r];
    for (int64_t k = 0; k < C; ++k) {
      const double s = exp(static_cast<double>(row[k * P]) - mx) / sum - (k == label ? 1.0 : 0.0);
      drow[k * P] = static_cast<float>(s * scale);
    }
  }
}

// ----------------------------------------------------------------------------------------------- batch norm

__global__ void bn_stat_grad_kernel(int64_t N, int64_t C, int64_t S, bool is_mean, const float* dstat,
                                    const float* x, const float* mean, const float* invstd, float* dx) {
  const double M = static_cast<double>(N * S);
  MONET_GRID_LOOP(i, N * C * S) {
    const int64_t ch = (i / S) % C;
    const double m = mean[ch], is = invstd[ch];
    const double k = is_mean ? 0.0 : -static_cast<double>(dstat[ch]) * is * is * is / M;
    const double d0 = is_mean ? static_cast<double>(dstat[ch]) / M : 0.0;
    dx[i] = static_cast<float>(d0 + k * (static_cast<double>(x[i]) - m));
  }
}

// ----------------------------------------------------------------------------------------------- max pool

// Pool's geometry in the kernels' index type I: int32_t when every index of x and y fits (64-bit division is
// emulated on the GPU and made these kernels several times slower than the memory allows), else int64_t.
template <class I>
struct PoolI {
  I planes, H, W, OH, OW, kH, kW, sH, sW, dH, dW, padT, padL;
};
template <class I>
PoolI<I> narrow(const Pool& p) {
  return {static_cast<I>(p.planes), static_cast<I>(p.H),  static_cast<I>(p.W),  static_cast<I>(p.OH),
          static_cast<I>(p.OW),     static_cast<I>(p.kH), static_cast<I>(p.kW), static_cast<I>(p.sH),
          static_cast<I>(p.sW),     static_cast<I>(p.dH), static_cast<I>(p.dW), static_cast<I>(p.padT),
          static_cast<I>(p.padL)};
}
bool fits32(const Pool& p) {
  const int64_t limit = int64_t{1} << 31;
  return p.planes * p.H * p.W < limit && p.planes * p.OH * p.OW < limit && p.kH * p.kW < limit &&
         (p.OH + 1) * p.sH + p.kH * p.dH < limit && (p.OW + 1) * p.sW + p.kW * p.dW < limit;
}

// The tap (kh * kW + kw) of window (oh, ow)'s first maximum in one plane; the CPU's window_tap.
template <class I>
__device__ I window_tap(const PoolI<I>& p, const float* xp, I oh, I ow) {
  const I ih0 = oh * p.sH - p.padT, iw0 = ow * p.sW - p.padL;
  float maxval = -INFINITY;
  I tap = -1;
  for (I kh = 0; kh < p.kH; ++kh) {
    const I ih = ih0 + kh * p.dH;
    if (ih < 0 || ih >= p.H) continue;
    for (I kw = 0; kw < p.kW; ++kw) {
      const I iw = iw0 + kw * p.dW;
      if (iw < 0 || iw >= p.W) continue;
      const float v = xp[ih * p.W + iw];
      if (tap < 0 || v > maxval || isnan(v)) {
        maxval = v;
        tap = kh * p.kW + kw;
      }
    }
  }
  return tap;
}

// Index (ih * W + iw) in the plane of tap `tap` of window (oh, ow).
template <class I>
__device__ __forceinline__ I tap_index(const PoolI<I>& p, I oh, I ow, I tap) {
  return (oh * p.sH - p.padT + (tap / p.kW) * p.dH) * p.W + (ow * p.sW - p.padL + (tap % p.kW) * p.dW);
}

// One thread per byte of 4-bit taps (two outputs), else per output: no two threads write one byte.
template <class I>
__global__ void max_pool_kernel(PoolI<I> p, const float* x, float* y, uint8_t* taps, int bits) {
  const I n = p.planes * p.OH * p.OW;
  const I per = bits == 4 ? 2 : 1;
  MONET_GRID_LOOP(gl, (n + per - 1) / per) {
    const I g = static_cast<I>(gl);
    unsigned packed = 0;
    for (I k = 0; k < per; ++k) {
      const I i = g * per + k;
      if (i >= n) break;
      const I plane = i / (p.OH * p.OW), o = i - plane * (p.OH * p.OW);
      const float* xp = x + static_cast<int64_t>(plane) * p.H * p.W;
      const I oh = o / p.OW, ow = o - oh * p.OW, tap = window_tap(p, xp, oh, ow);
      y[i] = xp[tap_index(p, oh, ow, tap)];
      if (!taps) {
        continue;  // nothing reads them (OpDef::optional_outputs)
      } else if (bits == 4) {
        packed |= static_cast<unsigned>(tap) << (4 * k);
      } else if (bits == 8) {
        taps[i] = static_cast<uint8_t>(tap);
      } else {
        taps[2 * static_cast<int64_t>(i)] = static_cast<uint8_t>(tap & 0xff);
        taps[2 * static_cast<int64_t>(i) + 1] = static_cast<uint8_t>(tap >> 8);
      }
    }
    if (taps && bits == 4) taps[g] = static_cast<uint8_t>(packed);
  }
}

template <class I>
__global__ void max_pool_unpack_kernel(PoolI<I> p, const uint8_t* taps, int bits, int32_t* argmax) {
  MONET_GRID_LOOP(il, static_cast<int64_t>(p.planes) * p.OH * p.OW) {
    const I i = static_cast<I>(il);
    const I o = i % (p.OH * p.OW);
    const I tap = bits == 4   ? (taps[i / 2] >> (4 * (i % 2))) & 0xf
                  : bits == 8 ? taps[i]
                              : taps[2 * static_cast<int64_t>(i)] | (static_cast<I>(taps[2 * static_cast<int64_t>(i) + 1]) << 8);
    argmax[i] = static_cast<int32_t>(tap_index(p, o / p.OW, o % p.OW, tap));
  }
}

template <class I>
__global__ void max_pool_argmax_kernel(PoolI<I> p, const float* x, int32_t* argmax) {
  MONET_GRID_LOOP(il, static_cast<int64_t>(p.planes) * p.OH * p.OW) {
    const I i = static_cast<I>(il);
    const I plane = i / (p.OH * p.OW), o = i - plane * (p.OH * p.OW);
    const float* xp = x + static_cast<int64_t>(plane) * p.H * p.W;
    const I oh = o / p.OW, ow = o - oh * p.OW;
    argmax[i] = static_cast<int32_t>(tap_index(p, oh, ow, window_tap(p, xp, oh, ow)));
  }
}

// The output rows [lo, hi] whose window starts at o * s - pad and spans `extent` input rows may contain row i.
template <class I>
__device__ __forceinline__ void window_range(I i, I pad, I s, I extent, I out, I& lo, I& hi) {
  const I num = i + pad - extent + 1;  // o * s > i + pad - extent
  lo = num <= 0 ? 0 : (num + s - 1) / s;
  hi = (i + pad) / s;
  if (hi > out - 1) hi = out - 1;
}

// One thread per dx element. SH / SW: the strides when known at compile time (0: read from p), which turns the
// four divisions by the stride in the window ranges into shifts; with runtime divisors this pass was bound by
// integer division. (One block row per input row instead left most threads idle on 7x7 and 14x14 planes.)
template <class I, int SH, int SW>
__global__ void max_pool_grad_kernel(PoolI<I> p, const float* dy, const int32_t* argmax, float* dx) {
  const I sH = SH ? SH : p.sH, sW = SW ? SW : p.sW;
  MONET_GRID_LOOP(il, static_cast<int64_t>(p.planes) * p.H * p.W) {
    const I i = static_cast<I>(il);
    const I plane = i / (p.H * p.W), e = i - plane * (p.H * p.W);
    const I ih = e / p.W, iw = e - ih * p.W;
    I oh_lo, oh_hi, ow_lo, ow_hi;
    window_range<I>(ih, p.padT, sH, (p.kH - 1) * p.dH + 1, p.OH, oh_lo, oh_hi);
    window_range<I>(iw, p.padL, sW, (p.kW - 1) * p.dW + 1, p.OW, ow_lo, ow_hi);
    const int32_t* am = argmax + static_cast<int64_t>(plane) * p.OH * p.OW;
    const float* dyp = dy + static_cast<int64_t>(plane) * p.OH * p.OW;
    float acc = 0.f;
    for (I oh = oh_lo; oh <= oh_hi; ++oh)
      for (I ow = ow_lo; ow <= ow_hi; ++ow)
        if (am[oh * p.OW + ow] == e) acc += dyp[oh * p.OW + ow];
    dx[i] = acc;
  }
}

// max_pool_grad_kernel over four consecutive dx elements of a row per thread (W % 4 == 0, dx 16-byte aligned): one
// index split per four elements, the windows of the four read once, one float4 store. Each element sums the same
// windows in the same (oh, ow) order as the one-element kernel (a window's argmax lies inside it, so the extra
// windows of the wider range never match): the same bits.
template <class I, int SH, int SW>
__global__ void max_pool_grad4_kernel(PoolI<I> p, const float* dy, const int32_t* argmax, float4* dx) {
  const I W4 = p.W / 4;
  MONET_GRID_LOOP(il, static_cast<int64_t>(p.planes) * p.H * W4) {
    const I i = static_cast<I>(il);
    const I row = i / W4, iw0 = (i - row * W4) * 4;
    const I plane = row / p.H, ih = row - plane * p.H;
    I oh_lo, oh_hi, ow_lo, ow_hi, unused;
    window_range<I>(ih, p.padT, SH, (p.kH - 1) * p.dH + 1, p.OH, oh_lo, oh_hi);
    window_range<I>(iw0, p.padL, SW, (p.kW - 1) * p.dW + 1, p.OW, ow_lo, unused);
    window_range<I>(iw0 + 3, p.padL, SW, (p.kW - 1) * p.dW + 1, p.OW, unused, ow_hi);
    const int32_t* am = argmax + static_cast<int64_t>(plane) * p.OH * p.OW;
    const float* dyp = dy + static_cast<int64_t>(plane) * p.OH * p.OW;
    const I e0 = ih * p.W + iw0;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (I oh = oh_lo; oh <= oh_hi; ++oh)
      for (I ow = ow_lo; ow <= ow_hi; ++ow) {
        const I d = static_cast<I>(am[oh * p.OW + ow]) - e0;
        if (d < 0 || d > 3) continue;
        const float g = dyp[oh * p.OW + ow];
        if (d == 0) acc.x += g;
        else if (d == 1) acc.y += g;
        else if (d == 2) acc.z += g;
        else acc.w += g;
      }
    dx[i] = acc;
  }
}

// ----------------------------------------------------------------------------------------------- average pool

// The CPU's avg_window: real rows/cols [h0, h1) x [w0, w1) of window (oh, ow) and its divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
__device__ __forceinline__ AvgWindow avg_window(const Pool& p, bool cip, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.sH - p.padT, w0 = ow * p.sW - p.padL;
  int64_t h1 = h0 + p.kH < p.H + p.padB ? h0 + p.kH : p.H + p.padB;
  int64_t w1 = w0 + p.kW < p.W + p.padR ? w0 + p.kW : p.W + p.padR;
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = h0 < 0 ? 0 : h0;
  w0 = w0 < 0 ? 0 : w0;
  h1 = h1 < p.H ? h1 : p.H;
  w1 = w1 < p.W ? w1 : p.W;
  return {h0, h1, w0, w1, cip ? padded : (h1 - h0) * (w1 - w0)};
}

__global__ void average_pool_kernel(Pool p, bool cip, const float* x, float* y) {
  MONET_GRID_LOOP(i, p.planes * p.OH * p.OW) {
    const int64_t plane = i / (p.OH * p.OW), o = i % (p.OH * p.OW);
    const float* xp = x + plane * p.H * p.W;
    const AvgWindow w = avg_window(p, cip, o / p.OW, o % p.OW);
    double sum = 0;
    for (int64_t ih = w.h0; ih < w.h1; ++ih)
      for (int64_t iw = w.w0; iw < w.w1; ++iw) sum += xp[ih * p.W + iw];
    y[i] = static_cast<float>(sum / static_cast<double>(w.divisor));
  }
}

__global__ void average_pool_grad_kernel(Pool p, bool cip, const float* dy, float* dx) {
  MONET_GRID_LOOP(i, p.planes * p.H * p.W) {
    const int64_t plane = i / (p.H * p.W), e = i % (p.H * p.W);
    const int64_t ih = e / p.W, iw = e % p.W;
    int64_t oh_lo, oh_hi, ow_lo, ow_hi;
    window_range<int64_t>(ih, p.padT, p.sH, p.kH, p.OH, oh_lo, oh_hi);
    window_range<int64_t>(iw, p.padL, p.sW, p.kW, p.OW, ow_lo, ow_hi);
    const float* dyp = dy + plane * p.OH * p.OW;
    float acc = 0.f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const AvgWindow w = avg_window(p, cip, oh, ow);
        if (ih >= w.h0 && ih < w.h1 && iw >= w.w0 && iw < w.w1)
          acc += dyp[oh * p.OW + ow] / static_cast<float>(w.divisor);
      }
    dx[i] = acc;
  }
}

}  // namespace

cudaError_t softmax(int64_t outer, int64_t A, int64_t inner, const float* x, float* y, cudaStream_t stream) {
  softmax_kernel<<<blocks_for(outer * inner), kThreads, 0, stream>>>(outer, A, inner, x, y);
  return cudaGetLastError();
}

cudaError_t softmax_grad(int64_t outer, int64_t A, int64_t inner, const float* dy, const float* y, float* dx,
                         cudaStream_t stream) {
  softmax_grad_kernel<<<blocks_for(outer * inner), kThreads, 0, stream>>>(outer, A, inner, dy, y, dx);
  return cudaGetLastError();
}

cudaError_t softmax_cross_entropy(int64_t N, int64_t C, int64_t P, const float* x, const int64_t* labels,
                                  double* rows, int* bad_label, float* loss, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(bad_label, 0, sizeof(int), stream);
  if (err != cudaSuccess) return err;
  if (P == 1 && C >= 64)
    ce_rows_block_kernel<<<static_cast<unsigned>(N < 65535 ? N : 65535), kThreads, 0, stream>>>(N, C, x, labels, rows,
                                                                                                bad_label);
  else
    ce_rows_kernel<<<blocks_for(N * P), kThreads, 0, stream>>>(N, C, P, x, labels, rows, bad_label);
  ce_sum_kernel<<<1, kThreads, 0, stream>>>(N * P, rows, loss);
  return cudaGetLastError();
}

cudaError_t softmax_cross_entropy_grad(int64_t N, int64_t C, int64_t P, const float* dloss, const float* x,
                                       const int64_t* labels, float* dx, cudaStream_t stream) {
  if (P == 1 && C >= 64)
    ce_grad_block_kernel<<<static_cast<unsigned>(N < 65535 ? N : 65535), kThreads, 0, stream>>>(N, C, dloss, x, labels,
                                                                                                dx);
  else
    ce_grad_kernel<<<blocks_for(N * P), kThreads, 0, stream>>>(N, C, P, dloss, x, labels, dx);
  return cudaGetLastError();
}

namespace {
// Blocks for one-block-per-row kernels (a block loop covers rows beyond 2^20).
unsigned row_blocks(int64_t R) {
  return static_cast<unsigned>(R < 1 ? 1 : (R > (int64_t{1} << 20) ? int64_t{1} << 20 : R));
}
}  // namespace

cudaError_t layer_norm(int64_t R, int64_t D, double epsilon, const float* x, const float* scale, const float* bias,
                       float* y, float* mean, float* invstd, cudaStream_t stream) {
  layer_norm_kernel<<<row_blocks(R), kThreads, 0, stream>>>(R, D, epsilon, x, scale, bias, y, mean, invstd);
  return cudaGetLastError();
}

cudaError_t layer_norm_grad(int64_t R, int64_t D, const float* dy, const float* x, const float* mean, const float* y,
                            const float* bias, const float* scale, const float* invstd, float* dx, float* dscale,
                            float* dbias, cudaStream_t stream) {
  layer_norm_grad_columns_kernel<<<blocks_for(D), kThreads, 0, stream>>>(R, D, dy, x, mean, invstd, y, bias, scale,
                                                                          dscale, dbias);
  layer_norm_grad_rows_kernel<<<row_blocks(R), kThreads, 0, stream>>>(R, D, dy, x, mean, invstd, y, bias, scale, dx);
  return cudaGetLastError();
}

cudaError_t layer_norm_stat_grad(int64_t R, int64_t D, bool is_mean, const float* dstat, const float* x,
                                 const float* mean, const float* invstd, float* dx, cudaStream_t stream) {
  layer_norm_stat_grad_kernel<<<blocks_for(R * D), kThreads, 0, stream>>>(R, D, is_mean, dstat, x, mean, invstd, dx);
  return cudaGetLastError();
}

cudaError_t batch_norm_stat_grad(int64_t N, int64_t C, int64_t S, bool is_mean, const float* dstat, const float* x,
                                 const float* mean, const float* invstd, float* dx, cudaStream_t stream) {
  bn_stat_grad_kernel<<<blocks_for(N * C * S), kThreads, 0, stream>>>(N, C, S, is_mean, dstat, x, mean, invstd, dx);
  return cudaGetLastError();
}

namespace {

// Calls f(e) for every element e of part `part` of channel ch of (N, C, S): the images [N * part / P,
// N * (part + 1) / P), this thread's share in a fixed order, n outer, s inner (no division per element).
template <class F>
__device__ __forceinline__ void for_channel_part(int64_t N, int64_t C, int64_t S, int64_t ch, int64_t part, int64_t P,
                                                 F f) {
  for (int64_t n = N * part / P; n < N * (part + 1) / P; ++n) {
    const int64_t base = (n * C + ch) * S;
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) f(base + s);
  }
}

// First pass of the per-channel sums: block b sums part b % P of channel b / P into partial[b] (K sums per
// element, partial holds K arrays of C * P). The second pass adds each channel's P partials in order.
__global__ void bn_grad_from_output_partial_kernel(int64_t N, int64_t C, int64_t S, int64_t P, const float* dy,
                                                   const float* y, const float* bias, double* partial) {
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {
    const int64_t ch = b / P;
    const double bi = bias[ch];
    double sum_dy = 0, dot = 0;
    for_channel_part(N, C, S, ch, b % P, P, [&](int64_t e) {
      sum_dy += dy[e];
      dot += static_cast<double>(dy[e]) * (static_cast<double>(y[e]) - bi);
    });
    sum_dy = block_sum(sum_dy);
    dot = block_sum(dot);
    if (threadIdx.x == 0) {
      partial[b] = sum_dy;
      partial[C * P + b] = dot;
    }
  }
}

__global__ void bn_grad_from_output_sums_kernel(int64_t C, int64_t P, const double* partial, const float* scale,
                                                float* dscale, float* dbias) {
  MONET_GRID_LOOP(ch, C) {
    double sum_dy = 0, dot = 0;
    for (int64_t k = 0; k < P; ++k) {
      sum_dy += partial[ch * P + k];
      dot += partial[C * P + ch * P + k];
    }
    dbias[ch] = static_cast<float>(sum_dy);
    dscale[ch] = static_cast<float>(dot / static_cast<double>(scale[ch]));
  }
}

template <class I>
__global__ void bn_grad_from_output_dx_kernel(I C, I S, const float* dy, const float* y, const float* scale,
                                              const float* bias, const float* invstd, const float* dscale,
                                              const float* dbias, float* dx, int64_t n, double M) {
  MONET_GRID_LOOP(el, n) {
    const I e = static_cast<I>(el);
    const I ch = (e / S) % C;
    const double mul = 1.0 / static_cast<double>(scale[ch]);
    const double k = static_cast<double>(dscale[ch]) * mul / M;
    const double w = static_cast<double>(invstd[ch]) * scale[ch];
    dx[e] = static_cast<float>((dy[e] - dbias[ch] / M - (static_cast<double>(y[e]) - bias[ch]) * k) * w);
  }
}

__global__ void channel_partial_kernel(int64_t N, int64_t C, int64_t S, int64_t P, const float* x, double* partial) {
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {
    double acc = 0;
    for_channel_part(N, C, S, b / P, b % P, P, [&](int64_t e) { acc += x[e]; });
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[b] = acc;
  }
}

__global__ void channel_sum_kernel(int64_t C, int64_t P, const double* partial, float* out) {
  MONET_GRID_LOOP(ch, C) {
    double acc = 0;
    for (int64_t k = 0; k < P; ++k) acc += partial[ch * P + k];
    out[ch] = static_cast<float>(acc);
  }
}

unsigned blocks_of_parts(int64_t C, int64_t P) { return static_cast<unsigned>(C * P < 65535 ? C * P : 65535); }

}  // namespace

int64_t channel_parts(int64_t N, int64_t C) {
  const int64_t want = (1024 + C - 1) / C;  // about 1024 blocks in all: every SM busy, C = 64 included
  return want < N ? want : (N > 0 ? N : 1);
}

cudaError_t batch_norm_grad_from_output(int64_t N, int64_t C, int64_t S, const float* dy, const float* y,
                                        const float* scale, const float* bias, const float* invstd, float* dx,
                                        float* dscale, float* dbias, double* partial, cudaStream_t stream) {
  const int64_t P = channel_parts(N, C);
  bn_grad_from_output_partial_kernel<<<blocks_of_parts(C, P), kThreads, 0, stream>>>(N, C, S, P, dy, y, bias,
                                                                                      partial);
  bn_grad_from_output_sums_kernel<<<blocks_for(C), kThreads, 0, stream>>>(C, P, partial, scale, dscale, dbias);
  const int64_t n = N * C * S;
  const double M = static_cast<double>(N * S);
  if (n < (int64_t{1} << 31))
    bn_grad_from_output_dx_kernel<int32_t><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<int32_t>(C), static_cast<int32_t>(S), dy, y, scale, bias, invstd, dscale, dbias, dx, n, M);
  else
    bn_grad_from_output_dx_kernel<int64_t><<<blocks_for(n), kThreads, 0, stream>>>(C, S, dy, y, scale, bias, invstd,
                                                                                    dscale, dbias, dx, n, M);
  return cudaGetLastError();
}

cudaError_t channel_sum(int64_t N, int64_t C, int64_t S, const float* x, float* out, double* partial,
                        cudaStream_t stream) {
  const int64_t P = channel_parts(N, C);
  channel_partial_kernel<<<blocks_of_parts(C, P), kThreads, 0, stream>>>(N, C, S, P, x, partial);
  channel_sum_kernel<<<blocks_for(C), kThreads, 0, stream>>>(C, P, partial, out);
  return cudaGetLastError();
}

namespace {

template <class I>
void launch_max_pool(const Pool& p, const float* x, float* y, uint8_t* taps, int tap_bits, cudaStream_t stream) {
  const int64_t n = p.planes * p.OH * p.OW;
  max_pool_kernel<I><<<blocks_for(tap_bits == 4 ? (n + 1) / 2 : n), kThreads, 0, stream>>>(narrow<I>(p), x, y, taps,
                                                                                           tap_bits);
}

template <class I>
void launch_max_pool_grad(const Pool& p, const float* dy, const float* x, const uint8_t* taps, int tap_bits,
                          int32_t* argmax, float* dx, cudaStream_t stream) {
  const unsigned b = blocks_for(p.planes * p.OH * p.OW);
  if (taps) max_pool_unpack_kernel<I><<<b, kThreads, 0, stream>>>(narrow<I>(p), taps, tap_bits, argmax);
  else max_pool_argmax_kernel<I><<<b, kThreads, 0, stream>>>(narrow<I>(p), x, argmax);
  const unsigned g = blocks_for(p.planes * p.H * p.W);
  const PoolI<I> q = narrow<I>(p);
  const bool wide = p.W % 4 == 0 && aligned16(dx);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  const unsigned g4 = blocks_for(p.planes * p.H * p.W / 4);
  if (wide && p.sH == 1 && p.sW == 1) max_pool_grad4_kernel<I, 1, 1><<<g4, kThreads, 0, stream>>>(q, dy, argmax, dx4);
  else if (wide && p.sH == 2 && p.sW == 2) max_pool_grad4_kernel<I, 2, 2><<<g4, kThreads, 0, stream>>>(q, dy, argmax, dx4);
  else if (p.sH == 1 && p.sW == 1) max_pool_grad_kernel<I, 1, 1><<<g, kThreads, 0, stream>>>(q, dy, argmax, dx);
  else if (p.sH == 2 && p.sW == 2) max_pool_grad_kernel<I, 2, 2><<<g, kThreads, 0, stream>>>(q, dy, argmax, dx);
  else max_pool_grad_kernel<I, 0, 0><<<g, kThreads, 0, stream>>>(q, dy, argmax, dx);
}

}  // namespace

cudaError_t max_pool(const Pool& p, const float* x, float* y, uint8_t* argmax, int tap_bits, cudaStream_t stream) {
  if (fits32(p)) launch_max_pool<int32_t>(p, x, y, argmax, tap_bits, stream);
  else launch_max_pool<int64_t>(p, x, y, argmax, tap_bits, stream);
  return cudaGetLastError();
}

cudaError_t max_pool_grad(const Pool& p, const float* dy, const float* x, int32_t* argmax, float* dx,
                          cudaStream_t stream) {
  if (fits32(p)) launch_max_pool_grad<int32_t>(p, dy, x, nullptr, 0, argmax, dx, stream);
  else launch_max_pool_grad<int64_t>(p, dy, x, nullptr, 0, argmax, dx, stream);
  return cudaGetLastError();
}

cudaError_t max_pool_grad_taps(const Pool& p, const float* dy, const uint8_t* taps, int tap_bits, int32_t* argmax,
                               float* dx, cudaStream_t stream) {
  if (fits32(p)) launch_max_pool_grad<int32_t>(p, dy, nullptr, taps, tap_bits, argmax, dx, stream);
  else launch_max_pool_grad<int64_t>(p, dy, nullptr, taps, tap_bits, argmax, dx, stream);
  return cudaGetLastError();
}

cudaError_t average_pool(const Pool& p, bool count_include_pad, const float* x, float* y, cudaStream_t stream) {
  average_pool_kernel<<<blocks_for(p.planes * p.OH * p.OW), kThreads, 0, stream>>>(p, count_include_pad, x, y);
  return cudaGetLastError();
}

cudaError_t average_pool_grad(const Pool& p, bool count_include_pad, const float* dy, float* dx,
                              cudaStream_t stream) {
  average_pool_grad_kernel<<<blocks_for(p.planes * p.H * p.W), kThreads, 0, stream>>>(p, count_include_pad, dy, dx);
  return cudaGetLastError();
}

}  // namespace monet::cuda
