// InstanceNormalization and GroupNormalization at import: each becomes one LayerNorm over rows, with a per-channel
// (or per-group) Mul and Add only where the scale and bias are not constants of ones and zeros (onnx_translate.cpp
// convert_instance_norm, convert_group_norm); Softmax and LogSoftmax before opset 13, over the input flattened at
// the axis (convert_softmax_2d); Upsample and Resize before opset 11 as opset 11's Resize (convert_upsample);
// RMSNormalization (opset 23) as its formula's nodes (convert_rms_norm). Their values against
// PyTorch: ctests check_activations_norms_*, check_group_norm_ops_f64, check_softmax_opset11_f64,
// check_upsample_opset{7,9}_f64, check_resize_opset10_f64 and check_rms_norm_opset23_*.
#include <catch2/catch.hpp>

#include <map>

#include "ir/import_at.h"
#include "ir/one_node_model.h"
#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {

const Node* node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

}  // namespace

TEST_CASE("torch's GroupNorm and InstanceNorm exports become LayerNorms, the affine only where learned", "[import]") {
  const Graph g = import_onnx(data_path("activations_norms.onnx"), at(2));
  const std::map<std::string, int> ops = op_counts(g);
  CHECK(ops.count("InstanceNormalization") == 0);
  CHECK(ops.at("LayerNorm") == 3);  // GroupNorm's, InstanceNorm2d(affine)'s, InstanceNorm2d's
  // The GroupNorm's LayerNorm normalises (N, 4, 2 * 6 * 6) rows; the InstanceNorms' (N, 8, 6, 6) over (6, 6).
  int grouped = 0, spatial = 0;
  for (const Node& n : g.nodes) {
    if (n.op != "LayerNorm") continue;
    CHECK(n.attrs.i("axis") == 2);
    const Shape& x = g.values[n.inputs[0]].shape;
    grouped += x == Shape{2, 4, 72};
    spatial += x == Shape{2, 8, 6, 6};
    CHECK(g.values[n.inputs[1]].role == Role::constant);  // ones: no scale gradient
  }
  CHECK(grouped == 1);
  CHECK(spatial == 2);
  // The affine InstanceNorm scales and shifts by its parameters reshaped per channel; the plain one does not.
  const Node* mul = node_named(g, "/inorm/InstanceNormalization/mul");
  REQUIRE(mul);
  CHECK(g.values[mul->inputs[1]].shape == Shape{8, 1, 1});
  CHECK(node_named(g, "/inorm/InstanceNormalization/add"));
  CHECK_FALSE(node_named(g, "/plain/InstanceNormalization/mul"));
  CHECK_FALSE(node_named(g, "/plain/InstanceNormalization/add"));
  for (const char* act : {"LeakyRelu", "Elu", "Selu", "Softplus", "Abs"}) {
    INFO(act);
    CHECK(ops.count(act) == 1);
  }
}

TEST_CASE("GroupNormalization per channel and per group", "[import]") {
  const Graph g = import_onnx(data_path("group_norm_ops.onnx"), at(2));
  const std::map<std::string, int> ops = op_counts(g);
  CHECK(ops.count("GroupNormalization") == 0);
  CHECK(ops.at("LayerNorm") == 2);
  const Node* channel = node_named(g, "gn_channel");
  const Node* group = node_named(g, "gn_group");
  REQUIRE(channel);
  REQUIRE(group);
  CHECK(g.values[channel->inputs[0]].shape == Shape{2, 2, 144});
  CHECK(channel->attrs.f("epsilon") == Approx(1e-3));
  CHECK(g.values[group->inputs[0]].shape == Shape{2, 4, 72});
  // Opset 21's affine after the reshape back, per channel; opset 18's on the groups, before it.
  CHECK(g.values[node_named(g, "gn_channel/mul")->inputs[1]].shape == Shape{8, 1, 1});
  CHECK(g.values[node_named(g, "gn_group/mul")->inputs[1]].shape == Shape{4, 1});
  CHECK(g.values[g.outputs[0]].shape == Shape{2, 8, 6, 6});
}

TEST_CASE("InstanceNormalization and GroupNormalization refuse what they cannot normalise, in one line", "[import]") {
  const std::vector<std::string> in = {"x", "s", "b"};
  CHECK_NOTHROW(import_onnx_bytes(one_node_model("InstanceNormalization", in, 13, {2, 4, 5}, {}, 4), "m.onnx", at(2)));
  CHECK_THROWS_WITH(import_onnx_bytes(one_node_model("InstanceNormalization", in, 13, {2, 4}, {}, 4), "m.onnx", at(2)),
                    Contains("m.onnx: node 'n' (InstanceNormalization): X has shape [2,4]; InstanceNormalization "
                             "needs rank >= 3"));
  CHECK_THROWS_WITH(
      import_onnx_bytes(one_node_model("InstanceNormalization", in, 13, {2, 4, 5}, {}, 3), "m.onnx", at(2)),
      Contains("node 'n' (InstanceNormalization): input 1 has shape [3]; expected float [4]"));
  const auto groups = [&](int64_t g, int64_t channels) {
    return import_onnx_bytes(one_node_model("GroupNormalization", in, 21, {2, 6, 5}, {int_attr("num_groups", g)},
                                            channels),
                             "m.onnx", at(2));
  };
  CHECK(op_counts(groups(3, 6)).at("LayerNorm") == 1);
  CHECK(op_counts(groups(3, 3)).at("LayerNorm") == 1);  // opset 18's per-group scale
  CHECK_THROWS_WITH(groups(4, 6),
                    Contains("node 'n' (GroupNormalization): num_groups 4 does not divide the 6 channels"));
  CHECK_THROWS_WITH(groups(3, 2), Contains("node 'n' (GroupNormalization): input 1 has shape [2]; expected float [6]"));
}

TEST_CASE("RMSNormalization becomes its formula's nodes over the dims from its axis, and refuses in one line",
          "[import]") {
  const Graph g = import_onnx(data_path("rms_norm_opset23.onnx"), at(2));
  CHECK(op_counts(g) == std::map<std::string, int>{{"Add", 2}, {"Div", 2}, {"MatMul", 1}, {"Mul", 4},
                                                   {"ReduceMean", 2}, {"Sqrt", 2}});
  CHECK(g.values[node_named(g, "rms_last/mean_square")->outputs[0]].shape == Shape{2, 4, 1});
  CHECK(g.values[node_named(g, "rms_rows/mean_square")->outputs[0]].shape == Shape{2, 1, 1});
  CHECK(g.values[g.outputs[0]].shape == Shape{2, 4, 8});
  const auto rms = [](const std::vector<onnx::AttributeProto>& attrs, int64_t channels = 12) {
    return import_onnx_bytes(one_node_model("RMSNormalization", {"x", "s"}, 23, {2, 12}, attrs, channels), "m.onnx",
                             at(2));
  };
  CHECK(op_counts(rms({int_attr("axis", 1)})).at("ReduceMean") == 1);
  CHECK_THROWS_WITH(rms({int_attr("axis", 2)}),
                    Contains("m.onnx: node 'n' (RMSNormalization): axis 2 is out of range for X of shape [2,12]"));
  CHECK_THROWS_WITH(rms({int_attr("stash_type", 11)}),
                    Contains("node 'n' (RMSNormalization): stash_type 11 is not supported (1, float)"));
  CHECK_THROWS_WITH(import_onnx_bytes(one_node_model("RMSNormalization", {"x"}, 23), "m.onnx", at(2)),
                    Contains("node 'n' (RMSNormalization): expected inputs X and scale and one output Y"));
  CHECK_THROWS(rms({}, 5));  // a scale that does not broadcast to the normalised dims
}

TEST_CASE("Softmax and LogSoftmax before opset 13 normalise the input flattened at the axis", "[import]") {
  const Graph g = import_onnx(data_path("softmax_opset11.onnx"), at(2));
  const std::map<std::string, int> ops = op_counts(g);
  CHECK(ops.at("Reshape") == 4);  // around softmax_rows and log_softmax_rows; softmax_last is over the last dim
  CHECK(ops.at("Softmax") == 2);
  CHECK(ops.at("LogSoftmax") == 1);
  for (const char* name : {"softmax_rows", "log_softmax_rows", "softmax_last"}) {
    INFO(name);
    const Node* n = node_named(g, name);
    REQUIRE(n);
    CHECK(n->attrs.i("axis") == -1);
    CHECK(g.values[n->inputs[0]].shape == (std::string(name) == "softmax_last" ? Shape{2, 3, 4} : Shape{2, 12}));
  }
}

TEST_CASE("Upsample and Resize before opset 11 become opset 11's Resize, nearest as torch computes it", "[import]") {
  for (const char* file : {"upsample_opset7.onnx", "upsample_opset9.onnx", "resize_opset10.onnx"}) {
    INFO(file);
    const Graph g = import_onnx(data_path(file), at(2));
    const Node* up = node_named(g, "up");
    REQUIRE(up);
    CHECK(up->op == "Resize");
    CHECK(up->attrs.s("coordinate_transformation_mode") == "asymmetric");
    CHECK(up->attrs.s("nearest_mode") == "floor");
    CHECK(up->attrs.floats("scales") == std::vector<double>{1, 1, 2, 1.5});
    CHECK(g.values[up->outputs[0]].shape == Shape{2, 4, 8, 6});
  }
  const std::string linear = one_node_model("Resize", {"x", "s"}, 10, {2, 4, 5, 5}, {str_attr("mode", "linear")}, 4);
  CHECK_THROWS_WITH(import_onnx_bytes(linear, "m.onnx", at(2)),
                    Contains("node 'n' (Resize): mode 'linear' before opset 11 is not supported (nearest)"));
}
