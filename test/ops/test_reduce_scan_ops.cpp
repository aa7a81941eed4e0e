// ReduceMax, CumSum, Trilu and Tile: forward on hand values, backward against finite differences (and, where
// finite differences cannot tell, against the chosen semantics: ReduceMax's ties), bad attributes rejected.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "op_harness.h"

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

}  // namespace

// ------------------------------------------------------------------------------------------------ ReduceMax

TEST_CASE("ReduceMax over axes, keepdims, all axes", "[ops][reduce]") {
  const Doubles x = {1, 5, -2, 4, 0, 3};  // (2, 3)
  OpResult r = run_forward({.op = "ReduceMax", .attrs = attrs({{"axes", Ints{1}}}), .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{2, 1});
  CHECK(r.values[0] == Doubles{5, 4});
  r = run_forward({.op = "ReduceMax", .attrs = attrs({{"axes", Ints{-2}}, {"keepdims", int64_t{0}}}),
                   .shapes = {{2, 3}}, .data = {x}}, 4);
  CHECK(r.shapes[0] == Shape{3});
  CHECK(r.values[0] == Doubles{4, 5, 3});
  r = run_forward({.op = "ReduceMax", .attrs = attrs({{"keepdims", int64_t{0}}}), .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{});
  CHECK(r.values[0] == Doubles{5});
  CHECK(gradient_error({.op = "ReduceMax", .attrs = attrs({{"axes", Ints{0, 2}}}), .shapes = {{3, 2, 4}}}) < 1e-6);
  CHECK(gradient_error({.op = "ReduceMax", .attrs = attrs({{"axes", Ints{-1}}, {"keepdims", int64_t{0}}}),
                        .shapes = {{2, 3, 5}}}) < 1e-6);
  CHECK(gradient_error({.op = "ReduceMax", .attrs = {}, .shapes = {{4, 3}}}) < 1e-6);
}

TEST_CASE("ReduceMax's gradient splits evenly among tied maxima, as torch.amax", "[ops][reduce]") {
  // Row 0 ties at 2 (twice), row 1 at 0 (three times): dy = [6, 3] goes 3 + 3 and 1 + 1 + 1.
  // The loss weighs the output by random w; with ties finite differences see a kink, so the gradient is
  // checked on a graph of ReduceMax alone through its emitted backward (run_forward of ReduceMaxGrad).
  OpResult r = run_forward({.op = "ReduceMaxGrad", .attrs = attrs({{"axes", Ints{1}}}),
                            .shapes = {{2, 1}, {2, 3}, {2, 1}},
                            .data = {{6, 3}, {2, -1, 2, 0, 0, 0}, {2, 0}}});
  CHECK(r.values[0] == Doubles{3, 0, 3, 1, 1, 1});
}

TEST_CASE("ReduceMax refuses bad axes", "[ops][reduce][errors]") {
  CHECK_THROWS_WITH(run_forward({.op = "ReduceMax", .attrs = attrs({{"axes", Ints{2}}}), .shapes = {{2, 3}}}),
                    Catch::Contains("out of range"));
  CHECK_THROWS_WITH(run_forward({.op = "ReduceMax", .attrs = attrs({{"axes", Ints{1, -1}}}), .shapes = {{2, 3}}}),
                    Catch::Contains("listed twice"));
}

// ------------------------------------------------------------------------------------------------ CumSum

TEST_CASE("CumSum inclusive, exclusive, reversed, along any axis", "[ops][scan]") {
  const Doubles x = {1, 2, 3, 4, 5, 6};  // (2, 3)
  auto cum = [&](Ints axis, int64_t exclusive, int64_t reverse) {
    return run_forward({.op = "CumSum",
                        .attrs = attrs({{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}}),
                        .shapes = {{2, 3}}, .data = {x}})
        .values[0];
  };
  CHECK(cum({1}, 0, 0) == Doubles{1, 3, 6, 4, 9, 15});
  CHECK(cum({-1}, 1, 0) == Doubles{0, 1, 3, 0, 4, 9});
  CHECK(cum({1}, 0, 1) == Doubles{6, 5, 3, 15, 11, 6});
  CHECK(cum({1}, 1, 1) == Doubles{5, 3, 0, 11, 6, 0});
  CHECK(cum({0}, 0, 0) == Doubles{1, 2, 3, 5, 7, 9});
  CHECK(cum({-2}, 1, 1) == Doubles{4, 5, 6, 0, 0, 0});
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1})
      for (int64_t axis : {0, 1, -1}) {
        INFO("exclusive " << exclusive << " reverse " << reverse << " axis " << axis);
        CHECK(gradient_error({.op = "CumSum",
                              .attrs = attrs({{"axis", Ints{axis}}, {"exclusive", exclusive}, {"reverse", reverse}}),
                              .shapes = {{3, 4, 2}}}) < 1e-6);
      }
  CHECK_THROWS_WITH(run_forward({.op = "CumSum", .attrs = attrs({{"axis", Ints{2}}}), .shapes = {{2, 3}}}),
                    Catch::Contains("out of range"));
  CHECK_THROWS_WITH(run_forward({.op = "CumSum", .attrs = {}, .shapes = {{2, 3}}}), Catch::Contains("must be constant"));
}

// ------------------------------------------------------------------------------------------------ Trilu

TEST_CASE("Trilu keeps the upper or lower triangle from diagonal k", "[ops][shape]") {
  const Doubles x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // (3, 4)
  auto tri = [&](int64_t upper, std::optional<int64_t> k) {
    Attrs a = attrs({{"upper", upper}});
    if (k) a.set("k", Ints{*k});
    return run_forward({.op = "Trilu", .attrs = a, .shapes = {{3, 4}}, .data = {x}}).values[0];
  };
  CHECK(tri(1, std::nullopt) == Doubles{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  CHECK(tri(1, 1) == Doubles{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  CHECK(tri(0, std::nullopt) == Doubles{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  CHECK(tri(0, -1) == Doubles{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  CHECK(tri(1, -5) == x);
  CHECK(tri(0, -5) == Doubles(12, 0.0));
  for (int64_t upper : {0, 1})
    CHECK(gradient_error({.op = "Trilu", .attrs = attrs({{"upper", upper}, {"k", Ints{1}}}), .shapes = {{2, 3, 4}}}) <
          1e-6);
  CHECK_THROWS_WITH(run_forward({.op = "Trilu", .attrs = {}, .shapes = {{4}}}), Catch::Contains("at least 2 dims"));
}

// ------------------------------------------------------------------------------------------------ Tile

TEST_CASE("Tile repeats along each dim", "[ops][shape]") {
  OpResult r = run_forward({.op = "Tile", .attrs = attrs({{"repeats", Ints{2, 3}}}), .shapes = {{2, 2}},
                            .data = {{1, 2, 3, 4}}});
  CHECK(r.shapes[0] == Shape{4, 6});
  CHECK(r.values[0] == Doubles{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,  //
                               1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  r = run_forward({.op = "Tile", .attrs = attrs({{"repeats", Ints{1, 2}}}), .shapes = {{2, 1}},
                   .dtypes = {DType::i64}, .data = {{7, -1}}}, 4);
  CHECK(r.values[0] == Doubles{7, 7, -1, -1});
  CHECK(gradient_error({.op = "Tile", .attrs = attrs({{"repeats", Ints{2, 1, 3}}}), .shapes = {{2, 3, 2}}}) < 1e-6);
  CHECK(gradient_error({.op = "Tile", .attrs = attrs({{"repeats", Ints{1, 1}}}), .shapes = {{2, 3}}}) < 1e-6);
  // dx sums the copies: dy of ones over repeats (2, 3) gives 6 everywhere.
  r = run_forward({.op = "TileGrad", .attrs = attrs({{"repeats", Ints{2, 3}}, {"shape", Ints{1, 2}}}),
                   .shapes = {{2, 6}}, .data = {Doubles(12, 1.0)}});
  CHECK(r.values[0] == Doubles{6, 6});
  CHECK_THROWS_WITH(run_forward({.op = "Tile", .attrs = attrs({{"repeats", Ints{2}}}), .shapes = {{2, 2}}}),
                    Catch::Contains("repeats has 1 entries"));
  CHECK_THROWS_WITH(run_forward({.op = "Tile", .attrs = attrs({{"repeats", Ints{0, 1}}}), .shapes = {{2, 2}}}),
                    Catch::Contains("at least 1"));
}
