// Elementwise ops: activations (Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Identity) and the broadcasting binary
// ops (Add, Sub, Mul, Div): forward on hand values, backward against central finite differences, shape errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "op_harness.h"
#include "ops/spread.h"

using namespace monet;
using namespace monet::test;

namespace {

// n values with |x| in [0.5, 1.5] and alternating signs: safe denominators.
std::vector<double> away_from_zero(int64_t n) {
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = (i % 2 ? -1.0 : 1.0) * (0.5 + std::fmod(0.37 * static_cast<double>(i), 1.0));
  return x;
}

Attrs clip_bounds(std::optional<double> lo, std::optional<double> hi) {
  Attrs a;
  if (lo) a.set("min", std::vector<double>{*lo});
  if (hi) a.set("max", std::vector<double>{*hi});
  return a;
}

}  // namespace

// ------------------------------------------------------------------------------------------------- activations

TEST_CASE("Clip forward on hand values", "[elementwise]") {
  OpCase c{.op = "Clip", .attrs = clip_bounds(0.0, 6.0), .shapes = {{2, 3}}, .data = {{-1, 0, 3, 6, 7.5, 2}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 3});
  CHECK(r.values[0] == std::vector<double>{0, 0, 3, 6, 6, 2});
  // Absent bounds are -inf / +inf.
  c.attrs = clip_bounds(std::nullopt, 1.0);
  CHECK(run_forward(c).values[0] == std::vector<double>{-1, 0, 1, 1, 1, 1});
  c.attrs = clip_bounds(0.5, std::nullopt);
  CHECK(run_forward(c).values[0] == std::vector<double>{0.5, 0.5, 3, 6, 7.5, 2});
  c.attrs = {};
  CHECK(run_forward(c).values[0] == std::vector<double>{-1, 0, 3, 6, 7.5, 2});
  // The float kernel agrees.
  c.attrs = clip_bounds(0.0, 6.0);
  CHECK(run_forward(c, 4).values[0] == std::vector<double>{0, 0, 3, 6, 6, 2});
  // A bound that is not one number is rejected.
  Attrs bad;
  bad.set("min", std::vector<double>{0, 1});
  CHECK_THROWS_AS(run_forward({.op = "Clip", .attrs = bad, .shapes = {{2}}}), monet::Error);
}

TEST_CASE("ClipGrad: input-activated on the closed interval (torch.clamp), output-activated on the open one",
          "[elementwise][impl]") {
  const std::vector<double> dy = {1, 2, 3, 4, 5, 6}, x = {-1, 0, 3, 6, 7.5, -0.0};
  const std::vector<double> y = run_forward({.op = "Clip", .attrs = clip_bounds(0.0, 6.0), .shapes = {{6}},
                                             .data = {x}}).values[0];
  OpCase c{.op = "ClipGrad", .attrs = clip_bounds(0.0, 6.0), .shapes = {{6}, {6}, {6}}, .data = {dy, x, y}};
  CHECK(run_forward(c).values[0] == std::vector<double>{0, 2, 3, 4, 0, 6});
  // From y (relu6/hardtanh's rule): x exactly on a bound (0, 6, -0) gets no gradient; elsewhere the same.
  c.impl = 1;
  CHECK(run_forward(c).values[0] == std::vector<double>{0, 0, 3, 0, 0, 0});
  const std::vector<double> inside = spread(24, -1, 1);  // no element exactly on a bound
  const std::vector<double> ys = run_forward({.op = "Clip", .attrs = clip_bounds(-0.5, 0.5), .shapes = {{24}},
                                              .data = {inside}}).values[0];
  const std::vector<double> dys = random_values({24}, 5);
  OpCase in{.op = "ClipGrad", .attrs = clip_bounds(-0.5, 0.5), .shapes = {{24}, {24}, {24}}, .data = {dys, inside, ys}};
  OpCase out = in;
  out.impl = 1;
  CHECK(run_forward(in).values[0] == run_forward(out).values[0]);
}

TEST_CASE("Clip backward matches finite differences", "[elementwise]") {
  CHECK(gradient_error({.op = "Clip", .attrs = clip_bounds(-0.5, 0.5), .shapes = {{4, 6}},
                        .data = {spread(24, -1, 1)}}) < 1e-6);
  CHECK(gradient_error({.op = "Clip", .attrs = clip_bounds(std::nullopt, 0.25), .shapes = {{3, 8}},
                        .data = {spread(24, -1, 1)}}) < 1e-6);
}

TEST_CASE("Sigmoid and Tanh forward on hand values", "[elementwise]") {
  OpCase s{.op = "Sigmoid", .shapes = {{4}}, .data = {{0, 1, -2, -800}}};
  // exp and tanh are not exact in double: a few ulps (1e-15 relative); the float kernel within 1e-6 relative (about
  // 8 of float's ulps).
  check_relative(run_forward(s).values[0], {0.5, 1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(2.0)), 0}, 1e-15);
  check_relative(run_forward(s, 4).values[0], {0.5, 1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(2.0)), 0}, 1e-6);
  OpCase t{.op = "Tanh", .shapes = {{3}}, .data = {{0, 0.5, -1}}};
  check_relative(run_forward(t).values[0], {0, std::tanh(0.5), std::tanh(-1.0)}, 1e-15);
}

TEST_CASE("Sigmoid and Tanh backward match finite differences", "[elementwise]") {
  CHECK(gradient_error({.op = "Sigmoid", .shapes = {{2, 3, 4}}, .data = {spread(24, -4, 4)}}) < 1e-6);
  CHECK(gradient_error({.op = "Tanh", .shapes = {{2, 3, 4}}, .data = {spread(24, -3, 3)}}) < 1e-6);
}

TEST_CASE("HardSigmoid forward, kinks and backward", "[elementwise]") {
  OpCase c{.op = "HardSigmoid", .shapes = {{5}}, .data = {{-3, -1, 0, 1, 3}}};
  check_exact(run_forward(c).values[0], {0, 0.3, 0.5, 0.7, 1});  // 0.2 x + 0.5 rounds to the doubles nearest 0.3, 0.7
  Attrs torch_like;  // torch's hardsigmoid: x / 6 + 1/2
  torch_like.set("alpha", 1.0 / 6);
  torch_like.set("beta", 0.5);
  c.attrs = torch_like;
  check_relative(run_forward(c).values[0], {0, 1.0 / 3, 0.5, 2.0 / 3, 1}, 1e-15);  // alpha = 1/6 is rounded
  // The gradient is alpha strictly inside the linear part only (PyTorch's hardsigmoid_backward: 0 at x = +-3).
  OpCase g{.op = "HardSigmoidGrad", .attrs = torch_like, .shapes = {{5}, {5}},
           .data = {{1, 1, 1, 1, 1}, {-3, -2.9, 0, 2.9, 3}}};
  check_exact(run_forward(g).values[0], {0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0});  // alpha itself
  CHECK(gradient_error({.op = "HardSigmoid", .shapes = {{4, 6}}, .data = {spread(24, -4, 4)}}) < 1e-6);
  CHECK(gradient_error({.op = "HardSigmoid", .attrs = torch_like, .shapes = {{4, 6}}, .data = {spread(24, -4, 4)}}) <
        1e-6);
}

TEST_CASE("HardSwish forward, kinks and backward", "[elementwise]") {
  OpCase c{.op = "HardSwish", .shapes = {{7}}, .data = {{-4, -3, -1, 0, 1, 3, 4}}};
  check_exact(run_forward(c).values[0], {0, 0, -1.0 / 3, 0, 2.0 / 3, 3, 4});  // x (x + 3) / 6: one rounding each
  // torch 1.13's hardswish_backward: 0 below -3, dy * (x/3 + 1/2) on [-3, 3] (boundaries included), dy above 3.
  OpCase g{.op = "HardSwishGrad", .shapes = {{6}, {6}}, .data = {{1, 1, 1, 1, 1, 1}, {-3.5, -3, 0, 1.5, 3, 3.5}}};
  check_exact(run_forward(g).values[0], {0, -0.5, 0.5, 1, 1.5, 1});
  CHECK(gradient_error({.op = "HardSwish", .shapes = {{4, 6}}, .data = {spread(24, -5, 5)}}) < 1e-6);
}

TEST_CASE("Identity copies any dtype and passes the gradient through", "[elementwise]") {
  OpCase c{.op = "Identity", .shapes = {{2, 2}}, .data = {{1, -2, 3.5, 4}}};
  CHECK(run_forward(c).values[0] == std::vector<double>{1, -2, 3.5, 4});
  CHECK(run_forward(c, 4).values[0] == std::vector<double>{1, -2, 3.5, 4});
  OpCase i{.op = "Identity", .shapes = {{3}}, .dtypes = {DType::i64}, .data = {{7, 8, 9}}};
  CHECK(run_forward(i, 4).values[0] == std::vector<double>{7, 8, 9});
  CHECK(gradient_error({.op = "Identity", .shapes = {{3, 4}}}) < 1e-6);
}

TEST_CASE("Activations reject integer inputs", "[elementwise]") {
  for (const char* op : {"Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"})
    CHECK_THROWS_AS(run_forward({.op = op, .shapes = {{3}}, .dtypes = {DType::i64}}), monet::Error);
}

// ------------------------------------------------------------------------------------------------- binary ops

TEST_CASE("Binary ops forward on equal shapes", "[elementwise]") {
  std::vector<double> a{1, 2, 3, 4}, b{2, -4, 0.5, 8};
  auto run = [&](const char* op) {
    return run_forward({.op = op, .shapes = {{2, 2}, {2, 2}}, .data = {a, b}}).values[0];
  };
  CHECK(run("Add") == std::vector<double>{3, -2, 3.5, 12});
  CHECK(run("Sub") == std::vector<double>{-1, 6, 2.5, -4});
  CHECK(run("Mul") == std::vector<double>{2, -8, 1.5, 32});
  CHECK(run("Div") == std::vector<double>{0.5, -0.5, 6, 0.5});
}

TEST_CASE("Binary ops broadcast like numpy", "[elementwise]") {
  // (2,3) + (3) and the mirrored (3) - (2,3)
  OpCase add{.op = "Add", .shapes = {{2, 3}, {3}}, .data = {{1, 2, 3, 4, 5, 6}, {10, 20, 30}}};
  OpResult r = run_forward(add);
  CHECK(r.shapes[0] == Shape{2, 3});
  CHECK(r.values[0] == std::vector<double>{11, 22, 33, 14, 25, 36});
  CHECK(run_forward(add, 4).values[0] == std::vector<double>{11, 22, 33, 14, 25, 36});
  OpCase sub{.op = "Sub", .shapes = {{3}, {2, 3}}, .data = {{10, 20, 30}, {1, 2, 3, 4, 5, 6}}};
  CHECK(run_forward(sub).values[0] == std::vector<double>{9, 18, 27, 6, 15, 24});

  // (2,1,4) * (3,1) -> (2,3,4): out[n][j][k] = a[n][k] * b[j]
  std::vector<double> a{1, 2, 3, 4, 5, 6, 7, 8}, b{1, 10, 100};
  OpCase mul{.op = "Mul", .shapes = {{2, 1, 4}, {3, 1}}, .data = {a, b}};
  r = run_forward(mul);
  CHECK(r.shapes[0] == Shape{2, 3, 4});
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want.push_back(a[n * 4 + k] * b[j]);
  CHECK(r.values[0] == want);
  CHECK(run_forward(mul, 4).values[0] == want);

  // Scalar-shaped operands: {} and {1}
  OpCase subs{.op = "Sub", .shapes = {{2, 2}, {}}, .data = {{1, 2, 3, 4}, {0.5}}};
  r = run_forward(subs);
  CHECK(r.shapes[0] == Shape{2, 2});
  CHECK(r.values[0] == std::vector<double>{0.5, 1.5, 2.5, 3.5});
  OpCase divs{.op = "Div", .shapes = {{1}, {2, 2}}, .data = {{2}, {1, 2, 4, 8}}};
  CHECK(run_forward(divs).values[0] == std::vector<double>{2, 1, 0.5, 0.25});
  OpCase scal{.op = "Mul", .shapes = {{}, {}}, .data = {{3}, {-2}}};
  r = run_forward(scal);
  CHECK(r.shapes[0] == Shape{});
  CHECK(r.values[0] == std::vector<double>{-6});
  OpCase one{.op = "Add", .shapes = {{}, {1}}, .data = {{3}, {-2}}};
  CHECK(run_forward(one).shapes[0] == Shape{1});
}

TEST_CASE("Binary ops reject shapes that do not broadcast and integer inputs", "[elementwise]") {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    CHECK_THROWS_AS(run_forward({.op = op, .shapes = {{2, 3}, {4}}}), monet::Error);
    CHECK_THROWS_AS(run_forward({.op = op, .shapes = {{2, 3}, {3, 2}}}), monet::Error);
    CHECK_THROWS_AS(run_forward({.op = op, .shapes = {{3}}}), monet::Error);
    CHECK_THROWS_AS(run_forward({.op = op, .shapes = {{3}, {3}}, .dtypes = {DType::i64, DType::f32}}), monet::Error);
  }
  try {
    run_forward({.op = "Add", .shapes = {{2, 3}, {4}}});
  } catch (const monet::Error& e) {
    CHECK(std::string(e.what()).find("do not broadcast") != std::string::npos);
  }
}

TEST_CASE("Binary ops backward match finite differences, broadcasting included", "[elementwise]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{2, 1, 4}, {3, 1}},
      {{2, 3, 4}, {}},  {{1}, {2, 3}}, {{2, 3, 1, 1}, {2, 3, 2, 2}}, {{}, {}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (auto& [sa, sb] : cases) {
      INFO(op << " " << shape_str(sa) << " " << shape_str(sb));
      OpCase c{.op = op, .shapes = {sa, sb}, .data = {spread(numel(sa), -2, 2), away_from_zero(numel(sb))}};
      CHECK(gradient_error(c) < 1e-6);
      // One side differentiated at a time (the other a constant or data).
      c.grad = {true, false};
      CHECK(gradient_error(c) < 1e-6);
      c.grad = {false, true};
      CHECK(gradient_error(c) < 1e-6);
    }
  }
}
