// Batch norm on our CUDA kernels (lib/engine/cuda/cuda_norm_pool_kernels.cu) on the CUDA emulation (emu.h), with
// the fused activations (kernels.h BnActivation): the forward with the activation in its elementwise pass and the
// mask after it, cuDNN's path (batch_norm_activate activating and masking), and BatchNormActGrad gated by the
// activated Y (ReLU, S % 4 == 0: float4 units) and by the mask (Clip, floats, in place over dY), against a double
// reference written from the formulas (gating on the kernel's own Y, so that an element within rounding of a bound
// is judged alike). Same tolerance as monet_cuda_tests. Each batch norm launch is about 2048 blocks of 256 threads
// (kernels.h channel_parts), seconds on the emulation: four in all.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
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

TEST_CASE("batch norm with a fused activation on the CUDA emulation: forward, mask, the gradient gated both ways",
          "[cuda_emu][batch_norm]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  BnActivation relu, clip;
  relu.kind = 1;
  clip.kind = 2, clip.lo = -0.3f, clip.hi = 0.4f;
  // Each with a partly used last mask word.
  for (const auto& [c, act] : {std::pair{Case{3, 4, 12}, relu}, std::pair{Case{2, 3, 7}, clip}}) {
    {
      INFO("N " << c.N << " C " << c.C << " S " << c.S << " activation " << act.kind);
      const int64_t n = c.N * c.C * c.S, M = c.N * c.S;
      std::vector<float> x(n), dy(n), scale(c.C), bias(c.C);
      for (float& e : x) e = 2 * u(rng) + 0.3f;
      for (float& e : dy) e = u(rng);
      for (int64_t ch = 0; ch < c.C; ++ch) scale[ch] = 1.5f + u(rng), bias[ch] = 0.2f * u(rng);
      std::vector<float> y(n), mean(c.C), invstd(c.C);
      std::vector<uint32_t> mask((n + 31) / 32, 0xdeadbeefu), mask2(mask.size(), 0xdeadbeefu);
      std::vector<char> ws(batch_norm_workspace(c.N, c.C));
      REQUIRE(batch_norm(c.N, c.C, c.S, x.data(), scale.data(), bias.data(), 1e-5, 0.9, nullptr, nullptr, y.data(),
                         mean.data(), invstd.data(), ws.data(), nullptr, act) == cudaSuccess);
      REQUIRE(batch_norm_activate(n, y.data(), act, false, mask.data(), nullptr) == cudaSuccess);
      // cuDNN's path (its batch norm has no activation): the activation and the mask in one pass after it; on X here,
      // against the host's activation (exact) and its mask, the one the fused apply gave for its own Y.
      std::vector<float> activated = x;
      REQUIRE(batch_norm_activate(n, activated.data(), act, true, mask2.data(), nullptr) == cudaSuccess);
      for (int64_t e = 0; e < n; ++e) {
        const float want = act.kind == 1 ? (x[e] > 0.f ? x[e] : 0.f) : std::min(std::max(x[e], act.lo), act.hi);
        CHECK(activated[e] == want);
        CHECK(((mask2[e >> 5] >> (e & 31)) & 1u) == (passes(act, want) ? 1u : 0u));
      }

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

      // The gradient, gated by Y (ReLU, out of place) or by the mask (Clip, in place over dY).
      std::vector<double> partial(2 * c.C * channel_parts(c.N, c.C));
      const bool from_mask = act.kind == 2;
      std::vector<float> dx = dy, ds(c.C), db(c.C);  // in place: dY's copy in dx, read and overwritten
      REQUIRE(batch_norm_act_grad(c.N, c.C, c.S, from_mask ? dx.data() : dy.data(), x.data(),
                                  from_mask ? nullptr : y.data(), from_mask ? mask.data() : nullptr, act, scale.data(),
                                  mean.data(), invstd.data(), dx.data(), ds.data(), db.data(), partial.data(),
                                  nullptr) == cudaSuccess);
      check_close(want_dx, std::vector<double>(dx.begin(), dx.end()), "dx");
      check_close(want_ds, std::vector<double>(ds.begin(), ds.end()), "dscale");
      check_close(want_db, std::vector<double>(db.begin(), db.end()), "dbias");
    }
  }
}
