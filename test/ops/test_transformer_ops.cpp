// Ops that transformer exports need (vit_b_16, convnext_tiny): Pow, Sqrt, Erf (LayerNorm decomposition, exact
// GELU), Expand (class token), Gather on an activation (x[:, 0]), runtime Unsqueeze and Squeeze.
// Forward on hand values, backward against finite differences, bad attributes rejected.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "op_harness.h"
#include "ops/common/broadcast.h"

using namespace monet;
using namespace monet::test;

namespace {

using Ints = std::vector<int64_t>;
using Doubles = std::vector<double>;

Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attrs a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

void check_near(const Doubles& got, const Doubles& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12).margin(1e-15));
}

}  // namespace

TEST_CASE("Pow with a constant scalar exponent", "[ops][pow]") {
  OpCase c{.op = "Pow", .attrs = attrs({{"exponent", Doubles{2.0}}}), .shapes = {{4}}, .data = {{-2, 0.5, 3, 0}}};
  check_near(run_forward(c).values[0], {4, 0.25, 9, 0});
  c.attrs = attrs({{"exponent", Ints{3}}});  // an integer constant arrives as ints
  check_near(run_forward(c).values[0], {-8, 0.125, 27, 0});
  CHECK(gradient_error({.op = "Pow", .attrs = attrs({{"exponent", Doubles{2.0}}}), .shapes = {{2, 3, 4}}}) < 1e-6);
  CHECK(gradient_error({.op = "Pow", .attrs = attrs({{"exponent", Doubles{3.0}}}), .shapes = {{5}}}) < 1e-6);
  CHECK(gradient_error({.op = "Pow", .attrs = attrs({{"exponent", Doubles{-1.5}}}), .shapes = {{4}},
                        .data = {{0.5, 1.0, 2.0, 3.5}}}) < 1e-6);
  CHECK_THROWS_AS(run_forward({.op = "Pow", .shapes = {{3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Pow", .attrs = attrs({{"exponent", Doubles{2, 3}}}), .shapes = {{2}}}), Error);
}

TEST_CASE("Sqrt forward and output-activated backward", "[ops][sqrt]") {
  OpCase c{.op = "Sqrt", .shapes = {{3}}, .data = {{0.25, 4, 9}}};
  check_near(run_forward(c).values[0], {0.5, 2, 3});
  CHECK(gradient_error({.op = "Sqrt", .shapes = {{2, 3}}, .data = {{0.1, 0.5, 1, 2, 3.5, 9}}}) < 1e-6);
}

TEST_CASE("Erf forward and backward", "[ops][erf]") {
  OpCase c{.op = "Erf", .shapes = {{3}}, .data = {{0, 1, -0.5}}};
  check_near(run_forward(c).values[0], {0, 0.8427007929497149, -0.5204998778130465});
  CHECK(gradient_error({.op = "Erf", .shapes = {{3, 4, 5}}}) < 1e-6);
  CHECK(gradient_error({.op = "Erf", .shapes = {{4}}, .data = {{-2.5, -0.1, 0.7, 3}}}) < 1e-6);
}

TEST_CASE("broadcast shapes follow numpy: a 1 takes the other side's size, a 0 included", "[ops][broadcast]") {
  CHECK(ops::broadcast_shapes({2, 1, 4}, {3, 1}) == Shape{2, 3, 4});
  CHECK(ops::broadcast_shapes({0}, {1}) == Shape{0});
  CHECK(ops::broadcast_shapes({1, 3}, {0, 1}) == Shape{0, 3});
  CHECK_FALSE(ops::broadcast_shapes({2}, {3}).has_value());
  CHECK_FALSE(ops::broadcast_shapes({0}, {2}).has_value());
}

TEST_CASE("Expand broadcasts to a constant shape, both ways", "[ops][expand]") {
  // torch's class_token.expand(n, -1, -1) exports as shape [n, 1, 1] against (1, 1, C).
  OpCase c{.op = "Expand", .attrs = attrs({{"shape", Ints{2, 1, 1}}}), .shapes = {{1, 1, 3}}, .data = {{1, 2, 3}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 1, 3});
  CHECK(r.values[0] == Doubles{1, 2, 3, 1, 2, 3});
  OpCase d{.op = "Expand", .attrs = attrs({{"shape", Ints{2, 1, 2}}}), .shapes = {{3, 1}}, .data = {{1, 2, 3}}};
  r = run_forward(d);
  CHECK(r.shapes[0] == Shape{2, 3, 2});
  CHECK(r.values[0] == Doubles{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(gradient_error({.op = "Expand", .attrs = attrs({{"shape", Ints{2, 1, 1}}}), .shapes = {{1, 1, 4}}}) < 1e-6);
  CHECK(gradient_error({.op = "Expand", .attrs = attrs({{"shape", Ints{2, 3, 4}}}), .shapes = {{3, 1}}}) < 1e-6);
  CHECK(gradient_error({.op = "Expand", .attrs = attrs({{"shape", Ints{2, 3}}}), .shapes = {{2, 3}}}) < 1e-6);
  // Integers and bools move as they are (an attention mask expanded before its Cast); no gradient.
  r = run_forward({.op = "Expand", .attrs = attrs({{"shape", Ints{2, 1, 3}}}), .shapes = {{2, 1, 1}},
                   .dtypes = {DType::i64}, .data = {{7, -4}}}, 4);
  CHECK(r.shapes[0] == Shape{2, 1, 3});
  CHECK(r.values[0] == Doubles{7, 7, 7, -4, -4, -4});
  r = run_forward({.op = "Expand", .attrs = attrs({{"shape", Ints{2, 2}}}), .shapes = {{2}}, .dtypes = {DType::u8},
                   .data = {{1, 0}}}, 4);
  CHECK(r.values[0] == Doubles{1, 0, 1, 0});
  CHECK_THROWS_AS(run_forward({.op = "Expand", .attrs = attrs({{"shape", Ints{2, 4}}}), .shapes = {{2, 3}}}), Error);
}

TEST_CASE("Gather with constant indices on an activation", "[ops][gather]") {
  // x[:, 0] on (2, 3, 2): a scalar index (indices_shape []) drops the axis.
  const Doubles x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  OpCase c{.op = "Gather", .attrs = attrs({{"axis", int64_t{1}}, {"indices", Ints{0}}, {"indices_shape", Ints{}}}),
           .shapes = {{2, 3, 2}}, .data = {x}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 2});
  CHECK(r.values[0] == Doubles{0, 1, 6, 7});
  // 1-D indices keep the axis; negative indices count from the end; repeats are allowed.
  OpCase d{.op = "Gather", .attrs = attrs({{"axis", int64_t{-2}}, {"indices", Ints{-1, 0, 2}}}), .shapes = {{2, 3, 2}},
           .data = {x}};
  r = run_forward(d);
  CHECK(r.shapes[0] == Shape{2, 3, 2});
  CHECK(r.values[0] == Doubles{4, 5, 0, 1, 4, 5, 10, 11, 6, 7, 10, 11});
  CHECK(gradient_error(c) < 1e-6);
  CHECK(gradient_error(d) < 1e-6);  // index 2 twice: its gradient is the sum of both
  CHECK(gradient_error({.op = "Gather", .attrs = attrs({{"axis", int64_t{0}}, {"indices", Ints{1, 1, 0, 2}},
                                                         {"indices_shape", Ints{2, 2}}}),
                        .shapes = {{3, 4}}}) < 1e-6);
  CHECK_THROWS_AS(run_forward({.op = "Gather", .attrs = attrs({{"axis", int64_t{1}}, {"indices", Ints{3}}}),
                               .shapes = {{2, 3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Gather", .attrs = attrs({{"axis", int64_t{2}}, {"indices", Ints{0}}}),
                               .shapes = {{2, 3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Gather", .shapes = {{2, 3}}}), Error);
}

TEST_CASE("GatherIdx: indices at run time (a token embedding), its gradient a scatter-add in index order",
          "[ops][gather]") {
  // A (4, 2) table, token ids (2, 3) -> (2, 3, 2); id 3 twice, a negative id counting from the end.
  const Doubles table = {0, 1, 10, 11, 20, 21, 30, 31};
  OpCase c{.op = "GatherIdx", .shapes = {{4, 2}, {2, 3}}, .dtypes = {DType::f32, DType::i64},
           .data = {table, {3, 0, 3, -3, 2, 1}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 3, 2});
  CHECK(r.values[0] == Doubles{30, 31, 0, 1, 30, 31, 10, 11, 20, 21, 10, 11});
  CHECK(gradient_error(c) < 1e-6);  // rows 1 and 3 gather twice: their gradients add
  // Another axis: x (2, 3, 2) along axis 1 with ids (2).
  OpCase d{.op = "GatherIdx", .attrs = attrs({{"axis", int64_t{1}}}), .shapes = {{2, 3, 2}, {2}},
           .dtypes = {DType::f32, DType::i64}, .data = {{}, {2, 2}}};
  CHECK(run_forward(d).shapes[0] == Shape{2, 2, 2});
  CHECK(gradient_error(d) < 1e-6);
  // Out of range at run time; float indices at shape inference.
  CHECK_THROWS_WITH(run_forward({.op = "GatherIdx", .shapes = {{4, 2}, {1}}, .dtypes = {DType::f32, DType::i64},
                                 .data = {table, {4}}}),
                    Catch::Matchers::Contains("index 4 is out of range [-4, 4)"));
  CHECK_THROWS_AS(run_forward({.op = "GatherIdx", .shapes = {{4, 2}, {1}}}), Error);
}

TEST_CASE("SoftmaxCrossEntropy over the last axis equals it over dim 1 of the transposed logits", "[ops][loss]") {
  // (N=2, T=3, V=4) with classes last against (N, V, T) with classes on dim 1: the same loss and gradient.
  const Doubles x = random_values({2, 3, 4}, 7);
  Doubles xt(24);
  for (int n = 0; n < 2; ++n)
    for (int t = 0; t < 3; ++t)
      for (int v = 0; v < 4; ++v) xt[(n * 4 + v) * 3 + t] = x[(n * 3 + t) * 4 + v];
  const Doubles labels = {0, 3, 1, 2, 2, 0};
  OpCase last{.op = "SoftmaxCrossEntropy", .attrs = attrs({{"axis", int64_t{2}}}), .shapes = {{2, 3, 4}, {2, 3}},
              .dtypes = {DType::f32, DType::i64}, .data = {x, labels}};
  OpCase first{.op = "SoftmaxCrossEntropy", .shapes = {{2, 4, 3}, {2, 3}}, .dtypes = {DType::f32, DType::i64},
               .data = {xt, labels}};
  CHECK(run_forward(last).values[0][0] == Approx(run_forward(first).values[0][0]).epsilon(1e-14));
  CHECK(gradient_error(last) < 1e-6);
  CHECK_THROWS_AS(run_forward({.op = "SoftmaxCrossEntropy", .attrs = attrs({{"axis", int64_t{0}}}),
                               .shapes = {{2, 3, 4}, {3, 4}}, .dtypes = {DType::f32, DType::i64}}),
                  Error);
}

TEST_CASE("Unsqueeze and Squeeze at runtime", "[ops][unsqueeze][squeeze]") {
  const Doubles x = {1, 2, 3, 4, 5, 6};
  OpResult r = run_forward({.op = "Unsqueeze", .attrs = attrs({{"axes", Ints{0, -1}}}), .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{1, 2, 3, 1});
  CHECK(r.values[0] == x);
  r = run_forward({.op = "Unsqueeze", .attrs = attrs({{"axes", Ints{1}}}), .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{2, 1, 3});
  r = run_forward({.op = "Squeeze", .shapes = {{1, 3, 1, 2}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{3, 2});
  CHECK(r.values[0] == x);
  r = run_forward({.op = "Squeeze", .attrs = attrs({{"axes", Ints{-2}}}), .shapes = {{1, 3, 1, 2}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{1, 3, 2});
  CHECK(gradient_error({.op = "Unsqueeze", .attrs = attrs({{"axes", Ints{2}}}), .shapes = {{2, 3}}}) < 1e-6);
  CHECK(gradient_error({.op = "Squeeze", .attrs = attrs({{"axes", Ints{0}}}), .shapes = {{1, 4}}}) < 1e-6);
  CHECK_THROWS_AS(run_forward({.op = "Squeeze", .attrs = attrs({{"axes", Ints{1}}}), .shapes = {{1, 3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Unsqueeze", .attrs = attrs({{"axes", Ints{1, 1}}}), .shapes = {{3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Unsqueeze", .shapes = {{3}}}), Error);
}

TEST_CASE("Gelu equals the nodes torch exports for nn.GELU, and its gradient finite differences", "[ops][gelu]") {
  // x * (erf(x / c) + 1) * 0.5 with c the exported sqrt 2 (rounded to float), and with the exact one.
  for (double c : {1.4142135381698608, std::sqrt(2.0)}) {
    const Doubles x = {-3, -1, -0.25, 0, 0.5, 2};
    const OpResult r = run_forward({.op = "Gelu", .attrs = attrs({{"divisor", c}}), .shapes = {{6}}, .data = {x}});
    for (size_t i = 0; i < x.size(); ++i) CHECK(r.values[0][i] == x[i] * (std::erf(x[i] / c) + 1) * 0.5);
    CHECK(gradient_error({.op = "Gelu", .attrs = attrs({{"divisor", c}}), .shapes = {{3, 4, 5}}}) < 1e-6);
    CHECK(gradient_error({.op = "Gelu", .attrs = attrs({{"divisor", c}}), .shapes = {{5}},
                          .data = {{-4, -1.5, 0.01, 1.5, 4}}}) < 1e-6);
  }
  CHECK(gradient_error({.op = "Gelu", .shapes = {{7}}}) < 1e-6);  // the default divisor: sqrt 2
  CHECK_THROWS_WITH(run_forward({.op = "Gelu", .attrs = attrs({{"divisor", 0.0}}), .shapes = {{3}}}),
                    Catch::Contains("divisor must be > 0"));
}
