// Batch norm on our CUDA kernels (lib/engine/cuda/cuda_norm_pool_kernels.cu) on the CUDA emulation (emu.h), with
// the fused activations (kernels.h BnActivation): the forward with the activation in its elementwise pass and the
// mask after it (and after an unactivated forward, cuDNN's path: batch_norm_activate), and BatchNormActGrad gated
// by the activated Y and by the mask, against a double reference written from the formulas (the reference gates on
// the kernel's own Y, so that an element within rounding of a bound is judged alike). Shapes with S % 4 == 0 (float4
// units) and not, one with a partly used last mask word. Same tolerance as monet_cuda_tests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/cuda/kernels.h"
#include "tensor_close.h"

using namespace monet::cuda;
using monet::test::check_close;

namespace {

bool passes(const BnActivation& a, float y) { return a.kind == 1 ? y > 0.f : y > a.lo && y < a.hi; }

struct Case {
  int64_t N, C, S;
};

}  // namespace

TEST_CASE("batch norm with a fused activation on the CUDA emulation: forward, mask, both gated gradients",
          "[cuda_emu][batch_norm]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  BnActivation relu, clip;
  relu.kind = 1;
  clip.kind = 2, clip.lo = -0.3f, clip.hi = 0.4f;
  for (const Case c : {Case{3, 4, 12}, Case{2, 3, 7}, Case{5, 2, 40}}) {
    for (const BnActivation act : {relu, clip}) {
      INFO("N " << c.N << " C " << c.C << " S " << c.S << " activation " << act.kind);
      const int64_t n = c.N * c.C * c.S, M = c.N * c.S;
      std::vector<float> x(n), dy(n), scale(c.C), bias(c.C);
      for (float& e : x) e = 2 * u(rng) + 0.3f;
      for (float& e : dy) e = u(rng);
      for (int64_t ch = 0; ch < c.C; ++ch) scale[ch] = 1.5f + u(rng), bias[ch] = 0.2f * u(rng);
      std::vector<float> y(n), mean(c.C), invstd(c.C), plain(n), m2(c.C), i2(c.C);
      std::vector<uint32_t> mask((n + 31) / 32, 0xdeadbeefu), mask2(mask.size(), 0xdeadbeefu);
      std::vector<char> ws(batch_norm_workspace(c.N, c.C));
      REQUIRE(batch_norm(c.N, c.C, c.S, x.data(), scale.data(), bias.data(), 1e-5, 0.9, nullptr, nullptr, y.data(),
                         mean.data(), invstd.data(), ws.data(), nullptr, act) == cudaSuccess);
      REQUIRE(batch_norm_activate(n, y.data(), act, false, mask.data(), nullptr) == cudaSuccess);
      // cuDNN's path: normalised without the activation, then activated and masked in one more pass.
      REQUIRE(batch_norm(c.N, c.C, c.S, x.data(), scale.data(), bias.data(), 1e-5, 0.9, nullptr, nullptr,
                         plain.data(), m2.data(), i2.data(), ws.data(), nullptr) == cudaSuccess);
      std::vector<float> activated = plain;
      REQUIRE(batch_norm_activate(n, activated.data(), act, true, mask2.data(), nullptr) == cudaSuccess);
      CHECK(activated == y);
      CHECK(mask2 == mask);

      std::vector<double> want_y(n), want_dx(n), want_ds(c.C), want_db(c.C);
      int on = 0;
      for (int64_t ch = 0; ch < c.C; ++ch) {
        double sum = 0, sq = 0;
        for (int64_t b = 0; b < c.N; ++b)
          for (int64_t s = 0; s < c.S; ++s) sum += x[(b * c.C + ch) * c.S + s];
        const double mu = sum / M;
        for (int64_t b = 0; b < c.N; ++b)
          for (int64_t s = 0; s < c.S; ++s) sq += std::pow(x[(b * c.C + ch) * c.S + s] - mu, 2);
        const double is = 1 / std::sqrt(sq / M + 1e-5);
        double sg = 0, sgx = 0;
        for (int64_t b = 0; b < c.N; ++b)
          for (int64_t s = 0; s < c.S; ++s) {
            const int64_t e = (b * c.C + ch) * c.S + s;
            const double v = (x[e] - mu) * is * scale[ch] + bias[ch];
            want_y[e] = act.kind == 1 ? std::max(v, 0.0) : std::min(std::max(v, double{act.lo}), double{act.hi});
            const bool bit = (mask[e >> 5] >> (e & 31)) & 1u;
            CHECK(bit == passes(act, y[e]));
            on += bit;
            const double g = passes(act, y[e]) ? dy[e] : 0;
            sg += g;
            sgx += g * (x[e] - mu) * is;
          }
        want_db[ch] = sg;
        want_ds[ch] = sgx;
        for (int64_t b = 0; b < c.N; ++b)
          for (int64_t s = 0; s < c.S; ++s) {
            const int64_t e = (b * c.C + ch) * c.S + s;
            const double g = passes(act, y[e]) ? dy[e] : 0;
            want_dx[e] = scale[ch] * is * (g - sg / M - (x[e] - mu) * is * sgx / M);
          }
      }
      CHECK(on > 0);  // both sides of the gate met
      CHECK(on < n);
      for (int64_t e = n; e < static_cast<int64_t>(mask.size()) * 32; ++e) CHECK(((mask[e >> 5] >> (e & 31)) & 1u) == 0);
      check_close(want_y, std::vector<double>(y.begin(), y.end()), "y");

      std::vector<double> partial(2 * c.C * channel_parts(c.N, c.C));
      for (const bool from_mask : {false, true}) {
        INFO((from_mask ? "gate: mask" : "gate: y"));
        std::vector<float> dx(n), ds(c.C), db(c.C);
        REQUIRE(batch_norm_act_grad(c.N, c.C, c.S, dy.data(), x.data(), from_mask ? nullptr : y.data(),
                                    from_mask ? mask.data() : nullptr, act, scale.data(), mean.data(), invstd.data(),
                                    dx.data(), ds.data(), db.data(), partial.data(), nullptr) == cudaSuccess);
        check_close(want_dx, std::vector<double>(dx.begin(), dx.end()), "dx");
        check_close(want_ds, std::vector<double>(ds.begin(), ds.end()), "dscale");
        check_close(want_db, std::vector<double>(db.begin(), db.end()), "dbias");
        // In place over dY, bit for bit as out of place.
        std::vector<float> inplace = dy, ds2(c.C), db2(c.C);
        REQUIRE(batch_norm_act_grad(c.N, c.C, c.S, inplace.data(), x.data(), from_mask ? nullptr : y.data(),
                                    from_mask ? mask.data() : nullptr, act, scale.data(), mean.data(), invstd.data(),
                                    inplace.data(), ds2.data(), db2.data(), partial.data(), nullptr) == cudaSuccess);
        CHECK(inplace == dx);
      }
    }
  }
}
