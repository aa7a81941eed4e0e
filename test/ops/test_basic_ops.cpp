#include <catch2/catch.hpp>

#include "op_harness.h"

using namespace monet;
using namespace monet::test;

TEST_CASE("Relu forward on hand values", "[ops][relu]") {
  OpCase c{.op = "Relu", .shapes = {{2, 3}}, .data = {{-1, 0, 2, -3.5, 4, 0.5}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 3});
  CHECK(r.values[0] == std::vector<double>{0, 0, 2, 0, 4, 0.5});
}

TEST_CASE("Relu backward matches finite differences", "[ops][relu]") {
  CHECK(gradient_error({.op = "Relu", .shapes = {{2, 3, 4, 5}}}) < 1e-6);
}

TEST_CASE("ReluGrad's implementations agree: output-activated (y) and input-activated (x)", "[ops][relu][impl]") {
  // ReluGrad(dy, y, x): y = relu(x) so y > 0 exactly where x > 0, zeros included.
  const std::vector<double> x = {-1, 0, 2, -3.5, 4, 0.5}, dy = {1, 2, 3, 4, 5, 6};
  const std::vector<double> y = run_forward({.op = "Relu", .shapes = {{2, 3}}, .data = {x}}).values[0];
  for (int fb : {8, 4})
    for (int impl : {0, 1}) {
      INFO("float bytes " << fb << " implementation " << impl);
      OpCase c{.op = "ReluGrad", .shapes = {{2, 3}, {2, 3}, {2, 3}}, .data = {dy, y, x}, .impl = impl};
      CHECK(run_forward(c, fb).values[0] == std::vector<double>{0, 0, 3, 0, 5, 6});
    }
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
