// The fast store-all (every node on its fastest implementation) beside the lean one (the smallest peak), what a
// session runs without a schedule, and the workspace cap of algorithms a backend chooses itself.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "engine/session.h"
#include "profile/profile.h"
#include "schedule/schedule.h"
#include "solve/solve.h"
#include "solve/tiny_plans.h"
#include "test_paths.h"

using namespace monet;
using monet::test::model_path;

namespace {

// x, w resident; f0 (a convolution with two algorithm variants) -> a0 -> f1 -> a1 -> loss; loss_grad, b0 (two
// implementations), update. Sizes in units of kAlignBytes. f0's variants tie on time (the fastest), the second with
// less workspace (below the store-all's peak, the first's above); b0's second implementation is three times faster
// with a workspace that makes the step's peak.
PlanGraph two_choice_plan() {
  PlanGraph p;
  auto value = [&](const char* name, int units, bool resident) {
    p.values.push_back({name, units * kAlignBytes, resident, -1});
    return static_cast<int>(p.values.size()) - 1;
  };
  auto node = [&](const char* name, Stage st, std::vector<int> in, std::vector<int> out, double ms) {
    for (int v : out) p.values[v].producer = static_cast<int>(p.nodes.size());
    p.nodes.push_back({name, "Op", st, std::move(in), std::move(out), ms, 0});
    return static_cast<int>(p.nodes.size()) - 1;
  };
  const int x = value("x", 2, true), w = value("w", 1, true);
  const int a0 = value("a0", 4, false), a1 = value("a1", 2, false), loss = value("loss", 1, false);
  const int g1 = value("g1", 2, false), g0 = value("g0", 4, false);
  const int f0 = node("f0", Stage::forward, {x}, {a0}, 2.0);
  PlanNode& conv = p.nodes[f0];
  conv.impls.push_back({"default", conv.inputs, 2.0, 0});
  for (auto [algo, ws_units] : {std::pair{1, 8}, std::pair{2, 4}}) {
    PlanImpl v{"cudnn" + std::to_string(algo), conv.inputs, 0.5, ws_units * kAlignBytes};
    v.op_impl = 0;
    v.algo = algo;
    conv.impls.push_back(v);
  }
  node("f1", Stage::forward, {a0}, {a1}, 1.0);
  node("loss", Stage::loss, {a1}, {loss}, 0.1);
  node("loss_grad", Stage::backward, {a1, loss}, {g1}, 0.1);
  const int b0 = node("b0", Stage::backward, {g1, a0}, {g0}, 3.0);
  PlanNode& back = p.nodes[b0];
  back.impls.push_back({"input", back.inputs, 3.0, 0});
  back.impls.push_back({"fast", back.inputs, 1.0, 64 * kAlignBytes});
  node("update", Stage::update, {w, g0}, {}, 0.2);
  return p;
}

}  // namespace

TEST_CASE("fast store-all: each node's fastest implementation, the least workspace on ties", "[store_all]") {
  const PlanGraph p = two_choice_plan();
  const std::vector<int> fast = fast_store_all_impls(p), lean = lean_store_all_impls(p);
  CHECK(fast == std::vector<int>{2, 0, 0, 0, 1, 0});  // f0: cudnn2 (as fast as cudnn1, less workspace); b0: fast
  // The lean store-all takes cudnn2 too (its workspace is not at the peak), not cudnn1 or b0's fast one (they are).
  CHECK(lean == std::vector<int>{2, 0, 0, 0, 0, 0});
  const Schedule s = fast_store_all_schedule(p);
  const SimResult fast_sim = simulate(p, s), lean_sim = simulate(p, lean_store_all_schedule(p));
  CHECK(s.steps == store_all_schedule(p, fast).steps);
  CHECK(s.steps.front() == Step{Step::Kind::compute, 0, 0, 2});  // f0's op implementation 0 on algorithm 2
  CHECK(fast_sim.time_ms == Approx(0.5 + 1.0 + 0.1 + 0.1 + 1.0 + 0.2));
  CHECK(fast_sim.time_ms < lean_sim.time_ms);
  CHECK(fast_sim.peak_bytes > lean_sim.peak_bytes);
  // No schedule is faster: the solver's overheads against it are never negative.
  SolveOptions o;
  o.mode = "store-all";
  const SolveOutcome r = solve(p, o);
  CHECK(r.fast_store_all.time_ms == Approx(fast_sim.time_ms));
  CHECK(r.fast_store_all.peak_bytes == fast_sim.peak_bytes);
  CHECK(r.store_all.time_ms == Approx(lean_sim.time_ms));
  CHECK(r.objective_ms >= r.fast_store_all.time_ms);
}

// An attention-like pair: f0 writes a0 and an optional a0p (Attention's O and P) and runs in lean_ms without a0p; b0
// reads a0p under `probs` (the default, faster by itself) and not under `recompute`. The fast store-all takes
// recompute where f0's lean run saves more than recompute costs, and the simulator times f0 lean exactly then.
TEST_CASE("fast store-all: a node's lean run counts where its readers may leave its optional outputs unread",
          "[store_all]") {
  for (const double lean_ms : {1.0, 4.5, 6.0}) {
    INFO("lean " << lean_ms);
    PlanGraph p;
    auto value = [&](const char* name, bool resident) {
      p.values.push_back({name, kAlignBytes, resident, -1});
      return static_cast<int>(p.values.size()) - 1;
    };
    auto node = [&](const char* name, Stage st, std::vector<int> in, std::vector<int> out, double ms) {
      for (int v : out) p.values[v].producer = static_cast<int>(p.nodes.size());
      p.nodes.push_back({name, "Op", st, std::move(in), std::move(out), ms, 0});
      return static_cast<int>(p.nodes.size()) - 1;
    };
    const int x = value("x", true), w = value("w", true), a0 = value("a0", false), a0p = value("a0p", false);
    const int loss = value("loss", false), g1 = value("g1", false), g0 = value("g0", false);
    const int f0 = node("f0", Stage::forward, {x, w}, {a0, a0p}, 5.0);
    p.nodes[f0].optional_outputs = {a0p};
    p.nodes[f0].lean_ms = lean_ms;
    node("loss", Stage::loss, {a0}, {loss}, 0.1);
    node("loss_grad", Stage::backward, {a0, loss}, {g1}, 0.1);
    const int b0 = node("b0", Stage::backward, {g1, x, w, a0p}, {g0}, 2.0);
    p.nodes[b0].impls.push_back({"probs", {g1, x, w, a0p}, 2.0, 0});
    p.nodes[b0].impls.push_back({"recompute", {g1, x, w, a0}, 3.0, 0});
    node("update", Stage::update, {w, g0}, {}, 0.2);
    const std::vector<int> fast = fast_store_all_impls(p);
    const bool lean = lean_ms + 3.0 < 5.0 + 2.0;  // recompute's extra second against f0's saving
    CHECK(fast[b0] == (lean ? 1 : 0));
    const SimResult sim = simulate(p, fast_store_all_schedule(p));
    CHECK(sim.time_ms == Approx((lean ? lean_ms + 3.0 : 5.0 + 2.0) + 0.1 + 0.1 + 0.2));
    CHECK(lean_nodes(p, fast_store_all_schedule(p))[f0] == lean);
    // The defaults read a0p: f0 is timed as written, whatever its lean time.
    CHECK(simulate(p, store_all_schedule(p)).time_ms == Approx(5.0 + 2.0 + 0.1 + 0.1 + 0.2));
  }
}

TEST_CASE("lean store-all: never above the fast store-all's peak or the defaults'", "[store_all]") {
  // The UNet's H200 profile of 2026-11-30: the descent from the defaults alone stopped at 13.15 GB, where every
  // single change towards the fast store-all (mask-reading ReluGrads, argmax-reading MaxPoolGrads, faster
  // ConvGradData algorithms) raised the peak and all of them together give 11.99 GB.
  const Profile prof = read_profile(std::string(MONET_SOURCE_DIR) +
                                    "/schedules/gpu-runs/2026-11-30_h200/call1/schedules/unet_11/h200/profile.json");
  const PlanGraph& p = prof.plan;
  const SimResult lean = simulate(p, lean_store_all_schedule(p)), fast = simulate(p, fast_store_all_schedule(p));
  const SimResult defaults = simulate(p, store_all_schedule(p));
  INFO("peaks: lean " << lean.peak_bytes << ", fast " << fast.peak_bytes << ", defaults " << defaults.peak_bytes);
  CHECK(lean.peak_bytes <= fast.peak_bytes);
  CHECK(lean.peak_bytes <= defaults.peak_bytes);
  CHECK(lean.peak_bytes < 12'000'000'000);
  // The profile's totals are the lean store-all's (profile_totals).
  CHECK(profile_totals(prof).store_all_peak_bytes == lean.peak_bytes);
}

TEST_CASE("fast store-all: without times (a plan on a backend) it is the defaults", "[store_all]") {
  PlanGraph p = two_choice_plan();
  for (PlanNode& n : p.nodes)
    for (int i = 0; i < n.num_impls(); ++i) n.set_impl_ms(i, 0);
  CHECK(fast_store_all_impls(p) == std::vector<int>(p.nodes.size(), 0));
  CHECK(fast_store_all_schedule(p).steps == store_all_schedule(p).steps);
}

TEST_CASE("session: without a schedule it runs the fast store-all, the lean and the default on request",
          "[store_all][session]") {
  SessionOptions o;
  o.model_path = model_path("mobilenet_v2");
  o.import.batch = 2;
  o.import.input_shape = Shape{3, 32, 32};
  CHECK(o.store_all == StoreAll::fast);
  auto fast = open_session(o);
  // On the backend's plan (no times) the fast store-all is the defaults; the lean one differs on mobilenet_v2
  // (output-activated ClipGrads).
  CHECK(fast->schedule.schedule.steps == fast_store_all_schedule(fast->plan).steps);
  CHECK(fast->schedule.schedule.steps == store_all_schedule(fast->plan).steps);
  o.store_all = StoreAll::lean;
  auto lean = open_session(o);
  CHECK(lean->schedule.schedule.steps == lean_store_all_schedule(lean->plan).steps);
  CHECK(lean->schedule.schedule.steps != fast->schedule.schedule.steps);
  o.store_all = StoreAll::defaults;
  CHECK(open_session(o)->schedule.schedule.steps == store_all_schedule(fast->plan).steps);
  CHECK(parse_store_all("default") == StoreAll::defaults);
  CHECK_THROWS_WITH(parse_store_all("quick"), "--store-all 'quick': expected fast, lean or default");
}

TEST_CASE("session: with a profile, the fast store-all runs each node's fastest implementation on its times",
          "[store_all][session]") {
  SessionOptions o;
  o.model_path = model_path("tiny");
  o.import.batch = 2;
  const TrainingGraph tg = build_training_graph(import_onnx(o.model_path, o.import), o.train);
  Profile prof = estimate_profile(tg, Roofline{});
  // Make every non-default implementation the fastest: the fast store-all must pick the last of each node's.
  std::vector<int> want(prof.plan.nodes.size(), 0);
  int chosen = 0;
  for (size_t n = 0; n < prof.plan.nodes.size(); ++n) {
    PlanNode& node = prof.plan.nodes[n];
    if (node.num_impls() < 2) continue;
    want[n] = node.num_impls() - 1;
    node.set_impl_ms(want[n], node.impl_ms(0) / 10);
    ++chosen;
  }
  REQUIRE(chosen > 0);
  REQUIRE(fast_store_all_impls(prof.plan) == want);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("monet_fast_store_all_" + std::to_string(getpid()) + ".json")).string();
  write_profile(path, prof);
  o.profile_path = path;
  auto s = open_session(o);
  CHECK(s->schedule.schedule.steps == store_all_schedule(s->plan, want).steps);
  s->executor->step();
  CHECK(s->executor->arena().peak_bytes() == s->predicted.peak_bytes);
  o.store_all = StoreAll::defaults;
  CHECK_THROWS_WITH(open_session(o), Catch::Contains("not with --store-all default"));
  o.store_all = StoreAll::fast;
  o.import.batch = 4;  // another graph
  CHECK_THROWS_WITH(open_session(o), Catch::Contains("a profile of another model, batch, input shape, loss"));
  std::filesystem::remove(path);
}

TEST_CASE("workspace cap: the device's free memory less a margin, within the budget, less the fixed bytes",
          "[store_all][workspace]") {
  const int64_t GiB = int64_t{1} << 30, GB = 1000000000;
  // No budget: what the device leaves.
  CHECK(workspace_cap_bytes(141 * GB, 0, 2 * GB) == 141 * GB - kWorkspaceMarginBytes - 2 * GB);
  // A budget below the device: the budget less the fixed bytes (VGG-16 b176 at 5 GB: no 4.5 GB workspace).
  CHECK(workspace_cap_bytes(141 * GB, 5 * GB, GB) == 4 * GB);
  // A budget above what is free: the device decides.
  CHECK(workspace_cap_bytes(8 * GiB, 80 * GB, GiB) == 7 * GiB - kWorkspaceMarginBytes);
  // Nothing left: 0, never negative.
  CHECK(workspace_cap_bytes(GiB, 0, 2 * GiB) == 0);
  CHECK(workspace_cap_bytes(141 * GB, GB, 2 * GB) == 0);
  // The CPU backend has one algorithm per op: the cap changes nothing.
  auto cpu = make_cpu_backend(4);
  ImportOptions io;
  io.batch = 2;
  const TrainingGraph tg = build_training_graph(import_onnx(model_path("tiny"), io), TrainOptions{});
  std::vector<int64_t> before;
  for (const Node& n : tg.graph.nodes) before.push_back(cpu->workspace_bytes(tg.graph, n));
  cpu->limit_workspace(1, 0);
  for (size_t i = 0; i < tg.graph.nodes.size(); ++i)
    CHECK(cpu->workspace_bytes(tg.graph, tg.graph.nodes[i]) == before[i]);
}

// The lean store-all against brute force: on random plans with implementations (in place, algorithm variants,
// optional outputs), the smallest store-all peak over every assignment of implementations. A descent of one node at
// a time, time traded at tied peaks as it went, stopped above it on 111 of 3000 such plans; the two-phase descent
// (levels below the peak, coupled pairs, time last) on 2 of 3000, none of those below.
TEST_CASE("lean store-all: the smallest store-all peak on random plans (brute force)", "[store_all]") {
  int compared = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    const int n = 3 + static_cast<int>(seed % 4);
    const PlanGraph p = monet::test::random_plan(n, seed, true, true, seed % 3 == 0, true, seed % 5 == 0, seed % 2 == 0);
    int64_t combos = 1;
    for (const PlanNode& node : p.nodes) combos *= node.num_impls();
    if (combos > 5000) continue;
    std::vector<int> impl(p.nodes.size(), 0);
    int64_t smallest = INT64_MAX;
    for (int64_t c = 0; c < combos; ++c) {
      int64_t rest = c;
      for (size_t k = 0; k < p.nodes.size(); ++k) {
        impl[k] = static_cast<int>(rest % p.nodes[k].num_impls());
        rest /= p.nodes[k].num_impls();
      }
      smallest = std::min(smallest, simulate(p, store_all_schedule(p, impl)).peak_bytes);
    }
    INFO("seed " << seed);
    const SimResult lean = simulate(p, lean_store_all_schedule(p));
    CHECK(lean.peak_bytes == smallest);
    // Never slower than another store-all of the same peak found one change away from it.
    const std::vector<int> chosen = lean_store_all_impls(p);
    for (size_t k = 0; k < p.nodes.size(); ++k)
      for (int i = 0; i < p.nodes[k].num_impls(); ++i) {
        std::vector<int> other = chosen;
        other[k] = i;
        const SimResult r = simulate(p, store_all_schedule(p, other));
        if (r.peak_bytes <= lean.peak_bytes) CHECK(r.time_ms >= lean.time_ms - 1e-9);
      }
    ++compared;
  }
  CHECK(compared > 900);
}

// Peaks within 0.01% count as equal in the time phase, but the lean store-all never ends above the peak it started
// from: a faster implementation that adds less than 0.01% at the peak step is not taken over the defaults.
TEST_CASE("lean store-all: never above the defaults' peak, even by less than 0.01%", "[store_all]") {
  monet::test::PlanBuilder pb;
  const int x = pb.value("x", 10000, true), w = pb.value("w", 1, true);
  const int a0 = pb.value("a0", 10000, false), loss = pb.value("loss", 1, false);
  const int g1 = pb.value("g1", 1, false), g0 = pb.value("g0", 1, false);
  pb.node("f0", Stage::forward, {x}, {a0}, 1.0);
  pb.node("loss", Stage::loss, {a0}, {loss}, 0.1);
  pb.node("loss_grad", Stage::backward, {a0, loss}, {g1}, 0.1);
  const int b0 = pb.node("b0", Stage::backward, {g1, a0, x}, {g0}, 3.0);
  PlanNode& back = pb.plan.nodes[static_cast<size_t>(b0)];
  back.impls.push_back({"default", back.inputs, 3.0, 0});
  back.impls.push_back({"fast", back.inputs, 1.0, kAlignBytes});  // one more block at the peak step
  pb.node("update", Stage::update, {w, g0}, {}, 0.2);
  const PlanGraph& p = pb.plan;
  const int64_t defaults = simulate(p, store_all_schedule(p)).peak_bytes;
  REQUIRE(simulate(p, fast_store_all_schedule(p)).peak_bytes == defaults + kAlignBytes);
  REQUIRE(kAlignBytes < defaults / 10000);  // within the tolerance
  CHECK(lean_store_all_impls(p)[static_cast<size_t>(b0)] == 0);
  CHECK(simulate(p, lean_store_all_schedule(p)).peak_bytes == defaults);
}

TEST_CASE("solve: the lean store-all's implementations computed once, or taken from the caller", "[store_all]") {
  const PlanGraph p = two_choice_plan();
  SolveOptions o;
  o.mode = "store-all";
  o.budget_bytes = int64_t{1} << 40;
  const SolveOutcome computed = solve(p, o);
  CHECK(computed.store_all_impls == lean_store_all_impls(p));
  CHECK(computed.store_all.peak_bytes == simulate(p, lean_store_all_schedule(p)).peak_bytes);
  // The caller's implementations are the baseline as given (here the fast store-all's, whose peak is higher).
  o.store_all_impls = fast_store_all_impls(p);
  REQUIRE(o.store_all_impls != computed.store_all_impls);
  const SolveOutcome given = solve(p, o);
  CHECK(given.store_all_impls == o.store_all_impls);
  CHECK(given.store_all.peak_bytes == simulate(p, fast_store_all_schedule(p)).peak_bytes);
  o.store_all_impls.pop_back();
  CHECK_THROWS_WITH(solve(p, o), Catch::Contains("implementations for"));
}
