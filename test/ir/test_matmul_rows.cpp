// The MatMul-rows rewrite (lib/ir/matmul_rows.h) on hand-built graphs: what it takes in (a Transpose that swaps two
// blocks of A's leading dims, before a MatMul with a 2-D B; a Gemm or MatMul followed by a Reshape that splits its
// rows and a Transpose that swaps two blocks of them) and what it leaves (values read twice or returned, a perm that
// moves the last dim or is no block swap, a batched B, a Gemm that is no row-wise product plus a bias); on
// bert_tiny, whose nn.MultiheadAttention (batch_first) swaps its input to (T, B, E) before the in-projection and the
// out-projection's result back after it: no such Transpose left, the forward and gradients as the separate graph's,
// store-all's peak lower by the copies it kept; and the import mode a profile records.
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

namespace {

enum class Out {
  gemm_reshaped_input, gemm_plain_input, matmul_resplit, four_d,                         // rewritten
  alpha, trans_a, beta, full_c, y_read_twice, split_output, moves_last, last_dim_split, batched_b  // left
};

// A product, a Reshape that splits its rows, a Transpose of the split rows, Relu the graph's output: a Gemm (W (5, 4)
// with transB, bias b (5)) of Reshape(x (2, 3, 4), (6, 4)) -> (2, 3, 5) -> perm (1, 0, 2), or the variant's change.
Graph linear_then_swap(Out v) {
  Graph g;
  g.model_name = "linear_then_swap";
  const Shape x_shape = v == Out::gemm_plain_input ? Shape{6, 4}
                        : v == Out::four_d         ? Shape{12, 4}
                        : v == Out::trans_a        ? Shape{4, 6}
                                                   : Shape{2, 3, 4};
  const int x = g.add_value({.name = "x", .shape = x_shape, .role = Role::input});
  g.data_input = x;
  const bool matmul = v == Out::matmul_resplit || v == Out::batched_b;
  const Shape w_shape = v == Out::gemm_plain_input ? Shape{4, 5}
                        : v == Out::batched_b      ? Shape{2, 4, 5}
                        : matmul                   ? Shape{4, 5}
                        : v == Out::last_dim_split ? Shape{6, 4}
                                                   : Shape{5, 4};
  const int w = g.add_value({.name = "w", .shape = w_shape, .role = Role::param});
  const Shape b_shape = v == Out::full_c ? Shape{6, 5} : v == Out::last_dim_split ? Shape{6} : Shape{5};
  const int b = g.add_value({.name = "b", .shape = b_shape, .role = Role::param});
  auto node = [&](const char* name, const char* op, std::vector<int> in, const char* out, Attrs a = {}) {
    return add_node(g, name, op, std::move(in), out, std::move(a));
  };
  auto shape_attrs = [](Shape s) {
    Attrs a;
    a.set("shape", std::move(s));
    return a;
  };
  int y;
  if (matmul) {
    y = node("gemm", "MatMul", {x, w}, "y");
  } else {
    int a = x;
    if (x_shape.size() == 3) a = node("flat", "Reshape", {x}, "a", shape_attrs({6, 4}));
    Attrs ga;
    if (v != Out::gemm_plain_input) ga.set("transB", int64_t{1});
    if (v == Out::alpha) ga.set("alpha", 0.5);
    if (v == Out::trans_a) ga.set("transA", int64_t{1});
    if (v == Out::beta) ga.set("beta", 2.0);
    std::vector<int> in = {a, w};
    if (v != Out::gemm_plain_input) in.push_back(b);
    y = node("gemm", "Gemm", in, "y", ga);
  }
  const Shape split = v == Out::four_d           ? Shape{2, 3, 2, 5}
                      : v == Out::matmul_resplit ? Shape{3, 2, 5}
                      : v == Out::last_dim_split ? Shape{2, 3, 3, 2}
                      : v == Out::batched_b      ? Shape{2, 3, 5}
                                                 : Shape{2, 3, 5};
  const int s = node("split", "Reshape", {y}, "s", shape_attrs(split));
  Attrs perm;
  perm.set("perm", v == Out::four_d           ? std::vector<int64_t>{2, 0, 1, 3}
                   : v == Out::last_dim_split ? std::vector<int64_t>{1, 0, 2, 3}
                   : v == Out::moves_last     ? std::vector<int64_t>{0, 2, 1}
                                              : std::vector<int64_t>{1, 0, 2});
  const int z = node("t", "Transpose", {s}, "z", perm);
  g.outputs = {node("relu", "Relu", {z}, "r")};
  if (v == Out::y_read_twice) g.outputs.push_back(node("relu2", "Relu", {y}, "r2"));
  if (v == Out::split_output) g.outputs.push_back(s);
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("a product followed by a Reshape and a Transpose of its rows writes them in that order",
          "[import][matmul_rows]") {
  for (Out v : {Out::gemm_reshaped_input, Out::gemm_plain_input, Out::matmul_resplit, Out::four_d}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = linear_then_swap(v);
    const Shape z_before = g.values[g.find_value("z")].shape;
    REQUIRE(matmul_rows(g) == 1);
    CHECK(std::string(matmul_rows_mode(g)) == "fused");
    const bool moved = v != Out::gemm_reshaped_input;  // a Reshape of x where no Reshape of x was before
    CHECK(op_counts(g) == (moved ? std::map<std::string, int>{{"MatMul", 1}, {"Relu", 1}, {"Reshape", 1}}
                                 : std::map<std::string, int>{{"MatMul", 1}, {"Relu", 1}}));
    const Node& mm = g.nodes[moved ? 1 : 0];
    REQUIRE(mm.name == "gemm");
    CHECK(mm.op == "MatMul");
    CHECK(mm.attrs.ints("a_perm") == (v == Out::four_d ? std::vector<int64_t>{2, 0, 1, 3}
                                                        : std::vector<int64_t>{1, 0, 2}));
    const bool gemm_t = v == Out::gemm_reshaped_input || v == Out::four_d;
    CHECK(mm.attrs.i("trans_b", 0) == (gemm_t ? 1 : 0));
    CHECK(mm.inputs.size() == (gemm_t ? 3u : 2u));
    CHECK(g.values[mm.outputs[0]].name == "z");
    CHECK(g.values[mm.outputs[0]].shape == z_before);
    CHECK(g.find_value("y") < 0);
    if (moved) {
      const Node& r = g.nodes[0];
      CHECK(r.name == "split");
      CHECK(r.op == "Reshape");
      CHECK(g.values[r.inputs[0]].name == "x");
      CHECK(g.values[mm.inputs[0]].name == "s");
      const Shape want = v == Out::four_d ? Shape{2, 3, 2, 4} : v == Out::matmul_resplit ? Shape{3, 2, 4}
                                                                                         : Shape{2, 3, 4};
      CHECK(g.values[r.outputs[0]].shape == want);
    } else {
      CHECK(g.values[mm.inputs[0]].name == "x");  // the Reshape of x and the split both gone
      CHECK(g.find_value("a") < 0);
      CHECK(g.find_value("s") < 0);
    }
    // Every node's outputs are what its op infers from its inputs.
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      std::vector<Shape> shapes;
      for (int o : g.nodes[i].outputs) shapes.push_back(g.values[o].shape);
      infer_node(g, static_cast<int>(i));
      for (size_t k = 0; k < shapes.size(); ++k) CHECK(g.values[g.nodes[i].outputs[k]].shape == shapes[k]);
    }
  }
}

TEST_CASE("a product keeps the Transpose after it where it is no row-wise product or the rows are read elsewhere",
          "[import][matmul_rows]") {
  for (Out v : {Out::alpha, Out::trans_a, Out::beta, Out::full_c, Out::y_read_twice, Out::split_output,
                Out::moves_last, Out::last_dim_split, Out::batched_b}) {
    INFO("variant " << static_cast<int>(v));
    Graph g = linear_then_swap(v);
    const std::map<std::string, int> before = op_counts(g);
    CHECK(matmul_rows(g) == 0);
    CHECK(op_counts(g) == before);
  }
}

TEST_CASE("bert_tiny's in- and out-projections read and write batch-first rows as stored: the same loss and "
          "gradients, no copy kept",
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
  CHECK(swapped == 4);  // one in-projection and one out-projection per layer
  // Each in-projection's input Transpose, each out-projection's output Transpose, and their gradients' are gone.
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
