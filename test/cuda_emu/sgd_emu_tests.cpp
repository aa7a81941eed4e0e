// The multi-tensor SGD kernel (lib/engine/cuda/cuda_elementwise_kernels.cu, sgd_update) on the CUDA emulation
// (emu.h): every tensor of a batch updated bitwise as PyTorch's rule with each product and sum rounded on its own,
// over tensors empty, shorter than a float4, across chunk boundaries (kSgdChunk) and misaligned for float4, in
// batches small and large enough for the kernel's two table sizes.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "engine/cuda/kernels.h"

using namespace monet::cuda;

TEST_CASE("multi-tensor SGD with momentum matches PyTorch's rule bitwise on the CUDA emulation",
          "[cuda_emu][sgd]") {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const std::vector<int64_t> sizes = {0, 1, 3, 4, 5, 17, 1000, kSgdChunk, kSgdChunk + 1, 2 * kSgdChunk + 7};
  for (int tensors : {7, 45}) {  // at most 32: the small table; more: the large one
    INFO(tensors << " tensors");
    struct Buffers {
      std::vector<float> p, g, buf;
      int offset;  // first element used: 1 puts the arrays off 16-byte alignment (the scalar path)
    };
    std::vector<Buffers> b(static_cast<size_t>(tensors));
    SgdBatch batch;
    for (int i = 0; i < tensors; ++i) {
      const int64_t n = sizes[static_cast<size_t>(i) % sizes.size()];
      Buffers& x = b[static_cast<size_t>(i)];
      x.offset = i % 3 == 2 ? 1 : 0;
      for (auto* v : {&x.p, &x.g, &x.buf}) {
        v->resize(static_cast<size_t>(n + 4));
        for (float& e : *v) e = u(rng);
      }
      batch.t[batch.count++] = {x.p.data() + x.offset, x.g.data() + x.offset, x.buf.data() + x.offset, n};
    }
    const float lr = 0.05f, momentum = 0.9f;
    std::vector<Buffers> want = b;
    for (int i = 0; i < tensors; ++i) {
      Buffers& x = want[static_cast<size_t>(i)];
      for (int64_t k = 0; k < batch.t[i].n; ++k) {
        const size_t e = static_cast<size_t>(k + x.offset);
        const float m = momentum * x.buf[e];
        x.buf[e] = m + x.g[e];
        const float step = lr * x.buf[e];
        x.p[e] = x.p[e] - step;
      }
    }
    REQUIRE(sgd_update(batch, lr, momentum, nullptr) == cudaSuccess);
    int wrong = 0;
    for (int i = 0; i < tensors; ++i) {
      const Buffers &got = b[static_cast<size_t>(i)], &w = want[static_cast<size_t>(i)];
      wrong += std::memcmp(got.p.data(), w.p.data(), got.p.size() * sizeof(float)) != 0;      // untouched past n too
      wrong += std::memcmp(got.buf.data(), w.buf.data(), got.buf.size() * sizeof(float)) != 0;
    }
    CHECK(wrong == 0);
  }
}
