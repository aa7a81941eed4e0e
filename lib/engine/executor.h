// The executor: runs a schedule over a graph on a backend, every tensor and workspace placed in one Arena.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>

#include "engine/arena.h"
#include "engine/backend.h"
#include "schedule/schedule.h"
#include "schedule/streams.h"

namespace monet {

class Executor {
 public:
  // Plans offsets with a dry run of the schedule, reserves exactly the arena's high-water mark on the backend,
  // and places the resident values (uninitialised until set_value).
  Executor(const Graph& g, Schedule schedule, Backend& backend, uint64_t seed);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void set_value(int value, const std::vector<double>& host);  // resident values only
  std::vector<double> get_value(int value);                    // resident values only

  // Runs one training step. Each value in `capture` is copied to the host right after it is computed (the first
  // time in the step) and returned. With node_ms, each compute step's time (from its timer mark to the next:
  // Backend::timer_mark; what runs between two nodes, such as copies, counts to the one before) is added to
  // node_ms[node] once the step ends; on_node(node) is called after each node
  // (profiling and progress). Optional outputs (OpDef::optional_outputs) that no step of the schedule reads are
  // never allocated nor written (unwritten_values), profiled or not: a profiled step times each node as the schedule
  // runs it (PlanNode::lean_ms). Capturing one throws monet::Error.
  std::map<int, std::vector<double>> step(const std::set<int>& capture = {}, std::vector<double>* node_ms = nullptr,
                                          const std::function<void(int)>& on_node = nullptr);

  // Diagnosis of a non-finite loss: checks the resident values, then runs one training step like step(), copying
  // each float value a compute step writes to the host as it is computed (slow: every value crosses once). The
  // first value found holding a NaN or an infinity, in that order (a resident one: the state the step starts
  // from), or -1 when none does.
  int step_first_nonfinite();

  const Arena& arena() const { return *arena_; }
  int64_t reserved_bytes() const { return reserved_; }
  // The host arena of offloaded values (Step::Kind::offload, Schedule::on_host): its size, 0 when the schedule
  // offloads nothing.
  int64_t host_reserved_bytes() const { return host_reserved_; }
  const Schedule& schedule() const { return schedule_; }

 private:
  TensorRef ref(int value);
  TensorRef host_ref(int value);  // its host block

  const Graph& g_;
  Schedule schedule_;
  Backend& backend_;
  uint64_t seed_;
  // Per node: a hash of its name (and, where several nodes share a name, its rank among them), mixed with each
  // step's seed into the node's, so that a node's draws (Dropout's mask) do not depend on where import rewrites
  // put it among the nodes.
  std::vector<uint64_t> node_key_;
  int64_t step_index_ = 0;
  std::unique_ptr<Arena> arena_;
  int64_t reserved_ = 0;
  char* block_ = nullptr;
  std::vector<int64_t> offset_;  // per value, -1 when not placed
  std::unique_ptr<Arena> host_arena_;
  int64_t host_reserved_ = 0;
  char* host_block_ = nullptr;
  std::vector<int64_t> host_offset_;  // per value offloaded or with its home on the host, -1 otherwise
  std::vector<char> home_;            // per value: its home is the host (Schedule::on_host)
  // per offload or prefetch step: its value's host block (from the dry run), -1 otherwise
  std::vector<int64_t> move_host_;
  std::vector<std::vector<int>> step_reads_;  // per compute step: the inputs its implementation reads
  std::vector<ScheduledCopy> copies_;         // the schedule's copies (streams.h)
  std::vector<int> copy_index_;               // per step: its copy in copies_, -1 otherwise
  std::vector<CopyChunk> copy_plan_;          // when their pieces are issued (copy_plan_of)
  std::vector<char> unread_optional_;  // per value: an optional output no step reads (not written; see step())
};

// Each node's algorithm in a schedule (-1: the backend's own), throwing naming the step where a node would run
// with two (a backend keeps one per node: its workspace is planned per node).
std::vector<int> algorithms_of(const Graph& g, const Schedule& s);

// Each node of g's workspace on `backend` with its algorithm (algo per node as algorithms_of gives it, or empty:
// every node on the backend's own), for the planner and the simulator.
WorkspaceFn workspace_with(const Backend& backend, const Graph& g, std::vector<int> algo);

// Deterministic 64-bit mix (splitmix64 finaliser) used to derive per-step, per-node seeds.
uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace monet
