// The Slices-to-Split rewrite (lib/ir/split_slices.h) on hand-built graphs: what it rewrites (the pieces of one
// axis, in any order, beside other readers of the value) and what it leaves (a gap, an overlap, a step, two axes
// cut, a single piece); and on bert_tiny, whose attention's in_proj is split by Slices: the same forward values,
// half the Sums in its backward, gradients checked against PyTorch by the check_bert_tiny tests.
#include <catch2/catch.hpp>

#include <map>

#include "engine/session.h"
#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "ir/profile_import.h"
#include "ir/split_slices.h"
#include "ops/op.h"
#include "profile/profile.h"
#include "test_paths.h"
#include "train/training_graph.h"

using namespace monet;
using namespace monet::test;

namespace {

using Ints = std::vector<int64_t>;

struct Piece {
  Ints starts, ends, axes, steps = {};
};

// x (4, 12) read by one Slice per piece (in the order given) and by a Relu; every output a graph output.
Graph sliced(const std::vector<Piece>& pieces) {
  Graph g;
  g.model_name = "sliced";
  const int x = g.add_value({.name = "x", .shape = {4, 12}, .role = Role::input});
  g.data_input = x;
  for (size_t i = 0; i < pieces.size(); ++i) {
    Node n{.name = "slice" + std::to_string(i), .op = "Slice", .inputs = {x}};
    n.attrs.set("starts", pieces[i].starts);
    n.attrs.set("ends", pieces[i].ends);
    n.attrs.set("axes", pieces[i].axes);
    if (!pieces[i].steps.empty()) n.attrs.set("steps", pieces[i].steps);
    n.outputs = {g.add_value({.name = "y" + std::to_string(i), .producer = static_cast<int>(g.nodes.size())})};
    g.nodes.push_back(n);
    infer_node(g, static_cast<int>(g.nodes.size()) - 1);
    g.outputs.push_back(n.outputs[0]);
  }
  Node relu{.name = "relu", .op = "Relu", .inputs = {x}};
  relu.outputs = {g.add_value({.name = "r", .producer = static_cast<int>(g.nodes.size())}),
                  g.add_value({.name = "r_mask", .producer = static_cast<int>(g.nodes.size())})};
  g.nodes.push_back(relu);
  infer_node(g, static_cast<int>(g.nodes.size()) - 1);
  g.outputs.push_back(relu.outputs[0]);
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("Slices that cut one axis into pieces become one Split, in range order", "[import][split_slices]") {
  // Pieces [4, 9), [0, 4) and [9, 12) of axis 1, given out of order, one of them with a negative start.
  Graph g = sliced({{{4}, {9}, {1}}, {{0}, {4}, {-1}}, {{-3}, {INT64_MAX}, {1}}});
  CHECK(std::string(slices_mode(g)) == "sliced");
  const std::vector<int> y = {g.find_value("y0"), g.find_value("y1"), g.find_value("y2")};
  REQUIRE(split_slices(g) == 1);
  CHECK(std::string(slices_mode(g)) == "split");
  CHECK(op_counts(g) == std::map<std::string, int>{{"Relu", 1}, {"Split", 1}});
  const Node& split = g.nodes[0];
  CHECK(split.name == "slice0/split");
  CHECK(split.attrs.i("axis") == 1);
  CHECK(split.attrs.ints("split") == Ints{4, 5, 3});
  CHECK(split.outputs == std::vector<int>{y[1], y[0], y[2]});  // the values themselves, by their ranges
  CHECK(g.values[y[0]].shape == Shape{4, 5});
  for (int v : y) CHECK(g.values[v].producer == 0);
  CHECK(g.nodes[1].op == "Relu");  // x's other reader stays
}

TEST_CASE("Slices that do not cut one axis into pieces stay as they are", "[import][split_slices]") {
  const std::vector<std::pair<const char*, std::vector<Piece>>> cases = {
      {"a gap", {{{0}, {4}, {1}}, {{5}, {12}, {1}}}},
      {"an overlap", {{{0}, {6}, {1}}, {{5}, {12}, {1}}}},
      {"short of the end", {{{0}, {4}, {1}}, {{4}, {11}, {1}}}},
      {"a step", {{{0}, {6}, {1}, {1}}, {{6}, {12}, {1}, {2}}}},
      {"two axes cut", {{{0, 0}, {2, 6}, {0, 1}}, {{0, 6}, {4, 12}, {0, 1}}}},
      {"one piece", {{{0}, {12}, {1}}}},
      {"pieces of different axes", {{{0}, {2}, {0}}, {{0}, {12}, {1}}}},
  };
  for (const auto& [what, pieces] : cases) {
    INFO(what);
    Graph g = sliced(pieces);
    const std::map<std::string, int> before = op_counts(g);
    CHECK(split_slices(g) == 0);
    CHECK(op_counts(g) == before);
    CHECK(std::string(slices_mode(g)) == "sliced");
  }
}

TEST_CASE("bert_tiny imports its in_proj's Q, K and V as one Split: the backward has half the Sums",
          "[import][split_slices]") {
  ImportOptions split, sliced;
  split.batch = sliced.batch = 2;
  sliced.split_slices = false;
  const TrainingGraph a = build_training_graph(import_onnx(data_path("bert_tiny.onnx"), split), TrainOptions{});
  const TrainingGraph b = build_training_graph(import_onnx(data_path("bert_tiny.onnx"), sliced), TrainOptions{});
  const std::map<std::string, int> ops_a = op_counts(a.graph), ops_b = op_counts(b.graph);
  CHECK(std::string(slices_mode(a.graph)) == "split");
  CHECK(std::string(slices_mode(b.graph)) == "sliced");
  CHECK(ops_a.count("Slice") == 0);
  CHECK(ops_b.at("Slice") == 3 * ops_a.at("Split"));
  CHECK(ops_a.at("SplitGrad") == ops_a.at("Split"));
  CHECK(ops_b.at("SliceGrad") == ops_b.at("Slice"));
  CHECK(ops_a.at("Sum") * 2 == ops_b.at("Sum"));  // each layer's two Sums of the three pieces' gradients gone
  CHECK(a.graph.nodes.size() < b.graph.nodes.size());
}

TEST_CASE("a profile of the graph as written picks a store-all for it: the run imports as the profile says",
          "[import][split_slices]") {
  // bert_tiny profiled without the rewrite (as profiles made before it were): "sliced" in the file, and monet-run's
  // --profile store-all imports the model so, where a fresh import would be another graph.
  ImportOptions sliced;
  sliced.batch = 2;
  sliced.split_slices = false;
  auto s = session_on_profile_of("bert_tiny.onnx", sliced);
  CHECK(std::string(slices_mode(s->tg.graph)) == "sliced");
  CHECK(s->schedule.import.slices == "sliced");
}
