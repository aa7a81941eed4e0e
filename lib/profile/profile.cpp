#include "profile/profile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/json_io.h"
#include "engine/executor.h"
#include "ir/onnx_import.h"
#include "ir/split_concat_conv.h"
#include "ops/op.h"
#include "schedule/schedule.h"

namespace monet {

// ---------------------------------------------------------------------------------------------- cost formulas

namespace {

// Bytes a kernel running implementation `impl` of n reads and writes (fp32, unpadded); `lean`: its optional
// outputs not written (OpDef::optional_outputs).
int64_t impl_bytes_moved(const Graph& g, const Node& n, int impl, bool lean = false) {
  auto traffic = [&](int v) { return numel(g.values[v].shape) * element_bytes(g.values[v].dtype, 4); };
  const ImplDef def = impls_of(n).at(impl);
  const std::vector<int>& optional = op_def(n.op).optional_outputs;
  int64_t bytes = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (def.reads_input(static_cast<int>(i))) bytes += traffic(n.inputs[i]);
  for (size_t o = 0; o < n.outputs.size(); ++o)
    if (!lean || std::find(optional.begin(), optional.end(), static_cast<int>(o)) == optional.end())
      bytes += traffic(n.outputs[o]);
  return bytes;
}

}  // namespace

std::vector<NodeCost> node_costs(const Graph& g) {
  std::vector<NodeCost> costs;
  costs.reserve(g.nodes.size());
  for (const Node& n : g.nodes) {
    NodeCost c;
    c.bytes_moved = impl_bytes_moved(g, n, 0);
    const OpDef& def = op_def(n.op);
    if (def.flops) {
      c.flops = def.flops(g, n);
    } else {
      for (int v : n.outputs) c.flops += static_cast<double>(numel(g.values[v].shape));
      // In-place ops (SgdUpdate) have no outputs: count the elements they update.
      if (n.outputs.empty() && !n.inputs.empty()) c.flops = static_cast<double>(numel(g.values[n.inputs[0]].shape));
    }
    costs.push_back(c);
  }
  return costs;
}

namespace {

void fill_metadata(Profile& p, const TrainingGraph& tg) {
  const Graph& g = tg.graph;
  p.model = g.model_name;
  p.input_shape = g.values[g.data_input].shape;
  p.batch = p.input_shape.empty() ? 0 : p.input_shape[0];
  p.loss = loss_name(tg.options.loss);
  p.import = import_mode_of(g);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

// ---------------------------------------------------------------------------------------------- estimate

Profile estimate_profile(const TrainingGraph& tg, const Roofline& roofline) {
  if (!(roofline.fp32_tflops > 0)) fail("roofline: fp32 TFLOPS must be positive, got ", roofline.fp32_tflops);
  if (!(roofline.bandwidth_gbs > 0)) fail("roofline: bandwidth must be positive, got ", roofline.bandwidth_gbs, " GB/s");
  if (!(roofline.kernel_overhead_us >= 0))
    fail("roofline: kernel overhead must be >= 0, got ", roofline.kernel_overhead_us, " us");
  const Graph& g = tg.graph;
  Profile p;
  fill_metadata(p, tg);
  p.device = "estimate";
  p.device_info = {{"name", roofline.name},
                   {"fp32_tflops", roofline.fp32_tflops},
                   {"bandwidth_gbs", roofline.bandwidth_gbs},
                   {"kernel_overhead_us", roofline.kernel_overhead_us},
                   {"time_model", "max(flops / peak, bytes_moved / bandwidth) + overhead"},
                   {"workspace", "CPU engine (im2col); the CUDA engine will give cuDNN's"}};
  p.costs = node_costs(g);
  auto backend = make_cpu_backend(4);
  p.plan = make_plan_graph(tg, workspace_with(*backend, g, {}), 4);
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    PlanNode& n = p.plan.nodes[i];
    // Implementations differ in the bytes they read and, where the op says so (OpDef::impl_flops), in flops.
    const OpDef& def = op_def(g.nodes[i].op);
    auto estimate_ms = [&](int impl, bool lean) {
      const double flops = def.impl_flops ? def.impl_flops(g, g.nodes[i], n.op_impl(impl)) : p.costs[i].flops;
      const double compute_s = flops / (roofline.fp32_tflops * 1e12);
      const double bytes = static_cast<double>(impl_bytes_moved(g, g.nodes[i], impl, lean));
      const double memory_s = bytes / (roofline.bandwidth_gbs * 1e9);
      return std::max(compute_s, memory_s) * 1e3 + roofline.kernel_overhead_us * 1e-3;
    };
    for (int impl = 0; impl < n.num_impls(); ++impl) n.set_impl_ms(impl, estimate_ms(impl, false));
    if (!n.optional_outputs.empty() && n.impls.empty()) n.lean_ms = estimate_ms(0, true);
  }
  // A view that store-all runs in place launches nothing (OpDef::view), as a measured profile times it.
  for (const Step& st : store_all_schedule(p.plan).steps)
    if (st.kind == Step::Kind::compute && st.in_place >= 0 && op_def(g.nodes[st.id].op).view)
      p.plan.nodes[st.id].set_impl_ms(0, 0.0);
  return p;
}

// ---------------------------------------------------------------------------------------------- CPU measurement

Profile measure_profile_cpu(const TrainingGraph& tg, int warmup, int repeats, const ProgressFn& progress,
                            uint64_t seed) {
  auto backend = make_cpu_backend(4);
  return measure_profile(tg, *backend, warmup, repeats, progress, seed);
}

Profile measure_profile(const TrainingGraph& tg, Backend& backend_ref, int warmup, int repeats,
                        const ProgressFn& progress, uint64_t seed) {
  if (warmup < 0) fail("--warmup must be >= 0, got ", warmup);
  if (repeats <= 0) fail("--repeats must be positive, got ", repeats);
  if (backend_ref.float_bytes() != 4) fail("profiles are measured in fp32");
  const Graph& g = tg.graph;
  Backend* backend = &backend_ref;
  const bool cpu = backend->name() == "cpu";
  PlanGraph plan = make_plan_graph(tg, workspace_with(*backend, g, {}), 4);
  const std::vector<std::vector<double>> initial = initial_values(tg, seed);
  int max_impls = 1;
  for (const PlanNode& n : plan.nodes) max_impls = std::max(max_impls, n.num_impls());

  // Pass i runs store-all steps with implementation i wherever a node has one (the default elsewhere); each
  // node's samples come from the passes that ran each of its implementations.
  const int nodes = static_cast<int>(g.nodes.size()), steps = max_impls * (warmup + repeats);
  // A node with optional outputs (and no implementations of its own) runs lean in the passes whose store-all reads
  // none of them: those samples give its lean time (PlanNode::lean_ms), the others its time.
  std::vector<std::vector<std::vector<double>>> samples(g.nodes.size(), std::vector<std::vector<double>>(max_impls));
  std::vector<std::vector<double>> lean_samples(g.nodes.size());
  int s = 0;
  for (int pass = 0; pass < max_impls; ++pass) {
    std::vector<int> impl(g.nodes.size(), 0);
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (pass < plan.nodes[n].num_impls()) impl[n] = pass;
    const Schedule schedule = store_all_schedule(plan, impl);
    const std::vector<char> lean = lean_nodes(plan, schedule);
    Executor executor(g, schedule, *backend, seed);
    for (int v : resident_values(g)) executor.set_value(v, initial[v]);
    for (int r = 1; r <= warmup + repeats; ++r) {
      ++s;
      ProfileProgress at{s, steps, r <= warmup, 0, nodes, false};
      std::vector<double> node_ms(g.nodes.size(), 0.0);
      const auto t0 = std::chrono::steady_clock::now();
      executor.step({}, &node_ms, [&](int) {
        ++at.node;
        if (progress) progress(at);
      });
      at.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r > warmup)
        for (size_t n = 0; n < g.nodes.size(); ++n)
          (lean[n] && plan.nodes[n].impls.empty() ? lean_samples[n] : samples[n][impl[n]]).push_back(node_ms[n]);
      at.step_done = true;
      if (progress) progress(at);
    }
  }

  Profile p;
  fill_metadata(p, tg);
  p.device = cpu ? "cpu" : "cuda";
  if (cpu)
    p.device_info = {{"name", backend->name()},
                     {"cpu", cpu_model_name()},
                     {"hardware_threads", std::thread::hardware_concurrency()},
                     {"warmup", warmup},
                     {"repeats", repeats},
                     {"time", "median over the repeats of each node's wall time in a store-all step (one pass of "
                               "store-all steps per implementation index)"}};
  else
    p.device_info = {{"name", backend->name()},
                     {"device", backend->describe()},
                     {"warmup", warmup},
                     {"repeats", repeats},
                     {"time", "median over the repeats of each node's time in a store-all step: from a CUDA event "
                               "recorded before it to the next node's, the step waited for once at its end (one pass "
                               "per implementation index)"}};
  p.costs = node_costs(g);
  p.plan = std::move(plan);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    PlanNode& pn = p.plan.nodes[n];
    // Lean in every pass (no implementation of any reader reads the optional outputs): its time is the lean one.
    if (samples[n][0].empty()) std::swap(samples[n][0], lean_samples[n]);
    for (int i = 0; i < pn.num_impls(); ++i) pn.set_impl_ms(i, median(samples[n][i]));
    if (!lean_samples[n].empty()) pn.lean_ms = median(lean_samples[n]);
  }
  return p;
}

// ---------------------------------------------------------------------------------------------- totals

ProfileTotals profile_totals(const Profile& p) {
  ProfileTotals t;
  // Each node as the defaults' store-all runs it: lean where no default reads its optional outputs.
  const std::vector<char> lean = lean_nodes(p.plan, store_all_schedule(p.plan));
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    const PlanNode& n = p.plan.nodes[i];
    const double ms = n.run_ms(0, lean[i]);
    switch (n.stage) {
      case Stage::forward:
      case Stage::loss: t.forward_ms += ms; break;
      case Stage::backward: t.backward_ms += ms; break;
      case Stage::update: t.update_ms += ms; break;
    }
    t.step_ms += ms;
  }
  const SimResult sim = simulate(p.plan, lean_store_all_schedule(p.plan));
  t.resident_bytes = sim.resident_bytes;
  t.store_all_peak_bytes = sim.peak_bytes;
  return t;
}

// ---------------------------------------------------------------------------------------------- json

nlohmann::json profile_to_json(const Profile& p) {
  using nlohmann::json;
  MONET_CHECK(p.costs.size() == p.plan.nodes.size(), "costs for ", p.costs.size(), " of ", p.plan.nodes.size(),
              " nodes");
  json values = json::array(), nodes = json::array();
  for (const PlanValue& v : p.plan.values)
    values.push_back({{"name", v.name}, {"bytes", v.bytes}, {"resident", v.resident}, {"producer", v.producer}});
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    const PlanNode& n = p.plan.nodes[i];
    json node = {{"name", n.name},
                 {"op", n.op},
                 {"stage", stage_name(n.stage)},
                 {"inputs", n.inputs},
                 {"outputs", n.outputs},
                 {"time_ms", n.time_ms},
                 {"workspace_bytes", n.workspace_bytes},
                 {"flops", p.costs[i].flops},
                 {"bytes_moved", p.costs[i].bytes_moved}};
    if (!n.impls.empty()) {
      json impls = json::array();
      for (const PlanImpl& im : n.impls) {
        json entry = {{"name", im.name}, {"inputs", im.inputs}, {"time_ms", im.time_ms},
                      {"workspace_bytes", im.workspace_bytes}};
        if (!im.in_place && im.algo < 0) entry["in_place"] = false;  // (a variant follows what it runs)
        if (im.algo >= 0) {  // an algorithm variant: the implementation it runs, with which algorithm
          entry["runs"] = n.impl_name(n.op_impl(static_cast<int>(&im - n.impls.data())));
          entry["algorithm"] = im.algo;
        }
        impls.push_back(std::move(entry));
      }
      node["impls"] = impls;
    }
    if (!n.in_place.empty()) node["in_place"] = n.in_place;
    if (!n.optional_outputs.empty()) node["optional_outputs"] = n.optional_outputs;
    if (n.lean_ms >= 0) node["lean_time_ms"] = n.lean_ms;
    nodes.push_back(std::move(node));
  }
  const ProfileTotals t = profile_totals(p);
  json out = {{"format", "monet-profile"},
          {"version", p.version},
          {"fingerprint", p.plan.fingerprint},
          {"model", p.model},
          {"model_path", p.model_path},
          {"batch", p.batch},
          {"input_shape", p.input_shape},
          {"loss", p.loss},
          {"device", p.device},
          {"device_info", p.device_info.is_null() ? json::object() : p.device_info},
          {"totals",
           {{"forward_ms", t.forward_ms},
            {"backward_ms", t.backward_ms},
            {"update_ms", t.update_ms},
            {"step_ms", t.step_ms},
            {"resident_bytes", t.resident_bytes},
            {"store_all_peak_bytes", t.store_all_peak_bytes}}},
          {"values", values},
          {"nodes", nodes}};
  write_import_mode(out, p.import);
  if (p.host_link) out["host_link"] = to_json(*p.host_link);
  return out;
}

int add_algorithm_variants(PlanNode& n, const nlohmann::json& algorithms, bool nondeterministic) {
  if ((n.stage != Stage::backward && n.stage != Stage::forward) || !algorithms.is_array()) return 0;
  struct Option {
    int algo;
    double time_ms;
    int64_t workspace;
  };
  std::vector<Option> ran;  // the first entry of each algorithm that ran (and is deterministic, unless asked), in order
  const Option* def = nullptr;
  std::vector<int> seen;
  int default_algo = -1;
  for (const auto& e : algorithms) {
    const int algo = e.value("algo", -1);
    if (algo < 0 || std::find(seen.begin(), seen.end(), algo) != seen.end()) continue;
    seen.push_back(algo);
    if (e.value("status", "") != "ok" || !(nondeterministic || e.value("deterministic", false)) || !e.contains("time_ms"))
      continue;
    ran.push_back({algo, e["time_ms"].get<double>(), e.value("workspace_bytes", int64_t{0})});
    if (e.value("chosen_by_default", false)) default_algo = algo;
  }
  for (const Option& o : ran)
    if (o.algo == default_algo) def = &o;
  if (!def || def->time_ms <= 0) return 0;
  // Dominated: another option no slower and with no more workspace (on a tie, the default, then the earlier).
  auto beats = [&](size_t d, size_t c) {
    const Option &a = ran[d], &b = ran[c];
    if (a.time_ms > b.time_ms || a.workspace > b.workspace) return false;
    if (a.time_ms < b.time_ms || a.workspace < b.workspace) return true;
    return &a == def || (&b != def && d < c);
  };
  const double scale = n.time_ms / def->time_ms;
  int added = 0;
  for (size_t c = 0; c < ran.size(); ++c) {
    if (&ran[c] == def) continue;
    bool dominated = false;
    for (size_t d = 0; d < ran.size() && !dominated; ++d) dominated = d != c && beats(d, c);
    if (dominated) continue;
    if (n.impls.empty()) n.impls.push_back({n.impl_name(0), n.inputs, n.time_ms, n.workspace_bytes});
    PlanImpl v{algorithm_name(ran[c].algo), n.impls[0].inputs, ran[c].time_ms * scale, ran[c].workspace};
    v.op_impl = 0;
    v.algo = ran[c].algo;
    n.impls.push_back(std::move(v));
    ++added;
  }
  return added;
}

namespace {

// A node's key across training graphs: a forward node's name; a backward node "F/grad/<Op><k>" (autodiff's names)
// becomes "F/grad/<Op>#<rank of this node among F's nodes of that op>", which a reorder of F's backward keeps.
std::vector<std::string> node_keys(const PlanGraph& p) {
  std::map<std::string, int> rank;
  std::vector<std::string> keys;
  for (const PlanNode& n : p.nodes) {
    const size_t at = n.name.rfind("/grad/" + n.op);
    const std::string tail = at == std::string::npos ? "" : n.name.substr(at + 6 + n.op.size());
    if (at == std::string::npos || tail.empty() || tail.find_first_not_of("0123456789") != std::string::npos) {
      keys.push_back(n.name);
      continue;
    }
    const std::string base = n.name.substr(0, at + 6) + n.op;
    keys.push_back(base + "#" + std::to_string(rank[base]++));
  }
  return keys;
}

}  // namespace

namespace {

// A convolution's recorded timings over k slices of its batch (`"slices": k`) apply only where k divides its batch
// now (dim 0 of input 0, the data or its gradient, for every convolution op): a rescaled profile's batch need not
// be a multiple of the measured one's slice counts, and the CUDA engine refuses such an algorithm.
void drop_slices_not_dividing(nlohmann::json& entry, const Graph& g, const Node& n) {
  if (!entry.contains("algorithms") || !entry["algorithms"].is_array() || n.inputs.empty()) return;
  const Shape& s = g.values[n.inputs[0]].shape;
  if (s.empty()) return;
  std::erase_if(entry["algorithms"].get_ref<nlohmann::json::array_t&>(), [&](const nlohmann::json& a) {
    const int64_t k = a.is_object() ? a.value("slices", int64_t{1}) : 1;
    return k > 1 && s[0] % k != 0;
  });
}

// Nodes without a measured twin where the two graphs split convolutions over their concatenated inputs differently
// (split_concat_conv.h: another import mode, or another batch or input shape under the rewrite's size condition):
// - a node of a split convolution measured joined: a part Conv and its backward nodes take the joined Conv's (or its
//   backward node's) measurements times their share of its FLOPs ("<conv>/part<i>" read as "<conv>" in the key);
// - a joined convolution measured split: its nodes take the sum of its parts' ("<conv>" read as "<conv>/part<i>",
//   i = 0, 1, ... while the profile has one), without algorithm variants;
// - the nodes only one graph has (the weight's Split and SplitGrad and the Sum, or the Concat and its gradient's
//   Split) take bytes_moved over the GB/s the measured profile's nodes of their op reached (of the other copy ops
//   among Concat, Split and SplitGrad where it has none of the op, else of every node that moves more bytes than it
//   does FLOPs), and at least the least time of any measured node (a launch).
// The first kind is recognised by the nodes' marks (split_concat_conv.h from_split_conv), the others only where
// the measured profile was imported with the split.
struct SplitConvEstimate {
  const std::map<std::string, int>* old_of;
  const Profile* measured;

  struct Found {
    int twin = -1;           // one measured node, times `share`
    double share = 1.0;
    std::vector<int> parts;  // the measured parts, summed
    bool by_bytes = false;   // none: bytes over a measured bandwidth
  };

  int find(const std::string& key, const std::string& op) const {
    auto it = old_of->find(key);
    return it != old_of->end() && measured->plan.nodes[static_cast<size_t>(it->second)].op == op ? it->second : -1;
  }

  // Node i of graph g (plan node n, key `key`, `flops` at g's batch, `scale`: g's batch over the measured one's);
  // nothing found (every field at its default) where the node has no counterpart of either kind.
  Found of(const Graph& g, size_t i, const PlanNode& n, const std::string& key, double flops, double scale) const {
    Found f;
    if (from_split_conv(g, static_cast<int>(i))) {
      if (const std::string joined_key = split_conv_joined_name(key); !joined_key.empty()) {
        f.twin = find(joined_key, n.op);
        const double joined = f.twin >= 0 ? measured->costs[static_cast<size_t>(f.twin)].flops * scale : 0;
        if (joined > 0) {  // the twin's time at g's batch, times this part's share of its FLOPs there
          f.share = flops / joined;
          return f;
        }
        f.twin = -1;
      }
      f.by_bytes = true;
      return f;
    }
    if (measured->import.concat_conv != "split") return f;
    const size_t grad = key.find("/grad/");
    const std::string fwd = grad == std::string::npos ? key : key.substr(0, grad);
    const std::string rest = grad == std::string::npos ? "" : key.substr(grad);
    for (int part = 0;; ++part) {
      const int t = find(split_conv_part_name(fwd, part) + rest, n.op);
      if (t < 0) break;
      f.parts.push_back(t);
    }
    if (!f.parts.empty()) return f;
    const Node& node = g.nodes[i];
    f.by_bytes = node.op == "Concat" || (node.forward_node >= 0 && g.nodes[node.forward_node].op == "Concat");
    return f;
  }

  // The least time of any measured node: what a kernel of the fewest bytes costs.
  double least_ms() const {
    double least = 0;
    for (const PlanNode& n : measured->plan.nodes)
      if (n.time_ms > 0 && (least == 0 || n.time_ms < least)) least = n.time_ms;
    return least;
  }

  // GB/s (bytes per ms) of the measured nodes of `op`, else of its kin (Concat, Split and SplitGrad copy pieces of a
  // tensor alike), else of every memory-bound measured node.
  double bytes_per_ms(const std::string& op) const {
    const std::vector<std::string> copies = {"Concat", "Split", "SplitGrad"};
    const bool copy = std::find(copies.begin(), copies.end(), op) != copies.end();
    double bytes[3] = {}, ms[3] = {};  // the op, its kin, every memory-bound node
    for (size_t i = 0; i < measured->plan.nodes.size(); ++i) {
      const PlanNode& n = measured->plan.nodes[i];
      const NodeCost& c = measured->costs[i];
      if (!(n.time_ms > 0) || c.bytes_moved <= 0) continue;
      const bool kin = copy && std::find(copies.begin(), copies.end(), n.op) != copies.end();
      const bool memory_bound = c.flops <= static_cast<double>(c.bytes_moved);
      for (int k = 0; k < 3; ++k)
        if (k == 0 ? n.op == op : k == 1 ? kin : memory_bound) {
          bytes[k] += static_cast<double>(c.bytes_moved);
          ms[k] += n.time_ms;
        }
    }
    for (int k = 0; k < 3; ++k)
      if (ms[k] > 0) return bytes[k] / ms[k];
    return 0;
  }
};

// derive_profile and rescale_profile: scale 1 carries times and workspaces as measured.
Profile carry_profile(const TrainingGraph& tg, const Profile& measured, const std::string& path, bool nondeterministic,
                      bool rescale) {
  Profile p;
  fill_metadata(p, tg);
  auto but_batch = [](Shape s) {
    if (!s.empty()) s[0] = 0;
    return s;
  };
  const bool same_shape = rescale ? but_batch(p.input_shape) == but_batch(measured.input_shape)
                                  : p.input_shape == measured.input_shape;
  if (p.model != measured.model || !same_shape || p.loss != measured.loss)
    fail(path, ": a profile of another model, ", rescale ? "" : "batch or ", "input shape: ", measured.model, " ",
         shape_str(measured.input_shape), " (loss ", measured.loss, "), this is ", p.model, " ",
         shape_str(p.input_shape), " (loss ", p.loss, ")");
  if (rescale && measured.batch <= 0) fail(path, ": batch ", measured.batch, ": cannot rescale");
  const double scale = rescale ? static_cast<double>(p.batch) / static_cast<double>(measured.batch) : 1.0;
  auto bytes = [&](int64_t b, double f) { return static_cast<int64_t>(std::llround(static_cast<double>(b) * f)); };
  p.model_path = measured.model_path;
  p.device = measured.device;
  p.costs = node_costs(tg.graph);
  p.plan = make_plan_graph(tg, nullptr, 4);
  std::map<std::string, int> old_of;
  const std::vector<std::string> old_keys = node_keys(measured.plan), keys = node_keys(p.plan);
  for (size_t i = 0; i < old_keys.size(); ++i) old_of[old_keys[i]] = static_cast<int>(i);
  nlohmann::json algorithms = nlohmann::json::object();
  const nlohmann::json* recorded = measured.device_info.contains("conv_algorithms")
                                       ? &measured.device_info["conv_algorithms"] : nullptr;
  const SplitConvEstimate split{&old_of, &measured};
  nlohmann::json estimated = nlohmann::json::array();
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    PlanNode& n = p.plan.nodes[i];
    auto it = old_of.find(keys[i]);
    double share = 1.0;  // a part of a split convolution: its share of the joined one's FLOPs
    if (it == old_of.end()) {
      const double f = n.stage == Stage::update ? 1.0 : scale;
      const SplitConvEstimate::Found found = split.of(tg.graph, i, n, keys[i], p.costs[i].flops, f);
      if (found.by_bytes) {  // bytes at g's batch: no scaling
        const double bpm = split.bytes_per_ms(n.op);
        if (!(bpm > 0)) fail(path, ": node '", n.name, "' (", n.op, ") has no measured twin and nothing to time it by");
        const double ms = std::max(static_cast<double>(p.costs[i].bytes_moved) / bpm, split.least_ms());
        for (int impl = 0; impl < n.num_impls(); ++impl) n.set_impl_ms(impl, ms);
        estimated.push_back(n.name);
        continue;
      }
      if (!found.parts.empty()) {  // a joined convolution's node: the sum of its measured parts'
        int64_t workspace = 0;
        for (int impl = 0; impl < n.num_impls(); ++impl) {
          double ms = 0;
          int64_t ws = 0;
          for (int t : found.parts) {
            const PlanNode& part = measured.plan.nodes[static_cast<size_t>(t)];
            const int o = part.find_impl(n.impl_name(impl));
            ms += o >= 0 ? part.impl_ms(o) : part.time_ms;
            ws = std::max(ws, o >= 0 ? part.impl_workspace(o) : part.workspace_bytes);
          }
          n.set_impl_ms(impl, f * ms);
          if (!n.impls.empty()) n.impls[impl].workspace_bytes = bytes(ws, f);
          workspace = std::max(workspace, ws);
        }
        n.workspace_bytes = bytes(workspace, f);
        estimated.push_back(n.name);
        continue;
      }
      if (found.twin >= 0) {
        it = old_of.find(old_keys[static_cast<size_t>(found.twin)]);
        share = found.share;
        estimated.push_back(n.name);
      }
    }
    if (it == old_of.end() || measured.plan.nodes[it->second].op != n.op)
      fail(path, ": node '", n.name, "' (", n.op, ") has no measured twin (key ", keys[i], ")");
    const PlanNode& old = measured.plan.nodes[it->second];
    const double f = (n.stage == Stage::update ? 1.0 : scale) * share;
    n.workspace_bytes = bytes(old.workspace_bytes, f);
    for (int impl = 0; impl < n.num_impls(); ++impl) {
      const int o = old.find_impl(n.impl_name(impl));
      n.set_impl_ms(impl, f * (o >= 0 ? old.impl_ms(o) : old.time_ms));
      if (!n.impls.empty())
        n.impls[impl].workspace_bytes = bytes(o >= 0 ? old.impl_workspace(o) : old.workspace_bytes, f);
    }
    if (old.lean_ms >= 0) n.lean_ms = f * old.lean_ms;
    if (recorded && recorded->contains(old.name)) {
      nlohmann::json entry = (*recorded)[old.name];
      drop_slices_not_dividing(entry, tg.graph, tg.graph.nodes[i]);
      if (f != 1.0 && entry.contains("algorithms") && entry["algorithms"].is_array())
        for (nlohmann::json& a : entry["algorithms"]) {
          if (a.contains("time_ms") && a["time_ms"].is_number()) a["time_ms"] = f * a["time_ms"].get<double>();
          if (a.contains("workspace_bytes") && a["workspace_bytes"].is_number_integer())
            a["workspace_bytes"] = bytes(a["workspace_bytes"].get<int64_t>(), f);
        }
      algorithms[n.name] = entry;
    }
  }
  p.device_info = measured.device_info;
  p.host_link = measured.host_link;
  p.device_info.erase("conv_algorithms");
  if (!algorithms.empty()) p.device_info["conv_algorithms"] = algorithms;
  p.device_info["derived"] = {
      {"from", path},
      {"from_fingerprint", measured.plan.fingerprint},
      {"how", rescale ? "rescaled from batch " + std::to_string(measured.batch) +
                            ": times and workspaces of forward, loss and backward nodes (and the recorded cuDNN "
                            "timings) times " + std::to_string(scale) + ", updates as measured; an estimate"
                      : std::string("times and workspaces carried by node key from a profile measured on an earlier "
                                    "training graph; in-place runs timed as their out-of-place twins; re-measure on "
                                    "a GPU")}};
  if (!estimated.empty())
    p.device_info["derived"]["split_conv_estimates"] = {
        {"nodes", estimated},
        {"how", "nodes of convolutions over concatenations that the measured profile splits otherwise (split "
                "there, joined here, or the reverse): a part's convolution nodes at their share of the joined "
                "node's FLOPs (its cuDNN timings and workspaces too), a joined convolution's nodes at the sum of its "
                "parts' (its cuDNN timings not carried), the nodes only one graph has at the GB/s the profile's "
                "nodes of their op reached; an estimate"}};
  if (!algorithms.empty()) rederive_algorithm_variants(p, nondeterministic, path);
  return p;
}

}  // namespace

Profile derive_profile(const TrainingGraph& tg, const Profile& measured, const std::string& path,
                       bool nondeterministic) {
  return carry_profile(tg, measured, path, nondeterministic, false);
}

Profile rescale_profile(const TrainingGraph& tg, const Profile& measured, const std::string& path,
                        bool nondeterministic) {
  return carry_profile(tg, measured, path, nondeterministic, true);
}

int rederive_algorithm_variants(Profile& p, bool nondeterministic, const std::string& path) {
  auto it = p.device_info.find("conv_algorithms");
  if (it == p.device_info.end() || !it->is_object())
    fail(path, ": no algorithm timings recorded (device_info.conv_algorithms: a --device cuda profile made "
         "without --no-conv-algorithms has them)");
  for (PlanNode& n : p.plan.nodes) {
    std::erase_if(n.impls, [](const PlanImpl& im) { return im.algo >= 0; });
    if (n.impls.size() == 1) n.impls.clear();  // the default alone: no choice
  }
  int added = 0;
  for (const auto& [name, entry] : it->items()) {
    const int node = p.plan.find_node(name);
    if (node < 0) fail(path, ": device_info.conv_algorithms names node '", name, "', which the profile does not have");
    if (!entry.is_object() || !entry.contains("algorithms"))
      fail(path, ": device_info.conv_algorithms['", name, "']: expected an object with \"algorithms\"");
    added += add_algorithm_variants(p.plan.nodes[static_cast<size_t>(node)], entry["algorithms"], nondeterministic);
  }
  p.device_info["nondeterministic_algorithms_offered"] = nondeterministic;
  return added;
}

int refresh_in_place(Profile& p, const TrainingGraph& tg, const std::string& path) {
  if (p.plan.fingerprint != fingerprint(tg))
    fail(path, ": the profile is of another training graph (fingerprint ", p.plan.fingerprint, ", the model's ",
         fingerprint(tg), ")");
  const PlanGraph now = plan_of(tg.graph, nullptr, 4);  // in-place options depend on shapes and dtypes, not bytes
  MONET_CHECK(now.nodes.size() == p.plan.nodes.size(), "same fingerprint, different node counts");
  int changed = 0;
  for (size_t i = 0; i < now.nodes.size(); ++i) {
    PlanNode& n = p.plan.nodes[i];
    const PlanNode& want = now.nodes[i];
    bool differs = n.in_place != want.in_place;
    n.in_place = want.in_place;
    // Each implementation's (ImplDef::in_place); an algorithm variant follows the op implementation it runs.
    for (int k = 0; k < static_cast<int>(n.impls.size()); ++k) {
      const int op = n.op_impl(k);
      if (op < 0 || op >= static_cast<int>(want.impls.size())) continue;
      differs = differs || n.impls[static_cast<size_t>(k)].in_place != want.impls[static_cast<size_t>(op)].in_place;
      n.impls[static_cast<size_t>(k)].in_place = want.impls[static_cast<size_t>(op)].in_place;
    }
    changed += differs;
  }
  return changed;
}

namespace {

// Typed access to a profile file's fields; every failure names the file and the field ("nodes[3].inputs[1]").
class FieldReader {
 public:
  explicit FieldReader(const std::string& path) : path_(path) {}

  template <class... Args>
  [[noreturn]] void bad(const std::string& where, const Args&... args) const {
    fail(path_, ": ", where, ": ", args...);
  }

  const nlohmann::json& field(const nlohmann::json& obj, const std::string& where, const char* key) const {
    if (!obj.is_object()) bad(where.empty() ? "top level" : where, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) bad(join(where, key), "missing");
    return *it;
  }
  std::string str(const nlohmann::json& obj, const std::string& where, const char* key) const {
    const auto& f = field(obj, where, key);
    if (!f.is_string()) bad(join(where, key), "expected a string, got ", f.dump());
    return f.get<std::string>();
  }
  int64_t integer(const nlohmann::json& obj, const std::string& where, const char* key, int64_t lo = INT64_MIN,
                  int64_t hi = INT64_MAX) const {
    const auto& f = field(obj, where, key);
    if (!f.is_number_integer()) bad(join(where, key), "expected an integer, got ", f.dump());
    if (f.is_number_unsigned() && f.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      bad(join(where, key), "must be <= ", hi, ", got ", f.dump());
    const int64_t v = f.get<int64_t>();
    if (v < lo) bad(join(where, key), "must be >= ", lo, ", got ", v);
    if (v > hi) bad(join(where, key), "must be <= ", hi, ", got ", v);
    return v;
  }
  // Byte counts: at most kMaxTensorBytes each, as the importer allows, so that sums of them cannot overflow.
  int64_t bytes(const nlohmann::json& obj, const std::string& where, const char* key) const {
    return integer(obj, where, key, 0, kMaxTensorBytes);
  }
  double number(const nlohmann::json& obj, const std::string& where, const char* key, double hi = 1e12) const {
    const auto& f = field(obj, where, key);
    if (!f.is_number()) bad(join(where, key), "expected a number, got ", f.dump());
    const double v = f.get<double>();
    if (!(v >= 0)) bad(join(where, key), "must be >= 0, got ", v);
    if (!(v <= hi)) bad(join(where, key), "must be <= ", hi, ", got ", v);
    return v;
  }
  bool boolean(const nlohmann::json& obj, const std::string& where, const char* key) const {
    const auto& f = field(obj, where, key);
    if (!f.is_boolean()) bad(join(where, key), "expected true or false, got ", f.dump());
    return f.get<bool>();
  }
  const nlohmann::json& array(const nlohmann::json& obj, const std::string& where, const char* key) const {
    const auto& f = field(obj, where, key);
    if (!f.is_array()) bad(join(where, key), "expected an array");
    return f;
  }
  // Ids into a table of `count` entries named `table` ("values", "nodes").
  std::vector<int> ids(const nlohmann::json& obj, const std::string& where, const char* key, size_t count,
                       const char* table) const {
    const auto& a = array(obj, where, key);
    std::vector<int> out;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string at = join(where, key) + "[" + std::to_string(i) + "]";
      if (!a[i].is_number_integer()) bad(at, "expected an integer id, got ", a[i].dump());
      const int64_t id = a[i].get<int64_t>();
      if (id < 0 || id >= static_cast<int64_t>(count))
        bad(at, "id ", id, " out of range (", count, " ", table, ")");
      out.push_back(static_cast<int>(id));
    }
    return out;
  }

  static std::string join(const std::string& where, const char* key) { return where.empty() ? key : where + "." + key; }

 private:
  const std::string& path_;
};

}  // namespace

Profile profile_from_json(const nlohmann::json& j, const std::string& path) {
  const FieldReader r(path);
  if (!j.is_object()) fail(path, ": not a monet profile (expected a JSON object)");
  if (!j.contains("format") || j["format"] != "monet-profile")
    fail(path, ": not a monet profile (format is ", j.contains("format") ? j["format"].dump() : "missing",
         ", expected \"monet-profile\")");
  Profile p;
  p.version = static_cast<int>(r.integer(j, "", "version"));
  if (p.version != kProfileVersion)
    fail(path, ": profile version ", p.version, ", this monet reads version ", kProfileVersion);
  p.plan.fingerprint = r.str(j, "", "fingerprint");
  p.model = r.str(j, "", "model");
  p.model_path = r.str(j, "", "model_path");
  p.batch = r.integer(j, "", "batch", 1);
  const auto& shape = r.array(j, "", "input_shape");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!shape[i].is_number_integer() || shape[i].get<int64_t>() <= 0)
      r.bad("input_shape[" + std::to_string(i) + "]", "expected a positive integer, got ", shape[i].dump());
    p.input_shape.push_back(shape[i].get<int64_t>());
  }
  p.loss = r.str(j, "", "loss");
  p.import = read_import_mode(j, path);
  p.device = r.str(j, "", "device");
  p.device_info = r.field(j, "", "device_info");
  if (!p.device_info.is_object()) r.bad("device_info", "expected an object");
  if (j.contains("host_link")) p.host_link = host_link_from_json(j["host_link"], path);

  const auto& values = r.array(j, "", "values");
  const auto& nodes = r.array(j, "", "nodes");
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string at = "values[" + std::to_string(i) + "]";
    PlanValue v;
    v.name = r.str(values[i], at, "name");
    v.bytes = r.bytes(values[i], at, "bytes");
    v.resident = r.boolean(values[i], at, "resident");
    v.producer = static_cast<int>(r.integer(values[i], at, "producer", -1));
    if (v.producer >= static_cast<int64_t>(nodes.size()))
      r.bad(at + ".producer", "id ", v.producer, " out of range (", nodes.size(), " nodes)");
    p.plan.values.push_back(std::move(v));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string at = "nodes[" + std::to_string(i) + "]";
    PlanNode n;
    n.name = r.str(nodes[i], at, "name");
    n.op = r.str(nodes[i], at, "op");
    const std::string stage = r.str(nodes[i], at, "stage");
    try {
      n.stage = parse_stage(stage);
    } catch (const Error&) {
      r.bad(at + ".stage", "unknown stage '", stage, "' (forward, loss, backward, update)");
    }
    n.inputs = r.ids(nodes[i], at, "inputs", values.size(), "values");
    n.outputs = r.ids(nodes[i], at, "outputs", values.size(), "values");
    for (int v : n.outputs)
      if (p.plan.values[v].producer != static_cast<int>(i))
        r.bad(at + ".outputs", "value ", v, " ('", p.plan.values[v].name, "') names producer ",
              p.plan.values[v].producer, ", not this node");
    n.time_ms = r.number(nodes[i], at, "time_ms", 1e9);  // 11 days for one node: anything above is not a time
    n.workspace_bytes = r.bytes(nodes[i], at, "workspace_bytes");
    if (nodes[i].contains("impls")) {
      const auto& impls = r.array(nodes[i], at, "impls");
      for (size_t k = 0; k < impls.size(); ++k) {
        const std::string ia = at + ".impls[" + std::to_string(k) + "]";
        PlanImpl im;
        im.name = r.str(impls[k], ia, "name");
        im.inputs = r.ids(impls[k], ia, "inputs", values.size(), "values");
        im.time_ms = r.number(impls[k], ia, "time_ms", 1e9);
        im.workspace_bytes = r.bytes(impls[k], ia, "workspace_bytes");
        if (impls[k].is_object() && impls[k].contains("in_place")) im.in_place = r.boolean(impls[k], ia, "in_place");
        for (const PlanImpl& other : n.impls)
          if (other.name == im.name) r.bad(ia + ".name", "duplicate implementation '", im.name, "'");
        // An algorithm variant follows the op's implementations and names the one it runs.
        const bool variant = impls[k].is_object() && (impls[k].contains("algorithm") || impls[k].contains("runs"));
        if (variant) {
          if (k == 0) r.bad(ia, "the default implementation cannot be an algorithm variant");
          im.algo = static_cast<int>(r.integer(impls[k], ia, "algorithm", 0, 1000000));
          const std::string runs = r.str(impls[k], ia, "runs");
          for (size_t o = 0; o < n.impls.size() && im.op_impl < 0; ++o)
            if (n.impls[o].algo < 0 && n.impls[o].name == runs) im.op_impl = static_cast<int>(o);
          if (im.op_impl < 0) r.bad(ia + ".runs", "names no implementation listed before it: '", runs, "'");
          if (im.inputs != n.impls[static_cast<size_t>(im.op_impl)].inputs)
            r.bad(ia + ".inputs", "differ from those of '", runs, "', which it runs");
          for (const PlanImpl& other : n.impls)
            if (other.op_impl == im.op_impl && other.algo == im.algo)
              r.bad(ia, "a second variant of '", runs, "' with algorithm ", im.algo);
        } else if (!n.impls.empty() && n.impls.back().algo >= 0) {
          r.bad(ia, "an implementation after an algorithm variant (variants come last)");
        }
        n.impls.push_back(std::move(im));
      }
      if (n.impls.size() < 2) r.bad(at + ".impls", "lists ", n.impls.size(), " implementation(s); omit it for one");
      if (n.impls[0].inputs != n.inputs || n.impls[0].time_ms != n.time_ms ||
          n.impls[0].workspace_bytes != n.workspace_bytes)
        r.bad(at + ".impls[0]", "differs from the node's own inputs, time_ms or workspace_bytes (the default)");
    }
    if (nodes[i].contains("in_place")) {
      n.in_place = r.ids(nodes[i], at, "in_place", values.size(), "values");
      for (int v : n.in_place)
        if (std::find(n.inputs.begin(), n.inputs.end(), v) == n.inputs.end() || n.outputs.empty() ||
            p.plan.values[v].bytes != p.plan.values[n.outputs[0]].bytes || p.plan.values[v].resident)
          r.bad(at + ".in_place", "value ", v, " is not a transient input of output 0's bytes");
    }
    // The op's optional outputs (the engine's rule); a profile written before the field takes them, one that lists
    // others is refused.
    std::vector<int> ops_optional;
    if (const OpDef* def = find_op(n.op))
      for (int o : def->optional_outputs)
        if (o < static_cast<int>(n.outputs.size())) ops_optional.push_back(n.outputs[static_cast<size_t>(o)]);
    n.optional_outputs = ops_optional;
    if (nodes[i].contains("optional_outputs")) {
      n.optional_outputs = r.ids(nodes[i], at, "optional_outputs", values.size(), "values");
      for (int v : n.optional_outputs)
        if (std::find(n.outputs.begin(), n.outputs.end(), v) == n.outputs.end())
          r.bad(at + ".optional_outputs", "value ", v, " is not an output of the node");
      if (find_op(n.op) && n.optional_outputs != ops_optional)
        r.bad(at + ".optional_outputs", "differ from op ", n.op, "'s (the engine leaves those unwritten)");
    }
    if (nodes[i].contains("lean_time_ms")) {
      n.lean_ms = r.number(nodes[i], at, "lean_time_ms", 1e9);
      if (n.optional_outputs.empty() || !n.impls.empty())
        r.bad(at + ".lean_time_ms", "only a node with optional outputs and without implementations has a lean time");
    }
    NodeCost c;
    c.flops = r.number(nodes[i], at, "flops", 1e30);
    c.bytes_moved = r.integer(nodes[i], at, "bytes_moved", 0);
    p.plan.nodes.push_back(std::move(n));
    p.costs.push_back(c);
  }
  return p;
}

void write_profile(const std::string& path, const Profile& p) { write_json_atomic(path, profile_to_json(p)); }

Profile read_profile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, ": no such file");
  return profile_from_json(read_json(path), path);
}

}  // namespace monet
