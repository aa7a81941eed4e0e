#include "schedule/timeline.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "core/error.h"
#include "core/svg.h"

namespace monet {
namespace {

constexpr int kColumns = 900;  // about the plot's width in pixels
constexpr std::array<const char*, kMemoryKinds> kColors = {"#9e9e9e", "#4e79a7", "#f28e2b", "#59a14f", "#e15759"};

// Compute steps without predicted times (a plan built on a backend) are drawn one unit wide each.
bool has_times(const std::vector<MemoryPoint>& points) { return !points.empty() && points.back().end_ms > 0; }
double start_of(const MemoryPoint& m, size_t i, bool timed) { return timed ? m.start_ms : static_cast<double>(i); }
double end_of(const MemoryPoint& m, size_t i, bool timed) { return timed ? m.end_ms : static_cast<double>(i + 1); }

// The points drawn: every one when there are few, else per column the one with the most bytes in use.
struct Drawn {
  std::vector<double> xs;
  std::vector<const MemoryPoint*> at;
};

Drawn columns(const std::vector<MemoryPoint>& points, bool timed, double x_hi) {
  Drawn d;
  if (points.size() <= static_cast<size_t>(kColumns)) {
    for (size_t i = 0; i < points.size(); ++i) {
      d.xs.push_back(start_of(points[i], i, timed)), d.at.push_back(&points[i]);
      d.xs.push_back(end_of(points[i], i, timed)), d.at.push_back(&points[i]);
    }
    return d;
  }
  std::vector<const MemoryPoint*> best(kColumns, nullptr);
  for (size_t i = 0; i < points.size(); ++i) {
    const int c = std::clamp(static_cast<int>(start_of(points[i], i, timed) / x_hi * kColumns), 0, kColumns - 1);
    if (!best[c] || points[i].total() > best[c]->total()) best[c] = &points[i];
  }
  for (int c = 0; c < kColumns; ++c)
    if (best[c]) {
      d.xs.push_back(x_hi * c / kColumns), d.at.push_back(best[c]);
      d.xs.push_back(x_hi * (c + 1) / kColumns), d.at.push_back(best[c]);
    }
  return d;
}

}  // namespace

std::vector<MemoryPoint> memory_timeline(const PlanGraph& p, const Schedule& s) {
  std::vector<MemoryPoint> points;
  simulate(p, s, &points);
  return points;
}

std::string memory_timeline_svg(const TimelineChart& chart) {
  if (chart.schedule.empty()) fail("memory timeline '", chart.title, "': the schedule has no compute steps");
  const bool timed = has_times(chart.schedule) && (chart.store_all.empty() || has_times(chart.store_all));
  auto x_end = [&](const std::vector<MemoryPoint>& v) { return v.empty() ? 0.0 : end_of(v.back(), v.size() - 1, timed); };
  const double x_hi = std::max(x_end(chart.schedule), x_end(chart.store_all));
  int64_t y_hi = chart.budget_bytes;
  for (const auto* v : {&chart.schedule, &chart.store_all})
    for (const MemoryPoint& m : *v) y_hi = std::max(y_hi, m.total());
  bool offloads = false;  // the schedule's host bytes are drawn
  for (const MemoryPoint& m : chart.schedule) {
    y_hi = std::max(y_hi, m.host_bytes);
    offloads = offloads || m.host_bytes > 0 || m.copies > 0;
  }
  constexpr double kGB = 1e9;

  SvgChart svg(chart.title, timed ? "predicted time in the step (ms)" : "compute steps", "GB in use");
  svg.x_range(0, x_hi);
  svg.y_range(0, std::max(static_cast<double>(y_hi) / kGB, 1e-9));
  const Drawn d = columns(chart.schedule, timed, x_hi);
  std::vector<double> below(d.xs.size(), 0.0);
  for (int k = 0; k < kMemoryKinds; ++k) {
    std::vector<double> above(d.xs.size());
    for (size_t i = 0; i < d.xs.size(); ++i) above[i] = below[i] + static_cast<double>(d.at[i]->bytes[k]) / kGB;
    svg.area(d.xs, below, above, kColors[k], memory_kind_name(static_cast<MemoryKind>(k)));
    below = std::move(above);
  }
  if (!chart.store_all.empty()) {
    const Drawn sa = columns(chart.store_all, timed, x_hi);
    std::vector<double> ys;
    for (const MemoryPoint* m : sa.at) ys.push_back(static_cast<double>(m->total()) / kGB);
    svg.line(sa.xs, ys, "#202020", "store-all");
  }
  if (offloads) {  // every step: a column's step with the most on the device may not be the one after copies
    std::vector<double> xs, ys, copy_xs, copy_ys;
    for (size_t i = 0; i < chart.schedule.size(); ++i) {
      const MemoryPoint& m = chart.schedule[i];
      const double host = static_cast<double>(m.host_bytes) / kGB;
      xs.push_back(start_of(m, i, timed)), ys.push_back(host);
      xs.push_back(end_of(m, i, timed)), ys.push_back(host);
      if (m.copies > 0) copy_xs.push_back(start_of(m, i, timed)), copy_ys.push_back(host);
    }
    svg.line(xs, ys, "#7b3294", "on the host (offloaded)");
    if (!copy_xs.empty()) svg.markers(copy_xs, copy_ys, "#7b3294", "after offload or prefetch steps");
  }
  if (chart.budget_bytes > 0) svg.hline(static_cast<double>(chart.budget_bytes) / kGB, "#b00020", "budget");
  for (size_t i = 0; i < chart.schedule.size(); ++i)
    if (chart.schedule[i].backward) {
      svg.vline(start_of(chart.schedule[i], i, timed), "#606060", "backward begins");
      break;
    }
  return svg.render();
}

}  // namespace monet
