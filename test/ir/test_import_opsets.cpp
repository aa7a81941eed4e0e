// Models of opsets 18-23, which Debian's ONNX library (1.12, opsets to 17) cannot check: torch's dynamo exporter
// writes opset 18. The forms that changed after opset 17 (scripts/make_test_models.py sdpa_dynamo_forms,
// opset20_ops, attention_opset23): CastLike, an identity Dropout, ReduceMean's axes as an input, Split by
// num_outputs, Resize with axes, Gelu as one op, opset 23's Attention; and the refusals (an opset beyond 23, Gelu's
// tanh approximation, what Attention does beyond training one attention). Identity Dropouts
// (ImportOptions::drop_identity_dropout) dropped or kept. A malformed node, which the checker would refuse, gets
// one line from the importer's own check of its inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <numbers>

#include "engine/session.h"
#include "ir/import_at.h"
#include "ir/import_mode.h"
#include "ir/onnx_import.h"
#include "ir/one_node_model.h"
#include "ir/op_counts.h"
#include "same_step.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

TEST_CASE("scaled_dot_product_attention as the dynamo exporter writes it (opset 18): one Attention each",
          "[import]") {
  // CastLike of constants folds (the scale, the causal mask), the Dropout at dropout_p = 0 (inference mode, its
  // mask unread) becomes no node, so Softmax -> MatMul is the attention's pattern again.
  ImportOptions o = at(2);
  o.fuse_attention = false;
  std::map<std::string, int> ops = op_counts(import_onnx(data_path("sdpa_dynamo_forms.onnx"), o));
  for (const char* gone : {"CastLike", "Dropout", "Sqrt", "Trilu", "Equal", "Div", "Gather"}) {
    INFO(gone);
    CHECK(ops.count(gone) == 0);
  }
  CHECK(ops["Softmax"] == 2);
  CHECK(ops["Cast"] == 1);  // CastLike(keep, h) of the bool input, at run time

  const Graph g = import_onnx(data_path("sdpa_dynamo_forms.onnx"), at(2));
  ops = op_counts(g);
  CHECK(ops["Attention"] == 2);
  CHECK(ops.count("Softmax") == 0);
  CHECK(ops.count("Mul") == 1);  // the weighting by keep: the scales are in the Attentions
  // Every operand read where the export stored it: Q, V and O through their head Transposes, K^T through
  // Reshape (B H, T, d), Transpose (0, 2, 1), Reshape (B, H, d, T) and K's head Transpose.
  CHECK(ops.count("Transpose") == 0);
  std::vector<const Node*> attention;
  for (const Node& n : g.nodes)
    if (n.op == "Attention") attention.push_back(&n);
  REQUIRE(attention.size() == 2);
  CHECK(attention[0]->attrs.f("scale") == Approx(1.0 / std::sqrt(8.0)).epsilon(1e-12));
  CHECK(attention[1]->attrs.f("scale") == Approx(0.25).epsilon(1e-12));
  REQUIRE(attention[0]->inputs.size() == 4);  // the causal mask, a constant
  const Value& causal = g.values[attention[0]->inputs[3]];
  REQUIRE(causal.role == Role::constant);
  CHECK(causal.data[1] == -HUGE_VAL);
  CHECK(causal.data[8] == 0.0);
  CHECK(attention[1]->inputs.size() == 3);  // no mask
  for (const Node* a : attention) {
    CHECK(a->attrs.ints("q_perm") == std::vector<int64_t>{0, 2, 1, 3});  // Q (B, H, T, d) stored as (B, T, H, d)
    CHECK(a->attrs.ints("kt_perm") == std::vector<int64_t>{0, 2, 3, 1});  // K^T (B, H, d, T) from K's (B, T, H, d)
  }
}

TEST_CASE("opset 23's Attention becomes one fused Attention with its operands in place, and refuses in one line",
          "[import]") {
  // Rank 3 (B, T, H d) with two heads and is_causal; rank 4 with an explicit scale and a constant bool mask; the
  // same with a bool padding mask given at run time (its additive form through Where).
  const Graph g = import_onnx(data_path("attention_opset23.onnx"), at(2));
  const std::map<std::string, int> ops = op_counts(g);
  CHECK(ops.at("Attention") == 3);
  CHECK(ops.at("Where") == 1);
  CHECK(ops.count("Softmax") == 0);
  CHECK(ops.count("Transpose") == 1);  // the second's Q, K and V: one value read three times
  std::vector<const Node*> attention;
  for (const Node& n : g.nodes)
    if (n.op == "Attention") attention.push_back(&n);
  REQUIRE(attention.size() == 3);
  CHECK(attention[0]->attrs.f("scale") == Approx(0.5).epsilon(1e-12));  // 1 / sqrt(4)
  CHECK(attention[0]->attrs.ints("q_perm") == std::vector<int64_t>{0, 2, 1, 3});  // (B, T, H, d) read in place
  CHECK(attention[0]->attrs.ints("kt_perm") == std::vector<int64_t>{0, 2, 3, 1});
  CHECK(attention[0]->attrs.ints("o_perm") == std::vector<int64_t>{0, 2, 1, 3});
  REQUIRE(attention[0]->inputs.size() == 4);  // the causal mask
  const Value& causal = g.values[attention[0]->inputs[3]];
  CHECK(causal.shape == Shape{4, 4});
  CHECK(causal.data[1] == -HUGE_VAL);
  CHECK(causal.data[4] == 0.0);
  CHECK(attention[1]->attrs.f("scale") == Approx(0.3).epsilon(1e-6));
  REQUIRE(attention[1]->inputs.size() == 4);
  const Value& keep = g.values[attention[1]->inputs[3]];  // [1, 1, 0, 1] per row: key 2 masked
  CHECK(keep.data[2] == -HUGE_VAL);
  CHECK(keep.data[3] == 0.0);
  REQUIRE(attention[2]->inputs.size() == 4);
  CHECK(g.nodes[g.values[attention[2]->inputs[3]].producer].op == "Where");

  const auto attend = [](const std::vector<std::string>& inputs, const std::vector<onnx::AttributeProto>& attrs,
                         std::vector<int64_t> shape = {2, 4, 8}) {
    return import_onnx_bytes(one_node_model("Attention", inputs, 23, shape, attrs), "m.onnx", at(2));
  };
  const std::vector<std::string> qkv = {"x", "x", "x"};
  CHECK(op_counts(attend(qkv, {int_attr("q_num_heads", 2), int_attr("kv_num_heads", 2)})).at("Attention") == 1);
  CHECK(op_counts(attend(qkv, {}, {2, 3, 4, 5})).at("Attention") == 1);
  CHECK_THROWS_WITH(attend(qkv, {}), Contains("m.onnx: node 'n' (Attention): rank-3 inputs need q_num_heads and "
                                              "kv_num_heads"));
  CHECK_THROWS_WITH(attend(qkv, {int_attr("q_num_heads", 2), int_attr("kv_num_heads", 1)}),
                    Contains("node 'n' (Attention): 2 query heads against 1 key and value heads (grouped heads) is "
                             "not supported"));
  CHECK_THROWS_WITH(attend({"x", "x", "x", "", "x"}, {}, {2, 3, 4, 5}),
                    Contains("node 'n' (Attention): input 4 (a KV cache or its lengths) is not supported"));
  CHECK_THROWS_WITH(attend(qkv, {float_attr("softcap", 30)}, {2, 3, 4, 5}),
                    Contains("node 'n' (Attention): softcap 30 is not supported (0)"));
  CHECK_THROWS_WITH(attend({"x", "x"}, {}, {2, 3, 4, 5}),
                    Contains("node 'n' (Attention): expected inputs Q, K and V"));
}

TEST_CASE("opset 18-20 forms: Gelu, Split by num_outputs, Resize with axes, ReduceMean's axes input", "[import]") {
  const Graph g = import_onnx(data_path("opset20_ops.onnx"), at(2));
  CHECK(op_counts(g) == std::map<std::string, int>{{"Concat", 1}, {"Conv", 1},      {"Gelu", 1},  {"MatMul", 1},
                                                   {"ReduceMean", 3}, {"Resize", 1}, {"Split", 1}});
  CHECK(g.values[g.outputs[0]].shape == Shape{2, 3});
  for (const Node& n : g.nodes) {
    if (n.op == "Gelu") CHECK(n.attrs.f("divisor") == std::numbers::sqrt2);
    if (n.op == "Split") {
      REQUIRE(n.outputs.size() == 3);
      CHECK(g.values[n.outputs[0]].shape == Shape{2, 2, 6, 6});
      CHECK(g.values[n.outputs[1]].shape == Shape{2, 2, 6, 6});
      CHECK(g.values[n.outputs[2]].shape == Shape{2, 1, 6, 6});
    }
    if (n.op == "Resize") CHECK(g.values[n.outputs[0]].shape == Shape{2, 2, 12, 12});
    if (n.op == "ReduceMean") CHECK(g.values[n.outputs[0]].shape.size() == 2);
  }
}

TEST_CASE("opsets beyond 23 and Gelu's tanh approximation are refused with one line", "[import]") {
  CHECK_THROWS_WITH(import_onnx(data_path("opset24.onnx"), at(2)),
                    Contains("opset24.onnx: opset 24 is not supported (monet reads opsets 7-23)"));
  CHECK_THROWS_WITH(import_onnx(data_path("gelu_tanh.onnx"), at(2)),
                    Contains("node 'act' (Gelu): approximate 'tanh' is not supported"));
}

TEST_CASE("a node of a later opset with fewer inputs than its op needs is refused with one line", "[import]") {
  // ONNX's checker (opsets to 17) is skipped for these models; the importer checks each node against the newest
  // schema it knows instead. Found by the fuzzer: Gather with one input crashed the folding of shapes.
  const auto model = [](const std::string& op, const std::vector<std::string>& inputs) {
    return one_node_model(op, inputs, 18);
  };
  CHECK_NOTHROW(import_onnx_bytes(model("Reshape", {"x", "c"}), "m.onnx", at(2)));
  CHECK_THROWS_WITH(import_onnx_bytes(model("Gather", {"c"}), "m.onnx", at(2)),
                    Contains("m.onnx: node 'n' (Gather) has 1 inputs (needs at least 2)"));
  CHECK_THROWS_WITH(import_onnx_bytes(model("Reshape", {"", "c"}), "m.onnx", at(2)),
                    Contains("m.onnx: node 'n' (Reshape) leaves its required input 0 (data) unnamed"));
}

TEST_CASE("identity Dropouts dropped and kept train alike, the mode recorded and read", "[import]") {
  // bert_tiny's six Dropouts have ratio 0 in training mode (nn.Dropout(0.0) exported for training).
  SessionOptions dropped, kept;
  dropped.model_path = kept.model_path = data_path("bert_tiny.onnx");
  dropped.import.batch = kept.import.batch = 2;
  dropped.float_bytes = kept.float_bytes = 8;
  set_identity_dropout_mode(kept.import, "kept");
  auto a = open_session(dropped);
  auto b = open_session(kept);
  const std::map<std::string, int> ops_a = op_counts(a->tg.graph), ops_b = op_counts(b->tg.graph);
  CHECK(ops_a.count("Dropout") == 0);
  CHECK(ops_b.at("Dropout") == 6);
  CHECK(ops_b.at("DropoutGrad") == 6);
  CHECK(import_mode_of(a->tg.graph).identity_dropout == "dropped");
  CHECK(import_mode_of(b->tg.graph).identity_dropout == "kept");
  check_same_step(*a, *b);

  nlohmann::json j;
  write_import_mode(j, import_mode_of(b->tg.graph));
  CHECK(j.at("identity_dropout") == "kept");
  j.erase("identity_dropout");
  CHECK(read_import_mode(j, "f.json").identity_dropout == "kept");  // files written before the rewrite
  j["identity_dropout"] = "gone";
  CHECK_THROWS_WITH(read_import_mode(j, "f.json"), Contains("f.json: identity_dropout 'gone': expected dropped or kept"));
  ImportOptions o;
  CHECK_THROWS_WITH(set_identity_dropout_mode(o, "x"), Contains("--identity-dropout 'x': expected dropped or kept"));
}
