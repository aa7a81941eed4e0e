// BatchNormalization, always in training mode (monet trains): X (N, C, spatial...) normalised per channel with the
// batch statistics (biased variance), then scaled and shifted:
//   y = (x - mean) * invstd * scale + B,   invstd = 1 / sqrt(var + epsilon)
// The importer normalises the node to 5 inputs (X, scale, B, running_mean, running_var) and 3 outputs
// (Y, saved_mean (C), saved_invstd (C)). Unless the call is a recomputation, the forward also updates the running
// statistics in place, with ONNX's momentum and PyTorch's rule (unbiased variance, M = elements per channel):
//   running_mean = running_mean * momentum + mean * (1 - momentum)
//   running_var  = running_var * momentum + var * M / (M - 1) * (1 - momentum)
// Backward BatchNormGrad(dY, X, scale, saved_mean, saved_invstd, Y, B) -> dX, dScale, dBias (PyTorch's formula),
// two implementations: input-activated (the default: reads dY, X, scale, saved_mean, saved_invstd) and
// output-activated, the in-place-ABN form (reads dY, scale, saved_invstd, Y, B and recovers
// xhat = (Y - B) / scale; needs every scale non-zero, and loses precision where |scale| is tiny).
// With attribute activation (lib/ir/fuse_bn_activation.h: the import's fusion of a batch norm and the ReLU or Clip
// after it) Y is activated in the same pass: "relu" y = max(y, 0); "clip" y = min(max(y, activation_min),
// activation_max) (an absent bound: unbounded); a fourth output, mask, optional (OpDef::optional_outputs), holds
// where the gradient passes, 1 bit per element in Relu's layout. Its gradient is then BatchNormActGrad(dY, X,
// scale, saved_mean, saved_invstd, Y, mask) -> dX, dScale, dBias: the input-activated formula on dY gated, dY
// where min < Y < max (0 < Y for relu: exactly where the pre-activation value is positive; torch's hardtanh/relu6
// backward for clip), 0 elsewhere. Two implementations, as ReluGrad's: "output" (the default: the gate from Y, the
// tensor the next layer keeps) and "mask" (from the mask bits). No output-activated form: the activated Y has
// nothing to recover X from.
// Gradients flowing into saved_mean / saved_invstd (no model reads them; the op test harness does) are handled
// by BatchNormStatGrad so that the op's gradient is complete.
// In place: Y may take X's buffer (the kernels finish a channel's statistics before writing any of its Y, and
// write each Y element from the same X element); the planner does so where X has no later reader, i.e. where the
// backward is output-activated - together with an in-place ReLU this is in-place ABN (Rota Bulo et al. 2018).
// BatchNormGrad's output-activated form may write dX over dY (every kernel finishes a channel's sums before writing
// its dX, and writes each dX element from the same dY element); the input-activated one runs on cuDNN, which does
// not document aliasing them, so it does not (ImplDef::in_place).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

// X seen as (N, C, S) with S the product of the spatial dims.
struct NCS {
  int64_t N, C, S;
};
NCS ncs(const Shape& x) { return {x[0], x[1], numel(x) / (x[0] * x[1])}; }

void infer_batch_norm(InferCtx& c) {
  c.expect_inputs(5, 5);
  c.expect_rank(0, 2, 64);
  const bool activated = c.attrs().has("activation");
  if (c.num_outputs() != (activated ? 4 : 3))
    c.fail(activated ? "expects 4 outputs (Y, saved_mean, saved_invstd, mask) with an activation, has "
                     : "expects 3 outputs (Y, saved_mean, saved_invstd) in training mode, has ",
           c.num_outputs());
  const Shape& x = c.shape(0);
  static const char* kNames[] = {"X", "scale", "B", "running_mean", "running_var"};
  for (int i = 1; i < 5; ++i)
    if (c.shape(i) != Shape{x[1]})
      c.fail("input ", kNames[i], " has shape ", shape_str(c.shape(i)), ", expected [", x[1], "] for X ",
             shape_str(x));
  if (numel(x) / x[1] < 2) c.fail("expects more than 1 value per channel in training mode, X is ", shape_str(x));
  const double eps = c.attrs().f("epsilon", 1e-5);
  const double momentum = c.attrs().f("momentum", 0.9);
  if (!(eps >= 0)) c.fail("epsilon must be >= 0, got ", eps);
  if (!(momentum >= 0 && momentum <= 1)) c.fail("momentum must be in [0, 1], got ", momentum);
  std::string bad;
  bn_activation(c.attrs(), &bad);
  if (!bad.empty()) c.fail(bad);
  c.set_out(0, x);
  c.set_out(1, {x[1]});
  c.set_out(2, {x[1]});
  if (activated) c.set_out(3, {relu_mask_bytes(numel(x))}, DType::u8);
}

void backward_batch_norm(GradBuilder& b) {
  if (!b.needs_grad(0) && !b.needs_grad(1) && !b.needs_grad(2)) return;
  if (b.grad_out(0) >= 0) {
    std::vector<int> g;
    if (b.node().attrs.has("activation")) {  // the activation's attributes travel along
      Attrs a;
      for (const char* k : {"activation", "activation_min", "activation_max"})
        if (b.node().attrs.has(k)) a.set(k, b.node().attrs.all().at(k));
      g = b.emit("BatchNormActGrad", {b.grad_out(0), b.in(0), b.in(1), b.out(1), b.out(2), b.out(0), b.out(3)}, a,
                 3);
    } else {
      g = b.emit("BatchNormGrad", {b.grad_out(0), b.in(0), b.in(1), b.out(1), b.out(2), b.out(0), b.in(2)}, {}, 3);
    }
    for (int i = 0; i < 3; ++i) b.set_grad(i, g[i]);
  }
  for (int k = 1; k <= 2; ++k)  // the saved statistics depend on X only
    if (b.grad_out(k) >= 0 && b.needs_grad(0)) {
      Attrs a;
      a.set("stat", std::string(k == 1 ? "mean" : "invstd"));
      b.set_grad(0, b.emit1("BatchNormStatGrad", {b.grad_out(k), b.in(0), b.out(1), b.out(2)}, a));
    }
}

template <class T>
void batch_norm_cpu(const CpuCall& c) {
  const auto [N, C, S] = ncs(*c.in[0].shape);
  const double M = static_cast<double>(N * S);   // elements per channel
  const double eps = c.node.attrs.f("epsilon", 1e-5);
  const double momentum = c.node.attrs.f("momentum", 0.9);
  const T* x = c.in[0].as<T>();         // (N, C, S)
  const T* scale = c.in[1].as<T>();     // (C)
  const T* bias = c.in[2].as<T>();      // (C)
  // The running statistics are persistent buffers the op updates in place (inputs, hence const in the call).
  T* running_mean = const_cast<T*>(c.in[3].as<T>());  // (C)
  T* running_var = const_cast<T*>(c.in[4].as<T>());   // (C)
  T* y = c.out[0].as<T>();              // (N, C, S)
  T* saved_mean = c.out[1].as<T>();     // (C)
  T* saved_invstd = c.out[2].as<T>();   // (C)
  const BnActivation act = bn_activation(c.node.attrs);
  // (relu_mask_bytes(N C S)): where the gradient passes, with an activation and where a step reads it, else null
  uint8_t* mask = act.kind != BnActivation::none ? c.out[3].as<uint8_t>() : nullptr;
  if (mask) std::fill(mask, mask + relu_mask_bytes(N * C * S), uint8_t{0});
  for (int64_t ch = 0; ch < C; ++ch) {
    // Two passes in double: mean, then the centred sum of squares (no cancellation).
    double sum = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* xp = x + (n * C + ch) * S;
      for (int64_t s = 0; s < S; ++s) sum += xp[s];
    }
    const double mean = sum / M;
    double sq = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* xp = x + (n * C + ch) * S;
      for (int64_t s = 0; s < S; ++s) sq += (xp[s] - mean) * (xp[s] - mean);
    }
    const double var = sq / M;
    const double invstd = 1.0 / std::sqrt(var + eps);
    saved_mean[ch] = static_cast<T>(mean);
    saved_invstd[ch] = static_cast<T>(invstd);
    // y = x * alpha + beta, folded per channel as PyTorch does.
    const T alpha = static_cast<T>(invstd * scale[ch]);
    const T beta = static_cast<T>(bias[ch] - mean * invstd * scale[ch]);
    for (int64_t n = 0; n < N; ++n) {
      const T* xp = x + (n * C + ch) * S;
      T* yp = y + (n * C + ch) * S;
      for (int64_t s = 0; s < S; ++s) yp[s] = act.apply(static_cast<T>(xp[s] * alpha + beta));
      if (mask)
        for (int64_t s = 0, e = (n * C + ch) * S; s < S; ++s, ++e)
          mask[e / 8] |= static_cast<uint8_t>(act.passes(yp[s]) ? 1u << (e % 8) : 0u);
    }
    if (!c.recompute) {
      running_mean[ch] = static_cast<T>(running_mean[ch] * momentum + mean * (1 - momentum));
      running_var[ch] = static_cast<T>(running_var[ch] * momentum + var * M / (M - 1) * (1 - momentum));
    }
  }
}

// BatchNormGrad(dY, X, scale, saved_mean, saved_invstd, Y, B) -> dX, dScale, dBias; any attributes are ignored.
void infer_batch_norm_grad(InferCtx& c) {
  c.expect_inputs(7, 7);
  c.expect_rank(1, 2, 64);
  const Shape& x = c.shape(1);
  for (int i : {0, 5})
    if (c.shape(i) != x) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", X has ", shape_str(x));
  for (int i : {2, 3, 4, 6})
    if (c.shape(i) != Shape{x[1]}) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected [", x[1], "]");
  if (c.num_outputs() != 3) c.fail("expects 3 outputs (dX, dScale, dBias), has ", c.num_outputs());
  c.set_out(0, x);
  c.set_out(1, {x[1]});
  c.set_out(2, {x[1]});
}

// With xhat = (x - mean) * invstd, per channel:
//   dBias = sum(dy),  dScale = sum(dy * xhat),  dx = scale * invstd * (dy - dBias / M - xhat * dScale / M)
// Input-activated (impl 0) forms xhat from X and saved_mean; output-activated (impl 1) from Y: (Y - B) / scale.
// GATED (BatchNormActGrad): input-activated, dy taken where the activation passes, else 0: at Y
// (BnActivation::passes; impl 0) or where the mask bit is set (impl 1).
template <class T, bool GATED>
void batch_norm_grad_cpu(const CpuCall& c) {
  const auto [N, C, S] = ncs(*c.in[0].shape);
  const double M = static_cast<double>(N * S);
  const bool from_output = !GATED && c.impl == 1;
  const T* dy = c.in[0].as<T>();            // (N, C, S)
  const T* x = c.in[1].as<T>();             // (N, C, S), input-activated only
  const T* scale = c.in[2].as<T>();         // (C)
  const T* saved_mean = c.in[3].as<T>();    // (C), input-activated only
  const T* saved_invstd = c.in[4].as<T>();  // (C)
  const T* y = c.in[5].as<T>();             // (N, C, S), output-activated and gated only
  const T* bias = GATED ? nullptr : c.in[6].as<T>();  // (C), output-activated only
  T* dx = c.out[0].as<T>();                 // (N, C, S)
  T* dscale = c.out[1].as<T>();             // (C)
  T* dbias = c.out[2].as<T>();              // (C)
  const BnActivation act = bn_activation(c.node.attrs);
  const uint8_t* mask = GATED && c.impl == 1 ? c.in[6].as<uint8_t>() : nullptr;  // (relu_mask_bytes(N C S))
  auto passes = [&](int64_t e) { return mask ? ((mask[e / 8] >> (e % 8)) & 1u) != 0 : act.passes(y[e]); };
  auto grad = [&](int64_t e) { return !GATED || passes(e) ? dy[e] : T(0); };
  for (int64_t ch = 0; ch < C; ++ch) {
    const double invstd = saved_invstd[ch];
    // xhat(e) = (src[e] - shift) * mul: (x - mean) * invstd, or (y - B) / scale.
    const T* src = from_output ? y : x;
    double shift, mul;
    if (from_output) {
      if (scale[ch] == T(0))
        fail("node '", c.node.name, "' (BatchNormGrad, output-activated): scale of channel ", ch,
             " is 0, so X cannot be recovered from Y");
      shift = bias[ch];
      mul = 1.0 / static_cast<double>(scale[ch]);
    } else {
      shift = saved_mean[ch];
      mul = invstd;
    }
    double sum_dy = 0, dot = 0;  // sum(dy), sum(dy * (src - shift))
    for (int64_t n = 0; n < N; ++n) {
      const int64_t e0 = (n * C + ch) * S;
      for (int64_t s = 0; s < S; ++s) {
        const T g = grad(e0 + s);
        sum_dy += g;
        dot += g * (src[e0 + s] - shift);
      }
    }
    dbias[ch] = static_cast<T>(sum_dy);
    dscale[ch] = static_cast<T>(dot * mul);
    const double k = dot * mul * mul / M;  // coefficient of (src - shift)
    const double mean_dy = sum_dy / M;
    const double w = invstd * scale[ch];
    for (int64_t n = 0; n < N; ++n) {
      const int64_t e0 = (n * C + ch) * S;
      for (int64_t s = 0; s < S; ++s)
        dx[e0 + s] = static_cast<T>((grad(e0 + s) - mean_dy - (src[e0 + s] - shift) * k) * w);
    }
  }
}

// BatchNormActGrad(dY, X, scale, saved_mean, saved_invstd, Y, mask) -> dX, dScale, dBias, with the forward node's
// activation attributes.
void infer_batch_norm_act_grad(InferCtx& c) {
  c.expect_inputs(7, 7);
  c.expect_rank(1, 2, 64);
  std::string bad;
  if (bn_activation(c.attrs(), &bad).kind == BnActivation::none) bad = "needs attribute activation";
  if (!bad.empty()) c.fail(bad);
  const Shape& x = c.shape(1);
  for (int i : {0, 5})
    if (c.shape(i) != x) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", X has ", shape_str(x));
  for (int i : {2, 3, 4})
    if (c.shape(i) != Shape{x[1]}) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected [", x[1], "]");
  if (c.in(6).dtype != DType::u8 || c.shape(6) != Shape{relu_mask_bytes(numel(x))})
    c.fail("mask must be uint8 of shape [", relu_mask_bytes(numel(x)), "], got ", dtype_name(c.in(6).dtype), " ",
           shape_str(c.shape(6)));
  if (c.num_outputs() != 3) c.fail("expects 3 outputs (dX, dScale, dBias), has ", c.num_outputs());
  c.set_out(0, x);
  c.set_out(1, {x[1]});
  c.set_out(2, {x[1]});
}

// BatchNormStatGrad(dStat, X, saved_mean, saved_invstd) -> dX, attribute stat = "mean" or "invstd":
//   d mean / d x = 1 / M,   d invstd / d x = -invstd^3 * (x - mean) / M
void infer_batch_norm_stat_grad(InferCtx& c) {
  c.expect_inputs(4, 4);
  c.expect_rank(1, 2, 64);
  const std::string stat = c.attrs().s("stat");
  if (stat != "mean" && stat != "invstd") c.fail("stat must be 'mean' or 'invstd', got '", stat, "'");
  const Shape& x = c.shape(1);
  for (int i : {0, 2, 3})
    if (c.shape(i) != Shape{x[1]}) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected [", x[1], "]");
  c.set_out(0, x);
}

template <class T>
void batch_norm_stat_grad_cpu(const CpuCall& c) {
  const auto [N, C, S] = ncs(*c.in[1].shape);
  const double M = static_cast<double>(N * S);
  const bool is_mean = c.node.attrs.s("stat") == "mean";
  const T* dstat = c.in[0].as<T>();         // (C)
  const T* x = c.in[1].as<T>();             // (N, C, S)
  const T* saved_mean = c.in[2].as<T>();    // (C)
  const T* saved_invstd = c.in[3].as<T>();  // (C)
  T* dx = c.out[0].as<T>();                 // (N, C, S)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      const double mean = saved_mean[ch], invstd = saved_invstd[ch];
      const double k = is_mean ? 0.0 : -dstat[ch] * invstd * invstd * invstd / M;
      const double d0 = is_mean ? dstat[ch] / M : 0.0;
      const T* xp = x + (n * C + ch) * S;
      T* dxp = dx + (n * C + ch) * S;
      for (int64_t s = 0; s < S; ++s) dxp[s] = static_cast<T>(d0 + k * (xp[s] - mean));
    }
}

// ---------------------------------------------------------------------------------------------- flops

// Per element: forward ~5 (statistics, normalise, scale, shift), backward ~8 (two reductions and dx).
double batch_norm_flops(const Graph& gr, const Node& node) {
  return 5.0 * numel(gr.values[node.inputs[0]].shape);
}

double batch_norm_grad_flops(const Graph& gr, const Node& node) {
  return 8.0 * numel(gr.values[node.inputs[1]].shape);
}

const OpDef batch_norm = {.name = "BatchNormalization", .infer = infer_batch_norm, .backward = backward_batch_norm,
                          .cpu_f32 = batch_norm_cpu<float>, .cpu_f64 = batch_norm_cpu<double>,
                          .param_roles = {ParamRole::none, ParamRole::ones, ParamRole::zeros, ParamRole::running_mean,
                                          ParamRole::running_var},
                          .flops = batch_norm_flops, .in_place = {0}, .optional_outputs = {3}};
const OpDef batch_norm_grad = {.name = "BatchNormGrad", .infer = infer_batch_norm_grad,
                               .cpu_f32 = batch_norm_grad_cpu<float, false>,
                               .cpu_f64 = batch_norm_grad_cpu<double, false>, .flops = batch_norm_grad_flops,
                               .impls = {{"input", 0b0011111, false}, {"output", 0b1110101}},
                               .in_place = {0}};
// In place (dX over dY) on every backend: the kernels finish a channel's sums before writing its dX, and write each
// dX element from the same dY element.
const OpDef batch_norm_act_grad = {.name = "BatchNormActGrad", .infer = infer_batch_norm_act_grad,
                                   .cpu_f32 = batch_norm_grad_cpu<float, true>,
                                   .cpu_f64 = batch_norm_grad_cpu<double, true>, .flops = batch_norm_grad_flops,
                                   .impls = {{"output", 0b0111111}, {"mask", 0b1011111}}, .in_place = {0}};
const OpDef batch_norm_stat_grad = {.name = "BatchNormStatGrad", .infer = infer_batch_norm_stat_grad,
                                    .cpu_f32 = batch_norm_stat_grad_cpu<float>,
                                    .cpu_f64 = batch_norm_stat_grad_cpu<double>};

}  // namespace

BnActivation bn_activation(const Attrs& a, std::string* err) {
  BnActivation act;
  if (!a.has("activation")) return act;
  const std::string kind = a.s("activation");
  if (kind == "relu") {
    act.kind = BnActivation::relu;
    act.lo = 0;
  } else if (kind == "clip") {
    act.kind = BnActivation::clip;
    act.lo = a.f("activation_min", act.lo);
    act.hi = a.f("activation_max", act.hi);
    if (err && !(act.lo < act.hi)) *err = "activation clip needs activation_min < activation_max";
  } else if (err) {
    *err = "activation must be 'relu' or 'clip', got '" + kind + "'";
  }
  return act;
}

extern const std::vector<const OpDef*> batch_norm_ops;
const std::vector<const OpDef*> batch_norm_ops = {&batch_norm, &batch_norm_grad, &batch_norm_act_grad,
                                                  &batch_norm_stat_grad};

}  // namespace monet::ops
