// The host link's figures (cuda_backend.h measure_host_link): copies between pinned host memory and GPU 0 timed with
// CUDA events on a non-blocking stream of their own, alone and beside a kernel that streams through device memory.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace monet::cuda {
namespace {

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

}  // namespace

LinkFigures measure_host_link(int64_t bytes, int repeats) {
  if (bytes < 4096 || repeats < 1) fail("measure_host_link: ", bytes, " bytes, ", repeats, " repeats");
  bytes -= bytes % 16;
  struct Resources {
    void* host = nullptr;
    void* dev = nullptr;
    float* busy = nullptr;
    cudaStream_t copy = nullptr, compute = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr, busy_start = nullptr, busy_stop = nullptr;
    ~Resources() {
      cudaDeviceSynchronize();
      for (cudaEvent_t e : {start, stop, busy_start, busy_stop})
        if (e) cudaEventDestroy(e);
      for (cudaStream_t s : {copy, compute})
        if (s) cudaStreamDestroy(s);
      if (busy) cudaFree(busy);
      if (dev) cudaFree(dev);
      if (host) cudaFreeHost(host);
    }
  } r;
  MONET_CUDA_CHECK(cudaHostAlloc(&r.host, static_cast<size_t>(bytes), cudaHostAllocDefault));
  MONET_CUDA_CHECK(cudaMalloc(&r.dev, static_cast<size_t>(bytes)));
  MONET_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&r.busy), static_cast<size_t>(bytes)));
  MONET_CUDA_CHECK(cudaMemset(r.busy, 0, static_cast<size_t>(bytes)));
  std::fill_n(static_cast<char*>(r.host), bytes, 1);
  MONET_CUDA_CHECK(cudaStreamCreateWithFlags(&r.copy, cudaStreamNonBlocking));
  MONET_CUDA_CHECK(cudaStreamCreateWithFlags(&r.compute, cudaStreamNonBlocking));
  for (cudaEvent_t* e : {&r.start, &r.stop, &r.busy_start, &r.busy_stop}) MONET_CUDA_CHECK(cudaEventCreate(e));

  // One copy on the copy stream, in ms.
  auto copy_ms = [&](cudaMemcpyKind kind, int64_t n) {
    void* dst = kind == cudaMemcpyHostToDevice ? r.dev : r.host;
    const void* src = kind == cudaMemcpyHostToDevice ? r.host : r.dev;
    MONET_CUDA_CHECK(cudaEventRecord(r.start, r.copy));
    MONET_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n), kind, r.copy));
    MONET_CUDA_CHECK(cudaEventRecord(r.stop, r.copy));
    MONET_CUDA_CHECK(cudaEventSynchronize(r.stop));
    float ms = 0;
    MONET_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
    return static_cast<double>(ms);
  };
  auto rate = [&](cudaMemcpyKind kind) {
    for (int i = 0; i < 2; ++i) copy_ms(kind, bytes);
    std::vector<double> ms;
    for (int i = 0; i < repeats; ++i) ms.push_back(copy_ms(kind, bytes));
    const double m = median(ms);
    if (!(m > 0)) fail("measure_host_link: a copy of ", bytes, " bytes timed at ", m, " ms");
    return static_cast<double>(bytes) / (m * 1e-3) / 1e9;
  };
  LinkFigures f;
  f.h2d_gbs = rate(cudaMemcpyHostToDevice);
  f.d2h_gbs = rate(cudaMemcpyDeviceToHost);
  std::vector<double> small;
  for (int i = 0; i < 4 * repeats + 2; ++i) {
    const double ms = copy_ms(cudaMemcpyHostToDevice, 4096);
    if (i >= 2) small.push_back(ms);  // two warm-ups
  }
  f.latency_us = median(small) * 1e3;

  // Beside a kernel: one pass over `bytes` timed alone, then enough passes to outlast every copy of a direction.
  const int64_t n = bytes / 4;
  MONET_CUDA_CHECK(cudaEventRecord(r.busy_start, r.compute));
  MONET_CUDA_CHECK(stream_through(r.busy, n, 1, r.compute));
  MONET_CUDA_CHECK(cudaEventRecord(r.busy_stop, r.compute));
  MONET_CUDA_CHECK(cudaEventSynchronize(r.busy_stop));
  float pass_ms = 0;
  MONET_CUDA_CHECK(cudaEventElapsedTime(&pass_ms, r.busy_start, r.busy_stop));
  auto busy_rate = [&](cudaMemcpyKind kind, double idle_gbs) {
    const double copies_ms = (repeats + 2) * static_cast<double>(bytes) / (idle_gbs * 1e6) * 2;
    const int passes = std::max(1, static_cast<int>(std::ceil(copies_ms / std::max(1e-3, double{pass_ms}))));
    MONET_CUDA_CHECK(stream_through(r.busy, n, passes, r.compute));
    const double gbs = rate(kind);
    MONET_CUDA_CHECK(cudaStreamSynchronize(r.compute));
    return gbs;
  };
  f.h2d_busy_gbs = busy_rate(cudaMemcpyHostToDevice, f.h2d_gbs);
  f.d2h_busy_gbs = busy_rate(cudaMemcpyDeviceToHost, f.d2h_gbs);
  return f;
}

}  // namespace monet::cuda
