// GatherElements and its gradient (lib/ops/gather_elements). The gradient gives each column of the indices (every
// coordinate but the axis') to one thread, which adds the column's dy elements into dx in the axis' order: columns
// write disjoint dx elements, so no atomics, and each dx element's sum runs in the CPU kernel's order (bit for bit).
#include <cstdint>

#include "engine/cuda/launch.cuh"

namespace monet::cuda {
namespace {

// x's offset of element i of the indices' shape `out`, without the axis' term.
__device__ inline int64_t offset_but_axis(const Dims& out, const Strides& xs, int axis, int64_t i) {
  int64_t off = 0;
  for (int d = out.rank - 1; d >= 0; --d) {
    const int64_t c = i % out.size[d];
    i /= out.size[d];
    if (d != axis) off += c * xs.s[d];
  }
  return off;
}

__global__ void gather_elements_kernel(Dims out, Strides xs, int axis, int64_t A, const int64_t* idx, const float* x,
                                       float* y, int64_t n) {
  MONET_GRID_LOOP(i, n) {
    int64_t a = idx[i];
    if (a < 0) a += A;
    y[i] = a >= 0 && a < A ? x[offset_but_axis(out, xs, axis, i) + a * xs.s[axis]] : 0.f;
  }
}

// Column j = (o, in): o over the dims before the axis, in over those after (inner of them per o).
__global__ void gather_elements_grad_kernel(Dims out, Strides xs, int axis, int64_t A, int64_t inner,
                                            const int64_t* idx, const float* dy, float* dx, int64_t columns) {
  const int64_t K = out.size[axis];
  MONET_GRID_LOOP(j, columns) {
    const int64_t o = j / inner, in = j - o * inner;
    const int64_t first = o * K * inner + in;  // element (o, 0, in)
    const int64_t off = offset_but_axis(out, xs, axis, first);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = first + k * inner;
      int64_t a = idx[i];
      if (a < 0) a += A;
      if (a >= 0 && a < A) dx[off + a * xs.s[axis]] += dy[i];
    }
  }
}

}  // namespace

cudaError_t gather_elements(Dims out, Strides x_strides, int axis, int64_t A, const int64_t* idx, const float* x,
                            float* y, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < out.rank; ++d) n *= out.size[d];
  if (n == 0) return cudaSuccess;
  launch_kernel(gather_elements_kernel, blocks_for(n), kThreads, 0, stream, out, x_strides, axis, A, idx, x, y, n);
  return cudaGetLastError();
}

cudaError_t gather_elements_grad(Dims out, Strides x_strides, int axis, int64_t A, const int64_t* idx,
                                 const float* dy, float* dx, int64_t dx_numel, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(dx, 0, static_cast<size_t>(dx_numel) * sizeof(float), stream);
  if (err != cudaSuccess) return err;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out.size[d];
  for (int d = axis + 1; d < out.rank; ++d) inner *= out.size[d];
  const int64_t columns = outer * inner;
  if (columns == 0 || out.size[axis] == 0) return cudaSuccess;
  launch_kernel(gather_elements_grad_kernel, blocks_for(columns), kThreads, 0, stream, out, x_strides, axis, A,
                inner, idx, dy, dx, columns);
  return cudaGetLastError();
}

}  // namespace monet::cuda
