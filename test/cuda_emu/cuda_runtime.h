// A stand-in for CUDA's <cuda_runtime.h>, first on the include path of the emulation tests only: the CUDA
// backend's kernel files compile as C++ with it and run on the CPU (emu.h). It provides the keywords, the built-in
// indices, barriers, warp shuffles and the few runtime calls the emulated files use; launches go through
// launch_kernel (lib/engine/cuda/launch.cuh), which runs the grid here where MONET_CUDA_EMULATION is defined.
#pragma once

#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "emu.h"

#define MONET_CUDA_EMULATION 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one copy for the block: the blocks run one after another
#define __grid_constant__

#define threadIdx (::monet_emu::thread_idx())
#define blockIdx (::monet_emu::block_idx())
#define blockDim (::monet_emu::block_dim())
#define gridDim (::monet_emu::grid_dim())

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorInvalidConfiguration = 9 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
using cudaStream_t = struct CUstream_st*;

inline cudaError_t cudaGetLastError() { return static_cast<cudaError_t>(::monet_emu::take_last_error()); }
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

template <class T>
T __ldg(const T* p) {
  return *p;
}

inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}

struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(4) uchar4 {
  unsigned char x, y, z, w;
};
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { return {x, y, z, w}; }

inline void __syncthreads() { ::monet_emu::syncthreads(); }
inline int __syncthreads_or(int p) { return ::monet_emu::syncthreads_or(p); }
inline int __syncthreads_and(int p) { return ::monet_emu::syncthreads_and(p); }

// Round-to-nearest arithmetic that the compiler may not contract (C++20 does not contract without -ffp-contract).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }

// The high 32 bits of the 64-bit product.
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<uint64_t>(a) * b) >> 32);
}

inline unsigned __ballot_sync(unsigned, int predicate) { return ::monet_emu::ballot(predicate); }

template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  static_assert(sizeof(T) <= 8, "shuffles of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = ::monet_emu::shuffle_xor(bits, lane_mask);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
