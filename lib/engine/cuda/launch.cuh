// Launch helpers shared by the .cu files of the CUDA backend (device code only, C++17).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/cuda/kernels.h"

namespace monet::cuda {

inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (at least 1, at most 2^20: the loop covers the rest).
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > (int64_t{1} << 20)) b = int64_t{1} << 20;
  return static_cast<unsigned>(b);
}

// Blocks for one-block-per-row kernels over `rows` rows (at least 1, at most 2^20: a block loop covers the rest).
inline unsigned blocks_for_rows(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : rows > (int64_t{1} << 20) ? int64_t{1} << 20 : rows);
}

// Launches `kernel` over a grid of `blocks` of `threads` threads with `shared_bytes` of dynamic shared memory
// (MONET_DYNAMIC_SHARED) on `stream`. Files that launch through it, and declare their dynamic shared memory with
// the macro, also compile as C++ against test/cuda_emu's stand-in for cuda_runtime.h, which defines
// MONET_CUDA_EMULATION and runs the grid on the CPU (their kernels' logic tested without a GPU).
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 blocks, dim3 threads, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
#ifdef MONET_CUDA_EMULATION
  (void)stream;
  ::monet_emu::run_grid({blocks.x, blocks.y, blocks.z}, {threads.x, threads.y, threads.z}, shared_bytes,
                        [&] { kernel(static_cast<Params>(args)...); });
#else
  kernel<<<blocks, threads, shared_bytes, stream>>>(std::forward<Args>(args)...);
#endif
}

#ifdef MONET_CUDA_EMULATION
#define MONET_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::monet_emu::dynamic_shared())
#else
#define MONET_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

// Whether float4 (16-byte) loads and stores may be used at p.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Division by a divisor fixed for a launch, in the kernels' index type I. For int32_t, n / d for 0 <= n < 2^31 and
// 1 <= d < 2^31 as one multiply-high, an add and a shift (Granlund and Montgomery, "Division by invariant integers
// using multiplication", PLDI 1994): with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1 (which fits 32
// bits, as 2^s - d < d), n / d = (umulhi(n, m) + n) >> s; the sum stays below 2^32 as umulhi(n, m) <= n < 2^31.
// A 32-bit integer division by a runtime divisor is a sequence of some twenty instructions on the GPU, and the
// pool kernels split an index into plane, row and column per element. int64_t divides plainly.
template <class I>
struct DivBy {
  I d = 1;
  DivBy() = default;
  explicit DivBy(I divisor) : d(divisor) {}
  __host__ __device__ __forceinline__ I div(I n) const { return n / d; }
};
template <>
struct DivBy<int32_t> {
  int32_t d = 1;
  uint32_t m = 1, s = 0;
  DivBy() = default;
  explicit DivBy(int32_t divisor) : d(divisor) {
    while ((uint64_t{1} << s) < static_cast<uint64_t>(d)) ++s;
    m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - static_cast<uint64_t>(d))) /
                                  static_cast<uint64_t>(d) +
                              1);
  }
  __device__ __forceinline__ int32_t div(int32_t n) const {
    const uint32_t u = static_cast<uint32_t>(n);
    return static_cast<int32_t>((__umulhi(u, m) + u) >> s);
  }
};

#define MONET_GRID_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);       \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Element i of a row-major index space `dims` at strides sa and sb: its offsets oa and ob (added to their
// values). The outermost coordinate is what the divisions leave, so a rank-r space costs r - 1 of them.
// The loop runs over the constant kMaxDims, fully unrolled, with the dims past the rank skipped: every index into
// the by-value parameter arrays is then a compile-time constant. A loop bounded by the runtime rank indexes them
// dynamically, and the compiler copies Dims and Strides into a per-thread stack frame (136-200 bytes of local
// memory written and read per element: GlobalAveragePoolGrad at ResNet-50 b184 took 0.68 ms for a 74 MB write).
template <class Index>
__device__ __forceinline__ void offsets_of(const Dims& dims, const Strides& sa, const Strides& sb, Index i, Index& oa,
                                           Index& ob) {
  Index rem = i;
#pragma unroll
  for (int d = kMaxDims - 1; d > 0; --d) {
    if (d >= dims.rank) continue;
    const Index size = static_cast<Index>(dims.size[d]);
    const Index idx = rem % size;
    rem /= size;
    oa += idx * static_cast<Index>(sa.s[d]);
    ob += idx * static_cast<Index>(sb.s[d]);
  }
  oa += rem * static_cast<Index>(sa.s[0]);
  ob += rem * static_cast<Index>(sb.s[0]);
}

// Sums one double per thread of a block of kThreads threads; the result is valid in thread 0. Fixed order.
__device__ inline double block_sum(double v) {
  __shared__ double buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  double r = buf[0];
  __syncthreads();  // buf may be reused by the caller's next call
  return r;
}

}  // namespace monet::cuda
