#include "solve/heuristics.h"

#include "core/error.h"

#include <cmath>
#include <algorithm>
#include <functional>

namespace monet {

namespace {
// Last step that reads each forward value (-1 if none).
std::vector<int> last_read(const CheckpointProblem& p) {
  std::vector<int> last(p.fvals.size(), -1);
  for (int t = 0; t < p.num_steps(); ++t)
    for (int f : p.needs[t]) last[f] = std::max(last[f], t);
  return last;
}
}  // namespace

Assignment store_all_assignment(const CheckpointProblem& p) {
  Assignment a = empty_assignment(p);
  const std::vector<int> last = last_read(p);
  for (size_t f = 0; f < p.fvals.size(); ++f)
    for (int t = 0; t <= last[f]; ++t) a.S[t][f] = 1;
  return a;
}

std::optional<Assignment> checkpoint_assignment(const CheckpointProblem& p, const std::vector<char>& checkpoints,
                                                bool keep_recomputed, int* missing) {
  Assignment a = empty_assignment(p);
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  if (T == 0) return a;
  const std::vector<int> last = last_read(p);
  std::vector<char> present(nf, 0);
  for (int f = 0; f < nf; ++f)
    if (checkpoints[f] && p.has_s(0, f)) present[f] = a.S[0][f] = 1;
  for (int t = 0; t < T; ++t) {
    if (t > 0)
      for (int f = 0; f < nf; ++f) {
        // Checkpoints stay while they may serve a recomputation; recomputed values while backward still reads them.
        const bool keep = present[f] && (checkpoints[f] ? p.has_s(t, f) : keep_recomputed && last[f] >= t);
        present[f] = a.S[t][f] = keep ? 1 : 0;
      }
    bool ok = true;
    std::function<void(int)> ensure = [&](int f) {
      if (present[f] || !ok) return;
      const int k = p.producer[f];
      if (!std::binary_search(p.candidates[t].begin(), p.candidates[t].end(), k)) {
        ok = false;
        if (missing) *missing = f;
        return;
      }
      for (int in : p.fwd_inputs[k]) ensure(in);
      a.R[t][k] = 1;
      for (int g = 0; g < nf; ++g)
        if (p.producer[g] == k) present[g] = 1;
    };
    for (int f : p.needs[t]) ensure(f);
    if (!ok) return std::nullopt;
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
  // Cost to recompute f from what is kept: its producer plus, recursively, every input not kept.
  auto chain_ms = [&](int f) {
    std::vector<char> seen(p.num_fwd(), 0);
    double ms = 0;
    std::vector<int> stack = {p.producer[f]};
    while (!stack.empty()) {
      int k = stack.back();
      stack.pop_back();
      if (seen[k]) continue;
      seen[k] = 1;
      ms += p.time_ms(k);
      for (int in : p.fwd_inputs[k])
        if (!kept[in]) stack.push_back(p.producer[in]);
    }
    return ms;
  };
  std::vector<double> score(nf, -1.0);  // values backward never reads rank last
  int rank = 0, remaining = 0;
  for (int f = 0; f < nf; ++f) remaining += kept[f];
  while (remaining > 0) {
    int best = -1;
    double best_ratio = 0;
    for (int f = 0; f < nf; ++f) {
      if (!kept[f]) continue;
      const double ratio = (chain_ms(f) + 1e-9) / static_cast<double>(std::max<int64_t>(p.bytes(f), 1));
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

// Keeps the cheapest feasible assignment whose (conservative) peak fits the budget.
struct CheapestWithin {
  const CheckpointProblem& p;
  int64_t budget_bytes;
  std::optional<Assignment> best = std::nullopt;
  double best_ms = 0;

  void consider(std::optional<Assignment> a) {
    if (!a) return;
    const Evaluation e = evaluate(p, *a);
    if (!e.feasible || e.peak_bytes > budget_bytes) return;
    if (!best || e.recompute_ms < best_ms) {
      best = std::move(a);
      best_ms = e.recompute_ms;
    }
  }
};

template <class Consider>
void try_ranked(const CheckpointProblem& p, const std::vector<double>& score, Consider consider) {
  const int nf = static_cast<int>(p.fvals.size());
  std::vector<int> order(nf);
  for (int f = 0; f < nf; ++f) order[f] = f;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
  // Prefixes of the ranking: about 60 sizes, denser where few values are kept.
  std::vector<int> sizes;
  for (int n = 0; n <= nf; n += std::max(1, nf / 60)) sizes.push_back(n);
  sizes.push_back(nf);
  for (int n : sizes) {
    std::vector<char> keep(nf, 0);
    for (int i = 0; i < n; ++i) keep[order[i]] = 1;
    consider(repaired_assignment(p, keep, true));
    consider(repaired_assignment(p, keep, false));
  }
}

}  // namespace

std::optional<Assignment> ranked_assignment(const CheckpointProblem& p, int64_t budget_bytes,
                                            const std::vector<double>& score) {
  CheapestWithin best{p, budget_bytes};
  try_ranked(p, score, [&](std::optional<Assignment> a) { best.consider(std::move(a)); });
  return std::move(best.best);
}

std::optional<Assignment> best_heuristic(const CheckpointProblem& p, int64_t budget_bytes,
                                         const std::vector<double>& lp_scores) {
  CheapestWithin best{p, budget_bytes};
  best.consider(store_all_assignment(p));
  for (int segment = 1; segment <= std::max(1, p.num_fwd()); ++segment) best.consider(segment_assignment(p, segment));
  best.consider(ranked_assignment(p, budget_bytes, cost_per_byte_scores(p)));
  best.consider(ranked_assignment(p, budget_bytes, greedy_chain_scores(p)));
  if (!lp_scores.empty()) best.consider(ranked_assignment(p, budget_bytes, lp_scores));
  return std::move(best.best);
}

}  // namespace monet
