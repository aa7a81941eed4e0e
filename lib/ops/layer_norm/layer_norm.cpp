// LayerNorm: X seen as (R, D) rows, D = the product of the dims from `axis` on (ONNX LayerNormalization's axis,
// default -1), each row normalised with its own statistics (biased variance), then scaled and shifted per element
// of the row:
//   y = (x - mean) * invstd * scale + B,   invstd = 1 / sqrt(var + epsilon)
// Inputs X, Scale (the normalised shape), B (the same); outputs Y, Mean and InvStdDev (X's shape with the
// normalised dims 1, as ONNX's). The importer makes one of an opset-17 LayerNormalization and of the nodes torch
// exports for nn.LayerNorm at opset 13 (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add: lib/ir), so the
// training graph keeps 2 numbers per row where the decomposition kept the centred, the normalised and the scaled
// tensors.
// Backward LayerNormGrad(dY, X, Scale, Mean, InvStdDev, Y, B) -> dX, dScale, dB, two implementations:
//   input-activated (the default: reads dY, X, Scale, Mean, InvStdDev; PyTorch's native_layer_norm_backward), and
//   output-activated (reads dY, Scale, InvStdDev, Y, B and recovers xhat = (Y - B) / Scale: the in-place-ABN idea;
//   needs every scale non-zero). In a pre-LN transformer Y is what the next MatMul keeps anyway, so the output form
//   keeps nothing of its own.
// Gradients flowing into Mean / InvStdDev (no model reads them; the op test harness does) go through
// LayerNormStatGrad, so that the op's gradient is complete.
// In place: Y may take X's buffer (a row's statistics are complete before any of its Y is written, each Y element
// from the same X element), and dX may take dY's (dScale and dB are summed over every row first, then each row's
// sums before its dX).
#include <cmath>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

// The axis, checked against X's rank (InferCtx::fail names the node).
int64_t checked_axis(InferCtx& c, const Shape& x) {
  const int64_t r = static_cast<int64_t>(x.size());
  const int64_t axis = c.attrs().i("axis", -1);
  if (r == 0) c.fail("expects an input of rank >= 1");
  if (axis < -r || axis >= r) c.fail("axis ", axis, " is out of range for input shape ", shape_str(x));
  return axis < 0 ? axis + r : axis;
}

Shape normalised_shape(const Shape& x, int64_t axis) { return Shape(x.begin() + axis, x.end()); }
Shape stat_shape(const Shape& x, int64_t axis) {
  Shape s = x;
  for (size_t d = static_cast<size_t>(axis); d < s.size(); ++d) s[d] = 1;
  return s;
}

// Each of `inputs` must have shape `want`.
void expect_shape(InferCtx& c, std::initializer_list<int> inputs, const Shape& want) {
  for (int i : inputs)
    if (c.shape(i) != want) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected ", shape_str(want));
}

void infer_layer_norm(InferCtx& c) {
  c.expect_inputs(3, 3);
  if (c.num_outputs() != 3) c.fail("expects 3 outputs (Y, Mean, InvStdDev), has ", c.num_outputs());
  const Shape& x = c.shape(0);
  const int64_t axis = checked_axis(c, x);
  for (int i : {1, 2})
    if (c.shape(i) != normalised_shape(x, axis))
      c.fail("input ", i == 1 ? "Scale" : "B", " has shape ", shape_str(c.shape(i)), ", expected ",
             shape_str(normalised_shape(x, axis)), " for X ", shape_str(x), " and axis ", axis);
  const double eps = c.attrs().f("epsilon", 1e-5);
  if (!(eps >= 0)) c.fail("epsilon must be >= 0, got ", eps);
  c.set_out(0, x);
  c.set_out(1, stat_shape(x, axis));
  c.set_out(2, stat_shape(x, axis));
}

void backward_layer_norm(GradBuilder& b) {
  if (!b.needs_grad(0) && !b.needs_grad(1) && !b.needs_grad(2)) return;
  Attrs a;
  a.set("axis", b.node().attrs.i("axis", -1));
  if (b.grad_out(0) >= 0) {
    std::vector<int> g =
        b.emit("LayerNormGrad", {b.grad_out(0), b.in(0), b.in(1), b.out(1), b.out(2), b.out(0), b.in(2)}, a, 3);
    for (int i = 0; i < 3; ++i)
      if (b.needs_grad(i)) b.set_grad(i, g[i]);
  }
  for (int k = 1; k <= 2; ++k)  // the statistics depend on X only
    if (b.grad_out(k) >= 0 && b.needs_grad(0)) {
      Attrs s = a;
      s.set("stat", std::string(k == 1 ? "mean" : "invstd"));
      b.set_grad(0, b.emit1("LayerNormStatGrad", {b.grad_out(k), b.in(0), b.out(1), b.out(2)}, s));
    }
}

template <class T>
void layer_norm_cpu(const CpuCall& c) {
  const LayerNormRows rows = layer_norm_rows(*c.in[0].shape, c.node.attrs.i("axis", -1));
  const int64_t R = rows.rows, D = rows.d;  // X as (R, D)
  const double eps = c.node.attrs.f("epsilon", 1e-5);
  const T* x = c.in[0].as<T>();      // (R, D)
  const T* scale = c.in[1].as<T>();  // (D)
  const T* bias = c.in[2].as<T>();   // (D)
  T* y = c.out[0].as<T>();           // (R, D), may be x
  T* mean_out = c.out[1].as<T>();    // (R)
  T* invstd_out = c.out[2].as<T>();  // (R)
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    // Two passes in double: the mean, then the centred sum of squares (no cancellation).
    double sum = 0;
    for (int64_t d = 0; d < D; ++d) sum += xr[d];
    const double mean = sum / static_cast<double>(D);
    double sq = 0;
    for (int64_t d = 0; d < D; ++d) sq += (xr[d] - mean) * (xr[d] - mean);
    const double invstd = 1.0 / std::sqrt(sq / static_cast<double>(D) + eps);
    mean_out[r] = static_cast<T>(mean);
    invstd_out[r] = static_cast<T>(invstd);
    for (int64_t d = 0; d < D; ++d) yr[d] = static_cast<T>((xr[d] - mean) * invstd * scale[d] + bias[d]);
  }
}

// LayerNormGrad(dY, X, Scale, Mean, InvStdDev, Y, B) -> dX, dScale, dB; attribute axis.
void infer_layer_norm_grad(InferCtx& c) {
  c.expect_inputs(7, 7);
  if (c.num_outputs() != 3) c.fail("expects 3 outputs (dX, dScale, dB), has ", c.num_outputs());
  const Shape& x = c.shape(1);
  const int64_t axis = checked_axis(c, x);
  for (int i : {0, 5})
    if (c.shape(i) != x) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", X has ", shape_str(x));
  expect_shape(c, {2, 6}, normalised_shape(x, axis));
  expect_shape(c, {3, 4}, stat_shape(x, axis));
  c.set_out(0, x);
  c.set_out(1, normalised_shape(x, axis));
  c.set_out(2, normalised_shape(x, axis));
}

// With xhat = (x - mean) * invstd and g = dy * scale, per row (means over its D elements):
//   dx = invstd * (g - mean(g) - xhat * mean(g * xhat)),   dScale = sum over rows of dy * xhat,   dB = sum of dy.
// Input-activated (impl 0) forms xhat from X and Mean; output-activated (impl 1) from Y: (Y - B) / Scale.
// dScale and dB first (column sums in row order, in double), then each row's dx: dx may be dy.
template <class T>
void layer_norm_grad_cpu(const CpuCall& c) {
  const LayerNormRows rows = layer_norm_rows(*c.in[0].shape, c.node.attrs.i("axis", -1));
  const int64_t R = rows.rows, D = rows.d;  // (clang 14 does not let a lambda capture structured bindings)
  const bool from_output = c.impl == 1;
  const T* dy = c.in[0].as<T>();      // (R, D)
  const T* x = c.in[1].as<T>();       // (R, D), input-activated only
  const T* scale = c.in[2].as<T>();   // (D)
  const T* mean = c.in[3].as<T>();    // (R), input-activated only
  const T* invstd = c.in[4].as<T>();  // (R)
  const T* y = c.in[5].as<T>();       // (R, D), output-activated only
  const T* bias = c.in[6].as<T>();    // (D), output-activated only
  T* dx = c.out[0].as<T>();           // (R, D), may be dy
  T* dscale = c.out[1].as<T>();       // (D)
  T* dbias = c.out[2].as<T>();        // (D)
  if (from_output)
    for (int64_t d = 0; d < D; ++d)
      if (scale[d] == T(0))
        fail("node '", c.node.name, "' (LayerNormGrad, output-activated): scale element ", d,
             " is 0, so X cannot be recovered from Y");
  auto xhat = [&](int64_t r, int64_t d) -> double {
    const int64_t e = r * D + d;
    return from_output ? (static_cast<double>(y[e]) - bias[d]) / static_cast<double>(scale[d])
                       : (static_cast<double>(x[e]) - mean[r]) * static_cast<double>(invstd[r]);
  };
  for (int64_t d = 0; d < D; ++d) {
    double sum_dy = 0, dot = 0;
    for (int64_t r = 0; r < R; ++r) {
      sum_dy += dy[r * D + d];
      dot += dy[r * D + d] * xhat(r, d);
    }
    dbias[d] = static_cast<T>(sum_dy);
    dscale[d] = static_cast<T>(dot);
  }
  for (int64_t r = 0; r < R; ++r) {
    double sum_g = 0, dot_g = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double g = static_cast<double>(dy[r * D + d]) * scale[d];
      sum_g += g;
      dot_g += g * xhat(r, d);
    }
    const double mean_g = sum_g / static_cast<double>(D), mean_gx = dot_g / static_cast<double>(D);
    const double is = invstd[r];
    for (int64_t d = 0; d < D; ++d) {
      const double g = static_cast<double>(dy[r * D + d]) * scale[d];
      dx[r * D + d] = static_cast<T>(is * (g - mean_g - xhat(r, d) * mean_gx));
    }
  }
}

// LayerNormStatGrad(dStat, X, Mean, InvStdDev) -> dX, attributes axis and stat = "mean" or "invstd":
//   d mean / d x = 1 / D,   d invstd / d x = -invstd^3 * (x - mean) / D
void infer_layer_norm_stat_grad(InferCtx& c) {
  c.expect_inputs(4, 4);
  const std::string stat = c.attrs().s("stat");
  if (stat != "mean" && stat != "invstd") c.fail("stat must be 'mean' or 'invstd', got '", stat, "'");
  const Shape& x = c.shape(1);
  const int64_t axis = checked_axis(c, x);
  expect_shape(c, {0, 2, 3}, stat_shape(x, axis));
  c.set_out(0, x);
}

template <class T>
void layer_norm_stat_grad_cpu(const CpuCall& c) {
  const LayerNormRows rows = layer_norm_rows(*c.in[1].shape, c.node.attrs.i("axis", -1));
  const int64_t R = rows.rows, D = rows.d;
  const bool is_mean = c.node.attrs.s("stat") == "mean";
  const T* dstat = c.in[0].as<T>();   // (R)
  const T* x = c.in[1].as<T>();       // (R, D)
  const T* mean = c.in[2].as<T>();    // (R)
  const T* invstd = c.in[3].as<T>();  // (R)
  T* dx = c.out[0].as<T>();           // (R, D)
  for (int64_t r = 0; r < R; ++r) {
    const double is = invstd[r];
    for (int64_t d = 0; d < D; ++d) {
      const int64_t e = r * D + d;
      dx[e] = static_cast<T>(is_mean ? dstat[r] / static_cast<double>(D)
                                     : -dstat[r] * is * is * is * (x[e] - mean[r]) / static_cast<double>(D));
    }
  }
}

// Reads per implementation (bit i: input i): input-activated dY, X, Scale, Mean, InvStdDev; output-activated dY,
// Scale, InvStdDev, Y, B.
constexpr uint32_t kReadsInput = 0b0011111, kReadsOutput = 0b1110101;

const OpDef layer_norm = {.name = "LayerNorm", .infer = infer_layer_norm, .backward = backward_layer_norm,
                          .cpu_f32 = layer_norm_cpu<float>, .cpu_f64 = layer_norm_cpu<double>,
                          .param_roles = {ParamRole::none, ParamRole::ones, ParamRole::zeros},
                          .flops = [](const Graph& g, const Node& n) {
                            return 8.0 * static_cast<double>(numel(g.values[n.inputs[0]].shape));
                          },
                          .in_place = {0}};
const OpDef layer_norm_grad = {.name = "LayerNormGrad", .infer = infer_layer_norm_grad,
                               .cpu_f32 = layer_norm_grad_cpu<float>, .cpu_f64 = layer_norm_grad_cpu<double>,
                               .flops = [](const Graph& g, const Node& n) {
                                 return 12.0 * static_cast<double>(numel(g.values[n.inputs[0]].shape));
                               },
                               .impls = {{"input", kReadsInput}, {"output", kReadsOutput}},
                               .in_place = {0}};
const OpDef layer_norm_stat_grad = {.name = "LayerNormStatGrad", .infer = infer_layer_norm_stat_grad,
                                    .cpu_f32 = layer_norm_stat_grad_cpu<float>,
                                    .cpu_f64 = layer_norm_stat_grad_cpu<double>};

}  // namespace

// For other backends (ops/common/plans.h).
LayerNormRows layer_norm_rows(const Shape& x, int64_t axis) {
  const int64_t r = static_cast<int64_t>(x.size());
  const int64_t a = axis < 0 ? axis + r : axis;
  LayerNormRows s;
  for (int64_t d = 0; d < r; ++d) (d < a ? s.rows : s.d) *= x[d];
  return s;
}

extern const std::vector<const OpDef*> layer_norm_ops;
const std::vector<const OpDef*> layer_norm_ops = {&layer_norm, &layer_norm_grad, &layer_norm_stat_grad};

}  // namespace monet::ops
