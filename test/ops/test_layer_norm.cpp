// LayerNorm (what the importer makes of nn.LayerNorm): forward against the decomposition torch exports at opset 13
// computed here in double, backward (input- and output-activated, the statistics' gradients) against finite
// differences, and the shape rule's and the output-activated form's refusals.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "op_harness.h"

using namespace monet;
using namespace monet::test;

namespace {

Attrs ln_attrs(int64_t axis, double epsilon) {
  Attrs a;
  a.set("axis", axis);
  a.set("epsilon", epsilon);
  return a;
}

}  // namespace

TEST_CASE("LayerNorm equals the decomposition torch exports for nn.LayerNorm", "[ops][layer_norm]") {
  // X (2, 3, 4) normalised over the last dim, then over the last two.
  for (int64_t axis : {-1, 1, -2}) {
    const Shape x_shape = {2, 3, 4};
    const int64_t a = axis < 0 ? axis + 3 : axis;
    const Shape norm(x_shape.begin() + a, x_shape.end());
    const int64_t D = numel(norm), R = numel(x_shape) / D;
    const double eps = 1e-3;
    const std::vector<double> x = random_values(x_shape, 3), w = random_values(norm, 4), b = random_values(norm, 5);
    const OpResult r = run_forward(
        {.op = "LayerNorm", .attrs = ln_attrs(axis, eps), .shapes = {x_shape, norm, norm}, .data = {x, w, b},
         .num_outputs = 3});
    INFO("axis " << axis);
    Shape stat = x_shape;
    for (size_t d = static_cast<size_t>(a); d < stat.size(); ++d) stat[d] = 1;
    CHECK(r.shapes[0] == x_shape);
    CHECK(r.shapes[1] == stat);
    CHECK(r.shapes[2] == stat);
    for (int64_t row = 0; row < R; ++row) {
      // m = ReduceMean(x), d = x - m, v = ReduceMean(d^2), y = d / sqrt(v + eps) * w + b
      double m = 0, v = 0;
      for (int64_t i = 0; i < D; ++i) m += x[row * D + i] / static_cast<double>(D);
      for (int64_t i = 0; i < D; ++i) v += std::pow(x[row * D + i] - m, 2) / static_cast<double>(D);
      CHECK(r.values[1][row] == Approx(m).epsilon(0).margin(1e-14));
      CHECK(r.values[2][row] == Approx(1 / std::sqrt(v + eps)).epsilon(1e-13));
      for (int64_t i = 0; i < D; ++i)
        CHECK(r.values[0][row * D + i] ==
              Approx((x[row * D + i] - m) / std::sqrt(v + eps) * w[i] + b[i]).epsilon(1e-12).margin(1e-14));
    }
  }
}

TEST_CASE("LayerNorm backward matches finite differences, input- and output-activated", "[ops][layer_norm]") {
  for (int impl : {0, 1})
    for (auto [x, axis] : {std::pair{Shape{2, 3, 4}, int64_t{-1}}, std::pair{Shape{3, 2, 5}, int64_t{1}},
                           std::pair{Shape{4, 6}, int64_t{-1}}, std::pair{Shape{7}, int64_t{0}}}) {
      const int64_t a = axis < 0 ? axis + static_cast<int64_t>(x.size()) : axis;
      const Shape norm(x.begin() + a, x.end());
      INFO("X " << shape_str(x) << " axis " << axis << " backward implementation " << impl);
      // Every output in the loss: Mean and InvStdDev's gradients go through LayerNormStatGrad.
      CHECK(gradient_error({.op = "LayerNorm", .attrs = ln_attrs(axis, 1e-5), .shapes = {x, norm, norm},
                            .num_outputs = 3, .backward_impl = impl}) < 1e-6);
      // Only X; only the affine parameters.
      CHECK(gradient_error({.op = "LayerNorm", .attrs = ln_attrs(axis, 0.1), .shapes = {x, norm, norm},
                            .grad = {true, false, false}, .num_outputs = 3, .seed = 9, .backward_impl = impl}) < 1e-6);
      CHECK(gradient_error({.op = "LayerNorm", .attrs = ln_attrs(axis, 1e-5), .shapes = {x, norm, norm},
                            .grad = {false, true, true}, .num_outputs = 3, .seed = 11, .backward_impl = impl}) < 1e-6);
    }
}

TEST_CASE("LayerNorm refuses bad shapes and attributes, and a zero scale where X comes from Y", "[ops][layer_norm]") {
  auto rejects = [](const OpCase& c, const std::string& what) {
    INFO("expecting rejection: " << what);
    CHECK_THROWS_WITH(run_forward(c), Catch::Contains(what));
  };
  rejects({.op = "LayerNorm", .shapes = {{2, 4}, {3}, {4}}, .num_outputs = 3}, "input Scale has shape [3]");
  rejects({.op = "LayerNorm", .shapes = {{2, 4}, {4}, {2, 4}}, .num_outputs = 3}, "input B has shape [2,4]");
  rejects({.op = "LayerNorm", .attrs = ln_attrs(2, 1e-5), .shapes = {{2, 4}, {4}, {4}}, .num_outputs = 3},
          "axis 2 is out of range");
  rejects({.op = "LayerNorm", .attrs = ln_attrs(-1, -1.0), .shapes = {{2, 4}, {4}, {4}}, .num_outputs = 3},
          "epsilon must be >= 0");
  rejects({.op = "LayerNorm", .shapes = {{2, 4}, {4}, {4}}, .num_outputs = 1}, "expects 3 outputs");
  // LayerNormGrad(dY, X, Scale, Mean, InvStdDev, Y, B), output-activated, with scale element 2 zero.
  const Shape x = {2, 4}, norm = {4}, stat = {2, 1};
  OpCase grad{.op = "LayerNormGrad", .attrs = ln_attrs(-1, 1e-5), .shapes = {x, x, norm, stat, stat, x, norm},
              .data = {{}, {}, {0.5, -1, 0, 2}, {}, {1, 1}, {}, {}}, .num_outputs = 3, .impl = 1};
  rejects(grad, "scale element 2 is 0");
  grad.impl = 0;  // the input-activated form does not divide by the scale
  CHECK_NOTHROW(run_forward(grad));
}
