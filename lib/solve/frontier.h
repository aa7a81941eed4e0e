// The memory/time frontier of a profile: solves at evenly spaced budgets from the smallest peak the heuristics
// reach up to store-all's peak, and draws overhead against budget (monet-solve --frontier).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "solve/solve.h"

namespace monet {

struct FrontierPoint {
  int64_t budget_bytes = 0;
  SolveOutcome outcome;
  double overhead = 0;        // predicted step time against the lean store-all's, minus 1 (when outcome.fits)
  double overhead_vs_fast = 0;  // the same against the fast store-all's (when outcome.fits; >= 0)
  double bound_overhead = 0;  // the same for the proven bound on the step time (MILP modes; 0 otherwise)
};

struct Frontier {
  std::string mode;
  int64_t lower_bound_bytes = 0;     // no schedule needs less
  int64_t smallest_found_bytes = 0;  // the first budget solved
  int64_t store_all_peak_bytes = 0;  // the last budget solved
  double store_all_ms = 0;
  int64_t fast_store_all_peak_bytes = 0;  // the fast store-all (fast_store_all_schedule)
  double fast_store_all_ms = 0;
  std::vector<FrontierPoint> points;
};

// `points` >= 2 budgets from smallest_found_bytes to store-all's peak, each solved with `o` (its budget replaced);
// on_point (optional) sees each as it is done. Throws monet::Error when points < 2.
Frontier solve_frontier(const PlanGraph& plan, const SolveOptions& o, int points,
                        const std::function<void(const FrontierPoint&)>& on_point = nullptr);

// Overhead (%) against budget (GB): the schedules found, the proven bounds, the lower bound and store-all's peak.
std::string frontier_svg(const Frontier& f, const std::string& title);

}  // namespace monet
