// What other backends need from ops whose kernels first resolve attributes into a geometry or index plan
// (convolution geometry, slice ranges, pad and resize tables, gather indices, dropout ratio, clip bounds): the
// CPU's own resolution, exported from each op's folder, so that a CUDA kernel can never disagree with the CPU
// kernel about which element goes where. Each function expects attributes its op's shape rule accepted.
#pragma once

#include <algorithm>
#include <limits>
#include <string>
#include <optional>
#include <utility>
#include <vector>

#include "ops/common/im2col.h"

namespace monet::ops {

// lib/ops/conv: the geometry of Conv (and of ConvGradData / ConvGradWeight) for input shape x and weight shape w.
ConvGeom conv_geometry(const Node& node, const Shape& x, const Shape& w);
// lib/ops/conv_transpose: the adjoint conv of ConvTranspose (input Y, output X) for X shape x, weight shape w.
ConvGeom conv_transpose_geometry(const Node& node, const Shape& x, const Shape& w);

// lib/ops/slice: y[.., j, ..] = x[.., start + j * step, ..] for j < len, on every axis of x.
struct SliceSpec {
  std::vector<int64_t> start, step, len;
};
SliceSpec slice_spec(const Attrs& a, const Shape& x);

// lib/ops/pad: y index o on axis d reads x index src[d][o], or the constant `value` where that is -1.
struct PadSpec {
  Shape out;
  std::vector<std::vector<int64_t>> src;
  double value = 0;
};
PadSpec pad_spec(const Attrs& a, const Shape& x);

// lib/ops/resize: output (oh, ow) reads rows i0h/i1h with weights w0h/w1h and columns i0w/i1w with w0w/w1w
// (nearest: only i0 with weight 1).
struct ResizeSpec {
  Shape out;
  bool linear = false;
  std::vector<int64_t> i0h, i1h, i0w, i1w;
  std::vector<double> w0h, w1h, w0w, w1w;
};
ResizeSpec resize_spec(const Attrs& a, const Shape& x);

// lib/ops/gather: x seen as (outer, A, inner), indices normalised to [0, A).
struct GatherSpec {
  int64_t outer = 1, A = 1, inner = 1;
  std::vector<int64_t> index;
};
GatherSpec gather_spec(const Attrs& a, const Shape& x);
// GatherIdx: x seen as (outer, A, inner), K indices at run time.
struct GatherIdxSpec {
  int64_t outer = 1, A = 1, inner = 1, K = 1;
};
GatherIdxSpec gather_idx_spec(const Attrs& a, const Shape& x, const Shape& indices);
// lib/ops/gather_elements: the data's shape, the indices' (of the same rank) and the axis (normalised).
struct GatherElementsSpec {
  Shape x, indices;
  int axis = 0;
};
GatherElementsSpec gather_elements_spec(const Attrs& a, const Shape& x, const Shape& indices);

// lib/ops/elu: Elu's and Selu's alpha and gamma (Elu: gamma 1), with the defaults of the node's op.
struct EluScale {
  double alpha = 1.0, gamma = 1.0;
};
EluScale elu_scale(const Node& n);

// lib/ops/dropout: the ratio in effect (0 in inference mode).
double dropout_ratio(const Attrs& a);

// lib/ops/softmax: x seen as (outer, A, inner) around the softmax axis (negative axes count from the end).
struct AxisSplit {
  int64_t outer = 1, A = 1, inner = 1;
};
AxisSplit softmax_split(const Shape& x, int64_t axis);

// How one operand of an attention (Q, Kt, V, or O, and so dQ, dKt, dV, dO) lies in its stored tensor: its element
// (head e, row r, column c) is at offset(e) + r * rs + c * cs, where offset(e) adds index_k(e) * batch_stride[k]
// over the batch dims k (e's mixed-radix digits, the last dim fastest). One of rs and cs is 1 (the op's rule).
// Contiguous operands (no perm attribute) have rs = the column count, cs = 1 and offsets e * rows * cols.
struct AttentionView {
  std::vector<int64_t> batch_stride;
  int64_t rs = 1, cs = 1;
  int64_t offset(const Shape& batch, int64_t e) const {
    int64_t off = 0;
    for (size_t k = batch.size(); k-- > 0;) {
      off += e % batch[k] * batch_stride[k];
      e /= batch[k];
    }
    return off;
  }
};

// A product C (m, n) = A (m, k) B (k, n) of strided matrices (element (r, c) at r * rs + c * cs, one of rs and cs
// 1) as one row-major GEMM call: an operand with unit column stride is row-major at row stride rs, one with unit row
// stride the transpose of a row-major matrix at row stride cs; a C with unit row stride is computed as
// C^T = B^T A^T (swap: pass B's data first). A single row (a transposed column: rs = cs = 1) takes the leading
// dimension BLAS and cuBLAS require, its column count. The attention's products on either backend.
struct StridedMatrix {
  int64_t rs = 1, cs = 1;
};
struct RowMajorGemm {
  bool swap = false, ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
};
inline RowMajorGemm row_major_gemm(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b,
                                   StridedMatrix c) {
  RowMajorGemm g;
  if (c.cs != 1) {  // C^T (n, m) = B^T A^T
    g.swap = true;
    std::swap(m, n);
    const StridedMatrix at{a.cs, a.rs}, bt{b.cs, b.rs};
    a = bt;
    b = at;
    c = {c.cs, c.rs};
  }
  g.m = m, g.n = n, g.k = k;
  g.ta = a.cs != 1;
  g.tb = b.cs != 1;
  g.lda = g.ta ? a.cs : std::max(a.rs, k);
  g.ldb = g.tb ? b.cs : std::max(b.rs, n);
  g.ldc = std::max(c.rs, n);
  return g;
}

// lib/ops/attention: one fused attention as B heads (the batch dims flattened) of Q (Tq, d), Kt (d, Tk), V (Tk, dv);
// mask element (e, i, j) at mask_batch_offset[e] + i * mask_si + j * mask_sj (strides 0 where it broadcasts).
// q, kt, v, o: where each operand's elements lie (the node's q_perm, kt_perm, v_perm, o_perm).
struct AttentionGeom {
  Shape batch;
  int64_t B = 1, Tq = 1, Tk = 1, d = 1, dv = 1;
  bool has_mask = false;
  std::vector<int64_t> mask_batch_offset;
  int64_t mask_si = 0, mask_sj = 0;
  AttentionView q, kt, v, o;
  Shape o_shape;  // O's shape as stored (through o_perm)
};
AttentionGeom attention_geometry(const Node& node, const Shape& q, const Shape& kt, const Shape& v, const Shape* mask);

// lib/ops/transpose: a Transpose's perm against the input's rank (the axes reversed where it has none); throws where
// it is no permutation of the rank.
std::vector<int64_t> transpose_perm(const Attrs& a, size_t rank);

// lib/ops/matmul: whether `bias` adds one value per column of Y = A W (its last dim Y's, every other 1, rank at most
// Y's; W of rank >= 2, so that Y has columns): MatMul's rule for its optional bias input.
bool matmul_bias_fits(const Shape& bias, const Shape& y, const Shape& w);

// lib/ops/matmul: a MatMul's A read through a Transpose of its leading dims (attr a_perm, the Transpose's perm;
// the last dim stays) that swaps two blocks of them: perm = (s, ..., r-2, 0, ..., s-1, r-1) for rank r >= 3 and
// 0 < s < r-1, as x.transpose(0, 1) of a (B, T, E) batch-first input to nn.MultiheadAttention writes. Row i*Q + j
// of the product's A (P rows of Q) is row j*P + i of A as stored: P = the product of the stored dims s..r-2, Q of
// dims 0..s-1. nullopt for any other perm (or a rank below 3, or a perm of the wrong length).
struct RowSwap {
  int64_t P = 1, Q = 1;
};
std::optional<RowSwap> row_swap(const Shape& stored, const std::vector<int64_t>& perm);

// One side of a row-swapped product as blocks of rows with one stride each (the GEMMs' batch): `count` blocks of
// `rows` rows; block b, row r lies at row b * stored_step + r * stored_stride of the stored tensor and at row
// b * product_step + r * product_stride of the product's order. The blocks run over the smaller of P and Q, so
// each GEMM takes the larger as its rows.
struct RowBlocks {
  int64_t count = 1, rows = 1;
  int64_t stored_step = 0, stored_stride = 1, product_step = 0, product_stride = 1;
};
RowBlocks row_blocks(RowSwap s);

// The row blocks of a MatMul, MatMulGradA or MatMulGradB node with a_perm, from A's stored shape (MatMulGradA: its
// a_shape); nullopt for a node without one.
std::optional<RowBlocks> matmul_row_blocks(const Node& node, const Shape& stored_a);

// lib/ops/layer_norm: X seen as (rows, d) rows of the d elements normalised together (the dims from axis on).
struct LayerNormRows {
  int64_t rows = 1, d = 1;
};
LayerNormRows layer_norm_rows(const Shape& x, int64_t axis);

// lib/ops/softmax_cross_entropy: logits seen as (n, c, p) around the class axis (attribute axis, default 1).
struct CeLayout {
  int64_t n = 1, c = 1, p = 1;
};
CeLayout ce_layout(const Attrs& a, const Shape& x);

// lib/ops/linear_cross_entropy: H (rows_shape..., D) times W (D, V), or W (V, D) with trans_b, in chunks of `chunk`
// rows (attribute chunk_rows, at most R).
struct LinearCeGeom {
  Shape rows_shape;
  int64_t R = 0, D = 0, V = 0, chunk = 1;
  bool trans_b = false;
};
LinearCeGeom linear_ce_geometry(const Node& node, const Shape& h, const Shape& w);

// lib/ops/clip: (min, max), -inf / +inf where absent.
std::pair<double, double> clip_bounds(const Attrs& a);

// lib/ops/relu: the bytes of the 1-bit mask of n elements (32-bit little-endian words, bit k of word w for element
// 32 w + k, padded with zero bits to a whole word): Relu's mask, and a fused batch norm's.
int64_t relu_mask_bytes(int64_t n);

// lib/ops/batch_norm: a fused batch norm's activation (attribute activation; BatchNormActGrad carries it too).
// apply: none v; relu v > 0 ? v : 0; clip min(max(v, lo), hi) (std::max, then std::min: NaN stays NaN). The
// gradient passes where the activated output is strictly inside [lo, hi] (relu: lo = 0, hi = +inf).
struct BnActivation {
  enum Kind { none, relu, clip } kind = none;
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  template <class T>
  T apply(T v) const {
    if (kind == relu) return v > T(0) ? v : T(0);
    if (kind == clip) return std::min(std::max(v, static_cast<T>(lo)), static_cast<T>(hi));
    return v;
  }
  template <class T>
  bool passes(T y) const {
    return y > static_cast<T>(lo) && y < static_cast<T>(hi);
  }
};
// err (when given) gets why the attributes are bad ("" where they are not).
BnActivation bn_activation(const Attrs& a, std::string* err = nullptr);

}  // namespace monet::ops
