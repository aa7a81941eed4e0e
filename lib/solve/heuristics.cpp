#include "solve/heuristics.h"

#include "core/error.h"

#include <cmath>
#include <algorithm>
#include <functional>
#include <limits>

namespace monet {

namespace {
// Last step that reads each forward value (-1 if none).
std::vector<int> last_read(const CheckpointProblem& p) {
  std::vector<int> last(p.fvals.size(), -1);
  for (int t = 0; t < p.num_steps(); ++t)
    for (int f : p.needs[t]) last[f] = std::max(last[f], t);
  return last;
}

// Time to recompute forward value f from the values marked available: its producer plus every ancestor whose
// output is not available, each once. seen/stamp: scratch space reused across calls (seen has one entry per node).
double chain_ms(const CheckpointProblem& p, int f, const std::vector<char>& available, std::vector<int>& seen,
                int& stamp) {
  ++stamp;
  double ms = 0;
  thread_local std::vector<int> stack;  // scratch: the heuristics call this for every present value per eviction
  stack.assign(1, p.producer[f]);
  while (!stack.empty()) {
    const int k = stack.back();
    stack.pop_back();
    if (seen[k] == stamp) continue;
    seen[k] = stamp;
    ms += p.time_ms(k);
    for (int in : p.fwd_inputs[k])
      if (!available[in]) stack.push_back(p.producer[in]);
  }
  return ms;
}

// What step t recomputes to obtain what it reads from the present values: marks the forward positions in rec and
// the present values it uses in *used (if given). Returns a value it would need from outside the window, or -1.
// `marked`, when given, receives the positions it marks.
int recompute_missing(const CheckpointProblem& p, int t, const std::vector<char>& present, std::vector<char>& rec,
                      std::vector<char>* used = nullptr, std::vector<int>* marked = nullptr) {
  int missing = -1;
  std::function<void(int)> ensure = [&](int f) {
    if (used) (*used)[f] = 1;
    if (missing >= 0 || present[f] || rec[p.producer[f]]) return;
    const int k = p.producer[f];
    if (!std::binary_search(p.candidates[t].begin(), p.candidates[t].end(), k)) {
      missing = f;
      return;
    }
    for (int in : p.fwd_inputs[k]) ensure(in);
    rec[k] = 1;
    if (marked) marked->push_back(k);
  };
  for (int f : p.needs[t]) ensure(f);
  return missing;
}
}  // namespace

Assignment store_all_assignment(const CheckpointProblem& p) {
  MONET_CHECK(!p.has_choices(), "store_all_assignment needs fixed implementations");
  Assignment a = empty_assignment(p);
  const std::vector<int> last = last_read(p);
  for (size_t f = 0; f < p.fvals.size(); ++f)
    for (int t = 0; t <= last[f]; ++t) a.S[t][f] = 1;
  return a;
}

std::optional<Assignment> checkpoint_assignment(const CheckpointProblem& p, const std::vector<char>& checkpoints,
                                                bool keep_recomputed, int* missing) {
  MONET_CHECK(!p.has_choices(), "checkpoint_assignment needs fixed implementations");
  Assignment a = empty_assignment(p);
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  if (T == 0) return a;
  const std::vector<int> last = last_read(p);
  // The values each forward position makes; the present values as a list too (S and present are 0 elsewhere), so
  // that a step costs what is present and recomputed, not every value.
  const std::vector<std::vector<int>> made = p.values_by_producer();
  std::vector<char> present(nf, 0);
  std::vector<int> live, marked;
  for (int f = 0; f < nf; ++f)
    if (checkpoints[f] && p.has_s(0, f)) {
      present[f] = a.S[0][f] = 1;
      live.push_back(f);
    }
  for (int t = 0; t < T; ++t) {
    if (t > 0) {
      size_t kept = 0;
      for (int f : live) {
        // Checkpoints stay while they may serve a recomputation; recomputed values while backward still reads them.
        if (checkpoints[f] ? p.has_s(t, f) : keep_recomputed && last[f] >= t) {
          a.S[t][f] = 1;
          live[kept++] = f;
        } else {
          present[f] = 0;
        }
      }
      live.resize(kept);
    }
    marked.clear();
    if (int f = recompute_missing(p, t, present, a.R[t], nullptr, &marked); f >= 0) {
      if (missing) *missing = f;
      return std::nullopt;
    }
    for (int k : marked)
      for (int g : made[k])
        if (!present[g]) {
          present[g] = 1;
          live.push_back(g);
        }
  }
  trim(p, a);
  return a;
}

Assignment repaired_assignment(const CheckpointProblem& p, std::vector<char> checkpoints, bool keep_recomputed) {
  for (;;) {
    int missing = -1;
    if (auto a = checkpoint_assignment(p, checkpoints, keep_recomputed, &missing)) return *a;
    MONET_CHECK(missing >= 0 && !checkpoints[missing], "repair made no progress");
    checkpoints[missing] = 1;  // a stage-0 value is always present at step 0 if kept, so this converges
  }
}

std::optional<Assignment> segment_assignment(const CheckpointProblem& p, int segment) {
  std::vector<char> checkpoints(p.fvals.size(), 0);
  for (size_t f = 0; f < p.fvals.size(); ++f) checkpoints[f] = (p.producer[f] + 1) % segment == 0;
  return checkpoint_assignment(p, checkpoints);
}

std::optional<Assignment> sqrtn_assignment(const CheckpointProblem& p) {
  return segment_assignment(p, std::max(1, static_cast<int>(std::lround(std::sqrt(p.num_fwd())))));
}

std::vector<double> cost_per_byte_scores(const CheckpointProblem& p) {
  std::vector<double> score(p.fvals.size());
  for (size_t f = 0; f < p.fvals.size(); ++f)
    score[f] = (p.time_ms(p.producer[f]) + 1e-6) / static_cast<double>(std::max<int64_t>(p.bytes(static_cast<int>(f)), 1));
  return score;
}

std::vector<double> greedy_chain_scores(const CheckpointProblem& p) {
  const int nf = static_cast<int>(p.fvals.size());
  const std::vector<int> last = last_read(p);
  std::vector<char> kept(nf, 0);
  for (int f = 0; f < nf; ++f) kept[f] = last[f] >= 0;
  std::vector<int> seen(p.num_fwd(), -1);
  int stamp = 0;
  std::vector<double> score(nf, -1.0);  // values backward never reads rank last
  int rank = 0, remaining = 0;
  for (int f = 0; f < nf; ++f) remaining += kept[f];
  while (remaining > 0) {
    int best = -1;
    double best_ratio = 0;
    for (int f = 0; f < nf; ++f) {
      if (!kept[f]) continue;
      const double ratio = (chain_ms(p, f, kept, seen, stamp) + 1e-9) / static_cast<double>(std::max<int64_t>(p.bytes(f), 1));
      if (best < 0 || ratio < best_ratio) {
        best = f;
        best_ratio = ratio;
      }
    }
    kept[best] = 0;
    --remaining;
    score[best] = rank++;  // dropped early = low score
  }
  return score;
}

namespace {

// pressure_assignment with the values pinned so far (pinned_until; the pins its restarts add are left in it).
std::optional<Assignment> pressure_run(const CheckpointProblem& p, int64_t budget_bytes, Eviction rule,
                                       std::vector<int>& pinned_until) {
  MONET_CHECK(!p.has_choices(), "pressure_assignment needs fixed implementations");
  const int F = p.num_fwd(), T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  std::vector<std::vector<int>> reads(nf);  // steps reading each value (ascending)
  for (int t = 0; t < T; ++t)
    for (int f : p.needs[t]) reads[f].push_back(t);
  const std::vector<std::vector<int>> outputs = p.values_by_producer();
  std::vector<char> present(nf, 0);
  // pinned_until[f]: f may not be evicted at steps <= pinned_until[f] (stage 0 counts as 0).
  std::vector<int> seen(F, -1);
  int stamp = 0;
  auto score = [&](int f, int t) {
    auto next = std::lower_bound(reads[f].begin(), reads[f].end(), t);
    if (next == reads[f].end()) return -1.0;  // never read again (at most an input of recomputations): first to go
    const double dist = *next - t + 1, bytes = static_cast<double>(std::max<int64_t>(p.bytes(f), 1));
    switch (rule) {
      case Eviction::cost_per_byte_distance: return (chain_ms(p, f, present, seen, stamp) + 1e-9) / (bytes * dist);
      case Eviction::cost_per_byte: return (chain_ms(p, f, present, seen, stamp) + 1e-9) / bytes;
      case Eviction::farthest_read: return 1.0 / dist / (1.0 + 1e-15 * bytes);
    }
    return 0.0;
  };
  // Evicts the present value with the lowest score that is neither pinned nor protected; its bytes, or -1.
  auto evict_one = [&](int t, const std::vector<char>& protect) -> int64_t {
    int best = -1;
    double best_score = 0;
    for (int f = 0; f < nf; ++f) {
      if (!present[f] || pinned_until[f] >= t || protect[f]) continue;
      const double s = score(f, t);
      if (best < 0 || s < best_score) {
        best = f;
        best_score = s;
      }
    }
    if (best < 0) return -1;
    present[best] = 0;
    return p.bytes(best);
  };
  // Each round that fails pins one value until the failing step and starts again: a value whose recomputation
  // fell outside the window, or the recomputed value whose presence shrinks an over-budget step the most.
  // Scratch of each step, allocated once: the positions it recomputes, the values it protects, what it carries on.
  const std::vector<char> none(nf, 0);
  std::vector<char> rec(F, 0), protect(nf, 0), next(nf, 0);
  for (int round = 0; round <= 8 * nf + 8; ++round) {
    Assignment a = empty_assignment(p);
    std::fill(present.begin(), present.end(), 0);
    int64_t held = 0;
    for (int k = 0; k <= F; ++k) {  // stage 0
      // A value k may overwrite in place counts here while it may still be kept (evicting it frees it).
      const int ip = k < F ? p.fwd_in_place[k] : -1;
      const int64_t in_place = ip >= 0 && T > 0 && p.has_s(0, ip) ? p.bytes(ip) : 0;
      while (p.fwd_fixed[k] + held + in_place > budget_bytes) {
        const int64_t freed = evict_one(0, none);
        if (freed < 0) return std::nullopt;  // what is pinned does not fit: more pins cannot help
        held -= freed;
      }
      for (int f : p.fwd_released[k])
        if (p.has_s(0, f)) {
          present[f] = 1;
          held += p.bytes(f);
        }
    }
    int pin = -1, pin_at = -1;
    for (int t = 0; t < T && pin < 0; ++t) {
      for (int f = 0; f < nf; ++f)
        if (present[f] && !p.has_s(t, f)) present[f] = 0;
      std::fill(rec.begin(), rec.end(), 0);
      std::fill(protect.begin(), protect.end(), 0);
      if (int missing = recompute_missing(p, t, present, rec, &protect); missing >= 0) {
        pin = missing;
        pin_at = t;
        break;
      }
      // What is carried into step t+1: what stays present, and the recomputed values a later step reads.
      auto read_later = [&](int f) { return std::upper_bound(reads[f].begin(), reads[f].end(), t) != reads[f].end(); };
      std::fill(next.begin(), next.end(), 0);
      auto peak = [&](const std::vector<char>& r) {
        if (t + 1 < T)
          for (int f = 0; f < nf; ++f)
            next[f] = p.has_s(t + 1, f) && (present[f] || (r[p.producer[f]] && read_later(f)));
        return step_peak(p, t, present, r, t + 1 < T ? &next : nullptr, 0);
      };
      for (int64_t now = peak(rec); now > budget_bytes; now = peak(rec)) {
        if (evict_one(t, protect) >= 0) continue;
        // Over budget with only what the step uses: keep one recomputed value until here instead.
        int64_t best = now;
        for (int f = 0; f < nf; ++f) {
          if (!rec[p.producer[f]] || !p.has_s(t, f) || pinned_until[f] >= t) continue;
          std::vector<char> rec2(F, 0), protect2(nf, 0);
          present[f] = 1;
          if (recompute_missing(p, t, present, rec2, &protect2) < 0) {
            const int64_t with = peak(rec2);
            if (with < best) {
              best = with;
              pin = f;
            }
          }
          present[f] = 0;
        }
        if (pin < 0) return std::nullopt;
        pin_at = t;
        break;
      }
      if (pin >= 0) break;
      a.S[t] = present;
      a.R[t] = rec;
      for (int k = 0; k < F; ++k)
        if (rec[k])
          for (int f : outputs[k])
            if (read_later(f)) present[f] = 1;
    }
    if (pin >= 0) {
      MONET_CHECK(pinned_until[pin] < pin_at, "pressure_assignment: a pinned value went missing");
      pinned_until[pin] = pin_at;
      continue;
    }
    trim(p, a);
    const Evaluation e = evaluate(p, a);
    MONET_CHECK(e.feasible, "pressure_assignment: ", e.violation);
    if (e.peak_bytes > budget_bytes) return std::nullopt;
    return a;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Assignment> pressure_assignment(const CheckpointProblem& p, int64_t budget_bytes, Eviction rule) {
  std::vector<int> pins(p.fvals.size(), -1);
  return pressure_run(p, budget_bytes, rule, pins);
}

std::optional<Assignment> pressure_search(const CheckpointProblem& p, int64_t budget_bytes, Eviction rule,
                                          int max_runs, Deadline deadline) {
  const int nf = static_cast<int>(p.fvals.size()), T = p.num_steps();
  std::vector<int> pins(nf, -1);
  std::optional<Assignment> best = pressure_run(p, budget_bytes, rule, pins);
  if (!best) return best;
  double best_ms = evaluate(p, *best).recompute_ms;
  int runs = 1;
  while (runs < max_runs) {
    // Moves: keep a value a step recomputes (and reads) until that step; the steps that recompute most first.
    std::vector<std::pair<double, std::pair<int, int>>> moves;
    for (int t = 0; t < T; ++t) {
      double step_ms = 0;
      for (int k : p.candidates[t])
        if (best->R[t][k]) step_ms += p.time_ms(k);
      if (step_ms <= 0) continue;
      for (int f : p.needs[t])
        if (best->R[t][p.producer[f]] && pins[f] < t) moves.push_back({step_ms, {f, t}});
    }
    std::stable_sort(moves.begin(), moves.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    bool improved = false;
    for (const auto& [ms, move] : moves) {
      if (runs >= max_runs || past(deadline)) break;
      std::vector<int> trial = pins;
      trial[move.first] = move.second;
      ++runs;
      std::optional<Assignment> a = pressure_run(p, budget_bytes, rule, trial);
      if (!a) continue;
      const double a_ms = evaluate(p, *a).recompute_ms;
      if (a_ms < best_ms - 1e-9) {
        best = std::move(a);
        best_ms = a_ms;
        pins = std::move(trial);
        improved = true;
        break;
      }
    }
    if (!improved) break;
  }
  return best;
}

namespace {

constexpr int kSearchRuns = 200;  // resnet50 b184: ~3 ms a run; the search stops earlier when no move helps

// Keeps the cheapest feasible assignment whose (conservative) peak fits the budget.
struct CheapestWithin {
  const CheckpointProblem& p;
  int64_t budget_bytes;
  std::optional<Assignment> best = std::nullopt;
  double best_ms = 0;

  // Whether `a` fits (then it is kept if it is the cheapest so far).
  // Under offload, one that does not fit is tried again with its idle kept values offloaded (offload_idle_kept);
  // where that fits and could be the cheapest without its waits, also with only the fewest of them that fit (a
  // bisection of ~10 evaluations, so only where it may pay), and the cheaper of the two is taken.
  bool consider(std::optional<Assignment> a) {
    if (!a) return false;
    Evaluation e = evaluate(p, *a);
    if (e.feasible && e.peak_bytes > budget_bytes && p.offload()) {
      Assignment every = offload_idle_kept(p, *a);
      Evaluation every_e = evaluate(p, every);
      if (every_e.feasible && every_e.peak_bytes <= budget_bytes &&
          (!best || every_e.recompute_ms - every_e.copy_wait_ms < best_ms)) {
        a = offload_idle_kept(p, std::move(*a), budget_bytes);
        e = evaluate(p, *a);
        if (!e.feasible || e.peak_bytes > budget_bytes || every_e.recompute_ms < e.recompute_ms) {
          a = std::move(every);
          e = std::move(every_e);
        }
      } else {
        a = std::move(every);
        e = std::move(every_e);
      }
    }
    if (!e.feasible || e.peak_bytes > budget_bytes) return false;
    if (!best || e.recompute_ms < best_ms) {
      best = std::move(a);
      best_ms = e.recompute_ms;
    }
    return true;
  }
  // Past the deadline a search stops once something fits.
  bool enough(Deadline deadline) const { return best && past(deadline); }
};

// Prefixes of the ranking: about 60 sizes, denser where few values are kept, each repaired both ways. The largest
// prefix that fits is found first (a bisection: keeping more of the ranking fits less often), then the other sizes
// nearest to it; past the deadline, once one fits, the rest are left out (on swin_t b16's 3937 steps a size takes
// ~65 ms: all of them, 8 s). Without a deadline every size is tried: the order decides only between equally
// cheap schedules (the first found is kept).
void try_ranked(const CheckpointProblem& p, const std::vector<double>& score, CheapestWithin& best,
                Deadline deadline) {
  const int nf = static_cast<int>(p.fvals.size());
  std::vector<int> order(nf);
  for (int f = 0; f < nf; ++f) order[f] = f;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
  std::vector<int> sizes;
  for (int n = 0; n <= nf; n += std::max(1, nf / 60)) sizes.push_back(n);
  sizes.push_back(nf);
  std::vector<char> tried(sizes.size(), 0);
  auto attempt = [&](size_t i) {
    tried[i] = 1;
    std::vector<char> keep(nf, 0);
    for (int k = 0; k < sizes[i]; ++k) keep[order[k]] = 1;
    const bool a = best.consider(repaired_assignment(p, keep, true));
    const bool b = best.consider(repaired_assignment(p, keep, false));
    return a || b;
  };
  size_t lo = 0, hi = sizes.size() - 1;
  while (lo < hi && !best.enough(deadline)) {
    const size_t mid = (lo + hi + 1) / 2;
    if (attempt(mid)) lo = mid;
    else hi = mid - 1;
  }
  std::vector<size_t> rest;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (!tried[i]) rest.push_back(i);
  std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) {
    return (a > lo ? a - lo : lo - a) < (b > lo ? b - lo : lo - b);
  });
  for (size_t i : rest) {
    if (best.enough(deadline)) break;
    attempt(i);
  }
}

}  // namespace

std::optional<Assignment> ranked_assignment(const CheckpointProblem& p, int64_t budget_bytes,
                                            const std::vector<double>& score, Deadline deadline) {
  CheapestWithin best{p, budget_bytes};
  try_ranked(p, score, best, deadline);
  return std::move(best.best);
}

std::vector<ImplPolicy> impl_policies(const CheckpointProblem& p, const std::vector<std::vector<double>>& lp_impl,
                                      const std::vector<std::vector<double>>& lp_fwd) {
  const int T = p.num_steps(), F = p.num_fwd();
  const std::vector<int> fwd_defaults(F, 0);
  std::vector<ImplPolicy> policies = {{std::vector<int>(T, 0), fwd_defaults}};
  if (!p.has_choices()) return policies;
  // Shared reads: readers[f] = steps reading f under the current choice; each step in turn takes the
  // implementation with the fewest bytes that only it reads (ties: the lower index), twice over.
  std::vector<int> choice(T, 0), readers(p.fvals.size(), 0);
  auto count = [&](int t, int delta) {
    for (const std::vector<int>* reads : {&p.needs[t], &p.impl_extra[t][choice[t]]})
      for (int f : *reads) readers[f] += delta;
  };
  for (int t = 0; t < T; ++t) count(t, +1);
  for (int round = 0; round < 2; ++round)
    for (int t = 0; t < T; ++t) {
      if (p.num_impls(t) < 2) continue;
      count(t, -1);
      int64_t best = INT64_MAX;
      for (int i = 0; i < p.num_impls(t); ++i) {
        int64_t alone = p.impl_ws[t][i];
        for (int f : p.impl_extra[t][i])
          if (readers[f] == 0) alone += p.bytes(f);
        if (alone < best) {
          best = alone;
          choice[t] = i;
        }
      }
      count(t, +1);
    }
  policies.push_back({choice, fwd_defaults});
  std::vector<int> least(F, 0);
  for (int k = 0; k < F; ++k)
    for (int i = 1; i < p.num_fwd_impls(k); ++i) {
      const int64_t ws = p.fwd_impl_ws[k][i], best = p.fwd_impl_ws[k][least[k]];
      if (ws < best || (ws == best && p.fwd_impl_ms[k][i] < p.fwd_impl_ms[k][least[k]])) least[k] = i;
    }
  policies.push_back({choice, least});
  // The lean store-all's implementations (lean_store_all_impls): what store-all itself runs.
  const std::vector<int> lean = p.store_all_impls.empty() ? lean_store_all_impls(*p.plan) : p.store_all_impls;
  ImplPolicy store_all{std::vector<int>(T, 0), fwd_defaults};
  for (int t = 0; t < T; ++t) store_all.M[t] = std::min(lean[p.steps[t]], p.num_impls(t) - 1);
  for (int k = 0; k < F; ++k) store_all.P[k] = std::min(lean[p.fwd_nodes[k]], p.num_fwd_impls(k) - 1);
  policies.push_back(store_all);
  if (!lp_impl.empty() || !lp_fwd.empty()) {
    // The largest of a relaxation's values per step (per forward node); the default where none is given.
    auto largest = [](const std::vector<std::vector<double>>& lp, int n) {
      std::vector<int> out(n, 0);
      for (int j = 0; j < n && !lp.empty(); ++j)
        for (size_t i = 1; i < lp[j].size(); ++i)
          if (lp[j][i] > lp[j][out[j]]) out[j] = static_cast<int>(i);
      return out;
    };
    policies.push_back({largest(lp_impl, T), largest(lp_fwd, F)});
  }
  // Lean runs follow the steps' implementations (settle_lean).
  for (ImplPolicy& m : policies) m.P = settle_lean(p, m.M, std::move(m.P));
  std::sort(policies.begin(), policies.end());
  policies.erase(std::unique(policies.begin(), policies.end()), policies.end());
  return policies;
}

namespace {

// Runs `search` on the problem with each implementation policy fixed; its assignments get that policy's M and P.
// The fixed problem counts memory within a step as p does (fix_impls, as_counted_by_p): what the search finds
// within a budget fits p's rows too, and a peak it reports is p's.
template <class Search>
void for_each_policy(const CheckpointProblem& p, const std::vector<std::vector<double>>& lp_impl,
                     const std::vector<std::vector<double>>& lp_fwd, Search search) {
  if (!p.has_choices()) {
    search(p, ImplPolicy{std::vector<int>(p.num_steps(), 0), std::vector<int>(p.num_fwd(), 0)});
    return;
  }
  for (const ImplPolicy& m : impl_policies(p, lp_impl, lp_fwd)) search(fix_impls(p, m.M, m.P, true), m);
}

std::optional<Assignment> with_impls(std::optional<Assignment> a, const ImplPolicy& m) {
  if (a) {
    a->M = m.M;
    a->P = m.P;
  }
  return a;
}

}  // namespace

namespace {

// The heuristics that need no LP relaxation, on q (implementations fixed to m): the quick ones (store-all, every
// segment length, the two rankings: milliseconds each, but a few seconds together on a large graph in a sanitized
// build; past the deadline they stop once something fits), or the pressure searches (seconds on large graphs;
// they stop at the deadline).
void consider_quick(CheapestWithin& best, const CheckpointProblem& q, const ImplPolicy& m, int64_t budget_bytes,
                    Deadline deadline) {
  best.consider(with_impls(store_all_assignment(q), m));
  for (int segment = 1; segment <= std::max(1, q.num_fwd()) && !best.enough(deadline); ++segment)
    best.consider(with_impls(segment_assignment(q, segment), m));
  if (!best.enough(deadline))
    best.consider(with_impls(ranked_assignment(q, budget_bytes, cost_per_byte_scores(q), deadline), m));
  if (!best.enough(deadline))
    best.consider(with_impls(ranked_assignment(q, budget_bytes, greedy_chain_scores(q), deadline), m));
}
void consider_pressure(CheapestWithin& best, const CheckpointProblem& q, const ImplPolicy& m, int64_t budget_bytes,
                       Deadline deadline) {
  for (Eviction rule : kEvictions)
    if (!past(deadline)) best.consider(with_impls(pressure_search(q, budget_bytes, rule, kSearchRuns, deadline), m));
}

}  // namespace

Assignment copies_for_recomputations(const CheckpointProblem& p, Assignment a, int64_t budget_bytes, Deadline deadline) {
  if (!p.offload() || a.H.empty()) return a;
  const int T = p.num_steps();
  // The outputs each node writes (not the optional ones a lean run or nothing reads: those are never kept or copied).
  std::vector<std::vector<int>> outputs = p.values_by_producer();
  for (std::vector<int>& made : outputs) std::erase_if(made, [&](int f) { return !p.written(f, a.P); });
  Evaluation now = evaluate(p, a);
  if (!now.feasible || now.peak_bytes > budget_bytes) return a;
  // b's time where it is feasible and within the budget, else infinity.
  auto time_of = [&](const Assignment& b, Evaluation& e) {
    e = evaluate(p, b);
    return e.feasible && e.peak_bytes <= budget_bytes ? e.recompute_ms : std::numeric_limits<double>::infinity();
  };
  // Drops the recomputations of step t that nothing needs any more (what only fed the dropped one), then the keeps
  // past their last use: neither raises time or memory.
  auto tidy = [&](Assignment& b, int t) {
    for (int j : p.candidates[t]) {
      if (!b.R[t][j]) continue;
      b.R[t][j] = 0;
      if (!evaluate(p, b).feasible) b.R[t][j] = 1;
    }
    trim(p, b);
  };
  for (bool improved = true; improved && !past(deadline);) {
    improved = false;
    // Each node's first recomputation in the backward pass (the step that needs its outputs first), the costliest
    // first.
    std::vector<std::pair<int, int>> first;  // (step, forward position)
    for (int k = 0; k < p.num_fwd(); ++k)
      for (int t = 1; t < T; ++t)
        if (a.R[t][k]) {
          first.push_back({t, k});
          break;
        }
    std::stable_sort(first.begin(), first.end(),
                     [&](const auto& x, const auto& y) { return p.time_ms(x.second) > p.time_ms(y.second); });
    for (const auto& [t, k] : first) {
      if (past(deadline)) break;
      bool free = !outputs[k].empty();  // none of its outputs on the host already
      for (int f : outputs[k]) free &= !a.H[f];
      if (!free) continue;
      Evaluation e_copy, e_keep;
      // Its outputs offloaded after the forward pass and prefetched into step t.
      double copy_ms = std::numeric_limits<double>::infinity();
      Assignment copy = a;
      bool copyable = true;
      for (int f : outputs[k]) copyable &= p.has_g(t, f) && !a.S[0][f];
      if (copyable) {
        copy.R[t][k] = 0;
        for (int f : outputs[k]) {
          copy.H[f] = 1;
          copy.G[t][f] = 1;
          for (int s = 0; s <= t; ++s) copy.S[s][f] = 0;
        }
        tidy(copy, t);
        copy_ms = time_of(copy, e_copy);
      }
      // Its outputs kept on the device from the forward pass into step t, and where that is over the budget, the
      // fewest idle kept values offloaded that bring it within (offload_idle_kept).
      Assignment keep = a;
      keep.R[t][k] = 0;
      for (int f : outputs[k])
        for (int s = 0; s <= t; ++s)
          if (p.has_s(s, f)) keep.S[s][f] = 1;
      tidy(keep, t);
      double keep_ms = time_of(keep, e_keep);
      if (e_keep.feasible && e_keep.peak_bytes > budget_bytes) {
        keep = offload_idle_kept(p, std::move(keep), budget_bytes);
        keep_ms = time_of(keep, e_keep);
      }
      if (std::min(copy_ms, keep_ms) >= now.recompute_ms - 1e-9) continue;
      if (copy_ms <= keep_ms) {
        a = std::move(copy);
        now = std::move(e_copy);
      } else {
        a = std::move(keep);
        now = std::move(e_keep);
      }
      improved = true;
    }
  }
  return a;
}

std::optional<Assignment> best_heuristic(const CheckpointProblem& p, int64_t budget_bytes, Deadline deadline,
                                         const std::optional<Assignment>& known) {
  CheapestWithin best{p, budget_bytes};
  best.consider(known);
  // Every policy's quick heuristics before any pressure search: a deadline cuts only the slow part.
  for_each_policy(p, {}, {}, [&](const CheckpointProblem& q, const ImplPolicy& m) {
    consider_quick(best, q, m, budget_bytes, deadline);
  });
  for_each_policy(p, {}, {}, [&](const CheckpointProblem& q, const ImplPolicy& m) {
    consider_pressure(best, q, m, budget_bytes, deadline);
  });
  if (best.best && p.offload()) best.consider(copies_for_recomputations(p, *best.best, budget_bytes, deadline));
  return std::move(best.best);
}

std::optional<Assignment> improve_with_lp(const CheckpointProblem& p, int64_t budget_bytes,
                                          const std::optional<Assignment>& known, const std::vector<double>& lp_scores,
                                          const std::vector<std::vector<double>>& lp_impl,
                                          const std::vector<std::vector<double>>& lp_fwd, Deadline deadline) {
  CheapestWithin best{p, budget_bytes};
  best.consider(known);
  const std::vector<ImplPolicy> without_lp = impl_policies(p);
  // Past the deadline, once something fits, the remaining policies are left out (LP-guided rounding tries ~120
  // checkpoint sets per policy: about a second each in a sanitized build on resnet50 b184).
  for_each_policy(p, lp_impl, lp_fwd, [&](const CheckpointProblem& q, const ImplPolicy& m) {
    if (best.enough(deadline)) return;
    if (std::find(without_lp.begin(), without_lp.end(), m) == without_lp.end()) {
      consider_quick(best, q, m, budget_bytes, deadline);
      consider_pressure(best, q, m, budget_bytes, deadline);
    }
    if (!lp_scores.empty() && !best.enough(deadline))
      best.consider(with_impls(ranked_assignment(q, budget_bytes, lp_scores, deadline), m));
  });
  return std::move(best.best);
}

int64_t smallest_heuristic_peak(const CheckpointProblem& p, Deadline deadline, int64_t enough_bytes,
                                std::optional<Assignment>* within) {
  int64_t best = INT64_MAX;
  auto done = [&] { return past(deadline) || best <= enough_bytes; };
  // Each assignment evaluated on p with its policy: the budget found is one p's program can meet. Under offload,
  // with its idle kept values offloaded where that lowers its peak (offload_idle_kept never raises it).
  for_each_policy(p, {}, {}, [&](const CheckpointProblem& q, const ImplPolicy& m) {
    if (best <= enough_bytes) return;
    auto joint = [&](std::optional<Assignment> a) {
      std::optional<Assignment> with = with_impls(std::move(a), m);
      Evaluation e = evaluate(p, *with);
      if (p.offload() && e.feasible && e.peak_bytes > enough_bytes) {
        Assignment offloaded = offload_idle_kept(p, *with);
        Evaluation offloaded_e = evaluate(p, offloaded);
        if (offloaded_e.feasible && offloaded_e.peak_bytes < e.peak_bytes) {
          with = std::move(offloaded);
          e = std::move(offloaded_e);
        }
      }
      if (within && e.feasible && e.peak_bytes <= enough_bytes && !*within) *within = std::move(with);
      return e;
    };
    best = std::min(best, joint(store_all_assignment(q)).peak_bytes);
    for (int segment = 1; segment <= std::max(1, q.num_fwd()) && !done(); ++segment)
      if (auto a = segment_assignment(q, segment)) {
        Evaluation e = joint(std::move(a));
        if (e.feasible) best = std::min(best, e.peak_bytes);
      }
    // Bisection over the budget: pressure_assignment fits more often as the budget grows (not strictly). Within
    // `enough_bytes` its first probe is that budget.
    for (Eviction rule : kEvictions) {
      int64_t lo = q.lower_bound_bytes(), hi = best;
      bool first = enough_bytes > lo && enough_bytes < hi;
      while (hi - lo > std::max<int64_t>(kAlignBytes, hi / 2000) && !done()) {
        const int64_t mid = first ? enough_bytes : lo + (hi - lo) / 2;
        first = false;
        if (auto a = pressure_assignment(q, mid, rule)) {
          hi = joint(std::move(a)).peak_bytes;
          best = std::min(best, hi);
        } else {
          lo = mid + 1;
        }
      }
    }
  });
  return best;
}

std::optional<Assignment> pressure_fits(const CheckpointProblem& p, int64_t budget_bytes, Deadline deadline) {
  CheapestWithin best{p, budget_bytes};
  for_each_policy(p, {}, {}, [&](const CheckpointProblem& q, const ImplPolicy& m) {
    for (Eviction rule : kEvictions)
      if (!past(deadline)) best.consider(with_impls(pressure_assignment(q, budget_bytes, rule), m));
  });
  return std::move(best.best);
}

}  // namespace monet
