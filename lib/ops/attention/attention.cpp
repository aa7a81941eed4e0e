// Attention: scaled dot-product attention as one node, made by lib/ir/fuse_attention from the nodes an export writes
// (MatMul -> [Mul|Div by a scalar] -> [Add mask] -> Softmax(last axis) -> MatMul):
//   S = (Q @ Kt) * scale  (or / scale with scale_divides = 1)  + mask,   P = softmax(S) along the last axis,
//   O = P @ V,   L = the log-sum-exp of each row of S (max + log sum exp(S - max))
// Q (..., Tq, d), Kt (..., d, Tk) (K already transposed, as exports write it), V (..., Tk, dv), mask (optional,
// broadcastable to (..., Tq, Tk), never differentiated: the fusion keeps a mask computed from a parameter unfused).
// The batch dims (...) of Q, Kt and V are equal. Outputs O (..., Tq, dv), P (..., Tq, Tk), L (..., Tq).
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

constexpr int kProbsImpl = 0, kRecomputeImpl = 1;

// Throws an unprefixed monet::Error when the operands do not form an attention.
AttentionGeom geometry(const Shape& q, const Shape& kt, const Shape& v, const Shape* mask) {
  if (q.size() < 2 || kt.size() != q.size() || v.size() != q.size())
    fail("Q ", shape_str(q), ", Kt ", shape_str(kt), " and V ", shape_str(v), " must have one rank >= 2");
  const size_t r = q.size();
  AttentionGeom g;
  g.Tq = q[r - 2], g.d = q[r - 1], g.Tk = kt[r - 1], g.dv = v[r - 1];
  if (kt[r - 2] != g.d) fail("Kt ", shape_str(kt), " does not multiply Q ", shape_str(q));
  if (v[r - 2] != g.Tk) fail("V ", shape_str(v), " does not multiply the scores of Kt ", shape_str(kt));
  g.batch.assign(q.begin(), q.end() - 2);
  if (!std::equal(g.batch.begin(), g.batch.end(), kt.begin()) || !std::equal(g.batch.begin(), g.batch.end(), v.begin()))
    fail("Q ", shape_str(q), ", Kt ", shape_str(kt), " and V ", shape_str(v), " must have equal batch dimensions");
  g.B = numel(g.batch);
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
    return geometry(q, kt, v, mask);
  } catch (const Error& e) {
    fail("node '", node.name, "' (", node.op, "): ", e.what());
  }
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
  Shape o = g.batch, p = g.batch, l = g.batch;
  o.insert(o.end(), {g.Tq, g.dv});
  p.insert(p.end(), {g.Tq, g.Tk});
  l.push_back(g.Tq);
  c.set_out(0, o);
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
  const T* q = c.in[0].as<T>();                    // (B, Tq, d)
  const T* kt = c.in[1].as<T>();                   // (B, d, Tk)
  const T* v = c.in[2].as<T>();                    // (B, Tk, dv)
  const T* mask = has_mask ? c.in[3].as<T>() : nullptr;
  T* o = c.out[0].as<T>();                         // (B, Tq, dv)
  T* p = c.out[1].as<T>();                         // (B, Tq, Tk), null where no step reads it
  T* l = c.out[2].as<T>();                         // (B, Tq)
  T* s = static_cast<T*>(c.workspace);             // (Tq, Tk): one head's scores, then probabilities
  for (int64_t e = 0; e < g.B; ++e) {
    blas_gemm(false, false, g.Tq, g.Tk, g.d, T(1), q + e * g.Tq * g.d, g.d, kt + e * g.d * g.Tk, g.Tk, T(0), s, g.Tk);
    for (int64_t i = 0; i < g.Tq; ++i) {
      T maxval;
      double sum;
      softmax_row(g, scale, mask, e, i, s + i * g.Tk, maxval, sum);
      l[e * g.Tq + i] = static_cast<T>(maxval + std::log(sum));
    }
    if (p) std::copy(s, s + g.Tq * g.Tk, p + e * g.Tq * g.Tk);
    blas_gemm(false, false, g.Tq, g.dv, g.Tk, T(1), s, g.Tk, v + e * g.Tk * g.dv, g.dv, T(0), o + e * g.Tq * g.dv,
              g.dv);
  }
}

int64_t attention_workspace(const Graph& gr, const Node& n, int float_bytes) {
  const Shape& q = gr.values[n.inputs[0]].shape;
  const Shape& kt = gr.values[n.inputs[1]].shape;
  return q[q.size() - 2] * kt.back() * float_bytes;  // (Tq, Tk)
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
  Shape o = g.batch, p = g.batch, l = g.batch;
  o.insert(o.end(), {g.Tq, g.dv});
  p.insert(p.end(), {g.Tq, g.Tk});
  l.push_back(g.Tq);
  const std::pair<int, const Shape*> want[] = {{0, &o}, {4, &o}, {5, &p}, {6, &l}};
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
  const T* dout = c.in[0].as<T>();                 // (B, Tq, dv)
  const T* q = c.in[1].as<T>();                    // (B, Tq, d)
  const T* kt = c.in[2].as<T>();                   // (B, d, Tk)
  const T* v = c.in[3].as<T>();                    // (B, Tk, dv)
  const T* o = c.in[4].as<T>();                    // (B, Tq, dv), recompute only
  const T* probs = c.in[5].as<T>();                // (B, Tq, Tk), probs only
  const T* lse = c.in[6].as<T>();                  // (B, Tq), recompute only
  const T* mask = has_mask ? c.in[7].as<T>() : nullptr;  // recompute only
  T* dq = c.out[0].as<T>();                        // (B, Tq, d)
  T* dkt = c.out[1].as<T>();                       // (B, d, Tk)
  T* dv = c.out[2].as<T>();                        // (B, Tk, dv)
  T* p = static_cast<T*>(c.workspace);             // (Tq, Tk): the head's probabilities (recompute)
  T* ds = p + g.Tq * g.Tk;                         // (Tq, Tk): dP, then dS
  for (int64_t e = 0; e < g.B; ++e) {
    const T* dout_e = dout + e * g.Tq * g.dv;
    const T* q_e = q + e * g.Tq * g.d;
    const T* kt_e = kt + e * g.d * g.Tk;
    const T* pe = p;
    if (recompute) {
      blas_gemm(false, false, g.Tq, g.Tk, g.d, T(1), q_e, g.d, kt_e, g.Tk, T(0), p, g.Tk);
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
    // dV = P^T dO, dP = dO V^T.
    blas_gemm(true, false, g.Tk, g.dv, g.Tq, T(1), pe, g.Tk, dout_e, g.dv, T(0), dv + e * g.Tk * g.dv, g.dv);
    blas_gemm(false, true, g.Tq, g.Tk, g.dv, T(1), dout_e, g.dv, v + e * g.Tk * g.dv, g.dv, T(0), ds, g.Tk);
    for (int64_t i = 0; i < g.Tq; ++i) {
      const T* pr = pe + i * g.Tk;
      T* dr = ds + i * g.Tk;
      double dot = 0;  // rowsum(dP * P), or equally rowsum(dO * O)
      if (recompute) {
        for (int64_t k = 0; k < g.dv; ++k) dot += dout_e[i * g.dv + k] * o[(e * g.Tq + i) * g.dv + k];
      } else {
        for (int64_t j = 0; j < g.Tk; ++j) dot += dr[j] * pr[j];
      }
      for (int64_t j = 0; j < g.Tk; ++j) dr[j] = scale(pr[j] * (dr[j] - static_cast<T>(dot)));
    }
    // dQ = dS' Kt^T, dKt = Q^T dS'.
    blas_gemm(false, true, g.Tq, g.d, g.Tk, T(1), ds, g.Tk, kt_e, g.Tk, T(0), dq + e * g.Tq * g.d, g.d);
    blas_gemm(true, false, g.d, g.Tk, g.Tq, T(1), q_e, g.d, ds, g.Tk, T(0), dkt + e * g.d * g.Tk, g.Tk);
  }
}

int64_t attention_grad_workspace(const Graph& gr, const Node& n, int float_bytes) {
  const Shape& q = gr.values[n.inputs[1]].shape;
  const Shape& kt = gr.values[n.inputs[2]].shape;
  return 2 * q[q.size() - 2] * kt.back() * float_bytes;  // (Tq, Tk) probabilities and (Tq, Tk) dS
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
