// Elementwise kernels: activations and their gradients, broadcasting binary ops, the reduction of a broadcast
// gradient to an input's shape (reduce_to), Dropout and the multi-tensor SGD update. Each mirrors the CPU kernel of
// its op (lib/ops/<op>), including how comparisons treat NaN; products that the CPU rounds separately use
// __fmul_rn/__fadd_rn so that nvcc's FMA contraction does not move a value across a kink (hard_sigmoid) or change
// SGD's rounding. Elementwise kernels are grid-stride loops, float4 wherever the pointers are 16-byte aligned (the
// n % 4 tail element by element); index math that divides is 32-bit where the index space fits. Sums have a fixed
// order and use no atomics (kernels.h).
#include <cmath>

#include "engine/cuda/launch.cuh"
#include "engine/cuda/reduce.cuh"

namespace monet::cuda {
namespace {

int64_t count_of(const Dims& d) {
  int64_t n = 1;
  for (int k = 0; k < d.rank; ++k) n *= d.size[k];
  return n;
}

// ----------------------------------------------------------------------------------------------- unary

// max(x, 0) + log1p(exp(-|x|)): no overflow (lib/ops/softplus).
__device__ __forceinline__ float softplus_of(float x) { return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))); }

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
  } else if constexpr (op == Unary::neg) {
    return -x;
  } else if constexpr (op == Unary::exp) {
    return expf(x);
  } else if constexpr (op == Unary::log) {
    return logf(x);
  } else if constexpr (op == Unary::reciprocal) {
    return 1.f / x;
  } else if constexpr (op == Unary::leaky_relu) {  // p0 = alpha
    return x > 0.f ? x : p0 * x;
  } else if constexpr (op == Unary::elu) {  // p0 = alpha, p1 = gamma
    return x > 0.f ? p1 * x : p1 * p0 * expm1f(x);
  } else if constexpr (op == Unary::softplus) {
    return softplus_of(x);
  } else if constexpr (op == Unary::mish) {
    return x * tanhf(softplus_of(x));
  } else if constexpr (op == Unary::abs) {
    return fabsf(x);
  } else if constexpr (op == Unary::sign) {
    return x > 0.f ? 1.f : x < 0.f ? -1.f : x;
  } else if constexpr (op == Unary::floor) {
    return floorf(x);
  } else if constexpr (op == Unary::ceil) {
    return ceilf(x);
  } else if constexpr (op == Unary::round) {
    return rintf(x);
  } else if constexpr (op == Unary::tan) {
    return tanf(x);
  } else if constexpr (op == Unary::atan) {
    return atanf(x);
  } else if constexpr (op == Unary::asin) {
    return asinf(x);
  } else if constexpr (op == Unary::acos) {
    return acosf(x);
  } else if constexpr (op == Unary::sinh) {
    return sinhf(x);
  } else if constexpr (op == Unary::cosh) {
    return coshf(x);
  } else if constexpr (op == Unary::asinh) {
    return asinhf(x);
  } else if constexpr (op == Unary::acosh) {
    return acoshf(x);
  } else if constexpr (op == Unary::atanh) {
    return atanhf(x);
  } else if constexpr (op == Unary::sin) {
    return sinf(x);
  } else if constexpr (op == Unary::cos) {
    return cosf(x);
  } else {  // gelu, p0 = the divisor (sqrt 2): x * (1 + erf(x / p0)) * 0.5 in the CPU's order
    return __fmul_rn(__fmul_rn(x, erff(x / p0) + 1.f), 0.5f);
  }
}

template <Unary op>
// No __restrict__: y may be x (Relu and Clip run in place); each element is read before it is written.
__global__ void unary_kernel(int64_t n, const float* x, float* y, float p0, float p1) {
  MONET_GRID_LOOP(i, n) y[i] = unary_of<op>(x[i], p0, p1);
}

// Four elements per thread (x and y 16-byte aligned) over the first n / 4 * 4 elements; the last n % 4 by the
// first threads of block 0 (each element still read and written by one thread: in place is safe).
template <Unary op>
__global__ void unary4_kernel(int64_t n, const float* x, float* y, float p0, float p1) {
  const int64_t n4 = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  MONET_GRID_LOOP(i, n4) {
    const float4 v = x4[i];
    y4[i] = make_float4(unary_of<op>(v.x, p0, p1), unary_of<op>(v.y, p0, p1), unary_of<op>(v.z, p0, p1),
                        unary_of<op>(v.w, p0, p1));
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {
    const int64_t i = 4 * n4 + threadIdx.x;
    y[i] = unary_of<op>(x[i], p0, p1);
  }
}

// One warp per 32-element word of the mask: the loop bound is uniform over a warp, so every lane reaches the
// ballot (blockDim is a multiple of 32). y may be x (in place).
__global__ void relu_mask_kernel(int64_t n, const float* x, float* y, uint32_t* __restrict__ mask) {
  mask_words(n, mask, [&](int64_t i) {
    const float v = x[i];
    const bool on = v > 0.f;
    y[i] = on ? v : 0.f;
    return on;
  });
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
  } else if constexpr (op == UnaryGrad::exp) {  // s = y
    return dy * s;
  } else if constexpr (op == UnaryGrad::log) {  // s = x
    return dy / s;
  } else if constexpr (op == UnaryGrad::reciprocal) {  // s = y: -dy * (y * y)
    return __fmul_rn(-dy, __fmul_rn(s, s));
  } else if constexpr (op == UnaryGrad::leaky_relu) {  // s = y (alpha >= 0) or x, p0 = alpha
    return s > 0.f ? dy : dy * p0;
  } else if constexpr (op == UnaryGrad::elu) {  // s = x, p0 = alpha, p1 = gamma
    return s > 0.f ? dy * p1 : dy * p1 * p0 * expf(s);
  } else if constexpr (op == UnaryGrad::softplus) {  // s = x: dy * sigmoid(x)
    return dy * (1.f / (1.f + expf(-s)));
  } else if constexpr (op == UnaryGrad::mish) {  // s = x
    const float t = tanhf(softplus_of(s));
    return dy * (t + s * (1.f / (1.f + expf(-s))) * (1.f - t * t));
  } else if constexpr (op == UnaryGrad::abs) {  // s = x, 0 at 0
    return s > 0.f ? dy : s < 0.f ? -dy : 0.f;
  } else if constexpr (op == UnaryGrad::tan) {  // s = x (lib/ops/trig's derivatives)
    const float c = cosf(s);
    return dy / (c * c);
  } else if constexpr (op == UnaryGrad::atan) {
    return dy / (1.f + s * s);
  } else if constexpr (op == UnaryGrad::asin) {
    return dy / sqrtf(1.f - s * s);
  } else if constexpr (op == UnaryGrad::acos) {
    return -dy / sqrtf(1.f - s * s);
  } else if constexpr (op == UnaryGrad::sinh) {
    return dy * coshf(s);
  } else if constexpr (op == UnaryGrad::cosh) {
    return dy * sinhf(s);
  } else if constexpr (op == UnaryGrad::asinh) {
    return dy / sqrtf(s * s + 1.f);
  } else if constexpr (op == UnaryGrad::acosh) {
    return dy / sqrtf(s * s - 1.f);
  } else if constexpr (op == UnaryGrad::atanh) {
    return dy / (1.f - s * s);
  } else if constexpr (op == UnaryGrad::sin) {  // s = x
    return __fmul_rn(dy, cosf(s));
  } else if constexpr (op == UnaryGrad::cos) {  // s = x
    return __fmul_rn(-dy, sinf(s));
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

// float4 over the first n / 4 * 4 elements, the n % 4 tail by block 0 (as unary4_kernel).
template <UnaryGrad op>
__global__ void unary_grad4_kernel(int64_t n, const float* dy, const float* __restrict__ s, float* dx, float p0,
                                   float p1) {
  const int64_t n4 = n / 4;
  const float4* dy4 = reinterpret_cast<const float4*>(dy);
  const float4* s4 = reinterpret_cast<const float4*>(s);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  MONET_GRID_LOOP(i, n4) {
    const float4 g = dy4[i], v = s4[i];
    dx4[i] = make_float4(unary_grad_of<op>(g.x, v.x, p0, p1), unary_grad_of<op>(g.y, v.y, p0, p1),
                         unary_grad_of<op>(g.z, v.z, p0, p1), unary_grad_of<op>(g.w, v.w, p0, p1));
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {
    const int64_t i = 4 * n4 + threadIdx.x;
    dx[i] = unary_grad_of<op>(dy[i], s[i], p0, p1);
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
  else if constexpr (op == Binary::prelu) return a > 0.f ? a : b * a;
  else if constexpr (op == Binary::max) return a > b || isnan(a) ? a : b;
  else if constexpr (op == Binary::min) return a < b || isnan(a) ? a : b;
  else return a / scalar;
}

// Both operands and y contiguous over the same n elements, four at a time (16-byte aligned), the n % 4 tail by
// block 0. No __restrict__: y may be a (Sum accumulates in place); each element is read before it is written.
template <Binary op>
__global__ void contiguous_binary4_kernel(int64_t n, const float* a, const float* b, float* y, float scalar) {
  const int64_t n4 = n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* y4 = reinterpret_cast<float4*>(y);
  MONET_GRID_LOOP(i, n4) {
    const float4 u = a4[i], v = b4[i];
    y4[i] = make_float4(binary_of<op>(u.x, v.x, scalar), binary_of<op>(u.y, v.y, scalar),
                        binary_of<op>(u.z, v.z, scalar), binary_of<op>(u.w, v.w, scalar));
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {
    const int64_t i = 4 * n4 + threadIdx.x;
    y[i] = binary_of<op>(a[i], b[i], scalar);
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
    launch_kernel(rows_binary_kernel<op, IA, IB, float4>, grid, kThreads, 0, stream, lead, sa, sb, rows,
                  static_cast<int32_t>(units), a, b, y, scalar);
  else
    launch_kernel(rows_binary_kernel<op, IA, IB, float>, grid, kThreads, 0, stream, lead, sa, sb, rows,
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
  } else if (contiguous && aligned16(a) && aligned16(b) && aligned16(y)) {
    launch_kernel(contiguous_binary4_kernel<op>, blocks_for(n / 4), kThreads, 0, stream, n, a, b, y, scalar);
  } else if (contiguous) {
    launch_kernel(contiguous_binary_kernel<op>, blocks_for(n), kThreads, 0, stream, n, a, b, y, scalar);
  } else if (n < (int64_t{1} << 31)) {
    // Offsets into a and b are below n too: a broadcast operand has no more elements than the output.
    launch_kernel(broadcast_binary_kernel<op, int32_t>, blocks_for(n), kThreads, 0, stream, out, sa, sb, a, b, y,
                  scalar, n);
  } else {
    launch_kernel(broadcast_binary_kernel<op, int64_t>, blocks_for(n), kThreads, 0, stream, out, sa, sb, a, b, y,
                  scalar, n);
  }
}

// ----------------------------------------------------------------------------------------------- reduce

// Sums over a warp and over a block, and float4 units: reduce.cuh.

// The operands a term reads besides x.
template <Term t>
constexpr int operands_of = t == Term::div_grad_b || t == Term::prelu_dx || t == Term::max_a || t == Term::max_b ||
                                    t == Term::min_a || t == Term::min_b
                                ? 2
                                : (t == Term::x_mul_p0 || t == Term::x_div_p0 || t == Term::prelu_dslope ? 1 : 0);

template <Term t>
__device__ __forceinline__ float term_of(float x, float a, float b) {
  if constexpr (t == Term::x) return x;
  else if constexpr (t == Term::neg_x) return -x;
  else if constexpr (t == Term::x_mul_p0) return x * a;
  else if constexpr (t == Term::x_div_p0) return x / a;
  else if constexpr (t == Term::prelu_dx) return a > 0.f ? x : b * x;
  else if constexpr (t == Term::prelu_dslope) return a > 0.f ? 0.f : x * a;
  else if constexpr (t == Term::max_a || t == Term::min_b) return a == b ? x * 0.5f : a < b ? 0.f : x;
  else if constexpr (t == Term::max_b || t == Term::min_a) return a == b ? x * 0.5f : a > b ? 0.f : x;
  else return __fmul_rn(-x, (a / b) / b);
}

// The operand values of W consecutive elements along b from `base` (the offset of unit b's first element minus
// b * W * sb): sb == 0, one value broadcast; W == 4 and sb == 1, a float4 (base % 4 == 0, p 16-byte aligned).
template <int W>
__device__ __forceinline__ void load_operand(const float* p, int64_t base, int64_t b, int64_t sb, float (&v)[W]) {
  if (W == 1 || sb == 0) {
    const float s = p[base + b * sb];
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = s;
  } else {
    load_units<W>(p + base, b, v);
  }
}

// x as (A, K, B) (strides (K * B, B, 1)); operand k's strides along (a, k, b) in s1, s2; P parts per output.
struct ReduceArgs {
  int64_t A = 1, K = 1, B = 1, P = 1;
  int64_t s1[3] = {}, s2[3] = {};
};

// Nothing reduced, the index space one merged dim: out[i] = term(x[i], p0[i * s1], p1[i * s2]) / divisor. W == 4:
// float4 units (x, out aligned; each operand's stride 0 or 1 and aligned), the n % 4 tail by block 0.
template <Term t, int W>
__global__ void reduce_map_flat_kernel(int64_t n, int64_t s1, int64_t s2, const float* x, const float* p0,
                                       const float* p1, float* out, double divisor) {
  constexpr int ops = operands_of<t>;
  const int64_t units = n / W;
  MONET_GRID_LOOP(u, units) {
    float v[W], a[W] = {}, b[W] = {};
    load_units<W>(x, u, v);
    if constexpr (ops >= 1) load_operand<W>(p0, 0, u, s1, a);
    if constexpr (ops >= 2) load_operand<W>(p1, 0, u, s2, b);
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = static_cast<float>(static_cast<double>(term_of<t>(v[j], a[j], b[j])) / divisor);
    store_units<W>(out, u, v);
  }
  if (W > 1 && blockIdx.x == 0 && threadIdx.x < n - units * W) {
    const int64_t i = units * W + threadIdx.x;
    const float a = ops >= 1 ? p0[i * s1] : 0.f, b = ops >= 2 ? p1[i * s2] : 0.f;
    out[i] = static_cast<float>(static_cast<double>(term_of<t>(x[i], a, b)) / divisor);
  }
}

// Nothing reduced, operands broadcast in several dims: the operands' offsets from the output index, unrolled over
// the constant kMaxDims (launch.cuh offsets_of: no per-thread copy of the geometry). I: int32_t when out_n < 2^31
// (an operand has no more elements than the output).
template <Term t, class I>
__global__ void reduce_map_dims_kernel(const __grid_constant__ ReduceGeom g, const float* x, const float* p0,
                                       const float* p1, float* out, double divisor) {
  constexpr int ops = operands_of<t>;
  MONET_GRID_LOOP(ol, g.out_n) {
    I rem = static_cast<I>(ol), o1 = 0, o2 = 0;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d >= g.kept_rank) continue;
      const I size = static_cast<I>(g.kept_size[d]);
      const I idx = rem % size;
      rem /= size;
      o1 += idx * static_cast<I>(g.kept_stride[1][d]);
      o2 += idx * static_cast<I>(g.kept_stride[2][d]);
    }
    const float a = ops >= 1 ? p0[o1] : 0.f, b = ops >= 2 ? p1[o2] : 0.f;
    out[ol] = static_cast<float>(static_cast<double>(term_of<t>(x[ol], a, b)) / divisor);
  }
}

// B == 1 ("columns": out[k] = sum over a of x[a * K + k]): block (column tile blockIdx.x, part blockIdx.y) of
// 32 columns x 8 row-threads; a thread sums rows a0 + ty, a0 + ty + 8, ... of the part in double, then the 8
// row-threads of a column are added in order: out[k] (P == 1) or partial[part * K + k].
template <Term t>
__global__ void reduce_columns_kernel(ReduceArgs r, const float* x, const float* p0, const float* p1, float* out,
                                      double* __restrict__ partial, double divisor) {
  constexpr int ops = operands_of<t>;
  __shared__ double sh[8][32];
  const int tx = static_cast<int>(threadIdx.x % 32), ty = static_cast<int>(threadIdx.x / 32);
  const int64_t k = static_cast<int64_t>(blockIdx.x) * 32 + tx, part = blockIdx.y;
  const int64_t a0 = r.A * part / r.P, a1 = r.A * (part + 1) / r.P;
  double acc = 0;
  if (k < r.K)
    for (int64_t a = a0 + ty; a < a1; a += 8) {
      const float u = ops >= 1 ? p0[a * r.s1[0] + k * r.s1[1]] : 0.f;
      const float v = ops >= 2 ? p1[a * r.s2[0] + k * r.s2[1]] : 0.f;
      acc += term_of<t>(x[a * r.K + k], u, v);
    }
  sh[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && k < r.K) {
    double total = 0;
    for (int q = 0; q < 8; ++q) total += sh[q][tx];
    if (r.P == 1) out[k] = static_cast<float>(total / divisor);
    else partial[part * r.K + k] = total;
  }
}

// Column k's P partials added in part order: 8 part-threads per column (every 8th part), then the 8 in order.
__global__ void reduce_columns_finish_kernel(int64_t K, int64_t P, const double* partial, float* out,
                                             double divisor) {
  __shared__ double sh[8][32];
  const int tx = static_cast<int>(threadIdx.x % 32), ty = static_cast<int>(threadIdx.x / 32);
  const int64_t k = static_cast<int64_t>(blockIdx.x) * 32 + tx;
  double acc = 0;
  if (k < K)
    for (int64_t p = ty; p < P; p += 8) acc += partial[p * K + k];
  sh[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && k < K) {
    double total = 0;
    for (int q = 0; q < 8; ++q) total += sh[q][tx];
    out[k] = static_cast<float>(total / divisor);
  }
}

// B > 1 ("runs"), an output's A * B terms in (a, b) order cut into P equal ranges: block q (grid-stride) sums range
// q % P of output q / P, thread t the units m0 + t, m0 + t + blockDim.x, ... (units of W floats along b), (a, b)
// carried along instead of divided out per unit; per-thread double, block_allsum's fixed tree. out[k] (P == 1)
// or partial[k * P + part].
template <Term t, int W>
__global__ void reduce_runs_kernel(ReduceArgs r, const float* x, const float* p0, const float* p1, float* out,
                                   double* __restrict__ partial, double divisor) {
  constexpr int ops = operands_of<t>;
  const int64_t Bu = r.B / W, M = r.A * Bu;
  for (int64_t q = blockIdx.x; q < r.K * r.P; q += gridDim.x) {  // block-uniform
    const int64_t k = q / r.P, part = q - k * r.P;
    const int64_t m1 = M * (part + 1) / r.P;
    double acc = 0;
    int64_t m = M * part / r.P + threadIdx.x;
    if (m < m1) {
      int64_t a = m / Bu, b = m - a * Bu;
      const int64_t qa = blockDim.x / Bu, qb = blockDim.x - qa * Bu;  // blockDim.x = qa * Bu + qb, qb < Bu
      for (; m < m1; m += blockDim.x) {
        float v[W], u[W] = {}, w[W] = {};
        load_units<W>(x, (a * r.K + k) * Bu + b, v);
        if constexpr (ops >= 1) load_operand<W>(p0, a * r.s1[0] + k * r.s1[1], b, r.s1[2], u);
        if constexpr (ops >= 2) load_operand<W>(p1, a * r.s2[0] + k * r.s2[1], b, r.s2[2], w);
#pragma unroll
        for (int j = 0; j < W; ++j) acc += term_of<t>(v[j], u[j], w[j]);
        b += qb;
        a += qa;
        if (b >= Bu) {
          b -= Bu;
          ++a;
        }
      }
    }
    acc = block_allsum(acc);
    if (threadIdx.x == 0) {
      if (r.P == 1) out[k] = static_cast<float>(acc / divisor);
      else partial[k * r.P + part] = acc;
    }
  }
}

// Runs of at most 2048 terms, no split: one warp per output (GlobalAveragePool's rows of 49), lane l the terms l,
// l + 32, ... in double, then the butterfly. A lane's first (a, b) is the same for every output.
template <Term t>
__global__ void reduce_runs_warp_kernel(ReduceArgs r, const float* x, const float* p0, const float* p1, float* out,
                                        double divisor) {
  constexpr int ops = operands_of<t>;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t M = r.A * r.B;
  const int64_t a_first = lane / r.B, b_first = lane - a_first * r.B;
  const int64_t qa = 32 / r.B, qb = 32 - qa * r.B;
  for (int64_t k = warp_index(); k < r.K; k += warp_count()) {  // warp-uniform
    double acc = 0;
    int64_t a = a_first, b = b_first;
    for (int64_t m = lane; m < M; m += 32) {
      const float u = ops >= 1 ? p0[a * r.s1[0] + k * r.s1[1] + b * r.s1[2]] : 0.f;
      const float w = ops >= 2 ? p1[a * r.s2[0] + k * r.s2[1] + b * r.s2[2]] : 0.f;
      acc += term_of<t>(x[(a * r.K + k) * r.B + b], u, w);
      b += qb;
      a += qa;
      if (b >= r.B) {
        b -= r.B;
        ++a;
      }
    }
    acc = warp_sum(acc);
    if (lane == 0) out[k] = static_cast<float>(acc / divisor);
  }
}

// Output k's P partials of the runs kernel added in part order: lanes take every 32nd, then the butterfly.
__global__ void reduce_runs_finish_kernel(int64_t K, int64_t P, const double* partial, float* out, double divisor) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t k = warp_index(); k < K; k += warp_count()) {
    double acc = 0;
    for (int64_t p = lane; p < P; p += 32) acc += partial[k * P + p];
    acc = warp_sum(acc);
    if (lane == 0) out[k] = static_cast<float>(acc / divisor);
  }
}

// The general case (reduced dims between kept ones, or operands that break the merge): offsets of output element
// o (kept dims) and of reduction index j (reduced dims) per operand, unrolled over the constant kMaxDims.
__device__ __forceinline__ void kept_offsets(const ReduceGeom& g, int64_t o, int64_t (&off)[3]) {
  off[0] = off[1] = off[2] = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d >= g.kept_rank) continue;
    const int64_t idx = o % g.kept_size[d];
    o /= g.kept_size[d];
#pragma unroll
    for (int k = 0; k < 3; ++k) off[k] += idx * g.kept_stride[k][d];
  }
}
__device__ __forceinline__ void red_offsets(const ReduceGeom& g, int64_t j, int64_t (&off)[3]) {
  off[0] = off[1] = off[2] = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d >= g.red_rank) continue;
    const int64_t idx = j % g.red_size[d];
    j /= g.red_size[d];
#pragma unroll
    for (int k = 0; k < 3; ++k) off[k] += idx * g.red_stride[k][d];
  }
}

template <Term t>
__device__ __forceinline__ float general_term(const float* x, const float* p0, const float* p1, const int64_t (&b)[3],
                                              const int64_t (&o)[3]) {
  constexpr int ops = operands_of<t>;
  return term_of<t>(x[b[0] + o[0]], ops >= 1 ? p0[b[1] + o[1]] : 0.f, ops >= 2 ? p1[b[2] + o[2]] : 0.f);
}

// One thread per output element (few elements summed into each).
template <Term t>
__global__ void reduce_thread_kernel(const __grid_constant__ ReduceGeom g, const float* x, const float* p0,
                                     const float* p1, float* out, double divisor) {
  MONET_GRID_LOOP(o, g.out_n) {
    int64_t base[3], off[3];
    kept_offsets(g, o, base);
    double acc = 0;
    for (int64_t j = 0; j < g.red_n; ++j) {
      red_offsets(g, j, off);
      acc += general_term<t>(x, p0, p1, base, off);
    }
    out[o] = static_cast<float>(acc / divisor);
  }
}

// One block per output element (many elements summed into each): strided partial sums, then block_allsum.
template <Term t>
__global__ void reduce_block_kernel(const __grid_constant__ ReduceGeom g, const float* x, const float* p0,
                                    const float* p1, float* out, double divisor) {
  for (int64_t o = blockIdx.x; o < g.out_n; o += gridDim.x) {
    int64_t base[3], off[3];
    kept_offsets(g, o, base);
    double acc = 0;
    for (int64_t j = threadIdx.x; j < g.red_n; j += blockDim.x) {
      red_offsets(g, j, off);
      acc += general_term<t>(x, p0, p1, base, off);
    }
    const double total = block_allsum(acc);
    if (threadIdx.x == 0) out[o] = static_cast<float>(total / divisor);
  }
}

// How reduce_to runs a geometry (kernels.h): pure function of the geometry and of whether workspace is given.
struct ReducePlan {
  enum class Kind { map_flat, map_dims, columns, runs, general } kind = Kind::general;
  ReduceArgs args;
};

ReducePlan plan_reduce(const ReduceGeom& g, bool may_split) {
  ReducePlan plan;
  if (g.out_n <= 0 || g.red_n <= 0) return plan;
  // The dims in x's memory order (x is contiguous, so its strides order them), with every operand's strides.
  struct Dim {
    int64_t size = 1;
    bool kept = false;
    int64_t s[3] = {};
  };
  Dim dims[2 * kMaxDims];
  int nd = 0;
  for (int i = 0, j = 0; i < g.kept_rank || j < g.red_rank;) {
    const bool kept = j >= g.red_rank || (i < g.kept_rank && g.kept_stride[0][i] > g.red_stride[0][j]);
    const int at = kept ? i++ : j++;
    Dim& d = dims[nd++];
    d.kept = kept;
    d.size = kept ? g.kept_size[at] : g.red_size[at];
    for (int k = 0; k < 3; ++k) d.s[k] = kept ? g.kept_stride[k][at] : g.red_stride[k][at];
  }
  int64_t expect = 1;
  for (int k = nd - 1; k >= 0; --k) {
    if (dims[k].s[0] != expect) return plan;  // x not contiguous: the general kernels
    expect *= dims[k].size;
  }
  // Adjacent dims of one kind merged where every operand steps through them as one (zero strides merge too).
  Dim m[2 * kMaxDims];
  int nm = 0;
  for (int k = 0; k < nd; ++k) {
    if (nm > 0 && m[nm - 1].kept == dims[k].kept) {
      bool one = true;
      for (int q = 0; q < 3; ++q) one = one && m[nm - 1].s[q] == dims[k].s[q] * dims[k].size;
      if (one) {
        m[nm - 1].size *= dims[k].size;
        for (int q = 0; q < 3; ++q) m[nm - 1].s[q] = dims[k].s[q];
        continue;
      }
    }
    m[nm++] = dims[k];
  }
  ReduceArgs& r = plan.args;
  if (g.red_n == 1) {
    plan.kind = nm <= 1 ? ReducePlan::Kind::map_flat : ReducePlan::Kind::map_dims;
    r.K = g.out_n;
    if (nm == 1) {
      r.s1[1] = m[0].s[1];
      r.s2[1] = m[0].s[2];
    }
    return plan;
  }
  int kept_at = -1, kept_count = 0;
  for (int q = 0; q < nm; ++q)
    if (m[q].kept) {
      ++kept_count;
      kept_at = q;
    }
  const auto take = [&](int at, int axis) {
    r.s1[axis] = m[at].s[1];
    r.s2[axis] = m[at].s[2];
  };
  if (kept_count == 0) {
    if (nm != 1) return plan;
    r.B = m[0].size;  // one reduced run: (1, 1, B)
    take(0, 2);
  } else {
    if (kept_count > 1 || kept_at > 1 || nm - 1 - kept_at > 1) return plan;  // not (reduced)(kept)(reduced)
    r.K = m[kept_at].size;
    take(kept_at, 1);
    if (kept_at == 1) {
      r.A = m[0].size;
      take(0, 0);
    }
    if (kept_at + 1 < nm) {
      r.B = m[kept_at + 1].size;
      take(kept_at + 1, 2);
    }
  }
  plan.kind = r.B == 1 ? ReducePlan::Kind::columns : ReducePlan::Kind::runs;
  if (may_split) {
    int64_t p;
    if (plan.kind == ReducePlan::Kind::columns) {
      const int64_t tiles = (r.K + 31) / 32, by_blocks = (1024 + tiles - 1) / tiles, by_rows = (r.A + 63) / 64;
      p = by_blocks < by_rows ? by_blocks : by_rows;
    } else {
      const int64_t by_terms = (r.A * r.B + 4095) / 4096, by_blocks = (1024 + r.K - 1) / r.K;
      p = by_terms < by_blocks ? by_terms : by_blocks;
    }
    r.P = p < 1 ? 1 : (p > 1024 ? 1024 : p);
  }
  return plan;
}

// float4 units along b for an operand: stride 0 along b, or 1 with whole float4s (a and k strides multiples of 4,
// the pointer aligned).
bool operand_wide(const float* p, const int64_t (&s)[3]) {
  return s[2] == 0 || (s[2] == 1 && s[0] % 4 == 0 && s[1] % 4 == 0 && aligned16(p));
}

unsigned capped_blocks(int64_t n) {
  return static_cast<unsigned>(n < 1 ? 1 : (n > (int64_t{1} << 30) ? int64_t{1} << 30 : n));
}

template <Term t>
void launch_reduce(const ReducePlan& plan, const ReduceGeom& g, const float* x, const float* p0, const float* p1,
                   float* out, double divisor, double* partial, cudaStream_t stream) {
  constexpr int ops = operands_of<t>;
  const ReduceArgs& r = plan.args;
  switch (plan.kind) {
    case ReducePlan::Kind::map_flat: {
      const bool wide = aligned16(x) && aligned16(out) &&
                        (ops < 1 || r.s1[1] == 0 || (r.s1[1] == 1 && aligned16(p0))) &&
                        (ops < 2 || r.s2[1] == 0 || (r.s2[1] == 1 && aligned16(p1)));
      if (wide)
        launch_kernel(reduce_map_flat_kernel<t, 4>, blocks_for(r.K / 4), kThreads, 0, stream, r.K, r.s1[1], r.s2[1], x,
                      p0, p1, out, divisor);
      else
        launch_kernel(reduce_map_flat_kernel<t, 1>, blocks_for(r.K), kThreads, 0, stream, r.K, r.s1[1], r.s2[1], x, p0,
                      p1, out, divisor);
      break;
    }
    case ReducePlan::Kind::map_dims:
      if (g.out_n < (int64_t{1} << 31))
        launch_kernel(reduce_map_dims_kernel<t, int32_t>, blocks_for(g.out_n), kThreads, 0, stream, g, x, p0, p1, out,
                      divisor);
      else
        launch_kernel(reduce_map_dims_kernel<t, int64_t>, blocks_for(g.out_n), kThreads, 0, stream, g, x, p0, p1, out,
                      divisor);
      break;
    case ReducePlan::Kind::columns: {
      const unsigned tiles = static_cast<unsigned>((r.K + 31) / 32);
      launch_kernel(reduce_columns_kernel<t>, dim3(tiles, static_cast<unsigned>(r.P)), kThreads, 0, stream, r, x, p0,
                    p1, out, partial, divisor);
      if (r.P > 1)
        launch_kernel(reduce_columns_finish_kernel, tiles, kThreads, 0, stream, r.K, r.P, partial, out, divisor);
      break;
    }
    case ReducePlan::Kind::runs: {
      if (r.P == 1 && r.A * r.B <= 2048) {
        launch_kernel(reduce_runs_warp_kernel<t>, blocks_for(r.K * 32), kThreads, 0, stream, r, x, p0, p1, out,
                      divisor);
        break;
      }
      const bool wide = r.B % 4 == 0 && aligned16(x) && (ops < 1 || operand_wide(p0, r.s1)) &&
                        (ops < 2 || operand_wide(p1, r.s2));
      const unsigned blocks = capped_blocks(r.K * r.P);
      if (wide)
        launch_kernel(reduce_runs_kernel<t, 4>, blocks, kThreads, 0, stream, r, x, p0, p1, out, partial, divisor);
      else launch_kernel(reduce_runs_kernel<t, 1>, blocks, kThreads, 0, stream, r, x, p0, p1, out, partial, divisor);
      if (r.P > 1)
        launch_kernel(reduce_runs_finish_kernel, blocks_for(r.K * 32), kThreads, 0, stream, r.K, r.P, partial, out,
                      divisor);
      break;
    }
    case ReducePlan::Kind::general:
      if (g.red_n >= 128)
        launch_kernel(reduce_block_kernel<t>, capped_blocks(g.out_n < 65535 ? g.out_n : 65535), kThreads, 0, stream, g,
                      x, p0, p1, out, divisor);
      else
        launch_kernel(reduce_thread_kernel<t>, blocks_for(g.out_n), kThreads, 0, stream, g, x, p0, p1, out, divisor);
      break;
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

// Element i is kept iff the top 53 bits of its hash, h >> 11, are at least `threshold` = ceil(ratio * 2^53): the
// same test as u = (h >> 11) / 2^53 >= ratio (both sides exact in double), without a double per element.
__device__ __forceinline__ bool dropout_keep(uint64_t key, int64_t i, uint64_t threshold) {
  const uint64_t h = splitmix64(key + (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull);
  return (h >> 11) >= threshold;
}

// W elements per thread (float4 and a 4-byte mask word where W = 4).
template <int W>
__global__ void dropout_kernel(int64_t units, const float* x, float* y, uint8_t* mask, uint64_t key,
                               uint64_t threshold, float scale) {
  MONET_GRID_LOOP(u, units) {
    float v[W];
    load_units<W>(x, u, v);
    uint8_t m[W];
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const bool keep = dropout_keep(key, u * W + j, threshold);
      m[j] = keep ? 1 : 0;
      v[j] = keep ? v[j] * scale : 0.f;
    }
    store_units<W>(y, u, v);
    if constexpr (W == 4) reinterpret_cast<uchar4*>(mask)[u] = make_uchar4(m[0], m[1], m[2], m[3]);
    else mask[u] = m[0];
  }
}

template <int W>
__global__ void dropout_grad_kernel(int64_t units, const float* dy, const uint8_t* mask, float* dx, float scale) {
  MONET_GRID_LOOP(u, units) {
    float g[W];
    load_units<W>(dy, u, g);
    uint8_t m[W];
    if constexpr (W == 4) {
      const uchar4 t = reinterpret_cast<const uchar4*>(mask)[u];
      m[0] = t.x, m[1] = t.y, m[2] = t.z, m[3] = t.w;
    } else {
      m[0] = mask[u];
    }
#pragma unroll
    for (int j = 0; j < W; ++j) g[j] = m[j] ? g[j] * scale : 0.f;
    store_units<W>(dx, u, g);
  }
}

// The multi-tensor SGD table, a kernel argument read in place (__grid_constant__: indexing it with a runtime
// index does not copy it into every thread's stack). first[i] is tensor i's first chunk, first[count] the total.
template <int Cap>
struct SgdTable {
  int count = 0;
  float lr = 0, momentum = 0;
  int32_t first[Cap + 1] = {};
  SgdTensor t[Cap] = {};
};
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12010
static_assert(sizeof(SgdTable<kSgdTable>) <= 32764, "CUDA 12.1+ kernel arguments are limited to 32764 bytes");
#else
static_assert(sizeof(SgdTable<kSgdTable>) <= 4096, "kernel arguments are limited to 4 KB before CUDA 12.1");
#endif

// PyTorch's rule, each product and sum rounded on its own (no FMA contraction): the CPU kernel's bits.
__device__ __forceinline__ void sgd_step(float& p, float g, float& buf, float lr, float momentum) {
  buf = __fadd_rn(__fmul_rn(momentum, buf), g);
  p = __fsub_rn(p, __fmul_rn(lr, buf));
}

// Block q updates chunk q - first[i] of the tensor i with first[i] <= q < first[i + 1] (a binary search, the same
// for the whole block; empty tensors have first[i] == first[i + 1] and are never chosen). float4 where the
// tensor's three arrays are 16-byte aligned (a chunk starts at a multiple of kSgdChunk, itself a multiple of 4),
// then the chunk's last n % 4 elements one by one.
template <int Cap>
__global__ void sgd_kernel(const __grid_constant__ SgdTable<Cap> tab) {
  const int32_t q = static_cast<int32_t>(blockIdx.x);
  int lo = 0, hi = tab.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tab.first[mid] <= q) lo = mid;
    else hi = mid - 1;
  }
  const SgdTensor& t = tab.t[lo];
  const int64_t start = static_cast<int64_t>(q - tab.first[lo]) * kSgdChunk;
  const int64_t end = t.n < start + kSgdChunk ? t.n : start + kSgdChunk;
  const float lr = tab.lr, momentum = tab.momentum;
  int64_t tail = start;
  const uintptr_t bits = reinterpret_cast<uintptr_t>(t.p) | reinterpret_cast<uintptr_t>(t.g) |
                         reinterpret_cast<uintptr_t>(t.buf);
  if (bits % 16 == 0) {
    float4* p4 = reinterpret_cast<float4*>(t.p);
    const float4* g4 = reinterpret_cast<const float4*>(t.g);
    float4* b4 = reinterpret_cast<float4*>(t.buf);
    const int64_t u1 = end / 4;
    for (int64_t u = start / 4 + threadIdx.x; u < u1; u += blockDim.x) {
      float4 p = p4[u], b = b4[u];
      const float4 g = g4[u];
      sgd_step(p.x, g.x, b.x, lr, momentum);
      sgd_step(p.y, g.y, b.y, lr, momentum);
      sgd_step(p.z, g.z, b.z, lr, momentum);
      sgd_step(p.w, g.w, b.w, lr, momentum);
      b4[u] = b;
      p4[u] = p;
    }
    tail = u1 * 4;
  }
  for (int64_t i = tail + threadIdx.x; i < end; i += blockDim.x) {
    float p = t.p[i], b = t.buf[i];
    sgd_step(p, t.g[i], b, lr, momentum);
    t.buf[i] = b;
    t.p[i] = p;
  }
}

// Puts batch tensors from `at` on into one table of capacity Cap (as many as fit, and while the chunk count stays
// below 2^31) and launches it; returns the first tensor not taken.
template <int Cap>
int launch_sgd_table(const SgdBatch& batch, int at, float lr, float momentum, cudaStream_t stream) {
  SgdTable<Cap> tab;
  tab.lr = lr;
  tab.momentum = momentum;
  int64_t chunks = 0;
  while (at < batch.count && tab.count < Cap) {
    const int64_t c = (batch.t[at].n + kSgdChunk - 1) / kSgdChunk;
    if (chunks + c > INT32_MAX) break;
    tab.first[tab.count] = static_cast<int32_t>(chunks);
    tab.t[tab.count++] = batch.t[at++];
    chunks += c;
  }
  tab.first[tab.count] = static_cast<int32_t>(chunks);
  if (chunks > 0) launch_kernel(sgd_kernel<Cap>, static_cast<unsigned>(chunks), kThreads, 0, stream, tab);
  return at;
}

// ----------------------------------------------------------------------------------------------- masks

// Element i of `dims` split into coordinates: its offsets in three operands (offsets_of for three; the same
// unrolled loop over kMaxDims so that the by-value arrays stay in registers).
template <class Index>
__device__ __forceinline__ void offsets3_of(const Dims& dims, const Strides& s0, const Strides& s1, const Strides& s2,
                                            Index i, Index& o0, Index& o1, Index& o2) {
  Index rem = i;
#pragma unroll
  for (int d = kMaxDims - 1; d > 0; --d) {
    if (d >= dims.rank) continue;
    const Index size = static_cast<Index>(dims.size[d]);
    const Index idx = rem % size;
    rem /= size;
    o0 += idx * static_cast<Index>(s0.s[d]);
    o1 += idx * static_cast<Index>(s1.s[d]);
    o2 += idx * static_cast<Index>(s2.s[d]);
  }
  o0 += rem * static_cast<Index>(s0.s[0]);
  o1 += rem * static_cast<Index>(s1.s[0]);
  o2 += rem * static_cast<Index>(s2.s[0]);
}

template <class C, class Index>
__global__ void where_kernel(Dims out, Strides sc, Strides sa, Strides sb, const C* __restrict__ cond, const float* a,
                             const float* b, float* y, int64_t n) {
  MONET_GRID_LOOP(i, n) {
    Index oc = 0, oa = 0, ob = 0;
    offsets3_of(out, sc, sa, sb, static_cast<Index>(i), oc, oa, ob);
    if (cond[oc] != 0) y[i] = a ? a[oa] : 0.f;
    else y[i] = b ? b[ob] : 0.f;
  }
}

template <class C>
void launch_where(const Dims& out, const Strides& sc, const C* cond, const Strides& sa, const float* a,
                  const Strides& sb, const float* b, float* y, int64_t n, cudaStream_t stream) {
  // Offsets stay below n: no broadcast operand has more elements than the output.
  if (n < (int64_t{1} << 31))
    launch_kernel(where_kernel<C, int32_t>, blocks_for(n), kThreads, 0, stream, out, sc, sa, sb, cond, a, b, y, n);
  else
    launch_kernel(where_kernel<C, int64_t>, blocks_for(n), kThreads, 0, stream, out, sc, sa, sb, cond, a, b, y, n);
}

template <Compare op, class V>
__device__ __forceinline__ bool compare_of(V a, V b) {
  if constexpr (op == Compare::eq) return a == b;
  else if constexpr (op == Compare::lt) return a < b;
  else if constexpr (op == Compare::gt) return a > b;
  else if constexpr (op == Compare::le) return a <= b;
  else if constexpr (op == Compare::land) return a != V(0) && b != V(0);
  else if constexpr (op == Compare::lor) return a != V(0) || b != V(0);
  else if constexpr (op == Compare::lxor) return (a != V(0)) != (b != V(0));
  else if constexpr (op == Compare::lnot) return a == V(0);
  else return a >= b;
}

template <Compare op, class V, class Index>
__global__ void compare_kernel(Dims out, Strides sa, Strides sb, const V* __restrict__ a, const V* __restrict__ b,
                               uint8_t* __restrict__ y, int64_t n) {
  MONET_GRID_LOOP(i, n) {
    Index oa = 0, ob = 0;
    offsets_of(out, sa, sb, static_cast<Index>(i), oa, ob);
    y[i] = compare_of<op>(a[oa], b[ob]) ? 1 : 0;
  }
}

template <Compare op, class V>
void launch_compare(const Dims& out, const Strides& sa, const void* a, const Strides& sb, const void* b, uint8_t* y,
                    int64_t n, cudaStream_t stream) {
  const V* va = static_cast<const V*>(a);
  const V* vb = static_cast<const V*>(b);
  if (n < (int64_t{1} << 31))
    launch_kernel(compare_kernel<op, V, int32_t>, blocks_for(n), kThreads, 0, stream, out, sa, sb, va, vb, y, n);
  else
    launch_kernel(compare_kernel<op, V, int64_t>, blocks_for(n), kThreads, 0, stream, out, sa, sb, va, vb, y, n);
}

template <Compare op>
void launch_compare_elem(Elem elem, const Dims& out, const Strides& sa, const void* a, const Strides& sb,
                         const void* b, uint8_t* y, int64_t n, cudaStream_t stream) {
  switch (elem) {
    case Elem::f32: return launch_compare<op, float>(out, sa, a, sb, b, y, n, stream);
    case Elem::i64: return launch_compare<op, int64_t>(out, sa, a, sb, b, y, n, stream);
    case Elem::u8: return launch_compare<op, uint8_t>(out, sa, a, sb, b, y, n, stream);
  }
}

template <class From, class To>
__global__ void cast_kernel(int64_t n, const From* __restrict__ x, To* __restrict__ y) {
  MONET_GRID_LOOP(i, n) {
    if constexpr (sizeof(To) == 1) y[i] = x[i] != From(0) ? 1 : 0;  // to a bool mask
    else y[i] = static_cast<To>(x[i]);                               // float -> int64 truncates
  }
}

template <class From>
void launch_cast(Elem to, int64_t n, const From* x, void* y, cudaStream_t stream) {
  switch (to) {
    case Elem::f32:
      launch_kernel(cast_kernel<From, float>, blocks_for(n), kThreads, 0, stream, n, x, static_cast<float*>(y));
      break;
    case Elem::i64:
      launch_kernel(cast_kernel<From, int64_t>, blocks_for(n), kThreads, 0, stream, n, x, static_cast<int64_t*>(y));
      break;
    case Elem::u8:
      launch_kernel(cast_kernel<From, uint8_t>, blocks_for(n), kThreads, 0, stream, n, x, static_cast<uint8_t*>(y));
      break;
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
  const bool wide = aligned16(x) && aligned16(y);
  const unsigned b = blocks_for(wide ? n / 4 : n);
  switch (op) {
#define MONET_CASE(name)                                                                       \
  case Unary::name:                                                                            \
    if (wide) launch_kernel(unary4_kernel<Unary::name>, b, kThreads, 0, stream, n, x, y, p0, p1);          \
    else launch_kernel(unary_kernel<Unary::name>, b, kThreads, 0, stream, n, x, y, p0, p1);               \
    break;
    MONET_CASE(relu) MONET_CASE(clip) MONET_CASE(sigmoid) MONET_CASE(hard_sigmoid) MONET_CASE(hard_swish)
    MONET_CASE(tanh) MONET_CASE(square) MONET_CASE(pow) MONET_CASE(sqrt) MONET_CASE(erf) MONET_CASE(gelu)
    MONET_CASE(neg) MONET_CASE(exp) MONET_CASE(log) MONET_CASE(reciprocal) MONET_CASE(sin) MONET_CASE(cos)
    MONET_CASE(leaky_relu) MONET_CASE(elu) MONET_CASE(softplus) MONET_CASE(mish) MONET_CASE(abs) MONET_CASE(sign)
    MONET_CASE(floor) MONET_CASE(ceil) MONET_CASE(round) MONET_CASE(tan) MONET_CASE(atan) MONET_CASE(asin)
    MONET_CASE(acos) MONET_CASE(sinh) MONET_CASE(cosh) MONET_CASE(asinh) MONET_CASE(acosh) MONET_CASE(atanh)
#undef MONET_CASE
  }
  return cudaGetLastError();
}

cudaError_t unary_grad(UnaryGrad op, int64_t n, const float* dy, const float* saved, float* dx, float p0, float p1,
                       cudaStream_t stream) {
  const bool wide = aligned16(dy) && aligned16(saved) && aligned16(dx);
  const unsigned b = blocks_for(wide ? n / 4 : n);
  switch (op) {
#define MONET_CASE(name)                                                                                    \
  case UnaryGrad::name:                                                                                     \
    if (wide) launch_kernel(unary_grad4_kernel<UnaryGrad::name>, b, kThreads, 0, stream, n, dy, saved, dx, p0, p1);   \
    else launch_kernel(unary_grad_kernel<UnaryGrad::name>, b, kThreads, 0, stream, n, dy, saved, dx, p0, p1);          \
    break;
    MONET_CASE(relu)
    MONET_CASE(clip) MONET_CASE(clip_output) MONET_CASE(sigmoid) MONET_CASE(hard_sigmoid) MONET_CASE(hard_swish)
        MONET_CASE(tanh) MONET_CASE(pow) MONET_CASE(sqrt) MONET_CASE(erf) MONET_CASE(gelu) MONET_CASE(exp)
            MONET_CASE(log) MONET_CASE(reciprocal) MONET_CASE(sin) MONET_CASE(cos) MONET_CASE(leaky_relu)
                MONET_CASE(elu) MONET_CASE(softplus) MONET_CASE(mish) MONET_CASE(abs) MONET_CASE(tan)
                    MONET_CASE(atan) MONET_CASE(asin) MONET_CASE(acos) MONET_CASE(sinh) MONET_CASE(cosh)
                        MONET_CASE(asinh) MONET_CASE(acosh) MONET_CASE(atanh)
#undef MONET_CASE
  }
  return cudaGetLastError();
}

cudaError_t relu_mask(int64_t n, const float* x, float* y, uint32_t* mask, cudaStream_t stream) {
  if (!mask) return unary(Unary::relu, n, x, y, 0.f, 0.f, stream);
  if (n % 4 == 0 && aligned16(x) && aligned16(y))
    launch_kernel(relu_mask4_kernel, blocks_for((n + 127) / 128 * 32), kThreads, 0, stream, n,
                  reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), mask);
  else
    launch_kernel(relu_mask_kernel, blocks_for((n + 31) / 32 * 32), kThreads, 0, stream, n, x, y, mask);
  return cudaGetLastError();
}

cudaError_t relu_grad_mask(int64_t n, const float* dy, const uint32_t* mask, float* dx, cudaStream_t stream) {
  if (n % 4 == 0 && aligned16(dy) && aligned16(dx))
    launch_kernel(relu_grad_mask4_kernel, blocks_for(n / 4), kThreads, 0, stream, n / 4,
                  reinterpret_cast<const float4*>(dy), mask, reinterpret_cast<float4*>(dx));
  else
    launch_kernel(relu_grad_mask_kernel, blocks_for(n), kThreads, 0, stream, n, dy, mask, dx);
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
    MONET_CASE(prelu) MONET_CASE(max) MONET_CASE(min)
#undef MONET_CASE
  }
  return cudaGetLastError();
}

int64_t reduce_to_workspace_bytes(const ReduceGeom& g) {
  const ReducePlan plan = plan_reduce(g, true);
  return plan.args.P > 1 ? plan.args.P * plan.args.K * static_cast<int64_t>(sizeof(double)) : 0;
}

cudaError_t reduce_to(Term term, const ReduceGeom& g, const float* x, const float* p0, const float* p1, float* out,
                      double divisor, double* partial, cudaStream_t stream) {
  if (g.out_n == 0) return cudaSuccess;
  const ReducePlan plan = plan_reduce(g, partial != nullptr);
  switch (term) {
#define MONET_CASE(name)                                                                        \
  case Term::name:                                                                              \
    launch_reduce<Term::name>(plan, g, x, p0, p1, out, divisor, partial, stream);               \
    break;
    MONET_CASE(x) MONET_CASE(neg_x) MONET_CASE(x_mul_p0) MONET_CASE(x_div_p0) MONET_CASE(div_grad_b)
    MONET_CASE(prelu_dx) MONET_CASE(prelu_dslope) MONET_CASE(max_a) MONET_CASE(max_b) MONET_CASE(min_a)
    MONET_CASE(min_b)
#undef MONET_CASE
  }
  return cudaGetLastError();
}

cudaError_t reduce_to(Term term, const ReduceGeom& g, const float* x, const float* p0, const float* p1, float* out,
                      double divisor, cudaStream_t stream) {
  return reduce_to(term, g, x, p0, p1, out, divisor, nullptr, stream);
}

cudaError_t dropout(int64_t n, const float* x, float* y, uint8_t* mask, uint64_t key, double ratio, float scale,
                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  // ratio in [0, 1): ratio * 2^53 is exact and below 2^53, so is its ceiling; ratio 0 keeps every element.
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(ratio * 0x1.0p53));
  if (n % 4 == 0 && aligned16(x) && aligned16(y) && reinterpret_cast<uintptr_t>(mask) % 4 == 0)
    launch_kernel(dropout_kernel<4>, blocks_for(n / 4), kThreads, 0, stream, n / 4, x, y, mask, key, threshold, scale);
  else
    launch_kernel(dropout_kernel<1>, blocks_for(n), kThreads, 0, stream, n, x, y, mask, key, threshold, scale);
  return cudaGetLastError();
}

cudaError_t dropout_grad(int64_t n, const float* dy, const uint8_t* mask, float* dx, float scale,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n % 4 == 0 && aligned16(dy) && aligned16(dx) && reinterpret_cast<uintptr_t>(mask) % 4 == 0)
    launch_kernel(dropout_grad_kernel<4>, blocks_for(n / 4), kThreads, 0, stream, n / 4, dy, mask, dx, scale);
  else
    launch_kernel(dropout_grad_kernel<1>, blocks_for(n), kThreads, 0, stream, n, dy, mask, dx, scale);
  return cudaGetLastError();
}

cudaError_t sgd_update(const SgdBatch& batch, float lr, float momentum, cudaStream_t stream) {
  int at = 0;
  while (at < batch.count) {  // one launch unless a tensor has 2^31 chunks (then none: an error)
    const int next = batch.count - at <= 32 ? launch_sgd_table<32>(batch, at, lr, momentum, stream)
                                            : launch_sgd_table<kSgdTable>(batch, at, lr, momentum, stream);
    if (next == at) return cudaErrorInvalidValue;
    at = next;
  }
  return cudaGetLastError();
}

cudaError_t where_select(const Dims& out, const Strides& sc, const void* cond, Elem cond_elem, const Strides& sa,
                         const float* a, const Strides& sb, const float* b, float* y, cudaStream_t stream) {
  const int64_t n = count_of(out);
  if (n == 0) return cudaSuccess;
  if (cond_elem == Elem::i64) launch_where(out, sc, static_cast<const int64_t*>(cond), sa, a, sb, b, y, n, stream);
  else if (cond_elem == Elem::u8) launch_where(out, sc, static_cast<const uint8_t*>(cond), sa, a, sb, b, y, n, stream);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t compare(Compare op, Elem elem, const Dims& out, const Strides& sa, const void* a, const Strides& sb,
                    const void* b, uint8_t* y, cudaStream_t stream) {
  const int64_t n = count_of(out);
  if (n == 0) return cudaSuccess;
  switch (op) {
    case Compare::eq: launch_compare_elem<Compare::eq>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::lt: launch_compare_elem<Compare::lt>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::gt: launch_compare_elem<Compare::gt>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::le: launch_compare_elem<Compare::le>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::ge: launch_compare_elem<Compare::ge>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::land: launch_compare_elem<Compare::land>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::lor: launch_compare_elem<Compare::lor>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::lxor: launch_compare_elem<Compare::lxor>(elem, out, sa, a, sb, b, y, n, stream); break;
    case Compare::lnot: launch_compare_elem<Compare::lnot>(elem, out, sa, a, sb, b, y, n, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t cast(Elem from, Elem to, int64_t n, const void* x, void* y, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case Elem::f32: launch_cast(to, n, static_cast<const float*>(x), y, stream); break;
    case Elem::i64: launch_cast(to, n, static_cast<const int64_t*>(x), y, stream); break;
    case Elem::u8: launch_cast(to, n, static_cast<const uint8_t*>(x), y, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t fill_pattern(int64_t n, float* x, uint64_t seed, cudaStream_t stream) {
  launch_kernel(fill_pattern_kernel, blocks_for(n), kThreads, 0, stream, n, x, seed);
  return cudaGetLastError();
}

}  // namespace monet::cuda
