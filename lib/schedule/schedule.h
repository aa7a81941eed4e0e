// A schedule is data: an ordered list of steps over the training graph (compute a node, free a value). Any
// schedule runs through the same executor and the same simulator.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace monet {

struct Step {
  enum class Kind : uint8_t { compute, free };
  Kind kind = Kind::compute;
  int id = -1;  // node id for compute, value id for free
};

struct Schedule {
  std::string mode = "store-all";
  std::vector<Step> steps;
};

// Values that live for the whole run: persistent roles (params, buffers, momentum, constants, input, labels)
// that some node reads. They are allocated before the first step and never freed by a schedule.
std::vector<int> resident_values(const Graph& g);

// Every node once in graph order; each transient value freed right after its last reader (or its producer, when
// nothing reads it). Keeps whatever backward needs: the baseline every other schedule is compared with.
Schedule store_all_schedule(const Graph& g);

struct SimResult {
  int64_t peak_bytes = 0;        // resident + live transients + the running step's outputs and workspace
  int64_t resident_bytes = 0;
  int peak_step = -1;            // index into Schedule::steps where the peak occurs
};

using WorkspaceFn = std::function<int64_t(const Node&)>;

// Replays the schedule counting bytes with tensor_bytes(): at a compute step the outputs and the workspace are
// added to what is live, then the workspace is dropped. Throws monet::Error naming the step number if an input is
// not live, a value is freed twice or never produced, or a transient is still live at the end.
SimResult simulate(const Graph& g, const Schedule& s, const WorkspaceFn& workspace_bytes, int float_bytes = 4);

}  // namespace monet
