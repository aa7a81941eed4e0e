// Ops of LLaMA-style decoders and masked attention (issue 38): Neg, Exp, Log, Reciprocal, Sin, Cos; the comparisons
// that make bool masks (Equal, Less, Greater, LessOrEqual, GreaterOrEqual); Where on a computed or constant mask
// (masked_fill's Where(mask, scalar, x)); Cast between floats, integers and masks.
// Forward on hand values, backward against finite differences in double, bad inputs rejected.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "op_harness.h"

using namespace monet;
using namespace monet::test;

namespace {

using Doubles = std::vector<double>;

Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attrs a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

void check_near(const Doubles& got, const Doubles& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12).margin(1e-15));
}

Doubles forward(const std::string& op, const Doubles& x) {
  return run_forward({.op = op, .shapes = {{static_cast<int64_t>(x.size())}}, .data = {x}}).values[0];
}

}  // namespace

TEST_CASE("Neg, Exp, Log, Reciprocal, Sin and Cos: forward and backward", "[ops][unary]") {
  check_near(forward("Neg", {1, -2, 0.5, 0}), {-1, 2, -0.5, 0});
  check_near(forward("Exp", {0, 1, -1, 2}), {1, M_E, 1 / M_E, std::exp(2.0)});
  check_near(forward("Log", {1, M_E, 0.5, 10}), {0, 1, std::log(0.5), std::log(10.0)});
  check_near(forward("Reciprocal", {2, -4, 0.5, 1}), {0.5, -0.25, 2, 1});
  check_near(forward("Sin", {0, M_PI / 2, M_PI / 6, -1}), {0, 1, 0.5, std::sin(-1.0)});
  check_near(forward("Cos", {0, M_PI, M_PI / 3, 2}), {1, -1, 0.5, std::cos(2.0)});

  for (const char* op : {"Neg", "Exp", "Sin", "Cos"}) {
    INFO(op);
    CHECK(gradient_error({.op = op, .shapes = {{2, 3, 4}}}) < 1e-6);
    CHECK(gradient_error({.op = op, .shapes = {{5}}, .data = {{-3, -0.7, 0, 1.2, 4}}}) < 1e-6);
  }
  // Log and Reciprocal away from their pole at 0 (Reciprocal on both sides).
  CHECK(gradient_error({.op = "Log", .shapes = {{5}}, .data = {{0.1, 0.5, 1, 2.5, 7}}}) < 1e-6);
  CHECK(gradient_error({.op = "Reciprocal", .shapes = {{5}}, .data = {{-3, -0.4, 0.3, 1, 2.5}}}) < 1e-6);

  // Integer tensors are not arithmetic operands.
  for (const char* op : {"Neg", "Exp", "Log", "Reciprocal", "Sin", "Cos"})
    CHECK_THROWS_AS(run_forward({.op = op, .shapes = {{3}}, .dtypes = {DType::i64}}), Error);
}

TEST_CASE("Comparisons make bool masks with broadcasting, on floats and integers", "[ops][compare]") {
  // a (2, 3) against b (3): numpy broadcasting; a mask of uint8 0/1.
  const Doubles a = {1, 2, 3, 4, 5, 6}, b = {2, 2, 7};
  const struct {
    const char* op;
    Doubles want;
  } rows[] = {{"Equal", {0, 1, 0, 0, 0, 0}},
              {"Less", {1, 0, 1, 0, 0, 1}},
              {"Greater", {0, 0, 0, 1, 1, 0}},
              {"LessOrEqual", {1, 1, 1, 0, 0, 1}},
              {"GreaterOrEqual", {0, 1, 0, 1, 1, 0}}};
  for (const auto& row : rows) {
    INFO(row.op);
    for (DType t : {DType::f32, DType::i64}) {
      OpResult r = run_forward({.op = row.op, .shapes = {{2, 3}, {3}}, .dtypes = {t, t}, .data = {a, b}});
      CHECK(r.shapes[0] == Shape{2, 3});
      CHECK(r.values[0] == row.want);
      // Swapped operands broadcast the other way; the relation turns around.
      OpResult s = run_forward({.op = row.op, .shapes = {{3}, {2, 3}}, .dtypes = {t, t}, .data = {b, a}});
      CHECK(s.shapes[0] == Shape{2, 3});
    }
  }
  // A scalar against a column: (2, 1) vs [] -> (2, 1); Greater in float32 kernels too.
  OpResult r = run_forward({.op = "Greater", .shapes = {{2, 1}, {}}, .data = {{-0.5, 0.5}, {0}}}, 4);
  CHECK(r.shapes[0] == Shape{2, 1});
  CHECK(r.values[0] == Doubles{0, 1});
  // NaN compares unequal and unordered, as in torch.
  CHECK(run_forward({.op = "Equal", .shapes = {{1}, {1}}, .data = {{NAN}, {NAN}}}).values[0] == Doubles{0});
  CHECK(run_forward({.op = "GreaterOrEqual", .shapes = {{1}, {1}}, .data = {{NAN}, {1}}}).values[0] == Doubles{0});
  // Masks compare too (Equal on two bool tensors).
  CHECK(run_forward({.op = "Equal", .shapes = {{3}, {3}}, .dtypes = {DType::u8, DType::u8},
                     .data = {{0, 1, 1}, {0, 0, 1}}}).values[0] == Doubles{1, 0, 1});
  // Mixed dtypes and shapes that do not broadcast are refused.
  CHECK_THROWS_AS(run_forward({.op = "Less", .shapes = {{3}, {3}}, .dtypes = {DType::f32, DType::i64}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Less", .shapes = {{2, 3}, {2}}}), Error);
}

TEST_CASE("Where on a mask: forward with broadcasting, gradients to both branches", "[ops][where]") {
  // cond (2, 1) broadcast over columns, X (2, 3), Y a scalar.
  const Doubles x = {1, 2, 3, 4, 5, 6};
  for (DType t : {DType::u8, DType::i64}) {
    OpResult r = run_forward({.op = "Where", .shapes = {{2, 1}, {2, 3}, {}}, .dtypes = {t, DType::f32, DType::f32},
                              .data = {{1, 0}, x, {-9}}});
    CHECK(r.shapes[0] == Shape{2, 3});
    CHECK(r.values[0] == Doubles{1, 2, 3, -9, -9, -9});
  }
  // All three broadcast to (2, 2, 3): cond (2, 1, 3), X (2, 1), Y (3).
  OpResult r = run_forward({.op = "Where", .shapes = {{2, 1, 3}, {2, 1}, {3}},
                            .dtypes = {DType::u8, DType::f32, DType::f32},
                            .data = {{1, 0, 1, 0, 0, 1}, {10, 20}, {-1, -2, -3}}});
  CHECK(r.shapes[0] == Shape{2, 2, 3});
  CHECK(r.values[0] == Doubles{10, -2, 10, 20, -2, 20, -1, -2, 10, -1, -2, 20});

  // Gradients: dX = sum of dy where cond holds, reduced to X's shape; dY where it does not; none for cond.
  const Doubles cond = {1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0};
  for (DType t : {DType::u8, DType::i64}) {
    INFO(dtype_name(t));
    CHECK(gradient_error({.op = "Where", .shapes = {{2, 2, 3}, {2, 2, 3}, {2, 2, 3}},
                          .dtypes = {t, DType::f32, DType::f32}, .data = {cond}}) < 1e-6);
    CHECK(gradient_error({.op = "Where", .shapes = {{2, 2, 3}, {2, 1, 3}, {3}}, .dtypes = {t, DType::f32, DType::f32},
                          .data = {cond}}) < 1e-6);
    CHECK(gradient_error({.op = "Where", .shapes = {{2, 1, 3}, {2, 2, 1}, {}}, .dtypes = {t, DType::f32, DType::f32},
                          .data = {{0, 1, 1, 1, 0, 0}}}) < 1e-6);
  }
  // masked_fill: Where(mask, scalar constant, x); only x takes a gradient. (A fill of -1e9 would drown the finite
  // differences of the loss in rounding.)
  OpCase fill{.op = "Where", .shapes = {{2, 3}, {}, {2, 3}}, .dtypes = {DType::u8, DType::f32, DType::f32},
              .data = {{1, 0, 0, 1, 1, 0}, {-5}, x}, .grad = {false, false, true}};
  CHECK(run_forward(fill).values[0] == Doubles{-5, 2, 3, -5, -5, 6});
  CHECK(gradient_error(fill) < 1e-6);
  // -inf as the fill (a causal mask): x passes where the mask is clear.
  fill.data[1] = {-INFINITY};
  const Doubles y = run_forward(fill).values[0];
  CHECK((std::isinf(y[0]) && y[0] < 0 && y[1] == 2 && y[5] == 6));

  // A float condition, integer branches and shapes that do not broadcast are refused.
  CHECK_THROWS_AS(run_forward({.op = "Where", .shapes = {{3}, {3}, {3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Where", .shapes = {{3}, {3}, {3}},
                               .dtypes = {DType::u8, DType::i64, DType::f32}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Where", .shapes = {{3}, {2}, {3}},
                               .dtypes = {DType::u8, DType::f32, DType::f32}}), Error);
}

TEST_CASE("Cast between floats, integers and masks, the gradient only float to float", "[ops][cast]") {
  constexpr int64_t kFloat = 1, kInt32 = 6, kInt64 = 7, kBool = 9, kDouble = 11, kFloat16 = 10;
  const Doubles x = {2.7, -2.7, 0.2, 0, -0.5};
  auto cast = [&](int64_t to, DType from, const Doubles& v) {
    return run_forward({.op = "Cast", .attrs = attrs({{"to", to}}), .shapes = {{static_cast<int64_t>(v.size())}},
                        .dtypes = {from}, .data = {v}})
        .values[0];
  };
  CHECK(cast(kInt64, DType::f32, x) == Doubles{2, -2, 0, 0, 0});  // truncated towards zero
  CHECK(cast(kInt32, DType::f32, x) == Doubles{2, -2, 0, 0, 0});
  CHECK(cast(kBool, DType::f32, x) == Doubles{1, 1, 1, 0, 1});
  CHECK(cast(kFloat, DType::f32, x) == x);
  CHECK(cast(kDouble, DType::f32, x) == x);
  CHECK(cast(kFloat, DType::i64, {3, -1, 0}) == Doubles{3, -1, 0});
  CHECK(cast(kFloat, DType::u8, {1, 0, 1}) == Doubles{1, 0, 1});  // a mask to float (masked_fill by arithmetic)
  CHECK(cast(kBool, DType::i64, {3, 0, -2}) == Doubles{1, 0, 1});
  CHECK(cast(kInt64, DType::u8, {1, 0}) == Doubles{1, 0});

  CHECK(gradient_error({.op = "Cast", .attrs = attrs({{"to", kFloat}}), .shapes = {{2, 3}}}) < 1e-6);
  // Into an integer or a mask: no float output, nothing to differentiate; the forward still runs.
  CHECK(gradient_error({.op = "Cast", .attrs = attrs({{"to", kInt64}}), .shapes = {{2, 3}}}) == 0);

  CHECK_THROWS_AS(run_forward({.op = "Cast", .attrs = attrs({{"to", kFloat16}}), .shapes = {{2}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Cast", .shapes = {{2}}}), Error);  // no `to`
}
