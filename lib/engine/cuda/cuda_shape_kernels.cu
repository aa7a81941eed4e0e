// Data-movement kernels: strided copies (Slice, Transpose, Concat, Split and their gradients), Gather and Pad with
// their gradients (Resize's are in cuda_resize_kernels.cu). The gradients that the CPU writes by scattering (+=) are
// computed here by gathering, each input-gradient element owned by one thread that visits its readers in the CPU's
// order: deterministic, no atomics, and (for Pad, Gather and GatherIdx) equal to the CPU bit for bit.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>

#include "engine/cuda/launch.cuh"

namespace monet::cuda {
namespace {

// The general case: each element's index split into coordinates. Index is int32_t when every offset fits (64-bit
// division is emulated on the GPU and costs ~15x the memory time).
template <class E, class Index>
__global__ void strided_copy_kernel(Dims shape, Strides ss, const E* src, Strides ds, E* dst, int64_t n) {
  MONET_GRID_LOOP(i, n) {
    Index so = 0, dof = 0;  // src and dst point at the bases already
    offsets_of(shape, ss, ds, static_cast<Index>(i), so, dof);
    dst[dof] = src[so];
  }
}

// Rows of `len` contiguous units (V: a 1-, 4-, 8- or 16-byte unit) at pitches spitch and dpitch (in units):
// Concat, Split and their gradients, and any copy whose innermost dim is contiguous on both sides. No division
// per element; blockIdx.y walks the rows.
template <class V>
__global__ void copy_rows_kernel(int64_t rows, int32_t len, int64_t spitch, int64_t dpitch, const V* src, V* dst) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const V* s = src + r * spitch;
    V* d = dst + r * dpitch;
    for (int32_t j = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); j < len;
         j += static_cast<int32_t>(blockDim.x * gridDim.x))
      d[j] = s[j];
  }
}

template <class E>
__global__ void gather_kernel(int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx, const E* x,
                              E* y) {
  MONET_GRID_LOOP(i, outer * K * inner) {
    const int64_t j = i % inner, k = (i / inner) % K, o = i / (inner * K);
    y[i] = x[(o * A + idx[k]) * inner + j];
  }
}

// keys: the indices sorted, order: their positions k (ascending k among equal keys): a row a finds its first key by
// bisection and adds its positions' dy in k order.
__global__ void gather_grad_kernel(int64_t outer, int64_t A, int64_t K, int64_t inner, const int32_t* keys,
                                   const int32_t* order, const float* dy, float* dx) {
  MONET_GRID_LOOP(i, outer * A * inner) {
    const int64_t j = i % inner, a = (i / inner) % A, o = i / (inner * A);
    int64_t lo = 0, hi = K;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (keys[mid] < a) lo = mid + 1;
      else hi = mid;
    }
    float acc = 0.f;
    for (int64_t p = lo; p < K && keys[p] == a; ++p) acc += dy[(o * K + order[p]) * inner + j];
    dx[i] = acc;
  }
}

template <class E>
__global__ void gather_idx_kernel(int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx, const E* x,
                                  E* y) {
  MONET_GRID_LOOP(i, outer * K * inner) {
    const int64_t j = i % inner, k = (i / inner) % K, o = i / (inner * K);
    int64_t a = idx[k];
    if (a < 0) a += A;
    y[i] = a >= 0 && a < A ? x[(o * A + a) * inner + j] : E(0);
  }
}

// GatherIdxGrad, step 1: per index k its key, the row of dx it names (negative ones counted from the end; A where it
// names none, sorted last and read by no row), and its position k as the value sorted with it.
__global__ void gather_idx_keys_kernel(int64_t K, int64_t A, const int64_t* idx, int32_t* keys, int32_t* order) {
  MONET_GRID_LOOP(k, K) {
    int64_t a = idx[k];
    if (a < 0) a += A;
    keys[k] = static_cast<int32_t>(a >= 0 && a < A ? a : A);
    order[k] = static_cast<int32_t>(k);
  }
}

// Step 3, after a stable sort of (key, k) by key: block q (grid-stride) owns dx row a of outer index o and the
// column units group * blockDim.x + threadIdx.x (units of W floats; inner_u per row). It finds the run of sorted
// keys equal to a (two binary searches, the same in every thread) and adds their dy rows into a register from 0 in
// sorted order, which is k order (the sort is stable): the CPU's sum bit for bit, every dx element written once,
// rows no index names zeroed.
template <int W>
__global__ void gather_idx_rows_kernel(int64_t outer, int64_t A, int64_t K, int64_t inner_u, int64_t groups,
                                       const int32_t* keys, const int32_t* order, const float* dy, float* dx) {
  using V = typename std::conditional<W == 4, float4, float>::type;
  const V* dyv = reinterpret_cast<const V*>(dy);
  V* dxv = reinterpret_cast<V*>(dx);
  for (int64_t q = blockIdx.x; q < outer * A * groups; q += gridDim.x) {  // block-uniform
    const int64_t group = q % groups, row = q / groups, a = row % A, o = row / A;
    int64_t lo = 0, hi = K;  // first sorted key >= a
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (keys[mid] < a) lo = mid + 1;
      else hi = mid;
    }
    int64_t end = lo;  // first sorted key > a
    hi = K;
    while (end < hi) {
      const int64_t mid = (end + hi) / 2;
      if (keys[mid] <= a) end = mid + 1;
      else hi = mid;
    }
    const int64_t j = group * blockDim.x + threadIdx.x;
    if (j >= inner_u) continue;
    V acc;
    if constexpr (W == 4) acc = make_float4(0.f, 0.f, 0.f, 0.f);
    else acc = 0.f;
    for (int64_t p = lo; p < end; ++p) {
      const V g = dyv[(o * K + order[p]) * inner_u + j];
      if constexpr (W == 4) {
        acc.x += g.x;
        acc.y += g.y;
        acc.z += g.z;
        acc.w += g.w;
      } else {
        acc += g;
      }
    }
    dxv[(o * A + a) * inner_u + j] = acc;
  }
}

__global__ void pad_kernel(Dims xd, Dims yd, const int64_t* table, Strides axis_offset, float value, const float* x,
                           float* y, int64_t n) {
  MONET_GRID_LOOP(i, n) {
    int64_t rem = i, xo = 0, xstride = 1;
    bool border = false;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {  // unrolled over constant dims: no stack copy (launch.cuh offsets_of)
      if (d >= yd.rank) continue;
      const int64_t o = rem % yd.size[d];
      rem /= yd.size[d];
      const int64_t src = table[axis_offset.s[d] + o];
      if (src < 0) border = true;
      xo += src * xstride;
      xstride *= xd.size[d];
    }
    y[i] = border ? value : x[xo];
  }
}

__global__ void pad_grad_kernel(Dims xd, Dims yd, const int64_t* csr, CsrAxes axes, const float* dy, float* dx,
                                int64_t n) {
  MONET_GRID_LOOP(i, n) {
    const int r = xd.rank;
    int64_t lo[kMaxDims], hi[kMaxDims], at[kMaxDims], ystride[kMaxDims];
    int64_t rem = i, s = 1;
    bool empty = false;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t xi = rem % xd.size[d];
      rem /= xd.size[d];
      const int64_t* start = csr + axes.start_offset[d];
      lo[d] = start[xi];
      hi[d] = start[xi + 1];
      at[d] = lo[d];
      empty = empty || lo[d] == hi[d];
      ystride[d] = s;
      s *= yd.size[d];
    }
    float acc = 0.f;
    // Odometer over the readers of every axis, last axis fastest: dy elements in dy's (row-major) order.
    while (!empty) {
      int64_t yo = 0;
      for (int d = 0; d < r; ++d) yo += csr[axes.entry_offset[d] + at[d]] * ystride[d];
      acc += dy[yo];
      int d = r - 1;
      for (; d >= 0; --d) {
        if (++at[d] < hi[d]) break;
        at[d] = lo[d];
      }
      if (d < 0) break;
    }
    dx[i] = acc;
  }
}

int64_t count(const Dims& d) {
  int64_t n = 1;
  for (int k = 0; k < d.rank; ++k) n *= d.size[k];
  return n;
}

}  // namespace

namespace {

// Rows of `len` contiguous units (V) whose starts follow the outer dims at strides ss and ds (in units): a
// permutation that keeps the innermost dim (BERT's heads split and merged, (N, T, H, D) <-> (N, H, T, D)). One
// division per unit for the row and one per outer dim, where strided_copy_kernel divides per element by every dim.
template <class V, class Index>
__global__ void copy_strided_rows_kernel(Dims outer, Strides ss, Strides ds, Index len, int64_t n, const V* src,
                                         V* dst) {
  MONET_GRID_LOOP(i, n) {
    const Index k = static_cast<Index>(i);
    const Index r = k / len, j = k - r * len;
    Index a = 0, b = 0;
    offsets_of(outer, ss, ds, r, a, b);
    dst[b + j] = src[a + j];
  }
}

// A copy whose innermost destination dim L is not the source's contiguous dim Q (a transpose: K^T of attention, a
// weight's two dims swapped): 32 x 32 tiles of (Q, L) staged in shared memory, read along Q (contiguous in the
// source) and written along L (contiguous in the destination), so both sides are coalesced. Blocks of 32 x 8
// threads; block t (grid-stride) takes tile t % tiles_l of L, (t / tiles_l) % tiles_q of Q and batch entry
// t / (tiles_l * tiles_q) of the other dims (batch, at strides bs and bd).
template <class E>
__global__ void transpose_tiles_kernel(Dims batch, Strides bs, Strides bd, int64_t Q, int64_t L, int64_t sL,
                                       int64_t dQ, int64_t tiles_q, int64_t tiles_l, int64_t tiles, const E* src,
                                       E* dst) {
  __shared__ E tile[32][33];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // block-uniform
    const int64_t tl = t % tiles_l, tq = (t / tiles_l) % tiles_q, b = t / (tiles_l * tiles_q);
    int64_t a = 0, c = 0;
    offsets_of(batch, bs, bd, b, a, c);
    const int64_t q0 = tq * 32, l0 = tl * 32;
    __syncthreads();  // the previous tile's reads are done
    for (int j = ty; j < 32; j += 8)
      if (q0 + tx < Q && l0 + j < L) tile[j][tx] = src[a + q0 + tx + (l0 + j) * sL];
    __syncthreads();
    for (int j = ty; j < 32; j += 8)
      if (l0 + tx < L && q0 + j < Q) dst[c + (q0 + j) * dQ + l0 + tx] = tile[tx][j];
  }
}

template <class E>
void launch_transpose_tiles(const Dims& m, const Strides& ms, const Strides& md, int q, const void* src, void* dst,
                            cudaStream_t stream) {
  const int last = m.rank - 1;
  Dims batch;
  Strides bs, bd;
  for (int k = 0; k < last; ++k) {
    if (k == q) continue;
    batch.size[batch.rank] = m.size[k];
    bs.s[batch.rank] = ms.s[k];
    bd.s[batch.rank] = md.s[k];
    ++batch.rank;
  }
  int64_t entries = 1;
  for (int k = 0; k < batch.rank; ++k) entries *= batch.size[k];
  if (batch.rank == 0) {
    batch.rank = 1;
    batch.size[0] = 1;
  }
  const int64_t Q = m.size[q], L = m.size[last];
  const int64_t tiles_q = (Q + 31) / 32, tiles_l = (L + 31) / 32, tiles = entries * tiles_q * tiles_l;
  const unsigned grid = static_cast<unsigned>(tiles < (int64_t{1} << 30) ? tiles : int64_t{1} << 30);
  launch_kernel(transpose_tiles_kernel<E>, grid, dim3(32, 8), 0, stream, batch, bs, bd, Q, L, ms.s[last], md.s[q],
                tiles_q, tiles_l, tiles, static_cast<const E*>(src), static_cast<E*>(dst));
}

template <class V>
void launch_strided_rows(const Dims& outer, const Strides& ss, const Strides& ds, int64_t len, int64_t reach,
                         const void* src, void* dst, cudaStream_t stream) {
  int64_t rows = 1;
  for (int d = 0; d < outer.rank; ++d) rows *= outer.size[d];
  const int64_t n = rows * len, limit = int64_t{1} << 31;
  const V* s = static_cast<const V*>(src);
  V* d = static_cast<V*>(dst);
  if (n < limit && reach < limit)
    launch_kernel(copy_strided_rows_kernel<V, int32_t>, blocks_for(n), kThreads, 0, stream, outer, ss, ds,
                  static_cast<int32_t>(len), n, s, d);
  else
    launch_kernel(copy_strided_rows_kernel<V, int64_t>, blocks_for(n), kThreads, 0, stream, outer, ss, ds, len, n, s,
                  d);
}

template <class V>
void launch_rows(int64_t rows, int64_t len, int64_t spitch, int64_t dpitch, const void* src, void* dst,
                 cudaStream_t stream) {
  const int64_t bx = (len + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(bx < 4096 ? bx : 4096), static_cast<unsigned>(rows < 65535 ? rows : 65535));
  launch_kernel(copy_rows_kernel<V>, grid, kThreads, 0, stream, rows, static_cast<int32_t>(len), spitch, dpitch,
                static_cast<const V*>(src), static_cast<V*>(dst));
}

template <class E>
void launch_strided(const Dims& shape, const Strides& ss, const void* src, const Strides& ds, void* dst, int64_t n,
                    bool narrow, cudaStream_t stream) {
  const E* s = static_cast<const E*>(src);
  E* d = static_cast<E*>(dst);
  if (narrow)
    launch_kernel(strided_copy_kernel<E, int32_t>, blocks_for(n), kThreads, 0, stream, shape, ss, s, ds, d, n);
  else
    launch_kernel(strided_copy_kernel<E, int64_t>, blocks_for(n), kThreads, 0, stream, shape, ss, s, ds, d, n);
}

// The largest offset |sum_d i_d * stride_d| can reach (the pointer holds the base already).
int64_t max_offset(const Dims& shape, const Strides& st) {
  int64_t hi = 0, lo = 0;
  for (int d = 0; d < shape.rank; ++d) (st.s[d] > 0 ? hi : lo) += (shape.size[d] - 1) * st.s[d];
  return hi > -lo ? hi : -lo;
}

}  // namespace

cudaError_t strided_copy(int elem_bytes, const Dims& shape, const Strides& src_stride, int64_t src_base,
                         const void* src, const Strides& dst_stride, int64_t dst_base, void* dst,
                         cudaStream_t stream) {
  if (elem_bytes != 1 && elem_bytes != 4 && elem_bytes != 8) return cudaErrorInvalidValue;
  const int64_t n = count(shape);
  if (n == 0) return cudaSuccess;
  // Dims of size 1 dropped; adjacent dims merged where both sides step through them as one.
  Dims m;
  Strides ms, md;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.size[d] == 1) continue;
    const int k = m.rank - 1;
    if (k >= 0 && ms.s[k] == src_stride.s[d] * shape.size[d] && md.s[k] == dst_stride.s[d] * shape.size[d]) {
      m.size[k] *= shape.size[d];
      ms.s[k] = src_stride.s[d];
      md.s[k] = dst_stride.s[d];
      continue;
    }
    m.size[m.rank] = shape.size[d];
    ms.s[m.rank] = src_stride.s[d];
    md.s[m.rank] = dst_stride.s[d];
    ++m.rank;
  }
  if (m.rank == 0) {
    m.rank = 1;
    m.size[0] = 1;
    ms.s[0] = md.s[0] = 1;
  }
  const char* s = static_cast<const char*>(src) + src_base * elem_bytes;
  char* d = static_cast<char*>(dst) + dst_base * elem_bytes;
  const int64_t len = m.size[m.rank - 1];
  if (m.rank <= 2 && ms.s[m.rank - 1] == 1 && md.s[m.rank - 1] == 1 && len < (int64_t{1} << 31)) {
    const int64_t rows = m.rank == 2 ? m.size[0] : 1;
    const int64_t sp = m.rank == 2 ? ms.s[0] : 0, dp = m.rank == 2 ? md.s[0] : 0;
    // The widest unit that divides the row length, both pitches and both addresses.
    const int64_t lb = len * elem_bytes, spb = sp * elem_bytes, dpb = dp * elem_bytes;
    const auto fits = [&](int64_t w) {
      return lb % w == 0 && spb % w == 0 && dpb % w == 0 && reinterpret_cast<uintptr_t>(s) % w == 0 &&
             reinterpret_cast<uintptr_t>(d) % w == 0;
    };
    if (fits(16)) launch_rows<uint4>(rows, lb / 16, spb / 16, dpb / 16, s, d, stream);
    else if (fits(8)) launch_rows<uint64_t>(rows, lb / 8, spb / 8, dpb / 8, s, d, stream);
    else if (fits(4)) launch_rows<uint32_t>(rows, lb / 4, spb / 4, dpb / 4, s, d, stream);
    else launch_rows<uint8_t>(rows, lb, spb, dpb, s, d, stream);
    return cudaGetLastError();
  }
  const int64_t limit = int64_t{1} << 31;
  if (ms.s[m.rank - 1] == 1 && md.s[m.rank - 1] == 1 && len * elem_bytes >= 16) {
    // The innermost dim contiguous on both sides: rows, in the widest unit that divides the row, every outer
    // stride and both addresses.
    Dims outer;
    Strides os, od;
    outer.rank = m.rank - 1;
    for (int k = 0; k < outer.rank; ++k) outer.size[k] = m.size[k];
    const auto fits = [&](int64_t w) {
      if ((len * elem_bytes) % w != 0 || reinterpret_cast<uintptr_t>(s) % w != 0 ||
          reinterpret_cast<uintptr_t>(d) % w != 0)
        return false;
      for (int k = 0; k < outer.rank; ++k)
        if ((ms.s[k] * elem_bytes) % w != 0 || (md.s[k] * elem_bytes) % w != 0) return false;
      return true;
    };
    const int64_t w = fits(16) ? 16 : fits(8) ? 8 : fits(4) ? 4 : 1;
    for (int k = 0; k < outer.rank; ++k) {
      os.s[k] = ms.s[k] * elem_bytes / w;
      od.s[k] = md.s[k] * elem_bytes / w;
    }
    const int64_t units = len * elem_bytes / w;
    const int64_t reach = std::max(max_offset(outer, os), max_offset(outer, od)) + units;
    switch (w) {
      case 16: launch_strided_rows<uint4>(outer, os, od, units, reach, s, d, stream); break;
      case 8: launch_strided_rows<uint64_t>(outer, os, od, units, reach, s, d, stream); break;
      case 4: launch_strided_rows<uint32_t>(outer, os, od, units, reach, s, d, stream); break;
      default: launch_strided_rows<uint8_t>(outer, os, od, units, reach, s, d, stream); break;
    }
    return cudaGetLastError();
  }
  if (m.rank >= 2 && md.s[m.rank - 1] == 1 && ms.s[m.rank - 1] != 1) {
    // The destination's innermost dim is strided in the source: a transpose, in tiles, if the source has a
    // contiguous dim.
    int q = -1;
    for (int k = 0; k < m.rank - 1; ++k)
      if (ms.s[k] == 1 && m.size[k] > 1) q = k;
    // Tiles that both dims fill at least a quarter of (a dim of 2 or 3, such as channels moved, stays general).
    if (q >= 0 && m.size[q] >= 8 && m.size[m.rank - 1] >= 8) {
      switch (elem_bytes) {
        case 1: launch_transpose_tiles<uint8_t>(m, ms, md, q, s, d, stream); break;
        case 4: launch_transpose_tiles<uint32_t>(m, ms, md, q, s, d, stream); break;
        default: launch_transpose_tiles<uint64_t>(m, ms, md, q, s, d, stream); break;
      }
      return cudaGetLastError();
    }
  }
  const bool narrow = n < limit && max_offset(m, ms) < limit && max_offset(m, md) < limit;
  switch (elem_bytes) {
    case 1: launch_strided<uint8_t>(m, ms, s, md, d, n, narrow, stream); break;
    case 4: launch_strided<uint32_t>(m, ms, s, md, d, n, narrow, stream); break;
    default: launch_strided<uint64_t>(m, ms, s, md, d, n, narrow, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t gather(int elem_bytes, int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx,
                   const void* x, void* y, cudaStream_t stream) {
  const unsigned b = blocks_for(outer * K * inner);
  switch (elem_bytes) {
    case 1:
      launch_kernel(gather_kernel<uint8_t>, b, kThreads, 0, stream, outer, A, K, inner, idx,
                    static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y));
      break;
    case 4:
      launch_kernel(gather_kernel<uint32_t>, b, kThreads, 0, stream, outer, A, K, inner, idx,
                    static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y));
      break;
    case 8:
      launch_kernel(gather_kernel<uint64_t>, b, kThreads, 0, stream, outer, A, K, inner, idx,
                    static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y));
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t gather_idx(int elem_bytes, int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx,
                       const void* x, void* y, cudaStream_t stream) {
  const unsigned b = blocks_for(outer * K * inner);
  switch (elem_bytes) {
    case 4:
      launch_kernel(gather_idx_kernel<uint32_t>, b, kThreads, 0, stream, outer, A, K, inner, idx,
                    static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y));
      break;
    case 8:
      launch_kernel(gather_idx_kernel<uint64_t>, b, kThreads, 0, stream, outer, A, K, inner, idx,
                    static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y));
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

namespace {

// GatherIdxGrad's workspace: keys and order, sorted keys and order (int32, K each), then the sort's scratch.
struct GatherIdxGradWorkspace {
  int64_t keys = 0, order = 0, sorted_keys = 0, sorted_order = 0, scratch = 0, total = 0;  // byte offsets, size
  size_t scratch_bytes = 0;
  int key_bits = 1;
};

int64_t align256(int64_t b) { return (b + 255) / 256 * 256; }

GatherIdxGradWorkspace gather_idx_grad_layout(int64_t A, int64_t K) {
  GatherIdxGradWorkspace w;
  while ((int64_t{1} << w.key_bits) <= A) ++w.key_bits;  // keys 0 .. A
  const int64_t part = align256(K * 4);
  w.order = part;
  w.sorted_keys = 2 * part;
  w.sorted_order = 3 * part;
  w.scratch = 4 * part;
  const cudaError_t e = cub::DeviceRadixSort::SortPairs(
      nullptr, w.scratch_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(K), 0, w.key_bits);
  w.total = e == cudaSuccess ? w.scratch + align256(static_cast<int64_t>(w.scratch_bytes)) : -1;
  return w;
}

// Keys and positions are int32, key A included.
bool fits_int32_keys(int64_t A, int64_t K) { return K <= INT32_MAX - 1 && A <= INT32_MAX - 1; }

}  // namespace

int64_t gather_idx_grad_workspace(int64_t A, int64_t K) {
  if (K <= 0 || A <= 0) return 0;
  if (!fits_int32_keys(A, K)) return -1;
  return gather_idx_grad_layout(A, K).total;
}

cudaError_t gather_idx_grad(int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx, const float* dy,
                            float* dx, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  if (outer * A * inner == 0) return cudaSuccess;
  if (!fits_int32_keys(A, K)) return cudaErrorInvalidValue;
  const bool wide = inner % 4 == 0 && aligned16(dy) && aligned16(dx);
  const int64_t inner_u = wide ? inner / 4 : inner;
  const int32_t* keys = nullptr;
  const int32_t* order = nullptr;
  if (K > 0) {
    const GatherIdxGradWorkspace w = gather_idx_grad_layout(A, K);
    if (w.total < 0 || !workspace || workspace_bytes < w.total) return cudaErrorInvalidValue;
    char* base = static_cast<char*>(workspace);
    auto at = [&](int64_t off) { return reinterpret_cast<int32_t*>(base + off); };
    launch_kernel(gather_idx_keys_kernel, blocks_for(K), kThreads, 0, stream, K, A, idx, at(w.keys), at(w.order));
    size_t scratch_bytes = w.scratch_bytes;
    const cudaError_t e = cub::DeviceRadixSort::SortPairs(base + w.scratch, scratch_bytes, at(w.keys),
                                                          at(w.sorted_keys), at(w.order), at(w.sorted_order),
                                                          static_cast<int>(K), 0, w.key_bits, stream);
    if (e != cudaSuccess) return e;
    keys = at(w.sorted_keys);
    order = at(w.sorted_order);
  }
  // Threads per block: the row's units rounded up to a warp, at most kThreads (rows of 768 floats: 192).
  const int64_t threads = inner_u >= kThreads ? kThreads : (inner_u + 31) / 32 * 32;
  const int64_t groups = (inner_u + threads - 1) / threads;
  const int64_t blocks = outer * A * groups;
  const unsigned grid = static_cast<unsigned>(blocks < (int64_t{1} << 30) ? blocks : int64_t{1} << 30);
  if (wide)
    launch_kernel(gather_idx_rows_kernel<4>, grid, static_cast<unsigned>(threads), 0, stream, outer, A, K, inner_u,
                  groups, keys, order, dy, dx);
  else
    launch_kernel(gather_idx_rows_kernel<1>, grid, static_cast<unsigned>(threads), 0, stream, outer, A, K, inner_u,
                  groups, keys, order, dy, dx);
  return cudaGetLastError();
}

cudaError_t gather_grad(int64_t outer, int64_t A, int64_t K, int64_t inner, const int32_t* keys, const int32_t* order,
                        const float* dy, float* dx, cudaStream_t stream) {
  launch_kernel(gather_grad_kernel, blocks_for(outer * A * inner), kThreads, 0, stream, outer, A, K, inner, keys,
                order, dy, dx);
  return cudaGetLastError();
}

cudaError_t pad(const Dims& x_dims, const Dims& y_dims, const int64_t* table, const Strides& axis_offset,
                float value, const float* x, float* y, cudaStream_t stream) {
  const int64_t n = count(y_dims);
  launch_kernel(pad_kernel, blocks_for(n), kThreads, 0, stream, x_dims, y_dims, table, axis_offset, value, x, y, n);
  return cudaGetLastError();
}

cudaError_t pad_grad(const Dims& x_dims, const Dims& y_dims, const int64_t* csr, const CsrAxes& axes,
                     const float* dy, float* dx, cudaStream_t stream) {
  const int64_t n = count(x_dims);
  launch_kernel(pad_grad_kernel, blocks_for(n), kThreads, 0, stream, x_dims, y_dims, csr, axes, dy, dx, n);
  return cudaGetLastError();
}

// ----------------------------------------------------------------------------------------------- Trilu

namespace {

__global__ void trilu_kernel(int64_t n, int64_t R, int64_t C, int64_t k, bool upper, const float* x, float* y) {
  MONET_GRID_LOOP(i, n) {
    const int64_t j = i % C, r = (i / C) % R;
    const bool keep = upper ? j - r >= k : j - r <= k;
    y[i] = keep ? x[i] : 0.f;  // x[i] read before y[i] is written: y may be x
  }
}

}  // namespace

cudaError_t trilu(int64_t batch, int64_t R, int64_t C, int64_t k, bool upper, const float* x, float* y,
                  cudaStream_t stream) {
  const int64_t n = batch * R * C;
  launch_kernel(trilu_kernel, blocks_for(n), kThreads, 0, stream, n, R, C, k, upper, x, y);
  return cudaGetLastError();
}

}  // namespace monet::cuda
