// MaxPool and AveragePool with their gradients (2-D planes, kernels.h Pool). The gradients gather in the CPU's
// scatter order, each dx element owned by one thread that adds the windows' contributions in (oh, ow) order, so
// they match the CPU kernels bit for bit; no atomics.
#include <algorithm>
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
// kW in tap_index into a constant's. xp holds the plane's rows from row0 on (a tile's rows in shared memory).
template <class I, int KH, int KW>
__device__ __forceinline__ I window_tap(const PoolI<I>& p, const float* xp, I oh, I ow, float& best, I row0 = 0) {
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
      const float v = xp[(ih - row0) * p.W + iw];
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

// ------------------------------------------------------------------------------------- max pool on shared tiles
// The kernels above read each input element once per window that covers it (nine times for GoogLeNet's 3 x 3
// stride-1 pools) through the cache and split every index by division; on the H200 they moved 10-45% of the
// memory's bandwidth. The tiled kernels give a block a contiguous part of the tensor, a tile: whole planes
// (as many as fit) or a band of rows of one plane. The block copies what its windows read into shared memory
// with coalesced loads, once, then every thread computes from there, and writes its outputs coalesced. They
// compute exactly what the kernels above do, in the same order: the same bits.

// A tiling (tiles_of): planes_per_tile whole planes, or (banded) bands of `rows` of one plane's own rows (the
// forward's y rows, the gradient's dx rows), each copying only the rows its windows read; `bands` tiles a group of
// planes, `tiles` in all. planes_per_tile 0: no tiling fits the shared memory (or the 4-bit taps, below); the
// kernels above run.
struct PoolTiles {
  int32_t planes_per_tile = 0, rows = 0, bands = 0, tiles = 0;
  bool banded = false;
  size_t shared_bytes = 0;
};

// Shared memory a tile may take: eight blocks of 256 threads (an SM's 2,048 threads) fit an H100's or H200's 228 KB
// with it, and it is within the 48 KB a launch gets without opting in on any GPU.
constexpr int64_t kTileBytes = 24 * 1024;
// The own elements (outputs written) a tile aims at when whole planes are small: about 8 a thread; a band takes at
// most 4 times as many (more, and few planes would leave SMs idle).
constexpr int64_t kTileElements = 2048;

// The tile of block `tile`: planes [p0, p0 + np), own rows [r0, r1) of each.
struct Tile {
  int32_t p0, np, r0, r1;
};
__device__ __forceinline__ Tile tile_of(const PoolTiles& t, int32_t planes, int32_t rows_total, int32_t tile) {
  const int32_t group = tile / t.bands, band = tile - group * t.bands;
  Tile r;
  r.p0 = group * t.planes_per_tile;
  r.np = planes - r.p0 < t.planes_per_tile ? planes - r.p0 : t.planes_per_tile;
  r.r0 = band * t.rows;
  r.r1 = r.r0 + t.rows < rows_total ? r.r0 + t.rows : rows_total;
  return r;
}

// Copies n consecutive elements from global memory into shared memory, the block's threads side by side, four
// loads in flight a thread: with eight blocks of 256 threads an SM, one a thread would keep about a third of the
// bytes in flight that the H200's memory needs to stream at its bandwidth.
template <class T>
__device__ __forceinline__ void copy_to_shared(T* dst, const T* src, int32_t n) {
  const int32_t step = static_cast<int32_t>(blockDim.x);
  int32_t k = static_cast<int32_t>(threadIdx.x);
  for (; k + 3 * step < n; k += 4 * step) {
    const T a = src[k], b = src[k + step], c = src[k + 2 * step], d = src[k + 3 * step];
    dst[k] = a, dst[k + step] = b, dst[k + 2 * step] = c, dst[k + 3 * step] = d;
  }
  for (; k < n; k += step) dst[k] = src[k];
}

// The x rows [x0, x1) that the windows of output rows first .. last read (extent: a window's span of rows).
__device__ __forceinline__ void rows_read(const PoolI<int32_t>& p, int32_t first, int32_t last, int32_t extent,
                                          int32_t& x0, int32_t& x1) {
  x0 = first * p.sH - p.padT, x1 = last * p.sH - p.padT + extent;
  x0 = x0 < 0 ? 0 : x0, x1 = x1 > p.H ? p.H : x1;
  if (x1 < x0) x1 = x0;
}

// The forward on tiles of y rows. A whole-planes tile copies its planes' x; a band copies the x rows its windows
// read. One thread per output (consecutive threads read x at the stride apart); 4-bit taps go through shared
// memory, then a thread packs two into a byte: the tiling starts every tile at an even output, so no byte is
// written by two blocks.
template <int KH, int KW>
__global__ void max_pool_tiled_kernel(PoolI<int32_t> p, PoolTiles t, const float* x, float* y, uint8_t* taps,
                                      int bits) {
  MONET_DYNAMIC_SHARED(float, xs);
  const int32_t extent = (p.kH - 1) * p.dH + 1;
  for (int32_t tile = static_cast<int32_t>(blockIdx.x); tile < t.tiles; tile += static_cast<int32_t>(gridDim.x)) {
    const Tile b = tile_of(t, p.planes, p.OH, tile);
    int32_t x0 = 0, x1 = p.H;  // the x rows in shared memory
    if (t.banded) rows_read(p, b.r0, b.r1 - 1, extent, x0, x1);
    const int32_t xr = x1 - x0;
    uint8_t* ts = reinterpret_cast<uint8_t*>(xs + b.np * xr * p.W);  // 4-bit taps before packing
    copy_to_shared(xs, x + (static_cast<int64_t>(b.p0) * p.H + x0) * p.W, b.np * xr * p.W);
    __syncthreads();
    const int32_t n = b.np * (b.r1 - b.r0) * p.OW;
    const int64_t y0 = (static_cast<int64_t>(b.p0) * p.OH + b.r0) * p.OW;
    for (int32_t o = static_cast<int32_t>(threadIdx.x); o < n; o += static_cast<int32_t>(blockDim.x)) {
      const int32_t pl = p.by_OHOW.div(o), rem = o - pl * (p.OH * p.OW);
      const int32_t oh_local = p.by_OW.div(rem), ow = rem - oh_local * p.OW;
      float best;
      const int32_t tap = window_tap<int32_t, KH, KW>(p, xs + pl * xr * p.W, b.r0 + oh_local, ow, best, x0);
      const int64_t i = y0 + o;
      y[i] = best;
      if (!taps) continue;  // nothing reads them (OpDef::optional_outputs)
      if (bits == 4) ts[o] = static_cast<uint8_t>(tap);
      else if (bits == 8) taps[i] = static_cast<uint8_t>(tap);
      else taps[2 * i] = static_cast<uint8_t>(tap & 0xff), taps[2 * i + 1] = static_cast<uint8_t>(tap >> 8);
    }
    if (taps && bits == 4) {
      __syncthreads();
      for (int32_t g = static_cast<int32_t>(threadIdx.x); 2 * g < n; g += static_cast<int32_t>(blockDim.x))
        taps[y0 / 2 + g] = static_cast<uint8_t>(ts[2 * g] | (2 * g + 1 < n ? ts[2 * g + 1] << 4 : 0));
    }
    __syncthreads();  // the next tile overwrites xs
  }
}

// The gradient on tiles of dx rows, both forms. The tile's windows (every window of its planes, or those whose
// rows reach its band) are copied to shared memory: their dy and their taps, decoded from the forward's packed
// taps (BITS 4, 8 or 16) or found from x (BITS 0: the input-activated form, which then needs no workspace). Each dx
// element then adds the dy of the windows whose maximum it is, in (oh, ow) order, as max_pool_grad_kernel does.
// K, S: a square window and equal strides known at compile time (0: p's); Tap: uint8_t for windows of up to 256
// taps, else uint16_t.
template <int K, int S, int BITS, class Tap>
__global__ void max_pool_grad_tiled_kernel(PoolI<int32_t> p, PoolTiles t, const float* dy, const void* src,
                                           float* dx) {
  MONET_DYNAMIC_SHARED(float, smem);
  const int32_t sH = S ? S : p.sH, sW = S ? S : p.sW, kW = K ? K : p.kW;
  const int32_t extent_h = (p.kH - 1) * p.dH + 1, extent_w = (p.kW - 1) * p.dW + 1;
  for (int32_t tile = static_cast<int32_t>(blockIdx.x); tile < t.tiles; tile += static_cast<int32_t>(gridDim.x)) {
    const Tile b = tile_of(t, p.planes, p.H, tile);
    int32_t w0 = 0, w1 = p.OH - 1, unused;  // the window rows [w0, w1] in shared memory
    if (t.banded) {
      window_range<int32_t>(b.r0, p.padT, sH, extent_h, p.OH, w0, unused);
      window_range<int32_t>(b.r1 - 1, p.padT, sH, extent_h, p.OH, unused, w1);
    }
    const int32_t wr = w1 >= w0 ? w1 - w0 + 1 : 0, nw = b.np * wr * p.OW;
    const int64_t first_window = (static_cast<int64_t>(b.p0) * p.OH + w0) * p.OW;
    float* dys = smem;
    copy_to_shared(dys, dy + first_window, nw);
    Tap* tps;
    if constexpr (BITS == 0) {
      int32_t x0 = 0, x1 = p.H;  // the x rows the windows read
      if (t.banded) rows_read(p, w0, w1, extent_h, x0, x1);
      const int32_t xr = x1 - x0;
      float* xs = smem + nw;
      tps = reinterpret_cast<Tap*>(xs + b.np * xr * p.W);
      copy_to_shared(xs, static_cast<const float*>(src) + (static_cast<int64_t>(b.p0) * p.H + x0) * p.W,
                     b.np * xr * p.W);
      __syncthreads();
      for (int32_t k = static_cast<int32_t>(threadIdx.x); k < nw; k += static_cast<int32_t>(blockDim.x)) {
        const int32_t pl = p.by_OHOW.div(k), rem = k - pl * (p.OH * p.OW);
        const int32_t oh_local = p.by_OW.div(rem), ow = rem - oh_local * p.OW;
        float best;
        tps[k] = static_cast<Tap>(window_tap<int32_t, K, K>(p, xs + pl * xr * p.W, w0 + oh_local, ow, best, x0));
      }
    } else {
      tps = reinterpret_cast<Tap*>(smem + nw);
      const WindowMax<int32_t, K, BITS> taps{src};
      for (int32_t k = static_cast<int32_t>(threadIdx.x); k < nw; k += static_cast<int32_t>(blockDim.x))
        tps[k] = static_cast<Tap>(taps.tap(first_window + k));
    }
    __syncthreads();
    const int32_t n = b.np * (b.r1 - b.r0) * p.W;
    const int64_t e0 = (static_cast<int64_t>(b.p0) * p.H + b.r0) * p.W;
    for (int32_t e = static_cast<int32_t>(threadIdx.x); e < n; e += static_cast<int32_t>(blockDim.x)) {
      const int32_t pl = p.by_HW.div(e), rem = e - pl * (p.H * p.W);
      const int32_t ih_local = p.by_W.div(rem), iw = rem - ih_local * p.W, ih = b.r0 + ih_local;
      int32_t oh_lo, oh_hi, ow_lo, ow_hi;
      window_range<int32_t>(ih, p.padT, sH, extent_h, p.OH, oh_lo, oh_hi);
      window_range<int32_t>(iw, p.padL, sW, extent_w, p.OW, ow_lo, ow_hi);
      const int32_t plane_windows = pl * wr * p.OW;
      float acc = 0.f;
      for (int32_t oh = oh_lo; oh <= oh_hi; ++oh) {
        const int32_t rh = ih - (oh * sH - p.padT), row = plane_windows + (oh - w0) * p.OW;
        for (int32_t ow = ow_lo; ow <= ow_hi; ++ow) {
          const int32_t rw = iw - (ow * sW - p.padL), tap = tps[row + ow];
          const bool hit = p.dH == 1 && p.dW == 1 ? tap == rh * kW + rw
                                                  : (tap / kW) * p.dH == rh && (tap % kW) * p.dW == rw;
          if (hit) acc += dys[row + ow];
        }
      }
      dx[e0 + e] = acc;
    }
    __syncthreads();  // the next tile overwrites the shared arrays
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


// A tiling of `planes` planes of `rows` own rows of `row_len` elements whose tiles take bytes(np, r, whole) of
// shared memory: whole planes, as many as reach kTileElements within kTileBytes, else the tallest band that fits.
// even: every tile starts at an even own element (the forward's 4-bit taps).
template <class Bytes>
PoolTiles tiles_of(int64_t planes, int64_t rows, int64_t row_len, bool even, const Bytes& bytes) {
  PoolTiles t;
  const int64_t plane = rows * row_len;
  if (planes <= 0 || plane <= 0) return t;
  const int64_t whole = bytes(1, rows, true);
  int64_t np = 1, r = rows;
  if (whole <= kTileBytes) {
    np = std::min({kTileBytes / whole, std::max<int64_t>(1, (kTileElements + plane - 1) / plane), planes});
    if (even && plane % 2 && np % 2 && np < planes) {
      if (np > 1) --np;
      else if (2 * whole <= kTileBytes) np = 2;
      else return t;
    }
  } else {
    if (even && plane % 2) return t;
    // The tallest band within kTileBytes and 4 kTileElements (2 rows at least where bands must be of even height)
    int64_t lo = 0, hi = std::min(rows, std::max<int64_t>(even ? 2 : 1, 4 * kTileElements / row_len));
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (bytes(1, mid, false) <= kTileBytes) lo = mid;
      else hi = mid - 1;
    }
    r = even && row_len % 2 ? lo - lo % 2 : lo;
    if (r < 1) return t;
  }
  t.planes_per_tile = static_cast<int32_t>(np);
  t.rows = static_cast<int32_t>(r);
  t.bands = static_cast<int32_t>((rows + r - 1) / r);
  t.tiles = static_cast<int32_t>((planes + np - 1) / np * t.bands);
  t.banded = whole > kTileBytes;
  t.shared_bytes = static_cast<size_t>(bytes(np, r, !t.banded));
  return t;
}

// The forward's tiles of y rows: the x rows a band's windows read, or whole planes of x, and a byte an output for
// 4-bit taps.
PoolTiles forward_tiles(const Pool& p, int tap_bits) {
  if (!fits32(p)) return {};
  const int64_t extent = (p.kH - 1) * p.dH + 1;
  return tiles_of(p.planes, p.OH, p.OW, tap_bits == 4, [&](int64_t np, int64_t r, bool whole) {
    const int64_t xr = whole ? p.H : std::min(p.H, (r - 1) * p.sH + extent);
    return np * (xr * p.W * 4 + (tap_bits == 4 ? r * p.OW : 0));
  });
}

// The gradient's tiles of dx rows: the windows a band reaches (their dy and taps) and, from x (tap_bits 0), the x
// rows those windows read.
PoolTiles grad_tiles(const Pool& p, int tap_bits) {
  if (!fits32(p)) return {};
  const int64_t extent = (p.kH - 1) * p.dH + 1, tap_bytes = p.kH * p.kW <= 256 ? 1 : 2;
  return tiles_of(p.planes, p.H, p.W, false, [&](int64_t np, int64_t r, bool whole) {
    const int64_t wr = whole ? p.OH : std::min(p.OH, (r + extent - 2) / p.sH + 1);
    const int64_t xr = tap_bits != 0 ? 0 : whole ? p.H : std::min(p.H, (wr - 1) * p.sH + extent);
    return np * (wr * p.OW * (4 + tap_bytes) + xr * p.W * 4);
  });
}

unsigned blocks_of(const PoolTiles& t) {
  return static_cast<unsigned>(std::min<int64_t>(t.tiles, int64_t{1} << 20));
}

void launch_max_pool_tiled(const Pool& p, const PoolTiles& t, const float* x, float* y, uint8_t* taps, int tap_bits,
                           cudaStream_t stream) {
  const PoolI<int32_t> q = narrow<int32_t>(p);
  const unsigned b = blocks_of(t);
  if (p.kH == 3 && p.kW == 3)
    launch_kernel(max_pool_tiled_kernel<3, 3>, b, kThreads, t.shared_bytes, stream, q, t, x, y, taps, tap_bits);
  else if (p.kH == 2 && p.kW == 2)
    launch_kernel(max_pool_tiled_kernel<2, 2>, b, kThreads, t.shared_bytes, stream, q, t, x, y, taps, tap_bits);
  else launch_kernel(max_pool_tiled_kernel<0, 0>, b, kThreads, t.shared_bytes, stream, q, t, x, y, taps, tap_bits);
}

// The tiled gradient on the kernel for its window and strides: 3 x 3 at stride 1 or 2 and 2 x 2 at stride 2 compiled
// in (their taps take 4 bits), any other from p.
template <int BITS, class Tap>
void launch_max_pool_grad_tiled(const Pool& p, const PoolTiles& t, const float* dy, const void* src, float* dx,
                                cudaStream_t stream) {
  const PoolI<int32_t> q = narrow<int32_t>(p);
  const unsigned b = blocks_of(t);
  const size_t sh = t.shared_bytes;
  const bool square = p.kH == p.kW && p.sH == p.sW;
  if constexpr (BITS <= 4 && sizeof(Tap) == 1) {
    if (square && p.kH == 3 && p.sH == 1)
      return launch_kernel(max_pool_grad_tiled_kernel<3, 1, BITS, Tap>, b, kThreads, sh, stream, q, t, dy, src, dx);
    if (square && p.kH == 3 && p.sH == 2)
      return launch_kernel(max_pool_grad_tiled_kernel<3, 2, BITS, Tap>, b, kThreads, sh, stream, q, t, dy, src, dx);
    if (square && p.kH == 2 && p.sH == 2)
      return launch_kernel(max_pool_grad_tiled_kernel<2, 2, BITS, Tap>, b, kThreads, sh, stream, q, t, dy, src, dx);
  }
  launch_kernel(max_pool_grad_tiled_kernel<0, 0, BITS, Tap>, b, kThreads, sh, stream, q, t, dy, src, dx);
}

}  // namespace

bool max_pool_tiled(const Pool& p, int tap_bits, bool grad) {
  return (grad ? grad_tiles(p, tap_bits) : forward_tiles(p, tap_bits)).planes_per_tile > 0;
}

int64_t max_pool_grad_workspace(const Pool& p) {
  return max_pool_tiled(p, 0, true) ? 0 : p.planes * p.OH * p.OW * static_cast<int64_t>(sizeof(int32_t));
}

cudaError_t max_pool(const Pool& p, const float* x, float* y, uint8_t* argmax, int tap_bits, cudaStream_t stream) {
  if (const PoolTiles t = forward_tiles(p, tap_bits); t.planes_per_tile > 0)
    launch_max_pool_tiled(p, t, x, y, argmax, tap_bits, stream);
  else if (fits32(p)) launch_max_pool<int32_t>(p, x, y, argmax, tap_bits, stream);
  else launch_max_pool<int64_t>(p, x, y, argmax, tap_bits, stream);
  return cudaGetLastError();
}

cudaError_t max_pool_grad(const Pool& p, const float* dy, const float* x, int32_t* argmax, float* dx,
                          cudaStream_t stream) {
  if (const PoolTiles t = grad_tiles(p, 0); t.planes_per_tile > 0) {
    if (p.kH * p.kW <= 256) launch_max_pool_grad_tiled<0, uint8_t>(p, t, dy, x, dx, stream);
    else launch_max_pool_grad_tiled<0, uint16_t>(p, t, dy, x, dx, stream);
  } else if (fits32(p)) {
    launch_max_pool_grad<int32_t>(p, dy, x, argmax, dx, stream);
  } else {
    launch_max_pool_grad<int64_t>(p, dy, x, argmax, dx, stream);
  }
  return cudaGetLastError();
}

cudaError_t max_pool_grad_taps(const Pool& p, const float* dy, const uint8_t* taps, int tap_bits, float* dx,
                               cudaStream_t stream) {
  if (const PoolTiles t = grad_tiles(p, tap_bits); t.planes_per_tile > 0) {
    if (tap_bits == 4) launch_max_pool_grad_tiled<4, uint8_t>(p, t, dy, taps, dx, stream);
    else if (tap_bits == 8) launch_max_pool_grad_tiled<8, uint8_t>(p, t, dy, taps, dx, stream);
    else launch_max_pool_grad_tiled<16, uint16_t>(p, t, dy, taps, dx, stream);
  } else if (fits32(p)) {
    launch_max_pool_grad_taps<int32_t>(p, dy, taps, tap_bits, dx, stream);
  } else {
    launch_max_pool_grad_taps<int64_t>(p, dy, taps, tap_bits, dx, stream);
  }
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
