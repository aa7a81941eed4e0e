// Max and Min (lib/ops/max_min), and the masks' And, Or, Xor and Not (lib/ops/logic). Max and Min: forward on hand
// values with broadcasting and NaN, the gradients' rule at ties and NaN as PyTorch's maximum/minimum backward writes
// it, and the backward against central finite differences away from ties. The masks: truth tables, broadcasting.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "op_harness.h"
#include "ops/spread.h"

using namespace monet;
using namespace monet::test;

TEST_CASE("Max and Min forward with broadcasting and NaN", "[elementwise][max_min]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  OpCase mx{.op = "Max", .shapes = {{2, 3}, {3}}, .data = {{-2, 0, 5, 1, nan, -7}, {0, 1, nan}}};
  const std::vector<double> y = run_forward(mx).values[0];
  CHECK(y[0] == 0);
  CHECK(y[1] == 1);
  CHECK(std::isnan(y[2]));  // NaN in B
  CHECK(y[3] == 1);
  CHECK(std::isnan(y[4]));  // NaN in A
  CHECK(std::isnan(y[5]));
  OpCase mn{.op = "Min", .shapes = {{2, 3}, {3}}, .data = {{-2, 0, 5, 1, 2, -7}, {0, 1, 4}}};
  check_exact(run_forward(mn).values[0], {-2, 0, 4, 0, 1, -7});
  CHECK_THROWS_AS(run_forward({.op = "Max", .shapes = {{2, 3}, {2}}}), monet::Error);  // no broadcast
}

TEST_CASE("Max and Min gradients: ties split dY, NaN gives both operands all of it, B summed to its shape",
          "[elementwise][max_min]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> dy = {1, 2, 4, 8}, a = {3, 1, 2, nan}, b = {1, 3, 2, 0};
  auto grad = [&](const char* op) {
    OpCase c{.op = op, .shapes = {{4}, {4}, {4}}, .data = {dy, a, b}};
    c.attrs.set("shape", Shape{4});
    return run_forward(c).values[0];
  };
  check_exact(grad("MaxGradA"), {1, 0, 2, 8});
  check_exact(grad("MaxGradB"), {0, 2, 2, 8});
  check_exact(grad("MinGradA"), {0, 2, 2, 8});
  check_exact(grad("MinGradB"), {1, 0, 2, 8});
  // B of shape (1): its dY summed where it does not lose (against 3, 1, 2, 0: loses to 3, ties with 2).
  OpCase s{.op = "MaxGradB", .shapes = {{4}, {4}, {1}}, .data = {dy, {3, 1, 2, 0}, {2}}};
  s.attrs.set("shape", Shape{1});
  check_exact(run_forward(s).values[0], {2 + 2 + 8});
  for (const char* op : {"Max", "Min"}) {
    INFO(op);
    // Operands at least 0.013 apart everywhere: no tie within the finite differences' step.
    CHECK(gradient_error({.op = op, .shapes = {{2, 3, 4}, {3, 1}}, .data = {spread(24, -3, 3), {-0.95, 0.05, 1.05}}}) <
          1e-6);
    const std::vector<double> b6 = {1.3, -1.1, 0.4, 0.2, -0.3, 2.5};
    CHECK(gradient_error({.op = op, .shapes = {{6}, {6}}, .data = {spread(6, -2, 2), b6}}) < 1e-6);
  }
}

TEST_CASE("And, Or, Xor and Not of bool masks, with broadcasting, other dtypes refused", "[elementwise][logic]") {
  const std::vector<DType> masks = {DType::u8, DType::u8};
  const std::vector<std::vector<double>> ab = {{0, 1, 0, 1, 1, 0}, {1, 0, 1}};
  auto run = [&](const char* op) {
    return run_forward({.op = op, .shapes = {{2, 3}, {3}}, .dtypes = masks, .data = ab}).values[0];
  };
  check_exact(run("And"), {0, 0, 0, 1, 0, 0});
  check_exact(run("Or"), {1, 1, 1, 1, 1, 1});
  check_exact(run("Xor"), {1, 1, 1, 0, 1, 1});
  check_exact(run_forward({.op = "Not", .shapes = {{3}}, .dtypes = {DType::u8}, .data = {{0, 1, 1}}}).values[0],
              {1, 0, 0});
  CHECK_THROWS_AS(run_forward({.op = "And", .shapes = {{3}, {3}}}), monet::Error);  // floats
}
