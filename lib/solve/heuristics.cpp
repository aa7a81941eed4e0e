#include "solve/heuristics.h"

#include <cmath>
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

std::optional<Assignment> checkpoint_assignment(const CheckpointProblem& p, const std::vector<char>& checkpoints) {
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
        const bool keep = present[f] && (checkpoints[f] ? p.has_s(t, f) : last[f] >= t);
        present[f] = a.S[t][f] = keep ? 1 : 0;
      }
    bool ok = true;
    std::function<void(int)> ensure = [&](int f) {
      if (present[f] || !ok) return;
      const int k = p.producer[f];
      if (!std::binary_search(p.candidates[t].begin(), p.candidates[t].end(), k)) {
        ok = false;
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
  return a;
}

std::optional<Assignment> segment_assignment(const CheckpointProblem& p, int segment) {
  std::vector<char> checkpoints(p.fvals.size(), 0);
  for (size_t f = 0; f < p.fvals.size(); ++f) checkpoints[f] = (p.producer[f] + 1) % segment == 0;
  return checkpoint_assignment(p, checkpoints);
}

std::optional<Assignment> sqrtn_assignment(const CheckpointProblem& p) {
  return segment_assignment(p, std::max(1, static_cast<int>(std::lround(std::sqrt(p.num_fwd())))));
}

std::optional<Assignment> best_heuristic(const CheckpointProblem& p, int64_t budget_bytes) {
  std::optional<Assignment> best;
  double best_ms = 0;
  auto consider = [&](std::optional<Assignment> a) {
    if (!a) return;
    Evaluation e = evaluate(p, *a);
    if (!e.feasible || e.peak_bytes > budget_bytes) return;
    if (!best || e.recompute_ms < best_ms) {
      best = std::move(a);
      best_ms = e.recompute_ms;
    }
  };
  consider(store_all_assignment(p));
  for (int segment = 1; segment <= std::max(1, p.num_fwd()); ++segment) consider(segment_assignment(p, segment));
  return best;
}

}  // namespace monet
