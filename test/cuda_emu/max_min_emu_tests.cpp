// Max and Min, and the masks' And, Or, Xor and Not, on the CUDA emulation (emu.h). Max and Min: the broadcast
// kernel's forward and the reduce-to kernel's two gradients against the CPU op's rules (lib/ops/max_min), written
// out here: ties split dY in half, a NaN pair gives NaN forward and the whole dY to both operands (torch's
// maximum/minimum backward), and B's gradient summed over its broadcast. The masks: the comparison kernel's
// logical forms against their truth tables.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/cuda/kernels.h"

using namespace monet::cuda;

TEST_CASE("Max and Min kernels on the CUDA emulation: forward, ties, NaN, gradients summed to a broadcast operand",
          "[cuda_emu][max_min]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {3, -1, 2, nan, 0.5f, -4, 7};
  const std::vector<float> b1 = {1, 2, 2, 1, nan, -4, 8};  // same shape as a
  const std::vector<float> dy = {1, 2, 4, 8, 16, 32, 64};
  const int64_t n = static_cast<int64_t>(a.size());
  Dims out;
  out.rank = 1;
  out.size[0] = n;
  Strides one, zero;
  one.s[0] = 1;
  for (const bool is_max : {true, false}) {
    INFO((is_max ? "Max" : "Min"));
    std::vector<float> y(a.size());
    REQUIRE(broadcast_binary(is_max ? Binary::max : Binary::min, out, one, one, a.data(), b1.data(), y.data(), 0.f,
                             nullptr) == cudaSuccess);
    for (int64_t i = 0; i < n; ++i) {
      const float x = a[i], z = b1[i];
      if (std::isnan(x) || std::isnan(z)) CHECK(std::isnan(y[i]));
      else CHECK(y[i] == (is_max ? std::max(x, z) : std::min(x, z)));
    }
    // Elementwise gradients (nothing reduced): geometry over the kept dim, operands x = dY, p0 = A, p1 = B.
    ReduceGeom g;
    g.kept_rank = 1;
    g.kept_size[0] = n;
    for (int k = 0; k < 3; ++k) g.kept_stride[k][0] = 1;
    g.out_n = n;
    std::vector<float> da(a.size()), db(a.size());
    REQUIRE(reduce_to(is_max ? Term::max_a : Term::min_a, g, dy.data(), a.data(), b1.data(), da.data(), 1.0,
                      nullptr) == cudaSuccess);
    REQUIRE(reduce_to(is_max ? Term::max_b : Term::min_b, g, dy.data(), a.data(), b1.data(), db.data(), 1.0,
                      nullptr) == cudaSuccess);
    for (int64_t i = 0; i < n; ++i) {
      INFO("element " << i);
      const float x = a[i], z = b1[i];
      const bool a_loses = is_max ? x < z : x > z, b_loses = is_max ? x > z : x < z;
      CHECK(da[i] == (x == z ? dy[i] / 2 : a_loses ? 0.f : dy[i]));
      CHECK(db[i] == (x == z ? dy[i] / 2 : b_loses ? 0.f : dy[i]));
    }
    CHECK(da[2] == 2.f);  // the tie at element 2
    CHECK(da[3] == 8.f);  // NaN: both operands take all of dY
    CHECK(db[3] == 8.f);
  }
  // B a scalar broadcast over A: its gradient is the sum of dY where it is not the loser.
  const float s = 2.f;
  ReduceGeom g;
  g.red_rank = 1;
  g.red_size[0] = n;
  g.red_stride[0][0] = 1;
  g.red_stride[1][0] = 1;
  g.red_stride[2][0] = 0;
  g.red_n = n;
  const std::vector<float> finite = {3, -1, 2, 2, 0.5f, -4, 7};
  float db = -1;
  REQUIRE(reduce_to(Term::max_b, g, dy.data(), finite.data(), &s, &db, 1.0, nullptr) == cudaSuccess);
  // s = 2 wins against -1, 0.5, -4 (dY 2 + 16 + 32), ties with the two 2s (half of 4 and of 8).
  CHECK(db == 2 + 16 + 32 + 2 + 4);
  std::vector<float> y(finite.size());
  REQUIRE(broadcast_binary(Binary::max, out, one, zero, finite.data(), &s, y.data(), 0.f, nullptr) == cudaSuccess);
  CHECK(y == std::vector<float>{3, 2, 2, 2, 2, 2, 7});
}

TEST_CASE("And, Or, Xor and Not of masks on the CUDA emulation, with broadcasting", "[cuda_emu][logic]") {
  const std::vector<uint8_t> a = {0, 1, 0, 1, 1, 0};  // (2, 3)
  const std::vector<uint8_t> b = {1, 0, 1};           // (3): broadcast over the rows
  Dims out;
  out.rank = 2;
  out.size[0] = 2;
  out.size[1] = 3;
  Strides sa, sb;
  sa.s[0] = 3;
  sa.s[1] = 1;
  sb.s[1] = 1;
  auto run = [&](Compare op) {
    std::vector<uint8_t> y(6, 7);
    REQUIRE(compare(op, Elem::u8, out, sa, a.data(), sb, b.data(), y.data(), nullptr) == cudaSuccess);
    return y;
  };
  CHECK(run(Compare::land) == std::vector<uint8_t>{0, 0, 0, 1, 0, 0});
  CHECK(run(Compare::lor) == std::vector<uint8_t>{1, 1, 1, 1, 1, 1});
  CHECK(run(Compare::lxor) == std::vector<uint8_t>{1, 1, 1, 0, 1, 1});
  std::vector<uint8_t> y(6, 7);
  REQUIRE(compare(Compare::lnot, Elem::u8, out, sa, a.data(), sa, a.data(), y.data(), nullptr) == cudaSuccess);
  CHECK(y == std::vector<uint8_t>{1, 0, 1, 0, 0, 1});
}
