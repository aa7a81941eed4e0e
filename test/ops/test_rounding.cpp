// Sign, Floor, Ceil and Round (lib/ops/rounding): forward on hand values (Round takes a half to the even neighbour,
// Sign keeps 0 and NaN). That no gradient passes through them is checked against PyTorch on rounding_ops.onnx.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "op_harness.h"

using namespace monet;
using namespace monet::test;

TEST_CASE("Sign, Floor, Ceil and Round forward", "[elementwise][rounding]") {
  const std::vector<double> x = {-2.5, -1.5, -0.5, 0, 0.5, 1.5, 2.5, 0.7};
  auto run = [&](const char* op) { return run_forward({.op = op, .shapes = {{8}}, .data = {x}}).values[0]; };
  check_exact(run("Round"), {-2, -2, -0.0, 0, 0, 2, 2, 1});
  check_exact(run("Floor"), {-3, -2, -1, 0, 0, 1, 2, 0});
  check_exact(run("Ceil"), {-2, -1, -0.0, 0, 1, 2, 3, 1});
  check_exact(run("Sign"), {-1, -1, -1, 0, 1, 1, 1, 1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(std::isnan(run_forward({.op = "Sign", .shapes = {{1}}, .data = {{nan}}}).values[0][0]));
}
