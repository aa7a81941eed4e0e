// MaxPool's CUDA kernels (lib/engine/cuda/cuda_pool_kernels.cu) on the CUDA emulation (emu.h) against a
// reference written here from the definition: the forward's maxima and packed taps (4, 8 and 16 bits), and both
// backward forms, the input-activated one (each window's argmax from X) and the argmax-activated one (decoding the
// forward's taps), each bitwise equal to the reference's sums in (oh, ow) order. Geometries cover the kernels'
// specialisations: 3 x 3 and 2 x 2 windows, strides 1 and 2 and others, rows whose width is a multiple of 4 (four dx
// elements per thread) and not, padding, ceil mode, dilation; and their paths: shared-memory tiles of whole planes
// (of an even number of planes where 4-bit taps of an odd plane would share a byte across tiles) or of bands of
// rows, and rows too wide for any tile (the untiled kernels, the input-activated gradient's int32 argmax array).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

using namespace monet::cuda;

namespace {

struct Geometry {
  std::string name;
  Pool p;
};

Pool pool(int64_t planes, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t sH, int64_t sW, int64_t pad,
          int64_t dil = 1, bool ceil_mode = false) {
  Pool p;
  p.planes = planes, p.H = H, p.W = W, p.kH = kH, p.kW = kW, p.sH = sH, p.sW = sW, p.dH = dil, p.dW = dil;
  p.padT = p.padL = p.padB = p.padR = pad;
  auto out = [&](int64_t in, int64_t k, int64_t s) {
    const int64_t span = in + 2 * pad - ((k - 1) * dil + 1);
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) --o;  // the last window must start inside the input or its padding
    return o;
  };
  p.OH = out(H, kH, sH), p.OW = out(W, kW, sW);
  return p;
}

int tap_bits(int64_t taps) { return taps <= 16 ? 4 : taps <= 256 ? 8 : 16; }

// The first maximum of each window, row-major (the CPU kernel's rule), its tap, and the gradient of a sum of dy * y.
struct Reference {
  std::vector<float> y;
  std::vector<int> tap;
  std::vector<float> dx;
};

Reference reference(const Pool& p, const std::vector<float>& x, const std::vector<float>& dy) {
  Reference r;
  const int64_t outs = p.OH * p.OW;
  r.y.resize(static_cast<size_t>(p.planes * outs));
  r.tap.resize(r.y.size());
  r.dx.assign(static_cast<size_t>(p.planes * p.H * p.W), 0.f);
  for (int64_t c = 0; c < p.planes; ++c)
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        float best = 0.f;
        int tap = -1;
        int64_t at = -1;
        for (int64_t kh = 0; kh < p.kH; ++kh)
          for (int64_t kw = 0; kw < p.kW; ++kw) {
            const int64_t ih = oh * p.sH - p.padT + kh * p.dH, iw = ow * p.sW - p.padL + kw * p.dW;
            if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
            const float v = x[static_cast<size_t>((c * p.H + ih) * p.W + iw)];
            if (tap < 0 || v > best) best = v, tap = static_cast<int>(kh * p.kW + kw), at = ih * p.W + iw;
          }
        const size_t o = static_cast<size_t>(c * outs + oh * p.OW + ow);
        r.y[o] = best;
        r.tap[o] = tap;
        // Windows add into dx in (oh, ow) order, as the gather visits them.
        r.dx[static_cast<size_t>(c * p.H * p.W + at)] += dy[o];
      }
  return r;
}

int unpack(const std::vector<uint8_t>& taps, int bits, size_t i) {
  if (bits == 4) return (taps[i / 2] >> (4 * (i % 2))) & 0xf;
  if (bits == 8) return taps[i];
  return taps[2 * i] | (taps[2 * i + 1] << 8);
}

std::vector<Geometry> geometries() {
  return {
      {"3x3 stride 1 pad 1 (GoogLeNet's branch pools), width 14", pool(6, 14, 14, 3, 3, 1, 1, 1)},
      {"3x3 stride 1 pad 1, width 12 (four dx per thread)", pool(5, 12, 12, 3, 3, 1, 1, 1)},
      {"3x3 stride 2, ceil mode (GoogLeNet's stem)", pool(4, 17, 17, 3, 3, 2, 2, 0, 1, true)},
      {"2x2 stride 2 (VGG's), width 16", pool(7, 16, 16, 2, 2, 2, 2, 0)},
      {"2x2 stride 2, width 10", pool(3, 11, 10, 2, 2, 2, 2, 0)},
      {"5x5 stride 1 pad 2: 8-bit taps", pool(3, 9, 11, 5, 5, 1, 1, 2)},
      {"3x3 dilation 2 pad 2", pool(3, 13, 12, 3, 3, 1, 1, 2, 2)},
      {"3x2 window, strides 2 and 1", [] {
         Pool p = pool(3, 13, 9, 3, 2, 2, 1, 0);
         return p;
       }()},
      {"17x17 window: 16-bit taps", pool(2, 20, 21, 17, 17, 1, 1, 0)},
      {"3x3 stride 3 (a runtime stride)", pool(3, 15, 16, 3, 3, 3, 3, 0)},
      {"3x3 stride 2 pad 1 (ResNet's stem), width 15", pool(4, 15, 15, 3, 3, 2, 2, 1)},
      // Planes larger than a tile: bands of rows, with the 4-bit taps' even starts (OW odd: bands of even height)
      {"3x3 stride 1 pad 1 on 90 x 90 planes: bands", pool(2, 90, 90, 3, 3, 1, 1, 1)},
      {"2x2 stride 2 on 120 x 118 planes: bands of even height", pool(2, 120, 118, 2, 2, 2, 2, 0)},
      {"3x3 dilation 2 pad 2 on 100 x 100 planes: bands", pool(1, 100, 100, 3, 3, 1, 1, 2, 2)},
      // An odd number of outputs a plane: whole-plane tiles of an even number of planes, and a band-sized plane
      // whose forward cannot start every tile at an even output (untiled) while its gradients run in bands
      {"3x3 stride 1 pad 1 on 7 x 9 planes: tiles of an even number of planes", pool(70, 7, 9, 3, 3, 1, 1, 1)},
      {"3x3 stride 2 pad 1 on 101 x 101 planes: forward untiled, gradients in bands", pool(2, 101, 101, 3, 3, 2, 2, 1)},
      // Rows wider than a tile: every kernel untiled (the gather four dx a thread, then one)
      {"3x3 stride 1 pad 1, rows of 6200: untiled", pool(1, 3, 6200, 3, 3, 1, 1, 1)},
      {"3x3 stride 1 pad 1, rows of 6201: untiled", pool(1, 3, 6201, 3, 3, 1, 1, 1)},
      // One band holding every y row that windows make, of a plane whose last rows no window reads: sized as the
      // band, not as the whole plane (64 KB, past what a launch may take without opting in)
      {"1x1 stride 3 on 3 x 5226 planes: one band of the rows read", pool(3, 3, 5226, 1, 1, 3, 3, 0)},
  };
}

}  // namespace

TEST_CASE("MaxPool's CUDA kernels match a reference on the CUDA emulation, both backward forms bitwise",
          "[cuda_emu][max_pool]") {
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> small(-20, 20);  // ties within windows: the first maximum must win
  int paths[3][2] = {};  // geometries untiled and tiled: forward, gradient from x, from taps
  for (const Geometry& k : geometries()) {
    const Pool& p = k.p;
    INFO(k.name << ": " << p.H << "x" << p.W << " -> " << p.OH << "x" << p.OW);
    REQUIRE(p.OH > 0);
    REQUIRE(p.OW > 0);
    const size_t in = static_cast<size_t>(p.planes * p.H * p.W), out = static_cast<size_t>(p.planes * p.OH * p.OW);
    std::vector<float> x(in), dy(out);
    for (float& v : x) v = static_cast<float>(small(rng)) * 0.25f;
    for (float& v : dy) v = static_cast<float>(small(rng)) * 0.1f + 0.01f;
    const Reference want = reference(p, x, dy);
    const int bits = tap_bits(p.kH * p.kW);
    const bool tiled[3] = {max_pool_tiled(p, bits, false), max_pool_tiled(p, 0, true), max_pool_tiled(p, bits, true)};
    INFO("tiled: forward " << tiled[0] << ", gradient from x " << tiled[1] << ", from taps " << tiled[2]);
    paths[0][tiled[0]] += 1, paths[1][tiled[1]] += 1, paths[2][tiled[2]] += 1;
    CHECK(max_pool_grad_workspace(p) == (tiled[1] ? 0 : static_cast<int64_t>(out * sizeof(int32_t))));
    monet_emu::counters().most_shared = 0;
    std::vector<float> y(out);
    std::vector<uint8_t> taps(bits == 4 ? (out + 1) / 2 : bits == 8 ? out : 2 * out);
    REQUIRE(max_pool(p, x.data(), y.data(), taps.data(), bits, nullptr) == cudaSuccess);
    CHECK(std::memcmp(y.data(), want.y.data(), out * sizeof(float)) == 0);
    int wrong_taps = 0;
    for (size_t i = 0; i < out; ++i) wrong_taps += unpack(taps, bits, i) != want.tap[i];
    CHECK(wrong_taps == 0);

    std::vector<int32_t> argmax(tiled[1] ? 0 : out, -7);  // tiled: none, and the kernel must not need it
    std::vector<float> dx_input(in, -1.f), dx_taps(in, -1.f);
    REQUIRE(max_pool_grad(p, dy.data(), x.data(), argmax.data(), dx_input.data(), nullptr) == cudaSuccess);
    REQUIRE(max_pool_grad_taps(p, dy.data(), taps.data(), bits, dx_taps.data(), nullptr) == cudaSuccess);
    CHECK(std::memcmp(dx_input.data(), want.dx.data(), in * sizeof(float)) == 0);
    CHECK(std::memcmp(dx_taps.data(), want.dx.data(), in * sizeof(float)) == 0);
    CHECK(monet_emu::counters().most_shared <= 24 * 1024);  // the tiles' budget (48 KB: a launch's without opt-in)
  }
  for (const auto& path : paths) {  // every kernel ran both ways
    CHECK(path[0] >= 2);
    CHECK(path[1] >= 10);
  }
}

// DivBy<int32_t> (launch.cuh), which splits the pool kernels' indices: its multiply-high and shift against the
// division, for every divisor up to 4096 and divisors across the range (powers of two and their neighbours, random
// ones, the largest), at numerators around multiples of the divisor, small ones, random ones and the largest.
TEST_CASE("DivBy<int32_t>: the multiply-high division equals n / d for 0 <= n < 2^31", "[cuda_emu][max_pool]") {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int32_t> any(0, INT32_MAX), any_divisor(1, INT32_MAX);
  std::vector<int32_t> divisors;
  for (int32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int k = 12; k <= 30; ++k)
    for (int64_t d : {(int64_t{1} << k) - 1, int64_t{1} << k, (int64_t{1} << k) + 1}) divisors.push_back(static_cast<int32_t>(d));
  divisors.push_back(INT32_MAX);
  for (int r = 0; r < 2000; ++r) divisors.push_back(any_divisor(rng));
  int64_t wrong = 0, checked = 0;
  for (const int32_t d : divisors) {
    const DivBy<int32_t> by(d);
    auto check = [&](int64_t n) {
      if (n < 0 || n > INT32_MAX) return;
      const int32_t n32 = static_cast<int32_t>(n);
      wrong += by.div(n32) != n32 / d;
      ++checked;
    };
    for (int64_t n = 0; n < 64; ++n) check(n);
    for (int64_t q : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{1000}, INT32_MAX / int64_t{d}, INT32_MAX / int64_t{d} - 1})
      for (int64_t off = -2; off <= 2; ++off) check(q * d + off);
    for (int r = 0; r < 64; ++r) check(any(rng));
    check(INT32_MAX);
  }
  INFO(checked << " divisions");
  CHECK(wrong == 0);
}
