// Gemm and MatMul: forward against hand values and naive loops, backward against finite differences over
// transA/transB/alpha/beta and every C broadcast, MatMul 2-D, batched with broadcasting and 1-D operands.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "core/error.h"
#include "op_harness.h"

using namespace monet;
using namespace monet::test;

namespace {

OpCase gemm_case(int64_t M, int64_t K, int64_t N, bool ta, bool tb, double alpha, double beta,
                 std::optional<Shape> c_shape) {
  Attrs a;
  a.set("transA", int64_t{ta});
  a.set("transB", int64_t{tb});
  a.set("alpha", alpha);
  a.set("beta", beta);
  OpCase c{.op = "Gemm", .attrs = a, .shapes = {ta ? Shape{K, M} : Shape{M, K}, tb ? Shape{N, K} : Shape{K, N}}};
  if (c_shape) c.shapes.push_back(*c_shape);
  return c;
}

// y[i, j] = alpha * sum_k A'[i, k] B'[k, j] + beta * C[i or 0, j or 0]
std::vector<double> naive_gemm(const OpCase& c, int64_t M, int64_t K, int64_t N) {
  const bool ta = c.attrs.i("transA"), tb = c.attrs.i("transB");
  const double alpha = c.attrs.f("alpha"), beta = c.attrs.f("beta");
  const std::vector<double>&a = c.data[0], &b = c.data[1];
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
      double cv = 0;
      if (c.shapes.size() == 3) {
        const Shape& cs = c.shapes[2];
        const int64_t rows = cs.size() == 2 ? cs[0] : 1, cols = cs.empty() ? 1 : cs.back();
        cv = c.data[2][(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
      }
      y[i * N + j] = alpha * s + beta * cv;
    }
  return y;
}

// Numpy matmul by direct loops: promote 1-D operands, broadcast batch dims (odometer over the output batch).
std::vector<double> naive_matmul(Shape a, Shape b, const std::vector<double>& av, const std::vector<double>& bv) {
  if (a.size() == 1) a = {1, a[0]};
  if (b.size() == 1) b = {b[0], 1};
  const int64_t n = a[a.size() - 2], k = a.back(), m = b.back();
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const size_t r = std::max(ba.size(), bb.size());
  while (ba.size() < r) ba.insert(ba.begin(), 1);
  while (bb.size() < r) bb.insert(bb.begin(), 1);
  Shape batch(r);
  for (size_t d = 0; d < r; ++d) batch[d] = std::max(ba[d], bb[d]);
  std::vector<double> y;
  std::vector<int64_t> idx(r, 0);
  for (int64_t e = 0; e < numel(batch); ++e) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < r; ++d) {
      ia = ia * ba[d] + (ba[d] == 1 ? 0 : idx[d]);
      ib = ib * bb[d] + (bb[d] == 1 ? 0 : idx[d]);
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) s += av[(ia * n + i) * k + q] * bv[(ib * k + q) * m + j];
        y.push_back(s);
      }
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

}  // namespace

TEST_CASE("Gemm forward on hand values", "[linear]") {
  // A = [[1, 2, 3], [4, 5, 6]], B = [[1, 0], [0, 1], [1, 1]]: AB = [[4, 5], [10, 11]]; 2 AB + 0.5 [1, -2].
  OpCase c = gemm_case(2, 3, 2, false, false, 2.0, 0.5, Shape{2});
  c.data = {{1, 2, 3, 4, 5, 6}, {1, 0, 0, 1, 1, 1}, {1, -2}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 2});
  CHECK(r.values[0] == std::vector<double>{8.5, 9, 20.5, 21});
}

TEST_CASE("Gemm matches a direct loop and finite differences", "[linear]") {
  const int64_t M = 3, K = 4, N = 5;
  const std::vector<std::optional<Shape>> c_shapes = {std::nullopt, Shape{N}, Shape{1, N}, Shape{M, N},
                                                      Shape{M, 1}, Shape{}, Shape{1}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const auto& cs : c_shapes)
        for (auto [alpha, beta] : {std::pair{1.0, 1.0}, std::pair{0.7, 1.3}}) {
          OpCase c = gemm_case(M, K, N, ta, tb, alpha, beta, cs);
          INFO("transA " << ta << " transB " << tb << " C " << (cs ? shape_str(*cs) : "none") << " alpha " << alpha
                         << " beta " << beta);
          for (size_t i = 0; i < c.shapes.size(); ++i) c.data.push_back(random_values(c.shapes[i], 7 + i));
          OpResult r = run_forward(c);
          REQUIRE(r.shapes[0] == Shape{M, N});
          CHECK(max_abs_diff(r.values[0], naive_gemm(c, M, K, N)) < 1e-12);
          CHECK(gradient_error(c) < 1e-6);
        }
}

TEST_CASE("Gemm in float agrees with double", "[linear]") {
  OpCase c = gemm_case(8, 32, 16, false, true, 1.0, 1.0, Shape{16});
  std::vector<double> d = run_forward(c, 8).values[0], f = run_forward(c, 4).values[0];
  double scale = 0;
  for (double v : d) scale = std::max(scale, std::abs(v));
  CHECK(max_abs_diff(d, f) / scale < 1e-5);
}

TEST_CASE("Gemm rejects bad shapes", "[linear]") {
  REQUIRE_NOTHROW(run_forward(gemm_case(2, 3, 4, false, false, 1, 1, std::nullopt)));
  OpCase bad = gemm_case(2, 3, 4, false, false, 1, 1, std::nullopt);
  bad.shapes[1] = {4, 4};
  REQUIRE_THROWS_WITH(run_forward(bad), Catch::Contains("inner dimensions differ"));
  OpCase badc = gemm_case(2, 3, 4, false, false, 1, 1, Shape{3});
  REQUIRE_THROWS_WITH(run_forward(badc), Catch::Contains("does not broadcast"));
  OpCase rank3 = gemm_case(2, 3, 4, false, false, 1, 1, std::nullopt);
  rank3.shapes[0] = {1, 2, 3};
  REQUIRE_THROWS_AS(run_forward(rank3), monet::Error);
}

TEST_CASE("MatMul forward on hand values", "[linear]") {
  OpCase c{.op = "MatMul", .shapes = {{2, 2}, {2, 3}}, .data = {{1, 2, 3, 4}, {1, 0, 1, 0, 1, 1}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 3});
  CHECK(r.values[0] == std::vector<double>{1, 2, 3, 3, 4, 7});
  OpCase dot{.op = "MatMul", .shapes = {{3}, {3}}, .data = {{1, 2, 3}, {4, 5, 6}}};
  r = run_forward(dot);
  CHECK(r.shapes[0] == Shape{});
  CHECK(r.values[0] == std::vector<double>{32});
}

TEST_CASE("MatMul matches a direct loop and finite differences", "[linear]") {
  struct Cfg {
    Shape a, b, y;
  };
  const std::vector<Cfg> cfgs = {
      {{3, 4}, {4, 5}, {3, 5}},                    // 2-D
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},              // batched A, shared B (Linear)
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},              // shared A, batched B
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},           // same batch
      {{2, 1, 3, 4}, {3, 4, 2}, {2, 3, 3, 2}},     // broadcast on both sides
      {{1, 3, 4}, {2, 4, 2}, {2, 3, 2}},           // A batch of 1 broadcast
      {{4}, {4, 5}, {5}},                          // 1-D A
      {{2, 3, 4}, {4}, {2, 3}},                    // 1-D B
      {{4}, {4}, {}},                              // dot product
      {{4}, {2, 4, 3}, {2, 3}},                    // 1-D A, batched B
      {{2, 3, 4}, {1, 4, 3}, {2, 3, 3}},           // B batch of 1 (one GEMM path)
  };
  for (const Cfg& k : cfgs) {
    INFO("A " << shape_str(k.a) << " B " << shape_str(k.b));
    OpCase c{.op = "MatMul", .shapes = {k.a, k.b}, .data = {random_values(k.a, 3), random_values(k.b, 4)}};
    OpResult r = run_forward(c);
    REQUIRE(r.shapes[0] == k.y);
    CHECK(max_abs_diff(r.values[0], naive_matmul(k.a, k.b, c.data[0], c.data[1])) < 1e-12);
    CHECK(gradient_error(c) < 1e-6);
  }
}

TEST_CASE("MatMul with a bias equals the product plus the bias, and differentiates the bias", "[linear]") {
  struct Cfg {
    Shape a, b, bias;
  };
  const std::vector<Cfg> cfgs = {
      {{3, 4}, {4, 5}, {5}},                    // 2-D
      {{2, 3, 4}, {4, 5}, {1, 5}},              // Linear over a batch, bias (1, m)
      {{2, 3, 4}, {2, 4, 5}, {1, 1, 5}},        // batched B
      {{2, 1, 3, 4}, {3, 4, 2}, {2}},           // broadcast batches
  };
  for (const Cfg& k : cfgs) {
    INFO("A " << shape_str(k.a) << " B " << shape_str(k.b) << " bias " << shape_str(k.bias));
    const std::vector<double> a = random_values(k.a, 3), b = random_values(k.b, 4), bias = random_values(k.bias, 5);
    OpCase c{.op = "MatMul", .shapes = {k.a, k.b, k.bias}, .data = {a, b, bias}};
    const OpResult r = run_forward(c);
    std::vector<double> want = naive_matmul(k.a, k.b, a, b);
    for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % bias.size()];
    CHECK(r.shapes[0] == run_forward({.op = "MatMul", .shapes = {k.a, k.b}, .data = {a, b}}).shapes[0]);
    CHECK(max_abs_diff(r.values[0], want) < 1e-12);
    CHECK(gradient_error(c) < 1e-6);
  }
  // A bias that is not one value per column, or on a MatMul whose B is a vector (Y has no columns), is refused.
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .shapes = {{3, 4}, {4, 5}, {3, 1}}}),
                      Catch::Contains("bias [3,1] is not one value per column of Y [3,5]"));
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .shapes = {{3, 4}, {4}, {3}}}),
                      Catch::Contains("is not one value per column"));
}

TEST_CASE("MatMul with trans_b reads B stored transposed, and writes its gradient so", "[linear]") {
  struct Cfg {
    Shape a, bt;  // bt: B stored (m, k)
    bool bias;
  };
  for (const Cfg& k : std::vector<Cfg>{{{3, 4}, {5, 4}, false}, {{2, 3, 4}, {5, 4}, true}, {{4}, {5, 4}, false}}) {
    INFO("A " << shape_str(k.a) << " B stored " << shape_str(k.bt) << (k.bias ? " with a bias" : ""));
    const Shape b{k.bt[1], k.bt[0]};
    const std::vector<double> a = random_values(k.a, 3), bt = random_values(k.bt, 4), bias = random_values({5}, 5);
    std::vector<double> bv(bt.size());  // B = bt^T
    for (int64_t i = 0; i < b[0]; ++i)
      for (int64_t j = 0; j < b[1]; ++j) bv[i * b[1] + j] = bt[j * b[0] + i];
    Attrs tb;
    tb.set("trans_b", int64_t{1});
    OpCase c{.op = "MatMul", .attrs = tb, .shapes = {k.a, k.bt}, .data = {a, bt}};
    OpCase plain{.op = "MatMul", .shapes = {k.a, b}, .data = {a, bv}};
    if (k.bias) {
      c.shapes.push_back({5});
      c.data.push_back(bias);
      plain.shapes.push_back({5});
      plain.data.push_back(bias);
    }
    const OpResult got = run_forward(c), want = run_forward(plain);
    CHECK(got.shapes[0] == want.shapes[0]);
    CHECK(max_abs_diff(got.values[0], want.values[0]) < 1e-12);
    CHECK(gradient_error(c) < 1e-6);
  }
  Attrs tb;
  tb.set("trans_b", int64_t{1});
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .attrs = tb, .shapes = {{2, 3, 4}, {2, 5, 4}}}),
                      Catch::Contains("trans_b takes a 2-D B, got [2,5,4]"));
}

// x permuted as Transpose(x; perm) lays it out: dim i of the result is dim perm[i] of x.
std::vector<double> permuted(const std::vector<double>& x, const Shape& shape, const std::vector<int64_t>& perm) {
  const size_t r = shape.size();
  Shape out(r), stride(r, 1);
  for (size_t i = r - 1; i-- > 0;) stride[i] = stride[i + 1] * shape[i + 1];
  for (size_t i = 0; i < r; ++i) out[i] = shape[static_cast<size_t>(perm[i])];
  std::vector<double> y;
  std::vector<int64_t> idx(r, 0);
  for (int64_t e = 0; e < numel(out); ++e) {
    int64_t at = 0;
    for (size_t i = 0; i < r; ++i) at += idx[i] * stride[static_cast<size_t>(perm[i])];
    y.push_back(x[static_cast<size_t>(at)]);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

TEST_CASE("MatMul with a_perm reads A through the Transpose as stored, and writes dA so", "[linear]") {
  struct Cfg {
    Shape a;  // A as stored
    std::vector<int64_t> perm;
    bool trans_b, bias;
  };
  const std::vector<Cfg> cfgs = {
      {{2, 3, 4}, {1, 0, 2}, false, false},       // (B, T, E) read as (T, B, E): Q = 2 <= P = 3
      {{3, 2, 4}, {1, 0, 2}, true, true},         // Q = 3 > P = 2: blocks over the other side
      {{3, 3, 2}, {1, 0, 2}, false, true},        // P = Q
      {{2, 3, 2, 4}, {2, 0, 1, 3}, true, false},  // two dims before one
      {{2, 3, 2, 4}, {1, 2, 0, 3}, false, true},  // one dim before two
      {{1, 3, 4}, {1, 0, 2}, false, false},       // Q = 1: nothing moves
  };
  for (const Cfg& k : cfgs) {
    INFO("A " << shape_str(k.a) << " a_perm " << shape_str(k.perm) << (k.trans_b ? " trans_b" : "")
              << (k.bias ? " bias" : ""));
    const int64_t kk = k.a.back(), m = 5;
    const Shape bs = k.trans_b ? Shape{m, kk} : Shape{kk, m};
    const std::vector<double> a = random_values(k.a, 3), b = random_values(bs, 4), bias = random_values({m}, 5);
    Attrs at;
    at.set("a_perm", k.perm);
    Attrs plain_at;
    if (k.trans_b) {
      at.set("trans_b", int64_t{1});
      plain_at.set("trans_b", int64_t{1});
    }
    Shape pa(k.a.size());
    for (size_t i = 0; i < pa.size(); ++i) pa[i] = k.a[static_cast<size_t>(k.perm[i])];
    OpCase c{.op = "MatMul", .attrs = at, .shapes = {k.a, bs}, .data = {a, b}};
    OpCase plain{.op = "MatMul", .attrs = plain_at, .shapes = {pa, bs}, .data = {permuted(a, k.a, k.perm), b}};
    if (k.bias) {
      c.shapes.push_back({m});
      c.data.push_back(bias);
      plain.shapes.push_back({m});
      plain.data.push_back(bias);
    }
    const OpResult got = run_forward(c), want = run_forward(plain);
    CHECK(got.shapes[0] == want.shapes[0]);
    CHECK(max_abs_diff(got.values[0], want.values[0]) < 1e-12);
    CHECK(gradient_error(c) < 1e-6);
  }
  Attrs bad;
  bad.set("a_perm", std::vector<int64_t>{0, 2, 1});  // moves A's last dim
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .attrs = bad, .shapes = {{2, 3, 4}, {3, 5}}}),
                      Catch::Contains("a_perm [0,2,1] does not swap two blocks of the leading dims of A [2,3,4]"));
  bad.set("a_perm", std::vector<int64_t>{0, 2, 1, 3});  // not two blocks swapped
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .attrs = bad, .shapes = {{2, 3, 2, 4}, {4, 5}}}),
                      Catch::Contains("does not swap two blocks"));
  bad.set("a_perm", std::vector<int64_t>{1, 0, 2});
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .attrs = bad, .shapes = {{2, 3, 4}, {3, 4, 5}}}),
                      Catch::Contains("a_perm takes a 2-D B, got [3,4,5]"));
}

TEST_CASE("MatMul rejects bad shapes", "[linear]") {
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .shapes = {{3, 4}, {5, 2}}}), Catch::Contains("do not multiply"));
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .shapes = {{2, 3, 4}, {3, 4, 2}}}),
                      Catch::Contains("do not broadcast"));
  REQUIRE_THROWS_WITH(run_forward({.op = "MatMul", .shapes = {{3, 4}, {5, 2}}}), Catch::StartsWith("node 'n0' (MatMul)"));
}
