// Seeded initialisation of params without data in the file (training_graph.cpp initial_values), in particular the
// rules for graph inputs read as plain operands (transformer exports: Linear as Transpose + MatMul + Add,
// LayerNorm as Mul + Add, embeddings).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "ir/onnx_import.h"
#include "test_paths.h"
#include "train/training_graph.h"

using namespace monet;
using namespace monet::test;

TEST_CASE("transformer params are initialised from their readers, deterministically from the seed", "[train][init]") {
  ImportOptions o;
  o.batch = 2;
  TrainingGraph tg = build_training_graph(import_onnx(data_path("tiny_transformer.onnx"), o), {});
  const std::vector<std::vector<double>> x = initial_values(tg, 7);
  const Graph& g = tg.graph;
  auto values = [&](const char* name) {
    int v = g.find_value(name);
    REQUIRE(v >= 0);
    return x[v];
  };
  auto max_abs = [](const std::vector<double>& a) {
    double m = 0;
    for (double e : a) m = std::max(m, std::abs(e));
    return m;
  };
  auto all_equal = [](const std::vector<double>& a, double value) {
    return std::all_of(a.begin(), a.end(), [&](double e) { return e == value; });
  };
  CHECK(all_equal(values("ln1_g"), 1.0));
  CHECK(all_equal(values("ln1_b"), 0.0));
  // Linear (out, in) through Transpose: U(+-1/sqrt(in)); its bias takes the same bound.
  CHECK(max_abs(values("fc1_w")) <= 1 / std::sqrt(8.0));
  CHECK(max_abs(values("fc1_w")) > 0.5 / std::sqrt(8.0));
  CHECK(max_abs(values("fc2_w")) <= 1 / std::sqrt(16.0));
  CHECK(max_abs(values("fc2_b")) <= 1 / std::sqrt(16.0));
  CHECK(max_abs(values("fc2_b")) > 0);
  CHECK(max_abs(values("qkv_b")) <= 1 / std::sqrt(8.0));
  // N(0, 0.02^2): 40 draws all within 5 sigma, not all zero.
  CHECK(max_abs(values("pos_embedding")) < 0.1);
  CHECK(max_abs(values("pos_embedding")) > 0);
  CHECK(initial_values(tg, 7) == x);
  CHECK(initial_values(tg, 8) != x);
}
