// The LinearCrossEntropy op (lib/ops/linear_cross_entropy) against a direct computation of the product and the
// cross-entropy, both LinearCrossEntropyGrad implementations against finite differences, over chunks that divide
// the rows and chunks that do not; and the loss-head fusion (lib/ir/fuse_linear_loss) on the exported language
// models (the same step as the separate graph's) and on hand-made graphs it must leave alone.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "engine/session.h"
#include "ir/add_node.h"
#include "ir/fuse_linear_loss.h"
#include "ir/import_mode.h"
#include "ir/matmul_bias.h"
#include "ir/matmul_transpose.h"
#include "ir/op_counts.h"
#include "ir/same_step.h"
#include "op_harness.h"
#include "ops/op.h"
#include "schedule/plan.h"
#include "schedule/schedule.h"
#include "train/training_graph.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;

namespace {

using Doubles = std::vector<double>;

constexpr int64_t kB = 2, kT = 3, kD = 4, kV = 5;

// bias: a fourth input of shape (1, V), as the MatMul-bias rewrite leaves one.
OpCase head_case(bool trans_b, int64_t chunk_rows, bool bias = false) {
  OpCase c;
  c.op = "LinearCrossEntropy";
  c.attrs.set("chunk_rows", chunk_rows);
  if (trans_b) c.attrs.set("trans_b", int64_t{1});
  c.shapes = {{kB, kT, kD}, trans_b ? Shape{kV, kD} : Shape{kD, kV}, {kB, kT}};
  c.dtypes = {DType::f32, DType::f32, DType::i64};
  c.data = {random_values(c.shapes[0], 11), random_values(c.shapes[1], 12), {4, 0, 2, 1, 3, 2}};
  c.grad = {true, true, false};
  if (bias) {
    c.shapes.push_back({1, kV});
    c.dtypes.push_back(DType::f32);
    c.data.push_back(random_values(c.shapes[3], 13));
    c.grad.push_back(true);
  }
  c.num_outputs = 2;
  c.loss_outputs = {true, false};  // the logits take no gradient
  return c;
}

// Z = H W (or H W^T) [+ bias] and each row's log-sum-exp less its label's logit.
void reference(const OpCase& c, bool trans_b, Doubles& z, Doubles& losses) {
  const bool bias = c.data.size() == 4;
  const Doubles &h = c.data[0], &w = c.data[1];
  const int64_t R = kB * kT;
  z.assign(R * kV, 0);
  losses.assign(R, 0);
  for (int64_t r = 0; r < R; ++r) {
    double mx = -INFINITY;
    for (int64_t v = 0; v < kV; ++v) {
      double acc = bias ? c.data[3][v] : 0.0;
      for (int64_t d = 0; d < kD; ++d) acc += h[r * kD + d] * (trans_b ? w[v * kD + d] : w[d * kV + v]);
      z[r * kV + v] = acc;
      mx = std::max(mx, acc);
    }
    double sum = 0;
    for (int64_t v = 0; v < kV; ++v) sum += std::exp(z[r * kV + v] - mx);
    losses[r] = std::log(sum) + mx - z[r * kV + static_cast<int64_t>(c.data[2][r])];
  }
}

}  // namespace

TEST_CASE("LinearCrossEntropy: the product's rows' cross-entropies and the logits, in any chunks",
          "[ops][linear_cross_entropy]") {
  for (bool trans_b : {false, true})
    for (int64_t chunk : {1, 2, 4, 6, 100})
      for (bool bias : {false, true}) {
        INFO("trans_b " << trans_b << ", chunk_rows " << chunk << ", bias " << bias);
        const OpCase c = head_case(trans_b, chunk, bias);
        Doubles z, losses;
        reference(c, trans_b, z, losses);
        const OpResult r = run_forward(c);
        CHECK(r.shapes[0] == Shape{kB, kT});
        CHECK(r.shapes[1] == Shape{kB, kT, kV});
        check_relative(r.values[0], losses, 1e-12);
        check_relative(r.values[1], z, 1e-12);
      }
}

TEST_CASE("LinearCrossEntropyGrad: both implementations match finite differences, in any chunks",
          "[ops][linear_cross_entropy]") {
  for (bool trans_b : {false, true})
    for (int64_t chunk : {1, 4, 6})
      for (int impl : {0, 1})
        for (bool bias : {false, true}) {
          INFO("trans_b " << trans_b << ", chunk_rows " << chunk << ", implementation " << impl << ", bias "
                          << bias);
          OpCase c = head_case(trans_b, chunk, bias);
          c.backward_impl = impl;
          CHECK(gradient_error(c) < 1e-7);
        }
}

TEST_CASE("LinearCrossEntropy: bad operands and labels are one error naming the node",
          "[ops][linear_cross_entropy]") {
  OpCase c = head_case(false, 2);
  c.shapes[1] = {kD + 1, kV};
  CHECK_THROWS_WITH(run_forward(c), Catch::Contains("node") && Catch::Contains("does not multiply H"));
  c = head_case(false, 0);
  CHECK_THROWS_WITH(run_forward(c), Catch::Contains("chunk_rows must be >= 1"));
  c = head_case(false, 2);
  c.shapes[2] = {kB, kT + 1};
  c.data[2].push_back(0);
  CHECK_THROWS_WITH(run_forward(c), Catch::Contains("labels"));
  c = head_case(false, 2);
  c.data[2][3] = kV;
  CHECK_THROWS_WITH(run_forward(c), Catch::Contains("label 5 out of range [0, 5)"));
  c = head_case(false, 2, true);
  c.shapes[3] = {kV, 1};
  CHECK_THROWS_WITH(run_forward(c), Catch::Contains("bias [5,1] is not one value per class of 5"));
}

TEST_CASE("the loss head fused on the exported language models: the same loss and gradients, logits not kept",
          "[import][linear_cross_entropy]") {
  // bert_tiny's token classifier adds a bias: the fused node takes it in.
  for (const char* model : {"gpt2_tiny.onnx", "llama_tiny.onnx", "bert_tiny.onnx"}) {
    INFO(model);
    SessionOptions fused, separate;
    fused.model_path = separate.model_path = data_path(model);
    fused.import.batch = separate.import.batch = 2;
    separate.import.fuse_loss_head = false;
    auto a = open_session(fused);
    auto b = open_session(separate);
    const std::map<std::string, int> ops_a = op_counts(a->tg.graph), ops_b = op_counts(b->tg.graph);
    CHECK(ops_a.at("LinearCrossEntropy") == 1);
    CHECK(ops_a.at("LinearCrossEntropyGrad") == 1);
    CHECK(ops_a.count("SoftmaxCrossEntropy") == 0);
    CHECK(ops_b.count("LinearCrossEntropy") == 0);
    CHECK(ops_b.at("SoftmaxCrossEntropy") == 1);
    CHECK(import_mode_of(a->tg.graph).loss_head == "fused");
    CHECK(import_mode_of(b->tg.graph).loss_head == "separate");
    check_same_step(*a, *b);
  }
  CHECK(read_import_mode(nlohmann::json::object(), "f.json").loss_head == "separate");
}

TEST_CASE("the loss-head fusion leaves logits read elsewhere, rows read through a Transpose and 3-D weights",
          "[import][linear_cross_entropy]") {
  enum class Variant { plain, bias, read_twice, a_perm, three_d };
  for (Variant v : {Variant::plain, Variant::bias, Variant::read_twice, Variant::a_perm, Variant::three_d}) {
    INFO("variant " << static_cast<int>(v));
    Graph g;
    g.model_name = "head";
    const int x = g.add_value({.name = "x", .shape = {2, 3, 4}, .role = Role::input});
    const int w = g.add_value({.name = "w", .shape = v == Variant::three_d ? Shape{2, 4, 5} : Shape{4, 5},
                               .role = Role::param});
    const int labels = g.add_value({.name = "labels", .shape = {2, 3}, .dtype = DType::i64, .role = Role::label});
    g.data_input = x;
    Attrs a;
    if (v == Variant::a_perm) a.set("a_perm", std::vector<int64_t>{1, 0, 2});
    std::vector<int> in = {x, w};
    if (v == Variant::bias) in.push_back(g.add_value({.name = "b", .shape = {5}, .role = Role::param}));
    const int z = add_node(g, "mm", "MatMul", in, "z", a);
    if (v == Variant::read_twice) add_node(g, "relu", "Relu", {z}, "r");
    g.outputs = {z};
    const std::optional<int> losses = fuse_linear_loss(g, z, labels, 2 * 5 * 4);
    CHECK(losses.has_value() == (v == Variant::plain || v == Variant::bias));
    if (!losses) {
      CHECK(g.nodes[0].op == "MatMul");
      continue;
    }
    const Node& n = g.nodes[0];
    CHECK(n.op == "LinearCrossEntropy");
    CHECK(n.name == "mm");
    CHECK(n.outputs == std::vector<int>{*losses, z});
    CHECK(n.inputs.size() == (v == Variant::bias ? 4u : 3u));
    CHECK(n.inputs[2] == labels);
    if (v == Variant::bias) CHECK(g.values[n.inputs[3]].name == "b");
    CHECK(g.values[*losses].shape == Shape{2, 3});
    CHECK(n.attrs.i("chunk_rows") == 2);  // 40 bytes of logits a chunk, 20 a row
    CHECK(std::string(loss_head_mode(g)) == "fused");
  }
}

TEST_CASE("the loss-head fusion keeps the import modes of the MatMul it takes in: its trans_b and its bias",
          "[import][linear_cross_entropy]") {
  // The head the only MatMul that reads its weight as stored and takes a bias: after the fusion the graph still
  // says so, so that a profile or schedule of it imports to the same graph again.
  Graph g;
  g.model_name = "head";
  const int x = g.add_value({.name = "x", .shape = {2, 3, 4}, .role = Role::input});
  const int w = g.add_value({.name = "w", .shape = {5, 4}, .role = Role::param});
  const int b = g.add_value({.name = "b", .shape = {1, 1, 5}, .role = Role::param});
  const int labels = g.add_value({.name = "labels", .shape = {2, 3}, .dtype = DType::i64, .role = Role::label});
  g.data_input = x;
  Attrs a;
  a.set("trans_b", int64_t{1});
  const int z = add_node(g, "mm", "MatMul", {x, w, b}, "z", a);
  g.outputs = {z};
  CHECK(std::string(matmul_transpose_mode(g)) == "fused");
  CHECK(std::string(matmul_bias_mode(g)) == "fused");
  REQUIRE(fuse_linear_loss(g, z, labels).has_value());
  CHECK(g.nodes[0].op == "LinearCrossEntropy");
  CHECK(std::string(matmul_transpose_mode(g)) == "fused");
  CHECK(std::string(matmul_bias_mode(g)) == "fused");
}

TEST_CASE("the loss head fused: where the logits outweigh the rest, the lean store-all keeps none of them",
          "[import][linear_cross_entropy]") {
  // ids (2, 64) -> Gather of an embedding (1000, 16) -> MatMul with a head (16, 1000): logits of 512 KB in float.
  auto graph = [](bool fuse) {
    Graph g;
    g.model_name = "lm";
    g.fuse_loss_head = fuse;
    const int ids = g.add_value({.name = "ids", .shape = {2, 64}, .dtype = DType::i64, .role = Role::input});
    const int emb = g.add_value({.name = "emb", .shape = {1000, 16}, .role = Role::param});
    const int head = g.add_value({.name = "head", .shape = {16, 1000}, .role = Role::param});
    g.data_input = ids;
    const int x = add_node(g, "embed", "GatherIdx", {emb, ids}, "x");
    g.outputs = {add_node(g, "lm_head", "MatMul", {x, head}, "logits")};
    g.verify();
    return build_training_graph(g, TrainOptions{});
  };
  const TrainingGraph fused = graph(true), separate = graph(false);
  CHECK(op_counts(fused.graph).count("LinearCrossEntropy") == 1);
  CHECK(op_counts(separate.graph).count("LinearCrossEntropy") == 0);
  const PlanGraph pf = plan_of(fused.graph, nullptr, 4), ps = plan_of(separate.graph, nullptr, 4);
  const SimResult lean_f = simulate(pf, lean_store_all_schedule(pf)), lean_s = simulate(ps, lean_store_all_schedule(ps));
  const SimResult defaults_f = simulate(pf, store_all_schedule(pf));
  const int64_t logits = 2 * 64 * 1000 * 4;
  INFO("lean peaks: fused " << lean_f.peak_bytes << ", separate " << lean_s.peak_bytes << ", fused defaults "
                            << defaults_f.peak_bytes);
  // The separate graph holds the logits and their gradient (in place) from the head to its gradient; the fused one
  // a chunk of them at a time, in workspace (the whole rows here: one chunk is at most 128 MiB).
  CHECK(lean_f.peak_bytes < lean_s.peak_bytes);
  CHECK(lean_f.peak_bytes < defaults_f.peak_bytes);
  CHECK(defaults_f.peak_bytes - lean_f.peak_bytes >= logits - 4096);
}

TEST_CASE("the fused loss head: the gradient from the kept logits and from recomputed ones, the same bits",
          "[import][linear_cross_entropy]") {
  SessionOptions o;
  o.model_path = data_path("gpt2_tiny.onnx");
  o.import.batch = 2;
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  struct Step {
    double loss = 0;
    std::vector<std::vector<double>> momenta;  // after one step from zero: the gradients
    int64_t peak = 0, predicted = 0;
  };
  auto step = [&](const char* impl) {
    std::vector<int> impls(s->plan.nodes.size(), 0);
    int found = 0;
    for (size_t i = 0; i < s->plan.nodes.size(); ++i)
      if (s->plan.nodes[i].op == "LinearCrossEntropyGrad") {
        impls[i] = s->plan.nodes[i].find_impl(impl);
        REQUIRE(impls[i] >= 0);
        ++found;
      }
    REQUIRE(found == 1);
    const Schedule sched = store_all_schedule(s->plan, impls);
    Executor e(g, sched, *s->backend, 3);
    for (int v : resident_values(g)) e.set_value(v, s->initial[static_cast<size_t>(v)]);
    Step r;
    r.loss = e.step({s->tg.loss}).at(s->tg.loss).at(0);
    for (int v : resident_values(g))
      if (g.values[static_cast<size_t>(v)].role == Role::momentum) r.momenta.push_back(e.get_value(v));
    r.peak = e.arena().peak_bytes();
    r.predicted = simulate(s->plan, sched).peak_bytes;
    return r;
  };
  const Step kept = step("logits"), recomputed = step("recompute");
  CHECK(kept.loss == recomputed.loss);
  CHECK(kept.momenta == recomputed.momenta);
  CHECK(kept.peak == kept.predicted);
  CHECK(recomputed.peak == recomputed.predicted);
}
