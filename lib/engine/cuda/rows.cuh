// Rows held in registers, one warp per row, shared by the .cu files of the CUDA backend (C++17): which columns a
// lane holds, loading and storing them (float4 where the row allows), and the register width of a row length.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace monet::cuda {

// A lane's share of a row of `len` floats held in N registers: with VEC, float4 groups at columns
// 4 * (lane + 32 q) + 0..3 (len % 4 == 0, the row 16-byte aligned); else columns lane + 32 i. Either way N
// registers cover 32 * N columns; columns past len read as `fill` and are not stored.
template <int N, bool VEC>
__device__ __forceinline__ int column_of(int lane, int i) {
  return VEC ? 4 * (lane + 32 * (i / 4)) + i % 4 : lane + 32 * i;
}

template <int N, bool VEC>
__device__ __forceinline__ void load_row(const float* row, int len, int lane, float (&v)[N], float fill) {
  if constexpr (VEC) {
    static_assert(N % 4 == 0, "float4 rows hold whole float4s");
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const int c = 4 * (lane + 32 * q);
      float4 t = make_float4(fill, fill, fill, fill);
      if (c < len) t = *reinterpret_cast<const float4*>(row + c);
      v[4 * q] = t.x;
      v[4 * q + 1] = t.y;
      v[4 * q + 2] = t.z;
      v[4 * q + 3] = t.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = lane + 32 * i;
      v[i] = c < len ? row[c] : fill;
    }
  }
}

template <int N, bool VEC>
__device__ __forceinline__ void store_row(float* row, int len, int lane, const float (&v)[N]) {
  if constexpr (VEC) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const int c = 4 * (lane + 32 * q);
      if (c < len)
        *reinterpret_cast<float4*>(row + c) = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = lane + 32 * i;
      if (c < len) row[c] = v[i];
    }
  }
}

// Calls f(integral_constant N, bool_constant VEC) with the register width N (floats per lane) of a row of `len`
// elements, len <= 1024: 4, 8, 16, 24 or 32 (24: rows of 768, BERT's and GPT-2's width, without a third wasted).
template <class F>
void with_row_width(int64_t len, bool vec, F f) {
  const int64_t per_lane = (len + 31) / 32;
  auto go = [&](auto n) {
    if (vec) f(n, std::true_type{});
    else f(n, std::false_type{});
  };
  if (per_lane <= 4) go(std::integral_constant<int, 4>{});
  else if (per_lane <= 8) go(std::integral_constant<int, 8>{});
  else if (per_lane <= 16) go(std::integral_constant<int, 16>{});
  else if (per_lane <= 24) go(std::integral_constant<int, 24>{});
  else go(std::integral_constant<int, 32>{});
}

}  // namespace monet::cuda
