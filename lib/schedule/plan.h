// The planning problem as the solver, the simulator and the schedule files see it: values with their exact bytes
// and nodes with their inputs, outputs, time and workspace - nothing about ops or backends. A profile carries one;
// a model at a batch on a backend yields one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/training_graph.h"

namespace monet {

struct PlanValue {
  std::string name;
  int64_t bytes = 0;      // tensor_bytes(): aligned, exact
  bool resident = false;  // allocated for the whole run (params, buffers, momentum, constants, batch, labels)
  int producer = -1;      // node index, -1 for resident values
};

enum class Stage : uint8_t { forward, loss, backward, update };
const char* stage_name(Stage s);
Stage parse_stage(const std::string& s);

// An alternative implementation of a node: the values it reads (a subset of the node's operands), its time and
// its workspace. Outputs are the node's, whatever the implementation. Most are the op's own implementations
// (OpDef::impls, in that order, the default first); a CUDA profile appends algorithm variants of a convolution
// (cuDNN algorithm `algo` of op implementation `op_impl`, with that algorithm's time and workspace).
// A backend algorithm number at or above kBatchSlices runs a convolution (forward, data or weight gradient) over
// the batch in slices: cuDNN algorithm `algo % kBatchSlices` on `algo / kBatchSlices` equal slices of the batch,
// one after another, each writing its slice of the output or, for a weight gradient, adding into the gradient (a
// fixed order: deterministic where the algorithm is), in the workspace of one slice. Its name in a plan:
// "cudnn<algorithm>/<slices>".
inline constexpr int kBatchSlices = 1000;
// The backend algorithm kOwnAlgorithm runs monet's own CUDA kernels where a node's default runs a library's:
// BatchNormalization and the input-activated BatchNormGrad (cuDNN's is their algorithm 0). Its name: "ours".
inline constexpr int kOwnAlgorithm = 999;
std::string algorithm_name(int algo);

struct PlanImpl {
  std::string name;
  std::vector<int> inputs;
  double time_ms = 0;
  int64_t workspace_bytes = 0;
  int op_impl = -1;  // the op implementation it runs; -1: its own index (not a variant)
  int algo = -1;     // the backend algorithm; -1: the backend's own choice
  bool in_place = true;  // may run in place (PlanNode::in_place); a variant follows the implementation it runs
};

struct PlanNode {
  std::string name;
  std::string op;
  Stage stage = Stage::forward;
  std::vector<int> inputs, outputs;  // value ids; inputs: what the default implementation reads
  double time_ms = 0;                // default implementation
  int64_t workspace_bytes = 0;       // default implementation
  // Every implementation, the default first (mirroring inputs, time_ms and workspace_bytes above), when the node
  // has more than one; empty otherwise.
  std::vector<PlanImpl> impls = {};
  // Inputs (value ids, in order of preference) whose memory output 0 may take over when nothing reads them
  // afterwards: transient inputs of output 0's shape and dtype that the op allows (OpDef::in_place). Empty: none.
  std::vector<int> in_place = {};
  // Outputs that only some implementations of their readers read (OpDef::optional_outputs; value ids): a schedule in
  // which no step's implementation reads them does not write them (engine/executor.h), and the node then runs in
  // lean_ms. Attention's P: with every AttentionGrad recomputing, its forward is the fused kernel.
  std::vector<int> optional_outputs = {};
  // The default implementation's time when none of optional_outputs is written; -1: not measured (time_ms either
  // way). Only on a node without implementations (no forward op with optional outputs has algorithm variants).
  double lean_ms = -1;

  int num_impls() const { return impls.empty() ? 1 : static_cast<int>(impls.size()); }
  const std::vector<int>& reads(int impl) const { return impl == 0 || impls.empty() ? inputs : impls.at(impl).inputs; }
  double impl_ms(int impl) const { return impl == 0 || impls.empty() ? time_ms : impls.at(impl).time_ms; }
  int64_t impl_workspace(int impl) const {
    return impl == 0 || impls.empty() ? workspace_bytes : impls.at(impl).workspace_bytes;
  }
  const std::string& impl_name(int impl) const;
  int find_impl(const std::string& name) const;  // -1 if absent
  // What implementation `impl` runs: the op's implementation (OpDef::impls index) and the algorithm (-1: default).
  int op_impl(int impl) const { return impls.empty() || impls.at(impl).op_impl < 0 ? impl : impls.at(impl).op_impl; }
  int algo(int impl) const { return impls.empty() ? -1 : impls.at(impl).algo; }
  // Whether implementation `impl` may write output 0 over one of `in_place` (ImplDef::in_place).
  bool impl_in_place(int impl) const { return impls.empty() || impls.at(op_impl(impl)).in_place; }
  bool has_algorithms() const;
  // The implementation that runs op implementation `op_impl` with algorithm `algo`, -1 if none. A node that lists
  // no algorithm (a plan built from a graph on a backend, not read from a CUDA profile) answers op_impl for any
  // algorithm: there the backend's workspace is already the chosen algorithm's (Backend::choose_algorithm).
  int impl_for(int op_impl, int algo) const;
  // Sets time_ms of implementation `impl` (the default's field too for impl 0).
  void set_impl_ms(int impl, double ms);
  // The time of a run of implementation `impl`, `lean` when none of optional_outputs is written.
  double run_ms(int impl, bool lean) const { return lean && lean_ms >= 0 ? lean_ms : impl_ms(impl); }
};

struct PlanGraph {
  std::string fingerprint;
  std::vector<PlanValue> values;
  std::vector<PlanNode> nodes;  // forward nodes, the loss node, backward nodes, update nodes, in execution order
  int64_t resident_bytes() const;
  int find_node(const std::string& name) const;   // -1 if absent
  int find_value(const std::string& name) const;  // -1 if absent
};

// Per node: whether it runs lean (PlanNode::lean_ms), none of its optional outputs being read (read[v]: some step
// reads value v). Nodes without optional outputs answer false.
std::vector<char> lean_nodes(const PlanGraph& p, const std::vector<char>& read);

// Hash of everything that fixes sizes and dependencies: every node's op, attributes, inputs and outputs, every
// value's name, shape, dtype and role, and the loss. Profiles and schedules carry it; a model at another batch
// differs. The optimizer's lr and momentum are left out (they fix nothing a schedule depends on).
std::string fingerprint(const TrainingGraph& tg);

// A node's workspace in bytes when it runs op implementation impl (OpDef::impls index) on some backend
// (engine/executor.h workspace_with gives a backend's).
using WorkspaceFn = std::function<int64_t(const Node& n, int impl)>;

// The plan graph of a training graph; time_ms(node) may be null (all times 0).
PlanGraph make_plan_graph(const TrainingGraph& tg, const WorkspaceFn& workspace_bytes,
                          int float_bytes, const std::function<double(const Node&)>& time_ms = nullptr);

}  // namespace monet
