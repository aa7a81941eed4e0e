// The streams of a training step that moves values between host and device, as the engine runs them: the compute
// stream, a copy stream to the host, one to the device for activations and one to the device for the optimizer
// state (Schedule::on_host; CopyLane, engine/backend.h), each in issue order (a FIFO). The two streams to the device
// are timed as if each had the link to itself (the state's copies are a few small ones). Used by the executor
// (where each copy to the host starts) and by the planner's report (the predicted step of an offloading schedule,
// waits included, as the engine will issue its copies).
#pragma once

#include <functional>
#include <vector>

#include "profile/host_link.h"
#include "schedule/plan.h"
#include "schedule/schedule.h"

namespace monet {

// For each compute step of `s` (index into s.steps): the offload steps whose copies to the host start right after
// it. An offload's copy starts after the compute step that last wrote its value (for a value whose home is the
// host, `home[v]`: the update that last read it, which writes it in place), unless a compute step in between
// overwrites the value in place or the value came back from the host since: then at the offload step itself.
// writes(node, home) lists what that node writes of such values: its outputs, or (home) its inputs.
using WritesFn = std::function<const std::vector<int>&(int node, bool home)>;
std::vector<std::vector<int>> copies_out_after(const Schedule& s, const std::vector<char>& home, const WritesFn& writes);

struct StreamTimes {
  double step_ms = 0;      // the compute stream's end, and every copy's: one training step
  double compute_ms = 0;   // the compute steps' times alone (the simulator's time_ms)
  double wait_ms = 0;      // the compute stream waiting for copies: step_ms - compute_ms, of which
  double wait_to_host_ms = 0;    // at offload steps, for copies to the host
  double wait_to_device_ms = 0;  // before steps that read or free a value, for copies back
                                 // (the rest: copies still running when the compute stream ends)
  double to_host_busy_ms = 0, to_device_busy_ms = 0;  // the copy streams' busy time, each way
};

// The step of schedule `s` on plan `p` with copies priced by `link` (HostLink::copy_ms), as the executor issues
// them: each copy to the host right after its value's writer (copies_out_after), each copy back at its prefetch
// step, each on its stream (its lane) after the copies issued before it there and after the compute stream reached
// its issue point. The compute stream waits for a copy back before a step that reads the value or frees it, and for a copy
// to the host at its offload step (its device block is released there). Node times: each compute step's
// implementation's (PlanNode::impl_ms). The schedule must be valid (simulate).
StreamTimes time_streams(const PlanGraph& p, const Schedule& s, const HostLink& link);

}  // namespace monet
