// Benchmark of the solver's primal heuristics (no MILP): for each profile and budget (fractions of its store-all
// peak), the predicted step time of the best schedule each heuristic family finds, and the smallest budget any
// of them reaches. Run by scripts/bench_heuristics.sh; prints a markdown table.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "profile/profile.h"
#include "solve/heuristics.h"

using namespace monet;

namespace {

using Family = std::function<std::optional<Assignment>(const CheckpointProblem&, int64_t)>;

std::optional<Assignment> cheapest(const CheckpointProblem& q, int64_t budget, std::vector<std::optional<Assignment>> all) {
  std::optional<Assignment> best;
  double best_ms = 0;
  for (auto& a : all) {
    if (!a) continue;
    Evaluation e = evaluate(q, *a);
    if (!e.feasible || e.peak_bytes > budget) continue;
    if (!best || e.recompute_ms < best_ms) {
      best = a;
      best_ms = e.recompute_ms;
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROFILE.json... (modes checkpoint and full, budgets 1/3 1/2 2/3)\n", argv[0]);
    return 1;
  }
  const std::vector<std::pair<std::string, Family>> families = {
      {"segments", [](const CheckpointProblem& q, int64_t b) {
         std::vector<std::optional<Assignment>> all = {store_all_assignment(q)};
         for (int s = 1; s <= q.num_fwd(); ++s) all.push_back(segment_assignment(q, s));
         return cheapest(q, b, std::move(all));
       }},
      {"cost/byte rank", [](const CheckpointProblem& q, int64_t b) { return ranked_assignment(q, b, cost_per_byte_scores(q)); }},
      {"greedy chain rank", [](const CheckpointProblem& q, int64_t b) { return ranked_assignment(q, b, greedy_chain_scores(q)); }},
      {"pressure cost/(byte*dist)", [](const CheckpointProblem& q, int64_t b) { return pressure_assignment(q, b, Eviction::cost_per_byte_distance); }},
      {"pressure cost/byte", [](const CheckpointProblem& q, int64_t b) { return pressure_assignment(q, b, Eviction::cost_per_byte); }},
      {"pressure farthest", [](const CheckpointProblem& q, int64_t b) { return pressure_assignment(q, b, Eviction::farthest_read); }},
      {"pressure + pin search (best rule)", [](const CheckpointProblem& q, int64_t b) {
         std::vector<std::optional<Assignment>> all;
         for (Eviction rule : kEvictions) all.push_back(pressure_search(q, b, rule, 200));
         return cheapest(q, b, std::move(all));
       }},
  };
  try {
    std::printf("| model | mode | budget | lower bound GB | smallest found GB |");
    for (auto& f : families) std::printf(" %s ms |", f.first.c_str());
    std::printf(" heuristics s |\n|---|---|---|---|---|");
    for (size_t i = 0; i <= families.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (int i = 1; i < argc; ++i) {
      Profile profile = read_profile(argv[i]);
      const PlanGraph& plan = profile.plan;
      const int64_t store_all = simulate(plan, store_all_schedule(plan)).peak_bytes;
      for (const char* mode : {"checkpoint", "full"}) {
        const bool full = std::string(mode) == "full";
        CheckpointProblem p = make_problem(plan, kAutoWindow, full);
        const int64_t smallest = smallest_heuristic_peak(p);
        for (auto [num, den] : {std::pair{1, 3}, {1, 2}, {2, 3}}) {
          const int64_t budget = store_all / den * num;
          std::printf("| %s b%lld | %s | %d/%d | %.2f | %.2f |", profile.model.c_str(), static_cast<long long>(profile.batch),
                      mode, num, den, p.lower_bound_bytes() / 1e9, smallest / 1e9);
          const auto start = std::chrono::steady_clock::now();
          for (auto& [name, family] : families) {
            std::optional<double> best;
            for (const ImplPolicy& m : impl_policies(p)) {
              CheckpointProblem q = fix_impls(p, m.M, m.P);
              if (auto a = family(q, budget)) {
                const double ms = q.base_ms + evaluate(q, *a).recompute_ms;
                if (!best || ms < *best) best = ms;
              }
            }
            if (best) std::printf(" %.2f |", *best);
            else std::printf(" — |");
          }
          std::printf(" %.1f |\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          std::fflush(stdout);
        }
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_heuristics: %s\n", e.what());
    return 1;
  }
  return 0;
}
