// Warp and block reductions and vector loads shared by the .cu files of the CUDA backend (device code only, C++17).
// Every reduction is a fixed tree: the same inputs give the same bits on every run (no atomics anywhere).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace monet::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

// Butterfly (xor) trees over a warp: every lane ends with the same value, since each step adds a lane's value and
// its partner's and a + b == b + a in IEEE arithmetic. Callers keep all 32 lanes active (warp-uniform loops).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(kFullMask, v, m);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(kFullMask, v, m);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}

// Sum (max) over a block whose size is a multiple of 32, returned to every thread: the warp trees, then every
// thread adds the warp totals in warp order. Every thread of the block must call it (it synchronises twice, the
// second time so that the next call may refill `part`).
template <class T>
__device__ T block_allsum(T v) {
  __shared__ T part[32];
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  T total = 0;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) total += part[w];
  __syncthreads();
  return total;
}
__device__ inline float block_allmax(float v) {
  __shared__ float part[32];
  v = warp_max(v);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float m = -INFINITY;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) m = fmaxf(m, part[w]);
  __syncthreads();
  return m;
}

// The warp's index in the grid and the grid's warps (grid-stride loops of one warp per row).
__device__ __forceinline__ int64_t warp_index() {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}
__device__ __forceinline__ int64_t warp_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x / 32; }

// W consecutive floats (one float4 when W == 4, 16-byte aligned) at unit u of p.
template <int W>
__device__ __forceinline__ void load_units(const float* p, int64_t u, float (&v)[W]) {
  if constexpr (W == 4) {
    const float4 t = reinterpret_cast<const float4*>(p)[u];
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    v[0] = p[u];
  }
}
template <int W>
__device__ __forceinline__ void store_units(float* p, int64_t u, const float (&v)[W]) {
  if constexpr (W == 4) reinterpret_cast<float4*>(p)[u] = make_float4(v[0], v[1], v[2], v[3]);
  else p[u] = v[0];
}

// A 1-bit mask of n elements (Relu's layout: bit k of 32-bit word w for element 32 w + k) written by one warp per
// word: lane k takes element i = 32 w + k, on(i) (called for i < n only; it may write other outputs too) gives its
// bit, and lane 0 writes the warp's ballot into mask[w] (mask null: on(i) runs, nothing is written). The loop bound
// is uniform over a warp, so every lane reaches the ballot (blockDim a multiple of 32).
template <class On>
__device__ __forceinline__ void mask_words(int64_t n, uint32_t* __restrict__ mask, On on) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t words = (n + 31) / 32;
  for (int64_t w = warp_index(); w < words; w += warp_count()) {
    const int64_t i = w * 32 + lane;
    const unsigned bits = __ballot_sync(kFullMask, i < n && on(i));
    if (mask && lane == 0) mask[w] = bits;
  }
}

}  // namespace monet::cuda
