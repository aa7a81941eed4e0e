#include "solve/frontier.h"

#include <algorithm>

#include "core/error.h"
#include "core/svg.h"

namespace monet {

Frontier solve_frontier(const PlanGraph& plan, const SolveOptions& o, int points,
                        const std::function<void(const FrontierPoint&)>& on_point) {
  if (points < 2) fail("frontier: give at least 2 budgets, got ", points);
  // A budget of one byte: nothing fits, and the outcome carries the lower bound and the heuristics' smallest peak.
  SolveOptions probe = o;
  probe.budget_bytes = 1;
  probe.progress = nullptr;
  const SolveOutcome first = solve(plan, probe);
  Frontier f;
  f.mode = o.mode;
  f.lower_bound_bytes = first.lower_bound_bytes;
  f.smallest_found_bytes = first.smallest_found_bytes;
  f.store_all_peak_bytes = first.store_all.peak_bytes;
  f.store_all_ms = first.store_all.time_ms;
  f.fast_store_all_peak_bytes = first.fast_store_all.peak_bytes;
  f.fast_store_all_ms = first.fast_store_all.time_ms;
  const int64_t lo = std::min(f.smallest_found_bytes, f.store_all_peak_bytes), hi = f.store_all_peak_bytes;
  for (int i = 0; i < points; ++i) {
    FrontierPoint pt;
    pt.budget_bytes = lo + static_cast<int64_t>(static_cast<double>(hi - lo) * i / (points - 1));
    SolveOptions at = o;
    at.budget_bytes = pt.budget_bytes;
    pt.outcome = solve(plan, at);
    if (f.store_all_ms > 0) {
      if (pt.outcome.fits) pt.overhead = pt.outcome.objective_ms / f.store_all_ms - 1;
      if (pt.outcome.bound_ms > 0) pt.bound_overhead = pt.outcome.bound_ms / f.store_all_ms - 1;
    }
    if (f.fast_store_all_ms > 0 && pt.outcome.fits)
      pt.overhead_vs_fast = pt.outcome.objective_ms / f.fast_store_all_ms - 1;
    if (on_point) on_point(pt);
    f.points.push_back(std::move(pt));
  }
  return f;
}

std::string frontier_svg(const Frontier& f, const std::string& title) {
  constexpr double kGB = 1e9;
  std::vector<double> xs, ys, bx, by;
  double y_lo = 0, y_hi = 0;
  for (const FrontierPoint& p : f.points) {
    if (p.outcome.fits) {
      xs.push_back(static_cast<double>(p.budget_bytes) / kGB), ys.push_back(100 * p.overhead);
      y_hi = std::max(y_hi, 100 * p.overhead), y_lo = std::min(y_lo, 100 * p.overhead);
    }
    if (p.outcome.bound_ms > 0) {
      bx.push_back(static_cast<double>(p.budget_bytes) / kGB), by.push_back(100 * p.bound_overhead);
      y_lo = std::min(y_lo, 100 * p.bound_overhead);
    }
  }
  SvgChart svg(title, "budget (GB)", "overhead against store-all (%)");
  const double x_lo = static_cast<double>(std::min(f.lower_bound_bytes, f.smallest_found_bytes)) / kGB;
  svg.x_range(std::max(0.0, x_lo * 0.95), static_cast<double>(f.store_all_peak_bytes) / kGB * 1.02);
  // Full mode may beat the lean store-all near its peak (faster implementations): the axis then goes below 0.
  svg.y_range(y_lo * 1.1, std::max(y_hi * 1.1, 1.0));
  if (!xs.empty()) {
    svg.line(xs, ys, "#4e79a7", "schedule found");
    svg.markers(xs, ys, "#4e79a7", "");
  }
  if (!bx.empty()) svg.line(bx, by, "#59a14f", "proven bound", true);
  svg.vline(static_cast<double>(f.lower_bound_bytes) / kGB, "#b00020", "lower bound on the peak");
  svg.vline(static_cast<double>(f.store_all_peak_bytes) / kGB, "#202020", "store-all's peak");
  return svg.render();
}

}  // namespace monet
