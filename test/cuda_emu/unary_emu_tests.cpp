// The activation kernels of lib/engine/cuda/cuda_elementwise_kernels.cu added with LeakyRelu, Elu/Selu, Softplus,
// Mish and Abs, on the CUDA emulation (emu.h) against double references written from their definitions (the
// formulas of lib/ops/<op>): forward and gradient, float4 and scalar paths (an odd count, a misaligned start),
// values far into both tails (no overflow in Softplus and Mish), and the gradients' branch at exactly 0.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/cuda/kernels.h"
#include "tensor_close.h"

using namespace monet::cuda;
using monet::test::check_close;

namespace {

double softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

struct UnaryCase {
  const char* name;
  Unary op;
  UnaryGrad grad;
  float p0, p1;
  double (*f)(double x, double p0, double p1);
  double (*df)(double x, double p0, double p1);  // dy = 1
};

}  // namespace

TEST_CASE("LeakyRelu, Elu, Softplus, Mish and Abs kernels on the CUDA emulation match double references",
          "[cuda_emu][unary]") {
  const std::vector<UnaryCase> cases = {
      {"leaky_relu", Unary::leaky_relu, UnaryGrad::leaky_relu, 0.1f, 0.f,
       [](double x, double a, double) { return x > 0 ? x : a * x; },
       [](double x, double a, double) { return x > 0 ? 1.0 : a; }},
      {"elu", Unary::elu, UnaryGrad::elu, 1.5f, 1.0507f,
       [](double x, double a, double g) { return x > 0 ? g * x : g * a * std::expm1(x); },
       [](double x, double a, double g) { return x > 0 ? g : g * a * std::exp(x); }},
      {"softplus", Unary::softplus, UnaryGrad::softplus, 0.f, 0.f,
       [](double x, double, double) { return softplus(x); }, [](double x, double, double) { return sigmoid(x); }},
      {"mish", Unary::mish, UnaryGrad::mish, 0.f, 0.f,
       [](double x, double, double) { return x * std::tanh(softplus(x)); },
       [](double x, double, double) {
         const double t = std::tanh(softplus(x));
         return t + x * sigmoid(x) * (1 - t * t);
       }},
      {"abs", Unary::abs, UnaryGrad::abs, 0.f, 0.f, [](double x, double, double) { return std::abs(x); },
       [](double x, double, double) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }},
  };
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<float> u(-6.f, 6.f);
  for (const UnaryCase& k : cases)
    for (const int64_t n : {int64_t{1027}, int64_t{64}}) {
      for (const int offset : {0, 1}) {  // 1: not 16-byte aligned, the scalar kernel
        INFO(k.name << " n " << n << " offset " << offset);
        std::vector<float> buf(static_cast<size_t>(n + 1)), dy(static_cast<size_t>(n + 1), 1.f);
        for (float& e : buf) e = u(rng);
        buf[static_cast<size_t>(offset)] = 0.f;  // the kink
        buf[static_cast<size_t>(offset) + 1] = -90.f;
        buf[static_cast<size_t>(offset) + 2] = 90.f;
        const float* x = buf.data() + offset;
        std::vector<float> y(static_cast<size_t>(n) + 1), dx(static_cast<size_t>(n) + 1);
        REQUIRE(unary(k.op, n, x, y.data() + offset, k.p0, k.p1, nullptr) == cudaSuccess);
        REQUIRE(unary_grad(k.grad, n, dy.data() + offset, x, dx.data() + offset, k.p0, k.p1, nullptr) == cudaSuccess);
        std::vector<double> want_y, want_dx, got_y, got_dx;
        for (int64_t i = 0; i < n; ++i) {
          want_y.push_back(k.f(x[i], k.p0, k.p1));
          want_dx.push_back(k.df(x[i], k.p0, k.p1));
          got_y.push_back(y[static_cast<size_t>(i + offset)]);
          got_dx.push_back(dx[static_cast<size_t>(i + offset)]);
        }
        check_close(want_y, got_y, "y");
        check_close(want_dx, got_dx, "dx");
        CHECK(std::abs(got_dx[0] - want_dx[0]) <= 1e-6 * std::abs(want_dx[0]));  // the branch taken at x = 0
      }
    }
}

TEST_CASE("Tan and the inverse and hyperbolic trigonometric kernels on the CUDA emulation match double references",
          "[cuda_emu][unary][trig]") {
  struct TrigKernel {
    const char* name;
    Unary op;
    UnaryGrad grad;
    float lo, hi;  // inputs drawn inside the domain
    double (*f)(double);
    double (*df)(double);
  };
  const std::vector<TrigKernel> cases = {
      {"tan", Unary::tan, UnaryGrad::tan, -1.3f, 1.3f, [](double x) { return std::tan(x); },
       [](double x) { return 1 / (std::cos(x) * std::cos(x)); }},
      {"atan", Unary::atan, UnaryGrad::atan, -20.f, 20.f, [](double x) { return std::atan(x); },
       [](double x) { return 1 / (1 + x * x); }},
      {"asin", Unary::asin, UnaryGrad::asin, -0.95f, 0.95f, [](double x) { return std::asin(x); },
       [](double x) { return 1 / std::sqrt(1 - x * x); }},
      {"acos", Unary::acos, UnaryGrad::acos, -0.95f, 0.95f, [](double x) { return std::acos(x); },
       [](double x) { return -1 / std::sqrt(1 - x * x); }},
      {"sinh", Unary::sinh, UnaryGrad::sinh, -6.f, 6.f, [](double x) { return std::sinh(x); },
       [](double x) { return std::cosh(x); }},
      {"cosh", Unary::cosh, UnaryGrad::cosh, -6.f, 6.f, [](double x) { return std::cosh(x); },
       [](double x) { return std::sinh(x); }},
      {"asinh", Unary::asinh, UnaryGrad::asinh, -50.f, 50.f, [](double x) { return std::asinh(x); },
       [](double x) { return 1 / std::sqrt(x * x + 1); }},
      {"acosh", Unary::acosh, UnaryGrad::acosh, 1.05f, 50.f, [](double x) { return std::acosh(x); },
       [](double x) { return 1 / std::sqrt(x * x - 1); }},
      {"atanh", Unary::atanh, UnaryGrad::atanh, -0.95f, 0.95f, [](double x) { return std::atanh(x); },
       [](double x) { return 1 / (1 - x * x); }},
  };
  std::mt19937_64 rng(37);
  for (const TrigKernel& k : cases)
    for (const int offset : {0, 1}) {  // 1: not 16-byte aligned, the scalar kernel
      INFO(k.name << " offset " << offset);
      const int64_t n = 1027;
      std::uniform_real_distribution<float> u(k.lo, k.hi);
      std::vector<float> buf(static_cast<size_t>(n + 1)), dy(static_cast<size_t>(n + 1), 1.f);
      for (float& e : buf) e = u(rng);
      const float* x = buf.data() + offset;
      std::vector<float> y(static_cast<size_t>(n) + 1), dx(static_cast<size_t>(n) + 1);
      REQUIRE(unary(k.op, n, x, y.data() + offset, 0.f, 0.f, nullptr) == cudaSuccess);
      REQUIRE(unary_grad(k.grad, n, dy.data() + offset, x, dx.data() + offset, 0.f, 0.f, nullptr) == cudaSuccess);
      std::vector<double> want_y, want_dx, got_y, got_dx;
      for (int64_t i = 0; i < n; ++i) {
        want_y.push_back(k.f(x[i]));
        want_dx.push_back(k.df(x[i]));
        got_y.push_back(y[static_cast<size_t>(i + offset)]);
        got_dx.push_back(dx[static_cast<size_t>(i + offset)]);
      }
      check_close(want_y, got_y, "y");
      check_close(want_dx, got_dx, "dx");
    }
}
