// Conv (ONNX opset 13), 2-D only: Y = conv(X, W) + B with strides, pads, dilations, group and auto_pad.
// Forward is im2col + GEMM (ops/common/im2col.h). The backward is split as in MONeT so that each gradient keeps
// only what it needs: ConvGradData(dY, W) -> dX needs W but not X; ConvGradWeight(dY, X) -> dW needs X but not W;
// ConvGradBias(dY) -> dB. Each is emitted only when its forward input needs a gradient (the first conv of a
// network has a data input that needs none).
#include <cmath>

#include "ops/common/im2col.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// Geometry of Conv from its attributes and the shapes of X (N, C, H, W) and W (M, C/group, kH, kW).
// Throws an unprefixed monet::Error on a bad attribute or shape; callers wrap it in with_node.
ConvGeom conv_geom(const Attrs& a, const Shape& x, const Shape& w) {
  if (x.size() != 4)
    fail("only 1-D and 2-D convolution is supported (1-D as 2-D over a height of 1): X must have rank 4 "
         "(N, C, H, W), got shape ",
         shape_str(x));
  if (w.size() != 4) fail("W must have rank 4 (M, C/group, kH, kW), got shape ", shape_str(w));
  ConvGeom g;
  g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
  g.M = w[0], g.kH = w[2], g.kW = w[3];
  g.group = a.i("group", 1);
  if (g.group < 1) fail("group must be >= 1, got ", g.group);
  if (g.C % g.group != 0) fail("input channels ", g.C, " are not divisible by group ", g.group);
  if (g.M % g.group != 0) fail("output channels ", g.M, " are not divisible by group ", g.group);
  if (w[1] * g.group != g.C)
    fail("W has ", w[1], " input channels per group, expected C/group = ", g.C, "/", g.group, " = ", g.C / g.group);
  if (a.has("kernel_shape")) {
    std::vector<int64_t> k = ints_of_len(a, "kernel_shape", 2, {});
    if (k[0] != g.kH || k[1] != g.kW)
      fail("kernel_shape ", shape_str(k), " does not match W's spatial shape ", shape_str({g.kH, g.kW}));
  }
  std::vector<int64_t> s = ints_of_len(a, "strides", 2, {1, 1});
  std::vector<int64_t> d = ints_of_len(a, "dilations", 2, {1, 1});
  if (s[0] < 1 || s[1] < 1) fail("strides must be >= 1, got ", shape_str(s));
  if (d[0] < 1 || d[1] < 1) fail("dilations must be >= 1, got ", shape_str(d));
  g.sH = s[0], g.sW = s[1], g.dH = d[0], g.dW = d[1];
  const int64_t effH = (g.kH - 1) * g.dH + 1, effW = (g.kW - 1) * g.dW + 1;  // dilated kernel extent

  // pads [top, left, bottom, right]
  std::vector<int64_t> p = {0, 0, 0, 0};
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    p = ints_of_len(a, "pads", 4, {0, 0, 0, 0});
    for (int64_t v : p)
      if (v < 0) fail("pads must be >= 0, got ", shape_str(p));
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Output = ceil(input / stride); an odd total padding puts the extra pixel at the end (UPPER) or start (LOWER).
    const int64_t in[2] = {g.H, g.W}, st[2] = {g.sH, g.sW}, eff[2] = {effH, effW};
    for (int i = 0; i < 2; ++i) {
      const int64_t out = (in[i] + st[i] - 1) / st[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * st[i] + eff[i] - in[i]);
      const int64_t small = total / 2, big = total - total / 2;
      p[i] = auto_pad == "SAME_UPPER" ? small : big;
      p[i + 2] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad != "VALID") {
    fail("unknown auto_pad '", auto_pad, "' (NOTSET, VALID, SAME_UPPER, SAME_LOWER)");
  }
  g.pT = p[0], g.pL = p[1];
  const int64_t padH = g.H + p[0] + p[2], padW = g.W + p[1] + p[3];
  if (effH > padH || effW > padW)
    fail("kernel ", shape_str({g.kH, g.kW}), " (dilated ", shape_str({effH, effW}), ") is larger than the padded input ",
         shape_str({padH, padW}));
  g.oH = (padH - effH) / g.sH + 1;
  g.oW = (padW - effW) / g.sW + 1;
  return g;
}

ConvGeom geom_of(const Node& node, const Shape& x, const Shape& w) {
  return with_node(node, [&] { return conv_geom(node.attrs, x, w); });
}

Attrs with_shape(const Attrs& attrs, const std::string& name, const Shape& s) {
  Attrs a = attrs;
  a.set(name, s);
  return a;
}

// ---------------------------------------------------------------------------------------------- Conv

void infer_conv(InferCtx& c) {
  c.expect_inputs(2, 3);
  ConvGeom g = geom_of(c.node(), c.shape(0), c.shape(1));
  if (c.num_inputs() == 3 && c.shape(2) != Shape{g.M})
    c.fail("B has shape ", shape_str(c.shape(2)), ", expected (", g.M, ")");
  c.set_out(0, {g.N, g.M, g.oH, g.oW});
}

void backward_conv(GradBuilder& b) {
  const int dy = b.grad_out(0);
  if (dy < 0) return;
  const Attrs attrs = b.node().attrs;  // a copy: emit() may reallocate the node list
  // Weight and bias gradients first, the data gradient last: X can go after ConvGradWeight and dY after
  // ConvGradData, so dX is never live beside X, and dY never beside both (the other order holds dY, dX and X at once).
  if (b.needs_grad(1))
    b.set_grad(1, b.emit1("ConvGradWeight", {dy, b.in(0)}, with_shape(attrs, "w_shape", b.value(b.in(1)).shape)));
  if (b.node().inputs.size() == 3 && b.needs_grad(2)) b.set_grad(2, b.emit1("ConvGradBias", {dy}));
  if (b.needs_grad(0))
    b.set_grad(0, b.emit1("ConvGradData", {dy, b.in(1)}, with_shape(attrs, "x_shape", b.value(b.in(0)).shape)));
}

int64_t conv_workspace(const Graph& gr, const Node& node, int float_bytes) {
  return geom_of(node, gr.values[node.inputs[0]].shape, gr.values[node.inputs[1]].shape).col_bytes(float_bytes);
}

template <class T>
void conv_cpu(const CpuCall& c) {
  ConvGeom g = geom_of(c.node, *c.in[0].shape, *c.in[1].shape);
  const T* x = c.in[0].as<T>();                                // (N, C, H, W)
  const T* w = c.in[1].as<T>();                                // (M, C/group, kH, kW)
  const T* bias = c.in.size() == 3 ? c.in[2].as<T>() : nullptr;  // (M) or none
  T* y = c.out[0].as<T>();                                     // (N, M, oH, oW)
  conv2d_forward(g, x, w, bias, y, static_cast<T*>(c.workspace));
}

// ---------------------------------------------------------------------------------------------- ConvGradData

// ConvGradData(dY, W) -> dX; attrs: Conv's, plus x_shape (X's shape, as X itself is not an input).
void infer_conv_grad_data(InferCtx& c) {
  c.expect_inputs(2, 2);
  Shape xs = with_node(c.node(), [&] { return c.attrs().ints("x_shape"); });
  ConvGeom g = geom_of(c.node(), xs, c.shape(1));
  if (c.shape(0) != Shape{g.N, g.M, g.oH, g.oW})
    c.fail("dY has shape ", shape_str(c.shape(0)), ", expected ", shape_str({g.N, g.M, g.oH, g.oW}));
  c.set_out(0, xs);
}

int64_t conv_grad_data_workspace(const Graph& gr, const Node& node, int float_bytes) {
  return geom_of(node, node.attrs.ints("x_shape"), gr.values[node.inputs[1]].shape).col_bytes(float_bytes);
}

template <class T>
void conv_grad_data_cpu(const CpuCall& c) {
  ConvGeom g = geom_of(c.node, *c.out[0].shape, *c.in[1].shape);
  const T* dy = c.in[0].as<T>();  // (N, M, oH, oW)
  const T* w = c.in[1].as<T>();   // (M, C/group, kH, kW)
  T* dx = c.out[0].as<T>();       // (N, C, H, W)
  conv2d_backward_data(g, dy, w, dx, static_cast<T*>(c.workspace));
}

// ---------------------------------------------------------------------------------------------- ConvGradWeight

// ConvGradWeight(dY, X) -> dW; attrs: Conv's, plus w_shape (W's shape).
void infer_conv_grad_weight(InferCtx& c) {
  c.expect_inputs(2, 2);
  Shape ws = with_node(c.node(), [&] { return c.attrs().ints("w_shape"); });
  ConvGeom g = geom_of(c.node(), c.shape(1), ws);
  if (c.shape(0) != Shape{g.N, g.M, g.oH, g.oW})
    c.fail("dY has shape ", shape_str(c.shape(0)), ", expected ", shape_str({g.N, g.M, g.oH, g.oW}));
  c.set_out(0, ws);
}

int64_t conv_grad_weight_workspace(const Graph& gr, const Node& node, int float_bytes) {
  return geom_of(node, gr.values[node.inputs[1]].shape, node.attrs.ints("w_shape")).col_bytes(float_bytes);
}

template <class T>
void conv_grad_weight_cpu(const CpuCall& c) {
  ConvGeom g = geom_of(c.node, *c.in[1].shape, *c.out[0].shape);
  const T* dy = c.in[0].as<T>();  // (N, M, oH, oW)
  const T* x = c.in[1].as<T>();   // (N, C, H, W)
  T* dw = c.out[0].as<T>();       // (M, C/group, kH, kW)
  conv2d_backward_weight(g, dy, x, dw, static_cast<T*>(c.workspace));
}

// ---------------------------------------------------------------------------------------------- ConvGradBias

// ConvGradBias(dY) -> dB: dY (N, M, ...) summed over everything but channels. Also used by ConvTranspose.
void infer_conv_grad_bias(InferCtx& c) {
  c.expect_inputs(1, 1);
  c.expect_rank(0, 2, 8);
  c.set_out(0, {c.shape(0)[1]});
}

template <class T>
void conv_grad_bias_cpu(const CpuCall& c) {
  channel_sum(c.in[0].as<T>(), *c.in[0].shape, c.out[0].as<T>());  // (N, M, ...) -> (M)
}

// ---------------------------------------------------------------------------------------------- flops

// Conv and both its gradients are GEMMs of the same size: 2 * N * M * oH * oW * (C/group) * kH * kW (2 per MAC).
double conv_flops(const Graph& gr, const Node& node) {
  ConvGeom g = geom_of(node, gr.values[node.inputs[0]].shape, gr.values[node.inputs[1]].shape);
  return 2.0 * g.N * g.M * g.P() * g.K();
}

double conv_grad_data_flops(const Graph& gr, const Node& node) {
  ConvGeom g = geom_of(node, node.attrs.ints("x_shape"), gr.values[node.inputs[1]].shape);
  return 2.0 * g.N * g.M * g.P() * g.K();
}

double conv_grad_weight_flops(const Graph& gr, const Node& node) {
  ConvGeom g = geom_of(node, gr.values[node.inputs[1]].shape, node.attrs.ints("w_shape"));
  return 2.0 * g.N * g.M * g.P() * g.K();
}

// One add per element of dY.
double conv_grad_bias_flops(const Graph& gr, const Node& node) {
  return static_cast<double>(numel(gr.values[node.inputs[0]].shape));
}

const OpDef conv = {.name = "Conv", .infer = infer_conv, .backward = backward_conv,
                    .cpu_f32 = conv_cpu<float>, .cpu_f64 = conv_cpu<double>,
                    .cpu_workspace_bytes = conv_workspace,
                    .param_roles = {ParamRole::none, ParamRole::weight, ParamRole::bias},
                    .flops = conv_flops};
const OpDef conv_grad_data = {.name = "ConvGradData", .infer = infer_conv_grad_data,
                              .cpu_f32 = conv_grad_data_cpu<float>, .cpu_f64 = conv_grad_data_cpu<double>,
                              .cpu_workspace_bytes = conv_grad_data_workspace, .flops = conv_grad_data_flops};
const OpDef conv_grad_weight = {.name = "ConvGradWeight", .infer = infer_conv_grad_weight,
                                .cpu_f32 = conv_grad_weight_cpu<float>, .cpu_f64 = conv_grad_weight_cpu<double>,
                                .cpu_workspace_bytes = conv_grad_weight_workspace,
                                .flops = conv_grad_weight_flops};
const OpDef conv_grad_bias = {.name = "ConvGradBias", .infer = infer_conv_grad_bias,
                              .cpu_f32 = conv_grad_bias_cpu<float>, .cpu_f64 = conv_grad_bias_cpu<double>,
                              .flops = conv_grad_bias_flops};

}  // namespace

extern const std::vector<const OpDef*> conv_ops;
const std::vector<const OpDef*> conv_ops = {&conv, &conv_grad_data, &conv_grad_weight, &conv_grad_bias};

// For other backends (ops/common/plans.h).
ConvGeom conv_geometry(const Node& node, const Shape& x, const Shape& w) { return geom_of(node, x, w); }

}  // namespace monet::ops
