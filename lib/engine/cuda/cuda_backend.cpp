// The CUDA backend: the arena's one cudaMalloc, host<->device conversion, and run() dispatching each node by op
// name to the kernel table (cuda_ops.h). fp32 only (the CPU backend covers double). Everything runs on the legacy
// default stream, so kernels, cuDNN and cuBLAS calls and copies are ordered without further synchronisation.
#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>

#include "core/units.h"
#include "engine/cuda/cuda_ops.h"
#include "schedule/plan.h"

namespace monet::cuda {

// ---------------------------------------------------------------------------------------------- kernel table

const CudaKernelTable& kernel_table() {
  static const CudaKernelTable table = [] {
    CudaKernelTable t;
    add_elementwise_kernels(t);
    add_conv_kernels(t);
    add_gemm_kernels(t);
    add_norm_pool_kernels(t);
    add_shape_kernels(t);
    add_attention_kernels(t);
    add_linear_ce_kernels(t);
    return t;
  }();
  return table;
}

std::vector<std::string> kernel_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, def] : kernel_table())
    if (def.run) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

// ---------------------------------------------------------------------------------------------- shape helpers

Dims dims_of(const Shape& s) {
  if (s.size() > static_cast<size_t>(kMaxDims)) fail("CUDA kernels support rank <= ", kMaxDims, ", got ", shape_str(s));
  Dims d;
  d.rank = static_cast<int>(s.size());
  for (size_t i = 0; i < s.size(); ++i) d.size[i] = s[i];
  return d;
}

Strides contiguous_strides(const Shape& s) {
  Strides st;
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st.s[i] = acc;
    acc *= s[i];
  }
  return st;
}

Strides broadcast_strides_to(const Shape& in, const Shape& out) {
  MONET_CHECK(in.size() <= out.size(), shape_str(in), " vs ", shape_str(out));
  Strides st;
  int64_t acc = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t d = in.size() - 1 - k, od = out.size() - 1 - k;
    MONET_CHECK(in[d] == out[od] || in[d] == 1, shape_str(in), " does not broadcast to ", shape_str(out));
    st.s[od] = in[d] == 1 ? 0 : acc;
    acc *= in[d];
  }
  return st;
}

ReduceGeom reduce_geom(const Shape& full, const Shape& target, const Shape* p0, const Shape* p1) {
  dims_of(full);  // rank check
  const Strides sx = contiguous_strides(full);
  const Strides s0 = p0 ? broadcast_strides_to(*p0, full) : Strides{};
  const Strides s1 = p1 ? broadcast_strides_to(*p1, full) : Strides{};
  const Strides st = broadcast_strides_to(target, full);  // 0 on dims summed over
  ReduceGeom g;
  for (size_t d = 0; d < full.size(); ++d) {
    if (full[d] == 1) continue;  // contributes nothing to either index
    const bool kept = st.s[d] != 0;
    int& rank = kept ? g.kept_rank : g.red_rank;
    int64_t* size = kept ? g.kept_size : g.red_size;
    int64_t(*stride)[kMaxDims] = kept ? g.kept_stride : g.red_stride;
    size[rank] = full[d];
    stride[0][rank] = sx.s[d];
    stride[1][rank] = s0.s[d];
    stride[2][rank] = s1.s[d];
    ++rank;
    (kept ? g.out_n : g.red_n) *= full[d];
  }
  MONET_CHECK(g.out_n == numel(target), shape_str(target), " from ", shape_str(full));
  return g;
}

void binary_op(const CudaCall& c, Binary op, const Shape& out, const Shape& sa, const float* a, const Shape& sb,
               const float* b, float* y, float scalar) {
  if (numel(out) == 0) return;
  const Strides ta = broadcast_strides_to(sa, out), tb = broadcast_strides_to(sb, out);
  // Merge adjacent dims d, d+1 where both operands step through them as one (fewer divisions per element).
  Dims m;
  Strides ma, mb;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (m.rank > 0) {
      const int k = m.rank - 1;
      if (ma.s[k] == ta.s[d] * out[d] && mb.s[k] == tb.s[d] * out[d]) {
        m.size[k] *= out[d];
        ma.s[k] = ta.s[d];
        mb.s[k] = tb.s[d];
        continue;
      }
    }
    m.size[m.rank] = out[d];
    ma.s[m.rank] = ta.s[d];
    mb.s[m.rank] = tb.s[d];
    ++m.rank;
  }
  if (m.rank == 0) {  // a single element
    m.rank = 1;
    m.size[0] = 1;
  }
  MONET_CUDA_CHECK(broadcast_binary(op, m, ma, mb, a, b ? b : a, y, scalar, c.ctx.stream));
}

void copy_bytes(const CudaCall& c, void* dst, const void* src, int64_t bytes) {
  if (bytes > 0 && dst != src)
    MONET_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- the backend

namespace {

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(MathMode math) {
    MONET_CUDA_CHECK(cudaSetDevice(0));
    MONET_CUDA_CHECK(cudaGetDeviceProperties(&prop_, 0));
    ctx_.math = math;
    MONET_CUDNN_CHECK(cudnnCreate(&ctx_.cudnn));
    MONET_CUDNN_CHECK(cudnnSetStream(ctx_.cudnn, ctx_.stream));
    MONET_CUBLAS_CHECK(cublasCreate(&ctx_.cublas));
    MONET_CUBLAS_CHECK(cublasSetStream(ctx_.cublas, ctx_.stream));
    // Full fp32 GEMMs in both modes (PyTorch's default: allow_tf32 = False for matmul); CUBLAS_DEFAULT_MATH never
    // uses TF32 for SGEMM.
    MONET_CUBLAS_CHECK(cublasSetMathMode(ctx_.cublas, CUBLAS_DEFAULT_MATH));
    MONET_CUDA_CHECK(cudaDriverGetVersion(&driver_version_));
    MONET_CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version_));
    // The device's free memory once the handles exist: what algorithm workspaces are capped by until a session
    // states its budget and resident bytes (limit_workspace).
    MONET_CUDA_CHECK(cudaMemGetInfo(&free_at_creation_, &total_));
    ctx_.workspace_cap = workspace_cap_bytes(static_cast<int64_t>(free_at_creation_), 0, 0);
    ctx_.device_room = ctx_.workspace_cap;
  }

  ~CudaBackend() override {
    ctx_.conv_plans.clear();
    for (cudaEvent_t e : marks_) cudaEventDestroy(e);
    for (cudaEvent_t e : tickets_) cudaEventDestroy(e);
    if (issued_) cudaEventDestroy(issued_);
    for (cudaStream_t s : copy_stream_)
      if (s) cudaStreamDestroy(s);
    if (ctx_.cublas) cublasDestroy(ctx_.cublas);
    if (ctx_.cudnn) cudnnDestroy(ctx_.cudnn);
  }

  std::string name() const override { return ctx_.math == MathMode::fp32 ? "cuda-fp32" : "cuda"; }
  int float_bytes() const override { return 4; }

  // The arena: exactly one cudaMalloc. cudaMemGetInfo before and after is the cross-check that nothing else
  // takes device memory (describe() reports it again at the end of a run).
  void* reserve(int64_t bytes) override {
    MONET_CUDA_CHECK(cudaMemGetInfo(&free_before_reserve_, &total_));
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, kAlignBytes)));
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state
      throw OutOfMemory(detail::concat("out of memory: the cuda arena needs ", format_bytes(bytes), " and the device has ",
                                       mib(free_before_reserve_), " free of ", mib(total_),
                                       " (a smaller batch, or a schedule for a smaller budget)"));
    }
    MONET_CUDA_CHECK(e);
    MONET_CUDA_CHECK(cudaMemGetInfo(&free_after_reserve_, &total_));
    reserved_ = bytes;
    ++reservations_;
    return p;
  }

  void unreserve(void* block) override {
    // Called from destructors: report, never throw. Updates still pending point into the block: dropped.
    ctx_.pending_sgd.batch.count = 0;
    const cudaError_t e = cudaFree(block);
    if (e != cudaSuccess) std::fprintf(stderr, "cuda: cudaFree of the arena failed: %s\n", cudaGetErrorString(e));
  }

  // Offloaded values live in pinned host memory (copies at the link's full rate), copied on the run's stream.
  void* reserve_host(int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, kAlignBytes)),
                                        cudaHostAllocDefault);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw OutOfMemory("out of memory: the host arena of offloaded values needs " + format_bytes(bytes) +
                        " of pinned host memory and cudaHostAlloc refused (a larger budget offloads less)");
    }
    MONET_CUDA_CHECK(e);
    return p;
  }
  void unreserve_host(void* block) override {
    const cudaError_t e = cudaFreeHost(block);  // from destructors: report, never throw
    if (e != cudaSuccess) std::fprintf(stderr, "cuda: cudaFreeHost of the host arena failed: %s\n", cudaGetErrorString(e));
  }
  // A copy stream per lane (non-blocking: the run's stream is the legacy default one), ordered after the run's
  // stream by an event recorded there; each copy's ticket is an event recorded after it on its copy stream, which
  // copy_wait makes the run's stream wait for.
  int copy_begin(void* dst, const void* src, int64_t bytes, CopyLane lane, bool want_ticket) override {
    const bool to_host = lane == CopyLane::to_host;
    cudaStream_t& stream = copy_stream_[static_cast<int>(lane)];
    if (!stream) MONET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (!issued_) MONET_CUDA_CHECK(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming));
    flush_sgd(ctx_);  // the batched updates issued so far read blocks a copy to the device may overwrite
    MONET_CUDA_CHECK(cudaEventRecord(issued_, ctx_.stream));
    MONET_CUDA_CHECK(cudaStreamWaitEvent(stream, issued_, 0));
    MONET_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                     to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream));
    if (!want_ticket) return -1;  // a piece before a copy's last: its lane's order covers it
    int ticket;
    if (!free_tickets_.empty()) {
      ticket = free_tickets_.back();
      free_tickets_.pop_back();
    } else {
      ticket = static_cast<int>(tickets_.size());
      tickets_.push_back(nullptr);
      MONET_CUDA_CHECK(cudaEventCreateWithFlags(&tickets_.back(), cudaEventDisableTiming));
    }
    MONET_CUDA_CHECK(cudaEventRecord(tickets_[ticket], stream));
    return ticket;
  }
  void copy_wait(int ticket) override {
    if (ticket < 0) return;  // nothing was copied (an empty value)
    MONET_CHECK(ticket >= 0 && ticket < static_cast<int>(tickets_.size()), "copy_wait: no copy ", ticket);
    MONET_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, tickets_[ticket], 0));
    free_tickets_.push_back(ticket);  // re-recording it later leaves this wait as it is
  }

  int64_t workspace_bytes(const Graph& g, const Node& n, int algo, int impl) const override {
    return workspace_of(lookup(n), g, n, algo, impl);
  }

  void limit_workspace(int64_t budget_bytes, int64_t fixed_bytes) override {
    ctx_.workspace_cap = workspace_cap_bytes(static_cast<int64_t>(free_at_creation_), budget_bytes, fixed_bytes);
    ctx_.conv_plans.clear();  // chosen under the previous cap
  }

  void run(const Graph& g, const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out,
           void* workspace, uint64_t seed, bool recompute, int impl, int algo) override {
    const CudaKernelDef& def = lookup(n);
    const int64_t ws = workspace_of(def, g, n, algo, impl);
    if (n.op != "SgdUpdate") flush_sgd(ctx_);  // SgdUpdate joins the pending batch (cuda_ops.h PendingSgd)
    def.run(CudaCall{g, n, in, out, workspace, ws, seed, recompute, ctx_, impl, algo});
  }

  void upload(const TensorRef& dst, const std::vector<double>& host) override {
    MONET_CHECK(static_cast<int64_t>(host.size()) == dst.numel());
    flush_sgd(ctx_);
    const size_t n = host.size();
    switch (dst.dtype) {
      case DType::f32: copy_in(dst.data, std::vector<float>(host.begin(), host.end())); break;
      case DType::i64: {
        std::vector<int64_t> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(host[i]);
        copy_in(dst.data, v);
        break;
      }
      case DType::u8: {
        std::vector<uint8_t> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(host[i]);
        copy_in(dst.data, v);
        break;
      }
    }
  }

  std::vector<double> download(const TensorRef& src) override {
    flush_sgd(ctx_);
    const size_t n = static_cast<size_t>(src.numel());
    switch (src.dtype) {
      case DType::f32: return copy_out<float>(src.data, n);
      case DType::i64: return copy_out<int64_t>(src.data, n);
      case DType::u8: return copy_out<uint8_t>(src.data, n);
    }
    return {};
  }

  void synchronize() override {
    flush_sgd(ctx_);
    MONET_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    for (cudaStream_t s : copy_stream_)
      if (s) MONET_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  // A timed node's pending updates go out before the next mark (an SgdUpdate is timed alone). The events are
  // made once and reused step after step.
  void timer_mark() override {
    flush_sgd(ctx_);
    if (marks_used_ == marks_.size()) {
      cudaEvent_t e = nullptr;
      MONET_CUDA_CHECK(cudaEventCreate(&e));
      marks_.push_back(e);
    }
    MONET_CUDA_CHECK(cudaEventRecord(marks_[marks_used_], ctx_.stream));
    ++marks_used_;
  }
  std::vector<double> timer_marks_ms() override {
    flush_sgd(ctx_);
    std::vector<double> ms;
    if (marks_used_ == 0) return ms;
    const size_t used = marks_used_;
    marks_used_ = 0;
    MONET_CUDA_CHECK(cudaEventSynchronize(marks_[used - 1]));
    for (size_t i = 0; i < used; ++i) {
      float t = 0;
      MONET_CUDA_CHECK(cudaEventElapsedTime(&t, marks_[0], marks_[i]));
      ms.push_back(t);
    }
    return ms;
  }

  std::string describe() const override {
    size_t free_now = 0, total = 0;
    MONET_CUDA_CHECK(cudaMemGetInfo(&free_now, &total));
    std::string s = std::string(prop_.name) + " (sm_" + std::to_string(prop_.major) + std::to_string(prop_.minor) +
                    ", " + mib(prop_.totalGlobalMem) + "), driver " + version(driver_version_) + ", runtime " +
                    version(runtime_version_) + ", cuDNN " + std::to_string(cudnnGetVersion()) + " (built with " +
                    std::to_string(CUDNN_VERSION) + "), math " + (ctx_.math == MathMode::fp32 ? "fp32" : "default") +
                    "; workspace cap " + mib(static_cast<size_t>(ctx_.workspace_cap)) + " per algorithm" +
                    "; cudaMemGetInfo free: " + mib(free_at_creation_) + " at start, " + mib(free_before_reserve_) +
                    " before the arena";
    if (reservations_ > 0)
      s += ", " + mib(free_after_reserve_) + " after reserving " + std::to_string(reserved_) + " B (" +
           std::to_string(reservations_) + " reservation" + (reservations_ > 1 ? "s" : "") + "), " + mib(free_now) +
           " now";
    return s;
  }

  CudaContext& context() { return ctx_; }

 private:
  static std::string version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

  int64_t workspace_of(const CudaKernelDef& def, const Graph& g, const Node& n, int algo, int impl) const {
    if (algo >= 0)  // conv_workspace_with refuses ops without algorithms
      return def.algorithm_workspace ? def.algorithm_workspace(g, n, ctx_, algo) : conv_workspace_with(ctx_, g, n, algo);
    if (def.impl_workspace) return def.impl_workspace(g, n, ctx_, impl);
    return def.workspace ? def.workspace(g, n, ctx_) : 0;
  }

  const CudaKernelDef& lookup(const Node& n) const {
    const CudaKernelTable& t = kernel_table();
    auto it = t.find(n.op);
    if (it == t.end() || !it->second.run) fail("node '", n.name, "' (", n.op, "): no CUDA kernel");
    return it->second;
  }

  template <class T>
  void copy_in(void* dst, const std::vector<T>& v) {
    if (v.empty()) return;
    MONET_CUDA_CHECK(cudaMemcpy(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }

  template <class T>
  std::vector<double> copy_out(const void* src, size_t n) {
    std::vector<T> v(n);
    if (n) MONET_CUDA_CHECK(cudaMemcpy(v.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
    return std::vector<double>(v.begin(), v.end());
  }

  cudaDeviceProp prop_{};
  mutable CudaContext ctx_;  // workspace_bytes() caches convolution plans
  std::vector<cudaEvent_t> marks_;  // timer_mark's events, the first marks_used_ of them recorded this step
  cudaStream_t copy_stream_[3] = {nullptr, nullptr, nullptr};  // by CopyLane (copy_begin)
  cudaEvent_t issued_ = nullptr;                       // recorded on the run's stream before each copy
  std::vector<cudaEvent_t> tickets_;                   // copy_begin's tickets: an event after each copy
  std::vector<int> free_tickets_;
  size_t marks_used_ = 0;
  int driver_version_ = 0, runtime_version_ = 0;
  size_t free_at_creation_ = 0, free_before_reserve_ = 0, free_after_reserve_ = 0, total_ = 0;
  int64_t reserved_ = 0;
  int reservations_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const std::string& math) {
  if (math != "default" && math != "fp32") fail("--math '", math, "': expected default or fp32");
  std::string description;
  const std::string problem = probe_device(&description);
  if (!problem.empty()) fail("--device cuda: ", problem);
  return std::make_unique<CudaBackend>(math == "fp32" ? MathMode::fp32 : MathMode::default_math);
}

CudaContext& context_of(Backend& backend) {
  auto* b = dynamic_cast<CudaBackend*>(&backend);
  if (!b) fail("not a CUDA backend: ", backend.name());
  return b->context();
}

std::optional<double> median_run_ms(CudaContext& ctx, int warmup, int repeats, const std::function<bool()>& run) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  auto destroy = [&] {
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
  };
  std::vector<float> ms;
  bool ran = true;
  try {
    MONET_CUDA_CHECK(cudaEventCreate(&e0));
    MONET_CUDA_CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < warmup + repeats && ran; ++i) {
      MONET_CUDA_CHECK(cudaEventRecord(e0, ctx.stream));
      ran = run();
      MONET_CUDA_CHECK(cudaEventRecord(e1, ctx.stream));
      MONET_CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      MONET_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= warmup) ms.push_back(t);
    }
  } catch (...) {
    destroy();
    throw;
  }
  destroy();
  if (!ran || ms.empty()) return std::nullopt;
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
}

namespace {

bool is_batch_norm(const std::string& op) { return op == "BatchNormalization" || op == "BatchNormGrad"; }

// Batch norm's algorithms, each run through the backend on inputs of the node's shapes (a fixed pattern in
// [0.5, 1.5]: positive variances and invstd) in one cudaMalloc made and freed here: cuDNN's (algorithm 0, the
// default) and ours; a fused batch norm's mask not written (the lean run).
nlohmann::json time_batch_norm_algorithms(Backend& backend, const Graph& g, const Node& n, int warmup, int repeats) {
  CudaContext& ctx = context_of(backend);
  std::vector<int64_t> offset;
  int64_t total = 0;
  std::vector<int> values = n.inputs;
  values.insert(values.end(), n.outputs.begin(), n.outputs.end());
  for (int v : values) {
    offset.push_back(total);
    total += align_up(tensor_bytes(g.values[v].shape, g.values[v].dtype, 4));
  }
  const std::vector<int> algos = {0, kOwnAlgorithm};
  int64_t ws = 0;
  for (int a : algos) ws = std::max(ws, backend.workspace_bytes(g, n, a));
  char* block = nullptr;  // not the backend's reserve: the arena's bookkeeping stays the run's
  MONET_CUDA_CHECK(cudaMalloc(&block, static_cast<size_t>(total + align_up(ws) + kAlignBytes)));
  auto ref = [&](size_t k) { return TensorRef{block + offset[k], &g.values[values[k]].shape, g.values[values[k]].dtype}; };
  std::vector<TensorRef> in, out;
  for (size_t k = 0; k < values.size(); ++k) (k < n.inputs.size() ? in : out).push_back(ref(k));
  // Optional outputs (a fused batch norm's mask) without data, as store-all runs the node where nothing reads them.
  for (int o : op_def(n.op).optional_outputs)
    if (o < static_cast<int>(out.size())) out[static_cast<size_t>(o)].data = nullptr;
  nlohmann::json list = nlohmann::json::array();
  try {
    for (const TensorRef& t : in) {
      std::vector<double> pattern(static_cast<size_t>(numel(*t.shape)));
      for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = 0.5 + static_cast<double>((i * 2654435761u) % 1000) / 1000;
      backend.upload(t, pattern);
    }
    for (int a : algos) {
      const std::optional<double> ms = median_run_ms(ctx, warmup, repeats, [&] {
        backend.run(g, n, in, out, ws > 0 ? block + total : nullptr, 1, false, 0, a);
        return true;
      });
      list.push_back({{"algo", a},
                      {"workspace_bytes", backend.workspace_bytes(g, n, a)},
                      {"deterministic", true},
                      {"chosen_by_default", a == 0},
                      {"status", "ok"},
                      {"time_ms", ms.value()}});
    }
  } catch (...) {
    cudaFree(block);
    throw;
  }
  MONET_CUDA_CHECK(cudaFree(block));
  return list;
}

}  // namespace

bool offers_algorithms(const std::string& op) { return is_cudnn_conv(op) || is_batch_norm(op); }

nlohmann::json time_algorithms(Backend& backend, const Graph& g, const Node& n, int warmup, int repeats) {
  if (is_cudnn_conv(n.op)) return time_conv_algorithms(backend, g, n, warmup, repeats);
  if (is_batch_norm(n.op)) return time_batch_norm_algorithms(backend, g, n, warmup, repeats);
  return nlohmann::json::array();
}

}  // namespace monet::cuda
