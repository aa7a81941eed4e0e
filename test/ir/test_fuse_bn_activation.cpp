// The batch norm - activation fusion at import (lib/ir/fuse_bn_activation.h): which pairs fuse and how the graph
// looks after, the same training step as the separate pairs on ResNet-50 (ReLU), MobileNetV2's ReLU6 Clips all
// fused, and the import mode's field and flag.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <optional>

#include "add_node.h"
#include "engine/session.h"
#include "ir/fuse_bn_activation.h"
#include "ir/import_mode.h"
#include "ir/onnx_import.h"
#include "op_counts.h"
#include "ops/common/plans.h"
#include "same_step.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;

namespace {

struct Built {
  Graph g;
  int bn_y = -1, act_out = -1;
};

// x (2, 3, 6, 6) -> Conv (3 -> 4, 3x3, pad 1) -> BatchNormalization -> `act` (Relu, Clip with attributes `clip`, or
// any unary op) -> Conv (4 -> 2) -> y, a graph output. `second_reader`: an Add also reads the batch norm's Y (its
// output another graph output); `bn_y_output`: the batch norm's Y is a graph output.
Built bn_act(const std::string& act, Attrs clip = {}, bool second_reader = false, bool bn_y_output = false) {
  Built b;
  Graph& g = b.g;
  g.model_name = "bn_act";
  const int x = g.add_value({.name = "x", .shape = {2, 3, 6, 6}, .role = Role::input});
  g.data_input = x;
  Attrs conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv.set("kernel_shape", std::vector<int64_t>{3, 3});
  const int w1 = g.add_value({.name = "w1", .shape = {4, 3, 3, 3}, .role = Role::param});
  const int c1 = add_node(g, "conv1", "Conv", {x, w1}, "c1", conv);
  std::vector<int> bn_in = {c1};
  for (const char* n : {"scale", "bias", "running_mean", "running_var"})
    bn_in.push_back(g.add_value({.name = n, .shape = {4}, .role = Role::param}));
  Node bn{.name = "bn", .op = "BatchNormalization", .inputs = bn_in};
  const int index = static_cast<int>(g.nodes.size());
  for (const char* n : {"bn_y", "bn_mean", "bn_invstd"}) bn.outputs.push_back(g.add_value({.name = n, .producer = index}));
  g.nodes.push_back(bn);
  infer_node(g, index);
  b.bn_y = g.nodes.back().outputs[0];
  b.act_out = add_node(g, "act", act, {b.bn_y}, "z", act == "Clip" ? clip : Attrs{});
  const int w2 = g.add_value({.name = "w2", .shape = {2, 4, 3, 3}, .role = Role::param});
  g.outputs.push_back(add_node(g, "conv2", "Conv", {b.act_out, w2}, "y", conv));
  if (second_reader) g.outputs.push_back(add_node(g, "add", "Add", {b.bn_y, b.act_out}, "sum"));
  if (bn_y_output) g.outputs.push_back(b.bn_y);
  g.verify();
  return b;
}

const Node& node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  return g.nodes.front();
}

Attrs bounds(std::optional<double> lo, std::optional<double> hi) {
  Attrs a;
  if (lo) a.set("min", std::vector<double>{*lo});
  if (hi) a.set("max", std::vector<double>{*hi});
  return a;
}

}  // namespace

TEST_CASE("a batch norm and the Relu after it become one batch norm with activation relu", "[import][fuse_bn_act]") {
  Built b = bn_act("Relu");
  const std::string z = b.g.values[b.act_out].name, mask = b.g.values[b.act_out + 1].name;
  REQUIRE(fuse_bn_activation(b.g) == 1);
  CHECK(op_counts(b.g).count("Relu") == 0);
  const Node& bn = node_named(b.g, "bn");
  CHECK(bn.attrs.s("activation") == "relu");
  CHECK(!bn.attrs.has("activation_min"));
  REQUIRE(bn.outputs.size() == 4);
  CHECK(b.g.values[bn.outputs[0]].name == z);     // the activation's output, under its name
  CHECK(b.g.values[bn.outputs[3]].name == mask);  // the Relu's mask value, now the batch norm's
  CHECK(b.g.values[bn.outputs[3]].dtype == DType::u8);
  CHECK(b.g.values[bn.outputs[3]].shape == Shape{ops::relu_mask_bytes(2 * 4 * 6 * 6)});
  CHECK(b.g.find_value("bn_y") < 0);
  CHECK(node_named(b.g, "conv2").inputs[0] == bn.outputs[0]);
  CHECK(std::string(bn_activation_mode(b.g)) == "fused");
}

TEST_CASE("a Clip after a batch norm fuses with its bounds, an absent bound staying absent", "[import][fuse_bn_act]") {
  Built six = bn_act("Clip", bounds(0.0, 6.0));
  REQUIRE(fuse_bn_activation(six.g) == 1);
  const Node& bn = node_named(six.g, "bn");
  CHECK(bn.attrs.s("activation") == "clip");
  CHECK(bn.attrs.f("activation_min") == 0.0);
  CHECK(bn.attrs.f("activation_max") == 6.0);
  REQUIRE(bn.outputs.size() == 4);
  CHECK(six.g.values[bn.outputs[3]].name == "z/mask");
  CHECK(six.g.values[bn.outputs[3]].shape == Shape{ops::relu_mask_bytes(2 * 4 * 6 * 6)});

  Built upper = bn_act("Clip", bounds(std::nullopt, 6.0));
  REQUIRE(fuse_bn_activation(upper.g) == 1);
  const Node& u = node_named(upper.g, "bn");
  CHECK(!u.attrs.has("activation_min"));
  CHECK(u.attrs.f("activation_max") == 6.0);
}

TEST_CASE("a batch norm whose Y another node reads or the graph outputs, or before another op, stays separate",
          "[import][fuse_bn_act]") {
  for (Built b : {bn_act("Relu", {}, true), bn_act("Relu", {}, false, true), bn_act("Sigmoid"),
                  bn_act("Clip", bounds(6.0, 6.0)), bn_act("Clip", bounds(1.0, 0.0))}) {
    const size_t nodes = b.g.nodes.size();
    CHECK(fuse_bn_activation(b.g) == 0);
    CHECK(b.g.nodes.size() == nodes);
    CHECK(std::string(bn_activation_mode(b.g)) == "separate");
  }
}

TEST_CASE("fused and separate batch norm activations train alike: ResNet-50 (ReLU), MobileNetV2 (Clip, a Dropout)",
          "[import][fuse_bn_act]") {
  for (const char* model : {"resnet50", "mobilenet_v2"}) {
    INFO(model);
    SessionOptions fused, separate;
    fused.model_path = separate.model_path = model_path(model);
    fused.import.batch = separate.import.batch = 2;
    fused.import.input_shape = separate.import.input_shape = Shape{3, 32, 32};
    fused.float_bytes = separate.float_bytes = 8;
    separate.import.fuse_bn_activation = false;
    auto a = open_session(fused);
    auto b = open_session(separate);
    const std::map<std::string, int> ops_a = op_counts(a->tg.graph), ops_b = op_counts(b->tg.graph);
    CHECK(import_mode_of(a->tg.graph).bn_activation == "fused");
    CHECK(import_mode_of(b->tg.graph).bn_activation == "separate");
    const std::string act = std::string(model) == "resnet50" ? "Relu" : "Clip";
    const int pairs = ops_a.at("BatchNormActGrad");
    CHECK(pairs == (act == "Relu" ? 33 : 35));  // ResNet-50's three ReLUs after an Add stay; MobileNetV2's 35 ReLU6
    CHECK(ops_b.at(act) - (ops_a.count(act) ? ops_a.at(act) : 0) == pairs);
    CHECK(ops_a.at("BatchNormGrad") + pairs == ops_b.at("BatchNormGrad"));
    // MobileNetV2's Dropout draws its mask from its node's name (Executor), not its place, which the fusion moves:
    // both imports train on the same masks.
    check_same_step(*a, *b);
  }
}

TEST_CASE("the batch norm activation mode: recorded, read with separate as the absent field's value, the flag's values",
          "[import][fuse_bn_act]") {
  nlohmann::json j = {{"attention", "fused"}};
  CHECK(read_import_mode(j, "f.json").bn_activation == "separate");
  j["bn_activation"] = "both";
  CHECK_THROWS_WITH(read_import_mode(j, "f.json"), "f.json: bn_activation 'both': expected fused or separate");
  ImportOptions o;
  CHECK(std::string(import_bn_activation_mode(o)) == "fused");
  set_bn_activation_mode(o, "separate");
  CHECK(!o.fuse_bn_activation);
  CHECK_THROWS_WITH(set_bn_activation_mode(o, "x"), "--bn-activation 'x': expected fused or separate");
  // tiny: a Conv, BatchNormalization and Relu among its ops
  ImportOptions tiny;
  tiny.batch = 2;
  const Graph g = import_onnx(model_path("tiny"), tiny);
  nlohmann::json written;
  write_import_mode(written, import_mode_of(g));
  CHECK(written.at("bn_activation") == bn_activation_mode(g));
}
