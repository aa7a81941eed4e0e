// Launchers of monet's own CUDA kernels (the .cu files of this folder). This header is included by nvcc (C++17)
// and by the C++20 host code, so it holds only plain structs and declarations: no monet headers, no std::vector.
// Every launcher enqueues on `stream` and returns cudaGetLastError(), which the caller checks with
// MONET_CUDA_CHECK (cuda_check.h) so that a failed launch names the calling file and line.
// All float tensors are fp32. Index math is 32-bit where every index of a launch fits (64-bit division is emulated
// on the GPU and costs several times the memory time), else 64-bit (tensors beyond 2^31 elements).
// Determinism: no kernel uses atomics. Every sum runs in an order fixed by the shapes alone (never by the GPU's SM
// count or by timing): a thread's own terms in index order, then fixed shuffle or shared-memory trees, and where a
// reduction is split over blocks, partial sums in workspace that a second pass adds in part order. Two runs give the
// same bits. Accumulation: float for Softmax's and LayerNormGrad's row sums where the row sits in one warp's
// registers (at most 32 terms per lane, then a 5-level tree) and for LayerNormGrad's per-warp column sums (a few
// rows each, their partials added in double); double wherever a thread or a partial sums an unbounded number of
// terms (LayerNorm statistics, block-per-row paths, column and channel sums, losses, reduce_to).
// Row kernels take one warp per row up to 1024 elements (the row in registers, read once, written once) and one
// block per row beyond; they load float4 where the row length is a multiple of 4 and the pointers 16-byte aligned.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace monet::cuda {

inline constexpr int kMaxDims = 8;

// A shape of up to kMaxDims dims and, for one operand, its element stride per dim (0 where it is broadcast).
struct Dims {
  int rank = 0;
  int64_t size[kMaxDims] = {};
};
struct Strides {
  int64_t s[kMaxDims] = {};
};

// ------------------------------------------------------------------------------------------ elementwise (.cu)

// y = f(x), same shape. p0, p1: clip bounds (min, max), hard_sigmoid (alpha, beta), pow exponent (p0), gelu's
// divisor (p0), leaky_relu's alpha (p0), elu's alpha and gamma (p0, p1).
enum class Unary : int { relu, clip, sigmoid, hard_sigmoid, hard_swish, tanh, square, pow, sqrt, erf, gelu,
                         neg, exp, log, reciprocal, sin, cos, leaky_relu, elu, softplus, mish, abs, sign, floor, ceil,
                         round /* a half to even */, tan, atan, asin, acos, sinh, cosh, asinh, acosh, atanh };
cudaError_t unary(Unary op, int64_t n, const float* x, float* y, float p0, float p1, cudaStream_t stream);

// dx = f(dy, saved), same shape; saved is the forward input or output as each op's backward defines. dx may be dy
// (in place), here and in relu_grad_mask.
enum class UnaryGrad : int { relu, clip, clip_output, sigmoid, hard_sigmoid, hard_swish, tanh, pow, sqrt, erf, gelu,
                             exp /* s = y */, log /* s = x */, reciprocal /* s = y */, sin /* s = x */,
                             cos /* s = x */, leaky_relu /* s = y or x */, elu /* s = x */, softplus /* s = x */,
                             mish /* s = x */, abs /* s = x */, tan, atan, asin, acos, sinh, cosh, asinh, acosh,
                             atanh /* the trigonometric ones: s = x */ };
cudaError_t unary_grad(UnaryGrad op, int64_t n, const float* dy, const float* saved, float* dx, float p0, float p1,
                       cudaStream_t stream);

// Relu with its 1-bit mask (lib/ops/relu): y = max(x, 0) and bit i % 32 of mask[i / 32] = (x > 0), the padding
// bits of the last word 0; mask null: y alone. relu_grad_mask: dx = dy where the bit is set, else 0.
cudaError_t relu_mask(int64_t n, const float* x, float* y, uint32_t* mask, cudaStream_t stream);
cudaError_t relu_grad_mask(int64_t n, const float* dy, const uint32_t* mask, float* dx, cudaStream_t stream);

// y[i] = f(a[off_a(i)], b[off_b(i)]) over the output dims `out` (numpy broadcasting through zero strides).
// copy_a: y = a (b unused); div_a_by_scalar: y = a / scalar (b unused). y may alias a (or b) when that operand is not broadcast.
enum class Binary : int { add, sub, mul, div, copy_a, div_a_by_scalar, prelu /* a > 0 ? a : b * a */,
                          max /* a > b or a NaN ? a : b */, min /* a < b or a NaN ? a : b */ };
cudaError_t broadcast_binary(Binary op, const Dims& out, const Strides& sa, const Strides& sb, const float* a,
                             const float* b, float* y, float scalar, cudaStream_t stream);

// out[o] = (sum over the elements i of `x` that reduce into o of term(x[i], p0[.], p1[.])) / divisor, summed in
// double in a fixed order (deterministic). The full index space is split into kept dims (one output element
// each) and reduced dims; stride[k][d] is the element stride of operand k (0: x, 1: p0, 2: p1) along that dim. x is
// contiguous over the full shape (reduce_geom, cuda_ops.h, builds every geometry that way).
// Plan: the dims in x's memory order, adjacent dims of one kind merged where all three operands step through them
// as one. Then
//   - nothing reduced (red_n == 1): elementwise, out[o] = term / divisor (float4 where the merged space is one dim);
//   - x as (A, K, B) with out[k] = sum over a, b (the reduced dims around at most one kept run: a full sum, rows,
//     a bias gradient, a per-channel sum): with B == 1 ("columns") blocks of 32 columns x 8 rows, threads down the
//     rows, the 8 row-threads of a column added in order; else ("runs") one warp per output when the output sums
//     at most 2048 terms and needs no split, else blocks of 256 threads over a contiguous share of the A * B terms
//     (float4 where B % 4 == 0 and aligned), a shared-memory tree;
//   - anything else: one thread or one block per output with full index math (the old kernels; correct, slow).
// Split: with `partial` (workspace), a reduction over many terms and few outputs is cut into P parts (columns:
// P = min(ceil(1024 / ceil(K / 32)), ceil(A / 64)); runs: P = min(ceil(A * B / 4096), ceil(1024 / K)); both in
// [1, 1024]), each part's double sum into partial (P * K doubles: reduce_to_workspace_bytes), then a second pass
// adds each output's P partials in part order. Without `partial` (GemmGradC) P = 1.
enum class Term : int { x, neg_x, x_mul_p0, x_div_p0, div_grad_b /* -x * ((p0 / p1) / p1) */,
                        prelu_dx /* p0 > 0 ? x : p1 * x */, prelu_dslope /* p0 > 0 ? 0 : x * p0 */,
                        // Max and Min's gradients (lib/ops/max_min): half of x where p0 == p1, else x where the
                        // operand does not lose: max_a p0 < p1, max_b p0 > p1, min_a p0 > p1, min_b p0 < p1 lose.
                        max_a, max_b, min_a, min_b };
struct ReduceGeom {
  int kept_rank = 0, red_rank = 0;
  int64_t kept_size[kMaxDims] = {}, red_size[kMaxDims] = {};
  int64_t kept_stride[3][kMaxDims] = {}, red_stride[3][kMaxDims] = {};
  int64_t out_n = 1, red_n = 1;  // output elements, elements summed into each
};
int64_t reduce_to_workspace_bytes(const ReduceGeom& g);
cudaError_t reduce_to(Term term, const ReduceGeom& g, const float* x, const float* p0, const float* p1, float* out,
                      double divisor, double* partial, cudaStream_t stream);
cudaError_t reduce_to(Term term, const ReduceGeom& g, const float* x, const float* p0, const float* p1, float* out,
                      double divisor, cudaStream_t stream);  // partial = null: never split

// Element types of the mask and integer kernels below (DType's three: fp32, int64, uint8).
enum class Elem : int { f32, i64, u8 };

// Where: y[i] = cond[oc] != 0 ? a[oa] : b[ob] over the output dims `out`, each operand at its own (broadcast)
// strides; cond holds uint8 or int64 elements (Elem::u8 / Elem::i64); a or b null reads as 0 (WhereGrad's
// masking of dy).
cudaError_t where_select(const Dims& out, const Strides& sc, const void* cond, Elem cond_elem, const Strides& sa,
                         const float* a, const Strides& sb, const float* b, float* y, cudaStream_t stream);

// Equal/Less/Greater/LessOrEqual/GreaterOrEqual: y[i] = a[oa] op b[ob] as a uint8 mask (1 where it holds; NaN
// compares false as on the CPU), a and b of one element type, broadcast through their strides over `out`.
// And, Or, Xor and Not (lor .. lnot) of two masks (u8; Not reads a alone, b may be a) take the same kernel.
enum class Compare : int { eq, lt, gt, le, ge, land, lor, lxor, lnot };
cudaError_t compare(Compare op, Elem elem, const Dims& out, const Strides& sa, const void* a, const Strides& sb,
                    const void* b, uint8_t* y, cudaStream_t stream);

// Cast of n contiguous elements: to f32 or i64 by C++ conversion (float -> int truncates), to u8 as x != 0 (a
// bool mask).
cudaError_t cast(Elem from, Elem to, int64_t n, const void* x, void* y, cudaStream_t stream);

// Dropout with the CPU's counter-based mask: keep element i iff u(key, i) >= ratio (lib/ops/dropout), where
// key = splitmix64(seed). y = x * scale where kept, else 0; mask 1/0.
cudaError_t dropout(int64_t n, const float* x, float* y, uint8_t* mask, uint64_t key, double ratio, float scale,
                    cudaStream_t stream);
cudaError_t dropout_grad(int64_t n, const float* dy, const uint8_t* mask, float* dx, float scale,
                         cudaStream_t stream);

// PyTorch's SGD with momentum in place, bit for bit as the CPU kernel: buf = momentum * buf + g; p -= lr * buf
// (each product and sum rounded separately, no FMA). One multi-tensor launch per kSgdTable tensors (so one for any
// batch the host collects): the tensors are cut into chunks of kSgdChunk elements, one block of 256 threads per
// (tensor, chunk) pair; the block finds its tensor by a binary search over the chunk prefix sums in the kernel's
// argument table (__grid_constant__, read in place). float4 loads and stores where a tensor's three arrays are
// 16-byte aligned (chunks start at multiples of 4 elements), a scalar tail in the last chunk.
// The table is a kernel argument: kSgdTable = 512 tensors is 18 KB of arguments, which needs CUDA >= 12.1 on Volta
// or newer (32 KB arguments); older toolkits keep the portable 4 KB limit with 96 tensors per launch. A batch of
// at most 32 tensors launches a 1.2 KB table instead (less to copy per launch).
struct SgdTensor {
  float* p;
  const float* g;
  float* buf;
  int64_t n;
};
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12010
inline constexpr int kSgdTable = 512;
#else
inline constexpr int kSgdTable = 96;
#endif
inline constexpr int kSgdBatch = kSgdTable;  // what the host collects before it must launch (cuda_ops.h PendingSgd)
inline constexpr int64_t kSgdChunk = 16384;
struct SgdBatch {
  int count = 0;
  SgdTensor t[kSgdBatch];
};
cudaError_t sgd_update(const SgdBatch& batch, float lr, float momentum, cudaStream_t stream);

// --------------------------------------------------------------------------------------- losses (.cu)

// Mean softmax cross-entropy of logits (N, C, P) against labels (N, P); row (n, p) is the C logits at stride P.
// A row's term log(sum exp(x - max)) + max - x[label]: exp in float, the sum and the term in double. Rows go to
// G = softmax_cross_entropy_parts(N, C, P) groups (one block each, a fixed set of rows): P == 1 and C <= 1024, a
// warp per row (8 rows per block at a time); P == 1 and C > 1024, a block per row; P > 1, a thread per row
// (neighbouring threads read neighbouring p). Each group adds its rows' terms in a fixed order into
// partial[g] (G doubles of workspace); then one block adds the G partials in a fixed tree and writes
// loss[0] = float(sum / (N*P)). A label outside [0, C) sets *bad_label (an int of workspace, zeroed here; plain
// stores of 1, no atomics).
int64_t softmax_cross_entropy_parts(int64_t N, int64_t C, int64_t P);
cudaError_t softmax_cross_entropy(int64_t N, int64_t C, int64_t P, const float* x, const int64_t* labels,
                                  double* partial, int* bad_label, float* loss, cudaStream_t stream);
// dx = dloss[0] * (softmax(x) - onehot(label)) / (N*P); dloss is a device scalar. Rows as in the loss (warp, block
// or thread per row); the sum of exponentials in double.
cudaError_t softmax_cross_entropy_grad(int64_t N, int64_t C, int64_t P, const float* dloss, const float* x,
                                       const int64_t* labels, float* dx, cudaStream_t stream);
// LinearCrossEntropy's rows (contiguous, P = 1, the same row kernels): terms[r] = row r's term as a float, partial
// (softmax_cross_entropy_parts(R, C, 1) doubles) and *bad_label as above; no mean is taken.
cudaError_t cross_entropy_rows(int64_t R, int64_t C, const float* x, const int64_t* labels, double* partial,
                               int* bad_label, float* terms, cudaStream_t stream);
// dx = (softmax(x) - onehot(label)) * dterms[r] for row r; dx may be x.
cudaError_t cross_entropy_rows_grad(int64_t R, int64_t C, const float* dterms, const float* x, const int64_t* labels,
                                    float* dx, cudaStream_t stream);

// ------------------------------------------------------------------------------------ norm and pool (.cu)

// Softmax along the middle axis of (outer, A, inner); grad: dx = y * (dy - sum(dy * y)). dx may be dy. With `log`,
// LogSoftmax: y = x - max - log(sum(exp(x - max))), grad dx = dy - exp(y) * sum(dy), on the same rows.
// inner == 1 (contiguous rows): A <= 1024, one warp per row held in registers (read once, written once; max, sum
// and dot in float by shuffle trees); A > 1024, one block of 256 threads per row, the max in float, the sum and
// the dot per thread in double, block trees; the forward reads the row three times (max, sum, write), the gradient
// twice (dot, write), the later reads mostly from L2. inner > 1: one thread per (outer, inner) column (neighbouring
// threads read neighbouring addresses), the sum and the dot in double.
cudaError_t softmax(int64_t outer, int64_t A, int64_t inner, const float* x, float* y, bool log,
                    cudaStream_t stream);
cudaError_t softmax_grad(int64_t outer, int64_t A, int64_t inner, const float* dy, const float* y, float* dx, bool log,
                         cudaStream_t stream);

// LayerNorm of X (R, D), rows of D elements: mean and invstd per row in double (two passes: the mean, then the
// centred sum of squares), then y = (x - mean) * invstd * scale + bias in float (y may be x). D <= 1024: one warp
// per row, the row in registers; D > 1024: one block per row, three passes over the row.
cudaError_t layer_norm(int64_t R, int64_t D, double epsilon, const float* x, const float* scale, const float* bias,
                       float* y, float* mean, float* invstd, cudaStream_t stream);
// LayerNormGrad: xhat from x and mean (x non-null) or from y: (y - bias) / scale (every scale non-zero);
// per row with g = dy * scale: dx = invstd * (g - mean(g) - xhat * mean(g * xhat)); dscale = sum over rows of
// dy * xhat, dbias = sum of dy. The rows go to P = layer_norm_grad_parts(R) parts (consecutive rows each,
// P = min(ceil(R / 32), 512)), and each part's column sums go to partial (2 * P * D floats of workspace:
// dbias parts, then dscale parts); a last pass adds each column's P partials in part order in double.
//   D <= 1024, D % 4 == 0, 16-byte aligned: one fused kernel, one block of 8 warps per part, a warp per row with
//     the row of dy and xhat in registers (row sums by shuffle in float, dx written from registers) and the
//     warp's column sums in registers (float), the 8 warps' added in warp order in shared memory.
//   otherwise: a column kernel (32 columns x 8 row-threads per block, per part, double) first, then one block per
//     row for dx (row sums in double).
// dx may be dy: a row's dy is read before its dx is written, and the column kernel runs before the row kernel.
int64_t layer_norm_grad_parts(int64_t R);
int64_t layer_norm_grad_workspace_bytes(int64_t R, int64_t D);
cudaError_t layer_norm_grad(int64_t R, int64_t D, const float* dy, const float* x, const float* mean, const float* y,
                            const float* bias, const float* scale, const float* invstd, float* dx, float* dscale,
                            float* dbias, float* partial, cudaStream_t stream);
// LayerNormStatGrad on X (R, D): dx = dstat/D (mean) or -dstat * invstd^3 * (x - mean) / D (invstd).
cudaError_t layer_norm_stat_grad(int64_t R, int64_t D, bool is_mean, const float* dstat, const float* x,
                                 const float* mean, const float* invstd, float* dx, cudaStream_t stream);

// BatchNormStatGrad on X (N, C, S): dx = dstat/M (mean) or -dstat * invstd^3 * (x - mean) / M (invstd).
cudaError_t batch_norm_stat_grad(int64_t N, int64_t C, int64_t S, bool is_mean, const float* dstat, const float* x,
                                 const float* mean, const float* invstd, float* dx, cudaStream_t stream);

// Per-channel sums over (N, C, S) run in two deterministic passes: each channel's N * S elements, taken in (n, s)
// order, are cut into channel_parts(N, C) = min(ceil(2048 / C), 1024) equal ranges (about 2048 blocks in all
// whatever C is; a range may cross images, so a layer of 2048 channels of 7x7 still keeps 256 threads busy), one
// block of 256 threads per range (float4 where S % 4 == 0 and aligned; per-thread double, shared-memory tree)
// writing a double into `partial` (workspace), then one warp per channel adds its parts in order (double).
int64_t channel_parts(int64_t N, int64_t C);

// A fused batch norm's activation (lib/ops/batch_norm, attribute activation): kind 0 none, 1 relu (y = v > 0 ? v : 0),
// 2 clip (y = min(max(v, lo), hi) as std::min/std::max order them: NaN stays NaN). The gradient passes where the
// activated y is strictly inside: 0 < y (relu), lo < y < hi (clip).
struct BnActivation {
  int kind = 0;
  float lo = 0, hi = 0;
};

// Output-activated BatchNormGrad (in-place-ABN form): xhat = (y - bias) / scale, per channel
//   dbias = sum(dy), dscale = sum(dy * (y - bias)) / scale,
//   dx = (dy - dbias / M - (y - bias) * dscale / (scale * M)) * invstd * scale      (M = N * S)
// The sums in double in a fixed order (partial: 2 * C * channel_parts(N, C) doubles: the sums of dy, then of
// dy * (y - bias)), then one elementwise pass for dx (float4 where S % 4 == 0 and aligned; 32-bit index math where
// N * C * S < 2^31; the per-element arithmetic in double as before).
// Every scale must be non-zero. dx may be dy (in place): the sums are complete before the dx pass starts.
cudaError_t batch_norm_grad_from_output(int64_t N, int64_t C, int64_t S, const float* dy, const float* y,
                                        const float* scale, const float* bias, const float* invstd, float* dx,
                                        float* dscale, float* dbias, double* partial, cudaStream_t stream);

// Input-activated BatchNormGrad on our kernels (the planner's algorithm kOwnAlgorithm; cuDNN's is the default):
// the output-activated form's passes with xhat = (x - mean) * invstd, so dscale = sum(dy * (x - mean)) * invstd and
// dx = (dy - dbias / M - (x - mean) * dscale * invstd / M) * invstd * scale. partial as there. dx may be dy.
cudaError_t batch_norm_grad_from_input(int64_t N, int64_t C, int64_t S, const float* dy, const float* x,
                                       const float* scale, const float* mean, const float* invstd, float* dx,
                                       float* dscale, float* dbias, double* partial, cudaStream_t stream);
// BatchNormActGrad: the input-activated form with dy gated (dy where the activation passes, else 0) in both passes:
// by act at the activated output y, or where mask's bit is set (non-null: Relu's layout); the same sums, partial and
// in-place rule.
cudaError_t batch_norm_act_grad(int64_t N, int64_t C, int64_t S, const float* dy, const float* x, const float* y,
                                const uint32_t* mask, BnActivation act, const float* scale, const float* mean,
                                const float* invstd, float* dx, float* dscale, float* dbias, double* partial,
                                cudaStream_t stream);

// BatchNormalization in training mode on our kernels (algorithm kOwnAlgorithm; cuDNN's is the default), the CPU
// kernel's rule: one pass over x for each channel's sums of d = x - K and d^2 (K: the channel's first element; in
// double, split over channel_parts(N, C) ranges and added in a fixed order), then per channel mean, the biased
// variance, invstd = 1 / sqrt(var + eps), the saved statistics, the running ones with momentum (PyTorch's rule,
// unbiased variance; skipped where running_mean is null: a recomputation) and y = x * alpha + beta with
// alpha = invstd * scale, beta = bias - mean * alpha folded in double and rounded to float; then one elementwise
// pass (float4 where S % 4 == 0 and aligned). y may be x (in place): the statistics are complete before any y is
// written. workspace: batch_norm_workspace(N, C) bytes. act: the activation applied in the elementwise pass.
cudaError_t batch_norm(int64_t N, int64_t C, int64_t S, const float* x, const float* scale, const float* bias,
                       double eps, double momentum, float* running_mean, float* running_var, float* y,
                       float* saved_mean, float* saved_invstd, void* workspace, cudaStream_t stream,
                       BnActivation act = {});
// Over n floats: y = act(y) in place where `activate` (after cuDNN's batch norm, which has no activation in NCHW
// fp32), and mask (non-null) = where act passes at the activated y, 1 bit per element in Relu's layout (one warp per
// 32-bit word). Nothing where act is none.
cudaError_t batch_norm_activate(int64_t n, float* y, BnActivation act, bool activate, uint32_t* mask,
                                cudaStream_t stream);
int64_t batch_norm_workspace(int64_t N, int64_t C);

// out[c] = sum of x (N, C, S) over n and s, in double in a fixed order (ConvGradBias; partial: C *
// channel_parts(N, C) doubles, as cuda_conv.cpp's workspace declares).
cudaError_t channel_sum(int64_t N, int64_t C, int64_t S, const float* x, float* out, double* partial,
                        cudaStream_t stream);

// 2-D pooling geometry, as lib/ops/common/pool.h resolves it.
struct Pool {
  int64_t planes = 0, H = 0, W = 0, OH = 0, OW = 0;  // planes = N * C
  int64_t kH = 1, kW = 1, sH = 1, sW = 1, dH = 1, dW = 1, padT = 0, padL = 0, padB = 0, padR = 0;
};
// Max pool: the first maximum of each window scanned row-major (NaN wins), as the CPU kernel; its tap
// (kh * kW + kw) packed into `argmax` with tap_bits bits per output element (4, 8 or 16; lib/ops/common/pool.h);
// argmax null: y alone. Where a tile fits in shared memory (max_pool_tiled: whole planes or a band of rows; nearly
// every pool of a CNN), a block copies the x its windows read into shared memory once and computes from there;
// else one thread per output (per two with 4-bit taps) reads through the cache. 3 x 3 and 2 x 2 windows run on
// kernels with the window's size compiled in (the loops unrolled, the tap's split by kW a constant's), and so do
// the gradients' (with strides 1 and 2).
cudaError_t max_pool(const Pool& p, const float* x, float* y, uint8_t* argmax, int tap_bits, cudaStream_t stream);
// Max pool backward from X: each dx element sums the dy of the windows whose argmax it is, in the CPU's (oh, ow)
// order. Tiled, a block finds its windows' argmax from X in shared memory and `argmax` is not used; else two passes,
// every window's argmax (int32 index within its plane) into `argmax` (max_pool_grad_workspace bytes), then the
// gather.
cudaError_t max_pool_grad(const Pool& p, const float* dy, const float* x, int32_t* argmax, float* dx,
                          cudaStream_t stream);
// The same from the forward's packed taps instead of X, in one pass, no workspace: tiled, a block decodes its
// windows' taps into shared memory; else each dx element decodes the taps of the windows that may contain it.
cudaError_t max_pool_grad_taps(const Pool& p, const float* dy, const uint8_t* taps, int tap_bits, float* dx,
                               cudaStream_t stream);
// Whether max_pool (grad false, with tap_bits) or a gradient (grad true; tap_bits 0: max_pool_grad, else
// max_pool_grad_taps) runs on shared-memory tiles; and the workspace max_pool_grad needs (0 where tiled).
bool max_pool_tiled(const Pool& p, int tap_bits, bool grad);
int64_t max_pool_grad_workspace(const Pool& p);
// Average pool with PyTorch's divisors (count_include_pad); grad gathers dy / divisor per dx element in order.
cudaError_t average_pool(const Pool& p, bool count_include_pad, const float* x, float* y, cudaStream_t stream);
cudaError_t average_pool_grad(const Pool& p, bool count_include_pad, const float* dy, float* dx,
                              cudaStream_t stream);

// --------------------------------------------------------------------------------------- data movement (.cu)

// dst[dst_base + sum_d i_d * dst_stride_d] = src[src_base + sum_d i_d * src_stride_d] over every index i of
// `shape`; elements of elem_bytes (1, 4 or 8). Strides may be negative (Slice with negative steps). Dims of size
// 1 dropped and mergeable dims merged, then: rows where the innermost dim is contiguous on both sides (in the
// widest unit that divides them); 32 x 32 tiles through shared memory where the destination's innermost dim is
// contiguous and another dim is the source's contiguous one, both of 8 or more (a transpose: both sides
// coalesced); else one element per thread, its coordinates divided out.
cudaError_t strided_copy(int elem_bytes, const Dims& shape, const Strides& src_stride, int64_t src_base,
                         const void* src, const Strides& dst_stride, int64_t dst_base, void* dst,
                         cudaStream_t stream);

// Gather along an axis: x (outer, A, inner) -> y (outer, K, inner) with indices idx[K] (device, in [0, A)).
cudaError_t gather(int elem_bytes, int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx,
                   const void* x, void* y, cudaStream_t stream);
// dx (outer, A, inner) = sum over k with idx[k] == a of dy (outer, K, inner), in k order (no atomics): keys[K] the
// indices sorted ascending, order[K] their positions (ascending among equal keys), both device int32; each row
// bisects keys for its own.
cudaError_t gather_grad(int64_t outer, int64_t A, int64_t K, int64_t inner, const int32_t* keys, const int32_t* order,
                        const float* dy, float* dx, cudaStream_t stream);
// GatherIdx: the same with indices idx[K] computed at run time (device int64; negative ones count from the end, one
// out of [-A, A) yields zeros: the CPU refuses it). Grad: the indices' rows sorted with their positions k (CUB's
// stable radix sort of int32 keys over the bits of A, in workspace: deterministic), then one block per dx row (outer
// o, row a; 256 columns, float4 where inner % 4 == 0 and aligned) finds the run of keys equal to a by binary search
// and adds those dy rows from 0 in k order: every dx element written once, equal to the CPU bit for bit, rows no
// index names zeroed. Workspace (gather_idx_grad_workspace, a function of A and K alone): four int32 arrays of K
// and the sort's scratch; -1 where A or K exceeds 2^31 - 2 (int32 keys, A itself among them) or CUB cannot size
// its sort.
cudaError_t gather_idx(int elem_bytes, int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx,
                       const void* x, void* y, cudaStream_t stream);
int64_t gather_idx_grad_workspace(int64_t A, int64_t K);
// GatherElements (lib/ops/gather_elements; cuda_gather_elements_kernels.cu): y of the indices' shape `out` reads x
// (row-major strides x_strides) at each element's coordinates, the axis' one replaced by its index (negative ones
// count from the end; one outside [-A, A) reads 0). Grad: dx (dx_numel elements) zeroed, then each column of the
// indices (all coordinates but the axis') adds its dy elements in the axis' order: no atomics, the CPU's sum bit for
// bit; an index outside [-A, A) adds nothing.
cudaError_t gather_elements(Dims out, Strides x_strides, int axis, int64_t A, const int64_t* idx, const float* x,
                            float* y, cudaStream_t stream);
cudaError_t gather_elements_grad(Dims out, Strides x_strides, int axis, int64_t A, const int64_t* idx,
                                 const float* dy, float* dx, int64_t dx_numel, cudaStream_t stream);
cudaError_t gather_idx_grad(int64_t outer, int64_t A, int64_t K, int64_t inner, const int64_t* idx, const float* dy,
                            float* dx, void* workspace, int64_t workspace_bytes, cudaStream_t stream);

// Pad: y index o_d on axis d reads x index table[axis_offset.s[d] + o_d] (-1: the constant). x has shape x_dims
// (contiguous), y has shape y_dims.
cudaError_t pad(const Dims& x_dims, const Dims& y_dims, const int64_t* table, const Strides& axis_offset,
                float value, const float* x, float* y, cudaStream_t stream);
// PadGrad: dx element i gathers every dy element that read it; per axis d the readers of x index i are
// readers[start[d][i] .. start[d][i+1]) (CSR tables in `csr`, offsets given per axis), visited in dy order.
struct CsrAxes {
  int64_t start_offset[kMaxDims] = {};   // where axis d's start[] (x_len + 1 entries) begins in the table
  int64_t entry_offset[kMaxDims] = {};   // where axis d's reader entries begin
};
cudaError_t pad_grad(const Dims& x_dims, const Dims& y_dims, const int64_t* csr, const CsrAxes& axes,
                     const float* dy, float* dx, cudaStream_t stream);

// Resize (N*C planes of H x W -> OH x OW): output (oh, ow) reads rows i0h/i1h with weights w0h/w1h and columns
// likewise (tables in device memory). linear = false: nearest (i0, weight 1). Both directions a row at a time: a
// block per output (dx) row, its threads over the columns, no division per element (cuda_resize_kernels.cu).
struct ResizeTables {
  const int64_t* i0h; const int64_t* i1h; const double* w0h; const double* w1h;  // (OH)
  const int64_t* i0w; const int64_t* i1w; const double* w0w; const double* w1w;  // (OW)
};
cudaError_t resize(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, bool linear, const ResizeTables& t,
                   const float* x, float* y, cudaStream_t stream);
// ResizeGrad: per axis, input index i is read by entries [start[i], start[i+1]) of (output index, weight) pairs.
struct ResizeGradTables {
  const int64_t* start_h; const int64_t* out_h; const double* weight_h;  // start (H + 1), entries
  const int64_t* start_w; const int64_t* out_w; const double* weight_w;  // start (W + 1), entries
};
cudaError_t resize_grad(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, const ResizeGradTables& t,
                        const float* dy, float* dx, cudaStream_t stream);
// Nearest upsampling by whole factors (output (oh, ow) of a plane reads input (oh / fh, ow / fw)), without tables:
// x is `rows` (N*C*H) rows of W floats, y rows * fh rows of W * fw. Its gradient sums each input's fh x fw readers
// in the order resize_grad adds them (the same bits).
cudaError_t resize_nearest_up(int64_t rows, int64_t W, int fh, int fw, const float* x, float* y, cudaStream_t stream);
cudaError_t resize_nearest_up_grad(int64_t rows, int64_t W, int fh, int fw, const float* dy, float* dx,
                                   cudaStream_t stream);

// Fills n floats with a deterministic pseudo-random pattern in [-1, 1) (profiling inputs).
cudaError_t fill_pattern(int64_t n, float* x, uint64_t seed, cudaStream_t stream);


// ---------------------------------------------------------------------- ReduceMax, CumSum, Trilu (ops of issue 38)

// ReduceMax (cuda_norm_pool_kernels.cu): y[o] = the maximum of the x elements that reduce into o, in the geometry
// reduce_geom(x, kept shape) builds (x contiguous, y in kept order); a NaN propagates. One thread per output, its
// elements in index order: exact, as the CPU.
cudaError_t reduce_max(const ReduceGeom& g, const float* x, float* y, cudaStream_t stream);
// ReduceMaxGrad: per output o, the t elements of x equal to y[o] get dy[o] / t (split evenly among ties, as
// torch.amax), the others 0. One thread per output, two passes over its elements.
cudaError_t reduce_max_grad(const ReduceGeom& g, const float* dy, const float* x, const float* y, float* dx,
                            cudaStream_t stream);
// CumSum along the middle axis of (outer, A, inner) (cuda_norm_pool_kernels.cu): one thread per (outer, inner)
// column, the running sum in double in the CPU's order (bit for bit). y may be x.
cudaError_t cum_sum(int64_t outer, int64_t A, int64_t inner, bool exclusive, bool reverse, const float* x, float* y,
                    cudaStream_t stream);
// Trilu on (batch, R, C) (cuda_shape_kernels.cu): y = x where j - i >= k (upper) or j - i <= k (lower), else 0.
// y may be x.
cudaError_t trilu(int64_t batch, int64_t R, int64_t C, int64_t k, bool upper, const float* x, float* y,
                  cudaStream_t stream);

// `passes` read-modify-write passes over a[0..n) (n a multiple of 4): device memory kept busy while the host link
// is timed beside it (host_link.cu).
cudaError_t stream_through(float* a, int64_t n, int passes, cudaStream_t stream);

}  // namespace monet::cuda
