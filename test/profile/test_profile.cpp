#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>

#include "core/error.h"
#include "core/json_io.h"
#include "engine/backend.h"
#include "engine/executor.h"
#include "ir/onnx_import.h"
#include "ops/op.h"
#include "profile/profile.h"
#include "schedule/schedule.h"
#include "solve/problem.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {

// bn_activation: the import's batch norm - activation fusion (its default: on).
TrainingGraph training_graph(const std::string& name, int64_t batch, std::optional<Shape> input_shape = {},
                             bool bn_activation = true) {
  ImportOptions o;
  o.batch = batch;
  o.input_shape = input_shape;
  o.fuse_bn_activation = bn_activation;
  return build_training_graph(import_onnx(model_path(name), o), TrainOptions{});
}

// A scratch file name under the build tree, removed when the test ends.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) : path(std::string(MONET_BINARY_DIR) + "/test_profile_" + name) {}
  ~TempFile() { std::remove(path.c_str()); }
  void write(const std::string& text) const { std::ofstream(path) << text; }
};

std::string read_error(const std::string& path) {
  try {
    read_profile(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The store-all peak counted apart from the simulator, by lifetimes: a transient value holds memory from its
// producer's node to its last reader's (its producer's when nothing reads it), under each node's implementation
// impl[n]; a node that may run in place over an input ending there (the first of PlanNode::in_place it reads, as
// store-all picks) holds that input's memory as its output; each node's workspace counts while it runs. The
// resident values hold theirs throughout.
int64_t store_all_peak_by_lifetimes(const PlanGraph& p, const std::vector<int>& impl) {
  const int N = static_cast<int>(p.nodes.size());
  std::vector<int> last(p.values.size(), -1);
  for (int n = 0; n < N; ++n) {
    for (int v : p.nodes[n].outputs) last[v] = std::max(last[v], n);
    for (int v : p.nodes[n].reads(impl[n])) last[v] = std::max(last[v], n);
  }
  int64_t resident = 0;
  for (const PlanValue& v : p.values) resident += v.resident ? v.bytes : 0;
  int64_t peak = resident;
  for (int n = 0; n < N; ++n) {
    const PlanNode& node = p.nodes[n];
    int64_t live = resident + align_up(node.impl_workspace(impl[n]));
    for (size_t v = 0; v < p.values.size(); ++v)
      if (!p.values[v].resident && p.values[v].producer >= 0 && p.values[v].producer <= n && last[v] >= n)
        live += p.values[v].bytes;
    const std::vector<int>& reads = node.reads(impl[n]);
    if (node.impl_in_place(impl[n]))
      for (int v : node.in_place)
        if (last[v] == n && std::find(reads.begin(), reads.end(), v) != reads.end()) {
          live -= p.values[v].bytes;  // output 0 takes over its memory
          break;
        }
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

TEST_CASE("conv flops: 2 * N * M * oH * oW * C * kH * kW, the same for both gradients", "[profile]") {
  // X (1, 3, 10, 10) * W (4, 3, 3, 3) -> Y (1, 4, 8, 8)
  Graph g;
  const int x = g.add_value({.name = "x", .shape = {1, 3, 10, 10}});
  const int w = g.add_value({.name = "w", .shape = {4, 3, 3, 3}});
  const int y = g.add_value({.name = "y", .shape = {1, 4, 8, 8}});
  const int dx = g.add_value({.name = "dx", .shape = {1, 3, 10, 10}});
  const int dw = g.add_value({.name = "dw", .shape = {4, 3, 3, 3}});
  Node conv{.name = "conv", .op = "Conv", .inputs = {x, w}, .outputs = {y}};
  Node grad_data{.name = "gd", .op = "ConvGradData", .inputs = {y, w}, .outputs = {dx}};
  grad_data.attrs.set("x_shape", Shape{1, 3, 10, 10});
  Node grad_weight{.name = "gw", .op = "ConvGradWeight", .inputs = {y, x}, .outputs = {dw}};
  grad_weight.attrs.set("w_shape", Shape{4, 3, 3, 3});
  const double expected = 2.0 * 1 * 4 * 8 * 8 * 3 * 3 * 3;
  CHECK(op_def("Conv").flops(g, conv) == expected);
  CHECK(op_def("ConvGradData").flops(g, grad_data) == expected);
  CHECK(op_def("ConvGradWeight").flops(g, grad_weight) == expected);

  // Gemm as nn.Linear exports it: A (2, 5), B (3, 5) with transB -> (2, 3): 2 * 2 * 3 * 5.
  const int a = g.add_value({.name = "a", .shape = {2, 5}});
  const int b = g.add_value({.name = "b", .shape = {3, 5}});
  const int out = g.add_value({.name = "out", .shape = {2, 3}});
  Node gemm{.name = "fc", .op = "Gemm", .inputs = {a, b}, .outputs = {out}};
  gemm.attrs.set("transB", int64_t{1});
  CHECK(op_def("Gemm").flops(g, gemm) == 2.0 * 2 * 3 * 5);

  // ConvTranspose is the data gradient of Y's conv: X (1, 4, 8, 8), W (4, 3, 3, 3) -> (1, 3, 10, 10), the same
  // MACs as the conv example above.
  const int t = g.add_value({.name = "t", .shape = {1, 3, 10, 10}});
  Node deconv{.name = "deconv", .op = "ConvTranspose", .inputs = {y, w}, .outputs = {t}};
  CHECK(op_def("ConvTranspose").flops(g, deconv) == expected);

  // MatMul with a broadcast batch: (2, 3, 4) @ (4, 5) -> (2, 3, 5): 2 * 2 * 3 * 4 * 5.
  const int ma = g.add_value({.name = "ma", .shape = {2, 3, 4}});
  const int mb = g.add_value({.name = "mb", .shape = {4, 5}});
  const int my = g.add_value({.name = "my", .shape = {2, 3, 5}});
  Node matmul{.name = "mm", .op = "MatMul", .inputs = {ma, mb}, .outputs = {my}};
  CHECK(op_def("MatMul").flops(g, matmul) == 2.0 * 2 * 3 * 4 * 5);
}

TEST_CASE("estimated profiles: every node timed, formulas applied, stages in order", "[profile]") {
  struct Case {
    const char* model;
    int64_t batch;
    std::optional<Shape> input_shape;
  };
  for (const Case& c : {Case{"tiny", 4, {}}, Case{"resnet50", 2, Shape{3, 64, 64}}}) {
    INFO(c.model);
    const TrainingGraph tg = training_graph(c.model, c.batch, c.input_shape);
    const Roofline roofline;
    const Profile p = estimate_profile(tg, roofline);
    REQUIRE(p.plan.nodes.size() == tg.graph.nodes.size());
    REQUIRE(p.costs.size() == p.plan.nodes.size());
    CHECK(p.device == "estimate");
    CHECK(p.batch == c.batch);
    CHECK(p.plan.fingerprint == fingerprint(tg));
    // Views that store-all runs in place launch nothing: estimated at 0 (tiny's Flatten and its ReshapeGrad).
    std::vector<char> free_view(p.plan.nodes.size(), 0);
    for (const Step& st : store_all_schedule(p.plan).steps)
      if (st.kind == Step::Kind::compute && st.in_place >= 0 && op_def(p.plan.nodes[st.id].op).view) free_view[st.id] = 1;
    int views = 0;
    for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
      const PlanNode& n = p.plan.nodes[i];
      INFO(n.name << " (" << n.op << ")");
      CHECK(p.costs[i].bytes_moved > 0);
      if (free_view[i]) {
        CHECK(n.time_ms == 0);
        ++views;
        continue;
      }
      CHECK(n.time_ms > 0);
      CHECK(n.time_ms >= roofline.kernel_overhead_us * 1e-3);
      // time = max(flops / peak, bytes / bandwidth) + overhead
      const double expected = std::max(p.costs[i].flops / (roofline.fp32_tflops * 1e9),
                                       p.costs[i].bytes_moved / (roofline.bandwidth_gbs * 1e6)) +
                              roofline.kernel_overhead_us * 1e-3;
      CHECK(n.time_ms == Approx(expected));
      if (n.op == "Conv") CHECK(p.costs[i].flops > numel(tg.graph.values[n.outputs[0]].shape));
    }
    CHECK(views >= 2);  // the Flatten before the classifier and its gradient
    const ProfileTotals t = profile_totals(p);
    CHECK(t.forward_ms > 0);
    CHECK(t.backward_ms > t.forward_ms * 0.5);
    CHECK(t.step_ms == Approx(t.forward_ms + t.backward_ms + t.update_ms));
    // The store-all peak is the engine's: simulate the bare graph with the CPU backend's workspace.
    auto backend = make_cpu_backend(4);
    const Graph& g = tg.graph;
    const SimResult sim = simulate(g, store_all_schedule(g), workspace_with(*backend, g, {}));
    // The lean store-all (its implementations chosen for the least peak) needs no more, and its peak is what the
    // lifetimes of its values add up to (counted without the simulator).
    CHECK(t.store_all_peak_bytes <= sim.peak_bytes);
    CHECK(t.store_all_peak_bytes == store_all_peak_by_lifetimes(p.plan, lean_store_all_impls(p.plan)));
    CHECK(t.store_all_peak_bytes <= store_all_peak_by_lifetimes(p.plan, std::vector<int>(p.plan.nodes.size(), 0)));
    CHECK(t.resident_bytes == p.plan.resident_bytes());
  }
}

// The store-all peak of a hand-made plan, summed by hand. In units of kAlignBytes: x 4 and w 1 resident; f0 (x, w ->
// a 8, workspace 100 bytes: 1 unit), f1 (a -> b 4), loss (b -> l 1, read by nothing), loss_grad (b -> gb 4), b1 (gb,
// a -> ga 8, workspace 1 byte: 1 unit), b0 (ga, x -> gw 1), update (w, gw). Live at each node: f0 5 + a 8 + 1 = 14;
// f1 5 + a + b = 17; loss 17 + l = 18; loss_grad 5 + a + b + gb = 21; b1 5 + a + gb + ga + 1 = 26; b0 5 + ga + gw
// = 14; update 5 + gw = 6.
TEST_CASE("profile totals: the store-all peak of a small plan is its bytes summed by hand", "[profile]") {
  Profile prof;
  PlanGraph& p = prof.plan;
  auto value = [&](const std::string& name, int units, bool resident) {
    p.values.push_back({name, units * kAlignBytes, resident, -1});
    return static_cast<int>(p.values.size()) - 1;
  };
  auto node = [&](const std::string& name, Stage st, std::vector<int> in, std::vector<int> out, int64_t ws = 0) {
    for (int v : out) p.values[v].producer = static_cast<int>(p.nodes.size());
    p.nodes.push_back({name, "Op", st, std::move(in), std::move(out), 1.0, ws});
  };
  const int x = value("x", 4, true), w = value("w", 1, true);
  const int a = value("a", 8, false), b = value("b", 4, false), l = value("l", 1, false);
  const int gb = value("gb", 4, false), ga = value("ga", 8, false), gw = value("gw", 1, false);
  node("f0", Stage::forward, {x, w}, {a}, 100);
  node("f1", Stage::forward, {a}, {b});
  node("loss", Stage::loss, {b}, {l});
  node("loss_grad", Stage::backward, {b}, {gb});
  node("b1", Stage::backward, {gb, a}, {ga}, 1);
  node("b0", Stage::backward, {ga, x}, {gw});
  node("update", Stage::update, {w, gw}, {});
  prof.costs.resize(p.nodes.size());
  const ProfileTotals t = profile_totals(prof);
  CHECK(t.resident_bytes == 5 * kAlignBytes);
  CHECK(t.store_all_peak_bytes == 26 * kAlignBytes);
  CHECK(t.step_ms == 7.0);
  CHECK(t.forward_ms == 3.0);  // the loss node counts as forward
}

TEST_CASE("profile json: round trip equal, fingerprint kept, totals written", "[profile]") {
  const TrainingGraph tg = training_graph("tiny", 4);
  Profile p = estimate_profile(tg, Roofline{});
  p.model_path = "models/tiny.onnx";
  TempFile f("roundtrip.json");
  write_profile(f.path, p);
  CHECK_FALSE(std::filesystem::exists(f.path + ".tmp"));
  const Profile q = read_profile(f.path);
  CHECK(q.plan.fingerprint == fingerprint(tg));
  CHECK(q.model == "tiny");
  CHECK(q.model_path == "models/tiny.onnx");
  CHECK(q.input_shape == p.input_shape);
  CHECK(q.plan.nodes.size() == p.plan.nodes.size());
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    CHECK(q.plan.nodes[i].time_ms == p.plan.nodes[i].time_ms);  // exact: doubles survive the text
    CHECK(q.plan.nodes[i].stage == p.plan.nodes[i].stage);
    CHECK(q.plan.nodes[i].inputs == p.plan.nodes[i].inputs);
    CHECK(q.costs[i].flops == p.costs[i].flops);
  }
  CHECK(profile_to_json(q) == profile_to_json(p));
  const nlohmann::json j = read_json(f.path);
  CHECK(j.at("format") == "monet-profile");
  CHECK(j.at("totals").at("store_all_peak_bytes").get<int64_t>() == profile_totals(p).store_all_peak_bytes);
}

TEST_CASE("read_profile rejects bad files with one line naming the file and the field", "[profile]") {
  const Profile p = estimate_profile(training_graph("tiny", 2), Roofline{});
  const nlohmann::json good = profile_to_json(p);
  TempFile f("bad.json");

  CHECK_THAT(read_error(f.path + ".missing"), Contains("bad.json.missing: no such file"));

  f.write("this is not json");
  CHECK_THAT(read_error(f.path), Contains("bad.json: invalid JSON"));

  nlohmann::json j = good;
  j["format"] = "monet-schedule";
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("bad.json: not a monet profile") && Contains("monet-schedule"));

  j = good;
  j["version"] = 99;
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("profile version 99"));

  j = good;
  j["nodes"][3]["inputs"][0] = 100000;
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("bad.json: nodes[3].inputs[0]: id 100000 out of range"));

  j = good;
  j["values"][5]["producer"] = 100000;
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("values[5].producer: id 100000 out of range"));

  j = good;
  j["nodes"][1].erase("time_ms");
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("nodes[1].time_ms: missing"));

  j = good;
  j["nodes"][0]["stage"] = "sideways";
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("nodes[0].stage: unknown stage 'sideways'"));

  j = good;
  j["nodes"][2]["workspace_bytes"] = "lots";
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("nodes[2].workspace_bytes: expected an integer"));

  // in_place: a transient input of output 0's bytes; the first node's first input is the (resident) data.
  j = good;
  size_t with = 0;
  while (with < j["nodes"].size() && !j["nodes"][with].contains("in_place")) ++with;
  REQUIRE(with < j["nodes"].size());  // tiny's Relu runs in place
  j["nodes"][0]["in_place"] = nlohmann::json::array({j["nodes"][0]["inputs"][0]});
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("nodes[0].in_place: value") && Contains("is not a transient input"));

  // Optional outputs: the op's (the engine's rule), taken from it where absent; a lean time only beside them.
  size_t relu = 0;
  while (relu < j["nodes"].size() && good["nodes"][relu]["op"] != "Relu") ++relu;
  REQUIRE(relu < j["nodes"].size());
  const std::string at = "nodes[" + std::to_string(relu) + "]";
  REQUIRE(good["nodes"][relu]["optional_outputs"] == nlohmann::json::array({good["nodes"][relu]["outputs"][1]}));
  REQUIRE(good["nodes"][relu].contains("lean_time_ms"));
  j = good;
  j["nodes"][relu]["optional_outputs"] = nlohmann::json::array({j["nodes"][relu]["outputs"][0]});
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains(at + ".optional_outputs: differ from op Relu's"));
  j = good;
  j["nodes"][relu]["optional_outputs"] = nlohmann::json::array({j["nodes"][0]["inputs"][0]});
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains(at + ".optional_outputs: value") && Contains("is not an output of the node"));
  j = good;
  j["nodes"][0]["lean_time_ms"] = 1.0;  // the first node is no Relu
  REQUIRE(good["nodes"][0]["op"] != "Relu");
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("nodes[0].lean_time_ms: only a node with optional outputs"));
  j = good;
  for (auto& node : j["nodes"]) node.erase("optional_outputs");  // a profile written before the field
  f.write(j.dump());
  CHECK(read_profile(f.path).plan.nodes[relu].optional_outputs == p.plan.nodes[relu].optional_outputs);
}

TEST_CASE("the host link: written when known, read back equal, bad figures refused", "[profile][host_link]") {
  Profile p = estimate_profile(training_graph("tiny", 2), Roofline{});
  CHECK_FALSE(p.host_link.has_value());
  CHECK_FALSE(profile_to_json(p).contains("host_link"));  // neither measured nor given: absent
  p.host_link = host_link_from_flag(50);
  CHECK(p.host_link->h2d_gbs == 50);
  CHECK(p.host_link->d2h_busy_gbs == 50);
  CHECK(p.host_link->source == "flag");
  TempFile f("link.json");
  write_profile(f.path, p);
  const Profile q = read_profile(f.path);
  REQUIRE(q.host_link.has_value());
  CHECK(to_json(*q.host_link) == to_json(*p.host_link));
  CHECK(profile_to_json(q) == profile_to_json(p));

  CHECK_THROWS_WITH(host_link_from_flag(0), Contains("--host-bandwidth must be a positive number of GB/s, got 0"));
  CHECK_THROWS_WITH(host_link_from_flag(-3), Contains("got -3"));
  const nlohmann::json good = profile_to_json(p);
  nlohmann::json j = good;
  j["host_link"]["d2h_gbs"] = 0;
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("link.json: host_link.d2h_gbs: expected a positive number, got 0"));
  j = good;
  j["host_link"].erase("h2d_busy_gbs");
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("host_link.h2d_busy_gbs: expected a number"));
  j = good;
  j["host_link"]["latency_us"] = -1;
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("host_link.latency_us: expected a non-negative number"));
  j = good;
  j["host_link"]["source"] = "guessed";
  f.write(j.dump());
  CHECK_THAT(read_error(f.path), Contains("host_link.source: expected measured or flag, got 'guessed'"));
}

TEST_CASE("measured CPU profile: every node timed, progress reported", "[profile]") {
  const TrainingGraph tg = training_graph("tiny", 4);
  int calls = 0, step_ends = 0;
  const Profile p = measure_profile_cpu(tg, 1, 2, [&](const ProfileProgress& at) {
    ++calls;
    if (at.step_done) {
      ++step_ends;
      CHECK(at.node == at.nodes);
    }
  });
  // One pass of 1 + 2 steps per implementation index (tiny has ReluGrad nodes: 3 implementations).
  int passes = 1;
  for (const PlanNode& n : p.plan.nodes) passes = std::max(passes, n.num_impls());
  CHECK(passes == 3);
  CHECK(step_ends == 3 * passes);
  CHECK(calls == 3 * passes * (static_cast<int>(tg.graph.nodes.size()) + 1));
  for (const PlanNode& n : p.plan.nodes)
    for (int i = 0; i < n.num_impls(); ++i) CHECK(n.impl_ms(i) > 0);
  CHECK(p.device == "cpu");
  CHECK(p.device_info.at("repeats") == 2);
  CHECK(p.plan.fingerprint == fingerprint(tg));
  for (const PlanNode& n : p.plan.nodes) {
    INFO(n.name);
    CHECK(n.time_ms > 0);
  }
  // Same graph, same sizes as the estimate: only the times differ. (The lean store-all breaks ties of peak by time,
  // so its peak may differ between measured and estimated times: the defaults' store-all is compared.)
  const Profile e = estimate_profile(tg, Roofline{});
  REQUIRE(p.plan.values.size() == e.plan.values.size());
  for (size_t v = 0; v < p.plan.values.size(); ++v) CHECK(p.plan.values[v].bytes == e.plan.values[v].bytes);
  CHECK(simulate(p.plan, store_all_schedule(p.plan)).peak_bytes == simulate(e.plan, store_all_schedule(e.plan)).peak_bytes);
  CHECK_THROWS_WITH(measure_profile_cpu(tg, 0, 0), Contains("--repeats must be positive"));
}

TEST_CASE("a node with optional outputs is timed both ways: written, and lean where no reader reads them",
          "[profile]") {
  // gpt2_tiny's Attention nodes write P only where AttentionGrad's `probs` reads it: pass 0 times them written,
  // pass 1 (recompute) lean. Its Relu-free MLP has no masks; tiny's Relu masks are read by ReluGrad's `mask` (pass 2).
  for (const char* model : {"../test/data/gpt2_tiny", "tiny"}) {
    INFO(model);
    const TrainingGraph tg = training_graph(model, 1);
    const Profile measured = measure_profile_cpu(tg, 0, 1);
    const Profile estimated = estimate_profile(tg, Roofline{});
    int lean = 0;
    for (size_t i = 0; i < measured.plan.nodes.size(); ++i) {
      const PlanNode& n = measured.plan.nodes[i];
      const std::vector<int>& optional = op_def(n.op).optional_outputs;
      REQUIRE(n.optional_outputs.size() == optional.size());
      for (size_t o = 0; o < optional.size(); ++o)
        CHECK(n.optional_outputs[o] == n.outputs[static_cast<size_t>(optional[o])]);
      if (optional.empty()) {
        CHECK(n.lean_ms == -1);
        continue;
      }
      INFO(n.name << " (" << n.op << ")");
      CHECK(n.lean_ms > 0);
      // The estimate leaves the optional outputs' bytes out.
      CHECK(estimated.plan.nodes[i].lean_ms > 0);
      CHECK(estimated.plan.nodes[i].lean_ms <= estimated.plan.nodes[i].time_ms);
      if (n.op == "Attention") CHECK(estimated.plan.nodes[i].lean_ms < estimated.plan.nodes[i].time_ms);
      ++lean;
    }
    CHECK(lean >= 2);
    // Written and read back.
    TempFile file(std::string("lean_") + (model[0] == '.' ? "gpt2" : model) + ".json");
    write_profile(file.path, measured);
    const Profile back = read_profile(file.path);
    for (size_t i = 0; i < measured.plan.nodes.size(); ++i) {
      CHECK(back.plan.nodes[i].optional_outputs == measured.plan.nodes[i].optional_outputs);
      CHECK(back.plan.nodes[i].lean_ms == measured.plan.nodes[i].lean_ms);
    }
  }
}

TEST_CASE("cuDNN algorithms become implementations: deterministic, not beaten in time and workspace, scaled",
          "[profile][algorithms]") {
  Profile p = estimate_profile(training_graph("tiny", 2), Roofline{});
  int conv = -1, fwd = -1;
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    if (p.plan.nodes[i].op == "ConvGradWeight" && conv < 0) conv = static_cast<int>(i);
    if (p.plan.nodes[i].op == "Conv" && fwd < 0) fwd = static_cast<int>(i);
  }
  REQUIRE(conv >= 0);
  REQUIRE(fwd >= 0);
  PlanNode& n = p.plan.nodes[static_cast<size_t>(conv)];
  n.time_ms = 0.4;
  n.workspace_bytes = 1024;
  auto entry = [](int algo, const char* status, bool det, double ms, int64_t ws, bool def = false) {
    nlohmann::json e = {{"algo", algo}, {"status", status}, {"deterministic", det}, {"workspace_bytes", ws},
                        {"chosen_by_default", def}};
    if (std::string(status) == "ok") e["time_ms"] = ms;
    return e;
  };
  const nlohmann::json list = nlohmann::json::array({
      entry(1, "ok", true, 1.0, 1024, true),      // the default
      entry(0, "ok", true, 2.0, 0),               // slower, no workspace: kept
      entry(2, "ok", true, 1.5, 512),             // kept
      entry(3, "ok", true, 3.0, 768),             // beaten by algorithm 2 in both
      entry(4, "ok", false, 0.5, 0),              // not deterministic
      entry(5, "CUDNN_STATUS_NOT_SUPPORTED", true, 0, 0),
      entry(2, "ok", true, 0.1, 0),               // algorithm 2's second entry (another math): not the one run
      entry(6, "ok", true, 0.9, 2048),            // faster, more workspace: kept
      entry(7, "ok", true, 1.0, 1024),            // ties the default: beaten
  });
  {  // A forward convolution's algorithms are choices too (the same for its forward pass and recomputations).
    PlanNode f = p.plan.nodes[static_cast<size_t>(fwd)];
    f.time_ms = 0.4;
    REQUIRE(add_algorithm_variants(f, list) == 3);
    CHECK(f.impls[1].algo == 0);
    CHECK(f.impls[1].time_ms == Approx(0.8));
    CHECK(f.impls[1].inputs == f.inputs);
    PlanNode other = f;
    other.impls.clear();
    other.stage = Stage::update;
    CHECK(add_algorithm_variants(other, list) == 0);  // only forward and backward nodes
  }
  REQUIRE(add_algorithm_variants(n, list) == 3);
  REQUIRE(n.impls.size() == 4);
  CHECK(n.impls[0].name == "default");
  CHECK(n.impls[0].algo == -1);
  const std::vector<std::tuple<int, double, int64_t>> want = {{0, 0.8, 0}, {2, 0.6, 512}, {6, 0.36, 2048}};
  for (size_t k = 0; k < want.size(); ++k) {
    const PlanImpl& v = n.impls[k + 1];
    CHECK(v.name == "cudnn" + std::to_string(std::get<0>(want[k])));
    CHECK(v.algo == std::get<0>(want[k]));
    CHECK(v.op_impl == 0);
    CHECK(v.time_ms == Approx(std::get<1>(want[k])));
    CHECK(v.workspace_bytes == std::get<2>(want[k]));
    CHECK(v.inputs == n.inputs);
    CHECK(n.impl_for(0, v.algo) == static_cast<int>(k + 1));
  }
  CHECK(n.impl_for(0, -1) == 0);
  CHECK(n.impl_for(0, 3) == -1);  // not offered: a schedule naming it is refused
  {  // Nondeterministic ones on request: algorithm 4 (fastest, no workspace) beats every other then.
    PlanNode open = p.plan.nodes[static_cast<size_t>(conv)];
    open.impls.clear();
    REQUIRE(add_algorithm_variants(open, list, true) == 1);
    CHECK(open.impls[1].algo == 4);
    CHECK(open.impls[1].time_ms == Approx(0.2));
    CHECK(open.impls[1].workspace_bytes == 0);
  }

  // Round trip, and a schedule that runs algorithm 0 there takes its workspace and time.
  TempFile f("algorithms.json");
  write_profile(f.path, p);
  const Profile q = read_profile(f.path);
  CHECK(profile_to_json(q) == profile_to_json(p));
  Schedule s = store_all_schedule(q.plan);
  Schedule lean = s;
  for (Step& st : lean.steps)
    if (st.kind == Step::Kind::compute && st.id == conv) st.algo = 0;
  const SimResult a = simulate(q.plan, s), b = simulate(q.plan, lean);
  CHECK(b.time_ms == Approx(a.time_ms + 0.4));
  CHECK(b.peak_bytes <= a.peak_bytes);
  for (Step& st : lean.steps)
    if (st.kind == Step::Kind::compute && st.id == conv) st.algo = 3;
  CHECK_THROWS_WITH(simulate(q.plan, lean), Contains("has no implementation 0 with algorithm 3"));

  // Bad variants: one line naming the field.
  const nlohmann::json good = profile_to_json(p);
  auto bad = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j["nodes"][static_cast<size_t>(conv)]["impls"]);
    f.write(j.dump());
    return read_error(f.path);
  };
  CHECK_THAT(bad([](nlohmann::json& im) { im[1]["runs"] = "fast"; }),
             Contains(".impls[1].runs: names no implementation listed before it: 'fast'"));
  CHECK_THAT(bad([](nlohmann::json& im) { im[2]["algorithm"] = 0; }),
             Contains(".impls[2]: a second variant of 'default' with algorithm 0"));
  CHECK_THAT(bad([](nlohmann::json& im) { im[1]["algorithm"] = -2; }), Contains(".impls[1].algorithm: must be >= 0"));
  CHECK_THAT(bad([](nlohmann::json& im) { im[1]["inputs"] = nlohmann::json::array({im[1]["inputs"][0]}); }),
             Contains(".impls[1].inputs: differ from those of 'default'"));
  CHECK_THAT(bad([](nlohmann::json& im) {
               nlohmann::json plain = im[0];
               plain["name"] = "other";
               im.push_back(plain);
             }),
             Contains("an implementation after an algorithm variant"));
}

TEST_CASE("batch norm's own kernels become implementations beside cuDNN's, after the output-activated gradient",
          "[profile][algorithms]") {
  CHECK(algorithm_name(kOwnAlgorithm) == "ours");
  // tiny's batch norms as separate nodes: a BatchNormGrad (a fused one's BatchNormActGrad has no cuDNN twin).
  Profile p = estimate_profile(training_graph("tiny", 2, {}, false), Roofline{});
  int fwd = -1, grad = -1;
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    if (p.plan.nodes[i].op == "BatchNormalization" && fwd < 0) fwd = static_cast<int>(i);
    if (p.plan.nodes[i].op == "BatchNormGrad" && grad < 0) grad = static_cast<int>(i);
  }
  REQUIRE(fwd >= 0);
  REQUIRE(grad >= 0);
  auto entry = [](int algo, double ms, int64_t ws, bool def) {
    return nlohmann::json{{"algo", algo}, {"status", "ok"}, {"deterministic", true}, {"workspace_bytes", ws},
                          {"chosen_by_default", def}, {"time_ms", ms}};
  };
  PlanNode& f = p.plan.nodes[static_cast<size_t>(fwd)];
  PlanNode& g = p.plan.nodes[static_cast<size_t>(grad)];
  REQUIRE(f.impls.empty());
  REQUIRE(g.impls.size() == 2);  // input- and output-activated
  const std::vector<int> g_input_reads = g.impls[0].inputs, g_output_reads = g.impls[1].inputs;
  f.time_ms = 1.0;
  g.time_ms = g.impls[0].time_ms = 2.0;
  const nlohmann::json list = nlohmann::json::array({entry(0, 0.5, 0, true), entry(kOwnAlgorithm, 0.125, 4096, false)});
  REQUIRE(add_algorithm_variants(f, list) == 1);
  REQUIRE(f.impls.size() == 2);
  CHECK(f.impls[1].name == "ours");
  CHECK(f.impls[1].algo == kOwnAlgorithm);
  CHECK(f.impls[1].time_ms == Approx(0.25));  // the node's time scaled by ours over cuDNN's
  CHECK(f.impls[1].workspace_bytes == 4096);
  // The gradient's variant runs the input-activated implementation, listed after the output-activated one.
  REQUIRE(add_algorithm_variants(g, list) == 1);
  REQUIRE(g.impls.size() == 3);
  CHECK(g.impls[1].inputs == g_output_reads);
  CHECK(g.impls[2].op_impl == 0);
  CHECK(g.impls[2].inputs == g_input_reads);
  CHECK(g.impls[2].time_ms == Approx(0.5));
  CHECK(g.impl_for(0, kOwnAlgorithm) == 2);
  CHECK(g.impl_for(1, -1) == 1);
  CHECK(g.impl_for(0, -1) == 0);
  CHECK_FALSE(g.impl_in_place(2));  // as the input-activated implementation it runs

  // Round trip; a schedule on both takes their times; the full-mode problem offers both choices.
  TempFile file("bn_algorithms.json");
  write_profile(file.path, p);
  const Profile q = read_profile(file.path);
  CHECK(profile_to_json(q) == profile_to_json(p));
  const Schedule s = store_all_schedule(q.plan);
  Schedule ours = s;
  for (Step& st : ours.steps)
    if (st.kind == Step::Kind::compute && (st.id == fwd || st.id == grad)) st.algo = kOwnAlgorithm;
  CHECK(simulate(q.plan, ours).time_ms == Approx(simulate(q.plan, s).time_ms - 0.75 - 1.5));
  const CheckpointProblem cp = make_problem(q.plan, 0, true);
  int fwd_choices = 0;
  for (int k = 0; k < cp.num_fwd(); ++k) fwd_choices += cp.num_fwd_impls(k) > 1 && cp.fwd_lean[k] < 0;  // not lean runs
  CHECK(fwd_choices == 1);
}

// A profile records each node's in-place options when it is made; refresh_in_place (monet-profile --rederive) sets
// them to what the ops allow now, and nothing else.
TEST_CASE("refreshing a profile's in-place options from the current ops", "[profile]") {
  const TrainingGraph tg = training_graph("tiny", 2);
  const Profile fresh = estimate_profile(tg, Roofline{});
  Profile old = fresh;
  int had = 0, loss_grad = -1;
  for (size_t i = 0; i < old.plan.nodes.size(); ++i) {
    PlanNode& n = old.plan.nodes[i];
    had += !n.in_place.empty();
    if (n.op == "SoftmaxCrossEntropyGrad") loss_grad = static_cast<int>(i);
    n.in_place.clear();  // as a profile made before any op ran in place
    for (PlanImpl& im : n.impls) im.in_place = !im.in_place;  // and every implementation's flag the other way round
  }
  REQUIRE(loss_grad >= 0);
  int with_impls = 0;  // nodes with implementations but no in-place option: changed by their flags alone
  for (const PlanNode& n : fresh.plan.nodes) with_impls += n.in_place.empty() && !n.impls.empty();
  CHECK(had > 1);
  CHECK(with_impls > 0);
  CHECK(refresh_in_place(old, tg, "p.json") == had + with_impls);
  CHECK(old.plan.nodes[static_cast<size_t>(loss_grad)].in_place.size() == 1);  // over the logits
  for (size_t i = 0; i < old.plan.nodes.size(); ++i) {
    CHECK(old.plan.nodes[i].in_place == fresh.plan.nodes[i].in_place);
    CHECK(old.plan.nodes[i].time_ms == fresh.plan.nodes[i].time_ms);
    REQUIRE(old.plan.nodes[i].impls.size() == fresh.plan.nodes[i].impls.size());
    for (size_t k = 0; k < old.plan.nodes[i].impls.size(); ++k)
      CHECK(old.plan.nodes[i].impls[k].in_place == fresh.plan.nodes[i].impls[k].in_place);
  }
  CHECK(refresh_in_place(old, tg, "p.json") == 0);
  CHECK(simulate(old.plan, store_all_schedule(old.plan)).peak_bytes ==
        simulate(fresh.plan, store_all_schedule(fresh.plan)).peak_bytes);
  CHECK_THROWS_WITH(refresh_in_place(old, training_graph("tiny", 4), "p.json"),
                    Contains("p.json: the profile is of another training graph"));
}

TEST_CASE("re-deriving algorithm choices from recorded timings: stale variants go, every recorded conv gets its own",
          "[profile][algorithms]") {
  Profile p = estimate_profile(training_graph("tiny", 2), Roofline{});
  int fwd = -1, grad = -1, relu_grad = -1;
  for (size_t i = 0; i < p.plan.nodes.size(); ++i) {
    const std::string& op = p.plan.nodes[i].op;
    if (op == "Conv" && fwd < 0) fwd = static_cast<int>(i);
    if (op == "ConvGradWeight" && grad < 0) grad = static_cast<int>(i);
    if (op == "ReluGrad" && relu_grad < 0) relu_grad = static_cast<int>(i);
  }
  REQUIRE(fwd >= 0);
  REQUIRE(grad >= 0);
  REQUIRE(relu_grad >= 0);
  const size_t relu_impls = p.plan.nodes[static_cast<size_t>(relu_grad)].impls.size();
  REQUIRE(relu_impls > 1);  // op implementations (saved-tensor choices) are not algorithm variants: they stay
  CHECK_THROWS_WITH(rederive_algorithm_variants(p, false, "p.json"), Contains("p.json: no algorithm timings"));

  auto entry = [](int algo, bool det, double ms, int64_t ws, bool def = false) {
    return nlohmann::json{{"algo", algo}, {"status", "ok"}, {"deterministic", det}, {"workspace_bytes", ws},
                          {"chosen_by_default", def}, {"time_ms", ms}};
  };
  nlohmann::json algos = nlohmann::json::object();
  algos[p.plan.nodes[static_cast<size_t>(fwd)].name] = {
      {"op", "Conv"}, {"algorithms", {entry(1, true, 1.0, 4096, true), entry(0, true, 2.0, 0)}}};
  algos[p.plan.nodes[static_cast<size_t>(grad)].name] = {
      {"op", "ConvGradWeight"}, {"algorithms", {entry(1, true, 1.0, 4096, true), entry(3, false, 0.5, 0)}}};
  p.device_info["conv_algorithms"] = algos;
  // A stale variant (as if from an earlier derivation) on the backward convolution.
  PlanNode& g = p.plan.nodes[static_cast<size_t>(grad)];
  g.impls = {{"default", g.inputs, g.time_ms, g.workspace_bytes}, {"cudnn7", g.inputs, 9.0, 0}};
  g.impls[1].op_impl = 0;
  g.impls[1].algo = 7;

  CHECK(rederive_algorithm_variants(p, false, "p.json") == 1);  // the forward conv's algorithm 0
  const PlanNode& f = p.plan.nodes[static_cast<size_t>(fwd)];
  REQUIRE(f.impls.size() == 2);
  CHECK(f.impls[1].algo == 0);
  CHECK(f.impls[1].time_ms == Approx(2.0 * f.time_ms));
  CHECK(g.impls.empty());  // the stale variant went; algorithm 3 is nondeterministic
  CHECK(p.plan.nodes[static_cast<size_t>(relu_grad)].impls.size() == relu_impls);
  CHECK(p.device_info["nondeterministic_algorithms_offered"] == false);

  CHECK(rederive_algorithm_variants(p, true, "p.json") == 2);  // on request, algorithm 3 too
  REQUIRE(g.impls.size() == 2);
  CHECK(g.impls[1].algo == 3);
  CHECK(p.plan.nodes[static_cast<size_t>(fwd)].impls.size() == 2);  // not doubled

  // The full-mode problem offers the forward choice (test_milp solves such problems against brute force).
  CheckpointProblem cp = make_problem(p.plan, 0, true);
  int with_choice = 0;
  for (int k = 0; k < cp.num_fwd(); ++k) with_choice += cp.num_fwd_impls(k) > 1 && cp.fwd_lean[k] < 0;  // not lean runs
  CHECK(with_choice == 1);
}

TEST_CASE("a profile of an earlier training graph is derived onto this one: times by node key, marked derived",
          "[profile][derive]") {
  const TrainingGraph tg = training_graph("tiny", 2);
  const Profile now = estimate_profile(tg, Roofline{});
  // The "measured" profile: the same model on an earlier graph whose backward nodes carried other counters (as
  // when autodiff emitted a conv's data gradient before its weight gradient), with times of its own.
  Profile measured = now;
  measured.device = "cuda";
  measured.plan.fingerprint = "0123456789abcdef";
  int renamed = 0, conv = -1;
  for (size_t i = 0; i < measured.plan.nodes.size(); ++i) {
    PlanNode& n = measured.plan.nodes[i];
    n.set_impl_ms(0, 0.25 * static_cast<double>(i + 1));
    for (int k = 1; k < n.num_impls(); ++k) n.set_impl_ms(k, 0.25 * static_cast<double>(i + 1) + k);
    n.workspace_bytes += 256;
    for (PlanImpl& im : n.impls) im.workspace_bytes = n.workspace_bytes;
    if (n.op == "ConvGradWeight" && conv < 0) conv = static_cast<int>(i);
    const size_t at = n.name.rfind("/grad/" + n.op);
    if (at == std::string::npos) continue;
    n.name = n.name.substr(0, at + 6 + n.op.size()) + std::to_string(10 + renamed++);  // same order, other counters
  }
  REQUIRE(renamed > 0);
  REQUIRE(conv >= 0);
  measured.device_info = {{"name", "cuda"},
                          {"conv_algorithms",
                           {{measured.plan.nodes[static_cast<size_t>(conv)].name,
                             {{"op", "ConvGradWeight"},
                              {"algorithms",
                               {{{"algo", 1}, {"status", "ok"}, {"deterministic", true}, {"workspace_bytes", 4096},
                                 {"chosen_by_default", true}, {"time_ms", 1.0}},
                                {{"algo", 0}, {"status", "ok"}, {"deterministic", true}, {"workspace_bytes", 0},
                                 {"time_ms", 2.0}}}}}}}}};

  const Profile d = derive_profile(tg, measured, "m.json");
  CHECK(d.plan.fingerprint == now.plan.fingerprint);
  CHECK(d.device == "cuda");
  CHECK(d.device_info["derived"]["from_fingerprint"] == "0123456789abcdef");
  REQUIRE(d.plan.nodes.size() == measured.plan.nodes.size());
  for (size_t i = 0; i < d.plan.nodes.size(); ++i) {
    INFO(d.plan.nodes[i].name);
    CHECK(d.plan.nodes[i].time_ms == measured.plan.nodes[i].time_ms);
    CHECK(d.plan.nodes[i].workspace_bytes == measured.plan.nodes[i].workspace_bytes);
    CHECK(d.plan.nodes[i].num_impls() == now.plan.nodes[i].num_impls() + (static_cast<int>(i) == conv ? 1 : 0));
    for (int k = 1; k < now.plan.nodes[i].num_impls(); ++k)
      CHECK(d.plan.nodes[i].impl_ms(k) == measured.plan.nodes[i].impl_ms(k));
  }
  // The recorded cuDNN timings follow their node to its new name and become its variants again.
  const PlanNode& g = d.plan.nodes[static_cast<size_t>(conv)];
  CHECK(d.device_info["conv_algorithms"].contains(g.name));
  REQUIRE(g.impls.size() == 2);
  CHECK(g.impls[1].algo == 0);
  CHECK(g.impls[1].time_ms == Approx(2.0 * g.time_ms));

  // Another model, or a node without a measured twin: one error naming the file.
  Profile other = measured;
  other.model = "resnet50";
  CHECK_THROWS_WITH(derive_profile(tg, other, "m.json"), Contains("m.json: a profile of another model") && Contains("resnet50"));
  Profile missing = measured;
  missing.plan.nodes[0].name = "renamed";
  CHECK_THROWS_WITH(derive_profile(tg, missing, "m.json"),
                    Contains("m.json: node '" + now.plan.nodes[0].name + "'") && Contains("no measured twin"));
}
