// The memory timeline of a schedule: bytes in use at every compute step, by kind (resident, kept activations,
// recomputed activations, gradients, workspace), from the simulator, and its picture as SVG with the budget line
// and store-all's total for contrast (monet-check --simulate --timeline, monet-solve --timeline). A schedule that
// offloads also shows the bytes on the host and marks the compute steps that follow copies.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace monet {

struct TimelineChart {
  std::string title;
  int64_t budget_bytes = 0;              // the budget line; 0: none
  std::vector<MemoryPoint> schedule;     // simulate(..., &timeline) of the schedule
  std::vector<MemoryPoint> store_all;    // of store-all, drawn as its total; may be empty
};

// The timeline of schedule `s` on plan `p` (validated by the simulator: throws its message for a bad schedule).
std::vector<MemoryPoint> memory_timeline(const PlanGraph& p, const Schedule& s);

// x: predicted milliseconds when the plan has times, else compute steps; y: GB (1e9 bytes). At most about one
// point per pixel column: where steps are denser, each column shows its step with the most bytes in use. Where the
// schedule offloads: a line of the bytes on the host, and a marker on it at each compute step that follows
// offload or prefetch steps.
std::string memory_timeline_svg(const TimelineChart& chart);

}  // namespace monet
