// The GatherElements kernels (cuda_gather_elements_kernels.cu) on the CUDA emulation against a reference written
// from the op's definition (torch.gather): every axis of a rank-3 tensor, indices smaller than the data along the
// other dims, negative indices, repeated indices whose gradients add in the axis' order (compared bit for bit with
// that order's float sum), and an index out of range, which reads 0 and adds nothing.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "engine/cuda/kernels.h"

using namespace monet::cuda;

TEST_CASE("GatherElements kernels on the CUDA emulation match the definition, gradients bit for bit",
          "[cuda_emu][gather_elements]") {
  const std::vector<int64_t> x_shape = {3, 5, 4};
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(60);
  for (float& e : x) e = u(rng);
  const int64_t xs[3] = {20, 4, 1};
  for (int axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    // Indices (2, 4, 3) for axes 1 and 2 keep within x's other dims; along the axis any count of indices.
    std::vector<int64_t> shape = {2, 4, 3};
    shape[static_cast<size_t>(axis)] = 7;
    const int64_t n = shape[0] * shape[1] * shape[2], A = x_shape[static_cast<size_t>(axis)];
    std::uniform_int_distribution<int64_t> pick(-A, A - 1);
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t& e : idx) e = pick(rng);
    idx[5] = A + 2;  // out of range
    std::vector<float> dy(static_cast<size_t>(n)), y(static_cast<size_t>(n)), dx(60, 9.f);
    for (float& e : dy) e = u(rng);
    Dims out;
    out.rank = 3;
    Strides st;
    for (int d = 0; d < 3; ++d) {
      out.size[d] = shape[static_cast<size_t>(d)];
      st.s[d] = xs[d];
    }
    REQUIRE(gather_elements(out, st, axis, A, idx.data(), x.data(), y.data(), nullptr) == cudaSuccess);
    REQUIRE(gather_elements_grad(out, st, axis, A, idx.data(), dy.data(), dx.data(), 60, nullptr) == cudaSuccess);
    std::vector<float> want_dx(60, 0.f);
    for (int64_t i = 0; i < n; ++i) {  // row-major: each column's elements in the axis' order
      const int64_t c[3] = {i / (shape[1] * shape[2]), (i / shape[2]) % shape[1], i % shape[2]};
      int64_t a = idx[static_cast<size_t>(i)];
      if (a < 0) a += A;
      int64_t off = 0;
      for (int d = 0; d < 3; ++d) off += (d == axis ? a : c[d]) * xs[d];
      if (a < 0 || a >= A) {
        CHECK(y[static_cast<size_t>(i)] == 0.f);
        continue;
      }
      CHECK(y[static_cast<size_t>(i)] == x[static_cast<size_t>(off)]);
      want_dx[static_cast<size_t>(off)] += dy[static_cast<size_t>(i)];
    }
    CHECK(dx == want_dx);
  }
}
