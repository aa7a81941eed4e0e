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

// Several data inputs (onnx_import.cpp read_inputs): every graph input with a symbolic first dimension is one, at
// the first input's batch; values are drawn by how the model reads them (initial_values).
TEST_CASE("integer data inputs are drawn as ids below their tables, positions or padding masks",
          "[train][init][inputs]") {
  ImportOptions o;
  o.batch = 3;
  TrainingGraph tg = build_training_graph(import_onnx(data_path("bert_inputs_tiny.onnx"), o), {});
  const Graph& g = tg.graph;
  const int ids = g.find_value("input"), mask = g.find_value("attention_mask"), types = g.find_value("token_type_ids"),
            positions = g.find_value("position_ids");
  REQUIRE(ids == g.data_input);
  REQUIRE(mask >= 0);
  REQUIRE(types >= 0);
  REQUIRE(positions >= 0);
  for (int v : {ids, mask, types, positions}) {
    CHECK(g.values[v].role == Role::input);
    CHECK(g.values[v].shape == Shape{3, 64});
  }
  const std::vector<std::vector<double>> x = initial_values(tg, 1);
  auto in_range = [](const std::vector<double>& a, double lo, double hi) {
    return std::all_of(a.begin(), a.end(), [&](double e) { return e >= lo && e <= hi && e == std::floor(e); });
  };
  CHECK(in_range(x[ids], 0, 100));  // word table: 101 rows
  CHECK(*std::max_element(x[ids].begin(), x[ids].end()) > 50);
  CHECK(in_range(x[types], 0, 1));  // token-type table: 2 rows
  CHECK(std::count(x[types].begin(), x[types].end(), 1.0) > 0);
  // Position ids (named so, read by a Gather): 0..63 in every row.
  for (size_t i = 0; i < x[positions].size(); ++i) CHECK(x[positions][i] == static_cast<double>(i % 64));
  // The mask (read through Unsqueeze and Cast, by no Gather): each row 1 up to a length in [1, 63], then 0.
  REQUIRE(x[mask].size() == 3 * 64);
  for (int row = 0; row < 3; ++row) {
    const auto begin = x[mask].begin() + row * 64, end = begin + 64;
    const auto first_zero = std::find(begin, end, 0.0);
    CHECK(first_zero != begin);
    CHECK(first_zero != end);
    CHECK(std::all_of(begin, first_zero, [](double e) { return e == 1.0; }));
    CHECK(std::all_of(first_zero, end, [](double e) { return e == 0.0; }));
  }
}

TEST_CASE("input files: a data input keeps the file's values and an integer buffer becomes a constant",
          "[train][init][inputs]") {
  ImportOptions o;
  o.batch = 2;
  o.input_files["attention_mask"] = data_path("bert_inputs_mask.npy");
  TrainingGraph tg = build_training_graph(import_onnx(data_path("bert_inputs_tiny.onnx"), o), {});
  const int mask = tg.graph.find_value("attention_mask");
  REQUIRE(mask >= 0);
  CHECK(tg.graph.values[mask].role == Role::input);
  const std::vector<double> m = initial_values(tg, 5)[mask];
  REQUIRE(m.size() == 128);
  CHECK(std::count(m.begin(), m.begin() + 64, 1.0) == 40);  // the file's first row attends to 40 tokens
  CHECK(std::count(m.begin() + 64, m.end(), 1.0) == 64);

  ImportOptions b;
  b.batch = 2;
  CHECK_THROWS_WITH(import_onnx(data_path("int_buffer_input.onnx"), b),
                    Catch::Contains("'rel_idx' (int64 [4,4]) is an integer buffer without values") &&
                        Catch::Contains("--input rel_idx=FILE.npy"));
  b.input_files["rel_idx"] = data_path("rel_idx.npy");
  const Graph g = import_onnx(data_path("int_buffer_input.onnx"), b);
  const int rel = g.find_value("rel_idx");
  REQUIRE(rel >= 0);
  CHECK(g.values[rel].role == Role::constant);
  CHECK(g.values[rel].data == std::vector<double>{0, 3, 6, 2, 5, 1, 4, 0, 3, 6, 2, 5, 1, 4, 0, 3});
  b.input_files["rel_idx"] = data_path("rel_idx_float.npy");
  CHECK_THROWS_WITH(import_onnx(data_path("int_buffer_input.onnx"), b),
                    Catch::Contains("the file holds <f4 values, the input is int64"));
  b.input_files = {{"nope", data_path("rel_idx.npy")}};
  CHECK_THROWS_WITH(import_onnx(data_path("int_buffer_input.onnx"), b),
                    Catch::Contains("the model has no graph input 'nope'"));
}
