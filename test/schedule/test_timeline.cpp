// The memory timeline (simulate's per-step books by kind), its SVG, the frontier and profiles rescaled to another
// batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "core/svg.h"
#include "ir/onnx_import.h"
#include "profile/profile.h"
#include "schedule/timeline.h"
#include "solve/frontier.h"
#include "solve/no_clock.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {

Profile estimated(const std::string& model, int64_t batch, std::optional<Shape> input_shape = {}) {
  ImportOptions o;
  o.batch = batch;
  o.input_shape = input_shape;
  return estimate_profile(build_training_graph(import_onnx(model_path(model), o), TrainOptions{}), Roofline{});
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("memory timeline: the books by kind add up to the simulator's peak, step by step", "[schedule][timeline]") {
  const Profile prof = estimated("resnet50", 2, Shape{3, 32, 32});
  const PlanGraph& plan = prof.plan;
  SolveOptions o;
  o.mode = "sqrtn";  // recomputes: every kind shows
  o.budget_bytes = 0;
  const SolveOutcome sq = solve(plan, o);
  REQUIRE(sq.predicted.recomputations > 0);
  for (const Schedule& s : {sq.schedule, lean_store_all_schedule(plan)}) {
    std::vector<MemoryPoint> points;
    const SimResult r = simulate(plan, s, &points);
    INFO(s.mode);
    const size_t computes = static_cast<size_t>(std::count_if(
        s.steps.begin(), s.steps.end(), [](const Step& st) { return st.kind == Step::Kind::compute; }));
    REQUIRE(points.size() == computes);
    int64_t peak = 0;
    int peak_step = -1;
    bool recomputed = false;
    double t = 0;
    for (const MemoryPoint& m : points) {
      const PlanNode& n = plan.nodes[static_cast<size_t>(m.node)];
      CHECK(s.steps[static_cast<size_t>(m.step)].id == m.node);
      CHECK(m.bytes[static_cast<int>(MemoryKind::resident)] == r.resident_bytes);
      CHECK(m.bytes[static_cast<int>(MemoryKind::workspace)] ==
            align_up(n.impl_workspace(n.impl_for(s.steps[static_cast<size_t>(m.step)].impl,
                                                 s.steps[static_cast<size_t>(m.step)].algo))));
      CHECK(m.backward == (n.stage != Stage::forward));
      for (int64_t b : m.bytes) CHECK(b >= 0);
      CHECK(m.start_ms == Approx(t));
      t = m.end_ms;
      recomputed |= m.bytes[static_cast<int>(MemoryKind::recomputed)] > 0;
      if (m.total() > peak) peak = m.total(), peak_step = m.step;
    }
    CHECK(peak == r.peak_bytes);
    CHECK(peak_step == r.peak_step);
    CHECK(t == Approx(r.time_ms));
    CHECK(recomputed == (r.recomputations > 0));
    // The first step holds the resident bytes and its own outputs, all of them kept activations.
    const PlanNode& first = plan.nodes[static_cast<size_t>(points[0].node)];
    int64_t out = 0;
    for (int v : first.outputs) out += plan.values[static_cast<size_t>(v)].bytes;
    CHECK(points[0].bytes[static_cast<int>(MemoryKind::kept)] == out);
    CHECK(points[0].bytes[static_cast<int>(MemoryKind::gradient)] == 0);
  }
}

TEST_CASE("memory timeline SVG: five stacked kinds, the budget, store-all, at most a point per column",
          "[schedule][timeline]") {
  const Profile prof = estimated("resnet50", 2, Shape{3, 32, 32});
  TimelineChart chart;
  chart.title = "resnet50 <b2> & \"sqrtn\"";
  SolveOptions o;
  o.mode = "sqrtn";
  const SolveOutcome sq = solve(prof.plan, o);
  chart.schedule = memory_timeline(prof.plan, sq.schedule);
  chart.store_all = memory_timeline(prof.plan, lean_store_all_schedule(prof.plan));
  chart.budget_bytes = sq.predicted.peak_bytes + 1000;
  const std::string svg = memory_timeline_svg(chart);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.size() >= 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<polygon class=\"area\"") == kMemoryKinds);
  CHECK(count(svg, "<polyline class=\"line\"") == 1);  // store-all
  CHECK(count(svg, "<line class=\"hline\"") == 1);     // the budget
  CHECK(count(svg, "<line class=\"vline\"") == 1);     // backward begins
  CHECK_THAT(svg, Contains("resnet50 &lt;b2&gt; &amp; &quot;sqrtn&quot;"));
  for (int k = 0; k < kMemoryKinds; ++k) CHECK_THAT(svg, Contains(memory_kind_name(static_cast<MemoryKind>(k))));
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
  // Each area: 2 vertices per column on top and again on the bottom.
  const size_t at = svg.find("<polygon class=\"area\"");
  const std::string first = svg.substr(at, svg.find("</polygon>", at) - at);
  CHECK(count(first, ",") == 4 * chart.schedule.size());

  // More steps than columns: each column draws the step with the most bytes in use.
  std::vector<MemoryPoint> many;
  for (int i = 0; i < 5000; ++i) {
    MemoryPoint m;
    m.step = m.node = i;
    m.start_ms = i, m.end_ms = i + 1;
    m.bytes[static_cast<int>(MemoryKind::kept)] = i == 2777 ? 9'000'000'000 : 1'000'000'000 + i;
    many.push_back(m);
  }
  const std::string dense = memory_timeline_svg({"dense", 0, many, {}});
  const size_t a = dense.find("<polygon class=\"area\"");
  CHECK(count(dense.substr(a, dense.find("</polygon>", a) - a), ",") <= 4 * 900);
  CHECK(count(dense, "<line class=\"hline\"") == 0);  // no budget
  CHECK_THAT(dense, Contains(">10<"));                 // the y axis reaches the 9 GB column's peak

  chart.schedule.clear();
  CHECK_THROWS_WITH(memory_timeline_svg(chart), Contains("no compute steps"));
}

TEST_CASE("chart ticks are round and cover the range, and text is escaped", "[svg]") {
  const std::vector<double> t = nice_ticks(0, 0.27);
  REQUIRE(t.size() >= 2);
  CHECK(t.front() == 0);
  CHECK(t.back() >= 0.27);
  CHECK(t[1] - t[0] == Approx(0.05));
  const std::vector<double> u = nice_ticks(3.2, 3317);
  CHECK(u.front() == 0);
  CHECK(u[1] - u[0] == Approx(1000));
  CHECK(u.back() >= 3317);
  CHECK(svg_escape("a<b & \"c\">") == "a&lt;b &amp; &quot;c&quot;&gt;");
  SvgChart c("t", "x", "y");
  CHECK_THROWS_WITH(c.x_range(1, 1), Contains("empty x range"));
  CHECK_THROWS_WITH(c.area({0, 1}, {0}, {1, 2}, "red", "a"), Contains("area lengths differ"));
}

TEST_CASE("frontier: budgets from the smallest found to store-all's peak, overhead never rising with the budget",
          "[solve][frontier]") {
  const Profile prof = estimated("tiny", 8);
  SolveOptions o;
  o.mode = "full";  // checkpoint mode's defaults cannot all reach the lean store-all's peak without recomputing
  o.time_limit_s = kNoClock;  // tiny's programs are proven optimal: the verdict does not depend on the machine
  o.threads = 1;
  int seen = 0;
  const Frontier f = solve_frontier(prof.plan, o, 4, [&](const FrontierPoint&) { ++seen; });
  CHECK(seen == 4);
  REQUIRE(f.points.size() == 4);
  CHECK(f.points.front().budget_bytes == f.smallest_found_bytes);
  CHECK(f.points.back().budget_bytes == f.store_all_peak_bytes);
  CHECK(f.lower_bound_bytes <= f.smallest_found_bytes);
  for (size_t i = 0; i < f.points.size(); ++i) {
    const FrontierPoint& p = f.points[i];
    INFO("budget " << p.budget_bytes << " status " << p.outcome.status);
    REQUIRE(p.outcome.fits);  // every budget is at least a peak the heuristics reached
    REQUIRE(p.outcome.status == "optimal");
    CHECK(p.outcome.predicted.peak_bytes <= p.budget_bytes);
    CHECK(p.bound_overhead <= p.overhead + 1e-9);
    // Optimal schedules never get slower as the budget grows.
    if (i > 0) CHECK(p.overhead <= f.points[i - 1].overhead + 1e-9);
  }
  // At store-all's peak no slower than store-all (full mode may pick faster implementations than the lean store-all;
  // store-all itself is a schedule at that budget, and the warm start is never worse than it).
  CHECK(f.points.back().overhead <= 1e-12);
  const std::string svg = frontier_svg(f, "tiny");
  CHECK(count(svg, "<circle class=\"marker\"") == 4);
  CHECK(count(svg, "<line class=\"vline\"") == 2);
  CHECK_THROWS_WITH(solve_frontier(prof.plan, o, 1), Contains("at least 2 budgets"));
}

TEST_CASE("a rescaled profile offers a convolution over k slices only where k divides its batch",
          "[profile][derive][slices]") {
  // A measured profile of tiny at batch 4 whose first convolution recorded its default algorithm and the same over
  // 2 and 4 slices of the batch (each faster or leaner than the others, so none is dominated).
  Profile measured = estimated("tiny", 4);
  measured.device = "cuda";
  int conv = -1;
  for (size_t i = 0; i < measured.plan.nodes.size() && conv < 0; ++i)
    if (measured.plan.nodes[i].op == "Conv") conv = static_cast<int>(i);
  REQUIRE(conv >= 0);
  const PlanNode& c = measured.plan.nodes[static_cast<size_t>(conv)];
  auto entry = [&](int algo, int64_t slices, double ms, int64_t ws) {
    nlohmann::json e = {{"algo", algo}, {"status", "ok"}, {"deterministic", true}, {"time_ms", ms},
                        {"workspace_bytes", ws}, {"chosen_by_default", slices == 1}};
    if (slices > 1) e["slices"] = slices;
    return e;
  };
  measured.device_info["conv_algorithms"][c.name] = {
      {"algorithms",
       {entry(1, 1, c.time_ms, 4096), entry(2001, 2, 0.8 * c.time_ms, 2048), entry(4001, 4, 0.9 * c.time_ms, 1024)}}};
  auto offered = [](const Profile& p, const std::string& node) {
    std::vector<std::string> names;
    const PlanNode& n = p.plan.nodes[static_cast<size_t>(p.plan.find_node(node))];
    for (int k = 0; k < n.num_impls(); ++k) names.push_back(n.impl_name(k));
    return names;
  };
  for (const auto& [batch, want] : std::vector<std::pair<int64_t, std::vector<std::string>>>{
           {12, {"default", "cudnn1/2", "cudnn1/4"}}, {6, {"default", "cudnn1/2"}}, {3, {"default"}}}) {
    ImportOptions io;
    io.batch = batch;
    const TrainingGraph tg = build_training_graph(import_onnx(model_path("tiny"), io), TrainOptions{});
    const Profile r = rescale_profile(tg, measured, "m.json");
    INFO("batch " << batch);
    CHECK(offered(r, c.name) == want);
    const nlohmann::json& kept = r.device_info["conv_algorithms"][c.name]["algorithms"];
    CHECK(kept.size() == want.size());
  }
}

TEST_CASE("a measured profile rescaled to another batch: batch-bound work scales, updates do not", "[profile][derive]") {
  Profile measured = estimated("tiny", 4);
  measured.device = "cuda";
  for (PlanNode& n : measured.plan.nodes) {
    n.workspace_bytes += 1024;
    for (PlanImpl& im : n.impls) im.workspace_bytes = n.workspace_bytes;
  }
  ImportOptions io;
  io.batch = 12;
  const TrainingGraph tg = build_training_graph(import_onnx(model_path("tiny"), io), TrainOptions{});
  const Profile r = rescale_profile(tg, measured, "m.json");
  CHECK(r.batch == 12);
  CHECK(r.plan.fingerprint == estimate_profile(tg, Roofline{}).plan.fingerprint);
  CHECK(r.device == "cuda");
  CHECK_THAT(r.device_info["derived"]["how"].get<std::string>(), Contains("rescaled from batch 4"));
  REQUIRE(r.plan.nodes.size() == measured.plan.nodes.size());
  int updates = 0;
  for (size_t i = 0; i < r.plan.nodes.size(); ++i) {
    const PlanNode &a = r.plan.nodes[i], &m = measured.plan.nodes[i];
    INFO(a.name);
    const double f = a.stage == Stage::update ? 1 : 3;
    updates += a.stage == Stage::update;
    CHECK(a.time_ms == Approx(f * m.time_ms));
    CHECK(a.workspace_bytes == static_cast<int64_t>(f * static_cast<double>(m.workspace_bytes)));
    for (int k = 1; k < a.num_impls(); ++k) CHECK(a.impl_ms(k) == Approx(f * m.impl_ms(k)));
  }
  CHECK(updates > 0);
  // The same batch: derive_profile's figures exactly.
  io.batch = 4;
  const TrainingGraph same = build_training_graph(import_onnx(model_path("tiny"), io), TrainOptions{});
  const Profile d = rescale_profile(same, measured, "m.json");
  for (size_t i = 0; i < d.plan.nodes.size(); ++i) CHECK(d.plan.nodes[i].time_ms == measured.plan.nodes[i].time_ms);
  // Another input shape: one error naming the file.
  io.input_shape = Shape{3, 24, 24};
  const TrainingGraph other = build_training_graph(import_onnx(model_path("tiny"), io), TrainOptions{});
  CHECK_THROWS_WITH(rescale_profile(other, measured, "m.json"), Contains("m.json: a profile of another model, input shape"));
}
