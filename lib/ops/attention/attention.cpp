// Attention: scaled dot-product attention as one node, made by lib/ir/fuse_attention from the nodes an export writes
// (MatMul -> [Mul|Div by a scalar] -> [Add mask] -> Softmax(last axis) -> MatMul):
//   S = (Q @ Kt) * scale  (or / scale with scale_divides = 1)  + mask,   P = softmax(S) along the last axis,
//   O = P @ V,   L = the log-sum-exp of each row of S (max + log sum exp(S - max))
// Q (..., Tq, d), Kt (..., d, Tk) (K already transposed, as exports write it), V (..., Tk, dv), mask (optional,
// broadcastable to (..., Tq, Tk), never differentiated: the fusion keeps a mask computed from a parameter unfused).
// The batch dims (...) of Q, Kt and V are equal. Outputs O (..., Tq, dv), P (..., Tq, Tk), L (..., Tq).
// Layouts (attributes q_perm, kt_perm, v_perm, o_perm; absent: contiguous): the node reads Q, Kt, V and writes O
// where an export stored them, canonical dim i being dim perm[i] of the stored tensor (the Transposes the fusion took
// in), with the rows or the columns innermost. AttentionGrad takes the same attributes: dO lies as O, dQ, dKt and dV
// as Q, Kt and V. P and L are always contiguous.
// P is an optional output (OpDef::optional_outputs): only AttentionGrad's `probs` implementation reads it, so where a
// schedule picks `recompute` for a layer its probabilities are never written and need not be kept.
//
// AttentionGrad(dO, Q, Kt, V, O, P, L[, mask]) -> dQ, dKt, dV, two implementations:
//   probs (the default, the materialised form): reads dO, Q, Kt, V, P:
//     dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)),  dQ = dS' Kt^T,  dKt = Q^T dS'
//     where dS' = dS * scale (or / scale): the unfused graph's MulGrad / DivGrad
//   recompute (memory-efficient / flash form): reads dO, Q, Kt, V, O, L and the mask, not P: each row of P is
//     recomputed as exp(S - L), and rowsum(dP * P) = rowsum(dO * O) (the same number, from O instead of P).
// P and L take no gradient of their own: nothing but AttentionGrad reads them (the fusion pass checks it).
//
// The CPU kernels work one batch entry (one head) at a time with that head's (Tq, Tk) scores in workspace: the CPU
// is the reference, the CUDA kernels tile (lib/engine/cuda). FLOPs per implementation differ (recompute does one
// more Tq x Tk x d product), so the op gives them per implementation (OpDef::impl_flops).
#include <algorithm>
#include <cmath>

#include "ops/common/blas.h"
#include "ops/common/broadcast.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// Implementations of AttentionGrad: 0 reads the stored probabilities P, 1 (kRecomputeImpl) recomputes them.
constexpr int kRecomputeImpl = 1;

// An operand's layout: canonical dim i (batch..., rows, cols) is dim perm[i] of the stored tensor. Absent: the
// identity. Throws an unprefixed monet::Error when perm is not a permutation of the rank or puts neither the rows nor
// the columns innermost (the products need one unit stride).
std::vector<int64_t> layout_perm(const Attrs& a, const char* name, size_t rank) {
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
  if (!a.has(name)) return perm;
  const std::vector<int64_t> given = a.ints(name);
  std::vector<int64_t> sorted = given;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != perm) fail(name, " ", shape_str(given), " is not a permutation of rank ", rank);
  const int64_t last = static_cast<int64_t>(rank) - 1;
  if (given[rank - 1] != last && given[rank - 2] != last)
    fail(name, " ", shape_str(given), " puts neither the rows nor the columns innermost");
  return given;
}

// The canonical shape of a stored tensor, and the inverse: the stored shape of a canonical one.
Shape canonical_shape(const Shape& stored, const std::vector<int64_t>& perm) {
  Shape c(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) c[i] = stored[static_cast<size_t>(perm[i])];
  return c;
}
Shape stored_shape(const Shape& canonical, const std::vector<int64_t>& perm) {
  Shape s(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) s[static_cast<size_t>(perm[i])] = canonical[i];
  return s;
}

// The view of a row-major stored tensor through perm (a dim of size 1 takes the stride that makes it unit).
AttentionView view_of(const Shape& stored, const std::vector<int64_t>& perm) {
  std::vector<int64_t> stride(stored.size(), 1);
  for (size_t k = stored.size(); k-- > 1;) stride[k - 1] = stride[k] * stored[k];
  const size_t r = perm.size();
  AttentionView v;
  for (size_t i = 0; i + 2 < r; ++i) v.batch_stride.push_back(stride[static_cast<size_t>(perm[i])]);
  v.rs = stride[static_cast<size_t>(perm[r - 2])];
  v.cs = stride[static_cast<size_t>(perm[r - 1])];
  const int64_t rows = stored[static_cast<size_t>(perm[r - 2])], cols = stored[static_cast<size_t>(perm[r - 1])];
  if (cols == 1) v.cs = 1;
  if (rows == 1 && v.cs == 1) v.rs = std::max<int64_t>(cols, 1);
  if (rows == 1 && v.cs != 1) v.rs = 1;
  return v;
}

// Throws an unprefixed monet::Error when the operands do not form an attention. q, kt, v as stored; the node's
// attributes give their layouts and O's.
AttentionGeom geometry(const Attrs& attrs, const Shape& q_stored, const Shape& kt_stored, const Shape& v_stored,
                       const Shape* mask) {
  const size_t r = q_stored.size();
  if (r < 2 || kt_stored.size() != r || v_stored.size() != r)
    fail("Q ", shape_str(q_stored), ", Kt ", shape_str(kt_stored), " and V ", shape_str(v_stored),
         " must have one rank >= 2");
  const std::vector<int64_t> qp = layout_perm(attrs, "q_perm", r), kp = layout_perm(attrs, "kt_perm", r),
                             vp = layout_perm(attrs, "v_perm", r), op = layout_perm(attrs, "o_perm", r);
  const Shape q = canonical_shape(q_stored, qp), kt = canonical_shape(kt_stored, kp), v = canonical_shape(v_stored, vp);
  AttentionGeom g;
  g.Tq = q[r - 2], g.d = q[r - 1], g.Tk = kt[r - 1], g.dv = v[r - 1];
  if (kt[r - 2] != g.d) fail("Kt ", shape_str(kt), " does not multiply Q ", shape_str(q));
  if (v[r - 2] != g.Tk) fail("V ", shape_str(v), " does not multiply the scores of Kt ", shape_str(kt));
  g.batch.assign(q.begin(), q.end() - 2);
  if (!std::equal(g.batch.begin(), g.batch.end(), kt.begin()) || !std::equal(g.batch.begin(), g.batch.end(), v.begin()))
    fail("Q ", shape_str(q), ", Kt ", shape_str(kt), " and V ", shape_str(v), " must have equal batch dimensions");
  g.B = numel(g.batch);
  g.q = view_of(q_stored, qp);
  g.kt = view_of(kt_stored, kp);
  g.v = view_of(v_stored, vp);
  Shape o = g.batch;
  o.insert(o.end(), {g.Tq, g.dv});
  g.o_shape = stored_shape(o, op);
  g.o = view_of(g.o_shape, op);
  if (mask) {
    Shape scores = g.batch;
    scores.push_back(g.Tq);
    scores.push_back(g.Tk);
    const std::optional<Shape> b = broadcast_shapes(*mask, scores);
    if (!b || *b != scores) fail("the mask ", shape_str(*mask), " does not broadcast to the scores ", shape_str(scores));
    // Element strides of the mask along (batch entry, i, j); its batch offsets per entry.
    const size_t mr = mask->size();
    g.mask_sj = mr >= 1 && (*mask)[mr - 1] != 1 ? 1 : 0;
    g.mask_si = mr >= 2 && (*mask)[mr - 2] != 1 ? (*mask)[mr - 1] : 0;
    const Shape mask_batch(mask->begin(), mask->end() - std::min<size_t>(mr, 2));
    const int64_t plane = mr >= 2 ? (*mask)[mr - 2] * (*mask)[mr - 1] : mr == 1 ? (*mask)[0] : 1;
    g.mask_batch_offset = broadcast_offsets(mask_batch, g.batch);
    for (int64_t& o : g.mask_batch_offset) o *= plane;
    g.has_mask = true;
  }
  return g;
}

AttentionGeom geometry_of(const Node& node, const Shape& q, const Shape& kt, const Shape& v, const Shape* mask) {
  try {
    return geometry(node.attrs, q, kt, v, mask);
  } catch (const Error& e) {
    fail("node '", node.name, "' (", node.op, "): ", e.what());
  }
}

// The layout attributes an AttentionGrad takes over from its Attention.
constexpr const char* kPermAttrs[] = {"q_perm", "kt_perm", "v_perm", "o_perm"};

// One head's matrix of an operand: element (r, c) at p[r * rs + c * cs], one of rs and cs 1.
template <class T>
struct MatView {
  T* p = nullptr;
  int64_t rs = 1, cs = 1;
  T at(int64_t r, int64_t c) const { return p[r * rs + c * cs]; }
};
template <class T>
MatView<T> transposed(MatView<T> m) {
  return {m.p, m.cs, m.rs};
}
template <class T>
MatView<const T> as_const(MatView<T> m) {
  return {m.p, m.rs, m.cs};
}
template <class T>
MatView<T> head(T* base, const AttentionView& v, const AttentionGeom& g, int64_t e) {
  return {base + v.offset(g.batch, e), v.rs, v.cs};
}

// C (m, n) = A (m, k) B (k, n) on BLAS, each matrix a view (row_major_gemm, ops/common/plans.h, makes the call).
// Contiguous views give the plain row-major call.
template <class T>
void gemm_views(int64_t m, int64_t n, int64_t k, MatView<const T> a, MatView<const T> b, MatView<T> c) {
  MONET_CHECK(c.cs == 1 || c.rs == 1, "attention product without a unit stride");
  const RowMajorGemm r = row_major_gemm(m, n, k, {a.rs, a.cs}, {b.rs, b.cs}, {c.rs, c.cs});
  blas_gemm(r.ta, r.tb, r.m, r.n, r.k, T(1), r.swap ? b.p : a.p, r.lda, r.swap ? a.p : b.p, r.ldb, T(0), c.p, r.ldc);
}

// The scale as the unfused graph applies it: x * scale, or x / scale.
struct Scaler {
  double scale = 1;
  bool divides = false;
  explicit Scaler(const Attrs& a) : scale(a.f("scale", 1.0)), divides(a.i("scale_divides", 0) != 0) {}
  template <class T>
  T operator()(T x) const {
    return divides ? x / static_cast<T>(scale) : x * static_cast<T>(scale);
  }
};

// ---------------------------------------------------------------------------------------------- Attention

void infer_attention(InferCtx& c) {
  c.expect_inputs(3, 4);
  if (c.num_outputs() != 3) c.fail("expects 3 outputs (O, P, L), has ", c.num_outputs());
  const double scale = c.attrs().f("scale", 1.0);
  if (!std::isfinite(scale) || scale == 0) c.fail("scale must be finite and non-zero, got ", scale);
  const AttentionGeom g =
      geometry_of(c.node(), c.shape(0), c.shape(1), c.shape(2), c.num_inputs() == 4 ? &c.shape(3) : nullptr);
  Shape p = g.batch, l = g.batch;
  p.insert(p.end(), {g.Tq, g.Tk});
  l.push_back(g.Tq);
  c.set_out(0, g.o_shape);
  c.set_out(1, p);
  c.set_out(2, l);
}

void backward_attention(GradBuilder& b) {
  if (b.grad_out(1) >= 0 || b.grad_out(2) >= 0)
    fail("node '", b.node().name, "' (Attention): its probabilities and statistics take no gradient (only "
         "AttentionGrad reads them)");
  if (b.node().inputs.size() == 4 && b.needs_grad(3))
    fail("node '", b.node().name, "' (Attention): the mask needs a gradient; such attention stays unfused");
  if (b.grad_out(0) < 0 || (!b.needs_grad(0) && !b.needs_grad(1) && !b.needs_grad(2))) return;
  std::vector<int> in = {b.grad_out(0), b.in(0), b.in(1), b.in(2), b.out(0), b.out(1), b.out(2)};
  if (b.node().inputs.size() == 4) in.push_back(b.in(3));
  Attrs a;
  a.set("scale", b.node().attrs.f("scale", 1.0));
  a.set("scale_divides", b.node().attrs.i("scale_divides", 0));
  for (const char* perm : kPermAttrs)
    if (b.node().attrs.has(perm)) a.set(perm, b.node().attrs.ints(perm));
  const std::vector<int> g = b.emit("AttentionGrad", in, a, 3);
  for (int i = 0; i < 3; ++i)
    if (b.needs_grad(i)) b.set_grad(i, g[i]);
}

// Row i of batch entry e: scores s (Tk, in place) scaled and masked; returns the row's max and sum of exp(s - max)
// with s replaced by exp(s - max) / sum, the Softmax kernel's arithmetic (lib/ops/softmax).
template <class T>
void softmax_row(const AttentionGeom& g, const Scaler& scale, const T* mask, int64_t e, int64_t i, T* s, T& max_out,
                 double& sum_out) {
  for (int64_t j = 0; j < g.Tk; ++j) {
    s[j] = scale(s[j]);
    if (mask) s[j] += mask[g.mask_batch_offset[e] + i * g.mask_si + j * g.mask_sj];
  }
  T maxval = s[0];
  for (int64_t j = 1; j < g.Tk; ++j) maxval = std::max(maxval, s[j]);
  double sum = 0;
  for (int64_t j = 0; j < g.Tk; ++j) {
    s[j] = std::exp(s[j] - maxval);
    sum += s[j];
  }
  const T inv_sum = static_cast<T>(1.0 / sum);
  for (int64_t j = 0; j < g.Tk; ++j) s[j] *= inv_sum;
  max_out = maxval;
  sum_out = sum;
}

template <class T>
void attention_cpu(const CpuCall& c) {
  const bool has_mask = c.in.size() == 4;
  const AttentionGeom g = attention_geometry(c.node, *c.in[0].shape, *c.in[1].shape, *c.in[2].shape,
                                             has_mask ? c.in[3].shape : nullptr);
  const Scaler scale(c.node.attrs);
  const T* q = c.in[0].as<T>();                    // (B, Tq, d) through g.q
  const T* kt = c.in[1].as<T>();                   // (B, d, Tk) through g.kt
  const T* v = c.in[2].as<T>();                    // (B, Tk, dv) through g.v
  const T* mask = has_mask ? c.in[3].as<T>() : nullptr;
  T* o = c.out[0].as<T>();                         // (B, Tq, dv) through g.o
  T* p = c.out[1].as<T>();                         // (B, Tq, Tk), null where no step reads it
  T* l = c.out[2].as<T>();                         // (B, Tq)
  T* s = static_cast<T*>(c.workspace);             // (Tq, Tk): one head's scores, then probabilities
  const MatView<T> sv{s, g.Tk, 1};
  for (int64_t e = 0; e < g.B; ++e) {
    gemm_views<T>(g.Tq, g.Tk, g.d, head(q, g.q, g, e), head(kt, g.kt, g, e), sv);
    for (int64_t i = 0; i < g.Tq; ++i) {
      T maxval;
      double sum;
      softmax_row(g, scale, mask, e, i, s + i * g.Tk, maxval, sum);
      l[e * g.Tq + i] = static_cast<T>(maxval + std::log(sum));
    }
    if (p) std::copy(s, s + g.Tq * g.Tk, p + e * g.Tq * g.Tk);
    gemm_views<T>(g.Tq, g.dv, g.Tk, as_const(sv), head(v, g.v, g, e), head(o, g.o, g, e));
  }
}

int64_t attention_workspace(const Graph& gr, const Node& n, int float_bytes) {
  const AttentionGeom g = attention_geometry(n, gr.values[n.inputs[0]].shape, gr.values[n.inputs[1]].shape,
                                             gr.values[n.inputs[2]].shape, nullptr);
  return g.Tq * g.Tk * float_bytes;  // (Tq, Tk)
}

// 2 B Tq Tk (d + dv) for the two products, about 5 per score for scale, mask and softmax.
double attention_flops(const Graph& gr, const Node& n) {
  const AttentionGeom g = attention_geometry(n, gr.values[n.inputs[0]].shape, gr.values[n.inputs[1]].shape,
                                             gr.values[n.inputs[2]].shape, nullptr);
  return static_cast<double>(g.B) * g.Tq * g.Tk * (2.0 * (g.d + g.dv) + 5.0);
}

// ---------------------------------------------------------------------------------------------- AttentionGrad

void infer_attention_grad(InferCtx& c) {
  c.expect_inputs(7, 8);
  if (c.num_outputs() != 3) c.fail("expects 3 outputs (dQ, dKt, dV), has ", c.num_outputs());
  const AttentionGeom g =
      geometry_of(c.node(), c.shape(1), c.shape(2), c.shape(3), c.num_inputs() == 8 ? &c.shape(7) : nullptr);
  Shape p = g.batch, l = g.batch;
  p.insert(p.end(), {g.Tq, g.Tk});
  l.push_back(g.Tq);
  const std::pair<int, const Shape*> want[] = {{0, &g.o_shape}, {4, &g.o_shape}, {5, &p}, {6, &l}};
  for (const auto& [i, s] : want)
    if (c.shape(i) != *s) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected ", shape_str(*s));
  for (int i = 0; i < 3; ++i) c.set_out(i, c.shape(i + 1));
}

template <class T>
void attention_grad_cpu(const CpuCall& c) {
  const bool has_mask = c.in.size() == 8;
  const AttentionGeom g = attention_geometry(c.node, *c.in[1].shape, *c.in[2].shape, *c.in[3].shape,
                                             has_mask ? c.in[7].shape : nullptr);
  const Scaler scale(c.node.attrs);
  const bool recompute = c.impl == kRecomputeImpl;
  const T* dout = c.in[0].as<T>();                 // (B, Tq, dv) through g.o
  const T* q = c.in[1].as<T>();                    // (B, Tq, d) through g.q
  const T* kt = c.in[2].as<T>();                   // (B, d, Tk) through g.kt
  const T* v = c.in[3].as<T>();                    // (B, Tk, dv) through g.v
  const T* o = c.in[4].as<T>();                    // (B, Tq, dv) through g.o, recompute only
  const T* probs = c.in[5].as<T>();                // (B, Tq, Tk), probs only
  const T* lse = c.in[6].as<T>();                  // (B, Tq), recompute only
  const T* mask = has_mask ? c.in[7].as<T>() : nullptr;  // recompute only
  T* dq = c.out[0].as<T>();                        // as Q
  T* dkt = c.out[1].as<T>();                       // as Kt
  T* dv = c.out[2].as<T>();                        // as V
  T* p = static_cast<T*>(c.workspace);             // (Tq, Tk): the head's probabilities (recompute)
  T* ds = p + g.Tq * g.Tk;                         // (Tq, Tk): dP, then dS
  const MatView<T> dsv{ds, g.Tk, 1};
  for (int64_t e = 0; e < g.B; ++e) {
    const MatView<const T> dout_e = head(dout, g.o, g, e), q_e = head(q, g.q, g, e), kt_e = head(kt, g.kt, g, e);
    const T* pe = p;
    if (recompute) {
      gemm_views<T>(g.Tq, g.Tk, g.d, q_e, kt_e, MatView<T>{p, g.Tk, 1});
      for (int64_t i = 0; i < g.Tq; ++i) {
        T* row = p + i * g.Tk;
        const T li = lse[e * g.Tq + i];
        for (int64_t j = 0; j < g.Tk; ++j) {
          T s = scale(row[j]);
          if (mask) s += mask[g.mask_batch_offset[e] + i * g.mask_si + j * g.mask_sj];
          row[j] = std::exp(s - li);
        }
      }
    } else {
      pe = probs + e * g.Tq * g.Tk;
    }
    const MatView<const T> pv{pe, g.Tk, 1};
    // dV = P^T dO, dP = dO V^T.
    gemm_views<T>(g.Tk, g.dv, g.Tq, transposed(pv), dout_e, head(dv, g.v, g, e));
    gemm_views<T>(g.Tq, g.Tk, g.dv, dout_e, transposed(head(v, g.v, g, e)), dsv);
    const MatView<const T> o_e = recompute ? head(o, g.o, g, e) : MatView<const T>{};
    for (int64_t i = 0; i < g.Tq; ++i) {
      const T* pr = pe + i * g.Tk;
      T* dr = ds + i * g.Tk;
      double dot = 0;  // rowsum(dP * P), or equally rowsum(dO * O)
      if (recompute) {
        for (int64_t k = 0; k < g.dv; ++k) dot += dout_e.at(i, k) * o_e.at(i, k);
      } else {
        for (int64_t j = 0; j < g.Tk; ++j) dot += dr[j] * pr[j];
      }
      for (int64_t j = 0; j < g.Tk; ++j) dr[j] = scale(pr[j] * (dr[j] - static_cast<T>(dot)));
    }
    // dQ = dS' Kt^T, dKt = Q^T dS'.
    gemm_views<T>(g.Tq, g.d, g.Tk, as_const(dsv), transposed(kt_e), head(dq, g.q, g, e));
    gemm_views<T>(g.d, g.Tk, g.Tq, transposed(q_e), as_const(dsv), head(dkt, g.kt, g, e));
  }
}

int64_t attention_grad_workspace(const Graph& gr, const Node& n, int float_bytes) {
  const AttentionGeom g = attention_geometry(n, gr.values[n.inputs[1]].shape, gr.values[n.inputs[2]].shape,
                                             gr.values[n.inputs[3]].shape, nullptr);
  return 2 * g.Tq * g.Tk * float_bytes;  // (Tq, Tk) probabilities and (Tq, Tk) dS
}

// probs: four products of 2 B Tq Tk (d or dv); recompute: one more (the scores) and exp per score.
double attention_grad_impl_flops(const Graph& gr, const Node& n, int impl) {
  const AttentionGeom g = attention_geometry(n, gr.values[n.inputs[1]].shape, gr.values[n.inputs[2]].shape,
                                             gr.values[n.inputs[3]].shape, nullptr);
  const double per_score = 4.0 * (g.d + g.dv) + 4.0 + (impl == kRecomputeImpl ? 2.0 * g.d + 3.0 : 0.0);
  return static_cast<double>(g.B) * g.Tq * g.Tk * per_score;
}

double attention_grad_flops(const Graph& gr, const Node& n) { return attention_grad_impl_flops(gr, n, 0); }

const OpDef attention = {.name = "Attention", .infer = infer_attention, .backward = backward_attention,
                         .cpu_f32 = attention_cpu<float>, .cpu_f64 = attention_cpu<double>,
                         .cpu_workspace_bytes = attention_workspace, .flops = attention_flops,
                         .optional_outputs = {1}};
// Inputs: dO 0, Q 1, Kt 2, V 3, O 4, P 5, L 6, mask 7.
const OpDef attention_grad = {.name = "AttentionGrad", .infer = infer_attention_grad,
                              .cpu_f32 = attention_grad_cpu<float>, .cpu_f64 = attention_grad_cpu<double>,
                              .cpu_workspace_bytes = attention_grad_workspace, .flops = attention_grad_flops,
                              .impls = {{"probs", 0b00101111}, {"recompute", 0b11011111}},
                              .impl_flops = attention_grad_impl_flops};

}  // namespace

// For other backends (ops/common/plans.h).
AttentionGeom attention_geometry(const Node& node, const Shape& q, const Shape& kt, const Shape& v, const Shape* mask) {
  return geometry_of(node, q, kt, v, mask);
}

extern const std::vector<const OpDef*> attention_ops;
const std::vector<const OpDef*> attention_ops = {&attention, &attention_grad};

}  // namespace monet::ops
