// Elementwise kernels: activations and their gradients, broadcasting binary ops, the reduction of a broadcast
// gradient to an input's shape, Dropout and the SGD update. Each mirrors the CPU kernel of its op (lib/ops/<op>),
// including how comparisons treat NaN; products that the CPU rounds separately use __fmul_rn/__fadd_rn so that
// nvcc's FMA contraction does not move a value across a kink (hard_sigmoid) or change SGD's rounding.
#include <cmath>

#include "engine/cuda/launch.cuh"

namespace monet::cuda {
namespace {

int64_t count_of(const Dims& d) {
  int64_t n = 1;
  for (int k = 0; k < d.rank; ++k) n *= d.size[k];
  return n;
}

// ----------------------------------------------------------------------------------------------- unary

template <Unary op>
__device__ __forceinline__ float unary_of(float x, float p0, float p1) {
  if constexpr (op == Unary::relu) {
    return x > 0.f ? x : 0.f;
  } else if constexpr (op == Unary::clip) {  // std::min(std::max(x, lo), hi), NaN passes through as on the CPU
    const float v = x < p0 ? p0 : x;
    return p1 < v ? p1 : v;
  } else if constexpr (op == Unary::sigmoid) {
    return 1.f / (1.f + expf(-x));
  } else if constexpr (op == Unary::hard_sigmoid) {  // max(0, min(1, alpha * x + beta))
    const float v = __fadd_rn(__fmul_rn(p0, x), p1);
    const float m = v < 1.f ? v : 1.f;
    return 0.f < m ? m : 0.f;
  } else if constexpr (op == Unary::hard_swish) {  // x * min(max(x + 3, 0), 6) / 6
    const float a = x + 3.f;
    const float b = a < 0.f ? 0.f : a;
    const float c = 6.f < b ? 6.f : b;
    return __fmul_rn(x, c) / 6.f;
  } else if constexpr (op == Unary::tanh) {
    return tanhf(x);
  } else if constexpr (op == Unary::square) {
    return x * x;
  } else if constexpr (op == Unary::pow) {
    return powf(x, p0);
  } else if constexpr (op == Unary::sqrt) {
    return sqrtf(x);
  } else if constexpr (op == Unary::erf) {
    return erff(x);
  } else {  // gelu, p0 = the divisor (sqrt 2): x * (1 + erf(x / p0)) * 0.5 in the CPU's order
    return __fmul_rn(__fmul_rn(x, erff(x / p0) + 1.f), 0.5f);
  }
}

template <Unary op>
// No __restrict__: y may be x (Relu and Clip run in place); each element is read before it is written.
__global__ void unary_kernel(int64_t n, const float* x, float* y, float p0, float p1) {
  MONET_GRID_LOOP(i, n) y[i] = unary_of<op>(x[i], p0, p1);
}

// Four elements per thread (16-byte aligned, n4 = n / 4).
template <Unary op>
__global__ void unary4_kernel(int64_t n4, const float4* x, float4* y, float p0, float p1) {
  MONET_GRID_LOOP(i, n4) {
    const float4 v = x[i];
    y[i] = make_float4(unary_of<op>(v.x, p0, p1), unary_of<op>(v.y, p0, p1), unary_of<op>(v.z, p0, p1),
                       unary_of<op>(v.w, p0, p1));
  }
}

// One warp per 32-element word of the mask: the loop bound is uniform over a warp, so every lane reaches the
// ballot (blockDim is a multiple of 32). y may be x (in place).
__global__ void relu_mask_kernel(int64_t n, const float* x, float* y, uint32_t* __restrict__ mask) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t words = (n + 31) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < words; w += warps) {
    const int64_t i = w * 32 + lane;
    bool on = false;
    if (i < n) {
      const float v = x[i];
      on = v > 0.f;
      y[i] = on ? v : 0.f;
    }
    const unsigned bits = __ballot_sync(0xffffffffu, on);
    if (lane == 0) mask[w] = bits;
  }
}

// No __restrict__ on dy and dx here and in the gradient kernels below: dx may be dy (a gradient written in place);
// each element is read before it is written, by the same thread.
__global__ void relu_grad_mask_kernel(int64_t n, const float* dy, const uint32_t* __restrict__ mask, float* dx) {
  MONET_GRID_LOOP(i, n) dx[i] = (mask[i >> 5] >> (i & 31)) & 1u ? dy[i] : 0.f;
}

// n % 4 == 0, x and y 16-byte aligned: each lane takes four elements, so a warp covers 128 elements = 4 words; the
// eight lanes of a word OR their nibbles together. The loop bound is uniform over a warp (every lane shuffles).
__global__ void relu_mask4_kernel(int64_t n, const float4* x, float4* y, uint32_t* __restrict__ mask) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t chunks = (n + 127) / 128;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; c < chunks; c += warps) {
    const int64_t i4 = c * 32 + lane;  // float4 index; elements 4 * i4 .. 4 * i4 + 3
    unsigned bits = 0;
    if (4 * i4 < n) {
      const float4 v = x[i4];
      bits = (v.x > 0.f ? 1u : 0u) | (v.y > 0.f ? 2u : 0u) | (v.z > 0.f ? 4u : 0u) | (v.w > 0.f ? 8u : 0u);
      y[i4] = make_float4(v.x > 0.f ? v.x : 0.f, v.y > 0.f ? v.y : 0.f, v.z > 0.f ? v.z : 0.f, v.w > 0.f ? v.w : 0.f);
    }
    bits <<= 4 * (lane % 8);
    bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
    bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
    bits |= __shfl_xor_sync(0xffffffffu, bits, 4);
    const int64_t word = c * 4 + lane / 8;
    if (lane % 8 == 0 && word * 32 < n) mask[word] = bits;
  }
}

__global__ void relu_grad_mask4_kernel(int64_t n4, const float4* dy, const uint32_t* __restrict__ mask, float4* dx) {
  MONET_GRID_LOOP(i, n4) {
    const unsigned bits = mask[i >> 3] >> (4 * (i & 7));
    const float4 g = dy[i];
    dx[i] = make_float4(bits & 1u ? g.x : 0.f, bits & 2u ? g.y : 0.f, bits & 4u ? g.z : 0.f, bits & 8u ? g.w : 0.f);
  }
}

template <UnaryGrad op>
__device__ __forceinline__ float unary_grad_of(float dy, float s, float p0, float p1) {
  if constexpr (op == UnaryGrad::relu) {  // s = y
    return s > 0.f ? dy : 0.f;
  } else if constexpr (op == UnaryGrad::clip) {  // s = x, bounds inclusive
    return s >= p0 && s <= p1 ? dy : 0.f;
  } else if constexpr (op == UnaryGrad::clip_output) {  // s = y, bounds exclusive
    return s > p0 && s < p1 ? dy : 0.f;
  } else if constexpr (op == UnaryGrad::sigmoid) {  // s = y
    return __fmul_rn(__fmul_rn(dy, 1.f - s), s);
  } else if constexpr (op == UnaryGrad::hard_sigmoid) {  // s = x
    const float v = __fadd_rn(__fmul_rn(p0, s), p1);
    return v > 0.f && v < 1.f ? __fmul_rn(dy, p0) : 0.f;
  } else if constexpr (op == UnaryGrad::hard_swish) {  // s = x; torch 1.13's boundaries
    if (s < -3.f) return 0.f;
    if (s <= 3.f) return __fmul_rn(dy, s / 3.f + 0.5f);
    return dy;
  } else if constexpr (op == UnaryGrad::tanh) {  // s = y
    return __fmul_rn(dy, 1.f - __fmul_rn(s, s));
  } else if constexpr (op == UnaryGrad::pow) {  // s = x, p0 = exponent
    return __fmul_rn(__fmul_rn(dy, p0), powf(s, p0 - 1.f));
  } else if constexpr (op == UnaryGrad::sqrt) {  // s = y
    return dy / (2.f * s);
  } else if constexpr (op == UnaryGrad::erf) {  // s = x, p0 = 2 / sqrt(pi) as a float
    return __fmul_rn(__fmul_rn(dy, p0), expf(-__fmul_rn(s, s)));
  } else {  // gelu, s = x, p0 = the divisor c, p1 = 1 / (c sqrt(pi))
    const float u = s / p0;
    return dy * ((erff(u) + 1.f) * 0.5f + __fmul_rn(s, p1) * expf(-__fmul_rn(u, u)));
  }
}

template <UnaryGrad op>
__global__ void unary_grad_kernel(int64_t n, const float* dy, const float* __restrict__ s, float* dx, float p0,
                                  float p1) {
  MONET_GRID_LOOP(i, n) dx[i] = unary_grad_of<op>(dy[i], s[i], p0, p1);
}

template <UnaryGrad op>
__global__ void unary_grad4_kernel(int64_t n4, const float4* dy, const float4* __restrict__ s, float4* dx, float p0,
                                   float p1) {
  MONET_GRID_LOOP(i, n4) {
    const float4 g = dy[i], v = s[i];
    dx[i] = make_float4(unary_grad_of<op>(g.x, v.x, p0, p1), unary_grad_of<op>(g.y, v.y, p0, p1),
                        unary_grad_of<op>(g.z, v.z, p0, p1), unary_grad_of<op>(g.w, v.w, p0, p1));
  }
}

// ----------------------------------------------------------------------------------------------- binary

template <Binary op>
__device__ __forceinline__ float binary_of(float a, float b, float scalar) {
  if constexpr (op == Binary::add) return a + b;
  else if constexpr (op == Binary::sub) return a - b;
  else if constexpr (op == Binary::mul) return a * b;
  else if constexpr (op == Binary::div) return a / b;
  else if constexpr (op == Binary::copy_a) return a;
  else return a / scalar;
}

// Both operands and y contiguous over the same n elements, four at a time (16-byte aligned, n4 = n / 4). No
// __restrict__: y may be a (Sum accumulates in place); each element is read before it is written.
template <Binary op>
__global__ void contiguous_binary4_kernel(int64_t n4, const float4* a, const float4* b, float4* y, float scalar) {
  MONET_GRID_LOOP(i, n4) {
    const float4 u = a[i], v = b[i];
    y[i] = make_float4(binary_of<op>(u.x, v.x, scalar), binary_of<op>(u.y, v.y, scalar),
                       binary_of<op>(u.z, v.z, scalar), binary_of<op>(u.w, v.w, scalar));
  }
}

template <Binary op>
__global__ void contiguous_binary_kernel(int64_t n, const float* a, const float* b, float* y, float scalar) {
  MONET_GRID_LOOP(i, n) y[i] = binary_of<op>(a[i], b[i], scalar);
}

// The general case: each output index split into coordinates. Index is int32_t when n < 2^31 (64-bit division
// is emulated on the GPU and made this kernel ~15x slower than the memory allows).
template <Binary op, class Index>
__global__ void broadcast_binary_kernel(Dims out, Strides sa, Strides sb, const float* a, const float* b, float* y,
                                        float scalar, int64_t n) {
  MONET_GRID_LOOP(i, n) {
    Index oa = 0, ob = 0;
    offsets_of(out, sa, sb, static_cast<Index>(i), oa, ob);
    y[i] = binary_of<op>(a[oa], b[ob], scalar);
  }
}

// Rows of the innermost dim (len elements, or float4s when V = float4), each operand contiguous along it (stride 1:
// IA/IB true) or constant along it (stride 0: a per-row value, as a conv bias or a per-channel scale). A row's
// offsets are found once per row (blockIdx.y), not per element.
template <Binary op, bool IA, bool IB, class V>
__global__ void rows_binary_kernel(Dims lead, Strides sa, Strides sb, int64_t rows, int32_t len, const float* a,
                                   const float* b, float* y, float scalar) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    int64_t oa = 0, ob = 0;
    offsets_of(lead, sa, sb, r, oa, ob);
    const V* ra = reinterpret_cast<const V*>(a + oa);
    const V* rb = reinterpret_cast<const V*>(b + ob);
    V* ry = reinterpret_cast<V*>(y) + r * len;
    const float ca = IA ? 0.f : a[oa], cb = IB ? 0.f : b[ob];
    for (int32_t j = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); j < len;
         j += static_cast<int32_t>(blockDim.x * gridDim.x)) {
      if constexpr (sizeof(V) == sizeof(float)) {
        ry[j] = binary_of<op>(IA ? ra[j] : ca, IB ? rb[j] : cb, scalar);
      } else {
        const float4 u = IA ? ra[j] : make_float4(ca, ca, ca, ca), v = IB ? rb[j] : make_float4(cb, cb, cb, cb);
        ry[j] = make_float4(binary_of<op>(u.x, v.x, scalar), binary_of<op>(u.y, v.y, scalar),
                            binary_of<op>(u.z, v.z, scalar), binary_of<op>(u.w, v.w, scalar));
      }
    }
  }
}

template <Binary op, bool IA, bool IB>
void launch_rows_binary(const Dims& out, const Strides& sa, const Strides& sb, const float* a, const float* b,
                        float* y, float scalar, cudaStream_t stream) {
  Dims lead = out;
  lead.rank = out.rank - 1;
  const int64_t len = out.size[out.rank - 1], rows = count_of(lead);
  // float4 rows: the row length a multiple of 4 and every row start 16-byte aligned (rows of a contiguous
  // operand start at multiples of len).
  const bool wide = len % 4 == 0 && aligned16(y) && (!IA || aligned16(a)) && (!IB || aligned16(b));
  const int64_t units = wide ? len / 4 : len;
  const int64_t bx = (units + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(bx < 4096 ? bx : 4096), static_cast<unsigned>(rows < 65535 ? rows : 65535));
  if (wide)
    rows_binary_kernel<op, IA, IB, float4><<<grid, kThreads, 0, stream>>>(lead, sa, sb, rows,
                                                                           static_cast<int32_t>(units), a, b, y, scalar);
  else
    rows_binary_kernel<op, IA, IB, float><<<grid, kThreads, 0, stream>>>(lead, sa, sb, rows,
                                                                          static_cast<int32_t>(units), a, b, y, scalar);
}

template <Binary op>
void launch_binary(const Dims& out, const Strides& sa, const Strides& sb, const float* a, const float* b, float* y,
                   float scalar, int64_t n, cudaStream_t stream) {
  const bool contiguous = out.rank == 1 && sa.s[0] == 1 && sb.s[0] == 1;
  const int last = out.rank - 1;
  // Rows long enough that one thread block's worth of threads has work in each.
  const bool rows = out.rank >= 2 && out.size[last] >= 32 && out.size[last] < (int64_t{1} << 31);
  const int64_t ia = sa.s[last], ib = sb.s[last];
  if (rows && ia == 1 && ib == 0) {
    launch_rows_binary<op, true, false>(out, sa, sb, a, b, y, scalar, stream);
  } else if (rows && ia == 0 && ib == 1) {
    launch_rows_binary<op, false, true>(out, sa, sb, a, b, y, scalar, stream);
  } else if (rows && ia == 1 && ib == 1) {
    launch_rows_binary<op, true, true>(out, sa, sb, a, b, y, scalar, stream);
  } else if (contiguous && n % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(y)) {
    contiguous_binary4_kernel<op><<<blocks_for(n / 4), kThreads, 0, stream>>>(
        n / 4, reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(y),
        scalar);
  } else if (contiguous) {
    contiguous_binary_kernel<op><<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, y, scalar);
  } else if (n < (int64_t{1} << 31)) {
    // Offsets into a and b are below n too: a broadcast operand has no more elements than the output.
    broadcast_binary_kernel<op, int32_t><<<blocks_for(n), kThreads, 0, stream>>>(out, sa, sb, a, b, y, scalar, n);
  } else {
    broadcast_binary_kernel<op, int64_t><<<blocks_for(n), kThreads, 0, stream>>>(out, sa, sb, a, b, y, scalar, n);
  }
}

// ----------------------------------------------------------------------------------------------- reduce

template <Term t>
__device__ __forceinline__ float term_of(float x, const float* p0, const float* p1, int64_t o1, int64_t o2) {
  if constexpr (t == Term::x) return x;
  else if constexpr (t == Term::neg_x) return -x;
  else if constexpr (t == Term::x_mul_p0) return x * p0[o1];
  else if constexpr (t == Term::x_div_p0) return x / p0[o1];
  else return __fmul_rn(-x, (p0[o1] / p1[o2]) / p1[o2]);
}

// Offsets of output element o (kept dims) and of reduction index j (reduced dims), per operand.
__device__ __forceinline__ void kept_offsets(const ReduceGeom& g, int64_t o, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int d = g.kept_rank - 1; d >= 0; --d) {
    const int64_t idx = o % g.kept_size[d];
    o /= g.kept_size[d];
    for (int k = 0; k < 3; ++k) off[k] += idx * g.kept_stride[k][d];
  }
}
__device__ __forceinline__ void red_offsets(const ReduceGeom& g, int64_t j, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int d = g.red_rank - 1; d >= 0; --d) {
    const int64_t idx = j % g.red_size[d];
    j /= g.red_size[d];
    for (int k = 0; k < 3; ++k) off[k] += idx * g.red_stride[k][d];
  }
}

// One thread per output element (few elements summed into each).
template <Term t>
__global__ void reduce_thread_kernel(ReduceGeom g, const float* x, const float* p0, const float* p1, float* out,
                                     double divisor) {
  MONET_GRID_LOOP(o, g.out_n) {
    int64_t base[3], off[3];
    kept_offsets(g, o, base);
    double acc = 0;
    for (int64_t j = 0; j < g.red_n; ++j) {
      red_offsets(g, j, off);
      acc += term_of<t>(x[base[0] + off[0]], p0, p1, base[1] + off[1], base[2] + off[2]);
    }
    out[o] = static_cast<float>(acc / divisor);
  }
}

// One block per output element (many elements summed into each): strided partial sums, then a tree.
template <Term t>
__global__ void reduce_block_kernel(ReduceGeom g, const float* x, const float* p0, const float* p1, float* out,
                                    double divisor) {
  for (int64_t o = blockIdx.x; o < g.out_n; o += gridDim.x) {
    int64_t base[3], off[3];
    kept_offsets(g, o, base);
    double acc = 0;
    for (int64_t j = threadIdx.x; j < g.red_n; j += blockDim.x) {
      red_offsets(g, j, off);
      acc += term_of<t>(x[base[0] + off[0]], p0, p1, base[1] + off[1], base[2] + off[2]);
    }
    const double total = block_sum(acc);
    if (threadIdx.x == 0) out[o] = static_cast<float>(total / divisor);
  }
}

// One warp per output element where x is [out_n rows][red_n] row-major (GlobalAveragePool, a mean over the
// trailing axes): lanes read a row's consecutive elements (coalesced, no index division), each sums its share in
// double, then a fixed shuffle tree (deterministic). The thread kernel's one thread per row read strided elements and
// split every index with 64-bit divisions.
template <Term t>
__global__ void reduce_rows_warp_kernel(int64_t rows, int32_t len, const float* x, float* out, double divisor) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t r = first; r < rows; r += step) {  // the same r across the warp: the shuffles see every lane
    const float* row = x + r * len;
    double acc = 0;
    for (int32_t j = lane; j < len; j += 32) acc += term_of<t>(row[j], nullptr, nullptr, 0, 0);
    for (int d = 16; d > 0; d /= 2) acc += __shfl_down_sync(0xffffffffu, acc, d);
    if (lane == 0) out[r] = static_cast<float>(acc / divisor);
  }
}

// Whether x's kept dims lead and its reduced dims trail, all contiguous: element (o, j) at o * red_n + j.
bool rows_layout(const ReduceGeom& g) {
  int64_t s = 1;
  for (int d = g.red_rank - 1; d >= 0; --d) {
    if (g.red_stride[0][d] != s) return false;
    s *= g.red_size[d];
  }
  for (int d = g.kept_rank - 1; d >= 0; --d) {
    if (g.kept_stride[0][d] != s) return false;
    s *= g.kept_size[d];
  }
  return true;
}

template <Term t>
void launch_reduce(const ReduceGeom& g, const float* x, const float* p0, const float* p1, float* out, double divisor,
                   cudaStream_t stream) {
  if ((t == Term::x || t == Term::neg_x) && g.red_n < 128 && rows_layout(g)) {
    reduce_rows_warp_kernel<t><<<blocks_for(g.out_n * 32), kThreads, 0, stream>>>(
        g.out_n, static_cast<int32_t>(g.red_n), x, out, divisor);
  } else if (g.red_n >= 128) {
    const int64_t blocks = g.out_n < 65535 ? g.out_n : 65535;
    reduce_block_kernel<t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(g, x, p0, p1, out, divisor);
  } else {
    reduce_thread_kernel<t><<<blocks_for(g.out_n), kThreads, 0, stream>>>(g, x, p0, p1, out, divisor);
  }
}

// ----------------------------------------------------------------------------------------------- dropout, sgd

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void dropout_kernel(int64_t n, const float* x, float* y, uint8_t* mask, uint64_t key, double ratio,
                               float scale) {
  MONET_GRID_LOOP(i, n) {
    const uint64_t h = splitmix64(key + (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull);
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
    const bool keep = ratio == 0 || u >= ratio;
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : 0.f;
  }
}

__global__ void dropout_grad_kernel(int64_t n, const float* dy, const uint8_t* mask, float* dx, float scale) {
  MONET_GRID_LOOP(i, n) dx[i] = mask[i] ? dy[i] * scale : 0.f;
}

// Grid row blockIdx.y updates parameter blockIdx.y. __grid_constant__: the batch is read in place from the
// parameter space (indexing a by-value array with blockIdx.y would copy it into every thread's stack).
__global__ void sgd_kernel(const __grid_constant__ SgdBatch batch, float lr, float momentum) {
  const SgdTensor& t = batch.t[blockIdx.y];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < t.n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float b = __fadd_rn(__fmul_rn(momentum, t.buf[i]), t.g[i]);
    t.buf[i] = b;
    t.p[i] = __fsub_rn(t.p[i], __fmul_rn(lr, b));
  }
}

__global__ void fill_pattern_kernel(int64_t n, float* x, uint64_t seed) {
  MONET_GRID_LOOP(i, n) {
    const uint64_t h = splitmix64(seed + (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull);
    x[i] = static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-52 - 1.0);
  }
}

}  // namespace

cudaError_t unary(Unary op, int64_t n, const float* x, float* y, float p0, float p1, cudaStream_t stream) {
  const bool wide = n % 4 == 0 && aligned16(x) && aligned16(y);
  const unsigned b = blocks_for(wide ? n / 4 : n);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  switch (op) {
#define MONET_CASE(name)                                                                       \
  case Unary::name:                                                                            \
    if (wide) unary4_kernel<Unary::name><<<b, kThreads, 0, stream>>>(n / 4, x4, y4, p0, p1);    \
    else unary_kernel<Unary::name><<<b, kThreads, 0, stream>>>(n, x, y, p0, p1);               \
    break;
    MONET_CASE(relu) MONET_CASE(clip) MONET_CASE(sigmoid) MONET_CASE(hard_sigmoid) MONET_CASE(hard_swish)
    MONET_CASE(tanh) MONET_CASE(square) MONET_CASE(pow) MONET_CASE(sqrt) MONET_CASE(erf) MONET_CASE(gelu)
#undef MONET_CASE
  }
  return cudaGetLastError();
}

cudaError_t unary_grad(UnaryGrad op, int64_t n, const float* dy, const float* saved, float* dx, float p0, float p1,
                       cudaStream_t stream) {
  const bool wide = n % 4 == 0 && aligned16(dy) && aligned16(saved) && aligned16(dx);
  const unsigned b = blocks_for(wide ? n / 4 : n);
  const float4* dy4 = reinterpret_cast<const float4*>(dy);
  const float4* s4 = reinterpret_cast<const float4*>(saved);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  switch (op) {
#define MONET_CASE(name)                                                                                    \
  case UnaryGrad::name:                                                                                     \
    if (wide) unary_grad4_kernel<UnaryGrad::name><<<b, kThreads, 0, stream>>>(n / 4, dy4, s4, dx4, p0, p1); \
    else unary_grad_kernel<UnaryGrad::name><<<b, kThreads, 0, stream>>>(n, dy, saved, dx, p0, p1);          \
    break;
    MONET_CASE(relu) MONET_CASE(clip) MONET_CASE(clip_output) MONET_CASE(sigmoid) MONET_CASE(hard_sigmoid) MONET_CASE(hard_swish)
    MONET_CASE(tanh) MONET_CASE(pow) MONET_CASE(sqrt) MONET_CASE(erf) MONET_CASE(gelu)
#undef MONET_CASE
  }
  return cudaGetLastError();
}

cudaError_t relu_mask(int64_t n, const float* x, float* y, uint32_t* mask, cudaStream_t stream) {
  if (!mask) return unary(Unary::relu, n, x, y, 0.f, 0.f, stream);
  if (n % 4 == 0 && aligned16(x) && aligned16(y))
    relu_mask4_kernel<<<blocks_for((n + 127) / 128 * 32), kThreads, 0, stream>>>(
        n, reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), mask);
  else
    relu_mask_kernel<<<blocks_for((n + 31) / 32 * 32), kThreads, 0, stream>>>(n, x, y, mask);
  return cudaGetLastError();
}

cudaError_t relu_grad_mask(int64_t n, const float* dy, const uint32_t* mask, float* dx, cudaStream_t stream) {
  if (n % 4 == 0 && aligned16(dy) && aligned16(dx))
    relu_grad_mask4_kernel<<<blocks_for(n / 4), kThreads, 0, stream>>>(
        n / 4, reinterpret_cast<const float4*>(dy), mask, reinterpret_cast<float4*>(dx));
  else
    relu_grad_mask_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, dy, mask, dx);
  return cudaGetLastError();
}

cudaError_t broadcast_binary(Binary op, const Dims& out, const Strides& sa, const Strides& sb, const float* a,
                             const float* b, float* y, float scalar, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < out.rank; ++d) n *= out.size[d];
  switch (op) {
#define MONET_CASE(name)                                                         \
  case Binary::name:                                                             \
    launch_binary<Binary::name>(out, sa, sb, a, b, y, scalar, n, stream);        \
    break;
    MONET_CASE(add) MONET_CASE(sub) MONET_CASE(mul) MONET_CASE(div) MONET_CASE(copy_a) MONET_CASE(div_a_by_scalar)
#undef MONET_CASE
  }
  return cudaGetLastError();
}

cudaError_t reduce_to(Term term, const ReduceGeom& g, const float* x, const float* p0, const float* p1, float* out,
                      double divisor, cudaStream_t stream) {
  switch (term) {
    case Term::x: launch_reduce<Term::x>(g, x, p0, p1, out, divisor, stream); break;
    case Term::neg_x: launch_reduce<Term::neg_x>(g, x, p0, p1, out, divisor, stream); break;
    case Term::x_mul_p0: launch_reduce<Term::x_mul_p0>(g, x, p0, p1, out, divisor, stream); break;
    case Term::x_div_p0: launch_reduce<Term::x_div_p0>(g, x, p0, p1, out, divisor, stream); break;
    case Term::div_grad_b: launch_reduce<Term::div_grad_b>(g, x, p0, p1, out, divisor, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t dropout(int64_t n, const float* x, float* y, uint8_t* mask, uint64_t key, double ratio, float scale,
                    cudaStream_t stream) {
  dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, y, mask, key, ratio, scale);
  return cudaGetLastError();
}

cudaError_t dropout_grad(int64_t n, const float* dy, const uint8_t* mask, float* dx, float scale,
                         cudaStream_t stream) {
  dropout_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, dy, mask, dx, scale);
  return cudaGetLastError();
}

cudaError_t sgd_update(const SgdBatch& batch, float lr, float momentum, cudaStream_t stream) {
  if (batch.count <= 0) return cudaSuccess;
  int64_t most = 0;
  for (int k = 0; k < batch.count; ++k) most = batch.t[k].n > most ? batch.t[k].n : most;
  sgd_kernel<<<dim3(blocks_for(most), static_cast<unsigned>(batch.count)), kThreads, 0, stream>>>(batch, lr, momentum);
  return cudaGetLastError();
}

cudaError_t fill_pattern(int64_t n, float* x, uint64_t seed, cudaStream_t stream) {
  fill_pattern_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, seed);
  return cudaGetLastError();
}

}  // namespace monet::cuda
