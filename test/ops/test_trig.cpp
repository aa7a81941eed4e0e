// Tan and the inverse and hyperbolic trigonometric functions (lib/ops/trig): forward on hand values against the
// standard library in double, backward against finite differences in double inside each function's domain, NaN
// outside it, integer tensors refused.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "op_harness.h"

using namespace monet;
using namespace monet::test;

namespace {

using Doubles = std::vector<double>;

struct TrigCase {
  const char* op;
  double (*f)(double);
  Doubles inside;  // points of the domain, away from its edges
};

}  // namespace

TEST_CASE("Tan, Atan, Asin, Acos, Sinh, Cosh, Asinh, Acosh, Atanh: forward and backward", "[ops][trig]") {
  const TrigCase cases[] = {
      {"Tan", [](double x) { return std::tan(x); }, {-1.3, -0.5, 0, 0.7, 1.2}},
      {"Atan", [](double x) { return std::atan(x); }, {-40, -1.5, 0, 0.3, 6}},
      {"Asin", [](double x) { return std::asin(x); }, {-0.9, -0.4, 0, 0.5, 0.95}},
      {"Acos", [](double x) { return std::acos(x); }, {-0.9, -0.4, 0, 0.5, 0.95}},
      {"Sinh", [](double x) { return std::sinh(x); }, {-4, -1, 0, 0.5, 3}},
      {"Cosh", [](double x) { return std::cosh(x); }, {-4, -1, 0, 0.5, 3}},
      {"Asinh", [](double x) { return std::asinh(x); }, {-300, -2, 0, 0.5, 9}},
      {"Acosh", [](double x) { return std::acosh(x); }, {1.05, 1.5, 2, 7, 300}},
      {"Atanh", [](double x) { return std::atanh(x); }, {-0.9, -0.4, 0, 0.5, 0.95}},
  };
  for (const TrigCase& k : cases) {
    INFO(k.op);
    const Doubles y = run_forward({.op = k.op, .shapes = {{5}}, .data = {k.inside}}).values[0];
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(k.f(k.inside[i])).epsilon(1e-14).margin(1e-15));
    CHECK(gradient_error({.op = k.op, .shapes = {{5}}, .data = {k.inside}}) < 1e-6);
    CHECK_THROWS_AS(run_forward({.op = k.op, .shapes = {{3}}, .dtypes = {DType::i64}}), Error);
  }
  // Hand values: the functions' landmarks.
  const auto at = [](const char* op, double x) { return run_forward({.op = op, .shapes = {{1}}, .data = {{x}}}).values[0][0]; };
  CHECK(at("Atan", 1) == Approx(M_PI / 4).epsilon(1e-15));
  CHECK(at("Asin", 0.5) == Approx(M_PI / 6).epsilon(1e-15));
  CHECK(at("Acos", -1) == Approx(M_PI).epsilon(1e-15));
  CHECK(at("Tan", M_PI / 4) == Approx(1).epsilon(1e-15));
  CHECK(at("Cosh", 0) == 1);
  CHECK(at("Acosh", 1) == 0);
  // Outside the domain: NaN, as torch gives.
  for (const char* op : {"Asin", "Acos", "Atanh"}) CHECK(std::isnan(at(op, 1.5)));
  CHECK(std::isnan(at("Acosh", 0.5)));
}
