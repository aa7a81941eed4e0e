// CUDA kernels of normalisation, pooling, reductions and losses (host side): BatchNormalization and
// BatchNormGrad on cuDNN or, as backend algorithm kOwnAlgorithm, on our kernels (spatial mode: per-channel
// statistics over N and every spatial position, the running statistics updated with PyTorch's rule only when the
// call is not a recomputation), BatchNormStatGrad, LayerNorm (with its gradients; our kernels), MaxPool,
// AveragePool, GlobalAveragePool, ReduceMean, ReduceSum, ReduceMax, Softmax, LogSoftmax (each with its gradient),
// CumSum, TileGrad (a sum over the copies), SoftmaxCrossEntropy and SumLoss (with theirs). Geometry comes from the
// same functions as the CPU kernels (ops/common/pool.h).
#include "engine/cuda/cuda_ops.h"
#include "ops/common/plans.h"
#include "ops/common/pool.h"
#include "ops/cum_sum/cum_sum.h"
#include "ops/tile/tile.h"
#include "schedule/plan.h"

namespace monet::cuda {
namespace {

// ---------------------------------------------------------------------------------------------- batch norm

// X (N, C, spatial...) as the 4-D tensor (N, C, S, 1) cuDNN's spatial batch norm reads, and its (1, C, 1, 1)
// parameter descriptor.
class BnDescriptors {
 public:
  explicit BnDescriptors(const Shape& x) {
    const int64_t N = x[0], C = x[1], S = numel(x) / (N * C);
    MONET_CHECK(N <= INT32_MAX && C <= INT32_MAX && S <= INT32_MAX, shape_str(x));
    MONET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    MONET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p_));
    MONET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(N),
                                                 static_cast<int>(C), static_cast<int>(S), 1));
    MONET_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p_, x_, CUDNN_BATCHNORM_SPATIAL));
  }
  ~BnDescriptors() {
    cudnnDestroyTensorDescriptor(x_);
    cudnnDestroyTensorDescriptor(p_);
  }
  BnDescriptors(const BnDescriptors&) = delete;
  BnDescriptors& operator=(const BnDescriptors&) = delete;
  cudnnTensorDescriptor_t x() const { return x_; }
  cudnnTensorDescriptor_t p() const { return p_; }

 private:
  cudnnTensorDescriptor_t x_ = nullptr, p_ = nullptr;
};

// X as (N, C, S).
struct Ncs {
  int64_t N, C, S;
};
Ncs ncs_of(const Shape& x) { return {x[0], x[1], numel(x) / (x[0] * x[1])}; }

// Batch norm's backend algorithms: 0 (cuDNN's, the default; -1 too) and kOwnAlgorithm (our kernels); anything else
// is refused naming the node.
bool own_algorithm(const Node& n, int algo) {
  if (algo == kOwnAlgorithm) return true;
  if (algo > 0) fail("node '", n.name, "' (", n.op, "): no algorithm ", algo, " (0: cuDNN's, ", kOwnAlgorithm, ": ours)");
  return false;
}

// A fused batch norm's activation (ops/common/plans.h) for the kernels.
BnActivation activation_of(const Node& n) {
  const ops::BnActivation a = ops::bn_activation(n.attrs);
  BnActivation k;
  k.kind = static_cast<int>(a.kind);
  k.lo = static_cast<float>(a.lo);
  k.hi = static_cast<float>(a.hi);
  return k;
}

// BatchNormalization(X, scale, B, running_mean, running_var) -> Y, saved_mean, saved_invstd.
// cuDNN (the default, algorithm 0): its running update is running = running * (1 - factor) + stat * factor with the
// unbiased variance: factor = 1 - momentum. Y may be X's buffer (in place): cuDNN does not document it, but the
// statistics need all of X before any Y is written and Y is then X normalised element by element. monet_cuda_tests
// compares in place with out of place bit for bit (a 32x8x56x56 case for the multi-block kernels); it passed on the
// H100 (schedules/GPU.md, "Correctness", series C, 2026-11-23).
// Ours (kOwnAlgorithm): kernels.h batch_norm, the CPU kernel's rule; in place likewise.
// A fused activation (attribute activation): ours applies it in its elementwise pass; after cuDNN's, one more pass
// over Y (batch_norm_activate). Its mask (output 3, where a step reads it): one more pass over the activated Y.
void run_batch_norm(const CudaCall& c) {
  const BnActivation act = activation_of(c.node);
  uint32_t* mask = c.out.size() > 3 ? static_cast<uint32_t*>(c.out[3].data) : nullptr;  // null: not read
  const double eps = c.node.attrs.f("epsilon", 1e-5);
  const double momentum = c.node.attrs.f("momentum", 0.9);
  float* running_mean = c.recompute ? nullptr : c.fin_mut(3);  // both null: no update (a recomputation)
  float* running_var = c.recompute ? nullptr : c.fin_mut(4);
  if (own_algorithm(c.node, c.algo)) {
    const auto [N, C, S] = ncs_of(c.in_shape(0));
    MONET_CHECK(c.workspace_bytes >= batch_norm_workspace(N, C), "BatchNormalization workspace too small");
    MONET_CUDA_CHECK(batch_norm(N, C, S, c.fin(0), c.fin(1), c.fin(2), eps, momentum, running_mean, running_var,
                                c.fout(0), c.fout(1), c.fout(2), c.workspace, c.ctx.stream, act));
    MONET_CUDA_CHECK(batch_norm_activate(c.out[0].numel(), c.fout(0), act, false, mask, c.ctx.stream));
    return;
  }
  const BnDescriptors d(c.in_shape(0));
  const float one = 1.f, zero = 0.f;
  MONET_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      c.ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x(), c.fin(0), d.x(), c.fout(0), d.p(), c.fin(1), c.fin(2),
      1.0 - momentum, running_mean, running_var, eps, c.fout(1), c.fout(2)));
  MONET_CUDA_CHECK(batch_norm_activate(c.out[0].numel(), c.fout(0), act, true, mask, c.ctx.stream));
}

int64_t batch_norm_algorithm_workspace(const Graph& g, const Node& n, CudaContext&, int algo) {
  const Shape& x = g.values[n.inputs[0]].shape;
  return own_algorithm(n, algo) ? batch_norm_workspace(x[0], x[1]) : 0;
}

// BatchNormGrad(dY, X, scale, saved_mean, saved_invstd, Y, B) -> dX, dScale, dBias. Input-activated (impl 0) on
// cuDNN (algorithm 0, the default): with the saved statistics given, cuDNN does not recompute them; epsilon (not an
// attribute of BatchNormGrad) is then unused. Input-activated on our kernels (kOwnAlgorithm) and output-activated
// (impl 1, reads dY, scale, saved_invstd, Y, B): kernels.h.
void run_batch_norm_grad(const CudaCall& c) {
  const bool ours = own_algorithm(c.node, c.algo);
  if (c.impl == 1) {
    const auto [N, C, S] = ncs_of(c.in_shape(5));
    // A zero scale makes X unrecoverable from Y: refused as on the CPU (a small device-to-host copy per call).
    std::vector<float> scale(static_cast<size_t>(C));
    MONET_CUDA_CHECK(cudaMemcpyAsync(scale.data(), c.fin(2), C * sizeof(float), cudaMemcpyDeviceToHost, c.ctx.stream));
    MONET_CUDA_CHECK(cudaStreamSynchronize(c.ctx.stream));
    for (int64_t ch = 0; ch < C; ++ch)
      if (scale[ch] == 0.f)
        fail("node '", c.node.name, "' (BatchNormGrad, output-activated): scale of channel ", ch,
             " is 0, so X cannot be recovered from Y");
    MONET_CHECK(c.workspace_bytes >= 2 * C * channel_parts(N, C) * 8, "BatchNormGrad workspace too small");
    MONET_CUDA_CHECK(batch_norm_grad_from_output(N, C, S, c.fin(0), c.fin(5), c.fin(2), c.fin(6), c.fin(4),
                                                 c.fout(0), c.fout(1), c.fout(2), static_cast<double*>(c.workspace),
                                                 c.ctx.stream));
    return;
  }
  if (ours) {
    const auto [N, C, S] = ncs_of(c.in_shape(1));
    MONET_CHECK(c.workspace_bytes >= 2 * C * channel_parts(N, C) * 8, "BatchNormGrad workspace too small");
    MONET_CUDA_CHECK(batch_norm_grad_from_input(N, C, S, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fin(4), c.fout(0),
                                                c.fout(1), c.fout(2), static_cast<double*>(c.workspace),
                                                c.ctx.stream));
    return;
  }
  const BnDescriptors d(c.in_shape(1));
  const float one = 1.f, zero = 0.f;
  MONET_CUDNN_CHECK(cudnnBatchNormalizationBackward(c.ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                                    d.x(), c.fin(1), d.x(), c.fin(0), d.x(), c.fout(0), d.p(),
                                                    c.fin(2), c.fout(1), c.fout(2), 1e-5, c.fin(3), c.fin(4)));
}

// Our implementations' per-part channel sums (two doubles per part); cuDNN's needs none, but a node has one
// workspace for all its implementations and algorithms.
int64_t batch_norm_grad_workspace(const Graph& g, const Node& n, CudaContext&) {
  const Shape& y = g.values[n.inputs[0]].shape;
  return 2 * y[1] * channel_parts(y[0], y[1]) * static_cast<int64_t>(sizeof(double));
}

int64_t batch_norm_grad_algorithm_workspace(const Graph& g, const Node& n, CudaContext& ctx, int algo) {
  own_algorithm(n, algo);  // refuses any other algorithm; both take the same workspace
  return batch_norm_grad_workspace(g, n, ctx);
}

// BatchNormActGrad(dY, X, scale, saved_mean, saved_invstd, Y, mask) -> dX, dScale, dBias: our kernels (cuDNN's batch
// norm backward has no activation in NCHW fp32), the input-activated form on dY gated at Y (impl 0, "output") or by
// the mask (impl 1); workspace as BatchNormGrad's.
void run_batch_norm_act_grad(const CudaCall& c) {
  const auto [N, C, S] = ncs_of(c.in_shape(1));
  MONET_CHECK(c.workspace_bytes >= 2 * C * channel_parts(N, C) * 8, "BatchNormActGrad workspace too small");
  const uint32_t* mask = c.impl == 1 ? static_cast<const uint32_t*>(c.in[6].data) : nullptr;
  MONET_CHECK(c.impl != 1 || mask, "BatchNormActGrad mask without the mask");
  MONET_CUDA_CHECK(batch_norm_act_grad(N, C, S, c.fin(0), c.fin(1), c.impl == 1 ? nullptr : c.fin(5), mask,
                                       activation_of(c.node), c.fin(2), c.fin(3), c.fin(4), c.fout(0), c.fout(1),
                                       c.fout(2), static_cast<double*>(c.workspace), c.ctx.stream));
}

// BatchNormStatGrad(dStat, X, saved_mean, saved_invstd) -> dX.
void run_batch_norm_stat_grad(const CudaCall& c) {
  const Shape& x = c.in_shape(1);
  const int64_t N = x[0], C = x[1], S = numel(x) / (N * C);
  MONET_CUDA_CHECK(batch_norm_stat_grad(N, C, S, c.node.attrs.s("stat") == "mean", c.fin(0), c.fin(1), c.fin(2),
                                        c.fin(3), c.fout(0), c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- layer norm

ops::LayerNormRows ln_rows(const CudaCall& c, int x_input) {
  return ops::layer_norm_rows(c.in_shape(x_input), c.node.attrs.i("axis", -1));
}

// LayerNorm(X, Scale, B) -> Y, Mean, InvStdDev.
void run_layer_norm(const CudaCall& c) {
  const ops::LayerNormRows s = ln_rows(c, 0);
  MONET_CUDA_CHECK(layer_norm(s.rows, s.d, c.node.attrs.f("epsilon", 1e-5), c.fin(0), c.fin(1), c.fin(2), c.fout(0),
                              c.fout(1), c.fout(2), c.ctx.stream));
}

// LayerNormGrad(dY, X, Scale, Mean, InvStdDev, Y, B) -> dX, dScale, dB: input-activated (impl 0) or
// output-activated (impl 1, xhat from Y; a zero scale is refused as the CPU kernel refuses it). Workspace: the
// per-part column sums (kernels.h layer_norm_grad), the same for both implementations.
int64_t layer_norm_grad_workspace(const Graph& g, const Node& n, CudaContext&) {
  const ops::LayerNormRows s = ops::layer_norm_rows(g.values[n.inputs[0]].shape, n.attrs.i("axis", -1));
  return layer_norm_grad_workspace_bytes(s.rows, s.d);
}

void run_layer_norm_grad(const CudaCall& c) {
  const ops::LayerNormRows s = ln_rows(c, 0);
  const bool from_output = c.impl == 1;
  if (from_output) {
    std::vector<float> scale(static_cast<size_t>(s.d));
    MONET_CUDA_CHECK(
        cudaMemcpyAsync(scale.data(), c.fin(2), s.d * sizeof(float), cudaMemcpyDeviceToHost, c.ctx.stream));
    MONET_CUDA_CHECK(cudaStreamSynchronize(c.ctx.stream));
    for (size_t d = 0; d < scale.size(); ++d)
      if (scale[d] == 0.f)
        fail("node '", c.node.name, "' (LayerNormGrad, output-activated): scale element ", d,
             " is 0, so X cannot be recovered from Y");
  }
  MONET_CHECK(c.workspace_bytes >= layer_norm_grad_workspace_bytes(s.rows, s.d), "LayerNormGrad workspace too small");
  MONET_CUDA_CHECK(layer_norm_grad(s.rows, s.d, c.fin(0), from_output ? nullptr : c.fin(1),
                                   from_output ? nullptr : c.fin(3), from_output ? c.fin(5) : nullptr,
                                   from_output ? c.fin(6) : nullptr, c.fin(2), c.fin(4), c.fout(0), c.fout(1),
                                   c.fout(2), static_cast<float*>(c.workspace), c.ctx.stream));
}

// LayerNormStatGrad(dStat, X, Mean, InvStdDev) -> dX.
void run_layer_norm_stat_grad(const CudaCall& c) {
  const ops::LayerNormRows s = ln_rows(c, 1);
  MONET_CUDA_CHECK(layer_norm_stat_grad(s.rows, s.d, c.node.attrs.s("stat") == "mean", c.fin(0), c.fin(1), c.fin(2),
                                        c.fin(3), c.fout(0), c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- pooling

Pool pool_of(const Attrs& a, const Shape& x, bool allow_dilations) {
  const ops::Pool2d p = ops::pool2d_checked(a, x, allow_dilations);
  Pool q;
  q.planes = p.N * p.C, q.H = p.H, q.W = p.W, q.OH = p.OH, q.OW = p.OW;
  q.kH = p.kH, q.kW = p.kW, q.sH = p.sH, q.sW = p.sW, q.dH = p.dH, q.dW = p.dW;
  q.padT = p.padT, q.padL = p.padL, q.padB = p.padB, q.padR = p.padR;
  return q;
}

// MaxPool(X) -> Y, argmax (packed taps, lib/ops/common/pool.h).
void run_max_pool(const CudaCall& c) {
  const Pool p = pool_of(c.node.attrs, c.in_shape(0), true);
  MONET_CUDA_CHECK(max_pool(p, c.fin(0), c.fout(0), static_cast<uint8_t*>(c.out[1].data),
                            ops::argmax_tap_bits(p.kH * p.kW), c.ctx.stream));
}

// MaxPoolGrad(dY, X, argmax): impl 0 (input-activated) finds every window's argmax from X, in shared memory where
// a tile fits, else into its workspace (an int32 per output element) before gathering (kernels.h
// max_pool_grad_workspace); impl 1 gathers straight from the forward's taps and needs none.
int64_t max_pool_grad_impl_workspace(const Graph& g, const Node& n, CudaContext&, int impl) {
  if (impl == 1) return 0;
  return max_pool_grad_workspace(pool_of(n.attrs, g.values[n.inputs[1]].shape, true));
}

void run_max_pool_grad(const CudaCall& c) {
  const Pool p = pool_of(c.node.attrs, c.in_shape(1), true);
  if (c.impl == 1) {
    MONET_CUDA_CHECK(max_pool_grad_taps(p, c.fin(0), static_cast<const uint8_t*>(c.in[2].data),
                                        ops::argmax_tap_bits(p.kH * p.kW), c.fout(0), c.ctx.stream));
    return;
  }
  MONET_CHECK(c.workspace_bytes >= max_pool_grad_workspace(p), "workspace too small for ", c.node.name);
  MONET_CUDA_CHECK(max_pool_grad(p, c.fin(0), c.fin(1), static_cast<int32_t*>(c.workspace), c.fout(0), c.ctx.stream));
}

bool count_include_pad(const Node& n) { return n.attrs.i("count_include_pad", 0) == 1; }

void run_average_pool(const CudaCall& c) {
  MONET_CUDA_CHECK(average_pool(pool_of(c.node.attrs, c.in_shape(0), false), count_include_pad(c.node), c.fin(0),
                                c.fout(0), c.ctx.stream));
}

void run_average_pool_grad(const CudaCall& c) {
  MONET_CUDA_CHECK(average_pool_grad(pool_of(c.node.attrs, c.out_shape(0), false), count_include_pad(c.node),
                                     c.fin(0), c.fout(0), c.ctx.stream));
}

// The split reductions' partial sums (kernels.h reduce_to): a pure function of the geometry, which the run
// functions build the same way.
double* reduce_partials(const CudaCall& c, const ReduceGeom& g) {
  MONET_CHECK(c.workspace_bytes >= reduce_to_workspace_bytes(g), "workspace too small for ", c.node.name);
  return static_cast<double*>(c.workspace);
}

// GlobalAveragePool: (N, C, spatial...) -> (N, C, 1, ...), summed in double and divided by S.
int64_t global_average_pool_workspace(const Graph& g, const Node& n, CudaContext&) {
  return reduce_to_workspace_bytes(reduce_geom(g.values[n.inputs[0]].shape, g.values[n.outputs[0]].shape));
}

void run_global_average_pool(const CudaCall& c) {
  const Shape& x = c.in_shape(0);
  const double S = static_cast<double>(numel(x) / (x[0] * x[1]));
  const ReduceGeom g = reduce_geom(x, c.out_shape(0));
  MONET_CUDA_CHECK(reduce_to(Term::x, g, c.fin(0), nullptr, nullptr, c.fout(0), S, reduce_partials(c, g),
                             c.ctx.stream));
}

// GlobalAveragePoolGrad(dY) -> dX = dY / S (a float division, as the CPU) broadcast over the spatial positions.
void run_global_average_pool_grad(const CudaCall& c) {
  const Shape& x = c.out_shape(0);
  const float S = static_cast<float>(numel(x) / (x[0] * x[1]));
  Shape y = x;
  std::fill(y.begin() + 2, y.end(), 1);
  binary_op(c, Binary::div_a_by_scalar, x, y, c.fin(0), y, nullptr, c.fout(0), S);
}

// ---------------------------------------------------------------------------------------------- ReduceMean

// x's shape with the reduced axes (attribute axes: absent or empty = all, negative from the end) set to 1.
Shape kept_shape(const Attrs& a, const Shape& x, int64_t* count) {
  const int64_t r = static_cast<int64_t>(x.size());
  const std::vector<int64_t> axes = a.ints("axes", std::vector<int64_t>{});
  Shape kept = x;
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t ax : axes) reduced[ax < 0 ? ax + r : ax] = true;
  *count = 1;
  for (size_t d = 0; d < x.size(); ++d)
    if (reduced[d]) {
      *count *= x[d];
      kept[d] = 1;
    }
  return kept;
}

int64_t reduce_mean_workspace(const Graph& g, const Node& n, CudaContext&) {
  const Shape& x = g.values[n.inputs[0]].shape;
  int64_t count = 0;
  return reduce_to_workspace_bytes(reduce_geom(x, kept_shape(n.attrs, x, &count)));
}

// ReduceMean and ReduceSum (kSum: no division), and their gradients.
template <bool kSum>
void run_reduce_mean(const CudaCall& c) {
  int64_t count = 0;
  const Shape kept = kept_shape(c.node.attrs, c.in_shape(0), &count);
  const ReduceGeom g = reduce_geom(c.in_shape(0), kept);
  MONET_CUDA_CHECK(reduce_to(Term::x, g, c.fin(0), nullptr, nullptr, c.fout(0), kSum ? 1.0 : static_cast<double>(count),
                             reduce_partials(c, g), c.ctx.stream));
}

template <bool kSum>
void run_reduce_mean_grad(const CudaCall& c) {
  int64_t count = 0;
  const Shape kept = kept_shape(c.node.attrs, c.out_shape(0), &count);
  if (kSum) binary_op(c, Binary::copy_a, c.out_shape(0), kept, c.fin(0), kept, nullptr, c.fout(0));
  else binary_op(c, Binary::div_a_by_scalar, c.out_shape(0), kept, c.fin(0), kept, nullptr, c.fout(0),
                 static_cast<float>(count));
}

// ---------------------------------------------------------------------------------------------- softmax

// Softmax and LogSoftmax (kLog), and their gradients.
template <bool kLog>
void run_softmax(const CudaCall& c) {
  const ops::AxisSplit s = ops::softmax_split(c.in_shape(0), c.node.attrs.i("axis", -1));
  MONET_CUDA_CHECK(softmax(s.outer, s.A, s.inner, c.fin(0), c.fout(0), kLog, c.ctx.stream));
}

template <bool kLog>
void run_softmax_grad(const CudaCall& c) {
  const ops::AxisSplit s = ops::softmax_split(c.in_shape(0), c.node.attrs.i("axis", -1));
  MONET_CUDA_CHECK(softmax_grad(s.outer, s.A, s.inner, c.fin(0), c.fin(1), c.fout(0), kLog, c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- losses


// The row groups' partial sums (softmax_cross_entropy_parts doubles, at most 1024), then the bad-label flag.
int64_t ce_partials_bytes(const ops::CeLayout& l) { return align_up(softmax_cross_entropy_parts(l.n, l.c, l.p) * 8); }

int64_t ce_workspace(const Graph& g, const Node& n, CudaContext&) {
  return ce_partials_bytes(ops::ce_layout(n.attrs, g.values[n.inputs[0]].shape)) + kAlignBytes;
}

void run_ce(const CudaCall& c) {
  const ops::CeLayout l = ops::ce_layout(c.node.attrs, c.in_shape(0));
  MONET_CHECK(c.workspace_bytes >= ce_partials_bytes(l) + kAlignBytes, "SoftmaxCrossEntropy workspace too small");
  auto* partial = static_cast<double*>(c.workspace);
  int* bad = reinterpret_cast<int*>(static_cast<char*>(c.workspace) + ce_partials_bytes(l));
  MONET_CUDA_CHECK(softmax_cross_entropy(l.n, l.c, l.p, c.fin(0), static_cast<const int64_t*>(c.in[1].data),
                                         partial, bad, c.fout(0), c.ctx.stream));
  int bad_host = 0;
  MONET_CUDA_CHECK(cudaMemcpy(&bad_host, bad, sizeof(int), cudaMemcpyDeviceToHost));  // once per step
  if (bad_host) fail("SoftmaxCrossEntropy: a label is out of range [0, ", l.c, ")");
}

void run_ce_grad(const CudaCall& c) {
  const ops::CeLayout l = ops::ce_layout(c.node.attrs, c.in_shape(1));
  MONET_CUDA_CHECK(softmax_cross_entropy_grad(l.n, l.c, l.p, c.fin(0), c.fin(1),
                                              static_cast<const int64_t*>(c.in[2].data), c.fout(0), c.ctx.stream));
}

// SumLoss: one sum over the whole output, split over up to 1024 blocks (reduce_to's runs) and added in order.
int64_t sum_loss_workspace(const Graph& g, const Node& n, CudaContext&) {
  return reduce_to_workspace_bytes(reduce_geom(g.values[n.inputs[0]].shape, Shape{}));
}

void run_sum_loss(const CudaCall& c) {
  const ReduceGeom g = reduce_geom(c.in_shape(0), Shape{});
  MONET_CUDA_CHECK(reduce_to(Term::x, g, c.fin(0), nullptr, nullptr, c.fout(0), 1.0, reduce_partials(c, g),
                             c.ctx.stream));
}

void run_sum_loss_grad(const CudaCall& c) {  // dx = dloss everywhere
  binary_op(c, Binary::copy_a, c.out_shape(0), c.in_shape(0), c.fin(0), c.in_shape(0), nullptr, c.fout(0));
}

// ---------------------------------------------------------------------------------------------- ReduceMax, CumSum

void run_reduce_max(const CudaCall& c) {
  int64_t count = 0;
  const ReduceGeom g = reduce_geom(c.in_shape(0), kept_shape(c.node.attrs, c.in_shape(0), &count));
  MONET_CUDA_CHECK(reduce_max(g, c.fin(0), c.fout(0), c.ctx.stream));
}

// ReduceMaxGrad(dY, X, Y) -> dX.
void run_reduce_max_grad(const CudaCall& c) {
  int64_t count = 0;
  const ReduceGeom g = reduce_geom(c.in_shape(1), kept_shape(c.node.attrs, c.in_shape(1), &count));
  MONET_CUDA_CHECK(reduce_max_grad(g, c.fin(0), c.fin(1), c.fin(2), c.fout(0), c.ctx.stream));
}

void run_cum_sum(const CudaCall& c) {
  const ops::CumSumSpec s = ops::cum_sum_spec(c.node.attrs, c.in_shape(0));
  MONET_CUDA_CHECK(cum_sum(s.outer, s.A, s.inner, s.exclusive, s.reverse, c.fin(0), c.fout(0), c.ctx.stream));
}

// TileGrad: dy seen as tile.h's view, summed back to x's dims (reduce_to, in double, deterministic).
int64_t tile_grad_workspace(const Graph& g, const Node& n, CudaContext&) {
  const ops::TileSpec s = ops::tile_spec(n.attrs, g.values[n.outputs[0]].shape);
  return reduce_to_workspace_bytes(reduce_geom(s.view, s.x_dims));
}

void run_tile_grad(const CudaCall& c) {
  const ops::TileSpec s = ops::tile_spec(c.node.attrs, c.out_shape(0));
  const ReduceGeom g = reduce_geom(s.view, s.x_dims);
  MONET_CUDA_CHECK(reduce_to(Term::x, g, c.fin(0), nullptr, nullptr, c.fout(0), 1.0, reduce_partials(c, g),
                             c.ctx.stream));
}

}  // namespace

void add_norm_pool_kernels(CudaKernelTable& t) {
  t["BatchNormalization"] = {run_batch_norm, nullptr, batch_norm_algorithm_workspace};
  t["BatchNormGrad"] = {run_batch_norm_grad, batch_norm_grad_workspace, batch_norm_grad_algorithm_workspace};
  t["BatchNormActGrad"] = {run_batch_norm_act_grad, batch_norm_grad_workspace};
  t["BatchNormStatGrad"] = {run_batch_norm_stat_grad};
  t["LayerNorm"] = {run_layer_norm};
  t["LayerNormGrad"] = {run_layer_norm_grad, layer_norm_grad_workspace};
  t["LayerNormStatGrad"] = {run_layer_norm_stat_grad};
  t["MaxPool"] = {run_max_pool};
  t["MaxPoolGrad"] = {.run = run_max_pool_grad, .impl_workspace = max_pool_grad_impl_workspace};
  t["AveragePool"] = {run_average_pool};
  t["AveragePoolGrad"] = {run_average_pool_grad};
  t["GlobalAveragePool"] = {run_global_average_pool, global_average_pool_workspace};
  t["GlobalAveragePoolGrad"] = {run_global_average_pool_grad};
  t["ReduceMean"] = {run_reduce_mean<false>, reduce_mean_workspace};
  t["ReduceMeanGrad"] = {run_reduce_mean_grad<false>};
  t["ReduceSum"] = {run_reduce_mean<true>, reduce_mean_workspace};
  t["ReduceSumGrad"] = {run_reduce_mean_grad<true>};
  t["ReduceMax"] = {run_reduce_max};
  t["ReduceMaxGrad"] = {run_reduce_max_grad};
  t["CumSum"] = {run_cum_sum};
  t["TileGrad"] = {run_tile_grad, tile_grad_workspace};
  t["Softmax"] = {run_softmax<false>};
  t["SoftmaxGrad"] = {run_softmax_grad<false>};
  t["LogSoftmax"] = {run_softmax<true>};
  t["LogSoftmaxGrad"] = {run_softmax_grad<true>};
  t["SoftmaxCrossEntropy"] = {run_ce, ce_workspace};
  t["SoftmaxCrossEntropyGrad"] = {run_ce_grad};
  t["SumLoss"] = {run_sum_loss, sum_loss_workspace};
  t["SumLossGrad"] = {run_sum_loss_grad};
}

}  // namespace monet::cuda
