// The fused Attention op's CUDA kernels (lib/engine/cuda/attention_kernels.cu) compiled as C++ and run on the CPU
// by the CUDA emulation (cuda_runtime.h and emu.h in this folder), against a double-precision reference written
// here from the formulas: the tiled forward (online softmax), D = rowsum(dO O), the tiled dKt/dV and dQ kernels,
// and the materialised path's row kernels (softmax with the log-sum-exp, the probabilities recomputed from it, the
// score gradient). The masks include tiles that the tiled kernels skip (all entries -inf or float's lowest where
// every row of the block has met a score), and the skip is shown to change no bit. What a GPU adds (timing, the
// memory model, shared-memory sizes per device) is monet_cuda_tests' part.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/attention_kernels.cu"
#include "tensor_close.h"

using namespace monet::cuda;

namespace {

enum class MaskKind { none, causal_inf, causal_lowest, causal_near, padding_lowest, rows_lowest, leading_inf };

struct Case {
  std::string name;
  int64_t B, Tq, Tk, d, dv;
  double scale;
  bool divides;
  MaskKind mask;
  bool gpt2_layout = false;  // Q, Kt, V, O stored (N, T, H, d) with N = B / kHeads
};
constexpr int64_t kHeads = 2;  // H of the GPT-2 layout

// Canonical operands (contiguous per head) and the mask, in double; the kernels get float copies laid out as the
// case stores them.
struct Problem {
  Case c;
  std::vector<double> q, kt, v, dout;  // (B, Tq, d), (B, d, Tk), (B, Tk, dv), (B, Tq, dv)
  std::vector<double> mask;            // (Tq, Tk) for every head, or (N, Tk) for the padding kind, or empty
};

double mask_value(MaskKind kind, int64_t i, int64_t j, int64_t Tq, int64_t Tk) {
  const double inf = std::numeric_limits<double>::infinity(), lowest = std::numeric_limits<float>::lowest();
  const bool above = j > i + Tk - Tq;
  switch (kind) {
    case MaskKind::causal_inf: return above ? -inf : 0.0;
    case MaskKind::causal_lowest: return above ? lowest : 0.0;
    case MaskKind::causal_near: return above ? -1e29 : 0.0;  // hides the same scores, but above the skip's bound
    case MaskKind::rows_lowest: return above || i % 3 == 1 ? lowest : 0.0;
    case MaskKind::leading_inf: return j < i ? -inf : 0.0;
    default: return 0.0;
  }
}

Problem make_problem(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto fill = [&](size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> x(n);
    for (double& e : x) e = u(rng);
    return x;
  };
  Problem p;
  p.c = c;
  p.q = fill(static_cast<size_t>(c.B * c.Tq * c.d), -3.0, 3.0);  // wider than K: clear maxima, frequent rescales
  p.kt = fill(static_cast<size_t>(c.B * c.d * c.Tk), -1.0, 1.0);
  p.v = fill(static_cast<size_t>(c.B * c.Tk * c.dv), -1.0, 1.0);
  p.dout = fill(static_cast<size_t>(c.B * c.Tq * c.dv), -1.0, 1.0);
  if (c.mask == MaskKind::rows_lowest) {
    // A wholly masked row's L is the fill (its log of the key count is absorbed in float), so P recomputed from L
    // is 1, not 1 / Tk, on such rows, on the CPU kernel as here (docs/engine.md): the recompute backward is right
    // where their dO is 0, as for the padding positions whose labels are ignored. The forward is right regardless.
    for (int64_t e = 0; e < c.B; ++e)
      for (int64_t i = 1; i < c.Tq; i += 3)
        for (int64_t n = 0; n < c.dv; ++n) p.dout[static_cast<size_t>((e * c.Tq + i) * c.dv + n)] = 0.0;
  }
  if (c.mask == MaskKind::padding_lowest) {
    p.mask = fill(static_cast<size_t>(c.B * c.Tk), -0.5, 0.5);
    for (int64_t e = 0; e < c.B; ++e) {
      const int64_t length = std::max<int64_t>(1, 60 - 25 * e);  // keys from 64 on masked: whole key tiles
      for (int64_t j = length; j < c.Tk; ++j)
        p.mask[static_cast<size_t>(e * c.Tk + j)] = std::numeric_limits<float>::lowest();
    }
  } else if (c.mask != MaskKind::none) {
    p.mask.resize(static_cast<size_t>(c.Tq * c.Tk));
    for (int64_t i = 0; i < c.Tq; ++i)
      for (int64_t j = 0; j < c.Tk; ++j)
        p.mask[static_cast<size_t>(i * c.Tk + j)] = mask_value(c.mask, i, j, c.Tq, c.Tk);
  }
  return p;
}

double mask_at(const Problem& p, int64_t e, int64_t i, int64_t j) {
  if (p.mask.empty()) return 0.0;
  if (p.c.mask == MaskKind::padding_lowest) return p.mask[static_cast<size_t>(e * p.c.Tk + j)];
  return p.mask[static_cast<size_t>(i * p.c.Tk + j)];
}

double scaled(const Case& c, double x) { return c.divides ? x / c.scale : x * c.scale; }

struct Reference {
  std::vector<double> o, lse, dq, dkt, dv;
};

// Softmax attention and its gradient in double, from the definitions. The scores are rounded to float before the
// mask is added (as the kernels add it), so that a float mask's absorption of small scores is the same.
Reference reference(const Problem& p) {
  const Case& c = p.c;
  // Flat indices of (head e, row, column) in each operand's canonical layout.
  const auto qi = [&](int64_t e, int64_t i, int64_t k) { return static_cast<size_t>((e * c.Tq + i) * c.d + k); };
  const auto ki = [&](int64_t e, int64_t k, int64_t j) { return static_cast<size_t>((e * c.d + k) * c.Tk + j); };
  const auto vi = [&](int64_t e, int64_t j, int64_t n) { return static_cast<size_t>((e * c.Tk + j) * c.dv + n); };
  const auto oi = [&](int64_t e, int64_t i, int64_t n) { return static_cast<size_t>((e * c.Tq + i) * c.dv + n); };
  Reference r;
  r.o.assign(static_cast<size_t>(c.B * c.Tq * c.dv), 0.0);
  r.lse.assign(static_cast<size_t>(c.B * c.Tq), 0.0);
  r.dq.assign(static_cast<size_t>(c.B * c.Tq * c.d), 0.0);
  r.dkt.assign(static_cast<size_t>(c.B * c.d * c.Tk), 0.0);
  r.dv.assign(static_cast<size_t>(c.B * c.Tk * c.dv), 0.0);
  std::vector<double> s(static_cast<size_t>(c.Tk)), dp(static_cast<size_t>(c.Tk));  // a row's scores (then P), dP
  for (int64_t e = 0; e < c.B; ++e)
    for (int64_t i = 0; i < c.Tq; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < c.Tk; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < c.d; ++k) dot += p.q[qi(e, i, k)] * p.kt[ki(e, k, j)];
        s[static_cast<size_t>(j)] = static_cast<float>(scaled(c, dot)) + static_cast<float>(mask_at(p, e, i, j));
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (double x : s) sum += std::exp(x - m);
      r.lse[static_cast<size_t>(e * c.Tq + i)] = m + std::log(sum);
      for (double& x : s) x = std::exp(x - m) / sum;  // P
      double D = 0;
      for (int64_t j = 0; j < c.Tk; ++j) {
        double acc = 0;
        for (int64_t n = 0; n < c.dv; ++n) {
          r.o[oi(e, i, n)] += s[static_cast<size_t>(j)] * p.v[vi(e, j, n)];
          acc += p.dout[oi(e, i, n)] * p.v[vi(e, j, n)];
        }
        dp[static_cast<size_t>(j)] = acc;
        D += s[static_cast<size_t>(j)] * acc;
      }
      for (int64_t j = 0; j < c.Tk; ++j) {
        const double pj = s[static_cast<size_t>(j)];
        const double ds = scaled(c, pj * (dp[static_cast<size_t>(j)] - D));
        for (int64_t k = 0; k < c.d; ++k) {
          r.dq[qi(e, i, k)] += ds * p.kt[ki(e, k, j)];
          r.dkt[ki(e, k, j)] += p.q[qi(e, i, k)] * ds;
        }
        for (int64_t n = 0; n < c.dv; ++n) r.dv[vi(e, j, n)] += pj * p.dout[oi(e, i, n)];
      }
    }
  return r;
}

// Where element (e, row, col) of an operand with `rows` x `cols` per head lies, and its AttentionLayout. Contiguous:
// heads one after another. GPT-2's: (N, T, H, w) with the head's T along `rows` (or `cols` for Kt, whose T is its
// columns), e = n H + h.
struct Placement {
  AttentionLayout layout;
  std::vector<int64_t> index;  // canonical flat index -> stored flat index
  int64_t stored = 0;
};

Placement place(const Case& c, int64_t rows, int64_t cols, bool t_is_cols) {
  Placement pl;
  pl.index.resize(static_cast<size_t>(c.B * rows * cols));
  if (!c.gpt2_layout) {
    pl.layout.rank = 1;
    pl.layout.size[0] = c.B;
    pl.layout.stride[0] = rows * cols;
    pl.layout.rs = cols;
    pl.layout.cs = 1;
    for (size_t k = 0; k < pl.index.size(); ++k) pl.index[k] = static_cast<int64_t>(k);
    pl.stored = c.B * rows * cols;
    return pl;
  }
  const int64_t N = c.B / kHeads, T = t_is_cols ? cols : rows, w = t_is_cols ? rows : cols;
  pl.layout.rank = 2;
  pl.layout.size[0] = N;
  pl.layout.size[1] = kHeads;
  pl.layout.stride[0] = T * kHeads * w;
  pl.layout.stride[1] = w;
  pl.layout.rs = t_is_cols ? 1 : kHeads * w;
  pl.layout.cs = t_is_cols ? kHeads * w : 1;
  for (int64_t e = 0; e < c.B; ++e)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t col = 0; col < cols; ++col) {
        const int64_t n = e / kHeads, h = e % kHeads, t = t_is_cols ? col : r, x = t_is_cols ? r : col;
        pl.index[static_cast<size_t>((e * rows + r) * cols + col)] = ((n * T + t) * kHeads + h) * w + x;
      }
  pl.stored = c.B * rows * cols;
  return pl;
}

std::vector<float> store(const Placement& pl, const std::vector<double>& canonical) {
  std::vector<float> out(static_cast<size_t>(pl.stored), std::numeric_limits<float>::quiet_NaN());
  for (size_t k = 0; k < canonical.size(); ++k)
    out[static_cast<size_t>(pl.index[k])] = static_cast<float>(canonical[k]);
  return out;
}

std::vector<double> load(const Placement& pl, const std::vector<float>& stored) {
  std::vector<double> out(pl.index.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = stored[static_cast<size_t>(pl.index[k])];
  return out;
}

struct Outputs {
  std::vector<double> o, lse, dq, dkt, dv;
  std::vector<float> raw;  // every output's float bits, for bitwise comparisons
  int64_t barriers = 0;    // block barriers of the three tiled kernels
};

// The tiled path: forward, D, dKt/dV, dQ, as cuda_attention.cpp runs them for the recompute implementation.
Outputs run_tiled(const Problem& p) {
  const Case& c = p.c;
  const Placement pq = place(c, c.Tq, c.d, false), pk = place(c, c.d, c.Tk, true), pv = place(c, c.Tk, c.dv, false),
                  po = place(c, c.Tq, c.dv, false);
  AttentionDims g;
  g.B = c.B, g.Tq = c.Tq, g.Tk = c.Tk, g.d = c.d, g.dv = c.dv;
  g.scale = static_cast<float>(c.scale);
  g.divides = c.divides;
  g.q = pq.layout, g.kt = pk.layout, g.v = pv.layout, g.o = po.layout;
  std::vector<float> mask(p.mask.begin(), p.mask.end());
  AttentionMask m;
  if (!mask.empty()) {
    m.data = mask.data();
    if (c.mask == MaskKind::padding_lowest) {  // one row of keys per head, broadcast over the queries
      m.rank = 1, m.size[0] = c.B, m.stride[0] = c.Tk, m.si = 0, m.sj = 1;
    } else {  // one (Tq, Tk) for every head
      m.rank = 0, m.si = c.Tk, m.sj = 1;
    }
  }
  const std::vector<float> q = store(pq, p.q), kt = store(pk, p.kt), v = store(pv, p.v), dout = store(po, p.dout);
  std::vector<float> o(static_cast<size_t>(po.stored)), lse(static_cast<size_t>(c.B * c.Tq)),
      rowdot(static_cast<size_t>(c.B * c.Tq)), dq(static_cast<size_t>(pq.stored)), dkt(static_cast<size_t>(pk.stored)),
      dv(static_cast<size_t>(pv.stored));
  const int64_t before = monet_emu::counters().block_barriers;
  REQUIRE(attention_fused_forward(g, m, q.data(), kt.data(), v.data(), o.data(), lse.data(), nullptr) == cudaSuccess);
  REQUIRE(attention_row_dot(g, dout.data(), o.data(), rowdot.data(), nullptr) == cudaSuccess);
  REQUIRE(attention_fused_grad_kv(g, m, q.data(), kt.data(), v.data(), dout.data(), lse.data(), rowdot.data(),
                                  dkt.data(), dv.data(), nullptr) == cudaSuccess);
  REQUIRE(attention_fused_grad_q(g, m, q.data(), kt.data(), v.data(), dout.data(), lse.data(), rowdot.data(),
                                 dq.data(), nullptr) == cudaSuccess);
  Outputs r;
  r.barriers = monet_emu::counters().block_barriers - before;
  r.o = load(po, o);
  r.lse.assign(lse.begin(), lse.end());
  r.dq = load(pq, dq);
  r.dkt = load(pk, dkt);
  r.dv = load(pv, dv);
  for (const auto* t : {&o, &lse, &dq, &dkt, &dv}) r.raw.insert(r.raw.end(), t->begin(), t->end());
  return r;
}

using monet::test::check_close;  // monet_cuda_tests' tolerance: 1e-6 + 1e-4 of the reference's scale

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Sizes past the 64 x 64 tiles and the 32-row steps, each head width class of the kernels (NW 2, 4, 5).
std::vector<Case> cases() {
  return {
      {"no mask, Tq != Tk, d != dv, Div", 2, 70, 100, 40, 24, 8.0, true, MaskKind::none},
      {"causal -inf, GPT-2 layout", 4, 130, 130, 64, 64, 0.125, false, MaskKind::causal_inf, true},
      {"causal of float's lowest", 2, 200, 200, 32, 32, 0.2, false, MaskKind::causal_lowest},
      {"padding of float's lowest over whole key tiles", 3, 90, 230, 32, 48, 0.2, false, MaskKind::padding_lowest},
      {"wholly masked rows under a finite fill", 1, 140, 140, 64, 64, 0.125, false, MaskKind::rows_lowest},
      {"leading keys -inf (rows whose first tiles are all masked)", 1, 100, 150, 16, 80, 0.2, false,
       MaskKind::leading_inf},
  };
}

}  // namespace

TEST_CASE("the tiled attention kernels match a double reference on the CUDA emulation", "[cuda_emu][attention]") {
  uint64_t seed = 7;
  for (const Case& c : cases()) {
    INFO("case: " << c.name);
    const Problem p = make_problem(c, seed++);
    const Reference want = reference(p);
    const Outputs got = run_tiled(p);
    check_close(want.o, got.o, "O");
    check_close(want.lse, got.lse, "L");
    check_close(want.dq, got.dq, "dQ");
    check_close(want.dkt, got.dkt, "dKt");
    check_close(want.dv, got.dv, "dV");
    CHECK(bitwise_equal(run_tiled(p).raw, got.raw));  // the same bits twice
  }
}

TEST_CASE("the tiled attention kernels skip wholly masked tiles without changing a bit", "[cuda_emu][attention]") {
  // float's lowest is at or below the skip's bound (-1e30), -1e29 is not: both hide the same scores (their
  // exponentials are 0), so the results agree bitwise while the first run passes fewer barriers.
  Case c{"causal, 3 x 3 tiles", 2, 190, 190, 32, 32, 0.25, false, MaskKind::causal_lowest};
  const Problem skipped = make_problem(c, 99);
  c.mask = MaskKind::causal_near;
  const Problem processed = make_problem(c, 99);
  const Outputs a = run_tiled(skipped), b = run_tiled(processed);
  CHECK(bitwise_equal(a.raw, b.raw));
  CHECK(a.barriers < b.barriers);
  const Reference want = reference(skipped);
  check_close(want.o, a.o, "O");
  check_close(want.dq, a.dq, "dQ");
  check_close(want.dkt, a.dkt, "dKt");
  // A row that has met no score keeps every tile: wholly masked rows under a finite fill stay uniform.
  c.mask = MaskKind::rows_lowest;
  const Problem rows = make_problem(c, 5);
  check_close(reference(rows).o, run_tiled(rows).o, "O with wholly masked rows");
}

TEST_CASE("the materialised path's row kernels match a double reference on the CUDA emulation",
          "[cuda_emu][attention]") {
  // Softmax of scale(S) + mask in place with L; P recomputed from L; dS = scale(P (dP - rowsum(dP P))). Keys up to
  // 1024 run a warp per row (float4 rows where Tk % 4 == 0), beyond a block per row.
  for (int64_t Tk : {int64_t{36}, int64_t{37}, int64_t{1100}}) {
    INFO("keys " << Tk);
    const int64_t heads = 3, Tq = 5;
    std::mt19937_64 rng(static_cast<uint64_t>(Tk));
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    AttentionDims g;
    g.B = heads, g.Tq = Tq, g.Tk = Tk;
    g.scale = 0.5f;
    std::vector<float> s(static_cast<size_t>(heads * Tq * Tk)), mask(static_cast<size_t>(Tq * Tk)),
        dp(s.size()), lse(static_cast<size_t>(heads * Tq));
    for (float& x : s) x = static_cast<float>(u(rng));
    for (float& x : dp) x = static_cast<float>(u(rng));
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tk; ++j) mask[static_cast<size_t>(i * Tk + j)] = j > i + Tk - Tq ? -INFINITY : 0.f;
    AttentionMask m;
    m.data = mask.data(), m.rank = 0, m.si = Tk, m.sj = 1;
    const std::vector<float> scores = s;
    REQUIRE(attention_softmax_rows(g, m, 0, heads, s.data(), lse.data(), nullptr) == cudaSuccess);
    std::vector<double> want_p(s.size()), want_ds(s.size());
    for (int64_t r = 0; r < heads * Tq; ++r) {
      const int64_t i = r % Tq;
      double mx = -INFINITY, sum = 0, dot = 0;
      std::vector<double> x(static_cast<size_t>(Tk));
      for (int64_t j = 0; j < Tk; ++j) {
        x[static_cast<size_t>(j)] =
            0.5 * scores[static_cast<size_t>(r * Tk + j)] + mask[static_cast<size_t>(i * Tk + j)];
        mx = std::max(mx, x[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < Tk; ++j) sum += std::exp(x[static_cast<size_t>(j)] - mx);
      CHECK(std::abs(lse[static_cast<size_t>(r)] - (mx + std::log(sum))) <= 1e-5 * std::max(1.0, std::abs(mx)));
      for (int64_t j = 0; j < Tk; ++j) {
        want_p[static_cast<size_t>(r * Tk + j)] = std::exp(x[static_cast<size_t>(j)] - mx) / sum;
        dot += want_p[static_cast<size_t>(r * Tk + j)] * dp[static_cast<size_t>(r * Tk + j)];
      }
      for (int64_t j = 0; j < Tk; ++j)
        want_ds[static_cast<size_t>(r * Tk + j)] =
            0.5 * want_p[static_cast<size_t>(r * Tk + j)] * (dp[static_cast<size_t>(r * Tk + j)] - dot);
    }
    check_close(want_p, std::vector<double>(s.begin(), s.end()), "P");
    std::vector<float> recomputed = scores;
    REQUIRE(attention_recompute_probs(g, m, 0, heads, lse.data(), recomputed.data(), nullptr) == cudaSuccess);
    check_close(want_p, std::vector<double>(recomputed.begin(), recomputed.end()), "P recomputed from L");
    REQUIRE(attention_grad_scores(g, heads * Tq, s.data(), dp.data(), nullptr, nullptr) == cudaSuccess);
    check_close(want_ds, std::vector<double>(dp.begin(), dp.end()), "dS");
  }
}

TEST_CASE("the CUDA emulation refuses a launch it cannot run", "[cuda_emu]") {
  // A grid of no blocks is a configuration error on a GPU; the emulation reports it the same way.
  std::vector<float> x(4);
  launch_kernel(recompute_probs_kernel, 0, kAttnThreads, 0, nullptr, AttentionDims{}, AttentionMask{}, int64_t{0},
                int64_t{0}, static_cast<const float*>(x.data()), x.data());
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaSuccess);
}
