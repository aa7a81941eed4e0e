// The CUDA backend's kernel table: for every op name of the registry, the host function that runs a node of that
// op on the device (cuDNN, cuBLAS or a launcher of kernels.h) and, where it needs scratch memory, the bytes of
// workspace the executor must place for it in the arena. One file per op family fills the table:
//   cuda_elementwise.cpp  activations, Add/Sub/Mul/Div, Sum, ReduceSumTo/BroadcastTo/Expand, Dropout, SgdUpdate
//   cuda_conv.cpp         Conv, ConvTranspose and their gradients on cuDNN (algorithm choice, workspace)
//   cuda_gemm.cpp         Gemm, MatMul and their gradients on cuBLAS
//   cuda_norm_pool.cpp    BatchNormalization (cuDNN), LayerNorm, pools, GlobalAveragePool, ReduceMean, Softmax, losses
//   cuda_shape.cpp        Concat, Split, Slice, Transpose, Pad, Resize, Gather, the reshaping copies
//   cuda_attention.cpp    Attention and AttentionGrad (cuBLAS and the tiled kernels of attention_kernels.cu)
// Host code, C++20.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace monet::cuda {

// default: what PyTorch does by default (TF32 allowed in cuDNN convolutions, cuBLAS in full fp32);
// fp32: strict fp32 everywhere (cuDNN FMA math only).
enum class MathMode { default_math, fp32 };

struct ConvPlan;  // cuda_conv.cpp: descriptors and the algorithm chosen for one convolution problem

// SgdUpdate launches not yet made (cuda_elementwise.cpp run_sgd): consecutive updates of a schedule go out as one
// kernel. Updates touch only their own parameter, gradient and momentum, and the backend flushes the batch
// (flush_sgd) before anything else reaches the device - another node, a copy, a timer, a synchronisation - so the
// updates run on the data, and in the order, the schedule gives (frees between them only move arena bookkeeping).
struct PendingSgd {
  SgdBatch batch;
  float lr = 0, momentum = 0;
};

// What every kernel of the backend shares: handles, the stream, the math mode, cached convolution plans.
struct CudaContext {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  cudaStream_t stream = nullptr;  // the legacy default stream: everything of a run is ordered on it
  MathMode math = MathMode::default_math;
  // The most workspace an algorithm the backend chooses itself may take (workspace_cap_bytes, engine/backend.h):
  // set when the backend is made, lowered by Backend::limit_workspace.
  int64_t workspace_cap = 0;
  // What the device had free when the backend was made, less kWorkspaceMarginBytes: the most workspace a
  // deterministic backward algorithm may take when none fits workspace_cap.
  int64_t device_room = 0;
  std::map<std::string, std::shared_ptr<ConvPlan>> conv_plans;  // by problem key (choices under workspace_cap)
  PendingSgd pending_sgd;
};

// Launches the pending SgdUpdate batch, if any.
void flush_sgd(CudaContext& ctx);

// The workspace of convolution node n on cuDNN algorithm `algo` (cuda_conv.cpp); throws naming the node when n is
// not a convolution or cuDNN does not offer that algorithm for it.
int64_t conv_workspace_with(CudaContext& ctx, const Graph& g, const Node& n, int algo);

struct CudaCall {
  const Graph& g;
  const Node& node;
  const std::vector<TensorRef>& in;
  const std::vector<TensorRef>& out;
  void* workspace;          // workspace_bytes(...) bytes inside the arena, or null when 0
  int64_t workspace_bytes;
  uint64_t seed;
  bool recompute;
  CudaContext& ctx;
  int impl = 0;             // the node's implementation (ops/op.h ImplDef); unread inputs have data null
  int algo = -1;            // the backend algorithm: a convolution's cuDNN algorithm (-1: the heuristics' choice),
                            // kOwnAlgorithm for our kernels where the default is cuDNN's (batch norm)

  const float* fin(int i) const { return static_cast<const float*>(in[i].data); }
  float* fin_mut(int i) const { return static_cast<float*>(in[i].data); }  // in-place updates (BN stats, SGD)
  float* fout(int i) const { return static_cast<float*>(out[i].data); }
  const Shape& in_shape(int i) const { return *in[i].shape; }
  const Shape& out_shape(int i) const { return *out[i].shape; }
};

struct CudaKernelDef {
  void (*run)(const CudaCall&) = nullptr;
  // Scratch bytes (0 when null). May consult the context (cuDNN's workspace for the chosen algorithm).
  int64_t (*workspace)(const Graph&, const Node&, CudaContext&) = nullptr;
  // Scratch bytes of backend algorithm algo >= 0 of an op that offers algorithms other than convolutions' (which
  // conv_workspace_with answers); throws naming the node for an algorithm the op does not offer.
  int64_t (*algorithm_workspace)(const Graph&, const Node&, CudaContext&, int algo) = nullptr;
  // Scratch bytes of op implementation impl (OpDef::impls index), where an op's implementations need different
  // amounts (then `workspace` is not consulted; null: `workspace` for all of them).
  int64_t (*impl_workspace)(const Graph&, const Node&, CudaContext&, int impl) = nullptr;
};

using CudaKernelTable = std::unordered_map<std::string, CudaKernelDef>;

void add_elementwise_kernels(CudaKernelTable& t);
void add_conv_kernels(CudaKernelTable& t);
void add_gemm_kernels(CudaKernelTable& t);
void add_norm_pool_kernels(CudaKernelTable& t);
void add_shape_kernels(CudaKernelTable& t);
void add_attention_kernels(CudaKernelTable& t);  // cuda_attention.cpp: Attention, AttentionGrad
void add_linear_ce_kernels(CudaKernelTable& t);  // cuda_linear_ce.cpp: LinearCrossEntropy and its gradient

// The whole table (built on first use; needs no GPU).
const CudaKernelTable& kernel_table();

// The context of a backend made by make_cuda_backend (throws for any other backend).
CudaContext& context_of(Backend& backend);

// ------------------------------------------------------------------------------------------ cuBLAS (cuda_gemm.cpp)

// cuBLAS's recommended workspace on Hopper (32 MiB; 4 MiB suffices before it): the first bytes of a node's
// workspace, bound to cuBLAS before the node's products (so it allocates nothing during a step); a node's own
// scratch lies after them.
inline constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;
void bind_cublas_workspace(const CudaCall& c);

// cuBLAS's int dimensions (throws naming the value beyond INT32_MAX).
int cublas_int(int64_t v);

// `count` row-major products C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C at element strides sa, sb, sc
// (sb 0: one B for all), in strided-batched calls of at most 65535 products (column-major cuBLAS computes
// C^T = op(B)^T op(A)^T, so A and B swap places; lda, ldb, ldc are the row strides as stored).
void gemm_rm_batched(const CudaCall& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                     float* out, int64_t ldc, int64_t sc, int64_t count);

// Runs `run` on ctx's stream warmup + repeats times, each between two CUDA events, and returns the median time of
// the repeats in ms (the mean of the middle two for an even count); nothing where `run` returns false (it stops
// there: an algorithm the library refused). For the profiles' algorithm timings (time_algorithms).
std::optional<double> median_run_ms(CudaContext& ctx, int warmup, int repeats, const std::function<bool()>& run);

// ------------------------------------------------------------------------------------------ shape helpers

Dims dims_of(const Shape& s);                                     // throws beyond kMaxDims
Strides contiguous_strides(const Shape& s);                       // row-major element strides
Strides broadcast_strides_to(const Shape& in, const Shape& out);  // numpy: 0 where `in` is broadcast or lacks it

// out[o] = sum over the elements of `full` that broadcast from o (of shape `target`) of the term, / divisor.
// p0, p1: shapes of the extra operands (each broadcasting to full), or null.
ReduceGeom reduce_geom(const Shape& full, const Shape& target, const Shape* p0 = nullptr, const Shape* p1 = nullptr);

// y = a op b with numpy broadcasting over out (y may alias a or b when it has out's shape); merges dims where it can.
void binary_op(const CudaCall& c, Binary op, const Shape& out, const Shape& sa, const float* a, const Shape& sb,
               const float* b, float* y, float scalar = 1.f);

// Device-to-device copy of a whole tensor on the backend's stream.
void copy_bytes(const CudaCall& c, void* dst, const void* src, int64_t bytes);

// Copies a host table into the node's workspace at byte offset `at` (aligned by the caller); returns its address.
template <class T>
T* upload_table(const CudaCall& c, int64_t at, const std::vector<T>& host) {
  MONET_CHECK(at + static_cast<int64_t>(host.size() * sizeof(T)) <= c.workspace_bytes, "workspace too small for ",
              c.node.name);
  T* dst = reinterpret_cast<T*>(static_cast<char*>(c.workspace) + at);
  if (!host.empty())
    MONET_CUDA_CHECK(cudaMemcpyAsync(dst, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, c.ctx.stream));
  return dst;
}

}  // namespace monet::cuda
