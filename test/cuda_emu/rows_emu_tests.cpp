// The row kernels of lib/engine/cuda/cuda_norm_pool_kernels.cu on the CUDA emulation (emu.h) against double
// references written from the definitions: Softmax and LogSoftmax with their gradients over the last axis (a warp per row up to 1024,
// float4 rows where the length allows, a block per row beyond) and over an inner axis (a thread per column), and
// LayerNorm with both gradient paths (the fused warp-per-row kernel for D <= 1024, D % 4 == 0; the column and row
// kernels otherwise), from x and from y. Same tolerance as monet_cuda_tests: 1e-6 + 1e-4 of the reference's scale.
// SoftmaxCrossEntropyGrad in place over its logits, bitwise as out of place, in its three layouts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cuda/kernels.h"
#include "tensor_close.h"

using namespace monet::cuda;
using monet::test::check_close;

namespace {

std::vector<float> random_floats(size_t n, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(n);
  for (float& e : x) e = u(rng);
  return x;
}

std::vector<double> as_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

}  // namespace

TEST_CASE("Softmax, LogSoftmax and their gradients on the CUDA emulation match a double reference",
          "[cuda_emu][softmax]") {
  std::mt19937_64 rng(5);
  struct Shape3 {
    int64_t outer, A, inner;
  };
  // Rows of 32 (float4), 37 (scalar), 768 (24 floats a lane), 1100 (a block per row), and an inner axis.
  for (const bool log : {false, true})
    for (const Shape3 s :
         {Shape3{6, 32, 1}, Shape3{5, 37, 1}, Shape3{3, 768, 1}, Shape3{2, 1100, 1}, Shape3{3, 7, 5}}) {
      INFO((log ? "LogSoftmax" : "Softmax") << " outer " << s.outer << " A " << s.A << " inner " << s.inner);
      const size_t n = static_cast<size_t>(s.outer * s.A * s.inner);
      const std::vector<float> x = random_floats(n, -6.f, 6.f, rng), dy = random_floats(n, -1.f, 1.f, rng);
      std::vector<float> y(n), dx(n);
      REQUIRE(softmax(s.outer, s.A, s.inner, x.data(), y.data(), log, nullptr) == cudaSuccess);
      REQUIRE(softmax_grad(s.outer, s.A, s.inner, dy.data(), y.data(), dx.data(), log, nullptr) == cudaSuccess);
      std::vector<double> want_y(n), want_dx(n);
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i) {
          auto at = [&](int64_t a) { return static_cast<size_t>((o * s.A + a) * s.inner + i); };
          double m = -INFINITY, sum = 0, dot = 0, dy_sum = 0;
          for (int64_t a = 0; a < s.A; ++a) m = std::max(m, static_cast<double>(x[at(a)]));
          for (int64_t a = 0; a < s.A; ++a) sum += std::exp(x[at(a)] - m);
          for (int64_t a = 0; a < s.A; ++a) {
            const double p = std::exp(x[at(a)] - m) / sum;
            want_y[at(a)] = log ? x[at(a)] - m - std::log(sum) : p;
            dot += p * dy[at(a)];
            dy_sum += dy[at(a)];
          }
          for (int64_t a = 0; a < s.A; ++a) {
            const double p = std::exp(x[at(a)] - m) / sum;
            want_dx[at(a)] = log ? dy[at(a)] - p * dy_sum : p * (dy[at(a)] - dot);
          }
        }
      check_close(want_y, as_double(y), "y");
      check_close(want_dx, as_double(dx), "dx");
    }
}

TEST_CASE("LayerNorm and its gradient on the CUDA emulation match a double reference", "[cuda_emu][layer_norm]") {
  std::mt19937_64 rng(9);
  // D 64 (the fused gradient kernel), 30 (not a multiple of 4: column and row kernels), 1100 (a block per row);
  // R past one part of 32 rows.
  for (int64_t D : {int64_t{64}, int64_t{30}, int64_t{1100}}) {
    const int64_t R = 70;
    INFO("R " << R << " D " << D);
    const size_t n = static_cast<size_t>(R * D);
    const double eps = 1e-5;
    std::vector<float> x = random_floats(n, -2.f, 3.f, rng), dy = random_floats(n, -1.f, 1.f, rng);
    const std::vector<float> scale = random_floats(static_cast<size_t>(D), 0.5f, 1.5f, rng),
                             bias = random_floats(static_cast<size_t>(D), -0.5f, 0.5f, rng);
    std::vector<float> y(n), mean(static_cast<size_t>(R)), invstd(static_cast<size_t>(R));
    REQUIRE(layer_norm(R, D, eps, x.data(), scale.data(), bias.data(), y.data(), mean.data(), invstd.data(),
                       nullptr) == cudaSuccess);
    std::vector<double> want_y(n), want_mean(static_cast<size_t>(R)), want_invstd(static_cast<size_t>(R)),
        want_dx(n), want_dscale(static_cast<size_t>(D), 0.0), want_dbias(static_cast<size_t>(D), 0.0);
    for (int64_t r = 0; r < R; ++r) {
      auto at = [&](int64_t d) { return static_cast<size_t>(r * D + d); };
      double mu = 0, var = 0;
      for (int64_t d = 0; d < D; ++d) mu += x[at(d)];
      mu /= static_cast<double>(D);
      for (int64_t d = 0; d < D; ++d) var += (x[at(d)] - mu) * (x[at(d)] - mu);
      const double is = 1.0 / std::sqrt(var / static_cast<double>(D) + eps);
      want_mean[static_cast<size_t>(r)] = mu;
      want_invstd[static_cast<size_t>(r)] = is;
      double mg = 0, mgx = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double xhat = (x[at(d)] - mu) * is, g = dy[at(d)] * static_cast<double>(scale[static_cast<size_t>(d)]);
        want_y[at(d)] = xhat * scale[static_cast<size_t>(d)] + bias[static_cast<size_t>(d)];
        mg += g;
        mgx += g * xhat;
        want_dscale[static_cast<size_t>(d)] += dy[at(d)] * xhat;
        want_dbias[static_cast<size_t>(d)] += dy[at(d)];
      }
      mg /= static_cast<double>(D);
      mgx /= static_cast<double>(D);
      for (int64_t d = 0; d < D; ++d) {
        const double xhat = (x[at(d)] - mu) * is, g = dy[at(d)] * static_cast<double>(scale[static_cast<size_t>(d)]);
        want_dx[at(d)] = is * (g - mg - xhat * mgx);
      }
    }
    check_close(want_y, as_double(y), "y");
    check_close(want_mean, as_double(mean), "mean");
    check_close(want_invstd, as_double(invstd), "invstd");
    std::vector<float> partial(static_cast<size_t>(layer_norm_grad_workspace_bytes(R, D) / 4 + 1));
    for (bool from_y : {false, true}) {
      INFO((from_y ? "xhat from y" : "xhat from x"));
      std::vector<float> dx(n), dscale(static_cast<size_t>(D)), dbias(static_cast<size_t>(D));
      REQUIRE(layer_norm_grad(R, D, dy.data(), from_y ? nullptr : x.data(), mean.data(), from_y ? y.data() : nullptr,
                              from_y ? bias.data() : nullptr, scale.data(), invstd.data(), dx.data(), dscale.data(),
                              dbias.data(), partial.data(), nullptr) == cudaSuccess);
      check_close(want_dx, as_double(dx), "dx");
      check_close(want_dscale, as_double(dscale), "dscale");
      check_close(want_dbias, as_double(dbias), "dbias");
    }
  }
}

// SoftmaxCrossEntropyGrad's kernels run in place over the logits (OpDef::in_place): each of the three layouts (a warp
// per row, a block per row of more than 1024 classes, a thread per column of an inner axis) gives with dx == x the
// bits it gives into a separate buffer, and those match the formula in double.
TEST_CASE("SoftmaxCrossEntropyGrad on the CUDA emulation: in place over the logits, bitwise as out of place",
          "[cuda_emu][cross_entropy]") {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.f, 3.f);
  struct Case {
    int64_t N, C, P;
  };
  for (const Case k : {Case{6, 37, 1}, Case{3, 1500, 1}, Case{2, 5, 9}}) {
    INFO("N " << k.N << " C " << k.C << " P " << k.P);
    const size_t n = static_cast<size_t>(k.N * k.C * k.P);
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    std::vector<int64_t> labels(static_cast<size_t>(k.N * k.P));
    for (int64_t& l : labels) l = std::uniform_int_distribution<int64_t>(0, k.C - 1)(rng);
    const float dloss = 0.75f;
    std::vector<float> dx(n, -1.f), aliased = x;
    REQUIRE(softmax_cross_entropy_grad(k.N, k.C, k.P, &dloss, x.data(), labels.data(), dx.data(), nullptr) ==
            cudaSuccess);
    REQUIRE(softmax_cross_entropy_grad(k.N, k.C, k.P, &dloss, aliased.data(), labels.data(), aliased.data(),
                                       nullptr) == cudaSuccess);
    CHECK(std::memcmp(dx.data(), aliased.data(), n * sizeof(float)) == 0);
    double worst = 0;
    for (int64_t a = 0; a < k.N; ++a)
      for (int64_t p = 0; p < k.P; ++p) {
        auto at = [&](int64_t c) { return static_cast<size_t>((a * k.C + c) * k.P + p); };
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < k.C; ++c) mx = std::max(mx, static_cast<double>(x[at(c)]));
        for (int64_t c = 0; c < k.C; ++c) sum += std::exp(static_cast<double>(x[at(c)]) - mx);
        const int64_t label = labels[static_cast<size_t>(a * k.P + p)];
        for (int64_t c = 0; c < k.C; ++c) {
          const double want = (std::exp(static_cast<double>(x[at(c)]) - mx) / sum - (c == label ? 1.0 : 0.0)) *
                              dloss / static_cast<double>(k.N * k.P);
          worst = std::max(worst, std::abs(dx[at(c)] - want));
        }
      }
    CHECK(worst < 1e-6);
  }
}

// LinearCrossEntropy's row kernels: each contiguous row's term (warp per row up to 1024 classes, block per row
// beyond), a bad label flagged, and the gradient with a scale per row, in place bitwise as out of place; against the
// formulas in double.
TEST_CASE("the cross-entropy row kernels of LinearCrossEntropy on the CUDA emulation", "[cuda_emu][cross_entropy]") {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (const int64_t C : {int64_t{37}, int64_t{1500}}) {
    const int64_t R = 7;
    INFO("R " << R << " C " << C);
    const size_t n = static_cast<size_t>(R * C);
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    std::vector<int64_t> labels(static_cast<size_t>(R));
    for (int64_t& l : labels) l = std::uniform_int_distribution<int64_t>(0, C - 1)(rng);
    std::vector<float> dterms(static_cast<size_t>(R));
    for (float& d : dterms) d = normal(rng);
    std::vector<double> partial(static_cast<size_t>(softmax_cross_entropy_parts(R, C, 1)));
    std::vector<float> terms(static_cast<size_t>(R), -1.f);
    int bad = 7;
    REQUIRE(cross_entropy_rows(R, C, x.data(), labels.data(), partial.data(), &bad, terms.data(), nullptr) ==
            cudaSuccess);
    CHECK(bad == 0);
    std::vector<float> dx(n, -1.f), aliased = x;
    REQUIRE(cross_entropy_rows_grad(R, C, dterms.data(), x.data(), labels.data(), dx.data(), nullptr) == cudaSuccess);
    REQUIRE(cross_entropy_rows_grad(R, C, dterms.data(), aliased.data(), labels.data(), aliased.data(), nullptr) ==
            cudaSuccess);
    CHECK(std::memcmp(dx.data(), aliased.data(), n * sizeof(float)) == 0);
    std::vector<double> want_terms(static_cast<size_t>(R)), want_dx(n);
    for (int64_t r = 0; r < R; ++r) {
      const float* row = x.data() + r * C;
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, static_cast<double>(row[c]));
      for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(row[c]) - mx);
      const int64_t label = labels[static_cast<size_t>(r)];
      want_terms[static_cast<size_t>(r)] = std::log(sum) + mx - row[label];
      for (int64_t c = 0; c < C; ++c)
        want_dx[static_cast<size_t>(r * C + c)] =
            (std::exp(static_cast<double>(row[c]) - mx) / sum - (c == label ? 1.0 : 0.0)) * dterms[static_cast<size_t>(r)];
    }
    check_close(want_terms, as_double(terms), "terms");
    check_close(want_dx, as_double(dx), "dx");
    labels[3] = C;  // out of range: flagged
    REQUIRE(cross_entropy_rows(R, C, x.data(), labels.data(), partial.data(), &bad, terms.data(), nullptr) ==
            cudaSuccess);
    CHECK(bad == 1);
  }
}
