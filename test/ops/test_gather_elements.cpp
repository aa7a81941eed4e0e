// GatherElements (torch.gather; lib/ops/gather_elements): forward on hand values along each axis with negative
// indices, backward against finite differences in double with repeated indices (their gradients add), bad shapes,
// dtypes and indices refused.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "op_harness.h"

using namespace monet;
using namespace monet::test;

namespace {

Attrs axis(int64_t a) {
  Attrs at;
  at.set("axis", a);
  return at;
}

OpCase gather_case(int64_t ax, Shape x, Shape idx, std::vector<double> indices, std::vector<double> data = {}) {
  return {.op = "GatherElements", .attrs = axis(ax), .shapes = {std::move(x), std::move(idx)},
          .dtypes = {DType::f32, DType::i64}, .data = {std::move(data), std::move(indices)}};
}

}  // namespace

TEST_CASE("GatherElements: forward along each axis, backward against finite differences", "[ops][gather_elements]") {
  // data (2, 3) = [[1, 2, 3], [4, 5, 6]]
  const std::vector<double> data = {1, 2, 3, 4, 5, 6};
  // axis 1: y[i][j] = data[i][idx[i][j]]; -1 is the last column.
  OpResult r = run_forward(gather_case(1, {2, 3}, {2, 2}, {2, 0, -1, 1}, data));
  CHECK(r.shapes[0] == Shape{2, 2});
  CHECK(r.values[0] == std::vector<double>{3, 1, 6, 5});
  // axis 0: y[i][j] = data[idx[i][j]][j], indices narrower than the data (columns 0 and 1 only).
  r = run_forward(gather_case(0, {2, 3}, {3, 2}, {1, 0, 0, 0, 1, 1}, data));
  CHECK(r.shapes[0] == Shape{3, 2});
  CHECK(r.values[0] == std::vector<double>{4, 2, 1, 2, 4, 5});

  // Gradients: repeated indices along the axis (their dy elements add), every axis of a rank-3 tensor.
  CHECK(gradient_error(gather_case(1, {2, 3}, {2, 4}, {0, 0, 2, 2, 1, -3, 1, 2})) < 1e-6);
  CHECK(gradient_error(gather_case(0, {3, 2, 2}, {4, 2, 1}, {0, 2, 2, 1, -1, 0, 1, 1})) < 1e-6);
  CHECK(gradient_error(gather_case(-1, {2, 2, 3}, {2, 1, 5}, {0, 1, 2, 2, 0, 2, 2, 1, 0, 0})) < 1e-6);
}

TEST_CASE("GatherElements refuses mismatched ranks, oversized indices and bad indices", "[ops][gather_elements]") {
  CHECK_THROWS_WITH(run_forward(gather_case(0, {2, 3}, {2}, {0, 1})), Catch::Contains("must have the data's rank"));
  CHECK_THROWS_WITH(run_forward(gather_case(0, {2, 3}, {2, 4}, std::vector<double>(8, 0))),
                    Catch::Contains("exceed the data"));
  CHECK_THROWS_WITH(run_forward(gather_case(2, {2, 3}, {2, 3}, std::vector<double>(6, 0))),
                    Catch::Contains("axis 2 is out of range"));
  CHECK_THROWS_WITH(run_forward(gather_case(1, {2, 3}, {2, 1}, {0, 3})), Catch::Contains("index 3 is out of range"));
  CHECK_THROWS_AS(run_forward({.op = "GatherElements", .attrs = axis(0), .shapes = {{2}, {2}},
                               .dtypes = {DType::f32, DType::f32}}),
                  Error);
}
