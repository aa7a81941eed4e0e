// Conv, ConvTranspose and their gradients on cuDNN. Every node is one cuDNN problem on the geometry its op folder
// resolves (ops/common/plans.h):
//   Conv                     forward          x = X,  w = W,  y = Y
//   ConvGradData             backward data    dy = dY, w = W -> dx = dX
//   ConvGradWeight           backward filter  x = X, dy = dY -> dw = dW
//   ConvTranspose            backward data of the adjoint conv (input Y, output X): dy = X, w = W -> dx = Y
//   ConvTransposeGradData    forward of the adjoint conv: x = dY, w = W -> y = dX
//   ConvTransposeGradWeight  backward filter of the adjoint conv: x = dY, dy = X -> dw = dW
//   ConvGradBias             dY summed over all but the channel axis (our channel_sum kernel)
// Algorithm: cuDNN's heuristics (cudnnGet*Algorithm_v7, which allocate nothing); the first algorithm that
// succeeds, needs at most the context's workspace cap (CudaContext::workspace_cap: the device's free memory, or the
// budget, less what stays allocated; Backend::limit_workspace) and, for the two backward kinds, is deterministic
// (so a schedule's recomputation matches store-all bit for bit), else for those the deterministic one with the least
// workspace where the device's free memory holds it, else the first within the cap that succeeds, else the one
// that succeeds with the least workspace. Any of them may also run over the batch in slices (an algorithm number at
// or above kBatchSlices, plan.h: the slice's problem on each slice in order, a weight gradient's slices adding into
// dW), which a profile times beside cuDNN's own algorithms: where the fast algorithms of the whole batch need
// gigabytes of workspace, a slice's need a fraction of it. Its workspace is what
// workspace_bytes() reports, so the planner and the arena account for it. Math: default mode lets cuDNN use
// TF32 tensor cores (descriptor math = the heuristic's choice, as PyTorch); fp32 mode pins CUDNN_FMA_MATH.
#include <algorithm>
#include <iterator>
#include <sstream>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_ops.h"
#include "ops/common/plans.h"
#include "schedule/plan.h"

namespace monet::cuda {

namespace {

enum class ConvKind { forward, backward_data, backward_filter };

const char* kind_name(ConvKind k) {
  return k == ConvKind::forward ? "forward" : k == ConvKind::backward_data ? "backward_data" : "backward_filter";
}

struct Candidate {
  int algo = -1;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  int64_t workspace = 0;
  bool deterministic = true;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

}  // namespace

// Descriptors and the chosen algorithm of one convolution problem.
struct ConvPlan {
  ConvKind kind = ConvKind::forward;
  ops::ConvGeom g;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;  // conv input (N, C, H, W), conv output (N, M, oH, oW)
  cudnnFilterDescriptor_t w = nullptr;               // (M, C/group, kH, kW)
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::vector<Candidate> candidates;                 // in the heuristics' order
  Candidate chosen;
  int slices = 1;  // over the batch in this many slices, one after another; descriptors and g: one slice's problem

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

namespace {

struct Problem {
  ConvKind kind;
  ops::ConvGeom g;
};

Problem problem_of(const Graph& gr, const Node& n) {
  auto shape = [&](int i) -> const Shape& { return gr.values[n.inputs[i]].shape; };
  if (n.op == "Conv") return {ConvKind::forward, ops::conv_geometry(n, shape(0), shape(1))};
  if (n.op == "ConvGradData") return {ConvKind::backward_data, ops::conv_geometry(n, n.attrs.ints("x_shape"), shape(1))};
  if (n.op == "ConvGradWeight")
    return {ConvKind::backward_filter, ops::conv_geometry(n, shape(1), n.attrs.ints("w_shape"))};
  if (n.op == "ConvTranspose") return {ConvKind::backward_data, ops::conv_transpose_geometry(n, shape(0), shape(1))};
  if (n.op == "ConvTransposeGradData")
    return {ConvKind::forward, ops::conv_transpose_geometry(n, n.attrs.ints("x_shape"), shape(1))};
  if (n.op == "ConvTransposeGradWeight")
    return {ConvKind::backward_filter, ops::conv_transpose_geometry(n, shape(1), n.attrs.ints("w_shape"))};
  fail("node '", n.name, "' (", n.op, "): not a convolution");
}

std::string key_of(const Problem& p, MathMode math, int forced) {
  const ops::ConvGeom& g = p.g;
  std::ostringstream k;
  k << kind_name(p.kind) << '|' << g.N << ',' << g.C << ',' << g.H << ',' << g.W << '|' << g.M << ',' << g.kH << ','
    << g.kW << '|' << g.oH << ',' << g.oW << '|' << g.sH << ',' << g.sW << '|' << g.dH << ',' << g.dW << '|' << g.pT
    << ',' << g.pL << '|' << g.group << '|' << (math == MathMode::fp32 ? "fp32" : "default") << '|' << forced;
  return k.str();
}

void set_math(const CudaContext& ctx, const ConvPlan& p, cudnnMathType_t m) {
  MONET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, ctx.math == MathMode::fp32 ? CUDNN_FMA_MATH : m));
}

// Workspace of one algorithm (with the descriptor's math set to the algorithm's).
cudnnStatus_t workspace_of(const CudaContext& ctx, const ConvPlan& p, const Candidate& c, size_t* bytes) {
  set_math(ctx, p, c.math);
  switch (p.kind) {
    case ConvKind::forward:
      return cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn, p.x, p.w, p.conv, p.y,
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), bytes);
    case ConvKind::backward_data:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn, p.w, p.y, p.conv, p.x,
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), bytes);
    case ConvKind::backward_filter:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          ctx.cudnn, p.x, p.y, p.conv, p.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), bytes);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

template <class Perf>
Candidate candidate_of(const Perf& perf) {
  Candidate c;
  c.algo = static_cast<int>(perf.algo);
  c.status = perf.status;
  c.deterministic = perf.determinism == CUDNN_DETERMINISTIC;
  c.math = perf.mathType;
  return c;
}

// Every algorithm the heuristics list for the problem, in their order of expected speed, with workspaces.
std::vector<Candidate> list_candidates(const CudaContext& ctx, const ConvPlan& p) {
  std::vector<Candidate> out;
  set_math(ctx, p, CUDNN_DEFAULT_MATH);
  int max = 0, returned = 0;
  switch (p.kind) {
    case ConvKind::forward: {
      MONET_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.cudnn, &max));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max));
      MONET_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn, p.x, p.w, p.conv, p.y, max, &returned,
                                                               perf.data()));
      for (int i = 0; i < returned; ++i) out.push_back(candidate_of(perf[static_cast<size_t>(i)]));
      break;
    }
    case ConvKind::backward_data: {
      MONET_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.cudnn, &max));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(max));
      MONET_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn, p.w, p.y, p.conv, p.x, max, &returned,
                                                                    perf.data()));
      for (int i = 0; i < returned; ++i) out.push_back(candidate_of(perf[static_cast<size_t>(i)]));
      break;
    }
    case ConvKind::backward_filter: {
      MONET_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.cudnn, &max));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(max));
      MONET_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn, p.x, p.y, p.conv, p.w, max,
                                                                      &returned, perf.data()));
      for (int i = 0; i < returned; ++i) out.push_back(candidate_of(perf[static_cast<size_t>(i)]));
      break;
    }
  }
  for (Candidate& c : out) {
    if (c.status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    c.status = workspace_of(ctx, p, c, &bytes);
    c.workspace = static_cast<int64_t>(bytes);
  }
  return out;
}

// algo >= 0: that cuDNN algorithm (its first candidate in the heuristics' order that cuDNN accepts; a schedule
// names it), else the default rule above.
std::shared_ptr<ConvPlan> make_plan(CudaContext& ctx, const Node& n, const Problem& pr, int algo = -1) {
  if (algo >= kBatchSlices) {  // the problem of one slice, its cuDNN algorithm `algo % kBatchSlices`
    const int slices = algo / kBatchSlices;
    if (slices < 2) fail("node '", n.name, "' (", n.op, "): algorithm ", algo, " names ", slices, " slices of the batch");
    if (pr.g.N % slices != 0)
      fail("node '", n.name, "' (", n.op, "): algorithm ", algo, " runs over ", slices, " slices of the batch, which ",
           pr.g.N, " does not divide");
    Problem slice = pr;
    slice.g.N /= slices;
    auto p = make_plan(ctx, n, slice, algo % kBatchSlices);
    p->slices = slices;
    return p;
  }
  auto p = std::make_shared<ConvPlan>();
  p->kind = pr.kind;
  p->g = pr.g;
  const ops::ConvGeom& g = pr.g;
  MONET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  MONET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  MONET_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  MONET_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  MONET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(g.N), i32(g.C), i32(g.H),
                                               i32(g.W)));
  MONET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(g.N), i32(g.M),
                                               i32(g.oH), i32(g.oW)));
  MONET_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i32(g.M), i32(g.Cg()),
                                               i32(g.kH), i32(g.kW)));
  MONET_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, i32(g.pT), i32(g.pL), i32(g.sH), i32(g.sW), i32(g.dH),
                                                    i32(g.dW), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  MONET_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, i32(g.group)));
  // cuDNN pads both sides alike; the geometry's bottom/right padding is implied by oH/oW. The windows agree
  // exactly when cuDNN's output size is ours (an extra padded row that no window reaches changes nothing).
  int on = 0, oc = 0, oh = 0, ow = 0;
  MONET_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow));
  if (on != g.N || oc != g.M || oh != g.oH || ow != g.oW)
    fail("node '", n.name, "' (", n.op, "): its padding is asymmetric in a way cuDNN cannot express (output ",
         g.oH, "x", g.oW, " with top/left pads ", g.pT, ",", g.pL, "; cuDNN gives ", oh, "x", ow, ")");

  p->candidates = list_candidates(ctx, *p);
  const Candidate* pick = nullptr;
  if (algo >= 0) {
    for (const Candidate& c : p->candidates)
      if (c.algo == algo && c.status == CUDNN_STATUS_SUCCESS) {
        pick = &c;
        break;
      }
    if (!pick) fail("node '", n.name, "' (", n.op, "): cuDNN offers no ", kind_name(pr.kind), " algorithm ", algo,
                    " for this problem");
  } else {
    // Backward: a deterministic algorithm whenever cuDNN has one that the device can hold (nondeterministic ones are
    // offered only as implementations of a profile made with --nondeterministic-algorithms): the first within the
    // cap, else the deterministic one with the least workspace if the device's free memory holds it (beyond a
    // budget's cap: the simulator then holds the schedule to its budget). Forward algorithms are all deterministic.
    const bool want_deterministic = pr.kind != ConvKind::forward;
    auto usable = [](const Candidate& c, bool deterministic_only) {
      return c.status == CUDNN_STATUS_SUCCESS && (!deterministic_only || c.deterministic);
    };
    auto first_within_cap = [&](bool deterministic_only) {
      for (const Candidate& c : p->candidates)
        if (usable(c, deterministic_only) && c.workspace <= ctx.workspace_cap) return &c;
      return static_cast<const Candidate*>(nullptr);
    };
    // Nothing within the cap: the least workspace, so that the node still runs where the arena has room after all
    // (the simulator holds a schedule to its budget).
    auto least_workspace = [&](bool deterministic_only) {
      const Candidate* least = nullptr;
      for (const Candidate& c : p->candidates)
        if (usable(c, deterministic_only) && (!least || c.workspace < least->workspace)) least = &c;
      return least;
    };
    if (want_deterministic) pick = first_within_cap(true);
    if (!pick && want_deterministic) {
      const Candidate* least = least_workspace(true);
      if (least && least->workspace <= ctx.device_room) pick = least;
    }
    if (!pick) pick = first_within_cap(false);
    if (!pick) pick = least_workspace(false);
    if (!pick)
      fail("node '", n.name, "' (", n.op, "): cuDNN offers no ", kind_name(pr.kind), " algorithm for this problem");
  }
  p->chosen = *pick;
  set_math(ctx, *p, p->chosen.math);
  return p;
}

std::shared_ptr<ConvPlan> plan_for(CudaContext& ctx, const Graph& gr, const Node& n, int algo) {
  const Problem pr = problem_of(gr, n);
  const std::string key = key_of(pr, ctx.math, algo);
  auto cached = ctx.conv_plans.find(key);
  if (cached != ctx.conv_plans.end()) return cached->second;
  auto p = make_plan(ctx, n, pr, algo);
  ctx.conv_plans.emplace(key, p);
  return p;
}

// Runs algorithm c of plan p: the three tensors are the conv input, filter and output (or their gradients). Over
// p.slices slices of the batch, one after another, in order: the forward and the data gradient each write their
// slice of the output (the batch is the outermost dim of x and y, so a slice is a contiguous range of both); the
// weight gradient's slices add into dw.
cudnnStatus_t execute(const CudaContext& ctx, const ConvPlan& p, const Candidate& c, const void* a, const void* b,
                      void* out, void* ws, int64_t ws_bytes) {
  const float one = 1.f, zero = 0.f;
  const size_t wsb = static_cast<size_t>(ws_bytes);
  const ops::ConvGeom& g = p.g;
  const int64_t x_step = g.N * g.C * g.H * g.W, y_step = g.N * g.M * g.oH * g.oW;  // one slice's elements
  auto in = [](const void* base, int64_t at) { return static_cast<const float*>(base) + at; };
  auto to = [](void* base, int64_t at) { return static_cast<float*>(base) + at; };
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  for (int i = 0; i < p.slices && st == CUDNN_STATUS_SUCCESS; ++i) {
    switch (p.kind) {
      case ConvKind::forward:  // a = x, b = w, out = y
        st = cudnnConvolutionForward(ctx.cudnn, &one, p.x, in(a, i * x_step), p.w, b, p.conv,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, wsb, &zero, p.y,
                                     to(out, i * y_step));
        break;
      case ConvKind::backward_data:  // a = dy, b = w, out = dx
        st = cudnnConvolutionBackwardData(ctx.cudnn, &one, p.w, b, p.y, in(a, i * y_step), p.conv,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, wsb, &zero, p.x,
                                          to(out, i * x_step));
        break;
      case ConvKind::backward_filter:  // a = x, b = dy, out = dw
        st = cudnnConvolutionBackwardFilter(ctx.cudnn, &one, p.x, in(a, i * x_step), p.y, in(b, i * y_step), p.conv,
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, wsb,
                                            i == 0 ? &zero : &one, p.w, out);
        break;
    }
  }
  return st;
}

// The (a, b) operands of execute() for a node: see the table at the top of the file.
std::pair<const void*, const void*> operands(const CudaCall& c) {
  const std::string& op = c.node.op;
  if (op == "ConvGradWeight") return {c.in[1].data, c.in[0].data};  // ConvGradWeight(dY, X): a = X, b = dY
  return {c.in[0].data, c.in[1].data};  // (X, W), (dY, W), (X, W) as dy, (dY, W) as x, (dY, X) as (x, dy)
}

void run_conv(const CudaCall& c) {
  auto p = plan_for(c.ctx, c.g, c.node, c.algo);
  MONET_CHECK(c.workspace_bytes >= p->chosen.workspace, "workspace ", c.workspace_bytes, " < ", p->chosen.workspace);
  const auto [a, b] = operands(c);
  MONET_CUDNN_CHECK(execute(c.ctx, *p, p->chosen, a, b, c.out[0].data, c.workspace, c.workspace_bytes));
  const bool has_bias = (c.node.op == "Conv" || c.node.op == "ConvTranspose") && c.in.size() == 3;
  if (has_bias) {  // y (N, M, ...) += B (M), as a (M, 1, ..., 1) operand
    const Shape& ys = c.out_shape(0);
    Shape bias(ys.size() - 1, 1);
    bias[0] = ys[1];
    binary_op(c, Binary::add, ys, ys, c.fout(0), bias, c.fin(2), c.fout(0));
  }
}

int64_t conv_workspace(const Graph& g, const Node& n, CudaContext& ctx) {
  return plan_for(ctx, g, n, -1)->chosen.workspace;
}

// ConvGradBias(dY (N, M, ...)) -> dB (M): summed in double over all but the channel axis.
void run_conv_grad_bias(const CudaCall& c) {
  const Shape& dy = c.in_shape(0);
  int64_t spatial = 1;
  for (size_t d = 2; d < dy.size(); ++d) spatial *= dy[d];
  MONET_CHECK(c.workspace_bytes >= channel_parts(dy[0], dy[1]) * dy[1] * 8, "ConvGradBias workspace too small");
  MONET_CUDA_CHECK(channel_sum(dy[0], dy[1], spatial, c.fin(0), c.fout(0), static_cast<double*>(c.workspace),
                               c.ctx.stream));
}

// The per-part sums of channel_sum.
int64_t conv_grad_bias_workspace(const Graph& g, const Node& n, CudaContext&) {
  const Shape& dy = g.values[n.inputs[0]].shape;
  return channel_parts(dy[0], dy[1]) * dy[1] * static_cast<int64_t>(sizeof(double));
}

const char* status_name(cudnnStatus_t s) { return cudnnGetErrorString(s); }

const char* math_name(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH                    ? "tensor_op"
         : m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? "tensor_op_allow_conversion"
         : m == CUDNN_FMA_MATH                        ? "fma"
                                                      : "default";
}

}  // namespace

namespace {
constexpr const char* kCudnnConvOps[] = {"Conv",          "ConvGradData",          "ConvGradWeight",
                                         "ConvTranspose", "ConvTransposeGradData", "ConvTransposeGradWeight"};
}  // namespace

bool is_cudnn_conv(const std::string& op) {
  return std::find(std::begin(kCudnnConvOps), std::end(kCudnnConvOps), op) != std::end(kCudnnConvOps);
}

int64_t conv_workspace_with(CudaContext& ctx, const Graph& g, const Node& n, int algo) {
  if (!is_cudnn_conv(n.op))
    fail("node '", n.name, "' (", n.op, "): a schedule names algorithm ", algo,
         ", but only cuDNN convolutions have algorithms");
  return plan_for(ctx, g, n, algo)->chosen.workspace;
}

void add_conv_kernels(CudaKernelTable& t) {
  for (const char* op : kCudnnConvOps) t[op] = {run_conv, conv_workspace};
  t["ConvGradBias"] = {run_conv_grad_bias, conv_grad_bias_workspace};
}

// time_conv_algorithms stops slicing a batch once a slice's workspace is this small.
constexpr int64_t kSliceWorkspaceEnough = int64_t{64} << 20;

nlohmann::json time_conv_algorithms(Backend& backend, const Graph& g, const Node& n, int warmup, int repeats) {
  if (!is_cudnn_conv(n.op)) return nlohmann::json::array();
  CudaContext& ctx = context_of(backend);
  const Problem pr = problem_of(g, n);
  std::shared_ptr<ConvPlan> p = make_plan(ctx, n, pr);  // a private plan: its descriptor math changes below

  // Scratch: the node's inputs and output, then the largest workspace that fits in what is free.
  const ops::ConvGeom& geo = pr.g;
  const int64_t x_elems = geo.N * geo.C * geo.H * geo.W, y_elems = geo.N * geo.M * geo.oH * geo.oW,
                w_elems = geo.M * geo.Cg() * geo.kH * geo.kW;
  int64_t a_elems = 0, b_elems = 0, out_elems = 0;
  switch (pr.kind) {
    case ConvKind::forward: a_elems = x_elems, b_elems = w_elems, out_elems = y_elems; break;
    case ConvKind::backward_data: a_elems = y_elems, b_elems = w_elems, out_elems = x_elems; break;
    case ConvKind::backward_filter: a_elems = x_elems, b_elems = y_elems, out_elems = w_elems; break;
  }
  const int64_t tensors = align_up(a_elems * 4) + align_up(b_elems * 4) + align_up(out_elems * 4);
  int64_t want_ws = 0;
  for (const Candidate& c : p->candidates)
    if (c.status == CUDNN_STATUS_SUCCESS) want_ws = std::max(want_ws, c.workspace);
  size_t free_bytes = 0, total = 0;
  MONET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  const int64_t room = static_cast<int64_t>(free_bytes) - kWorkspaceMarginBytes - tensors;
  if (room < 0) fail("node '", n.name, "': its tensors (", tensors, " bytes) do not fit in free device memory");
  const int64_t ws_cap = std::min(want_ws, room);
  char* block = nullptr;
  MONET_CUDA_CHECK(cudaMalloc(&block, static_cast<size_t>(tensors + align_up(ws_cap) + kAlignBytes)));
  float* a = reinterpret_cast<float*>(block);
  float* b = reinterpret_cast<float*>(block + align_up(a_elems * 4));
  float* out = reinterpret_cast<float*>(block + align_up(a_elems * 4) + align_up(b_elems * 4));
  char* ws = block + tensors;
  nlohmann::json list = nlohmann::json::array();
  try {
    MONET_CUDA_CHECK(fill_pattern(a_elems, a, 1, ctx.stream));
    MONET_CUDA_CHECK(fill_pattern(b_elems, b, 2, ctx.stream));
    // Runs algorithm c of plan q warmup + repeats times: r gets its status and, where it ran, its median time.
    auto time_one = [&](const ConvPlan& q, const Candidate& c, nlohmann::json& r) {
      r["math"] = math_name(c.math);
      cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
      const std::optional<double> ms = median_run_ms(ctx, warmup, repeats, [&] {
        st = execute(ctx, q, c, a, b, out, ws, c.workspace);
        return st == CUDNN_STATUS_SUCCESS;
      });
      if (st != CUDNN_STATUS_SUCCESS) {
        r["status"] = status_name(st);
        return;
      }
      r["status"] = "ok";
      r["time_ms"] = ms.value();
    };
    for (const Candidate& c : p->candidates) {
      nlohmann::json r = {{"algo", c.algo},
                          {"workspace_bytes", c.workspace},
                          {"deterministic", c.deterministic},
                          {"chosen_by_default", c.algo == p->chosen.algo && c.math == p->chosen.math}};
      if (c.status != CUDNN_STATUS_SUCCESS) {
        r["math"] = math_name(c.math);
        r["status"] = status_name(c.status);
      } else if (c.workspace > ws_cap) {
        r["math"] = math_name(c.math);
        r["status"] = "workspace does not fit in free device memory";
      } else {
        set_math(ctx, *p, c.math);
        time_one(*p, c, r);
      }
      list.push_back(r);
    }
    // The problem over the batch in k equal slices, k the divisors of the batch from 2 up (UNet's batch of 11
    // divides only into 11), each with the algorithm the default rule picks for a slice where that one is
    // deterministic, until a slice's workspace is small: for a weight gradient always, for a forward or data
    // gradient where the fastest deterministic algorithm of the whole batch needs more than a small workspace (else
    // no slice can beat it in both).
    const nlohmann::json* fastest = nullptr;
    for (const nlohmann::json& r : list)
      if (r["status"] == "ok" && r["deterministic"].get<bool>() &&
          (!fastest || r["time_ms"].get<double>() < (*fastest)["time_ms"].get<double>()))
        fastest = &r;
    const bool try_slices = pr.kind == ConvKind::backward_filter ||
                            (fastest && (*fastest)["workspace_bytes"].get<int64_t>() > kSliceWorkspaceEnough);
    for (int64_t slices = 2; try_slices && slices <= geo.N && slices < kBatchSlices; ++slices) {
      if (geo.N % slices != 0) continue;
      Problem slice = pr;
      slice.g.N /= slices;
      // The default rule's algorithm for a slice, then the plan a schedule naming that number runs (make_plan's
      // first candidate of the number, which in default math may be another math type than the rule's pick): what
      // is timed and recorded is what will run.
      const int slice_algo = make_plan(ctx, n, slice)->chosen.algo;
      std::shared_ptr<ConvPlan> sp = make_plan(ctx, n, slice, slice_algo);
      sp->slices = static_cast<int>(slices);
      const Candidate& c = sp->chosen;
      if (!c.deterministic || c.workspace > ws_cap) continue;
      nlohmann::json r = {{"algo", static_cast<int>(slices) * kBatchSlices + c.algo},
                          {"slices", slices},
                          {"workspace_bytes", c.workspace},
                          {"deterministic", true},
                          {"chosen_by_default", false}};
      time_one(*sp, c, r);
      list.push_back(r);
      if (c.workspace <= kSliceWorkspaceEnough) break;
    }
  } catch (...) {
    cudaFree(block);
    throw;
  }
  MONET_CUDA_CHECK(cudaFree(block));
  return list;
}

}  // namespace monet::cuda
