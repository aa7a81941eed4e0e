// Activations beyond ReLU's family of the zoo: LeakyRelu, PRelu, Elu, Selu, Softplus, Mish and Abs. Forward on
// hand values (the formulas of the ONNX spec, evaluated here in double), backward against central finite
// differences away from the kinks, the gradient's value at a kink as PyTorch defines it, and which saved tensor
// each backward reads.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "op_harness.h"
#include "ops/spread.h"

using namespace monet;
using namespace monet::test;

namespace {

Attrs alpha(double a) {
  Attrs at;
  at.set("alpha", a);
  return at;
}

double softplus(double x) { return std::log(1 + std::exp(x)); }

}  // namespace

TEST_CASE("LeakyRelu forward, backward, and the saved tensor by alpha's sign", "[elementwise]") {
  OpCase c{.op = "LeakyRelu", .shapes = {{4}}, .data = {{-2, -0.5, 0, 3}}};
  check_exact(run_forward(c).values[0], {-0.02, -0.005, 0, 3});  // alpha = 0.01 by default; -2 * 0.01 as double
  c.attrs = alpha(-0.5);
  check_exact(run_forward(c).values[0], {1, 0.25, 0, 3});
  // x = 0 takes alpha (torch: x > 0 ? dy : dy * alpha).
  OpCase g{.op = "LeakyReluGrad", .attrs = alpha(0.2), .shapes = {{3}, {3}}, .data = {{1, 1, 1}, {-1, 0, 2}}};
  check_relative(run_forward(g).values[0], {0.2, 0.2, 1}, 1e-15);
  for (double a : {0.01, 0.2, -0.5}) {
    INFO("alpha " << a);
    CHECK(gradient_error({.op = "LeakyRelu", .attrs = alpha(a), .shapes = {{3, 8}}, .data = {spread(24, -3, 3)}}) <
          1e-6);
  }
}

TEST_CASE("PRelu forward, backward to X and to the slope, per channel and one slope", "[elementwise]") {
  OpCase c{.op = "PRelu", .shapes = {{1, 2, 2}, {2, 1}}, .data = {{-2, 0, 3, -1}, {0.25, -0.5}}};
  check_exact(run_forward(c).values[0], {-0.5, 0, 3, 0.5});
  // x = 0 takes the slope's branch (torch): dX = slope * dY there, and x * dY = 0 adds nothing to dslope.
  OpCase gx{.op = "PReluGradX", .shapes = {{1, 2, 2}, {1, 2, 2}, {2, 1}},
            .data = {{1, 1, 1, 1}, {-2, 0, 3, -1}, {0.25, -0.5}}};
  gx.attrs.set("shape", Shape{1, 2, 2});
  check_exact(run_forward(gx).values[0], {0.25, 0.25, 1, -0.5});
  OpCase gs{.op = "PReluGradSlope", .shapes = {{1, 2, 2}, {1, 2, 2}}, .data = {{1, 1, 1, 1}, {-2, 0, 3, -1}}};
  gs.attrs.set("shape", Shape{2, 1});
  check_exact(run_forward(gs).values[0], {-2, -1});
  CHECK(gradient_error({.op = "PRelu", .shapes = {{2, 3, 4}, {3, 1}}, .data = {spread(24, -3, 3), {0.2, -0.3, 1.5}}}) <
        1e-6);
  CHECK(gradient_error({.op = "PRelu", .shapes = {{2, 3, 4}, {1}}, .data = {spread(24, -3, 3), {0.1}}}) < 1e-6);
  // The slope broadcasts to X, not X to the slope.
  CHECK_THROWS_AS(run_forward({.op = "PRelu", .shapes = {{3}, {2, 3}}}), monet::Error);
}

TEST_CASE("Elu and Selu forward and backward", "[elementwise]") {
  const std::vector<double> x{-2, -0.5, 0, 1.5};
  OpCase e{.op = "Elu", .shapes = {{4}}, .data = {x}};
  check_relative(run_forward(e).values[0], {std::expm1(-2.0), std::expm1(-0.5), 0, 1.5}, 1e-15);
  e.attrs = alpha(0.5);
  check_relative(run_forward(e).values[0], {0.5 * std::expm1(-2.0), 0.5 * std::expm1(-0.5), 0, 1.5}, 1e-15);
  const double a = 1.67326319217681884765625, s = 1.05070102214813232421875;  // ONNX's defaults
  OpCase selu{.op = "Selu", .shapes = {{4}}, .data = {x}};
  check_relative(run_forward(selu).values[0], {s * a * std::expm1(-2.0), s * a * std::expm1(-0.5), 0, s * 1.5},
                 1e-15);
  CHECK(gradient_error({.op = "Elu", .shapes = {{3, 8}}, .data = {spread(24, -3, 3)}}) < 1e-6);
  CHECK(gradient_error({.op = "Elu", .attrs = alpha(0.3), .shapes = {{3, 8}}, .data = {spread(24, -3, 3)}}) < 1e-6);
  CHECK(gradient_error({.op = "Selu", .shapes = {{3, 8}}, .data = {spread(24, -3, 3)}}) < 1e-6);
  // At x = 0 the gradient is gamma * alpha (torch's elu_backward takes x <= 0's branch).
  OpCase g{.op = "EluGrad", .shapes = {{2}, {2}}, .data = {{1, 1}, {0, 1}}};
  g.attrs.set("alpha", 2.0);
  g.attrs.set("gamma", 3.0);
  check_relative(run_forward(g).values[0], {6, 3}, 1e-15);
}

TEST_CASE("Softplus and Mish forward without overflow, and backward", "[elementwise]") {
  OpCase c{.op = "Softplus", .shapes = {{4}}, .data = {{-800, -1, 2, 800}}};
  check_relative(run_forward(c).values[0], {0, softplus(-1), softplus(2), 800}, 1e-15);
  OpCase m{.op = "Mish", .shapes = {{4}}, .data = {{-800, -1, 2, 800}}};
  check_relative(run_forward(m).values[0], {0, -std::tanh(softplus(-1)), 2 * std::tanh(softplus(2)), 800}, 1e-15);
  CHECK(gradient_error({.op = "Softplus", .shapes = {{3, 8}}, .data = {spread(24, -6, 6)}}) < 1e-6);
  CHECK(gradient_error({.op = "Mish", .shapes = {{3, 8}}, .data = {spread(24, -6, 6)}}) < 1e-6);
  // Float: the same values as double within float rounding, far into both tails.
  OpCase f{.op = "Mish", .shapes = {{6}}, .data = {{-90, -20, -0.25, 0.25, 20, 90}}};
  check_to_scale(run_forward(f, 4).values[0], run_forward(f).values[0], 1e-6);
}

TEST_CASE("Abs forward, backward, and a zero gradient at zero", "[elementwise]") {
  check_exact(run_forward({.op = "Abs", .shapes = {{3}}, .data = {{-2.5, 0, 4}}}).values[0], {2.5, 0, 4});
  OpCase g{.op = "AbsGrad", .shapes = {{3}, {3}}, .data = {{2, 2, 2}, {-1, 0, 3}}};
  check_exact(run_forward(g).values[0], {-2, 0, 2});
  CHECK(gradient_error({.op = "Abs", .shapes = {{3, 8}}, .data = {spread(24, -3, 3)}}) < 1e-6);
}

TEST_CASE("the new activations reject integer inputs", "[elementwise]") {
  for (const char* op : {"LeakyRelu", "Elu", "Selu", "Softplus", "Mish", "Abs"})
    CHECK_THROWS_AS(run_forward({.op = op, .shapes = {{3}}, .dtypes = {DType::i64}}), monet::Error);
}
