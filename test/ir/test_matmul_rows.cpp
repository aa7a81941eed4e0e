// The MatMul-rows rewrite (lib/ir/matmul_rows.h) on hand-built graphs: what it takes in (a Transpose that swaps two
// blocks of A's leading dims, before a MatMul with a 2-D B) and what it leaves (a transposed A read twice or
// returned, a perm that moves the last dim or is no block swap, a batched B); on bert_tiny, whose
// nn.MultiheadAttention (batch_first) swaps its input to (T, B, E) before the in-projection: no such Transpose
// left, the forward and gradients as the separate graph's, store-all's peak lower by the copies it kept; and the
// import mode a profile records.
#include <catch2/catch.hpp>

#include <map>

#include "engine/session.h"
#include "ir/add_node.h"
#include "ir/import_mode.h"
#include "ir/matmul_rows.h"
#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "ir/profile_import.h"
#include "ir/same_step.h"
#include "ops/op.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;

namespace {

enum class Variant { plain, four_d, read_twice, output_at, moves_last, no_swap, batched_b };

// x (2, 3, 4) @ W0 (4, 4) -> h, Transpose(h) -> at, at @ W1 -> y, Relu(y) the graph's output (4-D variants: x
// (2, 3, 2, 4)).
Graph swapped_linear(Variant v) {
  Graph g;
  g.model_name = "swapped_linear";
  const bool four = v == Variant::four_d || v == Variant::no_swap;
  const int x = g.add_value({.name = "x", .shape = four ? Shape{2, 3, 2, 4} : Shape{2, 3, 4}, .role = Role::input});
  const int w0 = g.add_value({.name = "w0", .shape = {4, 4}, .role = Role::param});
  const Shape w1_shape =
      v == Variant::moves_last ? Shape{3, 5} : v == Variant::batched_b ? Shape{3, 4, 5} : Shape{4, 5};
  const int w1 = g.add_value({.name = "w1", .shape = w1_shape, .role = Role::param});
  g.data_input = x;
  auto node = [&](const char* name, const char* op, std::vector<int> in, const char* out, Attrs a = {}) {
    return add_node(g, name, op, std::move(in), out, std::move(a));
  };
  Attrs perm;
  perm.set("perm", v == Variant::four_d       ? std::vector<int64_t>{2, 0, 1, 3}
                   : v == Variant::no_swap    ? std::vector<int64_t>{0, 2, 1, 3}
                   : v == Variant::moves_last ? std::vector<int64_t>{0, 2, 1}
                                              : std::vector<int64_t>{1, 0, 2});
  const int h = node("mm0", "MatMul", {x, w0}, "h");
  const int at = node("t", "Transpose", {h}, "at", perm);
  const int y = node("mm1", "MatMul", {at, w1}, "y");
  g.outputs = {node("relu", "Relu", {y}, "r")};
  if (v == Variant::read_twice) g.outputs.push_back(node("relu2", "Relu", {at}, "r2"));
  if (v == Variant::output_at) g.outputs.push_back(at);
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("a MatMul reads A as stored through a Transpose that swaps two blocks of its rows", "[import][matmul_rows]") {
  for (Variant v : {Variant::plain, Variant::four_d}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = swapped_linear(v);
    const Shape y_before = g.values[g.find_value("y")].shape;
    CHECK(std::string(matmul_rows_mode(g)) == "separate");
    REQUIRE(matmul_rows(g) == 1);
    CHECK(std::string(matmul_rows_mode(g)) == "fused");
    CHECK(op_counts(g) == std::map<std::string, int>{{"MatMul", 2}, {"Relu", 1}});
    const Node& mm = g.nodes[1];
    REQUIRE(mm.name == "mm1");
    CHECK(g.values[mm.inputs[0]].name == "h");
    CHECK(mm.attrs.ints("a_perm") == (v == Variant::four_d ? std::vector<int64_t>{2, 0, 1, 3}
                                                            : std::vector<int64_t>{1, 0, 2}));
    CHECK(g.find_value("at") < 0);
    CHECK(g.values[mm.outputs[0]].shape == y_before);
  }
}

TEST_CASE("a MatMul keeps a Transpose read elsewhere, moving A's last dim, of no block swap, or before a batched B",
          "[import][matmul_rows]") {
  for (Variant v : {Variant::read_twice, Variant::output_at, Variant::moves_last, Variant::no_swap,
                    Variant::batched_b}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = swapped_linear(v);
    const std::map<std::string, int> before = op_counts(g);
    CHECK(matmul_rows(g) == 0);
    CHECK(op_counts(g) == before);
  }
}

TEST_CASE("bert_tiny's in-projections read their batch-first input as stored: the same loss and gradients, no copy "
          "kept",
          "[import][matmul_rows]") {
  SessionOptions fused, separate;
  fused.model_path = separate.model_path = data_path("bert_tiny.onnx");
  fused.import.batch = separate.import.batch = 2;
  separate.import.matmul_rows = false;
  fused.store_all = separate.store_all = StoreAll::lean;  // the smallest peak: each graph's least kept
  auto a = open_session(fused);
  auto b = open_session(separate);
  const std::map<std::string, int> ops_a = op_counts(a->tg.graph), ops_b = op_counts(b->tg.graph);
  int swapped = 0;
  for (const Node& n : a->tg.graph.nodes) swapped += n.op == "MatMul" && n.attrs.has("a_perm");
  CHECK(swapped == 2);  // one in-projection per layer
  // Each in-projection's input Transpose and its gradient's Transpose are gone.
  CHECK(ops_b.at("Transpose") - (ops_a.count("Transpose") ? ops_a.at("Transpose") : 0) == 2 * swapped);
  CHECK(import_mode_of(a->tg.graph).matmul_rows == "fused");
  // Store-all no longer keeps the (T, B, E) copy of each layer's input from the forward to the backward.
  CHECK(a->predicted.peak_bytes < b->predicted.peak_bytes);
  check_same_step(*a, *b);
}

TEST_CASE("a profile records the MatMul-rows mode, and a run on it imports so", "[import][matmul_rows]") {
  ImportOptions separate;
  separate.batch = 2;
  separate.matmul_rows = false;
  auto s = session_on_profile_of("bert_tiny.onnx", separate);
  CHECK(std::string(matmul_rows_mode(s->tg.graph)) == "separate");
  CHECK(s->schedule.import.matmul_rows == "separate");
  CHECK(read_import_mode(nlohmann::json::object(), "f.json").matmul_rows == "separate");
}
