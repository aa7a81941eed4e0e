// Resize and ResizeGrad (N*C planes of H x W <-> OH x OW). The general kernels read the op folder's index and
// weight tables (ops/common/plans.h ResizeSpec) a row at a time; nearest upsampling by whole factors, the form of
// nn.Upsample(scale_factor=k) in UNets and feature pyramids, runs without tables. The gradient, which the CPU writes
// by scattering (+=), is gathered: each dx element owned by one thread that adds its readers in the CPU's order
// (output row, then column), so nearest Resize's gradient equals the CPU's bit for bit; no atomics.
#include <cstdint>

#include "engine/cuda/launch.cuh"

namespace monet::cuda {
namespace {

// Resize and its gradient a row at a time: block b takes rows b, b + G, ... (G = gridDim.x) of the output (plane,
// oh) or of dx (plane, ih), its threads the row's columns. A row's source rows, weights and CSR range are read once
// per thread and row; no division per element (one element per thread with three 64-bit divisions of its index
// made UNet's nearest 2x upsampling instruction-bound: 1.43 ms for a 0.89 GB pass on the H200, 13% of the
// bandwidth). Each element's arithmetic, and so its bits, are those of one element per thread.
__global__ void resize_rows_kernel(int64_t rows, int64_t H, int64_t W, int64_t OH, int64_t OW, bool linear,
                                   ResizeTables t, const float* x, float* y) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {  // block-uniform
    const int64_t plane = r / OH, oh = r - plane * OH;
    const float* xp = x + plane * H * W;
    const float* r0 = xp + t.i0h[oh] * W;
    float* yr = y + r * OW;
    if (!linear) {
      for (int64_t ow = threadIdx.x; ow < OW; ow += blockDim.x) yr[ow] = r0[t.i0w[ow]];
      continue;
    }
    const float* r1 = xp + t.i1h[oh] * W;
    const double a0 = t.w0h[oh], a1 = t.w1h[oh];
    for (int64_t ow = threadIdx.x; ow < OW; ow += blockDim.x) {
      const int64_t j0 = t.i0w[ow], j1 = t.i1w[ow];
      const double b0 = t.w0w[ow], b1 = t.w1w[ow];
      yr[ow] = static_cast<float>(a0 * (b0 * r0[j0] + b1 * r0[j1]) + a1 * (b0 * r1[j0] + b1 * r1[j1]));
    }
  }
}

__global__ void resize_grad_rows_kernel(int64_t rows, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                        ResizeGradTables t, const float* dy, float* dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {  // block-uniform
    const int64_t plane = r / H, ih = r - plane * H;
    const float* g = dy + plane * OH * OW;
    const int64_t h0 = t.start_h[ih], h1 = t.start_h[ih + 1];
    float* dr = dx + r * W;
    for (int64_t iw = threadIdx.x; iw < W; iw += blockDim.x) {
      const int64_t w0 = t.start_w[iw], w1 = t.start_w[iw + 1];
      float acc = 0.f;
      for (int64_t eh = h0; eh < h1; ++eh)
        for (int64_t ew = w0; ew < w1; ++ew)
          acc += static_cast<float>(t.weight_h[eh] * t.weight_w[ew] * g[t.out_h[eh] * OW + t.out_w[ew]]);
      dr[iw] = acc;
    }
  }
}

// A block of whole warps for rows of `len` columns (at most kThreads).
unsigned row_threads(int64_t len) {
  const int64_t warps = (len + 31) / 32;
  return static_cast<unsigned>(warps < 1 ? 32 : warps * 32 > kThreads ? kThreads : warps * 32);
}

// Nearest upsampling by whole factors fh x fw: output (oh, ow) of a plane reads input (oh / fh, ow / fw), so input
// row r (plane * H + ih, the rows of all planes in sequence) fills output rows r fh .. r fh + fh - 1, and its
// columns c .. c + VEC - 1 fill output columns c fw .. (c + VEC) fw - 1 of each. A thread takes VEC consecutive
// input columns (a unit): with VEC = 4 one float4 load and, for FW = 1 or 2, FW float4 stores per output row. The
// unit's row costs one division by W / VEC (DivBy: a multiply-high for int32_t). FW = 0: fw at run time, stored one
// float at a time. No tables: the generic kernel above reads an int64 column index per element and runs one row per
// block, which left UNet's 2x upsampling at a quarter of the H200's bandwidth.
template <int VEC, int FW, class I>
__global__ void resize_up_kernel(I units, DivBy<I> units_per_row, I OW, int fh, int fw_runtime, const float* x,
                                 float* y) {
  const I fw = FW ? FW : static_cast<I>(fw_runtime);
  MONET_GRID_LOOP(i, units) {
    const I u = static_cast<I>(i);
    const I r = units_per_row.div(u), c = (u - r * units_per_row.d) * VEC;
    float v[VEC];
    if constexpr (VEC == 4) {
      const float4 q = reinterpret_cast<const float4*>(x)[u];
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      v[0] = x[u];
    }
    float* out = y + r * static_cast<I>(fh) * OW + c * fw;
    for (int a = 0; a < fh; ++a, out += OW) {
      if constexpr (VEC == 4 && FW == 1) {
        reinterpret_cast<float4*>(out)[0] = make_float4(v[0], v[1], v[2], v[3]);
      } else if constexpr (VEC == 4 && FW == 2) {
        reinterpret_cast<float4*>(out)[0] = make_float4(v[0], v[0], v[1], v[1]);
        reinterpret_cast<float4*>(out)[1] = make_float4(v[2], v[2], v[3], v[3]);
      } else {
        for (int k = 0; k < VEC; ++k)
          for (I b = 0; b < fw; ++b) out[k * fw + b] = v[k];
      }
    }
  }
}

// Its gradient: dx of the unit's VEC columns, each the sum of its fh x fw readers in dy, added row by row and column
// by column from 0.f (the CPU's order, whose nearest weights are 1: the same bits). VEC = 4 with FW = 1 or 2 reads
// each dy row's 4 fw floats as FW float4s and writes one float4.
template <int VEC, int FW, class I>
__global__ void resize_up_grad_kernel(I units, DivBy<I> units_per_row, I OW, int fh, int fw_runtime, const float* dy,
                                      float* dx) {
  const I fw = FW ? FW : static_cast<I>(fw_runtime);
  MONET_GRID_LOOP(i, units) {
    const I u = static_cast<I>(i);
    const I r = units_per_row.div(u), c = (u - r * units_per_row.d) * VEC;
    float acc[VEC];
    for (int k = 0; k < VEC; ++k) acc[k] = 0.f;
    const float* g = dy + r * static_cast<I>(fh) * OW + c * fw;
    for (int a = 0; a < fh; ++a, g += OW) {
      if constexpr (VEC == 4 && FW == 1) {
        const float4 q = reinterpret_cast<const float4*>(g)[0];
        acc[0] += q.x, acc[1] += q.y, acc[2] += q.z, acc[3] += q.w;
      } else if constexpr (VEC == 4 && FW == 2) {
        const float4 p = reinterpret_cast<const float4*>(g)[0], q = reinterpret_cast<const float4*>(g)[1];
        acc[0] += p.x, acc[0] += p.y, acc[1] += p.z, acc[1] += p.w;
        acc[2] += q.x, acc[2] += q.y, acc[3] += q.z, acc[3] += q.w;
      } else {
        for (int k = 0; k < VEC; ++k)
          for (I b = 0; b < fw; ++b) acc[k] += g[k * fw + b];
      }
    }
    if constexpr (VEC == 4) {
      reinterpret_cast<float4*>(dx)[u] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    } else {
      dx[u] = acc[0];
    }
  }
}

// Launches resize_up_kernel (GRAD false) or resize_up_grad_kernel over rows input rows of W columns: VEC = 4 where
// W is a multiple of 4 and both arrays are 16-byte aligned, the vector stores where fw is 1 or 2.
template <bool GRAD, class I>
void launch_resize_up(int64_t rows, int64_t W, int fh, int fw, const float* in, float* out, cudaStream_t stream) {
  const bool vec = W % 4 == 0 && aligned16(in) && aligned16(out);
  const int64_t units = rows * W / (vec ? 4 : 1);
  const DivBy<I> per_row(static_cast<I>(vec ? W / 4 : W));
  const I OW = static_cast<I>(W * fw), n = static_cast<I>(units);
  const unsigned blocks = blocks_for(units);
  auto go = [&](auto kernel) { launch_kernel(kernel, blocks, kThreads, 0, stream, n, per_row, OW, fh, fw, in, out); };
  if (GRAD) {
    if (vec && fw == 1) go(resize_up_grad_kernel<4, 1, I>);
    else if (vec && fw == 2) go(resize_up_grad_kernel<4, 2, I>);
    else if (vec) go(resize_up_grad_kernel<4, 0, I>);
    else go(resize_up_grad_kernel<1, 0, I>);
  } else {
    if (vec && fw == 1) go(resize_up_kernel<4, 1, I>);
    else if (vec && fw == 2) go(resize_up_kernel<4, 2, I>);
    else if (vec) go(resize_up_kernel<4, 0, I>);
    else go(resize_up_kernel<1, 0, I>);
  }
}

// int32_t indices where every output offset fits (the larger array: the upsampled one).
template <bool GRAD>
cudaError_t resize_up_any(int64_t rows, int64_t W, int fh, int fw, const float* in, float* out,
                          cudaStream_t stream) {
  if (rows * W == 0) return cudaSuccess;
  if (rows * W * fh * fw < (int64_t{1} << 31)) launch_resize_up<GRAD, int32_t>(rows, W, fh, fw, in, out, stream);
  else launch_resize_up<GRAD, int64_t>(rows, W, fh, fw, in, out, stream);
  return cudaGetLastError();
}

}  // namespace

cudaError_t resize(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, bool linear, const ResizeTables& t,
                   const float* x, float* y, cudaStream_t stream) {
  if (planes * OH * OW == 0) return cudaSuccess;
  launch_kernel(resize_rows_kernel, blocks_for_rows(planes * OH), row_threads(OW), 0, stream, planes * OH, H, W, OH, OW,
                linear, t, x, y);
  return cudaGetLastError();
}

cudaError_t resize_grad(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, const ResizeGradTables& t,
                        const float* dy, float* dx, cudaStream_t stream) {
  if (planes * H * W == 0) return cudaSuccess;
  launch_kernel(resize_grad_rows_kernel, blocks_for_rows(planes * H), row_threads(W), 0, stream, planes * H, H, W, OH,
                OW, t, dy, dx);
  return cudaGetLastError();
}

cudaError_t resize_nearest_up(int64_t rows, int64_t W, int fh, int fw, const float* x, float* y, cudaStream_t stream) {
  return resize_up_any<false>(rows, W, fh, fw, x, y, stream);
}

cudaError_t resize_nearest_up_grad(int64_t rows, int64_t W, int fh, int fw, const float* dy, float* dx,
                                   cudaStream_t stream) {
  return resize_up_any<true>(rows, W, fh, fw, dy, dx, stream);
}

}  // namespace monet::cuda
