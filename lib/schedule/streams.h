// The streams of a training step that moves values between host and device, as the engine runs them: the compute
// stream, a copy stream to the host, one to the device for activations and one to the device for the optimizer
// state (Schedule::on_host), each in issue order (a FIFO). The two streams to the device are timed as if each had
// the link to itself (the state's copies are a few small ones). When each copy is issued, whole or in pieces, is
// the schedule's copy plan (Schedule::copy_plan): the executor issues it, the timing here follows it, and
// plan_copies makes one that issues the copies in the order they are needed.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "profile/host_link.h"
#include "schedule/plan.h"
#include "schedule/schedule.h"

namespace monet {

// Where a copy between the host arena and the device arena runs: the optimizer state's copies to the device (a few
// small copies that an update waits for) apart from the activations' (large ones issued ahead of their use), so
// that they do not queue behind them.
enum class CopyLane : uint8_t { to_host, to_device, state_to_device };

// What compute step `step` of a schedule reads (outputs false: what its implementation reads) or writes (its node's
// outputs).
using NodeValuesFn = std::function<const std::vector<int>&(int step, bool outputs)>;

// One copy of a schedule: that of offload or prefetch step `step` of value `value` on `lane`. Its pieces may be
// issued at any step from `earliest` to `deadline` (the step that waits for it: the offload step for a copy to the
// host; for a copy back the first step after the prefetch that reads the value, offloads it or frees it, or the
// end of the steps). A copy to the host is earliest right after the compute step that last wrote its value (for a
// value whose home is the host: the update that last read it, which writes it in place), unless a compute step in
// between overwrites the value in place or the value came back from the host since: then at its offload step. A
// copy back is earliest right after its prefetch step (which allocates its device block).
struct ScheduledCopy {
  int step = -1, value = -1;
  CopyLane lane = CopyLane::to_host;
  int earliest = 0, deadline = 0;
};
// The copies of `s` in step order; home: per value, whether Schedule::on_host lists it.
std::vector<ScheduledCopy> scheduled_copies(const Schedule& s, const std::vector<char>& home, const NodeValuesFn& io);
// Per step of a schedule with `steps` steps: the index in `copies` of its copy (an offload or prefetch step's), or -1.
std::vector<int> copy_index(const std::vector<ScheduledCopy>& copies, size_t steps);

// The copy plan the engine runs for `s`: s.copy_plan where it has one, each copy whole at its earliest step
// otherwise. Throws monet::Error naming the entry where s.copy_plan does not issue every copy of `copies` exactly
// once in order, each piece between the copy's earliest step and its deadline, at non-decreasing steps.
std::vector<CopyChunk> copy_plan_of(const Schedule& s, const std::vector<ScheduledCopy>& copies);
// The same for a schedule of plan `p` (what its compute steps read: their implementations' inputs).
std::vector<CopyChunk> copy_plan_of(const PlanGraph& p, const Schedule& s);

// The piece [begin, end) of `count` elements that part `part` of `parts` covers.
inline int64_t part_begin(int64_t count, int part, int parts) { return count * part / parts; }

struct StreamTimes {
  double step_ms = 0;      // the compute stream's end, and every copy's: one training step
  double compute_ms = 0;   // the compute steps' times alone (the simulator's time_ms)
  double wait_ms = 0;      // the compute stream waiting for copies: step_ms - compute_ms, of which
  double wait_to_host_ms = 0;    // at offload steps, for copies to the host
  double wait_to_device_ms = 0;  // before steps that read or free a value, for copies back
                                 // (the rest: copies still running when the compute stream ends)
  double to_host_busy_ms = 0, to_device_busy_ms = 0;  // the copy streams' busy time, each way
};

// The step of schedule `s` on plan `p` with copies priced by `link` (HostLink::copy_ms, per piece), as the executor
// issues them (copy_plan_of): each piece on its copy's stream after the pieces issued before it there and after
// the compute stream reached the step it is issued at. The compute stream waits for a copy back before a step that
// reads the value or frees it, and for a copy to the host at its offload step (its device block is released
// there). Node times: each compute step's implementation's (PlanNode::impl_ms). The schedule must be valid
// (simulate).
StreamTimes time_streams(const PlanGraph& p, const Schedule& s, const HostLink& link);

// A copy plan for `s` that issues the copies by deadline: at each step, each stream is given pieces (of at most
// `piece_bytes`) of the copies it may start, the earliest deadline first, until it is busy to the end of that
// step's node; a copy a step waits for is issued in full there. A copy that becomes urgent so waits behind at most
// one piece, where issued whole it would queue behind every copy issued before it (copies over nested spans, as
// the planner's rows count them). The schedule must be valid (simulate).
std::vector<CopyChunk> plan_copies(const PlanGraph& p, const Schedule& s, const HostLink& link, int64_t piece_bytes);

// Pieces of plan_copies: 32 MiB is 0.6 ms on a 55 GB/s link, with 4 us of latency each.
inline constexpr int64_t kCopyPieceBytes = int64_t{32} << 20;
// The piece sizes a solve tries (the fastest on the streams is kept): a copy due soon after it is released waits
// behind at most one piece of another (2 MiB: 0.04 ms at 55 GB/s), and each piece costs a latency more.
inline constexpr int64_t kCopyPieceSizes[] = {kCopyPieceBytes, kCopyPieceBytes / 4, kCopyPieceBytes / 16};

}  // namespace monet
