// Profiles: what the planner knows about a model at a batch on a device - the plan graph (every value's exact
// bytes, every node's inputs, outputs, time and workspace) plus the metadata that says where the times came from.
// Sources: an estimate from each op's flop and byte formulas on a roofline (no hardware needed), a measurement of
// store-all training steps on the CPU or CUDA engine (with every cuDNN algorithm of each convolution on CUDA), and
// profiles derived from a measured one (onto a newer training graph, or rescaled to another batch).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "ir/import_mode.h"
#include "profile/host_link.h"
#include "schedule/plan.h"
#include "train/training_graph.h"

namespace monet {

inline constexpr int kProfileVersion = 2;  // 2: nodes may list implementations

// Cost-model figures of one node, kept beside the plan (which holds only what the planner needs).
struct NodeCost {
  double flops = 0;         // OpDef::flops, else one per output element (per input element when it has no outputs)
  int64_t bytes_moved = 0;  // the node's input and output tensors (fp32, unpadded): what a kernel reads and writes
};

struct Profile {
  int version = kProfileVersion;
  std::string model;        // the model's name (file stem)
  std::string model_path;   // as given on the command line; informative only
  int64_t batch = 0;
  Shape input_shape;        // the data input's full shape (batch first)
  std::string loss;         // "cross_entropy" | "sum" (loss_name)
  ImportMode import;        // how the model imported (lib/ir/import_mode.h)
  std::string device;       // "estimate" | "cpu" | "cuda"
  nlohmann::json device_info;  // free-form: the roofline, or the CPU and the repeat counts
  std::optional<HostLink> host_link;  // host <-> device copies (host_link.h); absent when neither measured nor given
  PlanGraph plan;           // plan.fingerprint identifies model, batch and loss
  std::vector<NodeCost> costs;  // per plan node
};

// The roofline of an estimated profile: time_ms = max(flops / peak, bytes_moved / bandwidth) + overhead.
// Defaults: an H100 SXM in plain fp32 (cuDNN with TF32 is faster; raise fp32_tflops to model it).
struct Roofline {
  std::string name = "H100-SXM";
  double fp32_tflops = 60;
  double bandwidth_gbs = 3350;
  double kernel_overhead_us = 5;
};

// Per-node flops and bytes from the op formulas (nodes in graph order).
std::vector<NodeCost> node_costs(const Graph& g);

// Estimated profile. Workspace is the CPU backend's (im2col buffers); the CUDA engine will replace it with the
// workspace of the cuDNN algorithm it picks.
Profile estimate_profile(const TrainingGraph& tg, const Roofline& roofline);

struct ProfileProgress {
  int step = 0;        // 1-based, warm-up steps included
  int steps = 0;       // warm-up + repeats
  bool warmup = false; // this step is not measured
  int node = 0;        // nodes done in this step
  int nodes = 0;
  bool step_done = false;
  double step_ms = 0;  // when step_done: the step's wall time
};
using ProgressFn = std::function<void(const ProfileProgress&)>;

// Measured profile on a backend (fp32): `warmup` untimed then `repeats` timed store-all training steps, each
// node's time the median over the repeats (CPU: wall time; CUDA: CUDA events around the node), its workspace the
// backend's. progress (may be null) is called after every node.
Profile measure_profile(const TrainingGraph& tg, Backend& backend, int warmup, int repeats,
                        const ProgressFn& progress = nullptr, uint64_t seed = 0);
// measure_profile on the CPU backend.
Profile measure_profile_cpu(const TrainingGraph& tg, int warmup, int repeats, const ProgressFn& progress = nullptr,
                            uint64_t seed = 0);

// Sums per stage (forward includes the loss node) of each node's default time as the defaults' store-all runs it
// (lean where no default reads its optional outputs), and the simulated peak of the lean store-all.
struct ProfileTotals {
  double forward_ms = 0, backward_ms = 0, update_ms = 0, step_ms = 0;
  int64_t resident_bytes = 0;
  int64_t store_all_peak_bytes = 0;
};
ProfileTotals profile_totals(const Profile& p);

// Makes a node's backend algorithms implementations the planner can pick (MONeT's workspace-for-time choice): a
// convolution's cuDNN algorithms (forward or backward), batch norm's cuDNN and ours. `algorithms` is
// cuda::time_algorithms' list for the node (algo, status, deterministic, chosen_by_default, time_ms,
// workspace_bytes, in the heuristics' order). Each algorithm's first entry that ran ("ok") and is deterministic
// becomes a variant of the default implementation ("cudnn<k>" or "ours", PlanImpl::algo = k), after the op's other
// implementations, with
// the node's measured time scaled by the algorithm's benchmark time over the default algorithm's, and its
// workspace - unless another entry, the default included, is at least as fast with at most its workspace.
// Nothing for a node that is neither a forward nor a backward one or whose default algorithm did not run. Returns
// how many.
// nondeterministic: offer algorithms that are not deterministic too (monet-profile --nondeterministic-algorithms).
int add_algorithm_variants(PlanNode& n, const nlohmann::json& algorithms, bool nondeterministic = false);

// The algorithm implementations of a CUDA profile re-derived from the cuDNN timings it recorded
// (device_info.conv_algorithms): every node's algorithm variants are dropped, then add_algorithm_variants runs on
// each recorded convolution. No GPU needed (monet-profile --rederive). Throws naming `path` when the profile
// recorded none. Returns how many implementations were added.
int rederive_algorithm_variants(Profile& p, bool nondeterministic, const std::string& path);

// Sets each node's in-place options (PlanNode::in_place, and each implementation's PlanImpl::in_place) to what the
// ops allow now (OpDef::in_place, ImplDef::in_place): a profile records them when it is made, so one made before an
// op allowed running in place (SoftmaxCrossEntropyGrad over the logits) keeps the older options. Times, workspaces
// and implementations stay: a node that newly runs in place keeps the time measured out of place (for a view,
// whose in-place run does nothing, an overestimate). Fails naming `path` when tg is another training graph. Returns
// how many nodes changed (monet-profile --rederive).
int refresh_in_place(Profile& p, const TrainingGraph& tg, const std::string& path);

// The profile of training graph tg derived from a measured profile of the same model, batch, input shape and loss
// made on an earlier training graph (another fingerprint: the backward's node order, in-place options or
// implementations changed), without a device: each node's times and workspaces are carried by its key (a forward
// node's name; a backward node's forward node, op and rank among that forward node's nodes of the op, so that a
// reordered backward keeps its timings), each implementation's by its name; an implementation the measured profile
// lacks is timed as the node's default. Recorded cuDNN timings follow their nodes and the algorithm variants are
// made again from them. device_info.derived says so; bytes are tg's own. A graph with convolutions split over
// their concatenated inputs (split_concat_conv.h) derives from a profile of the joined graph: the nodes the split
// made are estimated (carry_profile's SplitConvEstimate) and listed under device_info.derived.split_conv_estimates.
// Throws naming `path` on any other model or any other node without a measured twin.
Profile derive_profile(const TrainingGraph& tg, const Profile& measured, const std::string& path,
                       bool nondeterministic = false);

// The profile of training graph tg at another batch than the measured profile's (same model, input shape but the
// batch, and loss): as derive_profile, with the times and workspaces of forward, loss and backward nodes (and the
// recorded cuDNN timings) scaled by tg's batch over the measured batch; updates keep theirs (their work does not
// depend on the batch). An estimate: kernels are not exactly linear in the batch (monet-fit --profile).
Profile rescale_profile(const TrainingGraph& tg, const Profile& measured, const std::string& path,
                        bool nondeterministic = false);

// JSON: {"format": "monet-profile", "version": 2, "fingerprint", model metadata, "device", "device_info",
// "values": [{name, bytes, resident, producer}], "nodes": [{name, op, stage, inputs, outputs, time_ms,
// workspace_bytes, flops, bytes_moved}], "totals"}. Ids are indices into values / nodes. "totals" is derived
// (written for readers, ignored on reading).
nlohmann::json profile_to_json(const Profile& p);
// Validates (format, version, every field's type, every id in range, producers matching outputs); throws one
// monet::Error naming the file and the field.
Profile profile_from_json(const nlohmann::json& j, const std::string& path);

void write_profile(const std::string& path, const Profile& p);  // atomic
Profile read_profile(const std::string& path);

}  // namespace monet
