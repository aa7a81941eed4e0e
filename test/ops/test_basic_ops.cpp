#include <catch2/catch.hpp>

#include "op_harness.h"

using namespace monet;
using namespace monet::test;

TEST_CASE("Relu forward on hand values, with its 1-bit mask", "[ops][relu]") {
  OpCase c{.op = "Relu", .shapes = {{2, 3}}, .data = {{-1, 0, 2, -3.5, 4, 0.5}}, .num_outputs = 2};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 3});
  CHECK(r.values[0] == std::vector<double>{0, 0, 2, 0, 4, 0.5});
  // Bits 2, 4, 5 of byte 0 (x > 0 at elements 2, 4, 5), padded to one 32-bit word.
  CHECK(r.shapes[1] == Shape{4});
  CHECK(r.values[1] == std::vector<double>{0b110100, 0, 0, 0});
  // 70 elements: three words; element 69 is bit 5 of byte 8.
  std::vector<double> x(70, -1.0);
  x[0] = x[31] = x[32] = x[69] = 1;
  r = run_forward({.op = "Relu", .shapes = {{70}}, .data = {x}, .num_outputs = 2});
  CHECK(r.values[1] == std::vector<double>{1, 0, 0, 0x80, 1, 0, 0, 0, 0x20, 0, 0, 0});
}

TEST_CASE("Relu backward matches finite differences with every ReluGrad implementation", "[ops][relu]") {
  for (int impl : {0, 1, 2}) {
    INFO("implementation " << impl);
    CHECK(gradient_error({.op = "Relu", .shapes = {{2, 3, 4, 5}}, .num_outputs = 2, .backward_impl = impl}) < 1e-6);
  }
}

TEST_CASE("ReluGrad's implementations agree: output- (y), input- (x) and intermediate-activated (mask)",
          "[ops][relu][impl]") {
  // ReluGrad(dy, y, x, mask): y = relu(x), so y > 0 exactly where x > 0 and where the mask bit is set.
  const std::vector<double> x = {-1, 0, 2, -3.5, 4, 0.5, NAN, -0.0, 1e-30}, dy = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const OpResult f = run_forward({.op = "Relu", .shapes = {{3, 3}}, .data = {x}, .num_outputs = 2});
  for (int fb : {8, 4})
    for (int impl : {0, 1, 2}) {
      INFO("float bytes " << fb << " implementation " << impl);
      OpCase c{.op = "ReluGrad", .shapes = {{3, 3}, {3, 3}, {3, 3}, {4}},
               .dtypes = {DType::f32, DType::f32, DType::f32, DType::u8}, .data = {dy, f.values[0], x, f.values[1]},
               .impl = impl};
      CHECK(run_forward(c, fb).values[0] == std::vector<double>{0, 0, 3, 0, 5, 6, 0, 0, 9});
    }
}

TEST_CASE("Relu and ReluGrad reject a missing or misshapen mask", "[ops][relu]") {
  CHECK_THROWS_WITH(run_forward({.op = "Relu", .shapes = {{2, 3}}}), Catch::Contains("2 outputs (Y, mask)"));
  CHECK_THROWS_WITH(run_forward({.op = "ReluGrad", .shapes = {{40}, {40}, {40}, {4}},
                                 .dtypes = {DType::f32, DType::f32, DType::f32, DType::u8}}),
                    Catch::Contains("mask must be uint8 of shape [8]"));
}

TEST_CASE("Sum accumulates and differentiates", "[ops][sum]") {
  OpCase c{.op = "Sum", .shapes = {{4}, {4}}, .data = {{1, 2, 3, 4}, {10, 20, 30, 40}}};
  CHECK(run_forward(c).values[0] == std::vector<double>{11, 22, 33, 44});
  CHECK(gradient_error({.op = "Sum", .shapes = {{3, 2}, {3, 2}, {3, 2}}}) < 1e-6);
}

TEST_CASE("ReduceSumTo sums broadcast dimensions", "[ops][reduce_sum_to]") {
  Attrs a;
  a.set("shape", std::vector<int64_t>{2, 1});
  OpCase c{.op = "ReduceSumTo", .attrs = a, .shapes = {{2, 3}}, .data = {{1, 2, 3, 4, 5, 6}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 1});
  CHECK(r.values[0] == std::vector<double>{6, 15});
  Attrs b;
  b.set("shape", std::vector<int64_t>{3});
  CHECK(gradient_error({.op = "ReduceSumTo", .attrs = b, .shapes = {{2, 4, 3}}}) < 1e-6);
  Attrs to;
  to.set("shape", std::vector<int64_t>{4, 2, 3});
  CHECK(gradient_error({.op = "BroadcastTo", .attrs = to, .shapes = {{2, 1}}}) < 1e-6);
}
