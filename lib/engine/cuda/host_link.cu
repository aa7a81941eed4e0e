// The kernel that keeps device memory busy while cuda_host_link.cpp times the host link beside it.
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace monet::cuda {
namespace {

__global__ void stream_through_kernel(float4* a, int64_t n4, int passes) {
  for (int p = 0; p < passes; ++p) {
    MONET_GRID_LOOP(i, n4) {
      float4 v = a[i];
      v.x = v.x * 0.5f + 1.f;
      v.y = v.y * 0.5f + 1.f;
      v.z = v.z * 0.5f + 1.f;
      v.w = v.w * 0.5f + 1.f;
      a[i] = v;
    }
  }
}

}  // namespace

cudaError_t stream_through(float* a, int64_t n, int passes, cudaStream_t stream) {
  if (n % 4 != 0 || passes < 1) return cudaErrorInvalidValue;
  stream_through_kernel<<<blocks_for(n / 4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(a), n / 4, passes);
  return cudaGetLastError();
}

}  // namespace monet::cuda
