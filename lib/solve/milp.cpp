#include "solve/milp.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "core/error.h"

namespace monet {

int LinearProgram::add_col(std::string name, double lo, double hi, double obj, bool is_integer) {
  col_names.push_back(std::move(name));
  col_lo.push_back(lo);
  col_hi.push_back(hi);
  objective.push_back(obj);
  integer.push_back(is_integer);
  return static_cast<int>(col_names.size()) - 1;
}

void LinearProgram::add_row(std::string name, std::vector<int> cols, std::vector<double> coefs, double lo, double hi) {
  // A column named twice (a node with several outputs, an implementation reading several values) becomes one
  // entry with the summed coefficient: LP readers reject duplicates and Clp's factorization assumes none.
  std::vector<int> order(cols.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return cols[a] < cols[b]; });
  std::vector<int> merged_cols;
  std::vector<double> merged_coefs;
  for (int i : order) {
    if (!merged_cols.empty() && merged_cols.back() == cols[i]) {
      merged_coefs.back() += coefs[i];
    } else {
      merged_cols.push_back(cols[i]);
      merged_coefs.push_back(coefs[i]);
    }
  }
  for (size_t i = merged_cols.size(); i-- > 0;)
    if (merged_coefs[i] == 0) {
      merged_cols.erase(merged_cols.begin() + static_cast<std::ptrdiff_t>(i));
      merged_coefs.erase(merged_coefs.begin() + static_cast<std::ptrdiff_t>(i));
    }
  rows.push_back({std::move(name), std::move(merged_cols), std::move(merged_coefs), lo, hi});
}

int64_t LinearProgram::nonzeros() const {
  int64_t n = 0;
  for (const Row& r : rows) n += static_cast<int64_t>(r.cols.size());
  return n;
}

namespace {

constexpr double kInf = 1e30;
// Memory in the rows is counted in units of kAlignBytes: every tensor size is a multiple of it, so every
// coefficient is an exact integer and the budget rounds down without any tolerance games.
double units(int64_t bytes) { return static_cast<double>(bytes / kAlignBytes); }
std::string idx(const char* sym, int t, int i) { return std::string(sym) + "_" + std::to_string(t) + "_" + std::to_string(i); }

struct Builder {
  const CheckpointProblem& p;
  double budget;  // MiB
  LinearProgram lp;
  MilpLayout m;

  // Variables. R[t][k] in {0,1} for k in candidates(t), cost = time of k. S[t][f] in {0,1} for t <= last_use(f),
  // one column per keep segment of f (keep_segments): S[t][f] of every step of a segment names the same column.
  void variables() {
    const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
    m.S.assign(T, std::vector<int>(nf, -1));
    m.R.assign(T, std::vector<int>(p.num_fwd(), -1));
    m.M.assign(T, {});
    for (int t = 0; t < T; ++t) {
      for (int k : p.candidates[t]) m.R[t][k] = lp.add_col(idx("R", t, k), 0, 1, p.time_ms(k), true);
      // M[t][i] in {0,1}, cost = implementation i's time beyond the default's.
      if (p.num_impls(t) > 1)
        for (int i = 0; i < p.num_impls(t); ++i) m.M[t].push_back(lp.add_col(idx("M", t, i), 0, 1, p.impl_ms[t][i], true));
    }
    // P[k][i] in {0,1}, cost = implementation i's time beyond the default's (the forward pass runs it once).
    m.P.assign(p.num_fwd(), {});
    for (int k = 0; k < p.num_fwd(); ++k)
      if (p.num_fwd_impls(k) > 1)
        for (int i = 0; i < p.num_fwd_impls(k); ++i)
          m.P[k].push_back(lp.add_col(idx("P", k, i), 0, 1, p.fwd_impl_ms[k][i], true));
    for (int f = 0; f < nf; ++f)
      for (auto [first, last] : keep_segments(p, f)) {
        const int col = lp.add_col(idx("S", first, f), 0, 1, 0, true);
        for (int t = first; t <= last; ++t) m.S[t][f] = col;
      }
    // Offload: H[f] in {0,1} (copied to the host when its stage-0 life ends), G[t][f] in {0,1} (copied back for
    // step t from the start of step prefetch_first(t, f)), and the waits for copies W >= 0, each costing its time.
    if (!p.offload()) return;
    m.H.assign(nf, -1);
    m.G.assign(T, std::vector<int>(nf, -1));
    for (int f = 0; f < nf; ++f)
      if (p.has_h(f))
        m.H[f] = lp.add_col("H_" + std::to_string(f), 0, 1, kCopyPreference * (p.copy_out_ms[f] + p.copy_in_ms[f]),
                            true);
    for (int t = 1; t < T; ++t)
      for (int f = 0; f < nf; ++f)
        if (p.has_g(t, f)) m.G[t][f] = lp.add_col(idx("G", t, f), 0, 1, 0, true);
    m.W.assign(T, -1);
    for (int t = 0; t < T; ++t) m.W[t] = lp.add_col("W_" + std::to_string(t), 0, kInf, 1, false);
    // Q[s] in {0,1}: optimizer state s has its home on the host; Qtot = sum_s a_s Q[s] (qtot), what the memory rows
    // credit outside the steps around each update (docs/planner.md, "Offload").
    m.Q.assign(p.num_states(), -1);
    if (p.num_states() == 0) return;
    std::vector<int> cols;
    std::vector<double> coefs;
    m.Qtot = lp.add_col("Qtot", 0, kInf, 0, false);
    cols.push_back(m.Qtot);
    coefs.push_back(1);
    for (int s = 0; s < p.num_states(); ++s) {
      m.Q[s] = lp.add_col("Q_" + std::to_string(s), 0, 1, kCopyPreference * (p.states[s].in_ms + p.states[s].out_ms),
                          true);
      if (p.states[s].parameter()) continue;
      cols.push_back(m.Q[s]);
      coefs.push_back(-units(p.state_bytes(s)));
    }
    lp.add_row("qtot", cols, coefs, 0, 0);
    // The parameters away from the device in step t, a running sum over the steps (their spans end at `last`):
    //   pz_t:  Pz_t - Pz_{t-1} - sum_{parameter offers s: last_s = t-1} a_s Q[s] = 0
    // (Pz[t] = -1 before the first step any can be away; a step where none leaves shares the column before it.)
    m.Pz.assign(T, -1);
    std::vector<std::vector<int>> leaving(T);  // [t]: the parameter offers whose last step is t-1
    for (int s : p.parameter_offers)
      if (p.states[s].last + 1 < T) leaving[p.states[s].last + 1].push_back(s);
    for (int t = 0; t < T; ++t) {
      const int prev = t > 0 ? m.Pz[t - 1] : -1;
      if (leaving[t].empty()) {
        m.Pz[t] = prev;
        continue;
      }
      m.Pz[t] = lp.add_col("Pz_" + std::to_string(t), 0, kInf, 0, false);
      std::vector<int> pc = {m.Pz[t]};
      std::vector<double> pk = {1};
      if (prev >= 0) { pc.push_back(prev); pk.push_back(-1); }
      for (int q : leaving[t]) { pc.push_back(m.Q[q]); pk.push_back(-units(p.state_bytes(q))); }
      lp.add_row("pz_" + std::to_string(t), pc, pk, 0, 0);
    }
  }

  // Appends the credit of the resident values on the host in step t (-1: stage 0) to a row defining a running
  // sum's column (column - what is held = 0): + Qtot - sum_{optimizer state s near t} a_s Q[s] + Pz_t (the
  // parameters away), i.e. the column less what is on the host.
  void add_state_credit(int t, std::vector<int>& cols, std::vector<double>& coefs) const {
    if (m.Qtot < 0) return;
    cols.push_back(m.Qtot);
    coefs.push_back(1);
    for (int s = 0; s < p.num_states(); ++s)
      if (!p.states[s].parameter() && p.states[s].covers(t)) {
        cols.push_back(m.Q[s]);
        coefs.push_back(-units(p.state_bytes(s)));
      }
    if (t >= 0 && m.Pz[t] >= 0) {
      cols.push_back(m.Pz[t]);
      coefs.push_back(1);
    }
  }
  // The lower bound of a running sum's column: below 0 where a credit may take it there.
  double sum_lo() const { return m.Qtot < 0 ? 0 : -kInf; }
  // Its upper bound: cap, or -1 (infeasible at once) where cap < 0 and no credit can help.
  double sum_hi(double cap) const { return cap < 0 && m.Qtot < 0 ? -1 : cap; }

  // - each implementation's time beyond the default's (delta_ms[i]) on its column (impl_cols[i]: an M[t], P[k] or
  // Z[t][k] column; none where the node has one implementation): the chosen implementation's time off the row.
  static void subtract_impl_deltas(const std::vector<int>& impl_cols, const std::vector<double>& delta_ms,
                                   std::vector<int>& cols, std::vector<double>& coefs) {
    for (size_t i = 0; i < impl_cols.size(); ++i)
      if (delta_ms[i] != 0) {
        cols.push_back(impl_cols[i]);
        coefs.push_back(-delta_ms[i]);
      }
  }

  int h_col(int f) const { return m.H.empty() ? -1 : m.H[f]; }
  int g_col(int t, int f) const { return m.G.empty() || t >= static_cast<int>(m.G.size()) ? -1 : m.G[t][f]; }

  // Offload (docs/planner.md, "Offload"):
  //   once_f:     sum_t G[t][f] = H[f]                   (copied back exactly once when offloaded)
  //   hkept_f:    H[f] + S[0][f] <= 1                    (offloaded instead of kept)
  //   gheld_t_f:  G[t][f] + S[t][f] <= 1,  G[t][f] + R[t][producer(f)] <= 1   (not also held otherwise)
  //   gprev_t_f:  G[t][f] + S[t-1][f] <= 1,  G[t][f] + R[t-1][producer(f)] <= 1   (nor while it is prefetched)
  //   ronhost_s_f: R[s][producer(f)] + H[f] - sum_{t <= s} G[t][f] <= 1   (not recomputed while on the host)
  //   host:       sum_f a_f H[f] + sum_s a_s Q[s] <= host limit
  //   qone_v:     sum of Q over value v's offers <= 1
  // (qtot, Qtot = sum_s a_s Q[s], is a row of variables(): the memory rows' credit, add_state_credit.)
  // Waits: stage 0's copies out share one stream, each running in the node times of its out_slots [r_f, d_f]
  // (X[f][k] >= 0: how long in position k) and, where they do not fit, in a wait Wout_k after a position k at which
  // some are due:
  //   oflow_f:    sum_{r_f <= k <= d_f} X[f][k] - c_out(f) H[f] = 0     (a copy of one slot: c_out(f) H[f] in its row)
  //   ocap_k:     sum_f X[f][k] - Wout_k - sum_i dtime(k, i) P[k][i] <= time(k)
  //               (time: the default implementation's; dtime(k, i): implementation i's time beyond it)
  // This is exact for a stream that may split its copies anywhere (stage0_copies: the earliest deadline first).
  // and the prefetches on their stream: D_t (continuous) is what step t takes beyond its node, and each copy-in span
  // [a, b] (copy_in_spans) holds the copies chosen within it; the resident values' copies, over each of their
  // spans (state_in_spans, state_out_spans), the copies of the offers within it: in on the optimizer state's stream, out on the stream to the host:
  //   ddef_t:     D_t - sum_k time(k) R[t][k] - sum_{k, i} dtime(k, i) Z[t][k][i] - sum_i dtime(t, i) M[t][i] - W[t] = 0
  //               (D_t is free: a faster implementation than the default makes it negative)
  //   cin_a_b:    sum_{a <= t < b} D_t - sum_{G[u][f]: a <= prefetch_first(u, f), u <= b} c_in(f) G[u][f]
  //                         >= - sum_{a <= t < b} time(step t's node)
  //   (for the spans [copy_in_from, b], every copy needed by b: the same through a running slack, cfrom_b below)
  //   qin_a_b:    sum_{a <= t < b} D_t - sum_{offers s within [a, b]} c_in(s) Q[s] >= - sum_{a <= t < b} time(t)
  //               (s within: a <= first_s, u_s <= b)
  //   qout_a_b:   sum_{a <= t < b} D_t - sum_{offers s within [a, b]} c_out(s) Q[s] >= - sum_{a <= t < b} time(t)
  //               (s within: a <= u_s + 1, last_s + 1 <= b)
  void offload() {
    if (!p.offload()) return;
    const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
    std::vector<int> hc;
    std::vector<double> hk;
    for (int f = 0; f < nf; ++f) {
      if (m.H[f] < 0) continue;
      hc.push_back(m.H[f]);
      hk.push_back(units(p.bytes(f)));
      std::vector<int> cols = {m.H[f]};
      std::vector<double> coefs = {-1};
      for (int t = 1; t < T; ++t)
        if (m.G[t][f] >= 0) { cols.push_back(m.G[t][f]); coefs.push_back(1); }
      lp.add_row("once_" + std::to_string(f), cols, coefs, 0, 0);
      if (m.S[0][f] >= 0) lp.add_row("hkept_" + std::to_string(f), {m.H[f], m.S[0][f]}, {1, 1}, -kInf, 1);
    }
    for (int s = 0; s < p.num_states(); ++s) {
      hc.push_back(m.Q[s]);
      hk.push_back(units(p.state_bytes(s)));
    }
    if (p.host_limit_bytes > 0 && !hc.empty()) lp.add_row("host", hc, hk, -kInf, units(p.host_limit_bytes));
    for (int t = 1; t < T; ++t)
      for (int f = 0; f < nf; ++f) {
        const int g = m.G[t][f];
        if (g < 0) continue;
        const int k = p.producer[f];
        for (int c : {m.S[t][f], m.R[t][k]})
          if (c >= 0) lp.add_row(idx("gheld", t, f), {g, c}, {1, 1}, -kInf, 1);
        for (int c : {m.S[t - 1][f], m.R[t - 1][k]})
          if (c >= 0) lp.add_row(idx("gprev", t, f), {g, c}, {1, 1}, -kInf, 1);
      }
    // ronhost_s_f: R[s][producer(f)] + H[f] - sum_{t <= s} G[t][f] <= 1   (not recomputed while on the host)
    for (int f = 0; f < nf; ++f) {
      if (m.H[f] < 0) continue;
      std::vector<int> cols = {m.H[f]};
      std::vector<double> coefs = {1};
      for (int t = 0; t < T; ++t) {
        if (m.G[t][f] >= 0) { cols.push_back(m.G[t][f]); coefs.push_back(-1); }
        const int r = m.R[t][p.producer[f]];
        if (r < 0) continue;
        std::vector<int> rc = cols;
        std::vector<double> rk = coefs;
        rc.push_back(r);
        rk.push_back(1);
        lp.add_row(idx("ronhost", t, f), rc, rk, -kInf, 1);
      }
    }
    stage0_copy_rows();
    copy_in_rows();
    // One offer per value (qone_v).
    std::map<int, std::vector<int>> offers;
    for (int s = 0; s < p.num_states(); ++s) offers[p.states[s].value].push_back(m.Q[s]);
    // The parameters' copies in, each over its span [fetch, reader] of stage-0 positions with the copies whose
    // spans lie within it (fetch_spans; W_pin: the wait before stage 0):
    //   pin_a_b:  sum_{s: a <= fetch_s, reader_s <= b} c_in(s) Q[s] - W_pin - sum_{a <= k < b, i} dtime(k, i) P[k][i]
    //                 <= begin(b) - begin(a)
    for (const NestedSpan& span : p.fetch_spans) {
      if (m.W_pin < 0) m.W_pin = lp.add_col("Wpin", 0, kInf, 1, false);
      std::vector<int> cols = {m.W_pin};
      std::vector<double> coefs = {-1};
      for (int q : span.within) {
        cols.push_back(m.Q[q]);
        coefs.push_back(p.states[q].in_ms);
      }
      for (int k = span.first; k < span.last && k < p.num_fwd(); ++k)  // the positions' implementations
        subtract_impl_deltas(m.P[k], p.fwd_impl_ms[k], cols, coefs);
      lp.add_row("pin_" + std::to_string(span.first) + "_" + std::to_string(span.last), cols, coefs, -kInf,
                 p.fwd_begin_ms(span.last) - p.fwd_begin_ms(span.first));
    }
    for (const auto& [v, cols] : offers)
      if (cols.size() > 1) lp.add_row("qone_" + std::to_string(v), cols, std::vector<double>(cols.size(), 1.0), -kInf, 1);
  }

  // oflow_f and ocap_k (above, offload()).
  void stage0_copy_rows() {
    const int F = p.num_fwd(), nf = static_cast<int>(p.fvals.size());
    std::vector<std::vector<int>> cap_cols(F + 1);
    std::vector<std::vector<double>> cap_coefs(F + 1);
    std::vector<double> most(F + 1, 0.0);  // the copies that may run in position k, all of them
    m.Wout.assign(F + 1, -1);
    for (int f = 0; f < nf; ++f) {
      if (m.H[f] < 0 || p.copy_out_ms[f] <= 0) continue;
      const auto [r, d] = p.out_slots(f);
      if (m.Wout[d] < 0) m.Wout[d] = lp.add_col("Wout_" + std::to_string(d), 0, kInf, 1, false);
      for (int k = r; k <= d; ++k) most[k] += p.copy_out_ms[f];
      if (r == d) {
        cap_cols[d].push_back(m.H[f]);
        cap_coefs[d].push_back(p.copy_out_ms[f]);
        continue;
      }
      std::vector<int> cols = {m.H[f]};
      std::vector<double> coefs = {-p.copy_out_ms[f]};
      for (int k = r; k <= d; ++k) {
        const int x = lp.add_col("X_" + std::to_string(f) + "_" + std::to_string(k), 0, kInf, 0, false);
        m.X.push_back({f, k, x});
        cols.push_back(x);
        coefs.push_back(1);
        cap_cols[k].push_back(x);
        cap_coefs[k].push_back(1);
      }
      lp.add_row("oflow_" + std::to_string(f), cols, coefs, 0, 0);
    }
    for (int k = 0; k <= F; ++k) {
      const double ms = p.fwd_position_ms(k);
      const double fastest = k < F ? *std::min_element(p.fwd_impl_ms[k].begin(), p.fwd_impl_ms[k].end()) : 0.0;
      if (most[k] <= ms + std::min(fastest, 0.0)) continue;  // a row that can never bind (no wait at k: all fit)
      if (m.Wout[k] >= 0) {
        cap_cols[k].push_back(m.Wout[k]);
        cap_coefs[k].push_back(-1);
      }
      if (k < F) subtract_impl_deltas(m.P[k], p.fwd_impl_ms[k], cap_cols[k], cap_coefs[k]);
      lp.add_row("ocap_" + std::to_string(k), cap_cols[k], cap_coefs[k], -kInf, ms);
    }
  }

  // ddef_t and cin_a_b (above, offload()).
  void copy_in_rows() {
    const int T = p.num_steps();
    m.D.assign(T, -1);
    for (int t = 0; t < T; ++t) {
      m.D[t] = lp.add_col("D_" + std::to_string(t), -kInf, kInf, 0, false);
      std::vector<int> cols = {m.D[t], m.W[t]};
      std::vector<double> coefs = {1, -1};
      for (int k : p.candidates[t]) { cols.push_back(m.R[t][k]); coefs.push_back(-p.time_ms(k)); }
      for (const auto& [c, zs] : m.Z[t]) subtract_impl_deltas(zs, p.fwd_impl_ms[p.candidates[t][c]], cols, coefs);
      subtract_impl_deltas(m.M[t], p.impl_ms[t], cols, coefs);
      lp.add_row("ddef_" + std::to_string(t), cols, coefs, 0, 0);
    }
    std::vector<std::vector<std::pair<const CopyIn*, int>>> into(T);  // [need]: each prefetch and its column
    const std::vector<CopyIn> offers = copy_in_offers(p);
    for (const CopyIn& c : offers) into[c.need].push_back({&c, m.G[c.need][c.f]});
    // sum_{a <= t < b} D_t - the copies' time >= - the nodes' time of steps a..b-1
    auto span_row = [&](const std::string& name, int a, int b, std::vector<int> cols, std::vector<double> coefs) {
      double nodes_ms = 0;
      for (int t = a; t < b; ++t) {
        cols.push_back(m.D[t]);
        coefs.push_back(1);
        nodes_ms += p.step_ms[t];
      }
      lp.add_row(name, cols, coefs, -nodes_ms, kInf);
    };
    // The spans from copy_in_from (every copy needed by `need`) through a running slack, one row per need, where
    // rows of their own would repeat each D_t and G column in every later one:
    //   cfrom_b:  Y_b - Y_prev - sum_{prev <= t < b} D_t + sum_{prev < u <= b} c_in(u's copies) G = sum_{prev <= t < b} time(t)
    // with Y >= 0 (Y_b: the time from copy_in_from to b beyond the copies needed by b).
    int prev = p.copy_in_from, y_prev = -1;
    for (auto [a, b] : p.copy_in_spans) {
      std::vector<int> cols;
      std::vector<double> coefs;
      if (a == p.copy_in_from) {
        const int y = lp.add_col("Y_" + std::to_string(b), 0, kInf, 0, false);
        cols = {y};
        coefs = {1};
        if (y_prev >= 0) { cols.push_back(y_prev); coefs.push_back(-1); }
        double nodes_ms = 0;
        for (int t = prev; t < b; ++t) {
          cols.push_back(m.D[t]);
          coefs.push_back(-1);
          nodes_ms += p.step_ms[t];
        }
        for (int u = prev + 1; u <= b; ++u)
          for (auto [c, col] : into[u]) { cols.push_back(col); coefs.push_back(c->ms); }
        lp.add_row("cfrom_" + std::to_string(b), cols, coefs, nodes_ms, nodes_ms);
        prev = b;
        y_prev = y;
        continue;
      }
      for (int u = a + 1; u <= b; ++u)
        for (auto [c, col] : into[u])
          if (c->first >= a) { cols.push_back(col); coefs.push_back(-c->ms); }
      span_row("cin_" + std::to_string(a) + "_" + std::to_string(b), a, b, cols, coefs);
    }
    // The resident values' copies at home on the host, each over its span with those within (the state spans).
    for (const bool out : {false, true})
      for (const NestedSpan& span : out ? p.state_out_spans : p.state_in_spans) {
        std::vector<int> cols;
        std::vector<double> coefs;
        for (int s : span.within) {
          cols.push_back(m.Q[s]);
          coefs.push_back(-(out ? p.states[s].out_ms : p.states[s].in_ms));
        }
        span_row((out ? "qout_" : "qin_") + std::to_string(span.first) + "_" + std::to_string(span.last), span.first,
                 span.last, cols, coefs);
      }
  }

  // impl_t:       sum_i M[t][i] = 1                      (one implementation per step)
  // uses_t_i_f:   S[t][f] + R[t][producer(f)] - M[t][i] >= 0   for every value f only implementation i reads
  // fimpl_k:      sum_i P[k][i] = 1                      (one implementation per forward node)
  // Each recomputation runs the node's implementation: continuous Z[t][k][i] (cost: i's time beyond the default's)
  //   zsum_t_k:   sum_i Z[t][k][i] = R[t][k]
  //   zimpl_t_k_i: Z[t][k][i] <= P[k][i]
  // which makes Z[t][k][i] = R[t][k] P[k][i] wherever R and P are integral.
  // A lean run l of forward node k (fwd_lean) exactly when no implementation reading its optional outputs is chosen:
  //   lean_k_t_i: P[k][l] + M[t][i] <= 1   for each (t, i) in lean_readers[k]
  //   lean_k:     P[k][l] + sum over lean_readers[k] of M[t][i] >= 1
  void implementations() {
    for (int k = 0; k < p.num_fwd(); ++k)
      if (!m.P[k].empty()) lp.add_row("fimpl_" + std::to_string(k), m.P[k], std::vector<double>(m.P[k].size(), 1.0), 1, 1);
    for (int k = 0; k < p.num_fwd(); ++k) {
      if (p.fwd_lean.empty() || p.fwd_lean[k] < 0) continue;
      const int lean = m.P[k].at(static_cast<size_t>(p.fwd_lean[k]));
      std::vector<int> cols = {lean};
      for (const auto& [t, i] : p.lean_readers[k]) {
        const int mc = m.M[t].at(static_cast<size_t>(i));
        lp.add_row(idx("lean", k, t) + "_" + std::to_string(i), {lean, mc}, {1, 1}, -kInf, 1);
        cols.push_back(mc);
      }
      lp.add_row("lean_" + std::to_string(k), cols, std::vector<double>(cols.size(), 1.0), 1, kInf);
      // An optional output the lean run does not write is neither kept nor offloaded:
      //   leankeep_k_f_c: S column c of f + P[k][l] <= 1;   leanhost_k_f: H[f] + P[k][l] <= 1
      for (int v : p.plan->nodes[p.fwd_nodes[k]].optional_outputs) {
        const int f = p.fval_of[v];
        int last = -1;
        for (int t = 0; t < p.num_steps(); ++t)
          if (const int c = m.S[t][f]; c >= 0 && c != last) {
            lp.add_row(idx("leankeep", k, f) + "_" + std::to_string(c), {c, lean}, {1, 1}, -kInf, 1);
            last = c;
          }
        if (h_col(f) >= 0) lp.add_row(idx("leanhost", k, f), {h_col(f), lean}, {1, 1}, -kInf, 1);
      }
    }
    m.Z.assign(p.num_steps(), {});
    for (int t = 0; t < p.num_steps(); ++t)
      for (size_t c = 0; c < p.candidates[t].size(); ++c) {
        const int k = p.candidates[t][c];
        if (m.P[k].empty()) continue;
        std::vector<int> z;
        for (int i = 0; i < p.num_fwd_impls(k); ++i) {
          z.push_back(lp.add_col(idx("Z", t, k) + "_" + std::to_string(i), 0, 1, p.fwd_impl_ms[k][i], false));
          lp.add_row(idx("zimpl", t, k) + "_" + std::to_string(i), {z.back(), m.P[k][i]}, {1, -1}, -kInf, 0);
        }
        std::vector<int> cols = z;
        std::vector<double> coefs(z.size(), 1.0);
        cols.push_back(m.R[t][k]);
        coefs.push_back(-1);
        lp.add_row(idx("zsum", t, k), cols, coefs, 0, 0);
        m.Z[t].push_back({static_cast<int>(c), std::move(z)});
      }
    for (int t = 0; t < p.num_steps(); ++t) {
      if (m.M[t].empty()) continue;
      lp.add_row("impl_" + std::to_string(t), m.M[t], std::vector<double>(m.M[t].size(), 1.0), 1, 1);
      for (int i = 0; i < p.num_impls(t); ++i)
        for (int f : p.impl_extra[t][i]) {
          std::vector<int> cols;
          std::vector<double> coefs;
          add_present(t, f, cols, coefs);
          cols.push_back(m.M[t][i]);
          coefs.push_back(-1);
          lp.add_row("uses_" + std::to_string(t) + "_" + std::to_string(i) + "_" + std::to_string(f), cols, coefs, 0,
                     kInf);
        }
    }
  }

  // present(t, f) = S[t][f] + R[t][producer(f)] (+ G[t][f] with offload), the terms available for a value at step t.
  void add_present(int t, int f, std::vector<int>& cols, std::vector<double>& coefs) const {
    if (m.S[t][f] >= 0) { cols.push_back(m.S[t][f]); coefs.push_back(1); }
    const int r = m.R[t][p.producer[f]];
    if (r >= 0) { cols.push_back(r); coefs.push_back(1); }
    const int g = g_col(t, f);
    if (g >= 0) { cols.push_back(g); coefs.push_back(1); }
  }

  // need_t_f:   S[t][f] + R[t][producer(f)] >= 1          for every forward value f read by step t
  void needs() {
    for (int t = 0; t < p.num_steps(); ++t)
      for (int f : p.needs[t]) {
        std::vector<int> cols;
        std::vector<double> coefs;
        add_present(t, f, cols, coefs);
        lp.add_row(idx("need", t, f), cols, coefs, 1, kInf);
      }
  }

  // rin_t_k_f:  S[t][f] + R[t][producer(f)] - R[t][k] >= 0  for every input f of a recomputed node k
  void recompute_inputs() {
    for (int t = 0; t < p.num_steps(); ++t)
      for (int k : p.candidates[t])
        for (int f : p.fwd_inputs[k]) {
          std::vector<int> cols;
          std::vector<double> coefs;
          add_present(t, f, cols, coefs);
          cols.push_back(m.R[t][k]);
          coefs.push_back(-1);
          lp.add_row("rin_" + std::to_string(t) + "_" + std::to_string(k) + "_" + std::to_string(f), cols, coefs, 0, kInf);
        }
  }

  // keep_t_f:   S[t][f] - S[t-1][f] - R[t-1][producer(f)] (- G[t-1][f]) <= 0   (a value stays only if it was there)
  void keeps() {
    for (int t = 1; t < p.num_steps(); ++t)
      for (size_t f = 0; f < p.fvals.size(); ++f) {
        if (m.S[t][f] < 0 || m.S[t][f] == m.S[t - 1][f]) continue;  // within a segment: one column
        std::vector<int> cols = {m.S[t][f]};
        std::vector<double> coefs = {1};
        if (m.S[t - 1][f] >= 0) { cols.push_back(m.S[t - 1][f]); coefs.push_back(-1); }
        const int r = m.R[t - 1][p.producer[f]];
        if (r >= 0) { cols.push_back(r); coefs.push_back(-1); }
        const int g = g_col(t - 1, static_cast<int>(f));
        if (g >= 0) { cols.push_back(g); coefs.push_back(-1); }
        lp.add_row(idx("keep", t, static_cast<int>(f)), cols, coefs, -kInf, 0);
      }
  }

  // Stage 0, running sums: K_0 = 0 (- Qtot: the optimizer state on the host; - sum a_s Q[s] over the parameters
  // fetched at a position k > 0, which add it back to K_k), K_{k+1} = K_k + sum_{f released at k} a_f S[0][f] (with offload:
  //   + sum_{f released at k} a_f H[f] - sum_{offload_at(f) = k} a_f H[f]);
  //   K_k <= budget - fwd_fixed[k]   (a column bound: the memory row of position k has O(1) terms)
  //   K_k + a_f S[0][f] (+ a_f H[f]) <= budget - fwd_fixed[k]   where k runs in place over f unless f is kept
  //   (or offloaded)
  // With implementations to choose: + sum_i dws_i P[k][i] in the row (one for both), the bound less the smallest dws_i.
  void forward_memory() {
    if (p.num_steps() == 0) return;
    int prev = -1;
    for (int k = 0; k <= p.num_fwd(); ++k) {
      const bool choice = k < p.num_fwd() && !m.P[k].empty();
      const double cap = budget - units(p.fwd_fixed[k]);
      const double least = choice ? units(*std::min_element(p.fwd_impl_ws[k].begin(), p.fwd_impl_ws[k].end())) : 0;
      // Where cap - least < 0 without a credit, infeasible whatever is kept; CBC proves it at once.
      const int K = lp.add_col("K_" + std::to_string(k), sum_lo(), sum_hi(cap - least), 0, false);
      std::vector<int> cols = {K};
      std::vector<double> coefs = {1};
      if (prev < 0) add_state_credit(-1, cols, coefs);  // stage 0: every offloaded state on the host
      // A parameter at home on the host is on the device from position fetch: away before (K_0 less it), back there.
      for (int q : p.parameter_offers)
        if (p.states[q].fetch > 0 && (prev < 0 || p.states[q].fetch == k)) {
          cols.push_back(m.Q[q]);
          coefs.push_back(prev < 0 ? units(p.state_bytes(q)) : -units(p.state_bytes(q)));
        }
      if (prev >= 0) {
        cols.push_back(prev);
        coefs.push_back(-1);
        for (int f : p.fwd_released[k - 1]) {
          if (m.S[0][f] >= 0) { cols.push_back(m.S[0][f]); coefs.push_back(-units(p.bytes(f))); }
          if (h_col(f) >= 0) { cols.push_back(h_col(f)); coefs.push_back(-units(p.bytes(f))); }
        }
        if (p.offload())
          for (int f : p.fwd_offloaded[k - 1])
            if (h_col(f) >= 0) { cols.push_back(h_col(f)); coefs.push_back(units(p.bytes(f))); }
      }
      lp.add_row("Ksum_" + std::to_string(k), cols, coefs, 0, 0);
      const int ip = k < p.num_fwd() ? p.fwd_in_place[k] : -1;
      const bool over = ip >= 0 && m.S[0][ip] >= 0;
      if (over || choice) {
        std::vector<int> rc = {K};
        std::vector<double> rk = {1};
        if (over) { rc.push_back(m.S[0][ip]); rk.push_back(units(p.bytes(ip))); }
        if (over && h_col(ip) >= 0) { rc.push_back(h_col(ip)); rk.push_back(units(p.bytes(ip))); }
        for (int i = 0; choice && i < p.num_fwd_impls(k); ++i) {
          rc.push_back(m.P[k][i]);
          rk.push_back(units(p.fwd_impl_ws[k][i]));
        }
        lp.add_row((over ? "inplace_" : "fws_") + std::to_string(k), rc, rk, -kInf, cap);
      }
      prev = K;
    }
  }

  // Step t, with N = S[t+1] (absent at the last step) and memory as step_peak() counts it.
  // Recomputations, a running sum over the candidates k_0 < k_1 < ... of the step:
  //   A_0 = sum_{f used by t} a_f S[t][f] + sum_{f not used} a_f N[f] + out_{k_0} R[t][k_0]
  //         (- Qtot + sum_{s near t} a_s Q[s]: the optimizer state on the host; also in L_t)
  //         (with offload: + sum_{f used by t} a_f G[t][f] + sum_{G[u][f]: prefetch_first(u, f) <= t < u} a_f G[u][f])
  //   A_i = A_{i-1} + out_{k_i} R[t][k_i] - sum_{f freed after k_{i-1}} a_f (R[t][producer(f)] - K[t][f])
  //   A_i <= budget - bwd_base[t] - min(0, ws_{k_i} + min_j dws_j) (column bound: a lean run's workspace is
  //   negative);  A_i + ws_{k_i} R[t][k_i] <= budget - bwd_base[t]
  //   (+ sum_j dws_j Z[t][k_i][j] where k_i has implementations to choose)
  //   K[t][f] >= N[f] - S[t][f] (- G[t][f])   (continuous: f was recomputed in this step and is kept on)
  // In place: candidate k_i may overwrite f = rec_in_place[t][i] (freed after k_i): a continuous
  //   Y[t][i] <= R[t][k_i],  Y[t][i] <= R[t][producer(f)] - K[t][f],  Y[t][i] <= 1 - N[f]
  // moves f's release from A_{i+1} to A_i:  A_i -= a_f Y[t][i],  A_{i+1} += a_f Y[t][i].
  // The node: L_t = sum_{f not read} a_f N[f] + sum_{f read by some implementation only} a_f U[t][f]
  //   (with offload: + sum_{G[u][f]: prefetch_first(u, f) <= t < u} a_f G[u][f]), where
  //   U[t][f] >= N[f], U[t][f] >= sum_{i reads f} M[t][i]   (continuous: f read or kept on, counted once;
  //   a_f sum_i M[t][i] where f is not kept on past t)
  //   L_t <= budget - bwd_fixed[t] - reads_t   (reads_t: what every implementation reads)
  //   L_t + sum_i dws_i M[t][i] <= budget - bwd_fixed[t] - reads_t   (when workspaces differ)
  void step_memory() {
    const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
    m.K.assign(T, {});
    m.Y.assign(T, {});
    m.U.assign(T, {});
    // [t]: (G column, fval) of the prefetches for later steps that run during step t.
    std::vector<std::vector<std::pair<int, int>>> flying(T);
    for (int t = 1; t < T && p.offload(); ++t)
      for (int f = 0; f < nf; ++f)
        if (m.G[t][f] >= 0)
          for (int u = p.prefetch_first(t, f); u < t; ++u) flying[u].push_back({m.G[t][f], f});
    for (int t = 0; t < T; ++t) {
      auto next = [&](int f) { return t + 1 < T ? m.S[t + 1][f] : -1; };
      auto append = [](std::vector<int>& cols, std::vector<double>& coefs, int col, double coef) {
        if (col >= 0) { cols.push_back(col); coefs.push_back(coef); }
      };
      std::vector<int> kcol(nf, -1);
      const std::vector<int>& cand = p.candidates[t];
      for (size_t i = 0; i < cand.size(); ++i)
        for (int f : p.freed_after[t][i]) {
          if (next(f) < 0) continue;
          kcol[f] = lp.add_col(idx("K", t, f), 0, 1, 0, false);
          m.K[t].push_back({f, kcol[f]});
          std::vector<int> cols = {kcol[f]};
          std::vector<double> coefs = {1};
          append(cols, coefs, next(f), -1);
          append(cols, coefs, m.S[t][f], 1);
          append(cols, coefs, g_col(t, f), 1);  // prefetched, not recomputed
          lp.add_row(idx("Kdef", t, f), cols, coefs, 0, kInf);
        }
      std::vector<int> ycol(cand.size(), -1);
      for (size_t i = 0; i < cand.size(); ++i) {
        const int f = p.rec_in_place[t][i];
        if (f < 0 || m.R[t][cand[i]] < 0 || m.R[t][p.producer[f]] < 0) continue;
        const int Y = ycol[i] = lp.add_col(idx("Y", t, static_cast<int>(i)), 0, 1, 0, false);
        m.Y[t].push_back({static_cast<int>(i), Y});
        lp.add_row(idx("Yrec", t, static_cast<int>(i)), {Y, m.R[t][cand[i]]}, {1, -1}, -kInf, 0);
        std::vector<int> cols = {Y, m.R[t][p.producer[f]]};
        std::vector<double> coefs = {1, -1};
        append(cols, coefs, kcol[f], 1);
        lp.add_row(idx("Yin", t, static_cast<int>(i)), cols, coefs, -kInf, 0);
        if (next(f) >= 0) lp.add_row(idx("Ykept", t, static_cast<int>(i)), {Y, next(f)}, {1, 1}, -kInf, 1);
      }
      std::vector<const std::vector<int>*> zcol(cand.size(), nullptr);  // Z[t][k_i][.] where k_i has a choice
      for (const auto& [i, cols] : m.Z[t]) zcol[i] = &cols;
      const double rec_cap = budget - units(p.bwd_base[t]);
      int prev = -1;
      for (size_t i = 0; i < cand.size(); ++i) {
        const int k = cand[i];
        // A lean run's negative workspace (its unallocated optional outputs, counted in out_k) loosens the bound;
        // the ws row then holds A_i to it with and without the recomputation.
        const int64_t least_ws = std::min<int64_t>(
            0, p.fwd_ws[k] + *std::min_element(p.fwd_impl_ws[k].begin(), p.fwd_impl_ws[k].end()));
        const int A = lp.add_col(idx("A", t, static_cast<int>(i)), sum_lo(), sum_hi(rec_cap - units(least_ws)), 0,
                                 false);
        std::vector<int> cols = {A};
        std::vector<double> coefs = {1};
        if (prev < 0) {
          add_state_credit(t, cols, coefs);
          for (int f = 0; f < nf; ++f) append(cols, coefs, p.used[t][f] ? m.S[t][f] : next(f), -units(p.bytes(f)));
          for (int f = 0; f < nf && p.offload(); ++f)  // prefetched into this step
            if (p.used[t][f]) append(cols, coefs, g_col(t, f), -units(p.bytes(f)));
          for (auto [col, f] : flying[t]) append(cols, coefs, col, -units(p.bytes(f)));  // and for later ones
        } else {
          append(cols, coefs, prev, -1);
          for (int f : p.freed_after[t][i - 1]) {
            append(cols, coefs, m.R[t][p.producer[f]], units(p.bytes(f)));
            append(cols, coefs, kcol[f], -units(p.bytes(f)));
          }
          if (ycol[i - 1] >= 0) append(cols, coefs, ycol[i - 1], -units(p.bytes(p.rec_in_place[t][i - 1])));
        }
        if (ycol[i] >= 0) append(cols, coefs, ycol[i], units(p.bytes(p.rec_in_place[t][i])));
        append(cols, coefs, m.R[t][k], -units(p.out_bytes[k]));
        lp.add_row(idx("Asum", t, static_cast<int>(i)), cols, coefs, 0, 0);
        std::vector<int> wc = {A, m.R[t][k]};
        std::vector<double> wk = {1, units(p.fwd_ws[k])};
        if (zcol[i])
          for (int j = 0; j < p.num_fwd_impls(k); ++j) {
            wc.push_back((*zcol[i])[j]);
            wk.push_back(units(p.fwd_impl_ws[k][j]));
          }
        bool any_ws = p.fwd_ws[k] > 0 || least_ws < 0;
        for (int64_t d : p.fwd_impl_ws[k]) any_ws |= p.fwd_ws[k] + d > 0;
        if (any_ws) lp.add_row(idx("ws", t, k), wc, wk, -kInf, rec_cap);
        prev = A;
      }

      std::vector<int> cols;
      std::vector<double> coefs;
      for (auto [col, f] : flying[t]) append(cols, coefs, col, -units(p.bytes(f)));
      int64_t reads = 0;
      for (int f = 0; f < nf; ++f) {
        if (p.read_by_all(t, f)) {
          reads += p.bytes(f);
          continue;
        }
        std::vector<int> readers;  // M[t][i] of the implementations that read f (some, not all)
        if (p.read[t][f])
          for (int i = 0; i < static_cast<int>(m.M[t].size()); ++i)
            if (p.read_by(t, i, f)) readers.push_back(m.M[t][i]);
        if (readers.empty() || next(f) < 0) {
          append(cols, coefs, next(f), -units(p.bytes(f)));
          for (int c : readers) append(cols, coefs, c, -units(p.bytes(f)));
          continue;
        }
        // Read by the chosen implementation or kept on, once: U >= N[f], U >= sum of its readers' M.
        const int U = lp.add_col(idx("U", t, f), 0, 1, 0, false);
        m.U[t].push_back({f, U});
        lp.add_row(idx("Ukept", t, f), {U, next(f)}, {1, -1}, 0, kInf);
        std::vector<int> rc = {U};
        std::vector<double> rk = {1};
        for (int c : readers) { rc.push_back(c); rk.push_back(-1); }
        lp.add_row(idx("Uread", t, f), rc, rk, 0, kInf);
        append(cols, coefs, U, -units(p.bytes(f)));
      }
      const double node_cap = budget - units(p.bwd_fixed[t] + reads);
      bool ws_differ = false;
      for (int i = 0; i < static_cast<int>(m.M[t].size()); ++i) ws_differ |= p.impl_ws[t][i] != 0;
      // Nothing variable at the node: no row, unless the implementations' workspaces differ (algorithm variants
      // read the same values; their workspace alone decides whether the node fits).
      // (The optimizer state's credit only lowers it.)
      if (cols.empty() && node_cap >= 0 && !ws_differ) continue;
      // An implementation with less workspace than the default leaves more room (wsimpl below is exact).
      int64_t least_ws = 0;
      for (int i = 0; i < static_cast<int>(m.M[t].size()); ++i) least_ws = std::min(least_ws, p.impl_ws[t][i]);
      const double hi = node_cap - units(least_ws);
      const int L = lp.add_col("L_" + std::to_string(t), sum_lo(), sum_hi(hi), 0, false);
      cols.insert(cols.begin(), L);
      coefs.insert(coefs.begin(), 1);
      add_state_credit(t, cols, coefs);
      lp.add_row("Lsum_" + std::to_string(t), cols, coefs, 0, 0);
      if (ws_differ) {
        std::vector<int> wc = {L};
        std::vector<double> wk = {1};
        for (int i = 0; i < static_cast<int>(m.M[t].size()); ++i) {
          wc.push_back(m.M[t][i]);
          wk.push_back(static_cast<double>(p.impl_ws[t][i] / kAlignBytes));
        }
        lp.add_row("wsimpl_" + std::to_string(t), wc, wk, -kInf, node_cap);
      }
    }
  }
};

}  // namespace

LinearProgram checkpoint_milp(const CheckpointProblem& p, int64_t budget_bytes, MilpLayout* layout) {
  Builder b{p, units(budget_bytes), {}, {}};
  b.variables();
  b.needs();
  b.implementations();
  b.recompute_inputs();
  b.keeps();
  b.forward_memory();
  b.step_memory();
  b.offload();
  if (layout) *layout = b.m;
  return std::move(b.lp);
}

std::vector<std::pair<int, int>> keep_segments(const CheckpointProblem& p, int f) {
  std::vector<std::pair<int, int>> out;
  const int last = std::min(p.last_use[f], p.num_steps() - 1);
  for (int t = 0; t <= last; ++t) {
    const bool starts = t == 0 || p.used[t - 1][f] ||
                        std::binary_search(p.candidates[t - 1].begin(), p.candidates[t - 1].end(), p.producer[f]);
    if (starts) out.push_back({t, t});
    else out.back().second = t;
  }
  return out;
}

void canonical_keeps(const CheckpointProblem& p, Assignment& a) {
  for (int f = 0; f < static_cast<int>(p.fvals.size()); ++f)
    for (auto [first, last] : keep_segments(p, f)) {
      bool all = true;
      for (int t = first; t <= last && all; ++t) all = a.S[t][f];
      if (!all)
        for (int t = first; t <= last; ++t) a.S[t][f] = 0;
    }
}

std::vector<double> to_columns(const CheckpointProblem& p, const MilpLayout& m, const LinearProgram& lp,
                               const Assignment& assignment) {
  Assignment a = assignment;
  canonical_keeps(p, a);  // the MILP has one S column per keep segment
  std::vector<double> x(lp.col_names.size(), 0.0);
  for (int t = 0; t < p.num_steps(); ++t) {
    for (size_t f = 0; f < p.fvals.size(); ++f)
      if (m.S[t][f] >= 0) x[m.S[t][f]] = a.S[t][f];
    for (int k = 0; k < p.num_fwd(); ++k)
      if (m.R[t][k] >= 0) x[m.R[t][k]] = a.R[t][k];
    for (size_t i = 0; i < m.M[t].size(); ++i) x[m.M[t][i]] = a.M[t] == static_cast<int>(i);
    for (const auto& [c, cols] : m.Z[t])
      for (size_t i = 0; i < cols.size(); ++i)
        x[cols[i]] = a.R[t][p.candidates[t][c]] && a.P[p.candidates[t][c]] == static_cast<int>(i);
  }
  for (int k = 0; k < p.num_fwd(); ++k)
    for (size_t i = 0; i < m.P[k].size(); ++i) x[m.P[k][i]] = a.P[k] == static_cast<int>(i);
  for (int t = 0; t < p.num_steps(); ++t) {
    for (auto [f, col] : m.K[t])
      x[col] = (t + 1 < p.num_steps() && a.S[t + 1][f] && !a.S[t][f] && !a.prefetched(t, f)) ? 1 : 0;
    for (auto [i, col] : m.Y[t])
      x[col] = in_place_at(p, t, static_cast<size_t>(i), a.R[t], t + 1 < p.num_steps() ? &a.S[t + 1] : nullptr) >= 0;
    for (auto [f, col] : m.U[t]) x[col] = (t + 1 < p.num_steps() && a.S[t + 1][f]) || p.read_by(t, a.M[t], f);
  }
  if (!m.H.empty()) {
    for (size_t f = 0; f < p.fvals.size(); ++f)
      if (m.H[f] >= 0) x[m.H[f]] = a.on_host(static_cast<int>(f));
    for (int t = 0; t < p.num_steps(); ++t)
      for (size_t f = 0; f < p.fvals.size(); ++f)
        if (m.G[t][f] >= 0) x[m.G[t][f]] = a.prefetched(t, static_cast<int>(f));
    for (size_t s = 0; s < m.Q.size(); ++s) x[m.Q[s]] = !a.Q.empty() && a.Q[s];
    const CopyWaits w = copy_waits(p, a);
    const Stage0Copies out = stage0_copies(p, a.H, &a.P);
    for (size_t k = 0; k < m.Wout.size(); ++k)
      if (m.Wout[k] >= 0) x[m.Wout[k]] = out.wait[k];
    std::map<std::pair<int, int>, int> xcol;  // (fval, position) -> X column
    for (const auto& [f, k, col] : m.X) xcol[{f, k}] = col;
    for (size_t k = 0; k < out.run.size(); ++k)
      for (auto [f, ms] : out.run[k])
        if (auto it = xcol.find({f, static_cast<int>(k)}); it != xcol.end()) x[it->second] += ms;
    if (m.W_pin >= 0) x[m.W_pin] = w.parameters_in;
    for (int t = 0; t < p.num_steps(); ++t) {
      if (m.W[t] >= 0) x[m.W[t]] = w.step[t];
      if (m.D[t] >= 0) x[m.D[t]] = w.begin_ms[t + 1] - w.begin_ms[t] - p.step_ms[t];
    }
  }
  // Continuous running sums (and the copy-in rows' running slack, cfrom) follow from the binaries: evaluate the
  // equality rows in order. A row defines the first
  // continuous column with coefficient +1 whose value is not known yet: neither set above (K, Y, U, Z, the waits:
  // a Y of a one-unit value has +1 in its Asum row, and a lower index than A) nor defined by an earlier row (Qtot,
  // in the rows that credit it). A row with none (zsum, once) holds by construction.
  std::vector<char> known(x.size(), 0);
  for (size_t c = 0; c < x.size(); ++c) known[c] = lp.integer[c];
  for (int t = 0; t < p.num_steps(); ++t) {
    for (const std::vector<std::pair<int, int>>* cols : {&m.K[t], &m.Y[t], &m.U[t]})
      for (auto [i, col] : *cols) known[col] = 1;
    for (const auto& [c, cols] : m.Z[t])
      for (int col : cols) known[col] = 1;
  }
  for (int col : m.Wout)
    if (col >= 0) known[col] = 1;
  for (const auto& [f, k, col] : m.X) known[col] = 1;
  if (m.W_pin >= 0) known[m.W_pin] = 1;
  for (const std::vector<int>* cols : {&m.W, &m.D})
    for (int col : *cols)
      if (col >= 0) known[col] = 1;
  for (const LinearProgram::Row& r : lp.rows) {
    if (r.lo != r.hi) continue;
    int defined = -1;
    double rest = 0;
    for (size_t i = 0; i < r.cols.size(); ++i)
      if (!known[r.cols[i]] && r.coefs[i] == 1 && defined < 0) defined = r.cols[i];
    if (defined < 0) continue;
    for (size_t i = 0; i < r.cols.size(); ++i)
      if (r.cols[i] != defined) rest += r.coefs[i] * x[r.cols[i]];
    x[defined] = r.lo - rest;
    known[defined] = 1;
  }
  return x;
}

Assignment from_columns(const CheckpointProblem& p, const MilpLayout& m, const std::vector<double>& x) {
  Assignment a = empty_assignment(p);
  for (int t = 0; t < p.num_steps(); ++t) {
    for (size_t f = 0; f < p.fvals.size(); ++f)
      if (m.S[t][f] >= 0) a.S[t][f] = x[m.S[t][f]] > 0.5;
    for (int k = 0; k < p.num_fwd(); ++k)
      if (m.R[t][k] >= 0) a.R[t][k] = x[m.R[t][k]] > 0.5;
    for (size_t i = 0; i < m.M[t].size(); ++i)
      if (x[m.M[t][i]] > 0.5) a.M[t] = static_cast<int>(i);
  }
  for (int k = 0; k < p.num_fwd(); ++k)
    for (size_t i = 0; i < m.P[k].size(); ++i)
      if (x[m.P[k][i]] > 0.5) a.P[k] = static_cast<int>(i);
  if (!m.H.empty()) {
    for (size_t f = 0; f < p.fvals.size(); ++f)
      if (m.H[f] >= 0) a.H[f] = x[m.H[f]] > 0.5;
    for (int t = 0; t < p.num_steps(); ++t)
      for (size_t f = 0; f < p.fvals.size(); ++f)
        if (m.G[t][f] >= 0) a.G[t][f] = x[m.G[t][f]] > 0.5;
    for (size_t s = 0; s < m.Q.size(); ++s) a.Q[s] = x[m.Q[s]] > 0.5;
  }
  return a;
}

std::vector<LinearProgram::Row> chain_cuts(const CheckpointProblem& p, const MilpLayout& m, const double* x,
                                           size_t max_cuts) {
  constexpr double kViolation = 1e-4;
  const int T = p.num_steps(), F = p.num_fwd(), nf = static_cast<int>(p.fvals.size());
  // cum[k][u]: the relaxation's recomputations of forward node k in steps 0..u-1.
  std::vector<std::vector<double>> cum(F, std::vector<double>(T + 1, 0.0));
  for (int k = 0; k < F; ++k)
    for (int t = 0; t < T; ++t) cum[k][t + 1] = cum[k][t] + (m.R[t][k] >= 0 ? x[m.R[t][k]] : 0.0);
  // With offload a value is also present after a prefetch: its own term is S[s][f] + sum_{s <= u <= t} G[u][f]
  // (cum_g[f][u]: its prefetches into steps 0..u-1).
  std::vector<std::vector<double>> cum_g(m.G.empty() ? 0 : nf, std::vector<double>(T + 1, 0.0));
  for (int f = 0; f < static_cast<int>(cum_g.size()); ++f)
    for (int t = 0; t < T; ++t) cum_g[f][t + 1] = cum_g[f][t] + (m.G[t][f] >= 0 ? x[m.G[t][f]] : 0.0);
  std::vector<int> order(nf);  // values by producer: every input of a value's producer comes before it
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p.producer[a] < p.producer[b]; });

  struct Target {
    int f, col;  // col: the right-hand side's column (M or R), -1 for the constant 1
    double rhs;
  };
  struct Cut {
    double efficacy;
    LinearProgram::Row row;
  };
  std::vector<Cut> cuts;
  std::vector<double> chain(nf);  // the cheapest chain of each value at the s being searched
  std::vector<int> via(nf);       // its next value, -1 where it ends at its producer's recomputations
  std::vector<char> ancestor(nf);
  // The cheapest chains of every listed value (inputs first) for step t from step s.
  auto shortest = [&](const std::vector<int>& listed, int t, int s) {
    for (int f : listed) {
      const int k = p.producer[f];
      double best = cum[k][t + 1] - cum[k][s];
      int next = -1;
      for (int g : p.fwd_inputs[k])
        if (chain[g] < best) {
          best = chain[g];
          next = g;
        }
      chain[f] = (m.S[s][f] >= 0 ? x[m.S[s][f]] : 0.0) + (cum_g.empty() ? 0.0 : cum_g[f][t + 1] - cum_g[f][s]) + best;
      via[f] = next;
    }
  };
  for (int t = 0; t < T; ++t) {
    std::vector<Target> targets;
    for (int f : p.needs[t]) targets.push_back({f, -1, 1.0});
    for (int i = 0; i < static_cast<int>(m.M[t].size()); ++i)
      if (x[m.M[t][i]] > kViolation)
        for (int f : p.impl_extra[t][i]) targets.push_back({f, m.M[t][i], x[m.M[t][i]]});
    for (int k : p.candidates[t])
      if (x[m.R[t][k]] > kViolation)
        for (int g : p.fwd_inputs[k]) targets.push_back({g, m.R[t][k], x[m.R[t][k]]});
    if (targets.empty()) continue;
    std::fill(ancestor.begin(), ancestor.end(), 0);
    std::vector<int> stack;
    for (const Target& tg : targets) stack.push_back(tg.f);
    while (!stack.empty()) {
      const int f = stack.back();
      stack.pop_back();
      if (ancestor[f]) continue;
      ancestor[f] = 1;
      for (int g : p.fwd_inputs[p.producer[f]]) stack.push_back(g);
    }
    std::vector<int> listed;
    for (int f : order)
      if (ancestor[f]) listed.push_back(f);
    std::vector<std::pair<double, int>> best(targets.size(), {kViolation, -1});  // (violation, s)
    for (int s = 0; s <= t; ++s) {
      shortest(listed, t, s);
      for (size_t j = 0; j < targets.size(); ++j) {
        const double violation = targets[j].rhs - chain[targets[j].f];
        if (violation > best[j].first) best[j] = {violation, s};
      }
    }
    // Each violated target's chain, from the shortest paths of its s (computed once per s), in target order.
    std::vector<size_t> by_s;
    for (size_t j = 0; j < targets.size(); ++j)
      if (best[j].second >= 0) by_s.push_back(j);
    std::stable_sort(by_s.begin(), by_s.end(), [&](size_t a, size_t b) { return best[a].second < best[b].second; });
    std::vector<std::optional<Cut>> found(targets.size());
    for (size_t i = 0; i < by_s.size(); ++i) {
      const size_t j = by_s[i];
      const int s = best[j].second;
      if (i == 0 || best[by_s[i - 1]].second != s) shortest(listed, t, s);
      LinearProgram::Row row{"chain_" + std::to_string(t) + "_" + std::to_string(targets[j].f) + "_" + std::to_string(s),
                             {}, {}, targets[j].col < 0 ? 1.0 : 0.0, 1e30};
      for (int f = targets[j].f;; f = via[f]) {
        if (m.S[s][f] >= 0) {
          row.cols.push_back(m.S[s][f]);
          row.coefs.push_back(1);
        }
        for (int u = s; u <= t && !m.G.empty(); ++u)
          if (m.G[u][f] >= 0) {
            row.cols.push_back(m.G[u][f]);
            row.coefs.push_back(1);
          }
        if (via[f] >= 0) continue;
        for (int u = s; u <= t; ++u)
          if (m.R[u][p.producer[f]] >= 0) {
            row.cols.push_back(m.R[u][p.producer[f]]);
            row.coefs.push_back(1);
          }
        break;
      }
      if (targets[j].col >= 0) {
        row.cols.push_back(targets[j].col);
        row.coefs.push_back(-1);
      }
      found[j] = Cut{best[j].first / std::sqrt(static_cast<double>(row.cols.size())), std::move(row)};
    }
    for (std::optional<Cut>& cut : found)
      if (cut) cuts.push_back(std::move(*cut));
  }
  std::sort(cuts.begin(), cuts.end(), [](const Cut& a, const Cut& b) { return a.efficacy > b.efficacy; });
  std::vector<LinearProgram::Row> rows;
  for (size_t i = 0; i < cuts.size() && i < max_cuts; ++i) rows.push_back(std::move(cuts[i].row));
  return rows;
}

}  // namespace monet
