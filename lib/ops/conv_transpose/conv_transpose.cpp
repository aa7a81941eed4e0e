// ConvTranspose (ONNX opset 13), 2-D only: X (N, C, H, W), W (C, M/group, kH, kW), optional B (M) ->
// Y (N, M, oH, oW) with oH = sH*(H-1) + output_padding + (kH-1)*dH + 1 - pad_top - pad_bottom.
//
// A transposed convolution is the data gradient of the convolution that maps Y back to X with the same kernel,
// strides, pads and dilations. So everything is expressed through that "adjoint conv" (ops/common/im2col.h):
//   ConvTranspose(X, W)              = conv2d_backward_data(adjoint, dy := X, w := W)   (+ B)
//   ConvTransposeGradData(dY, W)     = conv2d_forward(adjoint, x := dY, w := W)          -> dX
//   ConvTransposeGradWeight(dY, X)   = conv2d_backward_weight(adjoint, dy := X, x := dY) -> dW
//   ConvGradBias(dY)                 (from the conv folder)                               -> dB
// In the adjoint conv, W (C, M/group, kH, kW) is laid out exactly as a Conv weight (out = C, in/group = M/group).
#include "ops/common/im2col.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// The adjoint conv of a ConvTranspose with input X of shape x and weights of shape w: conv input = Y, conv
// output = X. Throws an unprefixed monet::Error on a bad attribute or shape; callers wrap it in with_node.
ConvGeom adjoint_geom(const Attrs& a, const Shape& x, const Shape& w) {
  if (x.size() != 4)
    fail("only 1-D and 2-D transposed convolution is supported (1-D as 2-D over a height of 1): X must have rank 4 "
         "(N, C, H, W), got shape ",
         shape_str(x));
  if (w.size() != 4) fail("W must have rank 4 (C, M/group, kH, kW), got shape ", shape_str(w));
  const int64_t N = x[0], C = x[1], H = x[2], Wd = x[3];
  const int64_t group = a.i("group", 1);
  if (group < 1) fail("group must be >= 1, got ", group);
  if (C % group != 0) fail("input channels ", C, " are not divisible by group ", group);
  if (w[0] != C) fail("W has ", w[0], " input channels (dim 0), X has ", C);
  const int64_t M = w[1] * group, kH = w[2], kW = w[3];
  if (a.has("kernel_shape")) {
    std::vector<int64_t> k = ints_of_len(a, "kernel_shape", 2, {});
    if (k[0] != kH || k[1] != kW)
      fail("kernel_shape ", shape_str(k), " does not match W's spatial shape ", shape_str({kH, kW}));
  }
  std::vector<int64_t> s = ints_of_len(a, "strides", 2, {1, 1});
  std::vector<int64_t> d = ints_of_len(a, "dilations", 2, {1, 1});
  std::vector<int64_t> op = ints_of_len(a, "output_padding", 2, {0, 0});
  if (s[0] < 1 || s[1] < 1) fail("strides must be >= 1, got ", shape_str(s));
  if (d[0] < 1 || d[1] < 1) fail("dilations must be >= 1, got ", shape_str(d));
  if (op[0] < 0 || op[1] < 0) fail("output_padding must be >= 0, got ", shape_str(op));
  const int64_t in[2] = {H, Wd}, k[2] = {kH, kW};
  int64_t full[2];  // output extent before cropping by pads
  for (int i = 0; i < 2; ++i) full[i] = s[i] * (in[i] - 1) + op[i] + (k[i] - 1) * d[i] + 1;

  // pads [top, left, bottom, right]
  std::vector<int64_t> p = {0, 0, 0, 0};
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    fail("unknown auto_pad '", auto_pad, "' (NOTSET, VALID, SAME_UPPER, SAME_LOWER)");
  std::vector<int64_t> want;  // requested output size, when given or implied by SAME_*
  if (a.has("output_shape")) {
    want = a.ints("output_shape");
    if (want.size() == 4) want = {want[2], want[3]};  // some exporters give (N, M, oH, oW)
    if (want.size() != 2) fail("attribute 'output_shape' has ", want.size(), " entries, expected 2 (2-D only)");
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    want = {H * s[0], Wd * s[1]};
  }
  if (!want.empty()) {
    // ONNX: total = full - output_shape; SAME_UPPER puts the odd pixel at the end, otherwise at the start.
    for (int i = 0; i < 2; ++i) {
      const int64_t total = full[i] - want[i];
      if (total < 0)
        fail("output size ", want[i], " on spatial axis ", i, " exceeds the ", full[i], " pixels the kernel reaches");
      const int64_t small = total / 2, big = total - total / 2;
      p[i] = auto_pad == "SAME_UPPER" ? small : big;
      p[i + 2] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad == "NOTSET") {
    p = ints_of_len(a, "pads", 4, {0, 0, 0, 0});
    for (int64_t v : p)
      if (v < 0) fail("pads must be >= 0, got ", shape_str(p));
  }
  const int64_t oH = full[0] - p[0] - p[2], oW = full[1] - p[1] - p[3];
  if (oH < 1 || oW < 1)
    fail("pads ", shape_str(p), " crop the whole output (", full[0], "x", full[1], " before cropping)");

  ConvGeom g;
  g.N = N, g.C = M, g.H = oH, g.W = oW;  // adjoint conv input = Y
  g.M = C, g.oH = H, g.oW = Wd;          // adjoint conv output = X
  g.kH = kH, g.kW = kW, g.sH = s[0], g.sW = s[1], g.dH = d[0], g.dW = d[1], g.pT = p[0], g.pL = p[1];
  g.group = group;
  return g;
}

ConvGeom geom_of(const Node& node, const Shape& x, const Shape& w) {
  return with_node(node, [&] { return adjoint_geom(node.attrs, x, w); });
}

Attrs with_shape(const Attrs& attrs, const std::string& name, const Shape& s) {
  Attrs a = attrs;
  a.set(name, s);
  return a;
}

// ---------------------------------------------------------------------------------------------- ConvTranspose

void infer_conv_transpose(InferCtx& c) {
  c.expect_inputs(2, 3);
  ConvGeom g = geom_of(c.node(), c.shape(0), c.shape(1));
  if (c.num_inputs() == 3 && c.shape(2) != Shape{g.C})
    c.fail("B has shape ", shape_str(c.shape(2)), ", expected (", g.C, ")");
  c.set_out(0, {g.N, g.C, g.H, g.W});
}

void backward_conv_transpose(GradBuilder& b) {
  const int dy = b.grad_out(0);
  if (dy < 0) return;
  const Attrs attrs = b.node().attrs;  // a copy: emit() may reallocate the node list
  // Weight and bias gradients before the data gradient, as for Conv (conv.cpp says why).
  if (b.needs_grad(1))
    b.set_grad(1, b.emit1("ConvTransposeGradWeight", {dy, b.in(0)},
                          with_shape(attrs, "w_shape", b.value(b.in(1)).shape)));
  if (b.node().inputs.size() == 3 && b.needs_grad(2)) b.set_grad(2, b.emit1("ConvGradBias", {dy}));
  if (b.needs_grad(0))
    b.set_grad(0, b.emit1("ConvTransposeGradData", {dy, b.in(1)},
                          with_shape(attrs, "x_shape", b.value(b.in(0)).shape)));
}

int64_t conv_transpose_workspace(const Graph& gr, const Node& node, int float_bytes) {
  return geom_of(node, gr.values[node.inputs[0]].shape, gr.values[node.inputs[1]].shape).col_bytes(float_bytes);
}

template <class T>
void conv_transpose_cpu(const CpuCall& c) {
  ConvGeom g = geom_of(c.node, *c.in[0].shape, *c.in[1].shape);
  const T* x = c.in[0].as<T>();  // (N, C, H, W)
  const T* w = c.in[1].as<T>();  // (C, M/group, kH, kW)
  T* y = c.out[0].as<T>();       // (N, M, oH, oW)
  conv2d_backward_data(g, x, w, y, static_cast<T*>(c.workspace));
  if (c.in.size() == 3) {
    const T* bias = c.in[2].as<T>();  // (M)
    const int64_t P = g.H * g.W;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t m = 0; m < g.C; ++m) {
        T* ym = y + (n * g.C + m) * P;
        for (int64_t i = 0; i < P; ++i) ym[i] += bias[m];
      }
  }
}

// ---------------------------------------------------------------------------------------------- ConvTransposeGradData

// ConvTransposeGradData(dY, W) -> dX; attrs: ConvTranspose's, plus x_shape.
void infer_conv_transpose_grad_data(InferCtx& c) {
  c.expect_inputs(2, 2);
  Shape xs = with_node(c.node(), [&] { return c.attrs().ints("x_shape"); });
  ConvGeom g = geom_of(c.node(), xs, c.shape(1));
  if (c.shape(0) != Shape{g.N, g.C, g.H, g.W})
    c.fail("dY has shape ", shape_str(c.shape(0)), ", expected ", shape_str({g.N, g.C, g.H, g.W}));
  c.set_out(0, xs);
}

int64_t conv_transpose_grad_data_workspace(const Graph& gr, const Node& node, int float_bytes) {
  return geom_of(node, node.attrs.ints("x_shape"), gr.values[node.inputs[1]].shape).col_bytes(float_bytes);
}

template <class T>
void conv_transpose_grad_data_cpu(const CpuCall& c) {
  ConvGeom g = geom_of(c.node, *c.out[0].shape, *c.in[1].shape);
  const T* dy = c.in[0].as<T>();  // (N, M, oH, oW)
  const T* w = c.in[1].as<T>();   // (C, M/group, kH, kW)
  T* dx = c.out[0].as<T>();       // (N, C, H, W)
  conv2d_forward(g, dy, w, static_cast<const T*>(nullptr), dx, static_cast<T*>(c.workspace));
}

// ---------------------------------------------------------------------------------------------- ConvTransposeGradWeight

// ConvTransposeGradWeight(dY, X) -> dW; attrs: ConvTranspose's, plus w_shape.
void infer_conv_transpose_grad_weight(InferCtx& c) {
  c.expect_inputs(2, 2);
  Shape ws = with_node(c.node(), [&] { return c.attrs().ints("w_shape"); });
  ConvGeom g = geom_of(c.node(), c.shape(1), ws);
  if (c.shape(0) != Shape{g.N, g.C, g.H, g.W})
    c.fail("dY has shape ", shape_str(c.shape(0)), ", expected ", shape_str({g.N, g.C, g.H, g.W}));
  c.set_out(0, ws);
}

int64_t conv_transpose_grad_weight_workspace(const Graph& gr, const Node& node, int float_bytes) {
  return geom_of(node, gr.values[node.inputs[1]].shape, node.attrs.ints("w_shape")).col_bytes(float_bytes);
}

template <class T>
void conv_transpose_grad_weight_cpu(const CpuCall& c) {
  ConvGeom g = geom_of(c.node, *c.in[1].shape, *c.out[0].shape);
  const T* dy = c.in[0].as<T>();  // (N, M, oH, oW)
  const T* x = c.in[1].as<T>();   // (N, C, H, W)
  T* dw = c.out[0].as<T>();       // (C, M/group, kH, kW)
  conv2d_backward_weight(g, x, dy, dw, static_cast<T*>(c.workspace));
}

// ---------------------------------------------------------------------------------------------- flops

// All three are GEMMs the size of the adjoint conv: 2 * N * C * H * W * (M/group) * kH * kW (2 per MAC).
double conv_transpose_flops(const Graph& gr, const Node& node) {
  ConvGeom g = geom_of(node, gr.values[node.inputs[0]].shape, gr.values[node.inputs[1]].shape);
  return 2.0 * g.N * g.M * g.P() * g.K();
}

double conv_transpose_grad_data_flops(const Graph& gr, const Node& node) {
  ConvGeom g = geom_of(node, node.attrs.ints("x_shape"), gr.values[node.inputs[1]].shape);
  return 2.0 * g.N * g.M * g.P() * g.K();
}

double conv_transpose_grad_weight_flops(const Graph& gr, const Node& node) {
  ConvGeom g = geom_of(node, gr.values[node.inputs[1]].shape, node.attrs.ints("w_shape"));
  return 2.0 * g.N * g.M * g.P() * g.K();
}

const OpDef conv_transpose = {.name = "ConvTranspose", .infer = infer_conv_transpose,
                              .backward = backward_conv_transpose,
                              .cpu_f32 = conv_transpose_cpu<float>, .cpu_f64 = conv_transpose_cpu<double>,
                              .cpu_workspace_bytes = conv_transpose_workspace,
                              .param_roles = {ParamRole::none, ParamRole::weight, ParamRole::bias},
                              .flops = conv_transpose_flops};
const OpDef conv_transpose_grad_data = {
    .name = "ConvTransposeGradData", .infer = infer_conv_transpose_grad_data,
    .cpu_f32 = conv_transpose_grad_data_cpu<float>, .cpu_f64 = conv_transpose_grad_data_cpu<double>,
    .cpu_workspace_bytes = conv_transpose_grad_data_workspace, .flops = conv_transpose_grad_data_flops};
const OpDef conv_transpose_grad_weight = {
    .name = "ConvTransposeGradWeight", .infer = infer_conv_transpose_grad_weight,
    .cpu_f32 = conv_transpose_grad_weight_cpu<float>, .cpu_f64 = conv_transpose_grad_weight_cpu<double>,
    .cpu_workspace_bytes = conv_transpose_grad_weight_workspace, .flops = conv_transpose_grad_weight_flops};

}  // namespace

extern const std::vector<const OpDef*> conv_transpose_ops;
const std::vector<const OpDef*> conv_transpose_ops = {&conv_transpose, &conv_transpose_grad_data,
                                                      &conv_transpose_grad_weight};

// For other backends (ops/common/plans.h).
ConvGeom conv_transpose_geometry(const Node& node, const Shape& x, const Shape& w) {
  return geom_of(node, x, w);
}

}  // namespace monet::ops
