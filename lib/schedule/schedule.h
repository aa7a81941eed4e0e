// A schedule is data: an ordered list of steps over the training graph (compute a node, free a value). Any
// schedule runs through the same executor and the same simulator, and can be checked without a device.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "schedule/plan.h"

namespace monet {

struct Step {
  // offload: a live transient value copied to the host arena and its device memory freed; prefetch: an offloaded
  // value copied back into device memory and its host memory freed. Both in the run's order (the step waits for
  // the copy). A value on the host may also be freed there.
  enum class Kind : uint8_t { compute, free, offload, prefetch };
  Kind kind = Kind::compute;
  int id = -1;    // node id for compute, value id for free, offload and prefetch
  int impl = 0;   // compute: the op's implementation (OpDef::impls index; 0 = default)
  int algo = -1;  // compute: the backend algorithm (a cuDNN convolution algorithm; -1 = the backend's default)
  // compute: the input (value id, one of PlanNode::in_place) whose memory output 0 takes over, or -1. That value
  // ends there: nothing may read or free it afterwards (a recomputation may produce it again).
  int in_place = -1;
  bool operator==(const Step&) const = default;
};

// One piece of a copy between host and device, issued by itself (Schedule::copy_plan): part `part` of `parts`
// equal pieces (by elements, the last taking the remainder) of the copy of offload or prefetch step `copy`, issued
// on that copy's stream when the run reaches step `at` (before anything of that step: its allocation, its waits,
// its node). Each copy's pieces in order, each once; the copy is complete when its last piece is.
struct CopyChunk {
  int at = 0;
  int copy = -1;
  int part = 0;
  int parts = 1;
  bool operator==(const CopyChunk&) const = default;
};

struct Schedule {
  std::string mode = "store-all";
  std::vector<Step> steps;
  // When the copies of offload and prefetch steps are issued, in the order the run issues them (at non-decreasing).
  // Empty: each copy whole at the earliest point the engine may start it (streams.h, copy_plan_of).
  std::vector<CopyChunk> copy_plan = {};
  // Resident values whose home is the host arena (the optimizer state an offloading plan keeps there between its
  // updates): on the host when the training step starts and when it ends, each in a host block of its own for the
  // whole run. A prefetch brings one to the device, an offload takes it back to that block; never freed.
  std::vector<int> on_host = {};
};

// Values that live for the whole run: persistent roles (params, buffers, momentum, constants, input, labels)
// that some node reads. They are allocated before the first step and never freed by a schedule.
std::vector<int> resident_values(const Graph& g);

// The plan graph of a bare graph (no times, no fingerprint; stages only for SgdUpdate nodes, which update their
// parameter in place): what the executor checks schedules on.
PlanGraph plan_of(const Graph& g, const WorkspaceFn& workspace_bytes, int float_bytes);

// Every node once in order; each transient value freed right after its last reader (or its producer, when
// nothing reads it), or overwritten by its last reader where that runs in place. Keeps whatever backward needs:
// the baseline every other schedule is compared with.
// impl (optional, per node): the implementation each node runs (PlanNode::impls index, an algorithm variant too;
// default 0 for all).
Schedule store_all_schedule(const PlanGraph& p, const std::vector<int>& impl = {});

// The compute step that runs implementation `impl` (PlanNode::impls index) of plan node `node`: an algorithm variant
// becomes its op implementation and algorithm.
Step compute_step(const PlanGraph& p, int node, int impl);
Schedule store_all_schedule(const Graph& g);

// Store-all on the implementations and algorithms that schedule s runs: each node's as at its first compute step in
// s, the defaults for nodes s never computes. It computes every value with the same kernel as s, so the two give
// bitwise the same training step (monet-check --reference store-all). Throws monet::Error when s runs an
// implementation the plan does not have.
Schedule store_all_like(const PlanGraph& p, const Schedule& s);

// Per value: an optional output (PlanNode::optional_outputs) that no compute step of s runs an implementation
// reading. The engine never writes it and never allocates it: its producer runs without it, a free step of it does
// nothing. Steps naming unknown nodes or implementations are skipped (simulate() refuses them).
std::vector<char> unwritten_values(const PlanGraph& p, const Schedule& s);
// Per node: whether schedule s runs it lean (PlanNode::lean_ms): every optional output of it unwritten.
std::vector<char> lean_nodes(const PlanGraph& p, const Schedule& s);

// The implementations of the lean store-all: the lowest store-all peak, then the least time (docs/planner.md, "The
// lean store-all"): a descent first on memory (a change kept when it lowers the bytes in use at the steps, highest
// first: the peak, or below an unchanged peak), by changes of one node and of two coupled nodes, then on time within
// 0.01% of that peak and not above the start's; from the defaults and from the fast store-all's choices, the lower
// peak of the two, so never above either.
// On MobileNetV2 output-activated ClipGrads let every ReLU6 run in place, as PyTorch's does. Where the plan has no
// times (a plan on a backend, not a profile) it is the memory phase alone.
std::vector<int> lean_store_all_impls(const PlanGraph& p);
// store_all_schedule(p, lean_store_all_impls(p)): the smallest store-all peak; the baseline of monet-solve's and
// monet-fit's overheads and of profiles' store-all peak.
Schedule lean_store_all_schedule(const PlanGraph& p);

// The implementations of the fast store-all: each node's fastest implementation on the plan's times, the least
// workspace among the fastest, the earlier (the default first) among those; then, for each node with a lean time
// (PlanNode::lean_ms), the readers of its optional outputs move to their fastest implementations that do not read
// them where the node's lean run saves more than the moves cost. Store-all runs every node once, so its step time
// is the least of any schedule of the plan (where no reader reads the optional outputs of two nodes). Every implementation a profile lists ran on its device (a
// cuDNN algorithm whose workspace did not fit was not timed, cuda::time_conv_algorithms), so the choice stays within
// the device node by node; the whole step's peak is not bounded. Where the plan has no times (a plan on a backend,
// not a profile) it is the defaults: the op's default implementation and the backend's own algorithm, the fast
// choice the engine makes without measurements (cuDNN's heuristics' first within the workspace cap).
std::vector<int> fast_store_all_impls(const PlanGraph& p);
// store_all_schedule(p, fast_store_all_impls(p)): monet-run's store-all without a schedule, and the baseline of
// monet-solve's overheads against the fastest step.
Schedule fast_store_all_schedule(const PlanGraph& p);

struct SimResult {
  int64_t peak_bytes = 0;      // resident + live transients + the running step's outputs and workspace
  int64_t resident_bytes = 0;  // on the device for the whole run (Schedule::on_host's values not counted)
  int peak_step = -1;          // index into Schedule::steps where the peak occurs
  double time_ms = 0;          // sum of the computed nodes' times
  int recomputations = 0;      // compute steps of a node already computed earlier in the schedule
  // The host arena: the resident values kept there (Schedule::on_host) and every other offload's bytes, each value
  // its own host block for the step (a copy to the host may start as soon as its value is computed, so host blocks
  // are not reused within a step).
  int64_t host_peak_bytes = 0;
  int transfers = 0;            // offload and prefetch steps
  int64_t transfer_bytes = 0;   // bytes they copy
};

// What the bytes in use at a step hold: resident values (parameters, momentum, buffers, the batch), activations of
// a forward node's first run (kept), of its later runs (recomputed), gradients (values of loss and backward nodes),
// and the running step's workspace.
enum class MemoryKind : uint8_t { resident, kept, recomputed, gradient, workspace };
inline constexpr int kMemoryKinds = 5;
const char* memory_kind_name(MemoryKind k);

// Bytes in use while one compute step runs: its outputs allocated, its workspace held.
struct MemoryPoint {
  int step = 0;                  // index into Schedule::steps
  int node = 0;                  // the plan node it runs
  bool backward = false;         // a loss, backward or update node
  double start_ms = 0, end_ms = 0;  // predicted: the sum of the times of the compute steps before it, and with it
  std::array<int64_t, kMemoryKinds> bytes{};  // by MemoryKind
  int64_t host_bytes = 0;        // offloaded values on the host meanwhile (not counted in bytes)
  int copies = 0;                // offload and prefetch steps since the compute step before (any after the last
                                 // compute step are in no point)
  int64_t total() const;
};

// Replays the schedule counting bytes: at a compute step the outputs and the workspace are added to what is live,
// then the workspace is dropped (in place: output 0 replaces its input, which ends). Each compute step reads, takes the time and the workspace of its implementation.
// Throws monet::Error naming the step number if a node or value is unknown, an
// input is not live, a value is freed twice or never produced, a backward/update node runs twice, a node reads a
// parameter after its update changed it in place, or a transient is still live at the end (every node but
// recomputed forward nodes runs exactly once); and if on_host names a value that is not resident, or one of them is
// freed or is on the device at the end.
// timeline (optional): one MemoryPoint per compute step, in order.
SimResult simulate(const PlanGraph& p, const Schedule& s, std::vector<MemoryPoint>* timeline = nullptr);

SimResult simulate(const Graph& g, const Schedule& s, const WorkspaceFn& workspace_bytes, int float_bytes = 4);

}  // namespace monet
