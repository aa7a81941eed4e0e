// MaxPool and AveragePool with their gradients (2-D planes, kernels.h Pool). The gradients gather in the CPU's
// scatter order, each dx element owned by one thread that adds the windows' contributions in (oh, ow) order, so
// they match the CPU kernels bit for bit; no atomics.
#include <cmath>
#include <cstdint>

#include "engine/cuda/launch.cuh"

namespace monet::cuda {
namespace {

// ----------------------------------------------------------------------------------------------- max pool

// Pool's geometry in the kernels' index type I: int32_t when every index of x and y fits (64-bit division is
// emulated on the GPU and made these kernels several times slower than the memory allows), else int64_t.
// The divisors that split an element's index (DivBy): by the plane's size and row width, of y and of x, and by
// the number of four-element groups of an x row.
template <class I>
struct PoolI {
  I planes, H, W, OH, OW, kH, kW, sH, sW, dH, dW, padT, padL;
  DivBy<I> by_OHOW, by_OW, by_HW, by_W, by_H, by_W4;
};
template <class I>
PoolI<I> narrow(const Pool& p) {
  auto by = [](int64_t d) { return DivBy<I>(static_cast<I>(d < 1 ? 1 : d)); };
  return {static_cast<I>(p.planes), static_cast<I>(p.H),  static_cast<I>(p.W),    static_cast<I>(p.OH),
          static_cast<I>(p.OW),     static_cast<I>(p.kH), static_cast<I>(p.kW),   static_cast<I>(p.sH),
          static_cast<I>(p.sW),     static_cast<I>(p.dH), static_cast<I>(p.dW),   static_cast<I>(p.padT),
          static_cast<I>(p.padL),   by(p.OH * p.OW),      by(p.OW),               by(p.H * p.W),
          by(p.W),                  by(p.H),              by(p.W / 4)};
}
bool fits32(const Pool& p) {
  const int64_t limit = int64_t{1} << 31;
  // A plane's sizes on their own too: with no planes the products are 0 whatever they are, and DivBy takes them.
  return p.planes * p.H * p.W < limit && p.planes * p.OH * p.OW < limit && p.H * p.W < limit &&
         p.OH * p.OW < limit && p.kH * p.kW < limit &&
         (p.OH + 1) * p.sH + p.kH * p.dH < limit && (p.OW + 1) * p.sW + p.kW * p.dW < limit;
}

// The tap (kh * kW + kw) of window (oh, ow)'s first maximum in one plane, the CPU's window_tap, and its value in
// `best`. KH, KW: the window when known at compile time (0: p's), which unrolls the loops and turns the division by
// kW in tap_index into a constant's.
template <class I, int KH, int KW>
__device__ __forceinline__ I window_tap(const PoolI<I>& p, const float* xp, I oh, I ow, float& best) {
  const I kH = KH ? KH : p.kH, kW = KW ? KW : p.kW;
  const I ih0 = oh * p.sH - p.padT, iw0 = ow * p.sW - p.padL;
  float maxval = -INFINITY;
  I tap = -1;
#pragma unroll
  for (I kh = 0; kh < kH; ++kh) {
    const I ih = ih0 + kh * p.dH;
    if (ih < 0 || ih >= p.H) continue;
#pragma unroll
    for (I kw = 0; kw < kW; ++kw) {
      const I iw = iw0 + kw * p.dW;
      if (iw < 0 || iw >= p.W) continue;
      const float v = xp[ih * p.W + iw];
      if (tap < 0 || v > maxval || isnan(v)) {
        maxval = v;
        tap = kh * kW + kw;
      }
    }
  }
  best = maxval;
  return tap;
}

// Index (ih * W + iw) in the plane of tap `tap` of window (oh, ow).
template <class I, int KW>
__device__ __forceinline__ I tap_index(const PoolI<I>& p, I oh, I ow, I tap) {
  const I kW = KW ? KW : p.kW;
  return (oh * p.sH - p.padT + (tap / kW) * p.dH) * p.W + (ow * p.sW - p.padL + (tap % kW) * p.dW);
}

// One thread per byte of 4-bit taps (two outputs), else per output: no two threads write one byte. y is the
// window's maximum as window_tap read it (the element at its tap).
template <class I, int KH, int KW>
__global__ void max_pool_kernel(PoolI<I> p, const float* x, float* y, uint8_t* taps, int bits) {
  const I n = p.planes * p.OH * p.OW;
  const I per = bits == 4 ? 2 : 1;
  MONET_GRID_LOOP(gl, (n + per - 1) / per) {
    const I g = static_cast<I>(gl);
    unsigned packed = 0;
    for (I k = 0; k < per; ++k) {
      const I i = g * per + k;
      if (i >= n) break;
      const I plane = p.by_OHOW.div(i), o = i - plane * (p.OH * p.OW);
      const float* xp = x + static_cast<int64_t>(plane) * p.H * p.W;
      const I oh = p.by_OW.div(o), ow = o - oh * p.OW;
      float best;
      const I tap = window_tap<I, KH, KW>(p, xp, oh, ow, best);
      y[i] = best;
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

// Where the gather finds each window's maximum (its index ih * W + iw within the plane), window w = plane * OH * OW
// + oh * OW + ow: BITS 0 reads it from an int32 array (the input-activated form's first pass); 4, 8 or 16 decode the
// forward's packed tap there (lib/ops/common/pool.h) and place it in the window, so the argmax form reads half a
// byte per window where an int32 array of them would be written and read again.
template <class I, int KW, int BITS>
struct WindowMax {
  const void* src;
  __device__ __forceinline__ I tap(int64_t w) const {
    const uint8_t* t = static_cast<const uint8_t*>(src);
    if constexpr (BITS == 4) return static_cast<I>((t[w / 2] >> (4 * (w % 2))) & 0xf);
    else if constexpr (BITS == 8) return static_cast<I>(t[w]);
    else return static_cast<I>(t[2 * w] | (static_cast<unsigned>(t[2 * w + 1]) << 8));
  }
  // The index in the plane of window (oh, ow)'s maximum.
  __device__ __forceinline__ I operator()(const PoolI<I>& p, int64_t w, I oh, I ow) const {
    if constexpr (BITS == 0) return static_cast<I>(static_cast<const int32_t*>(src)[w]);
    else return tap_index<I, KW>(p, oh, ow, tap(w));
  }
  // Whether window (oh, ow)'s maximum is element e of the plane, which lies in the window's span at row rh and
  // column rw from its first element (0 <= rh, rw; within (kH - 1) dH and (kW - 1) dW). Undilated, the taps compare
  // with the element's own tap rh kW + rw, without placing the maximum in the plane.
  __device__ __forceinline__ bool hits(const PoolI<I>& p, int64_t w, I oh, I ow, I e, I rh, I rw) const {
    if constexpr (BITS == 0) {
      return static_cast<I>(static_cast<const int32_t*>(src)[w]) == e;
    } else {
      if (p.dH == 1 && p.dW == 1) return tap(w) == rh * (KW ? KW : p.kW) + rw;
      return tap_index<I, KW>(p, oh, ow, tap(w)) == e;
    }
  }
};

template <class I, int KH, int KW>
__global__ void max_pool_argmax_kernel(PoolI<I> p, const float* x, int32_t* argmax) {
  MONET_GRID_LOOP(il, static_cast<int64_t>(p.planes) * p.OH * p.OW) {
    const I i = static_cast<I>(il);
    const I plane = p.by_OHOW.div(i), o = i - plane * (p.OH * p.OW);
    const float* xp = x + static_cast<int64_t>(plane) * p.H * p.W;
    const I oh = p.by_OW.div(o), ow = o - oh * p.OW;
    float best;
    argmax[i] = static_cast<int32_t>(tap_index<I, KW>(p, oh, ow, window_tap<I, KH, KW>(p, xp, oh, ow, best)));
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
template <class I, int SH, int SW, class Max>
__global__ void max_pool_grad_kernel(PoolI<I> p, const float* dy, Max window_max, float* dx) {
  const I sH = SH ? SH : p.sH, sW = SW ? SW : p.sW;
  MONET_GRID_LOOP(il, static_cast<int64_t>(p.planes) * p.H * p.W) {
    const I i = static_cast<I>(il);
    const I plane = p.by_HW.div(i), e = i - plane * (p.H * p.W);
    const I ih = p.by_W.div(e), iw = e - ih * p.W;
    I oh_lo, oh_hi, ow_lo, ow_hi;
    window_range<I>(ih, p.padT, sH, (p.kH - 1) * p.dH + 1, p.OH, oh_lo, oh_hi);
    window_range<I>(iw, p.padL, sW, (p.kW - 1) * p.dW + 1, p.OW, ow_lo, ow_hi);
    const int64_t w0 = static_cast<int64_t>(plane) * p.OH * p.OW;
    const float* dyp = dy + w0;
    float acc = 0.f;
    for (I oh = oh_lo; oh <= oh_hi; ++oh) {
      const I rh = ih - (oh * sH - p.padT);
      for (I ow = ow_lo; ow <= ow_hi; ++ow)
        if (window_max.hits(p, w0 + oh * p.OW + ow, oh, ow, e, rh, iw - (ow * sW - p.padL)))
          acc += dyp[oh * p.OW + ow];
    }
    dx[i] = acc;
  }
}

// max_pool_grad_kernel over four consecutive dx elements of a row per thread (W % 4 == 0, dx 16-byte aligned): one
// index split per four elements, the windows of the four read once, one float4 store. Each element sums the same
// windows in the same (oh, ow) order as the one-element kernel (a window's argmax lies inside it, so the extra
// windows of the wider range never match): the same bits.
template <class I, int SH, int SW, class Max>
__global__ void max_pool_grad4_kernel(PoolI<I> p, const float* dy, Max window_max, float4* dx) {
  const I W4 = p.W / 4;
  MONET_GRID_LOOP(il, static_cast<int64_t>(p.planes) * p.H * W4) {
    const I i = static_cast<I>(il);
    const I row = p.by_W4.div(i), iw0 = (i - row * W4) * 4;
    const I plane = p.by_H.div(row), ih = row - plane * p.H;
    I oh_lo, oh_hi, ow_lo, ow_hi, unused;
    window_range<I>(ih, p.padT, SH, (p.kH - 1) * p.dH + 1, p.OH, oh_lo, oh_hi);
    window_range<I>(iw0, p.padL, SW, (p.kW - 1) * p.dW + 1, p.OW, ow_lo, unused);
    window_range<I>(iw0 + 3, p.padL, SW, (p.kW - 1) * p.dW + 1, p.OW, unused, ow_hi);
    const int64_t w0 = static_cast<int64_t>(plane) * p.OH * p.OW;
    const float* dyp = dy + w0;
    const I e0 = ih * p.W + iw0;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (I oh = oh_lo; oh <= oh_hi; ++oh)
      for (I ow = ow_lo; ow <= ow_hi; ++ow) {
        const I d = window_max(p, w0 + oh * p.OW + ow, oh, ow) - e0;
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

namespace {

template <class I>
void launch_max_pool(const Pool& p, const float* x, float* y, uint8_t* taps, int tap_bits, cudaStream_t stream) {
  const int64_t n = p.planes * p.OH * p.OW;
  const unsigned b = blocks_for(tap_bits == 4 ? (n + 1) / 2 : n);
  const PoolI<I> q = narrow<I>(p);
  if (p.kH == 3 && p.kW == 3) launch_kernel(max_pool_kernel<I, 3, 3>, b, kThreads, 0, stream, q, x, y, taps, tap_bits);
  else if (p.kH == 2 && p.kW == 2)
    launch_kernel(max_pool_kernel<I, 2, 2>, b, kThreads, 0, stream, q, x, y, taps, tap_bits);
  else launch_kernel(max_pool_kernel<I, 0, 0>, b, kThreads, 0, stream, q, x, y, taps, tap_bits);
}

// The gather of dx on the kernel for its strides and row width, finding each window's maximum with `window_max`.
template <class I, class Max>
void launch_max_pool_gather(const Pool& p, const PoolI<I>& q, const float* dy, Max window_max, float* dx,
                            cudaStream_t stream) {
  const unsigned g = blocks_for(p.planes * p.H * p.W), g4 = blocks_for(p.planes * p.H * p.W / 4);
  const bool wide = p.W % 4 == 0 && aligned16(dx);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  if (wide && p.sH == 1 && p.sW == 1)
    launch_kernel(max_pool_grad4_kernel<I, 1, 1, Max>, g4, kThreads, 0, stream, q, dy, window_max, dx4);
  else if (wide && p.sH == 2 && p.sW == 2)
    launch_kernel(max_pool_grad4_kernel<I, 2, 2, Max>, g4, kThreads, 0, stream, q, dy, window_max, dx4);
  else if (p.sH == 1 && p.sW == 1)
    launch_kernel(max_pool_grad_kernel<I, 1, 1, Max>, g, kThreads, 0, stream, q, dy, window_max, dx);
  else if (p.sH == 2 && p.sW == 2)
    launch_kernel(max_pool_grad_kernel<I, 2, 2, Max>, g, kThreads, 0, stream, q, dy, window_max, dx);
  else launch_kernel(max_pool_grad_kernel<I, 0, 0, Max>, g, kThreads, 0, stream, q, dy, window_max, dx);
}

// Input-activated: every window's argmax from x into `argmax`, then the gather reads them.
template <class I>
void launch_max_pool_grad(const Pool& p, const float* dy, const float* x, int32_t* argmax, float* dx,
                          cudaStream_t stream) {
  const unsigned b = blocks_for(p.planes * p.OH * p.OW);
  const PoolI<I> q = narrow<I>(p);
  if (p.kH == 3 && p.kW == 3) launch_kernel(max_pool_argmax_kernel<I, 3, 3>, b, kThreads, 0, stream, q, x, argmax);
  else if (p.kH == 2 && p.kW == 2)
    launch_kernel(max_pool_argmax_kernel<I, 2, 2>, b, kThreads, 0, stream, q, x, argmax);
  else launch_kernel(max_pool_argmax_kernel<I, 0, 0>, b, kThreads, 0, stream, q, x, argmax);
  launch_max_pool_gather<I>(p, q, dy, WindowMax<I, 0, 0>{argmax}, dx, stream);
}

// Argmax-activated: the gather decodes the forward's taps itself.
template <class I>
void launch_max_pool_grad_taps(const Pool& p, const float* dy, const uint8_t* taps, int tap_bits, float* dx,
                               cudaStream_t stream) {
  const PoolI<I> q = narrow<I>(p);
  if (tap_bits == 4 && p.kW == 3) launch_max_pool_gather<I>(p, q, dy, WindowMax<I, 3, 4>{taps}, dx, stream);
  else if (tap_bits == 4 && p.kW == 2) launch_max_pool_gather<I>(p, q, dy, WindowMax<I, 2, 4>{taps}, dx, stream);
  else if (tap_bits == 4) launch_max_pool_gather<I>(p, q, dy, WindowMax<I, 0, 4>{taps}, dx, stream);
  else if (tap_bits == 8) launch_max_pool_gather<I>(p, q, dy, WindowMax<I, 0, 8>{taps}, dx, stream);
  else launch_max_pool_gather<I>(p, q, dy, WindowMax<I, 0, 16>{taps}, dx, stream);
}

}  // namespace

cudaError_t max_pool(const Pool& p, const float* x, float* y, uint8_t* argmax, int tap_bits, cudaStream_t stream) {
  if (fits32(p)) launch_max_pool<int32_t>(p, x, y, argmax, tap_bits, stream);
  else launch_max_pool<int64_t>(p, x, y, argmax, tap_bits, stream);
  return cudaGetLastError();
}

cudaError_t max_pool_grad(const Pool& p, const float* dy, const float* x, int32_t* argmax, float* dx,
                          cudaStream_t stream) {
  if (fits32(p)) launch_max_pool_grad<int32_t>(p, dy, x, argmax, dx, stream);
  else launch_max_pool_grad<int64_t>(p, dy, x, argmax, dx, stream);
  return cudaGetLastError();
}

cudaError_t max_pool_grad_taps(const Pool& p, const float* dy, const uint8_t* taps, int tap_bits, float* dx,
                               cudaStream_t stream) {
  if (fits32(p)) launch_max_pool_grad_taps<int32_t>(p, dy, taps, tap_bits, dx, stream);
  else launch_max_pool_grad_taps<int64_t>(p, dy, taps, tap_bits, dx, stream);
  return cudaGetLastError();
}

cudaError_t average_pool(const Pool& p, bool count_include_pad, const float* x, float* y, cudaStream_t stream) {
  launch_kernel(average_pool_kernel, blocks_for(p.planes * p.OH * p.OW), kThreads, 0, stream, p, count_include_pad, x,
                y);
  return cudaGetLastError();
}

cudaError_t average_pool_grad(const Pool& p, bool count_include_pad, const float* dy, float* dx,
                              cudaStream_t stream) {
  launch_kernel(average_pool_grad_kernel, blocks_for(p.planes * p.H * p.W), kThreads, 0, stream, p, count_include_pad,
                dy, dx);
  return cudaGetLastError();
}


}  // namespace monet::cuda
