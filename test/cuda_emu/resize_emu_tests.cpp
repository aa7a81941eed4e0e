// Resize's CUDA kernels (lib/engine/cuda/cuda_resize_kernels.cu) on the CUDA emulation (emu.h): nearest upsampling
// by whole factors without tables, forward and gradient, bitwise equal to the general table-driven kernels (whose
// nearest path equals the CPU's) and to a reference written here from the definition. Geometries cover every
// specialisation: float4 units with fw = 1, 2 and a runtime factor, rows whose width is not a multiple of 4, and
// arrays not 16-byte aligned (one float per thread).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"

using namespace monet::cuda;

namespace {

struct Case {
  std::string name;
  int64_t planes, H, W;
  int fh, fw;
  size_t offset = 0;  // floats from a 16-byte boundary where x and dx start
};

// The general kernels' tables for nearest taps o / f on both axes: forward (i0 = i1, weights 1 and 0) and the
// gradient's readers, per input index its outputs in order with weight 1.
struct Tables {
  std::vector<int64_t> i0h, i0w, start_h, out_h, start_w, out_w;
  std::vector<double> w0h, w1h, w0w, w1w, weight_h, weight_w;
};

void axis(int64_t in, int f, std::vector<int64_t>& i0, std::vector<double>& w0, std::vector<double>& w1,
          std::vector<int64_t>& start, std::vector<int64_t>& out, std::vector<double>& weight) {
  for (int64_t o = 0; o < in * f; ++o) i0.push_back(o / f), w0.push_back(1.0), w1.push_back(0.0);
  for (int64_t i = 0; i < in; ++i) {
    start.push_back(static_cast<int64_t>(out.size()));
    for (int k = 0; k < f; ++k) out.push_back(i * f + k), weight.push_back(1.0);
  }
  start.push_back(static_cast<int64_t>(out.size()));
}

}  // namespace

TEST_CASE("Nearest upsampling by whole factors on the CUDA emulation: bitwise as the table-driven kernels",
          "[cuda_emu][resize]") {
  const std::vector<Case> cases = {
      {"2x2, width 8: float4 units, two float4 per output row", 3, 5, 8, 2, 2},
      {"2x2, width 6: one float per thread", 2, 3, 6, 2, 2},
      {"1x2 (columns only), width 12", 2, 4, 12, 1, 2},
      {"3x1 (rows only), width 8: one float4 per output row", 2, 4, 8, 3, 1},
      {"3x3, width 4: float4 units, a runtime factor", 1, 3, 4, 3, 3},
      {"2x3, width 5: one float per thread, a runtime factor", 2, 3, 5, 2, 3},
      {"2x2, width 8, arrays off a 16-byte boundary", 2, 3, 8, 2, 2, 1},
      {"1x1 (a copy), width 8", 2, 2, 8, 1, 1},
  };
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (const Case& k : cases) {
    INFO(k.name);
    const int64_t OH = k.H * k.fh, OW = k.W * k.fw;
    const size_t in = static_cast<size_t>(k.planes * k.H * k.W), out = static_cast<size_t>(k.planes * OH * OW);
    std::vector<float> xbuf(in + 8), dybuf(out + 8), ybuf(out + 8, -1.f), dxbuf(in + 8, -1.f);
    float* x = xbuf.data() + k.offset;
    float* y = ybuf.data() + k.offset;
    float* dy = dybuf.data() + k.offset;
    float* dx = dxbuf.data() + k.offset;
    for (size_t i = 0; i < in; ++i) x[i] = u(rng);
    for (size_t i = 0; i < out; ++i) dy[i] = u(rng);

    Tables t;
    axis(k.H, k.fh, t.i0h, t.w0h, t.w1h, t.start_h, t.out_h, t.weight_h);
    axis(k.W, k.fw, t.i0w, t.w0w, t.w1w, t.start_w, t.out_w, t.weight_w);
    const ResizeTables ft{t.i0h.data(), t.i0h.data(), t.w0h.data(), t.w1h.data(),
                          t.i0w.data(), t.i0w.data(), t.w0w.data(), t.w1w.data()};
    const ResizeGradTables gt{t.start_h.data(), t.out_h.data(), t.weight_h.data(),
                              t.start_w.data(), t.out_w.data(), t.weight_w.data()};
    std::vector<float> y_general(out), dx_general(in);
    REQUIRE(resize(k.planes, k.H, k.W, OH, OW, false, ft, x, y_general.data(), nullptr) == cudaSuccess);
    REQUIRE(resize_grad(k.planes, k.H, k.W, OH, OW, gt, dy, dx_general.data(), nullptr) == cudaSuccess);

    // The definition: y(p, oh, ow) = x(p, oh / fh, ow / fw); dx sums its readers row by row, column by column.
    std::vector<float> y_want(out), dx_want(in, 0.f);
    for (int64_t p = 0; p < k.planes; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const size_t o = static_cast<size_t>((p * OH + oh) * OW + ow);
          const size_t i = static_cast<size_t>((p * k.H + oh / k.fh) * k.W + ow / k.fw);
          y_want[o] = x[i];
          dx_want[i] += dy[o];
        }
    CHECK(std::memcmp(y_general.data(), y_want.data(), out * sizeof(float)) == 0);
    CHECK(std::memcmp(dx_general.data(), dx_want.data(), in * sizeof(float)) == 0);

    REQUIRE(resize_nearest_up(k.planes * k.H, k.W, k.fh, k.fw, x, y, nullptr) == cudaSuccess);
    REQUIRE(resize_nearest_up_grad(k.planes * k.H, k.W, k.fh, k.fw, dy, dx, nullptr) == cudaSuccess);
    CHECK(std::memcmp(y, y_want.data(), out * sizeof(float)) == 0);
    CHECK(std::memcmp(dx, dx_want.data(), in * sizeof(float)) == 0);
    // Nothing written past either array.
    CHECK(y[out] == -1.f);
    CHECK(dx[in] == -1.f);
  }
}
