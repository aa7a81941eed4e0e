// The CPU backend: reference-quality kernels from lib/ops/<op>, in float or double.
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/units.h"
#include "engine/backend.h"
#ifdef MONET_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace monet {
namespace {

template <class T>
class CpuBackend final : public Backend {
 public:
  std::string name() const override { return sizeof(T) == 4 ? "cpu" : "cpu-f64"; }
  int float_bytes() const override { return sizeof(T); }

  void* reserve(int64_t bytes) override {
    void* p = std::aligned_alloc(kAlignBytes, static_cast<size_t>(align_up(std::max<int64_t>(bytes, 1))));
    if (!p)
      throw OutOfMemory("out of memory: the cpu arena needs " + format_bytes(bytes) +
                        " and the host could not reserve them (a smaller batch, or a schedule for a smaller budget)");
    return p;
  }
  void unreserve(void* block) override { std::free(block); }

  // One algorithm per op: a schedule's (CUDA) algorithm choice does not apply here.
  int64_t workspace_bytes(const Graph& g, const Node& n, int /*algo*/, int /*impl*/) const override {
    const OpDef& def = op_def(n.op);
    return def.cpu_workspace_bytes ? def.cpu_workspace_bytes(g, n, sizeof(T)) : 0;
  }

  void run(const Graph&, const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out,
           void* workspace, uint64_t seed, bool recompute, int impl, int /*algo*/) override {
    const OpDef& def = op_def(n.op);
    CpuKernel k = sizeof(T) == 4 ? def.cpu_f32 : def.cpu_f64;
    if (!k) fail("node '", n.name, "' (", n.op, "): no CPU kernel");
    k(CpuCall{n, in, out, workspace, seed, recompute, impl});
  }

  void upload(const TensorRef& dst, const std::vector<double>& host) override { write_host(dst, host); }
  std::vector<double> download(const TensorRef& src) override { return read_host(src); }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int float_bytes) {
  if (float_bytes == 8) return std::make_unique<CpuBackend<double>>();
  MONET_CHECK(float_bytes == 4);
  return std::make_unique<CpuBackend<float>>();
}

std::unique_ptr<Backend> make_backend(const std::string& device, const std::string& math) {
  if (math != "default" && math != "fp32") fail("--math '", math, "': expected default or fp32");
  if (device == "cpu") return make_cpu_backend(4);
  if (device == "cuda") {
#ifdef MONET_HAVE_CUDA
    std::string problem = cuda::probe_device(nullptr);
    if (!problem.empty()) fail("--device cuda: ", problem);
    return cuda::make_cuda_backend(math);
#else
    fail("--device cuda: this build has no CUDA support (nvcc/cuDNN were not found at configure time)");
#endif
  }
  fail("--device '", device, "': expected cpu or cuda");
}

}  // namespace monet
