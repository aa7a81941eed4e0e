// Shape arithmetic folded at import (lib/ir/onnx_fold.cpp) on torch exports of issue 38: a segmentation head whose
// Resize sizes come from Slice(Shape(.)), the fold rules Slice, ReduceProd, Max, Min, Floor, Ceil, Neg, Abs, Less,
// Greater on a hand-built graph, and ReduceMax / CumSum / Trilu / Tile reaching the training graph.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "test_paths.h"
#include "train/training_graph.h"

using namespace monet;
using namespace monet::test;

namespace {

ImportOptions at(int64_t batch, Shape chw = {}) {
  ImportOptions o;
  o.batch = batch;
  if (!chw.empty()) o.input_shape = chw;
  return o;
}

}  // namespace

TEST_CASE("F.interpolate to a computed size: Resize's sizes fold from Slice(Shape(.))", "[import]") {
  for (const char* file : {"seg_head.onnx", "seg_head_opset17.onnx"}) {
    INFO(file);
    Graph g = import_onnx(data_path(file), at(2));
    CHECK(g.values[g.outputs[0]].shape == Shape{2, 2, 20, 28});
    std::map<std::string, int> ops = op_counts(g);
    CHECK(ops == std::map<std::string, int>{{"Add", 1}, {"Conv", 3}, {"Relu", 2}, {"Resize", 2}});
    std::vector<Shape> sizes;
    for (const Node& n : g.nodes)
      if (n.op == "Resize") {
        CHECK(n.attrs.s("mode") == "linear");
        CHECK(n.attrs.s("coordinate_transformation_mode") == "half_pixel");  // align_corners=False
        sizes.push_back(n.attrs.ints("sizes"));
      }
    CHECK(sizes == std::vector<Shape>{{2, 8, 10, 14}, {2, 2, 20, 28}});
    // The sizes follow the shapes of this import, not the export's: another input size resizes to it.
    Graph h = import_onnx(data_path(file), at(3, {3, 33, 47}));
    CHECK(h.values[h.outputs[0]].shape == Shape{3, 2, 33, 47});
    TrainingGraph tg = build_training_graph(std::move(g), {});
    CHECK(op_counts(tg.graph)["ResizeGrad"] == 2);
  }
}

TEST_CASE("fold rules: Slice with a negative step, ReduceProd, Max, Min, Floor, Ceil, Neg, Abs, Less, Greater",
          "[import]") {
  // Reshape(x, Concat(Max(N, 1), [8, 3], [8])) with every piece computed (scripts/make_test_models.py).
  Graph g = import_onnx(data_path("fold_shapes.onnx"), at(5));
  CHECK(g.values[g.outputs[0]].shape == Shape{5, 8, 3, 8});
  CHECK(op_counts(g) == std::map<std::string, int>{{"Reshape", 1}});
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].attrs.ints("shape") == std::vector<int64_t>{5, 8, 3, 8});
}

TEST_CASE("a LLaMA-style decoder: its bool mask sliced at import, masked_fill fused as an additive mask",
          "[import]") {
  // scripts/export_models.py llama_tiny: mask[:t, :t] is a Slice of a 2-D bool constant and a Cast (both folded),
  // the attention's mask Where(mask, -inf, scores).
  ImportOptions o = at(2);
  o.fuse_attention = false;
  o.split_slices = false;
  const Graph m = import_onnx(data_path("llama_tiny.onnx"), o);
  std::map<std::string, int> ops = op_counts(m);
  CHECK(ops["Where"] == 2);
  // rotate_half's halves of q and k (activations), cos[:t] and sin[:t] (float tables are sliced at run time)
  CHECK(ops["Slice"] == 12);
  CHECK(ops.count("Cast") == 0);
  CHECK(ops.count("Attention") == 0);
  for (const Node& n : m.nodes)
    if (n.op == "Where") {
      const Value& cond = m.values[n.inputs[0]];
      REQUIRE(cond.role == Role::constant);
      REQUIRE(cond.shape == Shape{64, 64});
      CHECK(cond.data[1] == 1);   // above the diagonal: masked
      CHECK(cond.data[64] == 0);  // below
    }
  o.fuse_attention = true;
  o.split_slices = true;
  const Graph g = import_onnx(data_path("llama_tiny.onnx"), o);
  ops = op_counts(g);
  CHECK(ops["Attention"] == 2);
  CHECK(ops["Split"] == 4);  // each rotate_half's two halves (split_slices.h)
  CHECK(ops["Slice"] == 4);  // cos[:t] and sin[:t] of each layer
  CHECK(ops.count("Where") == 0);
  CHECK(ops.count("Softmax") == 0);
  for (const Node& n : g.nodes)
    if (n.op == "Attention") {
      REQUIRE(n.inputs.size() == 4);
      const Value& mask = g.values[n.inputs[3]];
      REQUIRE(mask.role == Role::constant);
      REQUIRE(mask.shape == Shape{64, 64});
      CHECK(mask.data[1] == -HUGE_VAL);
      CHECK(mask.data[64] == 0.0);
      CHECK(mask.data[65] == 0.0);  // the diagonal
      CHECK(n.attrs.f("scale") == 4.0);  // Div by sqrt(16)
      CHECK(n.attrs.i("scale_divides") == 1);
    }
}

TEST_CASE("ReduceMax, CumSum, Trilu and Tile as torch exports them import and differentiate", "[import]") {
  Graph g = import_onnx(data_path("reduce_scan_ops.onnx"), at(2));
  CHECK(g.values[g.outputs[0]].shape == Shape{2, 5});
  std::map<std::string, int> ops = op_counts(g);
  CHECK(ops["ReduceMax"] == 1);
  CHECK(ops["CumSum"] == 1);
  CHECK(ops["Trilu"] == 2);
  CHECK(ops["Tile"] == 1);
  TrainingGraph tg = build_training_graph(std::move(g), {});
  std::map<std::string, int> all = op_counts(tg.graph);
  CHECK(all["ReduceMaxGrad"] == 1);
  CHECK(all["CumSum"] == 2);  // the forward and its gradient (reversed)
  CHECK(all["Trilu"] == 4);
  CHECK(all["TileGrad"] == 1);
}

TEST_CASE("fold rules: Trilu and Sqrt on constants", "[import]") {
  // c = Trilu(ones, k = 1, upper) + Trilu(ones, k = -1, lower) * Sqrt(9): 0 on the diagonal, 1 above, 3 below.
  Graph g = import_onnx(data_path("fold_trilu.onnx"), at(2));
  REQUIRE(op_counts(g) == std::map<std::string, int>{{"Mul", 1}});
  const Value& c = g.values[g.nodes[0].inputs[1]];
  REQUIRE(c.role == Role::constant);
  REQUIRE(c.shape == Shape{1, 3, 4});
  const std::vector<double> expected = {0, 1, 1, 1,   //
                                        3, 0, 1, 1,   //
                                        3, 3, 0, 1};  //
  CHECK(c.data == expected);
}

TEST_CASE("F.scaled_dot_product_attention as torch exports it: scales and causal mask folded, one Attention each",
          "[import]") {
  // scripts/make_test_models.py sdpa_forms: layer 1 causal with the default scale 1/sqrt(8) computed from Shape(q),
  // layer 2 with scale 0.3 and a key-padding bool mask; q and k each multiplied by the scale's square root.
  ImportOptions o = at(2);
  o.fuse_attention = false;
  std::map<std::string, int> ops = op_counts(import_onnx(data_path("sdpa_forms.onnx"), o));
  // Unfused, the scales and the causal mask are constants: no Sqrt, Trilu, Equal, Cast or Div runs.
  for (const char* folded : {"Sqrt", "Trilu", "Equal", "Cast", "Div"}) CHECK(ops.count(folded) == 0);
  CHECK(ops["Mul"] == 4);
  CHECK(ops["Softmax"] == 2);
  CHECK(ops["Where"] == 1);  // the bool mask input's additive form

  const Graph g = import_onnx(data_path("sdpa_forms.onnx"), at(2));
  ops = op_counts(g);
  CHECK(ops["Attention"] == 2);
  for (const char* gone : {"Softmax", "Mul", "Transpose", "Sqrt", "Trilu"}) CHECK(ops.count(gone) == 0);
  std::vector<const Node*> attention;
  for (const Node& n : g.nodes)
    if (n.op == "Attention") attention.push_back(&n);
  REQUIRE(attention.size() == 2);
  // The two square roots join into the product: the scale itself.
  CHECK(attention[0]->attrs.f("scale") == Approx(1.0 / std::sqrt(8.0)).epsilon(1e-12));
  CHECK(attention[1]->attrs.f("scale") == Approx(0.3).epsilon(1e-7));  // 0.3 as the file's float
  CHECK(attention[0]->attrs.i("scale_divides") == 0);
  REQUIRE(attention[0]->inputs.size() == 4);
  const Value& causal = g.values[attention[0]->inputs[3]];
  REQUIRE(causal.role == Role::constant);
  REQUIRE(causal.shape == Shape{8, 8});
  CHECK(causal.data[1] == -HUGE_VAL);  // above the diagonal
  CHECK(causal.data[8] == 0.0);        // below
  CHECK(causal.data[9] == 0.0);        // the diagonal
  REQUIRE(attention[1]->inputs.size() == 4);
  CHECK(g.values[attention[1]->inputs[3]].role != Role::constant);  // from the bool input, each step
}
