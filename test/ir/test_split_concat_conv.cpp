// The Concat-Conv split (lib/ir/split_concat_conv.h) on hand-built graphs: what it rewrites (a Conv over a channel
// Concat of two or three inputs, with and without a bias) and what it leaves (another reader of the Concat, another
// axis, grouped convolutions, a Concat that is a graph output, one input); and on the UNet at a small size: the same
// step as the joined graph, and a lower bound on any schedule's peak below the joined graph's. Gradients against
// PyTorch: check_unet_* (the reference runs the ONNX file as exported).
#include <catch2/catch.hpp>

#include <map>

#include "engine/session.h"
#include "ir/add_node.h"
#include "ir/import_mode.h"
#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "ir/same_step.h"
#include "ir/split_concat_conv.h"
#include "profile/profile.h"
#include "solve/problem.h"
#include "test_paths.h"
#include "train/training_graph.h"

using namespace monet;
using namespace monet::test;

namespace {

using Ints = std::vector<int64_t>;

struct Built {
  Graph g;
  int concat_out = -1, y = -1;
};

// x (2, 3, 8, 8) -> a Conv per entry of `channels` (3 -> c_i, 3x3, pad 1) -> Concat(axis) -> Conv (sum c_i -> out,
// 3x3, pad 1, `group`, with a bias when `bias`) -> y, a graph output. `other_reader`: a Relu also reads the Concat.
Built concat_conv(const Ints& channels, int64_t axis = 1, int64_t group = 1, bool bias = true,
                  bool other_reader = false, bool concat_is_output = false, int64_t out = 6) {
  Built b;
  Graph& g = b.g;
  g.model_name = "concat_conv";
  const int x = g.add_value({.name = "x", .shape = {2, 3, 8, 8}, .role = Role::input});
  g.data_input = x;
  Attrs conv;
  conv.set("pads", Ints{1, 1, 1, 1});
  conv.set("kernel_shape", Ints{3, 3});
  std::vector<int> parts;
  int64_t total = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    const std::string n = std::to_string(i);
    const int w = g.add_value({.name = "w" + n, .shape = {channels[i], 3, 3, 3}, .role = Role::param});
    parts.push_back(add_node(g, "conv" + n, "Conv", {x, w}, "x" + n, conv));
    total += channels[i];
  }
  Attrs cat;
  cat.set("axis", axis);
  b.concat_out = add_node(g, "cat", "Concat", parts, "cat_out", cat);
  const int64_t in = axis == 1 || axis == -3 ? total : 3;
  Attrs last = conv;
  last.set("group", group);
  const int w = g.add_value({.name = "w_last", .shape = {out, in / group, 3, 3}, .role = Role::param});
  std::vector<int> inputs = {b.concat_out, w};
  if (bias) inputs.push_back(g.add_value({.name = "b_last", .shape = {out}, .role = Role::param}));
  b.y = add_node(g, "up", "Conv", inputs, "y", last);
  g.outputs.push_back(b.y);
  if (other_reader) g.outputs.push_back(add_node(g, "relu", "Relu", {b.concat_out}, "r"));
  if (concat_is_output) g.outputs.push_back(b.concat_out);
  g.verify();
  return b;
}

}  // namespace

TEST_CASE("a Conv over a channel Concat becomes a Conv per input and their Sum", "[import][split_concat_conv]") {
  for (const bool bias : {true, false}) {
    INFO("bias " << bias);
    Built b = concat_conv({4, 5}, -3, 1, bias);  // the axis given from the end, as exports may
    Graph& g = b.g;
    CHECK(std::string(concat_conv_mode(g)) == "joined");
    const size_t values = g.values.size();
    REQUIRE(split_concat_conv(g) == 1);
    CHECK(std::string(concat_conv_mode(g)) == "split");
    CHECK(op_counts(g) == std::map<std::string, int>{{"Conv", 4}, {"Split", 1}, {"Sum", 1}});
    CHECK(g.values.size() == values - 1 + 4);  // the Concat's output gone; two weight parts and two part outputs
    CHECK(g.find_value("cat_out") < 0);
    const Node& split = g.nodes[2];
    CHECK(split.name == "up/weight_split");
    CHECK(split.op == "Split");
    CHECK(split.attrs.ints("split") == Ints{4, 5});
    CHECK(split.inputs == std::vector<int>{g.find_value("w_last")});
    CHECK(g.values[split.outputs[0]].shape == Shape{6, 4, 3, 3});
    CHECK(g.values[split.outputs[1]].shape == Shape{6, 5, 3, 3});
    for (int i = 0; i < 2; ++i) {
      const Node& p = g.nodes[3 + static_cast<size_t>(i)];
      CHECK(p.name == "up/part" + std::to_string(i));
      CHECK(p.attrs.i("concat_part") == i);
      CHECK(p.attrs.ints("pads") == Ints{1, 1, 1, 1});
      CHECK(p.inputs[0] == g.find_value("x" + std::to_string(i)));
      CHECK(p.inputs[1] == split.outputs[static_cast<size_t>(i)]);
      CHECK(p.inputs.size() == (i == 0 && bias ? 3u : 2u));  // the bias once
      CHECK(g.values[p.outputs[0]].shape == Shape{2, 6, 8, 8});
    }
    const Node& sum = g.nodes[5];
    CHECK(sum.name == "up/sum");
    CHECK(sum.op == "Sum");
    CHECK(sum.inputs == std::vector<int>{g.nodes[3].outputs[0], g.nodes[4].outputs[0]});
    CHECK(sum.outputs == std::vector<int>{g.find_value("y")});  // y keeps its value
    CHECK(g.values[g.find_value("y")].producer == 5);
  }
  Built three = concat_conv({1, 2, 3});
  REQUIRE(split_concat_conv(three.g) == 1);
  CHECK(op_counts(three.g) == std::map<std::string, int>{{"Conv", 6}, {"Split", 1}, {"Sum", 1}});
}

TEST_CASE("a Concat another node reads, of another axis, under a grouped Conv, of one input or small stays joined",
          "[import][split_concat_conv]") {
  struct Case {
    const char* what;
    Built b;
  };
  std::vector<Case> cases;
  cases.push_back({"another reader", concat_conv({4, 4}, 1, 1, true, true)});
  cases.push_back({"a graph output", concat_conv({4, 4}, 1, 1, true, false, true)});
  cases.push_back({"batch axis", concat_conv({3, 3}, 0)});
  cases.push_back({"grouped", concat_conv({4, 4}, 1, 2)});
  cases.push_back({"one input", concat_conv({4})});
  // 2 x 2 x 8 x 8 = 256 elements concatenated, a weight of 20 x 2 x 3 x 3 = 360: under twice the weight.
  cases.push_back({"a weight larger than half the concatenation", concat_conv({1, 1}, 1, 1, true, false, false, 20)});
  for (Case& c : cases) {
    INFO(c.what);
    const std::map<std::string, int> before = op_counts(c.b.g);
    CHECK(split_concat_conv(c.b.g) == 0);
    CHECK(op_counts(c.b.g) == before);
    CHECK(std::string(concat_conv_mode(c.b.g)) == "joined");
  }
}

TEST_CASE("a part's node named as the joined graph names it, at the last mark", "[import][split_concat_conv]") {
  CHECK(split_conv_part_name("/up/Conv", 3) == "/up/Conv/part3");
  CHECK(split_conv_joined_name("up.1/conv/Conv/part0") == "up.1/conv/Conv");
  CHECK(split_conv_joined_name("up.1/conv/Conv/part12/grad/ConvGradData0") == "up.1/conv/Conv/grad/ConvGradData0");
  CHECK(split_conv_joined_name("/up/Conv/part1/grad/ConvGradData#0") == "/up/Conv/grad/ConvGradData#0");  // a key
  // The weight's Split and the Sum have no joined twin; nor has a name without a mark.
  CHECK(split_conv_joined_name("up.1/conv/Conv/weight_split") == "");
  CHECK(split_conv_joined_name("up.1/conv/Conv/weight_split/grad/SplitGrad0") == "");
  CHECK(split_conv_joined_name("up.1/conv/Conv/sum") == "");
  CHECK(split_conv_joined_name("up.1/conv/Conv") == "");
  CHECK(split_conv_joined_name("layer/party/Conv") == "");
  CHECK(split_conv_joined_name("layer/part/Conv") == "");
  CHECK(split_conv_joined_name("a/summary") == "");
  // The last mark: a Conv's own name may hold one.
  CHECK(split_conv_joined_name("/enc/part1/Conv/part0") == "/enc/part1/Conv");
  CHECK(split_conv_joined_name("/enc/part1/Conv/part0/grad/ConvGradWeight0") == "/enc/part1/Conv/grad/ConvGradWeight0");
  CHECK(split_conv_joined_name("/dec/part2/Conv/weight_split") == "");
  CHECK(split_conv_joined_name("/dec/sum/Conv/part1") == "/dec/sum/Conv");
}

TEST_CASE("the UNet split: the same step as joined, and a lower bound on the peak below the joined graph's",
          "[import][split_concat_conv]") {
  // At 2 x 3 x 64 x 96 the decoder's upper concatenations are more than twice their convolutions' weights, the lower
  // ones (8 x 12 and 16 x 24 pixels, 512 and 256 + 256 channels) are not.
  SessionOptions split, joined;
  split.model_path = joined.model_path = model_path("unet");
  split.import.batch = joined.import.batch = 2;
  split.import.input_shape = joined.import.input_shape = Shape{3, 64, 96};
  split.float_bytes = joined.float_bytes = 8;  // the two sum each convolution's channels in another order
  joined.import.split_concat_conv = false;
  auto a = open_session(split);
  auto b = open_session(joined);
  std::map<std::string, int> ops_a = op_counts(a->tg.graph), ops_b = op_counts(b->tg.graph);
  CHECK(import_mode_of(a->tg.graph).concat_conv == "split");
  CHECK(import_mode_of(b->tg.graph).concat_conv == "joined");
  CHECK(ops_b.at("Concat") == 4);  // the decoder's four skip connections
  const int splits = ops_a["SplitGrad"];  // each split weight's gradient joined
  CHECK(splits >= 1);
  CHECK(ops_a["Concat"] == 4 - splits);
  CHECK(ops_a.at("Conv") == ops_b.at("Conv") + splits);
  check_same_step(*a, *b);

  const Profile pa = estimate_profile(a->tg, Roofline{}), pb = estimate_profile(b->tg, Roofline{});
  const int64_t lb_split = make_problem(pa.plan, 0, true).lower_bound_bytes();
  const int64_t lb_joined = make_problem(pb.plan, 0, true).lower_bound_bytes();
  CHECK(lb_split < lb_joined);
}

TEST_CASE("a profile records the Concat-Conv mode, and a file without the field imports joined",
          "[import][split_concat_conv]") {
  nlohmann::json j = {{"attention", "fused"}};
  CHECK(read_import_mode(j, "f.json").concat_conv == "joined");
  j["concat_conv"] = "both";
  CHECK_THROWS_WITH(read_import_mode(j, "f.json"), "f.json: concat_conv 'both': expected split or joined");
  // The mode records the option: a model with nothing to split imports "split" with it on.
  ImportOptions tiny;
  tiny.batch = 2;
  CHECK(import_mode_of(import_onnx(model_path("tiny"), tiny)).concat_conv == "split");
  tiny.split_concat_conv = false;
  CHECK(import_mode_of(import_onnx(model_path("tiny"), tiny)).concat_conv == "joined");
  ImportOptions o;
  CHECK(std::string(import_concat_conv_mode(o)) == "split");
  set_concat_conv_mode(o, "joined");
  CHECK(!o.split_concat_conv);
  CHECK_THROWS_WITH(set_concat_conv_mode(o, "x"), "--concat-conv 'x': expected split or joined");
}

namespace {

// The UNet at 3 x 64 x 96 and `batch` (up.1's convolution splits from batch 6 on, up.2's and up.3's at every batch).
TrainingGraph unet_at(int64_t batch) {
  ImportOptions o;
  o.batch = batch;
  o.input_shape = Shape{3, 64, 96};
  return build_training_graph(import_onnx(model_path("unet"), o), TrainOptions{});
}

double node_ms(const Profile& p, const std::string& name) {
  const int n = p.plan.find_node(name);
  REQUIRE(n >= 0);
  return p.plan.nodes[static_cast<size_t>(n)].time_ms;
}

}  // namespace

TEST_CASE("a profile rescaled to a batch that splits other convolutions: parts by FLOP share, joined by their sum",
          "[import][split_concat_conv][profile]") {
  const std::string up1 = "/up.1/conv/block/block.0/Conv";
  const TrainingGraph tg1 = unet_at(1), tg8 = unet_at(8);
  REQUIRE(tg1.graph.find_value(up1 + "/part1_out") < 0);  // joined at batch 1
  REQUIRE(tg8.graph.find_value(up1 + "/part1_out") >= 0);  // split at batch 8
  const Profile p1 = estimate_profile(tg1, Roofline{}), p8 = estimate_profile(tg8, Roofline{});

  // Up: the parts share the joined convolution's time at batch 8 by their FLOPs (input channels): together, all of it.
  const Profile up = rescale_profile(tg8, p1, "p1.json");
  CHECK(node_ms(up, up1 + "/part0") + node_ms(up, up1 + "/part1") == Approx(8 * node_ms(p1, up1)).epsilon(1e-12));
  const std::string weight_grad = "/grad/ConvGradWeight0";
  CHECK(node_ms(up, up1 + "/part0" + weight_grad) + node_ms(up, up1 + "/part1" + weight_grad) ==
        Approx(8 * node_ms(p1, up1 + weight_grad)).epsilon(1e-12));
  CHECK(node_ms(up, up1 + "/sum") > 0);
  CHECK(up.device_info["derived"]["split_conv_estimates"]["nodes"].size() > 0);

  // Down: the joined convolution takes its parts' sum.
  const Profile down = rescale_profile(tg1, p8, "p8.json");
  CHECK(node_ms(down, up1) == Approx((node_ms(p8, up1 + "/part0") + node_ms(p8, up1 + "/part1")) / 8).epsilon(1e-12));
  CHECK(node_ms(down, "/up.1/Concat") > 0);

  // The same splits: nothing estimated. Any other node without a twin is still an error.
  CHECK(!rescale_profile(tg1, p1, "p1.json").device_info["derived"].contains("split_conv_estimates"));
  Profile renamed = p1;
  for (PlanNode& n : renamed.plan.nodes)
    if (n.op == "MaxPool") {
      n.name += "_renamed";
      break;
    }
  CHECK_THROWS_WITH(rescale_profile(tg8, renamed, "r.json"), Catch::Contains("has no measured twin"));
}
