// Attention and AttentionGrad on the GPU (lib/ops/attention: the spec and the CPU reference), fp32 throughout
// (cuDNN's SDPA and FlashAttention take only fp16/bf16). Paths:
//   Attention, P requested: materialised. S = Q Kt by cuBLAS straight into P's buffer, one row kernel (scale, mask,
//     softmax in place, L), O = P V by cuBLAS.
//   Attention, P not requested (data null): the tiled kernel (attention_kernels.h attention_fused_forward), O and L
//     only, never more than a 64 x 64 tile of scores. Heads wider than kAttentionFusedMaxWidth run the
//     materialised path on chunks of heads whose scores go to workspace instead.
//   AttentionGrad probs: per chunk of heads, dV = P^T dO and dP = dO V^T (into workspace) by cuBLAS, a row kernel
//     dS = scale(P (dP - rowsum(dP P))) in place, dQ = dS Kt^T and dKt = Q^T dS by cuBLAS.
//   AttentionGrad recompute: D = rowsum(dO O) into workspace, then the tiled dKt/dV and dQ kernels (no atomics).
//     Wider heads: per chunk, P recomputed by cuBLAS and a row kernel into workspace, then as probs with D.
// "Wider": d or dv above kAttentionFusedMaxWidth (128), or tiles beyond the device's shared memory per block (head
// widths above 64 on sm86/sm89; none on sm80 and sm90), so the path, and the workspace, follow shapes and device.
// Q, Kt, V and O may lie strided in the tensors the export stored (the node's q_perm, kt_perm, v_perm, o_perm:
// AttentionLayout): the tiled kernels read and write them in place, and cuBLAS takes them at their row strides and
// one stride per head over each run of heads where every operand has one (BERT's (Tq, B H, d): all heads at once;
// (B, H, Tq, d) stored as (B, Tq, H, d): B runs of H heads).
// cuBLAS runs in CUBLAS_DEFAULT_MATH (full fp32), as cuda_gemm.cpp, on the first kCublasWorkspaceBytes of the node's
// workspace (cublasSetWorkspace before every node), so it allocates nothing during a step.
//
// Workspace (a pure function of the shapes and the device's shared memory; 256-byte-aligned pieces, align_up):
//   chunk = align_up(H Tq Tk 4) with H = clamp(floor(kChunkBytes / (Tq Tk 4)), 1, B) heads per chunk,
//   rows  = align_up(B Tq 4) (D);
//   Attention:     cublas + (fused ? 0 : chunk)                        [cublas | scores of a chunk]
//   AttentionGrad probs:     cublas + chunk                             [cublas | dP]
//   AttentionGrad recompute: fused ? rows : cublas + 2 chunk + rows     [D], or [cublas | P | dP | D]
// (each implementation's own: the executor reserves what its step runs.)
#include <algorithm>

#include "engine/cuda/attention_kernels.h"
#include "engine/cuda/cuda_ops.h"
#include "ops/common/plans.h"

namespace monet::cuda {
namespace {

constexpr int kProbsImpl = 0;                                   // lib/ops/attention: probs 0, recompute 1
constexpr int64_t kChunkBytes = int64_t{64} << 20;              // a chunk's scores: at most this, or one head

// ---------------------------------------------------------------------------------------------- geometry

struct Plan {
  AttentionDims g;
  bool fused = false;      // both head widths within the tiled kernels' reach
  int64_t heads = 1;       // heads per chunk (materialised paths with scores in workspace)
  int64_t chunk_bytes = 0;
  int64_t rows_bytes = 0;  // D (B, Tq)
  int64_t run = 1;         // heads whose operands all lie at one stride per head (one strided-batched product)
  int64_t hs_q = 0, hs_kt = 0, hs_v = 0, hs_o = 0;  // that stride of each operand
};

// The kernels' layout of an operand (attention_kernels.h AttentionLayout): the batch dims of size 1 dropped,
// adjacent ones merged where one stride continues the other.
AttentionLayout layout_of(const ops::AttentionView& v, const Shape& batch) {
  std::vector<int64_t> size, stride;  // outermost first
  for (size_t k = 0; k < batch.size(); ++k) {
    if (batch[k] == 1) continue;
    if (!size.empty() && stride.back() == v.batch_stride[k] * batch[k]) {
      size.back() *= batch[k];
      stride.back() = v.batch_stride[k];
    } else {
      size.push_back(batch[k]);
      stride.push_back(v.batch_stride[k]);
    }
  }
  if (size.size() > static_cast<size_t>(kAttentionLayoutDims))
    fail("Attention on CUDA: an operand's heads lie along ", size.size(), " separate strides (at most ",
         kAttentionLayoutDims, ")");
  AttentionLayout l;
  l.rank = static_cast<int>(size.size());
  for (int k = 0; k < l.rank; ++k) {
    l.size[k] = size[static_cast<size_t>(k)];
    l.stride[k] = stride[static_cast<size_t>(k)];
  }
  l.rs = v.rs;
  l.cs = v.cs;
  return l;
}

// Heads per run: the product of the innermost batch dims over which every operand's heads lie at one stride (the
// contiguous P, dP and L always do), and each operand's stride per head there.
void plan_runs(Plan& p, const ops::AttentionGeom& geo) {
  const ops::AttentionView* views[] = {&geo.q, &geo.kt, &geo.v, &geo.o};
  int64_t* strides[] = {&p.hs_q, &p.hs_kt, &p.hs_v, &p.hs_o};
  p.run = 1;
  for (int64_t* s : strides) *s = 0;
  bool first = true;
  for (size_t k = geo.batch.size(); k-- > 0;) {
    const int64_t n = geo.batch[k];
    if (n == 1) continue;
    bool continues = true;
    for (int i = 0; i < 4 && !first; ++i) continues = continues && *strides[i] * p.run == views[i]->batch_stride[k];
    if (!continues) break;
    if (first)
      for (int i = 0; i < 4; ++i) *strides[i] = views[i]->batch_stride[k];
    first = false;
    p.run *= n;
  }
}

// The most dynamic shared memory a block of the current device may opt into (sm80 163 KB, sm90 227 KB; sm86 and
// sm89 99 KB, where the tiled kernels for head widths above 64 do not fit: at 80 the dKt/dV kernel takes 103.5 KB).
int64_t shared_memory_optin_bytes() {
  int device = 0, bytes = 0;
  MONET_CUDA_CHECK(cudaGetDevice(&device));
  MONET_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

// Whether the tiled kernels take heads of widths d and dv on this device.
bool fused_fits(int64_t d, int64_t dv) {
  if (d > kAttentionFusedMaxWidth || dv > kAttentionFusedMaxWidth) return false;
  int64_t most = 0;
  for (int kernel = 0; kernel < 3; ++kernel) most = std::max(most, attention_fused_smem_bytes(d, dv, kernel));
  return most <= shared_memory_optin_bytes();
}

Plan plan_of(const ops::AttentionGeom& geo, const Attrs& attrs) {
  Plan p;
  p.g.B = geo.B, p.g.Tq = geo.Tq, p.g.Tk = geo.Tk, p.g.d = geo.d, p.g.dv = geo.dv;
  p.g.scale = static_cast<float>(attrs.f("scale", 1.0));
  p.g.divides = attrs.i("scale_divides", 0) != 0;
  p.fused = fused_fits(geo.d, geo.dv);
  const int64_t head_bytes = std::max<int64_t>(geo.Tq * geo.Tk * 4, 1);
  p.heads = std::clamp<int64_t>(kChunkBytes / head_bytes, 1, std::max<int64_t>(geo.B, 1));
  p.chunk_bytes = align_up(p.heads * geo.Tq * geo.Tk * 4);
  p.rows_bytes = align_up(geo.B * geo.Tq * 4);
  p.g.q = layout_of(geo.q, geo.batch);
  p.g.kt = layout_of(geo.kt, geo.batch);
  p.g.v = layout_of(geo.v, geo.batch);
  p.g.o = layout_of(geo.o, geo.batch);
  plan_runs(p, geo);
  return p;
}

int64_t forward_workspace(const Plan& p) { return kCublasWorkspaceBytes + (p.fused ? 0 : p.chunk_bytes); }

// Implementation impl's: probs [cublas | dP of a chunk]; recompute [D] on the tiled kernels, else
// [cublas | P | dP | D].
int64_t grad_workspace(const Plan& p, int impl) {
  if (impl == kProbsImpl) return kCublasWorkspaceBytes + p.chunk_bytes;
  return p.fused ? p.rows_bytes : kCublasWorkspaceBytes + 2 * p.chunk_bytes + p.rows_bytes;
}

Plan plan_of_node(const Graph& gr, const Node& n, int first_q_input) {
  const auto shape = [&](int i) -> const Shape& { return gr.values[n.inputs[static_cast<size_t>(i)]].shape; };
  return plan_of(
      ops::attention_geometry(n, shape(first_q_input), shape(first_q_input + 1), shape(first_q_input + 2), nullptr),
      n.attrs);
}

int64_t attention_workspace(const Graph& gr, const Node& n, CudaContext&) {
  return forward_workspace(plan_of_node(gr, n, 0));
}
int64_t attention_grad_impl_workspace(const Graph& gr, const Node& n, CudaContext&, int impl) {
  return grad_workspace(plan_of_node(gr, n, 1), impl);
}

// The mask's placement for the kernels: the geometry's per-head offsets (mask_batch_offset) as strides over the
// batch dims the mask does not broadcast along (adjacent ones merged where one stride continues the other), checked
// against every head's offset.
AttentionMask mask_of(const ops::AttentionGeom& geo, const float* data) {
  AttentionMask m;
  if (!geo.has_mask || !data) return m;
  const std::vector<int64_t>& table = geo.mask_batch_offset;
  MONET_CHECK(static_cast<int64_t>(table.size()) == geo.B && table[0] == 0);
  std::vector<int64_t> size, stride;  // innermost first
  int64_t unit = 1;                   // heads per step of the current dim
  for (size_t k = geo.batch.size(); k-- > 0;) {
    const int64_t n = geo.batch[k];
    if (n <= 1) continue;
    const int64_t s = table[static_cast<size_t>(unit)];  // the head with index 1 along dim k, 0 elsewhere
    if (!size.empty() && stride.back() * size.back() == s) {
      size.back() *= n;
    } else {
      size.push_back(n);
      stride.push_back(s);
    }
    unit *= n;
  }
  if (size.size() > static_cast<size_t>(kAttentionMaskDims))
    fail("Attention on CUDA: the mask varies along ", size.size(), " separate batch dims (at most ",
         kAttentionMaskDims, ")");
  m.data = data;
  m.rank = static_cast<int>(size.size());
  for (int k = 0; k < m.rank; ++k) {
    m.size[k] = size[size.size() - 1 - static_cast<size_t>(k)];
    m.stride[k] = stride[size.size() - 1 - static_cast<size_t>(k)];
  }
  m.si = geo.mask_si;
  m.sj = geo.mask_sj;
  for (int64_t e = 0; e < geo.B; ++e) {  // as the kernels compute it (attention_kernels.cu mask_batch_offset)
    int64_t rem = e, off = 0;
    for (int k = m.rank - 1; k >= 0; --k) {
      off += rem % m.size[k] * m.stride[k];
      rem /= m.size[k];
    }
    MONET_CHECK(off == table[static_cast<size_t>(e)], "mask offset of head ", e);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------- cuBLAS

float* workspace_at(const CudaCall& c, int64_t byte_offset) {
  return reinterpret_cast<float*>(static_cast<char*>(c.workspace) + byte_offset);
}

// `count` row-major products C (m, n) = op(A) (m, k) op(B) (k, n) at element strides sa, sb, sc (cuda_ops.h).
void gemm_batched(const CudaCall& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  int64_t sa, const float* b, int64_t ldb, int64_t sb, float* out, int64_t ldc, int64_t sc,
                  int64_t count) {
  gemm_rm_batched(c, ta, tb, m, n, k, 1.f, a, lda, sa, b, ldb, sb, 0.f, out, ldc, sc, count);
}

// One operand of `count` products: element (r, c) of product h at p + h * hs + r * rs + c * cs, one of rs and cs 1
// (the CPU's MatView, lib/ops/attention, with a stride per head). Out: the same for a product's result.
struct Mat {
  const float* p;
  int64_t rs, cs, hs;
};
struct Out {
  float* p;
  int64_t rs, cs, hs;
};
Mat transposed(Mat m) { return {m.p, m.cs, m.rs, m.hs}; }

// `count` products C (m, n) = A (m, k) B (k, n), one call per run (row_major_gemm, ops/common/plans.h, as the
// CPU's gemm_views).
void gemm_views(const CudaCall& c, int64_t m, int64_t n, int64_t k, Mat a, Mat b, Out o, int64_t count) {
  MONET_CHECK(o.cs == 1 || o.rs == 1, "attention product without a unit stride");
  const ops::RowMajorGemm r = ops::row_major_gemm(m, n, k, {a.rs, a.cs}, {b.rs, b.cs}, {o.rs, o.cs});
  const Mat& x = r.swap ? b : a;
  const Mat& y = r.swap ? a : b;
  gemm_batched(c, r.ta, r.tb, r.m, r.n, r.k, x.p, r.lda, x.hs, y.p, r.ldb, y.hs, o.p, r.ldc, o.hs, count);
}

// The tensors of one node, by head.
struct Heads {
  const float *q = nullptr, *kt = nullptr, *v = nullptr;  // (B, Tq, d), (B, d, Tk), (B, Tk, dv) as laid out
  const float* dout = nullptr;                            // (B, Tq, dv) as O
  float *o = nullptr, *lse = nullptr;                     // (B, Tq, dv) as laid out, (B, Tq)
  float *dq = nullptr, *dkt = nullptr, *dv = nullptr;     // as Q, Kt, V
};

// Heads e0, e0 + 1, ... of one run of an operand (Plan::run).
Mat at(const float* base, const AttentionLayout& l, int64_t hs, int64_t e0) {
  return {base + attention_head_offset(l, e0), l.rs, l.cs, hs};
}
Out at(float* base, const AttentionLayout& l, int64_t hs, int64_t e0) {
  return {base + attention_head_offset(l, e0), l.rs, l.cs, hs};
}

// f(e0, h) for chunks of at most `most` heads that stay within one run each.
template <class F>
void for_each_chunk(const Plan& p, int64_t most, F f) {
  for (int64_t r0 = 0; r0 < p.g.B; r0 += p.run)
    for (int64_t e0 = r0; e0 < std::min(r0 + p.run, p.g.B); e0 += most) f(e0, std::min({most, r0 + p.run - e0, p.g.B - e0}));
}

// S = Q Kt for heads e0 .. e0 + h - 1 (within one run) into s (h, Tq, Tk).
void scores(const CudaCall& c, const Plan& pl, const Heads& t, int64_t e0, int64_t h, float* s) {
  const AttentionDims& g = pl.g;
  gemm_views(c, g.Tq, g.Tk, g.d, at(t.q, g.q, pl.hs_q, e0), at(t.kt, g.kt, pl.hs_kt, e0),
             Out{s, g.Tk, 1, g.Tq * g.Tk}, h);
}

// Heads e0 .. e0 + h - 1 (within one run) of the forward with their scores, then probabilities, in s (h, Tq, Tk).
void materialised_forward(const CudaCall& c, const Plan& pl, const AttentionMask& mask, const Heads& t, int64_t e0,
                          int64_t h, float* s) {
  const AttentionDims& g = pl.g;
  scores(c, pl, t, e0, h, s);
  MONET_CUDA_CHECK(attention_softmax_rows(g, mask, e0, h, s, t.lse + e0 * g.Tq, c.ctx.stream));
  gemm_views(c, g.Tq, g.dv, g.Tk, Mat{s, g.Tk, 1, g.Tq * g.Tk}, at(t.v, g.v, pl.hs_v, e0),
             at(t.o, g.o, pl.hs_o, e0), h);
}

// Heads e0 .. e0 + h - 1 (within one run) of the backward from their probabilities p (h, Tq, Tk); dp (h, Tq, Tk) is
// scratch (dP, then dS); rowdot (h Tq): D = rowsum(dO O), or null for rowsum(dP P).
void materialised_backward(const CudaCall& c, const Plan& pl, const Heads& t, int64_t e0, int64_t h, const float* p,
                           float* dp, const float* rowdot) {
  const AttentionDims& g = pl.g;
  const int64_t ss = g.Tq * g.Tk;
  const Mat dout = at(t.dout, g.o, pl.hs_o, e0), pm{p, g.Tk, 1, ss}, dsm{dp, g.Tk, 1, ss};
  // dV = P^T dO, dP = dO V^T
  gemm_views(c, g.Tk, g.dv, g.Tq, transposed(pm), dout, at(t.dv, g.v, pl.hs_v, e0), h);
  gemm_views(c, g.Tq, g.Tk, g.dv, dout, transposed(at(t.v, g.v, pl.hs_v, e0)), Out{dp, g.Tk, 1, ss}, h);
  MONET_CUDA_CHECK(attention_grad_scores(g, h * g.Tq, p, dp, rowdot, c.ctx.stream));
  // dQ = dS' Kt^T, dKt = Q^T dS'
  gemm_views(c, g.Tq, g.d, g.Tk, dsm, transposed(at(t.kt, g.kt, pl.hs_kt, e0)), at(t.dq, g.q, pl.hs_q, e0), h);
  gemm_views(c, g.d, g.Tk, g.Tq, transposed(at(t.q, g.q, pl.hs_q, e0)), dsm, at(t.dkt, g.kt, pl.hs_kt, e0), h);
}

// ---------------------------------------------------------------------------------------------- Attention

// Inputs Q 0, Kt 1, V 2, mask 3; outputs O 0, P 1 (optional), L 2.
void run_attention(const CudaCall& c) {
  const bool has_mask = c.in.size() == 4;
  const ops::AttentionGeom geo = ops::attention_geometry(c.node, c.in_shape(0), c.in_shape(1), c.in_shape(2),
                                                         has_mask ? &c.in_shape(3) : nullptr);
  const Plan pl = plan_of(geo, c.node.attrs);
  const AttentionDims& g = pl.g;
  MONET_CHECK(c.workspace_bytes >= forward_workspace(pl), "workspace too small for ", c.node.name);
  const AttentionMask mask = mask_of(geo, has_mask ? c.fin(3) : nullptr);
  Heads t;
  t.q = c.fin(0), t.kt = c.fin(1), t.v = c.fin(2);
  t.o = c.fout(0), t.lse = c.fout(2);
  float* p = c.fout(1);  // null where no step reads P
  if (g.B == 0 || g.Tq == 0 || g.Tk == 0) return;
  if (!p && pl.fused) {
    MONET_CUDA_CHECK(attention_fused_forward(g, mask, t.q, t.kt, t.v, t.o, t.lse, c.ctx.stream));
    return;
  }
  bind_cublas_workspace(c);
  if (p) {  // a run of heads at a time: all of them where the operands lie at one stride per head
    for_each_chunk(pl, g.B, [&](int64_t e0, int64_t h) {
      materialised_forward(c, pl, mask, t, e0, h, p + e0 * g.Tq * g.Tk);
    });
    return;
  }
  float* s = workspace_at(c, kCublasWorkspaceBytes);  // wide heads without P: chunks of scores
  for_each_chunk(pl, pl.heads, [&](int64_t e0, int64_t h) { materialised_forward(c, pl, mask, t, e0, h, s); });
}

// ---------------------------------------------------------------------------------------------- AttentionGrad

// Inputs dO 0, Q 1, Kt 2, V 3, O 4, P 5, L 6, mask 7 (probs reads dO, Q, Kt, V, P; recompute all but P).
void run_attention_grad(const CudaCall& c) {
  const bool has_mask = c.in.size() == 8;
  const ops::AttentionGeom geo = ops::attention_geometry(c.node, c.in_shape(1), c.in_shape(2), c.in_shape(3),
                                                         has_mask ? &c.in_shape(7) : nullptr);
  const Plan pl = plan_of(geo, c.node.attrs);
  const AttentionDims& g = pl.g;
  MONET_CHECK(c.workspace_bytes >= grad_workspace(pl, c.impl), "workspace too small for ", c.node.name);
  Heads t;
  t.dout = c.fin(0), t.q = c.fin(1), t.kt = c.fin(2), t.v = c.fin(3);
  t.dq = c.fout(0), t.dkt = c.fout(1), t.dv = c.fout(2);
  if (g.B == 0) return;
  if (g.Tq == 0 || g.Tk == 0) {  // empty products: zero gradients
    for (int i = 0; i < 3; ++i)
      MONET_CUDA_CHECK(cudaMemsetAsync(c.fout(i), 0, static_cast<size_t>(c.out[i].numel()) * 4, c.ctx.stream));
    return;
  }
  if (c.impl == kProbsImpl) {
    const float* p = c.fin(5);
    MONET_CHECK(p, "AttentionGrad probs without P");
    bind_cublas_workspace(c);
    float* dp = workspace_at(c, kCublasWorkspaceBytes);
    for_each_chunk(pl, pl.heads, [&](int64_t e0, int64_t h) {
      materialised_backward(c, pl, t, e0, h, p + e0 * g.Tq * g.Tk, dp, nullptr);
    });
    return;
  }
  const float* o = c.fin(4);
  const float* lse = c.fin(6);
  MONET_CHECK(o && lse, "AttentionGrad recompute without O or L");
  const AttentionMask mask = mask_of(geo, has_mask ? c.fin(7) : nullptr);
  if (pl.fused) {
    float* rowdot = workspace_at(c, 0);
    MONET_CUDA_CHECK(attention_row_dot(g, t.dout, o, rowdot, c.ctx.stream));
    MONET_CUDA_CHECK(attention_fused_grad_kv(g, mask, t.q, t.kt, t.v, t.dout, lse, rowdot, t.dkt, t.dv, c.ctx.stream));
    MONET_CUDA_CHECK(attention_fused_grad_q(g, mask, t.q, t.kt, t.v, t.dout, lse, rowdot, t.dq, c.ctx.stream));
    return;
  }
  bind_cublas_workspace(c);
  float* p = workspace_at(c, kCublasWorkspaceBytes);
  float* dp = workspace_at(c, kCublasWorkspaceBytes + pl.chunk_bytes);
  float* rowdot = workspace_at(c, kCublasWorkspaceBytes + 2 * pl.chunk_bytes);
  MONET_CUDA_CHECK(attention_row_dot(g, t.dout, o, rowdot, c.ctx.stream));
  for_each_chunk(pl, pl.heads, [&](int64_t e0, int64_t h) {
    scores(c, pl, t, e0, h, p);
    MONET_CUDA_CHECK(attention_recompute_probs(g, mask, e0, h, lse + e0 * g.Tq, p, c.ctx.stream));
    materialised_backward(c, pl, t, e0, h, p, dp, rowdot + e0 * g.Tq);
  });
}

}  // namespace

void add_attention_kernels(CudaKernelTable& t) {
  t["Attention"] = {run_attention, attention_workspace};
  t["AttentionGrad"] = {.run = run_attention_grad, .impl_workspace = attention_grad_impl_workspace};
}

}  // namespace monet::cuda
