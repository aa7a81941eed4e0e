// The MatMul-bias rewrite (lib/ir/matmul_bias.h) on hand-built graphs: what it takes in (a bias Add, either operand
// order, a (1, m) bias) and what it leaves (a product read twice or returned, a bias that is not one per column or
// is made after the product, Y + Y); on bert_tiny, whose Linears export as MatMul + Add: every such Add gone, the
// forward and gradients as the separate graph's; and the import mode a profile records.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "engine/session.h"
#include "ir/add_node.h"
#include "ir/import_mode.h"
#include "ir/matmul_bias.h"
#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "ir/profile_import.h"
#include "ir/same_step.h"
#include "ops/op.h"
#include "profile/profile.h"
#include "test_paths.h"
#include "train/training_graph.h"

using namespace monet;
using namespace monet::test;

namespace {

enum class Variant { plain, bias_first, row_bias, read_twice, output_y, column_bias, late_bias, y_plus_y };

// x (3, 4) @ W (4, 5), then Add with the bias b (5) (or its variant), then Relu; Relu's output is the graph's.
Graph linear(Variant v) {
  Graph g;
  g.model_name = "linear";
  const int x = g.add_value({.name = "x", .shape = {3, 4}, .role = Role::input});
  const int w = g.add_value({.name = "w", .shape = {4, 5}, .role = Role::param});
  const Shape bias_shape = v == Variant::row_bias ? Shape{1, 5} : v == Variant::column_bias ? Shape{3, 1} : Shape{5};
  int b = g.add_value({.name = "b", .shape = bias_shape, .role = Role::param});
  g.data_input = x;
  auto node = [&](const char* name, const char* op, std::vector<int> in, const char* out, Attrs a = {}) {
    return add_node(g, name, op, std::move(in), out, std::move(a));
  };
  const int y = node("mm", "MatMul", {x, w}, "y");
  if (v == Variant::late_bias) b = node("bias_relu", "Relu", {b}, "b_relu");
  const int z = node("add", "Add", v == Variant::bias_first ? std::vector<int>{b, y}
                                   : v == Variant::y_plus_y ? std::vector<int>{y, y}
                                                            : std::vector<int>{y, b},
                     "z");
  g.outputs = {node("relu", "Relu", {z}, "r")};
  if (v == Variant::read_twice) g.outputs.push_back(node("relu2", "Relu", {y}, "r2"));
  if (v == Variant::output_y) g.outputs.push_back(y);
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("a MatMul whose product a bias Add alone reads takes the bias", "[import][matmul_bias]") {
  for (Variant v : {Variant::plain, Variant::bias_first, Variant::row_bias}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = linear(v);
    CHECK(std::string(matmul_bias_mode(g)) == "separate");
    REQUIRE(matmul_bias(g) == 1);
    CHECK(std::string(matmul_bias_mode(g)) == "fused");
    CHECK(op_counts(g) == std::map<std::string, int>{{"MatMul", 1}, {"Relu", 1}});
    const Node& mm = g.nodes[0];
    CHECK(mm.name == "mm");
    REQUIRE(mm.inputs.size() == 3);
    CHECK(g.values[mm.inputs[2]].name == "b");
    CHECK(g.values[mm.outputs[0]].name == "z");  // the Add's value, made by the MatMul now
    CHECK(g.values[mm.outputs[0]].producer == 0);
    CHECK(g.find_value("y") < 0);
    CHECK(g.values[g.nodes[1].inputs[0]].name == "z");
  }
}

TEST_CASE("a MatMul keeps its Add where the product is read elsewhere or the bias is no bias",
          "[import][matmul_bias]") {
  for (Variant v : {Variant::read_twice, Variant::output_y, Variant::column_bias, Variant::late_bias,
                    Variant::y_plus_y}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = linear(v);
    const std::map<std::string, int> before = op_counts(g);
    CHECK(matmul_bias(g) == 0);
    CHECK(op_counts(g) == before);
    CHECK(std::string(matmul_bias_mode(g)) == "separate");
  }
}

TEST_CASE("bert_tiny's Linears take their biases: the same loss and gradients as the separate graph's",
          "[import][matmul_bias]") {
  SessionOptions fused, separate;
  fused.model_path = separate.model_path = data_path("bert_tiny.onnx");
  fused.import.batch = separate.import.batch = 2;
  separate.import.matmul_bias = false;
  // Without the MatMul-rows rewrite on both: with it the out-projections' Gemms become MatMuls with a bias too.
  fused.import.matmul_rows = separate.import.matmul_rows = false;
  // And without the loss-head fusion, which takes the classifier's MatMul and its bias into the loss's node.
  fused.import.fuse_loss_head = separate.import.fuse_loss_head = false;
  auto a = open_session(fused);
  auto b = open_session(separate);
  const std::map<std::string, int> ops_a = op_counts(a->tg.graph), ops_b = op_counts(b->tg.graph);
  int biased = 0;
  for (const Node& n : a->tg.graph.nodes) biased += n.op == "MatMul" && n.inputs.size() == 3;
  CHECK(biased >= 4);
  CHECK(ops_b.at("Add") - ops_a.at("Add") == biased);
  CHECK(ops_a.at("MatMul") == ops_b.at("MatMul"));
  CHECK(ops_a.at("ReduceSumTo") == ops_b.at("ReduceSumTo"));  // each bias's gradient, as before
  CHECK(import_mode_of(a->tg.graph).matmul_bias == "fused");
  CHECK(import_mode_of(b->tg.graph).matmul_bias == "separate");
  // One step each from the file's parameters: the product accumulated onto the bias equals the Add after it to
  // rounding (BLAS may add into Y once per block of k).
  check_same_step(*a, *b);
}

TEST_CASE("a profile records the MatMul-bias mode, and a run on it imports so", "[import][matmul_bias]") {
  ImportOptions separate;
  separate.batch = 2;
  separate.matmul_bias = false;
  auto s = session_on_profile_of("bert_tiny.onnx", separate);
  CHECK(std::string(matmul_bias_mode(s->tg.graph)) == "separate");
  CHECK(s->schedule.import.matmul_bias == "separate");
  // A file without the field was written before the rewrite: it imports without it; a bad value is refused.
  nlohmann::json j = {{"attention", "fused"}};
  CHECK(read_import_mode(j, "f.json").matmul_bias == "separate");
  j["matmul_bias"] = "maybe";
  CHECK_THROWS_WITH(read_import_mode(j, "f.json"), "f.json: matmul_bias 'maybe': expected fused or separate");
}
