// LinearCrossEntropy: a language model's head and its loss as one node, made by build_training_graph
// (lib/train) from the output MatMul the cross-entropy reads:
//   Z = H W (or H W^T with trans_b = 1) [+ B],   losses[r] = log sum_v exp(Z[r, v]) - Z[r, labels[r]]
// H (..., D), W (D, V) (trans_b: (V, D)), labels (...) int64 in [0, V), B (optional: the MatMul's bias, V values,
// shape (V) or (1, ..., 1, V); each row of Z starts as B and the product is added, as MatMul does). Outputs: losses (...) (one term per row;
// the loss node takes their mean) and Z (..., V), the logits, an optional output (OpDef::optional_outputs): only
// LinearCrossEntropyGrad's `logits` implementation reads them. The rows go through in chunks of chunk_rows
// (attribute): a chunk's logits are made in a workspace of chunk_rows x V and copied to Z where Z is written, so
// that where no step reads the logits the forward pass holds one chunk of them, not (rows x V), and every product
// is the same call whether Z is written or not.
//
// LinearCrossEntropyGrad(dlosses, H, W, labels, Z[, B]) -> dH, dW[, dB], chunk by chunk:
//   dZ_c = (softmax(Z_c) - onehot(labels_c)) * dlosses_c (per row),  dH_c = dZ_c W^T,  dW += H_c^T dZ_c,
//   dB += the column sums of dZ_c
// (with trans_b, dW = dZ^T H in W's layout), two implementations:
//   logits (the default, the materialised form): reads Z, one chunk at a time into the workspace;
//   recompute: Z_c = H_c W [+ B] again for each chunk (reads B, not Z), so that the logits need never be kept.
// The chunks are taken in order, dW accumulated in that order: the same bits on every run, and the same from both
// implementations (a chunk's recomputed logits are the forward's product again, the same call).
#include <algorithm>
#include <cmath>

#include "ops/common/blas.h"
#include "ops/common/cross_entropy.h"
#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

constexpr int kLogitsImpl = 0, kRecomputeImpl = 1;

// Throws an unprefixed monet::Error when the operands are not a head and its labels.
LinearCeGeom geometry(const Attrs& a, const Shape& h, const Shape& w, const Shape* labels, const Shape* bias) {
  if (h.size() < 2) fail("H ", shape_str(h), " needs rank >= 2 (..., D)");
  if (w.size() != 2) fail("W ", shape_str(w), " must have rank 2");
  LinearCeGeom g;
  g.trans_b = a.i("trans_b", 0) != 0;
  g.D = h.back();
  g.V = g.trans_b ? w[0] : w[1];
  if ((g.trans_b ? w[1] : w[0]) != g.D)
    fail("W ", shape_str(w), (g.trans_b ? " (trans_b)" : ""), " does not multiply H ", shape_str(h));
  g.rows_shape.assign(h.begin(), h.end() - 1);
  g.R = numel(g.rows_shape);
  g.chunk = a.i("chunk_rows", 0);
  if (g.chunk < 1) fail("chunk_rows must be >= 1, got ", g.chunk);
  g.chunk = std::min(g.chunk, std::max<int64_t>(g.R, 1));
  if (labels && *labels != g.rows_shape)
    fail("labels ", shape_str(*labels), " must have H's rows ", shape_str(g.rows_shape));
  if (bias) {
    Shape z = g.rows_shape;
    z.push_back(g.V);
    if (!matmul_bias_fits(*bias, z, w)) fail("bias ", shape_str(*bias), " is not one value per class of ", g.V);
  }
  return g;
}

LinearCeGeom geometry_of(const Node& n, const Shape& h, const Shape& w, const Shape* labels,
                         const Shape* bias = nullptr) {
  try {
    return geometry(n.attrs, h, w, labels, bias);
  } catch (const Error& e) {
    fail("node '", n.name, "' (", n.op, "): ", e.what());
  }
}

// ---------------------------------------------------------------------------------------------- forward

void infer_lce(InferCtx& c) {
  c.expect_inputs(3, 4);
  if (c.num_outputs() != 2) c.fail("expects 2 outputs (losses, logits), has ", c.num_outputs());
  if (c.in(2).dtype != DType::i64) c.fail("labels must be int64, got ", dtype_name(c.in(2).dtype));
  const LinearCeGeom g =
      geometry_of(c.node(), c.shape(0), c.shape(1), &c.shape(2), c.num_inputs() == 4 ? &c.shape(3) : nullptr);
  Shape z = g.rows_shape;
  z.push_back(g.V);
  c.set_out(0, g.rows_shape);
  c.set_out(1, z);
}

void backward_lce(GradBuilder& b) {
  if (b.grad_out(1) >= 0)
    fail("node '", b.node().name, "' (LinearCrossEntropy): its logits take no gradient (only "
         "LinearCrossEntropyGrad reads them)");
  const bool bias = b.node().inputs.size() == 4;
  if (b.grad_out(0) < 0 || (!b.needs_grad(0) && !b.needs_grad(1) && !(bias && b.needs_grad(3)))) return;
  std::vector<int> in = {b.grad_out(0), b.in(0), b.in(1), b.in(2), b.out(1)};
  if (bias) in.push_back(b.in(3));
  const std::vector<int> g = b.emit("LinearCrossEntropyGrad", in, b.node().attrs, bias ? 3 : 2);
  for (int i = 0; i < 2; ++i)
    if (b.needs_grad(i)) b.set_grad(i, g[i]);
  if (bias && b.needs_grad(3)) b.set_grad(3, g[2]);
}

int64_t checked_label(const int64_t* labels, int64_t r, int64_t classes) {
  return ops::checked_label("LinearCrossEntropy", labels, r, classes);
}

// Z_c (rows, V) = H_c W [+ bias] for rows [r0, r0 + rows): with a bias, each row starts as it (MatMul's order).
template <class T>
void chunk_logits(const LinearCeGeom& g, const T* h, const T* w, const T* bias, int64_t r0, int64_t rows, T* z) {
  if (bias)
    for (int64_t r = 0; r < rows; ++r) std::copy(bias, bias + g.V, z + r * g.V);
  blas_gemm(false, g.trans_b, rows, g.V, g.D, T(1), h + r0 * g.D, g.D, w, g.trans_b ? g.D : g.V, T(bias ? 1 : 0), z,
            g.V);
}

template <class T>
void lce_cpu(const CpuCall& c) {
  const LinearCeGeom g = linear_ce_geometry(c.node, *c.in[0].shape, *c.in[1].shape);
  const T* h = c.in[0].as<T>();
  const T* w = c.in[1].as<T>();
  const int64_t* y = c.in[2].as<int64_t>();
  const T* bias = c.in.size() == 4 ? c.in[3].as<T>() : nullptr;
  T* losses = c.out[0].as<T>();
  T* logits = c.out[1].as<T>();  // null where no step reads them
  for (int64_t r0 = 0; r0 < g.R; r0 += g.chunk) {
    const int64_t rows = std::min(g.chunk, g.R - r0);
    T* z = static_cast<T*>(c.workspace);
    chunk_logits(g, h, w, bias, r0, rows, z);
    if (logits) std::copy(z, z + rows * g.V, logits + r0 * g.V);
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = z + i * g.V;
      double mx, sum;
      softmax_row_stats(row, g.V, int64_t{1}, mx, sum);
      losses[r0 + i] = static_cast<T>(std::log(sum) + mx - row[checked_label(y, r0 + i, g.V)]);
    }
  }
}

// One chunk of logits.
int64_t lce_workspace(const Graph& gr, const Node& n, int float_bytes) {
  const LinearCeGeom g = linear_ce_geometry(n, gr.values[n.inputs[0]].shape, gr.values[n.inputs[1]].shape);
  return g.chunk * g.V * float_bytes;
}

// The product (2 R D V) and about 4 per logit for max, exp, sum (and the bias's add).
double lce_flops(const Graph& gr, const Node& n) {
  const LinearCeGeom g = linear_ce_geometry(n, gr.values[n.inputs[0]].shape, gr.values[n.inputs[1]].shape);
  return static_cast<double>(g.R) * g.V * (2.0 * g.D + 4.0);
}

// ---------------------------------------------------------------------------------------------- backward

void infer_lce_grad(InferCtx& c) {
  c.expect_inputs(5, 6);
  const bool bias = c.num_inputs() == 6;
  if (c.num_outputs() != (bias ? 3 : 2))
    c.fail("expects ", bias ? "3 outputs (dH, dW, dB)" : "2 outputs (dH, dW)", ", has ", c.num_outputs());
  const LinearCeGeom g = geometry_of(c.node(), c.shape(1), c.shape(2), &c.shape(3), bias ? &c.shape(5) : nullptr);
  Shape z = g.rows_shape;
  z.push_back(g.V);
  if (c.shape(0) != g.rows_shape) c.fail("dlosses ", shape_str(c.shape(0)), " must be ", shape_str(g.rows_shape));
  if (c.shape(4) != z) c.fail("logits ", shape_str(c.shape(4)), " must be ", shape_str(z));
  c.set_out(0, c.shape(1));
  c.set_out(1, c.shape(2));
  if (bias) c.set_out(2, c.shape(5));
}

// The gradient's workspace: a chunk of logits, then (with a bias) V doubles of column sums, 8-byte aligned.
int64_t sums_offset(const LinearCeGeom& g, int64_t float_bytes) { return (g.chunk * g.V * float_bytes + 7) / 8 * 8; }

template <class T>
void lce_grad_cpu(const CpuCall& c) {
  const LinearCeGeom g = linear_ce_geometry(c.node, *c.in[1].shape, *c.in[2].shape);
  const T* dl = c.in[0].as<T>();
  const T* h = c.in[1].as<T>();
  const T* w = c.in[2].as<T>();
  const int64_t* y = c.in[3].as<int64_t>();
  const T* logits = c.in[4].as<T>();  // the logits implementation only
  const bool has_bias = c.in.size() == 6;
  const T* bias = has_bias ? c.in[5].as<T>() : nullptr;  // the recompute implementation only
  T* dh = c.out[0].as<T>();
  T* dw = c.out[1].as<T>();
  T* db = has_bias ? c.out[2].as<T>() : nullptr;
  T* dz = static_cast<T*>(c.workspace);  // (chunk, V)
  double* db_sum = reinterpret_cast<double*>(static_cast<char*>(c.workspace) + sums_offset(g, sizeof(T)));
  if (db) std::fill(db_sum, db_sum + g.V, 0.0);
  const bool recompute = c.impl == kRecomputeImpl;
  for (int64_t r0 = 0; r0 < g.R; r0 += g.chunk) {
    const int64_t rows = std::min(g.chunk, g.R - r0);
    if (recompute)
      chunk_logits(g, h, w, bias, r0, rows, dz);
    else
      std::copy(logits + r0 * g.V, logits + (r0 + rows) * g.V, dz);
    for (int64_t i = 0; i < rows; ++i) {
      T* row = dz + i * g.V;
      double mx, sum;
      softmax_row_stats(row, g.V, int64_t{1}, mx, sum);
      const int64_t label = checked_label(y, r0 + i, g.V);
      const double scale = static_cast<double>(dl[r0 + i]);
      for (int64_t k = 0; k < g.V; ++k)
        row[k] = static_cast<T>((std::exp(row[k] - mx) / sum - (k == label ? 1.0 : 0.0)) * scale);
      if (db)
        for (int64_t k = 0; k < g.V; ++k) db_sum[k] += row[k];
    }
    // dH_c (rows, D) = dZ_c (rows, V) op(W)^T; dW (+)= H_c^T dZ_c (D, V), or dZ_c^T H_c (V, D) with trans_b.
    blas_gemm(false, !g.trans_b, rows, g.D, g.V, T(1), dz, g.V, w, g.trans_b ? g.D : g.V, T(0), dh + r0 * g.D, g.D);
    const T beta = r0 == 0 ? T(0) : T(1);
    if (g.trans_b)
      blas_gemm(true, false, g.V, g.D, rows, T(1), dz, g.V, h + r0 * g.D, g.D, beta, dw, g.D);
    else
      blas_gemm(true, false, g.D, g.V, rows, T(1), h + r0 * g.D, g.D, dz, g.V, beta, dw, g.V);
  }
  if (g.R == 0) std::fill(dw, dw + g.D * g.V, T(0));
  if (db)
    for (int64_t k = 0; k < g.V; ++k) db[k] = static_cast<T>(db_sum[k]);
}

int64_t lce_grad_workspace(const Graph& gr, const Node& n, int float_bytes) {
  const LinearCeGeom g = linear_ce_geometry(n, gr.values[n.inputs[1]].shape, gr.values[n.inputs[2]].shape);
  return sums_offset(g, float_bytes) + (n.inputs.size() == 6 ? g.V * 8 : 0);
}

// logits: two products (4 R D V) and about 6 per logit; recompute: the forward product again.
double lce_grad_impl_flops(const Graph& gr, const Node& n, int impl) {
  const LinearCeGeom g = linear_ce_geometry(n, gr.values[n.inputs[1]].shape, gr.values[n.inputs[2]].shape);
  return static_cast<double>(g.R) * g.V * ((impl == kRecomputeImpl ? 6.0 : 4.0) * g.D + 6.0);
}

double lce_grad_flops(const Graph& gr, const Node& n) { return lce_grad_impl_flops(gr, n, kLogitsImpl); }

const OpDef lce = {.name = "LinearCrossEntropy", .infer = infer_lce, .backward = backward_lce,
                   .cpu_f32 = lce_cpu<float>, .cpu_f64 = lce_cpu<double>, .cpu_workspace_bytes = lce_workspace,
                   .flops = lce_flops, .optional_outputs = {1}};
// Inputs: dlosses 0, H 1, W 2, labels 3, logits 4, bias 5 (optional).
const OpDef lce_grad = {.name = "LinearCrossEntropyGrad", .infer = infer_lce_grad,
                        .cpu_f32 = lce_grad_cpu<float>, .cpu_f64 = lce_grad_cpu<double>,
                        .cpu_workspace_bytes = lce_grad_workspace, .flops = lce_grad_flops,
                        .impls = {{"logits", 0b011111}, {"recompute", 0b101111}},
                        .impl_flops = lce_grad_impl_flops};

}  // namespace

LinearCeGeom linear_ce_geometry(const Node& node, const Shape& h, const Shape& w) {
  return geometry_of(node, h, w, nullptr);
}

extern const std::vector<const OpDef*> linear_cross_entropy_ops;
const std::vector<const OpDef*> linear_cross_entropy_ops = {&lce, &lce_grad};

}  // namespace monet::ops
