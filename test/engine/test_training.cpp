#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "engine/session.h"
#include "ir/onnx_import.h"
#include "solve/heuristics.h"
#include "solve/problem.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {
SessionOptions tiny_options(int float_bytes = 4) {
  SessionOptions o;
  o.model_path = model_path("tiny");
  o.import.batch = 4;
  o.seed = 7;
  o.float_bytes = float_bytes;
  return o;
}

SessionOptions small_resnet50_options() {  // ResNet-50 at batch 2, 32x32: its masks, argmax, many values to offload
  SessionOptions o = tiny_options();
  o.model_path = model_path("resnet50");
  o.import.batch = 2;
  o.import.input_shape = Shape{3, 32, 32};
  return o;
}
}  // namespace

TEST_CASE("store-all schedule: the arena's measured peak equals the simulator's", "[engine][memory]") {
  for (const char* name : {"tiny", "resnet50", "unet"}) {
    INFO(name);
    SessionOptions o = tiny_options();
    o.model_path = model_path(name);
    o.import.batch = 2;
    if (std::string(name) != "tiny") o.import.input_shape = Shape{3, 32, 32};
    auto s = open_session(o);
    s->executor->step({});
    CHECK(s->executor->arena().peak_bytes() == s->predicted.peak_bytes);
    CHECK(s->executor->reserved_bytes() >= s->predicted.peak_bytes);
    CHECK(s->executor->arena().in_use_bytes() == s->predicted.resident_bytes);  // every transient freed
  }
}

TEST_CASE("training steps reduce the loss on a fixed batch", "[engine]") {
  SessionOptions o = tiny_options();
  o.train.lr = 0.05;
  auto s = open_session(o);
  double first = s->executor->step({s->tg.loss}).at(s->tg.loss)[0];
  double last = first;
  for (int i = 0; i < 20; ++i) last = s->executor->step({s->tg.loss}).at(s->tg.loss)[0];
  CHECK(std::isfinite(last));
  CHECK(last < first);
}

TEST_CASE("float and double engines agree on the gradients", "[engine]") {
  auto f = open_session(tiny_options(4));
  auto d = open_session(tiny_options(8));
  std::set<int> grads;
  for (const ParamSlot& p : f->tg.params) grads.insert(p.grad);
  auto gf = f->executor->step(grads);
  auto gd = d->executor->step(grads);
  for (int v : grads) {
    double diff = 0, ref = 0;
    for (size_t i = 0; i < gd[v].size(); ++i) {
      diff += (gf[v][i] - gd[v][i]) * (gf[v][i] - gd[v][i]);
      ref += gd[v][i] * gd[v][i];
    }
    INFO(f->tg.graph.values[v].name);
    CHECK(std::sqrt(diff) <= 1e-4 * std::sqrt(ref) + 1e-12);
  }
}

TEST_CASE("a schedule that uses a freed value is rejected with its step", "[schedule][errors]") {
  auto s = open_session(tiny_options());
  const Graph& g = s->tg.graph;
  Schedule bad = store_all_schedule(g);
  // Move the first free to the very front: the value is freed before it is computed.
  for (size_t i = 0; i < bad.steps.size(); ++i)
    if (bad.steps[i].kind == Step::Kind::free) {
      Step f = bad.steps[i];
      bad.steps.erase(bad.steps.begin() + static_cast<long>(i));
      bad.steps.insert(bad.steps.begin() + 1, f);
      break;
    }
  auto ws = [](const Node&, int) { return int64_t{0}; };
  CHECK_THROWS_WITH(simulate(g, bad, ws), Contains("schedule step 1: frees"));
  Schedule late = store_all_schedule(g);
  // Free the data-derived first activation right after it is computed: its reader then fails.
  int first_out = g.nodes[0].outputs[0];
  late.steps.insert(late.steps.begin() + 1, Step{Step::Kind::free, first_out});
  CHECK_THROWS_WITH(simulate(g, late, ws), Contains("already freed"));
}

TEST_CASE("in place: output 0 takes the input's bytes, and the input cannot be read or freed afterwards",
          "[schedule][in_place]") {
  auto s = open_session(tiny_options());
  const Graph& g = s->tg.graph;
  auto ws = [](const Node&, int) { return int64_t{0}; };
  const PlanGraph plan = plan_of(g, ws, 4);
  const Schedule good = store_all_schedule(g);
  // The first in-place step: its input ends there, so store-all frees nothing for it.
  size_t at = 0;
  while (at < good.steps.size() && (good.steps[at].kind != Step::Kind::compute || good.steps[at].in_place < 0)) ++at;
  REQUIRE(at < good.steps.size());
  const Step step = good.steps[at];
  const int x = step.in_place;
  INFO("node " << g.nodes[step.id].name << " over " << g.values[x].name);
  // Out of place instead: the same schedule with x freed after the node needs x's bytes more at that step.
  Schedule plain = good;
  plain.steps[at].in_place = -1;
  plain.steps.insert(plain.steps.begin() + static_cast<long>(at) + 1, Step{Step::Kind::free, x});
  SimResult a = simulate(g, good, ws), b = simulate(g, plain, ws);
  CHECK(a.peak_bytes <= b.peak_bytes);
  CHECK(a.time_ms == b.time_ms);
  // Reading or freeing x afterwards, running in place over a value that is not live or that the node may not
  // overwrite: refused with the step.
  Schedule reread = good;
  reread.steps.insert(reread.steps.begin() + static_cast<long>(at) + 1, Step{Step::Kind::compute, step.id});
  CHECK_THROWS_WITH(simulate(g, reread, ws), Contains("overwritten in place"));
  Schedule refree = good;
  refree.steps.insert(refree.steps.begin() + static_cast<long>(at) + 1, Step{Step::Kind::free, x});
  CHECK_THROWS_WITH(simulate(g, refree, ws), Contains("frees") && Contains("overwritten in place"));
  Schedule twice = good;
  twice.steps.insert(twice.steps.begin() + static_cast<long>(at) + 1, step);
  CHECK_THROWS_WITH(simulate(g, twice, ws), Contains("overwritten in place"));
  Schedule wrong = good;
  wrong.steps[0].in_place = plan.nodes[0].outputs[0];  // the first node over its own output
  CHECK_THROWS_WITH(simulate(g, wrong, ws), Contains("schedule step 0") && Contains("cannot run in place"));
}

namespace {
// A backend that hands everything to a CPU backend: the tests' instrumented backends override what they watch.
class OnCpu : public Backend {
 public:
  std::unique_ptr<Backend> cpu = make_cpu_backend();

  std::string name() const override { return cpu->name(); }
  int float_bytes() const override { return cpu->float_bytes(); }
  void* reserve(int64_t bytes) override { return cpu->reserve(bytes); }
  void unreserve(void* block) override { cpu->unreserve(block); }
  int64_t workspace_bytes(const Graph& g, const Node& n, int algo, int impl) const override {
    return cpu->workspace_bytes(g, n, algo, impl);
  }
  void run(const Graph& g, const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out,
           void* workspace, uint64_t seed, bool recompute, int impl, int algo) override {
    cpu->run(g, n, in, out, workspace, seed, recompute, impl, algo);
  }
  void upload(const TensorRef& dst, const std::vector<double>& host) override { cpu->upload(dst, host); }
  std::vector<double> download(const TensorRef& src) override { return cpu->download(src); }
};

// A CPU backend that records, for every node run, which of its outputs came without data.
class NullOutputRecorder : public OnCpu {
 public:
  std::map<std::string, std::vector<bool>> null_outputs;  // node name -> per output, at its last run

  void run(const Graph& g, const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out,
           void* workspace, uint64_t seed, bool recompute, int impl, int algo) override {
    std::vector<bool>& r = null_outputs[n.name];
    r.clear();
    for (const TensorRef& t : out) r.push_back(t.data == nullptr);
    OnCpu::run(g, n, in, out, workspace, seed, recompute, impl, algo);
  }
};
}  // namespace

namespace {
// A CPU backend whose nodes with several implementations need a workspace that depends on which one runs: each
// implementation i a distinct size, and every workspace a kernel is handed at least what was asked for.
class WorkspacePerImpl : public OnCpu {
 public:
  static int64_t extra(int impl) { return (int64_t{3} << 20) * (impl + 1); }  // 3, 6, 9 MiB
  int64_t workspace_bytes(const Graph& g, const Node& n, int algo, int impl) const override {
    const int64_t base = OnCpu::workspace_bytes(g, n, algo, impl);
    return impls_of(n).size() > 1 ? base + extra(impl) : base;
  }
};
}  // namespace

TEST_CASE("a workspace per implementation: the plan lists each, the executor reserves the step's, peak = simulator's",
          "[engine][memory]") {
  auto s = open_session(small_resnet50_options());
  const Graph& g = s->tg.graph;
  WorkspacePerImpl be;
  const PlanGraph plan = make_plan_graph(s->tg, workspace_with(be, g, {}), 4);
  int several = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const PlanNode& n = plan.nodes[k];
    if (n.num_impls() < 2) continue;
    ++several;
    for (int i = 0; i < n.num_impls(); ++i) {
      INFO(n.name << " implementation " << i);
      CHECK(n.impl_workspace(i) == be.workspace_bytes(g, g.nodes[k], -1, i));
    }
    CHECK(n.impl_workspace(1) != n.impl_workspace(0));
  }
  REQUIRE(several > 0);
  // Every node on its last implementation: the workspaces the steps need differ from the defaults'.
  std::vector<int> impl(g.nodes.size(), 0);
  for (size_t k = 0; k < g.nodes.size(); ++k) impl[k] = std::max(0, plan.nodes[k].num_impls() - 1);
  for (const std::vector<int>& choice : {std::vector<int>(g.nodes.size(), 0), impl}) {
    const Schedule sched = store_all_schedule(plan, choice);
    const SimResult predicted = simulate(plan, sched);
    Executor e(g, sched, be, 7);
    for (int v : resident_values(g)) e.set_value(v, s->initial[v]);
    e.step({});
    CHECK(e.arena().peak_bytes() == predicted.peak_bytes);
  }
  const SimResult defaults = simulate(plan, store_all_schedule(plan, std::vector<int>(g.nodes.size(), 0)));
  const SimResult last = simulate(plan, store_all_schedule(plan, impl));
  CHECK(last.peak_bytes != defaults.peak_bytes);  // the steps' workspaces count, not the node's default
}

TEST_CASE("optional outputs nothing reads are neither allocated nor written, profiled or not, nor captured", "[engine]") {
  auto s = open_session(small_resnet50_options());
  const Graph& g = s->tg.graph;
  // Store-all's defaults read y (ReluGrad, BatchNormActGrad) and X (MaxPoolGrad): masks and argmax unread; `saved`
  // reads the masks (ReluGrad, the fused batch norms' BatchNormActGrad) and the argmax (MaxPoolGrad).
  const Schedule store_all = store_all_schedule(g);
  std::vector<int> impl(g.nodes.size(), 0);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    impl[k] = g.nodes[k].op == "ReluGrad" ? 2 : g.nodes[k].op == "MaxPoolGrad" || g.nodes[k].op == "BatchNormActGrad" ? 1 : 0;
  const Schedule saved = store_all_schedule(s->plan, impl);
  std::set<int> grads;
  for (const ParamSlot& p : s->tg.params) grads.insert(p.grad);
  // Output k of node n is an optional one (its op's OpDef::optional_outputs).
  auto is_optional = [&](const Node& n, size_t k) {
    const std::vector<int>& o = op_def(n.op).optional_outputs;
    return k < n.outputs.size() && std::find(o.begin(), o.end(), static_cast<int>(k)) != o.end();
  };
  int mask = -1;  // a mask: a Relu's, else a fused batch norm's
  for (const Node& n : g.nodes)
    if (n.op == "Relu" || (mask < 0 && n.op == "BatchNormalization" && is_optional(n, 3))) mask = n.outputs.back();
  REQUIRE(mask >= 0);

  // Runs one step of `schedule` (capturing `capture`, profiled or not) and returns the gradients; `skipped`
  // gets the nodes with an output that came without data, and every such output must be an optional one.
  auto run = [&](const Schedule& schedule, std::set<int> capture, bool profiled, std::set<std::string>& skipped) {
    NullOutputRecorder rec;
    Executor e(g, schedule, rec, 7);
    for (int v : resident_values(g)) e.set_value(v, s->initial[v]);
    std::vector<double> node_ms(g.nodes.size(), 0.0);
    capture.insert(grads.begin(), grads.end());
    auto got = e.step(capture, profiled ? &node_ms : nullptr);
    for (const auto& [name, nulls] : rec.null_outputs)
      for (size_t k = 0; k < nulls.size(); ++k)
        if (nulls[k]) {
          CHECK(is_optional(g.nodes[static_cast<size_t>(s->plan.find_node(name))], k));
          skipped.insert(name);
        }
    return got;
  };
  std::set<std::string> optional;  // the nodes with optional outputs: Relu, MaxPool, the fused batch norms
  for (const Node& n : g.nodes)
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (is_optional(n, k)) optional.insert(n.name);
  CHECK(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return is_optional(n, 3); }) > 0);

  std::set<std::string> skipped;
  auto base = run(store_all, {}, false, skipped);
  CHECK(skipped == optional);
  skipped.clear();
  auto with_saved = run(saved, {}, false, skipped);
  CHECK(skipped.empty());
  skipped.clear();
  run(store_all, {}, true, skipped);  // a profiled step times each node as the schedule runs it (lean runs)
  CHECK(skipped == optional);
  skipped.clear();
  // Never allocated, they cannot be captured; under `saved` they can.
  CHECK_THROWS_WITH(run(store_all, {mask}, false, skipped),
                    Contains("cannot capture '" + g.values[mask].name + "'") && Contains("never written"));
  CHECK(run(saved, {mask}, false, skipped).count(mask) == 1);
  // Not writing them changes nothing else: the same gradients, bitwise, as the implementations that read them.
  for (int v : grads) CHECK(base.at(v) == with_saved.at(v));
  // And they take no memory: the arena holds store-all's values less them (at most the bytes they would take).
  NullOutputRecorder rec;
  Executor e(g, store_all, rec, 7);
  for (int v : resident_values(g)) e.set_value(v, s->initial[v]);
  e.step();
  PlanGraph plan = plan_of(g, workspace_with(rec, g, {}), 4);
  std::vector<MemoryPoint> lean, full;
  CHECK(e.arena().peak_bytes() == simulate(plan, store_all, &lean).peak_bytes);
  for (PlanNode& n : plan.nodes) n.optional_outputs.clear();  // every output allocated
  simulate(plan, store_all, &full);
  REQUIRE(lean.size() == full.size());
  int with_optional = 0;
  for (size_t i = 0; i < lean.size(); ++i) {
    const Node& n = g.nodes[lean[i].node];
    int64_t missing = 0;
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (is_optional(n, k)) missing += plan.values[n.outputs[k]].bytes;
    CHECK(full[i].total() - lean[i].total() == missing);  // at their producer's step only (nothing reads them)
    with_optional += missing > 0;
  }
  CHECK(with_optional > 0);
}

namespace {
// A CPU backend with a clock of its own: running node k advances it by k + 1 ms, and a timer mark reads it.
class StepClock : public OnCpu {
 public:
  double now_ms = 0;
  std::vector<double> marks;

  void run(const Graph& g, const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out,
           void* workspace, uint64_t seed, bool recompute, int impl, int algo) override {
    OnCpu::run(g, n, in, out, workspace, seed, recompute, impl, algo);
    now_ms += static_cast<double>(&n - g.nodes.data()) + 1;
  }
  void timer_mark() override { marks.push_back(now_ms); }
  std::vector<double> timer_marks_ms() override {
    std::vector<double> ms;
    for (double m : marks) ms.push_back(m - marks.front());
    marks.clear();
    return ms;
  }
};
}  // namespace

TEST_CASE("profiled steps give each node the time from its timer mark to the next", "[engine][profile]") {
  auto s = open_session(tiny_options());
  const Graph& g = s->tg.graph;
  const Schedule schedule = store_all_schedule(g);  // (a node run twice would get both runs' time)
  std::vector<int> runs(g.nodes.size(), 0);
  for (const Step& st : schedule.steps)
    if (st.kind == Step::Kind::compute) ++runs[static_cast<size_t>(st.id)];
  StepClock clock;
  Executor e(g, schedule, clock, 7);
  for (int v : resident_values(g)) e.set_value(v, s->initial[v]);
  for (int step = 0; step < 2; ++step) {
    std::vector<double> node_ms(g.nodes.size(), 0.0);
    e.step({}, &node_ms);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      INFO(g.nodes[k].name);
      CHECK(node_ms[k] == runs[k] * static_cast<double>(k + 1));
    }
    CHECK(clock.marks.empty());  // read once per step
  }
  // The CPU backend's own clock: times that cannot be negative and add up to no more than the step took.
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  Executor c(g, schedule, *cpu, 7);
  for (int v : resident_values(g)) c.set_value(v, s->initial[v]);
  std::vector<double> node_ms(g.nodes.size(), 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  c.step({}, &node_ms);
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  double sum = 0;
  for (double t : node_ms) {
    CHECK(t >= 0);
    sum += t;
  }
  CHECK(sum > 0);
  CHECK(sum <= wall);
}

// A convolution's weight (and bias) gradient runs before its data gradient: X may go after ConvGradWeight, so dY,
// dX and X are never live at once, and the data gradient is the last reader of dY.
TEST_CASE("backward order: every conv's weight gradient comes before its data gradient", "[train]") {
  ImportOptions io;
  io.batch = 2;
  io.input_shape = Shape{3, 32, 32};
  const TrainingGraph tg = build_training_graph(import_onnx(model_path("resnet50"), io), TrainOptions{});
  const Graph& g = tg.graph;
  std::map<int, int> weight_at, data_at, bias_at;  // forward node -> position of its gradient node
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == "ConvGradWeight") weight_at[n.forward_node] = static_cast<int>(i);
    if (n.op == "ConvGradData") data_at[n.forward_node] = static_cast<int>(i);
    if (n.op == "ConvGradBias") bias_at[n.forward_node] = static_cast<int>(i);
  }
  REQUIRE(data_at.size() > 40);
  for (const auto& [fwd, at] : data_at) {
    INFO(g.nodes[fwd].name);
    REQUIRE(weight_at.count(fwd));
    CHECK(weight_at[fwd] < at);
    if (bias_at.count(fwd)) CHECK(bias_at[fwd] < at);
  }
}

// Sum may run in place over either of its first two addends (OpDef::in_place = {0, 1}); a Sum of one input (ONNX
// allows it) has no second one, and its plan lists only the first.
TEST_CASE("a Sum of one input plans in place over that input only", "[schedule][in_place]") {
  Graph g;
  Value x;
  x.name = "x";
  x.shape = {2, 3};
  x.role = Role::input;
  const int xi = g.add_value(x);
  // Appends node `name` (op) reading `in`, with one output, and returns that output.
  auto add = [&](const std::string& name, const std::string& op, int in) {
    Node n;
    n.name = name;
    n.op = op;
    n.inputs = {in};
    Value out;
    out.name = name + ":0";
    out.producer = static_cast<int>(g.nodes.size());
    n.outputs = {g.add_value(out)};
    g.nodes.push_back(n);
    infer_node(g, static_cast<int>(g.nodes.size()) - 1);
    return g.nodes.back().outputs[0];
  };
  const int c = add("copy", "Identity", xi);  // a transient to run in place over
  add("sum", "Sum", c);
  const PlanGraph p = plan_of(g, nullptr, 4);
  CHECK(p.nodes[1].in_place == std::vector<int>{c});
}

namespace {
// A CPU backend whose copies land late, as an asynchronous copy's may: copy_begin reads its source at once (what a
// copy that starts then sees) and copy_wait writes the destination of that copy and of every one issued before it
// on its lane (a copy stream runs in issue order), which is all a piece issued without a ticket gets. A wait missing
// before a read, or before a block is reused, gives other bits; a copy begun before its value was computed copies
// stale bits.
class LateCopies : public OnCpu {
 public:
  struct Copy {
    void* dst;
    std::vector<char> bytes;
    CopyLane lane;
  };
  std::map<int, Copy> pending;
  int begun = 0, waited = 0, next = 0, landed = 0;

  int copy_begin(void* dst, const void* src, int64_t bytes, CopyLane lane, bool ticket) override {
    const char* from = static_cast<const char*>(src);
    pending[next] = {dst, std::vector<char>(from, from + bytes), lane};
    ++begun;
    const int id = next++;
    return ticket ? id : -1;
  }
  void copy_wait(int ticket) override {
    REQUIRE((ticket >= 0 && ticket < next));
    ++waited;
    if (!pending.count(ticket)) return;  // landed with a later one on its lane
    const CopyLane lane = pending.at(ticket).lane;
    for (auto it = pending.begin(); it != pending.end() && it->first <= ticket;) {
      if (it->second.lane != lane) {
        ++it;
        continue;
      }
      std::memcpy(it->second.dst, it->second.bytes.data(), it->second.bytes.size());
      it = pending.erase(it);
      ++landed;
    }
  }
};
}  // namespace

TEST_CASE("copies to and from the host in flight: every one waited for before its bytes are needed", "[engine][offload]") {
  auto s = open_session(small_resnet50_options());
  const Graph& g = s->tg.graph;
  // Store-all with every value idle between the forward pass and its first use offloaded, and the optimizer state
  // (momentum) at home on the host, each copied in and out over the steps around its update, and the parameters,
  // each on the device from stage 0 through the step after its update (offload_idle_kept).
  CheckpointProblem p = make_problem(s->plan, 0);
  enable_offload(p, host_link_from_flag(10), 0);
  const Assignment a = offload_idle_kept(p, store_all_assignment(p));
  const Schedule offloading = extract_schedule(p, a, "checkpoint");
  const SimResult sim = simulate(s->plan, offloading);
  REQUIRE(sim.transfers >= 20);
  REQUIRE(offloading.on_host.size() >= 20);
  int wide = 0;  // values copied back from before the step before their use: in flight over several steps
  for (int t = 1; t < p.num_steps(); ++t)
    for (int f = 0; f < static_cast<int>(p.fvals.size()); ++f)
      wide += a.prefetched(t, f) && p.prefetch_first(t, f) < t - 1;
  REQUIRE(wide >= 20);
  std::set<int> grads, params;
  for (const ParamSlot& slot : s->tg.params) {
    grads.insert(slot.grad);
    params.insert(slot.param);
  }
  // Parameters among them: copied in from stage 0's start, out after their update.
  REQUIRE(std::count_if(offloading.on_host.begin(), offloading.on_host.end(), [&](int v) { return params.count(v); }) >= 20);
  // The gradients of the third step (they read the parameters the first two updated, with the momentum the first
  // update left), then every resident value: parameters and momentum after three updates.
  auto run = [&](const Schedule& schedule, Backend& backend) {
    Executor e(g, schedule, backend, 7);
    CHECK(e.host_reserved_bytes() == simulate(s->plan, schedule).host_peak_bytes);
    for (int v : resident_values(g)) e.set_value(v, s->initial[v]);
    std::map<int, std::vector<double>> got;
    for (int step = 0; step < 3; ++step) got = e.step(grads);  // the host blocks are used again
    for (int v : resident_values(g)) got[v] = e.get_value(v);
    return got;
  };
  // The same schedule with its copies issued in pieces by deadline (plan_copies), on a plan with times: several
  // pieces each, issued over the steps from their copy's earliest to its deadline.
  PlanGraph timed = s->plan;
  for (PlanNode& n : timed.nodes) n.set_impl_ms(0, 1.0);
  Schedule pieces = offloading;
  pieces.copy_plan = plan_copies(timed, offloading, host_link_from_flag(0.1), 65536);
  REQUIRE(pieces.copy_plan.size() > 2 * static_cast<size_t>(sim.transfers));
  std::map<int, std::set<int>> issued_at;  // per copy: the steps its pieces are issued at
  for (const CopyChunk& c : pieces.copy_plan) issued_at[c.copy].insert(c.at);
  REQUIRE(std::count_if(issued_at.begin(), issued_at.end(), [](const auto& c) { return c.second.size() >= 2; }) >= 10);
  OnCpu at_once;
  const auto base = run(extract_schedule(p, store_all_assignment(p), "checkpoint"), at_once);
  const auto now = run(offloading, at_once);
  LateCopies late;
  const auto later = run(offloading, late);
  CHECK(late.begun == 3 * sim.transfers);  // three steps
  CHECK(late.waited == late.begun);
  CHECK(late.pending.empty());
  LateCopies late_pieces;
  const auto in_pieces = run(pieces, late_pieces);
  CHECK(late_pieces.begun == 3 * static_cast<int>(pieces.copy_plan.size()));
  CHECK(late_pieces.waited == 3 * sim.transfers);  // one ticket per copy: its last piece's
  CHECK(late_pieces.landed == late_pieces.begun);
  CHECK(late_pieces.pending.empty());
  int moved = 0;
  for (const auto& [v, want] : base) {
    INFO(g.values[v].name);
    CHECK(now.at(v) == want);
    CHECK(later.at(v) == want);
    CHECK(in_pieces.at(v) == want);
    const bool homed = std::find(offloading.on_host.begin(), offloading.on_host.end(), v) != offloading.on_host.end();
    moved += homed && std::any_of(want.begin(), want.end(), [](double x) { return x != 0; });
  }
  CHECK(moved >= 20);  // the momentum that made the round trips is not all zero
}
