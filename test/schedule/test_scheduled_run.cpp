// Scheduled steps against store-all: a schedule written by the solver (or by hand), read back from its file and
// run by the executor must give the same loss, gradients and BatchNorm running statistics bit for bit (same
// kernels, same order), with the arena's measured peak equal to the simulator's and within the budget.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

#include "core/error.h"
#include "ir/import_mode.h"
#include "engine/session.h"
#include "profile/profile.h"
#include "schedule/schedule_io.h"
#include "schedule/timeline.h"
#include "solve/no_clock.h"
#include "solve/solve.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {

struct Case {
  const char* model;
  int64_t batch;
  std::optional<Shape> input_shape;
  bool bn_activation = true;  // the import's batch norm - activation fusion (its default); false: separate nodes
};

SessionOptions options_of(const Case& c) {
  SessionOptions o;
  o.model_path = model_path(c.model);
  o.import.batch = c.batch;
  o.import.input_shape = c.input_shape;
  o.import.fuse_bn_activation = c.bn_activation;
  o.seed = 3;
  o.store_all = StoreAll::defaults;  // without a schedule: the bitwise reference of checkpoint schedules
  return o;
}

TrainingGraph training_graph_of(const Case& c) {
  ImportOptions io;
  io.batch = c.batch;
  io.input_shape = c.input_shape;
  io.fuse_bn_activation = c.bn_activation;
  return build_training_graph(import_onnx(model_path(c.model), io), TrainOptions{});
}

// The plan of a training graph with the CPU backend's workspaces, in fp32.
PlanGraph cpu_plan(const TrainingGraph& tg) {
  auto backend = make_cpu_backend(4);
  return make_plan_graph(tg, workspace_with(*backend, tg.graph, {}), 4);
}

// A schedule file under the build tree, removed when the test ends.
struct TempSchedule {
  std::string path;
  explicit TempSchedule(const std::string& name)
      : path(std::string(MONET_BINARY_DIR) + "/test_scheduled_" + name + ".json") {}
  ~TempSchedule() { std::remove(path.c_str()); }
};

void write_file(const std::string& path, const TrainingGraph& tg, const PlanGraph& plan, const Schedule& s,
                int64_t budget) {
  ScheduleFile f;
  f.fingerprint = plan.fingerprint;
  f.model = tg.graph.model_name;
  f.input_shape = tg.graph.values[tg.graph.data_input].shape;
  f.batch = f.input_shape[0];
  f.import = import_mode_of(tg.graph);
  f.budget_bytes = budget;
  f.schedule = s;
  write_schedule(path, f, plan);
}

// The schedule with every in-place step run out of place: the overwritten input is freed right after instead.
Schedule out_of_place(Schedule s) {
  for (size_t i = 0; i < s.steps.size(); ++i)
    if (s.steps[i].kind == Step::Kind::compute && s.steps[i].in_place >= 0) {
      const int v = std::exchange(s.steps[i].in_place, -1);
      s.steps.insert(s.steps.begin() + static_cast<long>(i) + 1, Step{Step::Kind::free, v});
    }
  return s;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(b[i])) return false;
  return true;
}

using Captured = std::map<int, std::vector<double>>;

// One step of each session (the same model and seed), capturing the loss and every parameter gradient.
std::pair<Captured, Captured> step_both(Session& s, Session& r) {
  std::set<int> capture = {s.tg.loss};
  for (const ParamSlot& p : s.tg.params) capture.insert(p.grad);
  return {s.executor->step(capture), r.executor->step(capture)};
}

// One step of the scheduled session and one of store-all from the same seed: loss, every gradient and every
// BatchNorm running statistic equal bitwise; the arena's peak equals the simulator's and stays within budget.
// Store-all runs the defaults, or with like_schedule the schedule's own implementations and algorithms
// (store_all_like, monet-check's reference), in float (4) or double (8).
void check_against_store_all(const Case& c, const std::string& schedule_path, int64_t budget,
                             bool like_schedule = false, int float_bytes = 4) {
  SessionOptions o = options_of(c);
  o.float_bytes = float_bytes;
  SessionOptions reference = o;
  o.schedule_path = schedule_path;
  if (like_schedule) {
    reference.schedule_path = schedule_path;
    reference.store_all_like_schedule = true;
  }
  auto s = open_session(o);
  auto r = open_session(reference);
  if (like_schedule) CHECK(r->schedule.schedule.mode == "store-all");
  const auto [got, ref] = step_both(*s, *r);
  CHECK(same_bits(got.at(s->tg.loss), ref.at(s->tg.loss)));
  for (const ParamSlot& p : s->tg.params) {
    INFO("gradient of " << s->tg.graph.values[p.param].name);
    CHECK(same_bits(got.at(p.grad), ref.at(p.grad)));
  }
  int buffers = 0;
  for (int v : resident_values(s->tg.graph))
    if (s->tg.graph.values[v].role == Role::buffer) {
      INFO("running statistic " << s->tg.graph.values[v].name);
      CHECK(same_bits(s->executor->get_value(v), r->executor->get_value(v)));
      ++buffers;
    }
  const bool batch_norm = std::any_of(s->tg.graph.nodes.begin(), s->tg.graph.nodes.end(),
                                      [](const Node& n) { return n.op == "BatchNormalization"; });
  if (batch_norm) CHECK(buffers > 0);
  CHECK(s->executor->arena().peak_bytes() == s->predicted.peak_bytes);
  if (budget > 0 && float_bytes == 4) CHECK(s->predicted.peak_bytes <= budget);  // budgets are for fp32
  CHECK(s->executor->arena().in_use_bytes() == s->predicted.resident_bytes);
}

// The smallest budget the full-mode heuristics reach on the plan.
int64_t smallest_full_budget(const PlanGraph& plan, int window = kAutoWindow) {
  SolveOptions probe;
  probe.budget_bytes = 1;
  probe.mode = "full";
  probe.window = window;
  return solve(plan, probe).smallest_found_bytes;
}

// A full-mode solve by work, not the clock: the heuristics run to their ends, CBC stops at its root node, the
// neighbourhood search at one sub-MIP, and the phase with the implementations fixed is left out (it needs more
// time left than any), on one thread: the same schedule on any machine. These tests run its schedules; how good
// they are is test/solve's. window: the recomputation window in levels (SolveOptions::window).
SolveOutcome solve_full_by_work(const PlanGraph& plan, int64_t budget, int window = kAutoWindow) {
  SolveOptions so;
  so.budget_bytes = budget;
  so.mode = "full";
  so.threads = 1;
  so.time_limit_s = kNoClock;
  so.max_nodes = 1;
  so.max_sub_mips = 1;
  so.fixed_impls_min_s = std::numeric_limits<double>::infinity();
  so.window = window;
  return solve(plan, so);
}

// Max relative difference of loss and gradients between the scheduled session and store-all (same seed), with
// the CPU backend in float (4) or double (8); the arena's peak equals the simulator's and stays within budget.
double max_rel_diff_to_store_all(const Case& c, const std::string& schedule_path, int64_t budget, int float_bytes) {
  SessionOptions o = options_of(c);
  o.float_bytes = float_bytes;
  SessionOptions ref_options = o;
  o.schedule_path = schedule_path;
  auto s = open_session(o);
  auto r = open_session(ref_options);
  const auto [got, ref] = step_both(*s, *r);
  double worst = 0;
  for (const auto& [v, a] : got) {
    const std::vector<double>& b = ref.at(v);
    double scale = 0, diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::abs(b[i]));
      diff = std::max(diff, std::abs(a[i] - b[i]));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  CHECK(s->executor->arena().peak_bytes() == s->predicted.peak_bytes);
  if (budget > 0 && float_bytes == 4) CHECK(s->predicted.peak_bytes <= budget);  // budgets are for fp32
  return worst;
}

}  // namespace

TEST_CASE("every implementation runs: gradients as store-all's (ReluGrad and MaxPoolGrad bitwise, BatchNormGrad to "
          "rounding)",
          "[scheduled][impl]") {
  // Store-all with implementations switched where the arithmetic is identical (bitwise): ReluGrad from x and
  // MaxPoolGrad from the packed argmax, then ReluGrad from the 1-bit mask. Then every node on its second
  // implementation (BatchNormGrad output-activated too: rounding differences only).
  for (const Case& c : {Case{"tiny", 4, std::nullopt}, Case{"resnet50", 2, Shape{3, 32, 32}}}) {
    const TrainingGraph tg = training_graph_of(c);
    const PlanGraph plan = cpu_plan(tg);
    const std::vector<std::map<std::string, int>> bitwise = {{{"ReluGrad", 1}, {"MaxPoolGrad", 1}}, {{"ReluGrad", 2}}};
    std::vector<int> all(plan.nodes.size(), 0);
    std::map<std::string, int> switched;
    for (size_t n = 0; n < plan.nodes.size(); ++n)
      if (plan.nodes[n].num_impls() > 1) all[n] = 1, ++switched[plan.nodes[n].op];
    INFO(c.model);
    CHECK(switched["ReluGrad"] > 0);
    if (std::string(c.model) == "resnet50") CHECK((switched["BatchNormGrad"] > 0 && switched["MaxPoolGrad"] > 0));
    for (size_t k = 0; k < bitwise.size(); ++k) {
      std::vector<int> impl(plan.nodes.size(), 0);
      for (size_t n = 0; n < plan.nodes.size(); ++n) {
        auto it = bitwise[k].find(plan.nodes[n].op);
        if (it != bitwise[k].end()) impl[n] = it->second;
      }
      TempSchedule file(std::string(c.model) + "_bitwise_" + std::to_string(k));
      Schedule sched = store_all_schedule(plan, impl);
      sched.mode = "full";
      write_file(file.path, tg, plan, sched, 0);
      check_against_store_all(c, file.path, 0);
    }
    TempSchedule all_file(std::string(c.model) + "_all_second");
    Schedule second = store_all_schedule(plan, all);
    second.mode = "full";
    write_file(all_file.path, tg, plan, second, 0);
    // BatchNormGrad from Y: xhat = (Y - B) / scale instead of (X - mean) * invstd: rounding differences only.
    CHECK(max_rel_diff_to_store_all(c, all_file.path, 0, 8) < 1e-10);
    CHECK(max_rel_diff_to_store_all(c, all_file.path, 0, 4) < 1e-3);
  }
}

namespace {

// Store-all with every `grad_op` on its output-activated implementation (1), so that `op` runs in place over an
// input that then ends there: the same bits as the same schedule out of place, and the arena peak predicted.
void in_place_with_output_grads(const Case& c, const std::string& op, const std::string& grad_op) {
  INFO(c.model << ": " << op << " in place");
  const TrainingGraph tg = training_graph_of(c);
  const PlanGraph plan = cpu_plan(tg);
  std::vector<int> impl(plan.nodes.size(), 0);
  for (size_t n = 0; n < plan.nodes.size(); ++n)
    if (plan.nodes[n].op == grad_op) impl[n] = 1;
  Schedule in_place = store_all_schedule(plan, impl);
  in_place.mode = "full";
  int count = 0;
  for (const Step& st : in_place.steps)
    count += st.kind == Step::Kind::compute && st.in_place >= 0 && plan.nodes[st.id].op == op;
  CHECK(count > 0);
  int grads = 0;  // the gradient op writes dX over dY too
  for (const Step& st : in_place.steps)
    grads += st.kind == Step::Kind::compute && st.in_place >= 0 && plan.nodes[st.id].op == grad_op;
  CHECK(grads > 0);
  const Schedule plain = out_of_place(in_place);
  CHECK(simulate(plan, plain).peak_bytes >= simulate(plan, in_place).peak_bytes);  // params dominate at batch 2
  TempSchedule a(op + "_in_place"), b(op + "_out_of_place");
  write_file(a.path, tg, plan, in_place, 0);
  write_file(b.path, tg, plan, plain, 0);
  std::map<int, std::vector<double>> got[2];
  for (int k = 0; k < 2; ++k) {
    SessionOptions o = options_of(c);
    o.schedule_path = k == 0 ? a.path : b.path;
    auto s = open_session(o);
    std::set<int> capture = {s->tg.loss};
    for (const ParamSlot& p : s->tg.params) capture.insert(p.grad);
    got[k] = s->executor->step(capture);
    CHECK(s->executor->arena().peak_bytes() == s->predicted.peak_bytes);
  }
  for (const auto& [v, values] : got[0]) {
    INFO(tg.graph.values[v].name);
    CHECK(same_bits(values, got[1].at(v)));
  }
}

}  // namespace

TEST_CASE("in place: Relu, Clip, Add, BatchNormalization and the gradients over an input that ends there give the bits of out of place, in less memory",
          "[scheduled][in_place]") {
  // Store-all runs every node that may in place over an input it reads last (resnet50: the Relus, the residual
  // Adds; mobilenet_v2: the residual Adds - its ReLU6 Clips keep their input for the input-activated ClipGrad;
  // backward: ReluGrad and ClipGrad over dY, Sum over a fan-out's first gradient). The same schedule run out of
  // place gives the same bits (the reference of check_against_store_all is the in-place store-all) at a peak at
  // least as high. The batch norms and their activations imported as separate nodes (--bn-activation separate).
  for (const Case& c :
       {Case{"resnet50", 2, Shape{3, 32, 32}, false}, Case{"mobilenet_v2", 2, Shape{3, 32, 32}, false}}) {
    INFO(c.model);
    const TrainingGraph tg = training_graph_of(c);
    const PlanGraph plan = cpu_plan(tg);
    const Schedule in_place = store_all_schedule(plan);
    std::map<std::string, int> ops;
    for (const Step& st : in_place.steps)
      if (st.kind == Step::Kind::compute && st.in_place >= 0) ++ops[plan.nodes[st.id].op];
    CHECK(ops["Add"] > 0);
    CHECK(ops["Sum"] > 0);
    if (std::string(c.model) == "resnet50") CHECK(ops["Relu"] > 0);
    CHECK(ops[std::string(c.model) == "resnet50" ? "ReluGrad" : "ClipGrad"] > 0);
    const Schedule plain = out_of_place(in_place);
    CHECK(simulate(plan, plain).peak_bytes >= simulate(plan, in_place).peak_bytes);
    TempSchedule file(std::string(c.model) + "_out_of_place");
    write_file(file.path, tg, plan, plain, 0);
    check_against_store_all(c, file.path, 0);
  }
  // Clip in place: mobilenet_v2 with the output-activated ClipGrad (x then ends at the Clip); BatchNormalization in
  // place: resnet50 with the output-activated BatchNormGrad (the conv output then ends at the BatchNorm; with the
  // in-place Relu after it, in-place ABN). In place and out of place: the same bits.
  in_place_with_output_grads({"mobilenet_v2", 2, Shape{3, 32, 32}, false}, "Clip", "ClipGrad");
  in_place_with_output_grads({"resnet50", 2, Shape{3, 32, 32}, false}, "BatchNormalization", "BatchNormGrad");
}

TEST_CASE("views in place: Reshape and ReshapeGrad over an input that ends there copy nothing, bits of out of place",
          "[scheduled][in_place]") {
  // gpt2_tiny's heads are split and merged by Reshapes whose inputs end there, and their gradients by ReshapeGrads
  // over dY: store-all runs them in place (OpDef::view: the output takes the input's bytes under its own shape).
  // The same schedule run out of place gives the same bits at a peak at least as high.
  const Case c{"../test/data/gpt2_tiny", 2, std::nullopt};
  const TrainingGraph tg = training_graph_of(c);
  const PlanGraph plan = cpu_plan(tg);
  const Schedule in_place = store_all_schedule(plan);
  std::map<std::string, int> ops;
  for (const Step& st : in_place.steps)
    if (st.kind == Step::Kind::compute && st.in_place >= 0) {
      ++ops[plan.nodes[st.id].op];
      if (plan.nodes[st.id].op == "Reshape") {  // another shape, the same bytes
        const int out = plan.nodes[st.id].outputs[0];
        CHECK(tg.graph.values[out].shape != tg.graph.values[st.in_place].shape);
        CHECK(plan.values[out].bytes == plan.values[st.in_place].bytes);
      }
    }
  CHECK(ops["Reshape"] >= 4);
  CHECK(ops["ReshapeGrad"] >= 4);
  const Schedule plain = out_of_place(in_place);
  CHECK(simulate(plan, plain).peak_bytes >= simulate(plan, in_place).peak_bytes);
  TempSchedule in_file("gpt2_views_in_place"), out_file("gpt2_views_out_of_place");
  write_file(in_file.path, tg, plan, in_place, 0);
  write_file(out_file.path, tg, plan, plain, 0);
  SessionOptions a = options_of(c), b = options_of(c);
  a.schedule_path = in_file.path;
  b.schedule_path = out_file.path;
  auto sa = open_session(a);
  auto sb = open_session(b);
  const auto [got, ref] = step_both(*sa, *sb);
  CHECK(same_bits(got.at(sa->tg.loss), ref.at(sa->tg.loss)));
  for (const ParamSlot& p : sa->tg.params) {
    INFO("gradient of " << sa->tg.graph.values[p.param].name);
    CHECK(same_bits(got.at(p.grad), ref.at(p.grad)));
  }
  CHECK(sa->executor->arena().peak_bytes() == sa->predicted.peak_bytes);
}

TEST_CASE("full-mode schedules: gradients as store-all's, bitwise as store-all on their implementations, arena peak = "
          "simulator peak <= budget",
          "[heavy][scheduled][impl]") {
  const Case c{"resnet50", 2, Shape{3, 32, 32}};
  const TrainingGraph tg = training_graph_of(c);
  const Profile profile = estimate_profile(tg, Roofline{});
  const int64_t store_all_peak = simulate(profile.plan, store_all_schedule(profile.plan)).peak_bytes;
  // Budgets: the smallest the heuristics reach (activations are a sliver of resnet50's memory at this size, so
  // only tight budgets make saved-tensor choices pay) and the midpoint to store-all's peak. Recomputation within one
  // level: the program's root is then seconds, not a minute, and the schedules still recompute.
  const int64_t smallest = smallest_full_budget(profile.plan, 1);
  int runs = 0, non_default = 0, recomputed = 0;
  for (int64_t budget : {smallest, (smallest + store_all_peak) / 2}) {
    const SolveOutcome out = solve_full_by_work(profile.plan, budget, 1);
    INFO("budget " << budget << " (store-all " << store_all_peak << "): " << out.status);
    if (!out.fits) continue;
    ++runs;
    for (const auto& [name, count] : out.implementations) non_default += count;
    std::vector<int> computed(profile.plan.nodes.size(), 0);
    for (const Step& st : out.schedule.steps)
      recomputed += st.kind == Step::Kind::compute && computed[st.id]++ > 0;
    TempSchedule file("resnet50_full_" + std::to_string(runs));
    write_file(file.path, tg, profile.plan, out.schedule, budget);
    CHECK(max_rel_diff_to_store_all(c, file.path, budget, 8) < 1e-10);
    CHECK(max_rel_diff_to_store_all(c, file.path, budget, 4) < 1e-3);
    // Against store-all on the schedule's own implementations: every value from the same kernel, bitwise.
    for (int float_bytes : {4, 8}) check_against_store_all(c, file.path, budget, true, float_bytes);
  }
  CHECK(runs == 2);
  CHECK(non_default > 0);
  CHECK(recomputed > 0);
}

// gpt2_tiny with its Attention forward twice as fast without P (as the fused kernel is on a GPU): full-mode
// schedules take AttentionGrad's recompute and the lean forward, P is neither allocated nor written, and the step
// gives store-all's bits on the same implementations, in the predicted peak.
TEST_CASE("lean attention: schedules whose AttentionGrads recompute leave P unallocated, bitwise as store-all",
          "[scheduled][impl]") {
  const Case c{"../test/data/gpt2_tiny", 2, std::nullopt};
  const TrainingGraph tg = training_graph_of(c);
  Profile profile = estimate_profile(tg, Roofline{});
  for (PlanNode& n : profile.plan.nodes)
    if (n.op == "Attention") n.lean_ms = n.time_ms / 2;
  const PlanGraph& plan = profile.plan;
  const int64_t store_all_peak = simulate(plan, store_all_schedule(plan)).peak_bytes;
  const int64_t smallest = smallest_full_budget(plan);
  int runs = 0, lean = 0, lean_recomputed = 0;
  for (int64_t budget : {smallest, (smallest + store_all_peak) / 2, store_all_peak}) {
    const SolveOutcome out = solve_full_by_work(plan, budget);
    INFO("budget " << budget << " (store-all " << store_all_peak << "): " << out.status);
    if (!out.fits) continue;
    ++runs;
    const std::vector<char> lean_node = lean_nodes(plan, out.schedule), unwritten = unwritten_values(plan, out.schedule);
    std::vector<int> computed(plan.nodes.size(), 0);
    for (const Step& st : out.schedule.steps) {
      if (st.kind != Step::Kind::compute || plan.nodes[st.id].op != "Attention") continue;
      const PlanNode& n = plan.nodes[st.id];
      CHECK(unwritten[n.outputs[1]] == lean_node[st.id]);  // P
      lean += lean_node[st.id] && computed[st.id] == 0;
      lean_recomputed += lean_node[st.id] && computed[st.id]++ > 0;
    }
    CHECK(out.predicted.time_ms == Approx(simulate(plan, out.schedule).time_ms));
    TempSchedule file("gpt2_tiny_lean_" + std::to_string(runs));
    write_file(file.path, tg, plan, out.schedule, budget);
    CHECK(max_rel_diff_to_store_all(c, file.path, budget, 8) < 1e-10);
    for (int float_bytes : {4, 8}) check_against_store_all(c, file.path, budget, true, float_bytes);
  }
  CHECK(runs == 3);
  CHECK(lean > 0);
  CHECK(lean_recomputed > 0);  // recomputed without P: its bytes counted and taken back at once
}

TEST_CASE("solved schedules run bitwise equal to store-all, arena peak = simulator peak <= budget",
          "[heavy][scheduled]") {
  const Case cases[] = {{"tiny", 4, std::nullopt}, {"resnet50", 2, Shape{3, 32, 32}}};
  for (const Case& c : cases) {
    const TrainingGraph tg = training_graph_of(c);
    const Profile profile = estimate_profile(tg, Roofline{});
    const int64_t store_all_peak = simulate(profile.plan, store_all_schedule(profile.plan)).peak_bytes;
    // The budgets 1/3, 1/2 and 2/3 of the store-all peak, where they fit; at these small inputs the resident
    // parameters and momentum, and the parameter gradients all live before the updates, leave little room (for
    // resnet50 every schedule needs 99.8% of store-all's peak), so also the smallest budget the heuristics reach
    // and the midpoint between it and store-all's peak.
    std::vector<int64_t> budgets = {store_all_peak / 3, store_all_peak / 2, store_all_peak * 2 / 3};
    int runs = 0, recomputing = 0, dropout_recomputed = 0, recomputed_in_place = 0;
    for (const char* mode : {"checkpoint", "sqrtn"})
      for (size_t i = 0; i < budgets.size(); ++i) {
        // sqrt(n) ignores the budget (and on these graphs peaks above store-all): once more without one.
        if (std::string(mode) == "sqrtn" && i == 0) budgets.push_back(0);
        const int64_t budget = budgets[i];
        SolveOptions so;
        so.budget_bytes = budget;
        so.mode = mode;
        so.time_limit_s = kNoClock;
        so.max_nodes = 1;
        so.max_sub_mips = 4;
        so.threads = 1;
        const SolveOutcome out = solve(profile.plan, so);
        if (budgets.size() == 3) {
          budgets.push_back(out.smallest_found_bytes);
          budgets.push_back((out.smallest_found_bytes + store_all_peak) / 2);
        }
        INFO(c.model << " " << mode << " budget " << budget << " (store-all " << store_all_peak << "): "
                     << out.status);
        if (!out.fits) continue;
        ++runs;
        if (out.predicted.recomputations > 0) ++recomputing;
        std::vector<int> runs_of(profile.plan.nodes.size(), 0);
        for (const Step& st : out.schedule.steps)
          if (st.kind == Step::Kind::compute && ++runs_of[st.id] >= 2) {
            dropout_recomputed += runs_of[st.id] == 2 && profile.plan.nodes[st.id].op == "Dropout";
            recomputed_in_place += st.in_place >= 0;
          }
        TempSchedule file(std::string(c.model) + "_" + mode + "_" + std::to_string(i));
        write_file(file.path, tg, profile.plan, out.schedule, budget);
        check_against_store_all(c, file.path, budget);
      }
    INFO(c.model);
    CHECK(runs > 0);
    CHECK(recomputing > 0);
    // tiny's Dropout is recomputed by sqrt(n) (the mask must come out the same, or its gradients would differ).
    if (std::string(c.model) == "tiny") CHECK(dropout_recomputed > 0);
    // resnet50's checkpoint schedules recompute Relus and Adds in place (over a recomputed input they end).
    if (std::string(c.model) == "resnet50") CHECK(recomputed_in_place > 0);
  }
}

TEST_CASE("a recomputed Dropout draws the same mask, and BatchNorm statistics are updated once", "[scheduled]") {
  // The MILP has no reason to recompute tiny's Dropout (its output is small and read late; only sqrt(n) does), so
  // this checkpoint schedule is made by hand from store-all: the Dropout's outputs are dropped after the forward
  // pass and the node runs again right before backward first reads them; the BatchNorm is recomputed the same way. A different mask on
  // recomputation would change DropoutGrad's output and with it every gradient upstream; a second update of the
  // running statistics would change them.
  const Case c{"tiny", 4, std::nullopt};
  const TrainingGraph tg = training_graph_of(c);
  const Graph& g = tg.graph;
  auto backend = make_cpu_backend(4);
  const PlanGraph plan = make_plan_graph(tg, workspace_with(*backend, g, {}), 4);
  Schedule s = out_of_place(store_all_schedule(plan));  // every value freed by a step of its own
  s.mode = "checkpoint";

  int recomputed = 0;
  for (const char* op : {"Dropout", "BatchNormalization"}) {
    int node = -1;
    for (int n = 0; n < tg.forward_end; ++n)
      if (plan.nodes[n].op == op) node = n;
    REQUIRE(node >= 0);
    const PlanNode& pn = plan.nodes[node];
    std::vector<int> transient;  // the node's transient inputs and outputs: kept live to the end, freed there
    for (int v : pn.inputs)
      if (!plan.values[v].resident) transient.push_back(v);
    std::vector<int> outputs = pn.outputs;
    auto is_free_of = [&](const Step& st, const std::vector<int>& vs) {
      return st.kind == Step::Kind::free && std::find(vs.begin(), vs.end(), st.id) != vs.end();
    };
    std::erase_if(s.steps, [&](const Step& st) { return is_free_of(st, transient) || is_free_of(st, outputs); });
    auto reads = [&](int n, const std::vector<int>& vs) {
      for (int v : plan.nodes[n].inputs)
        if (std::find(vs.begin(), vs.end(), v) != vs.end()) return true;
      return false;
    };
    // After the last forward (or loss) reader of the outputs: free them. Before the first backward reader:
    // recompute the node.
    size_t last_forward = 0, first_backward = s.steps.size();
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      if (st.kind != Step::Kind::compute) continue;
      if (st.id == node) last_forward = std::max(last_forward, i);
      if (!reads(st.id, outputs)) continue;
      if (plan.nodes[st.id].stage == Stage::forward || plan.nodes[st.id].stage == Stage::loss)
        last_forward = std::max(last_forward, i);
      else
        first_backward = std::min(first_backward, i);
    }
    REQUIRE(first_backward < s.steps.size());
    s.steps.insert(s.steps.begin() + static_cast<long>(first_backward), Step{Step::Kind::compute, node});
    for (int v : outputs)
      s.steps.insert(s.steps.begin() + static_cast<long>(last_forward) + 1, Step{Step::Kind::free, v});
    // Frees at the end, before the updates (which read no activations).
    size_t end = s.steps.size();
    while (end > 0 && s.steps[end - 1].kind == Step::Kind::compute && plan.nodes[s.steps[end - 1].id].stage == Stage::update)
      --end;
    std::vector<int> all = transient;
    all.insert(all.end(), outputs.begin(), outputs.end());
    for (int v : all) s.steps.insert(s.steps.begin() + static_cast<long>(end), Step{Step::Kind::free, v});
    ++recomputed;
  }
  const SimResult sim = simulate(plan, s);
  REQUIRE(sim.recomputations == recomputed);

  TempSchedule file("tiny_dropout_by_hand");
  write_file(file.path, tg, plan, s, 0);
  check_against_store_all(c, file.path, 0);

  // The same schedule with the recomputation flag ignored would update BatchNorm twice: the executor's flag is
  // what keeps the statistics equal, so make sure the schedule does run BatchNorm twice in one step.
  int bn_runs = 0;
  for (const Step& st : s.steps)
    if (st.kind == Step::Kind::compute && plan.nodes[st.id].op == "BatchNormalization") ++bn_runs;
  CHECK(bn_runs == 2);
}

// Every forward activation that backward reads and that is idle between the forward pass and its first backward
// reader copied to the host right after its last forward reader and back right before that backward step.
Schedule offload_idle(const PlanGraph& plan, Schedule s) {
  std::vector<int> last_forward(plan.values.size(), -1), first_backward(plan.values.size(), -1);
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind != Step::Kind::compute) continue;
    const bool forward = plan.nodes[st.id].stage == Stage::forward || plan.nodes[st.id].stage == Stage::loss;
    for (int v : plan.nodes[st.id].outputs)
      if (forward) last_forward[v] = static_cast<int>(i);
    for (int v : plan.nodes[st.id].inputs) {
      if (plan.values[v].resident) continue;
      if (forward) last_forward[v] = static_cast<int>(i);
      else if (first_backward[v] < 0) first_backward[v] = static_cast<int>(i);
    }
  }
  std::vector<std::vector<Step>> before(s.steps.size() + 1), after(s.steps.size() + 1);
  for (size_t v = 0; v < plan.values.size(); ++v)
    if (last_forward[v] >= 0 && first_backward[v] > last_forward[v] + 1) {
      after[static_cast<size_t>(last_forward[v])].push_back({Step::Kind::offload, static_cast<int>(v)});
      before[static_cast<size_t>(first_backward[v])].push_back({Step::Kind::prefetch, static_cast<int>(v)});
    }
  Schedule out;
  out.mode = s.mode;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    for (const Step& st : before[i]) out.steps.push_back(st);
    out.steps.push_back(s.steps[i]);
    for (const Step& st : after[i]) out.steps.push_back(st);
  }
  return out;
}

TEST_CASE("offloaded values: the step gives store-all's bits in less device memory, the host arena holds them",
          "[scheduled][offload]") {
  const Case c{"tiny", 4, std::nullopt};
  const TrainingGraph tg = training_graph_of(c);
  const PlanGraph plan = cpu_plan(tg);
  const Schedule store_all = out_of_place(store_all_schedule(plan));
  Schedule s = offload_idle(plan, store_all);
  s.mode = "checkpoint";
  const SimResult base = simulate(plan, store_all), sim = simulate(plan, s);
  REQUIRE(sim.transfers > 0);
  CHECK(sim.transfers % 2 == 0);
  CHECK(sim.peak_bytes < base.peak_bytes);
  CHECK(sim.host_peak_bytes > 0);
  int64_t offloaded = 0;
  for (const Step& st : s.steps)
    if (st.kind == Step::Kind::offload) offloaded += plan.values[st.id].bytes;
  CHECK(sim.transfer_bytes == 2 * offloaded);  // each value out and back
  CHECK(sim.host_peak_bytes <= offloaded);
  CHECK(sim.time_ms == base.time_ms);  // copies are not priced by the simulator

  // The timeline: the host's bytes at each compute step, every copy counted at the compute step after it, and
  // both drawn; store-all's timeline shows neither.
  const std::vector<MemoryPoint> points = memory_timeline(plan, s);
  int64_t host_most = 0;
  int copies = 0;
  for (const MemoryPoint& m : points) host_most = std::max(host_most, m.host_bytes), copies += m.copies;
  CHECK(host_most > 0);
  CHECK(host_most <= sim.host_peak_bytes);  // (a value offloaded and prefetched between two compute steps is not seen)
  CHECK(copies == sim.transfers);
  TimelineChart chart;
  chart.title = "tiny offloaded";
  chart.schedule = points;
  chart.store_all = memory_timeline(plan, store_all);
  const std::string svg = memory_timeline_svg(chart);
  CHECK_THAT(svg, Contains("on the host (offloaded)") && Contains("after offload or prefetch steps"));
  chart.schedule = chart.store_all;
  CHECK_THAT(memory_timeline_svg(chart), !Contains("on the host"));

  TempSchedule file("tiny_offload_by_hand");
  write_file(file.path, tg, plan, s, 0);
  const ScheduleFile back = read_schedule(file.path, plan);
  CHECK(back.schedule.steps == s.steps);  // offload and prefetch steps survive the file
  check_against_store_all(c, file.path, 0);
  SessionOptions o = options_of(c);
  o.schedule_path = file.path;
  auto session = open_session(o);
  CHECK(session->executor->host_reserved_bytes() == sim.host_peak_bytes);

  // What the simulator refuses: a read of a value on the host, a prefetch of one on the device, an offload of one
  // already on the host, and a value left on the host.
  auto first = [&](Step::Kind k) {
    return static_cast<size_t>(std::find_if(s.steps.begin(), s.steps.end(), [&](const Step& st) { return st.kind == k; }) -
                               s.steps.begin());
  };
  const size_t off = first(Step::Kind::offload), pre = first(Step::Kind::prefetch);
  const int v = s.steps[off].id;
  Schedule bad = s;
  std::erase_if(bad.steps, [&](const Step& st) { return st.kind == Step::Kind::prefetch && st.id == v; });
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("which is offloaded to the host (prefetch it first)"));
  bad = s;
  bad.steps.insert(bad.steps.begin() + static_cast<long>(off), Step{Step::Kind::prefetch, v});
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("prefetches '" + plan.values[v].name + "', which is on the device"));
  bad = s;
  bad.steps.insert(bad.steps.begin() + static_cast<long>(off) + 1, Step{Step::Kind::offload, v});
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("which is on the host already"));
  // Freed on the host instead of prefetched: the reader then finds it freed.
  bad = s;
  bad.steps[pre] = Step{Step::Kind::free, s.steps[pre].id};
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("which is already freed"));
}

TEST_CASE("a copy plan in pieces: the file keeps it, the run gives store-all's bits, a plan that does not issue "
          "every copy in full within its steps is refused with one line",
          "[scheduled][offload]") {
  const Case c{"tiny", 4, std::nullopt};
  const TrainingGraph tg = training_graph_of(c);
  PlanGraph plan = cpu_plan(tg);
  for (PlanNode& n : plan.nodes) n.set_impl_ms(0, 1.0);
  Schedule s = offload_idle(plan, out_of_place(store_all_schedule(plan)));
  s.mode = "checkpoint";
  int64_t most = 0;  // the largest value copied: 2 ms on the link, in pieces of a third of it
  for (const Step& st : s.steps)
    if (st.kind == Step::Kind::offload) most = std::max(most, plan.values[st.id].bytes);
  const HostLink link = host_link_from_flag(static_cast<double>(most) * 1e-6 / 2);
  s.copy_plan = plan_copies(plan, s, link, std::max<int64_t>(1, most / 3));
  int moves = 0;
  for (const Step& st : s.steps) moves += st.kind == Step::Kind::offload || st.kind == Step::Kind::prefetch;
  REQUIRE(moves >= 4);
  REQUIRE(s.copy_plan.size() > static_cast<size_t>(moves));  // in pieces
  CHECK(copy_plan_of(plan, s) == s.copy_plan);
  // Every piece after its value is written (a copy to the host) or its device block allocated (a copy back), and
  // no later than the step that waits for it.
  for (const CopyChunk& chunk : s.copy_plan) {
    INFO("piece " << chunk.part << " of the copy of step " << chunk.copy << " at step " << chunk.at);
    const Step& move = s.steps[chunk.copy];
    if (move.kind == Step::Kind::prefetch) {
      CHECK(chunk.at > chunk.copy);
      for (int i = chunk.copy + 1; i < chunk.at; ++i)
        CHECK(!(s.steps[i].kind == Step::Kind::compute &&
                std::count(plan.nodes[s.steps[i].id].inputs.begin(), plan.nodes[s.steps[i].id].inputs.end(), move.id)));
    } else {
      CHECK(chunk.at <= chunk.copy);
      int writer = -1;
      for (int i = 0; i < chunk.copy; ++i)
        if (s.steps[i].kind == Step::Kind::compute &&
            std::count(plan.nodes[s.steps[i].id].outputs.begin(), plan.nodes[s.steps[i].id].outputs.end(), move.id))
          writer = i;
      CHECK(chunk.at > writer);
    }
  }
  // Issued in pieces by deadline, the step on the streams is no longer than with each copy whole.
  Schedule whole = s;
  whole.copy_plan.clear();
  CHECK(time_streams(plan, s, link).step_ms <= time_streams(plan, whole, link).step_ms + 1e-9);

  TempSchedule file("tiny_copy_plan");
  write_file(file.path, tg, plan, s, 0);
  const nlohmann::json j = read_schedule_json(file.path);
  CHECK(j.at("version") == kScheduleVersion);
  CHECK(j.at("copy_plan").size() == s.copy_plan.size());
  const ScheduleFile back = read_schedule(file.path, plan);
  CHECK(back.schedule.copy_plan == s.copy_plan);
  CHECK(back.schedule.steps == s.steps);
  check_against_store_all(c, file.path, 0);  // bitwise, on the CPU (copies at once, in their pieces)

  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& why) {
    nlohmann::json bad = j;
    edit(bad);
    CHECK_THROWS_WITH(schedule_from_json(bad, plan, "s.json"), Contains("s.json: ") && Contains(why));
  };
  const int last = static_cast<int>(j["copy_plan"].size()) - 1;
  refused([](nlohmann::json& b) { b["version"] = 5; }, "copy_plan needs schedule version 6");
  refused([](nlohmann::json& b) { b["copy_plan"][0] = {0, 1, 2}; }, "copy_plan entry 0 is not [at, copy, part, parts]");
  refused([](nlohmann::json& b) { b["copy_plan"][0][0] = -1; }, "copy_plan entry 0 is not [at, copy, part, parts]");
  refused([&](nlohmann::json& b) { b["copy_plan"].erase(static_cast<size_t>(last)); }, "parts");
  refused([&](nlohmann::json& b) { std::swap(b["copy_plan"][0], b["copy_plan"][last]); }, "copy plan entry");
  refused([](nlohmann::json& b) { b["copy_plan"][0][1] = 0; }, "step 0 is not an offload or prefetch step");
  // A piece issued before its value is computed.
  refused([](nlohmann::json& b) { b["copy_plan"][0][0] = 0; }, "outside steps");
}

// Store-all with each momentum at home on the host: prefetched right before the update that reads it, offloaded
// right after.
Schedule momentum_on_host(const PlanGraph& plan, const Graph& g, const Schedule& store_all) {
  Schedule out;
  out.mode = "checkpoint";
  for (const Step& st : store_all.steps) {
    std::vector<int> moved;
    if (st.kind == Step::Kind::compute && plan.nodes[st.id].stage == Stage::update)
      for (int v : plan.nodes[st.id].inputs)
        if (g.values[v].role == Role::momentum) moved.push_back(v);
    for (int v : moved) out.steps.push_back({Step::Kind::prefetch, v});
    out.steps.push_back(st);
    for (int v : moved) out.steps.push_back({Step::Kind::offload, v});
    out.on_host.insert(out.on_host.end(), moved.begin(), moved.end());
  }
  return out;
}

TEST_CASE("optimizer state at home on the host: store-all's bits, the device holds it only around its update",
          "[scheduled][offload]") {
  const Case c{"tiny", 4, std::nullopt};
  const TrainingGraph tg = training_graph_of(c);
  const PlanGraph plan = cpu_plan(tg);
  const Schedule store_all = store_all_schedule(plan);
  const Schedule s = momentum_on_host(plan, tg.graph, store_all);
  REQUIRE(s.on_host.size() == tg.params.size());
  int64_t momentum = 0;
  for (int v : s.on_host) momentum += plan.values[v].bytes;
  const SimResult base = simulate(plan, store_all), sim = simulate(plan, s);
  CHECK(sim.resident_bytes == base.resident_bytes - momentum);
  CHECK(sim.host_peak_bytes == momentum);  // its home blocks: nothing else is offloaded
  CHECK(sim.transfers == 2 * static_cast<int>(s.on_host.size()));
  CHECK(sim.peak_bytes < base.peak_bytes);

  TempSchedule file("tiny_momentum_on_host");
  write_file(file.path, tg, plan, s, 0);
  const nlohmann::json j = read_schedule_json(file.path);
  CHECK(j.at("version") == 5);  // on_host, no copy plan
  CHECK(j.at("on_host").size() == s.on_host.size());
  const ScheduleFile back = read_schedule(file.path, plan);
  CHECK(back.schedule.on_host == s.on_host);
  CHECK(back.schedule.steps == s.steps);
  check_against_store_all(c, file.path, 0);
  SessionOptions o = options_of(c);
  o.schedule_path = file.path;
  auto session = open_session(o);
  CHECK(session->executor->host_reserved_bytes() == sim.host_peak_bytes);
  // The momentum after an update that read it from the host and wrote it back there: store-all's bits.
  auto reference = open_session(options_of(c));
  step_both(*session, *reference);
  for (int v : s.on_host) {
    INFO(plan.values[v].name);
    CHECK(same_bits(session->executor->get_value(v), reference->executor->get_value(v)));
  }

  // What the simulator and the file reader refuse.
  const int m = s.on_host.front();
  Schedule bad = s;
  std::erase_if(bad.steps, [&](const Step& st) { return st.kind == Step::Kind::prefetch && st.id == m; });
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("which is offloaded to the host (prefetch it first)"));
  bad = s;
  std::erase_if(bad.steps, [&](const Step& st) { return st.kind == Step::Kind::offload && st.id == m; });
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("'" + plan.values[m].name + "' is on the device at the end"));
  bad = s;
  for (Step& st : bad.steps)
    if (st.kind == Step::Kind::offload && st.id == m) st.kind = Step::Kind::free;
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("frees '" + plan.values[m].name + "', which is resident with its home on the host"));
  bad = s;
  bad.on_host.push_back(m);
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("named twice"));
  bad = s;
  bad.on_host.push_back(plan.nodes[0].outputs.at(0));  // an activation
  CHECK_THROWS_WITH(simulate(plan, bad), Contains("not resident"));
  nlohmann::json unknown = j;
  unknown["on_host"].push_back("no_such_value");
  CHECK_THROWS_WITH(schedule_from_json(unknown, plan, "s.json"), Contains("s.json: on_host: unknown value 'no_such_value'"));
  nlohmann::json older = j;
  older["version"] = 4;
  CHECK_THROWS_WITH(schedule_from_json(older, plan, "s.json"), Contains("s.json: on_host needs schedule version 5"));
}

TEST_CASE("schedule files: fingerprint, batch and step errors are refused with one line", "[scheduled][errors]") {
  const Case c{"tiny", 4, std::nullopt};
  const TrainingGraph tg = training_graph_of(c);
  const PlanGraph plan =
      cpu_plan(tg);
  TempSchedule file("tiny_errors");
  auto open_with = [&](const Schedule& s, const std::function<void(SessionOptions&)>& edit = nullptr) {
    write_file(file.path, tg, plan, s, 0);
    SessionOptions o = options_of(c);
    o.import.batch.reset();
    o.schedule_path = file.path;
    if (edit) edit(o);
    return open_session(o);
  };
  const Schedule good = store_all_schedule(plan);
  CHECK_NOTHROW(open_with(good));  // batch and input shape come from the file
  CHECK_THROWS_WITH(open_with(good, [](SessionOptions& o) { o.import.batch = 8; }),
                    Contains("--batch 8 differs from the schedule's batch 4"));
  CHECK_THROWS_WITH(open_with(good, [](SessionOptions& o) { o.import.input_shape = Shape{3, 32, 32}; }),
                    Contains("--input-shape 3,32,32 differs from the schedule's 3,16,16"));
  CHECK_THROWS_WITH(open_with(good, [](SessionOptions& o) { o.train.loss = LossKind::sum; }),
                    Contains("solved with --loss ce, this run uses --loss sum"));
  CHECK_NOTHROW(open_with(good, [](SessionOptions& o) { o.train.lr = 0.5; }));  // lr is not in the fingerprint

  // A parameter read after its update changed it in place: the first conv (which reads only the batch and its
  // weight) recomputed after the weight's SGD update.
  Schedule late = good;
  const int conv = 0, weight = plan.nodes[conv].inputs[1];
  size_t at = 0;
  while (!(late.steps[at].kind == Step::Kind::compute && plan.nodes[late.steps[at].id].stage == Stage::update &&
           plan.nodes[late.steps[at].id].inputs[0] == weight))
    ++at;
  late.steps.insert(late.steps.begin() + static_cast<long>(at) + 1, Step{Step::Kind::compute, conv});
  late.steps.insert(late.steps.begin() + static_cast<long>(at) + 2, Step{Step::Kind::free, plan.nodes[conv].outputs[0]});
  CHECK_THROWS_WITH(open_with(late), Contains("updated it in place"));

  // Implementations: a schedule names them by name; an unknown one is refused naming the step and node; running
  // the input-activated ReluGrad after its x was freed is refused by the simulator with the step number.
  int relu_grad = -1;
  for (size_t n = 0; n < plan.nodes.size(); ++n)
    if (plan.nodes[n].op == "ReluGrad") relu_grad = static_cast<int>(n);
  REQUIRE(relu_grad >= 0);
  write_file(file.path, tg, plan, good, 0);
  nlohmann::json j = read_schedule_json(file.path);
  for (auto& st : j["steps"])
    if ((st[0] == "compute" || st[0] == "compute_in_place") && st[1] == plan.nodes[relu_grad].name)
      st.push_back("bogus");  // (ReluGrad runs in place over dY: its step names the value, then the implementation)
  CHECK_THROWS_WITH(schedule_from_json(j, plan, "s.json"),
                    Contains("node '" + plan.nodes[relu_grad].name + "' has no implementation 'bogus'"));
  // An in-place step names the value it overwrites: without it, or with an unknown one, the file is refused.
  j = read_schedule_json(file.path);
  bool edited = false;
  for (auto& st : j["steps"])
    if (st[0] == "compute_in_place" && !edited) st.erase(2), edited = true;
  REQUIRE(edited);
  CHECK_THROWS_WITH(schedule_from_json(j, plan, "s.json"), Contains("[\"compute_in_place\", node, value"));
  j = read_schedule_json(file.path);
  for (auto& st : j["steps"])
    if (st[0] == "compute_in_place") st[2] = "nowhere";
  CHECK_THROWS_WITH(schedule_from_json(j, plan, "s.json"), Contains("unknown value 'nowhere'"));
  // Store-all ends x at its last forward reader, the Relu, which overwrites it in place (ReluGrad reads y by
  // default); freed instead, the simulator says so too.
  Schedule input_too_late = good;
  for (Step& st : input_too_late.steps)
    if (st.kind == Step::Kind::compute && st.id == relu_grad) st.impl = 1;
  CHECK_THROWS_WITH(open_with(input_too_late), Contains("reads") && Contains("overwritten in place"));
  CHECK_THROWS_WITH(open_with(out_of_place(input_too_late)), Contains("reads") && Contains("already freed"));
  CHECK_NOTHROW(open_with(store_all_schedule(plan, [&] {
    std::vector<int> impl(plan.nodes.size(), 0);
    impl[relu_grad] = 1;
    return impl;
  }())));

  // Algorithms (a schedule solved from a CUDA profile names cuDNN algorithms): written as {"algorithm": k} after
  // the implementation and read back; the CPU runs its one algorithm (arena peak = prediction as ever); a node
  // given two algorithms, a malformed algorithm entry or one on a step without an implementation are refused.
  int conv_grad = -1;
  for (size_t n = 0; n < plan.nodes.size(); ++n)
    if (plan.nodes[n].op == "ConvGradWeight") conv_grad = static_cast<int>(n);
  REQUIRE(conv_grad >= 0);
  Schedule algo = good;
  for (Step& st : algo.steps)
    if (st.kind == Step::Kind::compute && st.id == conv_grad) st.algo = 3;
  write_file(file.path, tg, plan, algo, 0);
  j = read_schedule_json(file.path);
  CHECK(j.at("version") == 4);  // no on_host
  bool named = false;
  for (const auto& st : j["steps"])
    if (st[1] == plan.nodes[conv_grad].name) named = st == nlohmann::json{"compute", st[1], "default", {{"algorithm", 3}}};
  CHECK(named);
  CHECK(schedule_from_json(j, plan, "s.json").schedule.steps == algo.steps);
  {
    auto session = open_with(algo);
    session->executor->step({});
    CHECK(session->executor->arena().peak_bytes() == session->predicted.peak_bytes);
  }
  Schedule twice = algo;
  for (size_t i = 0; i < twice.steps.size(); ++i)
    if (twice.steps[i].kind == Step::Kind::compute && twice.steps[i].id == 0) {  // the first conv, recomputed
      Step again{Step::Kind::compute, 0};
      again.algo = 1;
      twice.steps[i].algo = 2;
      twice.steps.insert(twice.steps.begin() + static_cast<long>(i) + 1,
                         Step{Step::Kind::free, plan.nodes[0].outputs[0]});
      twice.steps.insert(twice.steps.begin() + static_cast<long>(i) + 2, again);
      break;
    }
  CHECK_THROWS_WITH(open_with(twice), Contains("runs with algorithm 1 here and 2 at an earlier step"));
  for (const nlohmann::json& entry : {nlohmann::json{{"algorithm", -1}}, nlohmann::json{{"algo", 3}},
                                      nlohmann::json{{"algorithm", "fast"}}}) {
    j = read_schedule_json(file.path);
    for (auto& st : j["steps"])
      if (st[1] == plan.nodes[conv_grad].name) st[3] = entry;
    CHECK_THROWS_WITH(schedule_from_json(j, plan, "s.json"), Contains("expected {\"algorithm\": k} with k >= 0"));
  }
  j = read_schedule_json(file.path);
  for (auto& st : j["steps"])
    if (st[1] == plan.nodes[conv_grad].name) st.erase(2);  // the algorithm without the implementation
  CHECK_THROWS_WITH(schedule_from_json(j, plan, "s.json"), Contains("is not [\"compute\", node(, implementation(, "));
}

// The lean store-all (monet-run without a schedule, monet-solve's baseline) on mobilenet_v2: output-activated
// ClipGrads free each ReLU6's input at the Clip, which then runs in place, as PyTorch's ReLU6(inplace=True) does, in
// less memory than the defaults; the lean store-all's peak is no higher. (With no times it may reach that by other
// changes: output-activated BatchNormGrads free the convolutions' outputs instead; on the H200 profile of 2026-11-30
// it takes the output-activated ClipGrad at 34 of 35 nodes.)
TEST_CASE("lean store-all: mobilenet_v2's ReLU6s run in place with output-activated ClipGrads, in less memory",
          "[scheduled][store_all]") {
  const Case c{"mobilenet_v2", 2, Shape{3, 64, 64}, false};  // its batch norms and ReLU6s as separate nodes
  const TrainingGraph tg = training_graph_of(c);
  const PlanGraph plan = cpu_plan(tg);
  std::vector<int> output_clip_grads(plan.nodes.size(), 0);
  for (size_t n = 0; n < plan.nodes.size(); ++n)
    if (plan.nodes[n].op == "ClipGrad") output_clip_grads[n] = plan.nodes[n].find_impl("output");
  const Schedule clipped = store_all_schedule(plan, output_clip_grads);
  int clips_in_place = 0;
  for (const Step& st : clipped.steps)
    clips_in_place += st.kind == Step::Kind::compute && st.in_place >= 0 && plan.nodes[st.id].op == "Clip";
  CHECK(clips_in_place == 35);
  const int64_t defaults_peak = simulate(plan, store_all_schedule(plan)).peak_bytes;
  const int64_t clipped_peak = simulate(plan, clipped).peak_bytes;
  CHECK(clipped_peak < defaults_peak);
  const Schedule lean = lean_store_all_schedule(plan);
  const int64_t lean_peak = simulate(plan, lean).peak_bytes;
  CHECK(lean_peak <= clipped_peak);
  // A session without a schedule runs it; its gradients are the default store-all's (ClipGrad's two forms differ
  // only where x lies exactly on a bound).
  SessionOptions o = options_of(c);
  o.store_all = StoreAll::lean;
  o.float_bytes = 8;
  auto s = open_session(o);
  CHECK(s->predicted.peak_bytes > 0);
  CHECK(s->schedule.schedule.steps == lean.steps);
  SessionOptions d = options_of(c);
  d.float_bytes = 8;
  auto r = open_session(d);
  const auto [got, ref] = step_both(*s, *r);
  // Against the largest gradient element: some are zero in exact arithmetic (linear bottleneck BN biases).
  double scale = 0;
  for (const auto& [v, values] : ref)
    for (double x : values) scale = std::max(scale, std::abs(x));
  for (const auto& [v, values] : ref) {
    INFO(s->tg.graph.values[v].name);
    double diff = 0;
    for (size_t i = 0; i < ref.at(v).size(); ++i) diff = std::max(diff, std::abs(got.at(v)[i] - ref.at(v)[i]));
    CHECK(diff <= 1e-10 * scale);
  }
  CHECK(s->executor->arena().peak_bytes() == s->predicted.peak_bytes);
}
