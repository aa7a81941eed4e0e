// The MatMul-transpose rewrite (lib/ir/matmul_transpose.h) on hand-built graphs: what it takes in (a 2-D weight's
// Transpose, with or without perm) and what it leaves (a transposed weight read twice or returned, another perm, a
// 3-D operand); on bert_tiny, whose Linears export as MatMul(x, Transpose(W)): no Transpose of a weight left, the
// forward and gradients as the separate graph's, store-all's peak lower by the weight copies it kept; and the
// import mode a profile records.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "engine/session.h"
#include "ir/add_node.h"
#include "ir/import_mode.h"
#include "ir/matmul_transpose.h"
#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "ir/profile_import.h"
#include "ir/same_step.h"
#include "ops/op.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;

namespace {

enum class Variant { plain, no_perm, read_twice, output_wt, other_perm, three_d };

// x (3, 4) @ Transpose(W (5, 4)) (or its variant), then Relu; Relu's output is the graph's.
Graph linear(Variant v) {
  Graph g;
  g.model_name = "linear";
  const Shape w_shape = v == Variant::three_d ? Shape{2, 5, 4} : v == Variant::other_perm ? Shape{4, 5} : Shape{5, 4};
  const Shape x_shape = v == Variant::three_d ? Shape{2, 3, 4} : Shape{3, 4};
  const int x = g.add_value({.name = "x", .shape = x_shape, .role = Role::input});
  const int w = g.add_value({.name = "w", .shape = w_shape, .role = Role::param});
  g.data_input = x;
  auto node = [&](const char* name, const char* op, std::vector<int> in, const char* out, Attrs a = {}) {
    return add_node(g, name, op, std::move(in), out, std::move(a));
  };
  Attrs perm;  // other_perm: W stored (4, 5) and an identity Transpose, which moves nothing to take in
  if (v == Variant::three_d) perm.set("perm", std::vector<int64_t>{0, 2, 1});
  else if (v == Variant::other_perm) perm.set("perm", std::vector<int64_t>{0, 1});
  else if (v != Variant::no_perm) perm.set("perm", std::vector<int64_t>{1, 0});
  const int wt = node("t", "Transpose", {w}, "wt", perm);
  const int y = node("mm", "MatMul", {x, wt}, "y");
  g.outputs = {node("relu", "Relu", {y}, "r")};
  if (v == Variant::read_twice) g.outputs.push_back(node("relu2", "Relu", {wt}, "r2"));
  if (v == Variant::output_wt) g.outputs.push_back(wt);
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("a MatMul reads a 2-D weight's Transpose as the weight stored", "[import][matmul_transpose]") {
  for (Variant v : {Variant::plain, Variant::no_perm}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = linear(v);
    CHECK(std::string(matmul_transpose_mode(g)) == "separate");
    REQUIRE(matmul_transpose(g) == 1);
    CHECK(std::string(matmul_transpose_mode(g)) == "fused");
    CHECK(op_counts(g) == std::map<std::string, int>{{"MatMul", 1}, {"Relu", 1}});
    const Node& mm = g.nodes[0];
    CHECK(g.values[mm.inputs[1]].name == "w");
    CHECK(mm.attrs.i("trans_b") == 1);
    CHECK(g.find_value("wt") < 0);
    CHECK(g.values[mm.outputs[0]].shape == Shape{3, 5});
  }
}

TEST_CASE("a MatMul keeps the Transpose of a weight read elsewhere, of another perm or of 3-D",
          "[import][matmul_transpose]") {
  for (Variant v : {Variant::read_twice, Variant::output_wt, Variant::other_perm, Variant::three_d}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = linear(v);
    const std::map<std::string, int> before = op_counts(g);
    CHECK(matmul_transpose(g) == 0);
    CHECK(op_counts(g) == before);
  }
}

TEST_CASE("bert_tiny's Linears read their weights as stored: the same loss and gradients, no weight copies kept",
          "[import][matmul_transpose]") {
  SessionOptions fused, separate;
  fused.model_path = separate.model_path = data_path("bert_tiny.onnx");
  fused.import.batch = separate.import.batch = 2;
  separate.import.matmul_transpose = false;
  // Without the loss-head fusion on both, which takes the classifier's MatMul into the loss's node.
  fused.import.fuse_loss_head = separate.import.fuse_loss_head = false;
  auto a = open_session(fused);
  auto b = open_session(separate);
  const std::map<std::string, int> ops_a = op_counts(a->tg.graph), ops_b = op_counts(b->tg.graph);
  int transposed = 0;
  for (const Node& n : a->tg.graph.nodes) transposed += n.op == "MatMul" && n.attrs.i("trans_b", 0) != 0;
  CHECK(transposed >= 4);
  // Each weight's Transpose and its gradient's Transpose are gone.
  CHECK(ops_b.at("Transpose") - (ops_a.count("Transpose") ? ops_a.at("Transpose") : 0) == 2 * transposed);
  CHECK(import_mode_of(a->tg.graph).matmul_transpose == "fused");
  // Store-all no longer keeps a transposed copy of each weight from the forward to the backward.
  CHECK(a->predicted.peak_bytes < b->predicted.peak_bytes);
  check_same_step(*a, *b);
}

TEST_CASE("a profile records the MatMul-transpose mode, and a run on it imports so", "[import][matmul_transpose]") {
  ImportOptions separate;
  separate.batch = 2;
  separate.matmul_transpose = false;
  auto s = session_on_profile_of("bert_tiny.onnx", separate);
  CHECK(std::string(matmul_transpose_mode(s->tg.graph)) == "separate");
  CHECK(s->schedule.import.matmul_transpose == "separate");
  CHECK(read_import_mode(nlohmann::json::object(), "f.json").matmul_transpose == "separate");
}
