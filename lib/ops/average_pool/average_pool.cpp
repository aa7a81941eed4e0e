// AveragePool (2-D): y = sum over each window / divisor, with PyTorch's avg_pool2d divisor rules:
//   count_include_pad = 1: the window clipped to the padded input (input + pads), so a ceil_mode window that runs
//                          past the padded border counts only the part inside it;
//   count_include_pad = 0: the number of real input elements in the window (ONNX's default).
// Backward AveragePoolGrad(dY) -> dX spreads each dY over its window with the same divisor; it needs only the
// input shape (attribute input_shape), not X.
#include "ops/common/pool.h"

namespace monet::ops {
namespace {

// The real rows/cols [h0, h1) x [w0, w1) that window (oh, ow) reads, and its divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

AvgWindow avg_window(const Pool2d& p, bool count_include_pad, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.sH - p.padT, w0 = ow * p.sW - p.padL;
  int64_t h1 = std::min(h0 + p.kH, p.H + p.padB), w1 = std::min(w0 + p.kW, p.W + p.padR);
  const int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, p.H), w1 = std::min(w1, p.W);
  return {h0, h1, w0, w1, count_include_pad ? padded_size : (h1 - h0) * (w1 - w0)};
}

// Shared attribute checks of AveragePool and AveragePoolGrad; returns the geometry for input shape x.
Pool2d avg_geometry(InferCtx& c, const Shape& x) {
  const int64_t cip = c.attrs().i("count_include_pad", 0);
  if (cip != 0 && cip != 1) c.fail("count_include_pad must be 0 or 1, got ", cip);
  Pool2d p;
  std::string err = pool2d_geometry(c.attrs(), x, /*allow_dilations=*/false, p);
  if (!err.empty()) c.fail(err);
  return p;
}

void infer_average_pool(InferCtx& c) {
  c.expect_inputs(1, 1);
  c.set_out(0, avg_geometry(c, c.shape(0)).out_shape());
}

void backward_average_pool(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("input_shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("AveragePoolGrad", {b.grad_out(0)}, a));
}

template <class T>
void average_pool_cpu(const CpuCall& c) {
  const Pool2d p = pool2d_checked(c.node.attrs, *c.in[0].shape, false);
  const bool cip = c.node.attrs.i("count_include_pad", 0) == 1;
  const T* x = c.in[0].as<T>();   // (N, C, H, W)
  T* y = c.out[0].as<T>();        // (N, C, OH, OW)
  for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
    const T* xp = x + plane * p.H * p.W;
    T* yp = y + plane * p.OH * p.OW;
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        const AvgWindow win = avg_window(p, cip, oh, ow);
        double sum = 0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += xp[ih * p.W + iw];
        yp[oh * p.OW + ow] = static_cast<T>(sum / static_cast<double>(win.divisor));
      }
  }
}

// AveragePoolGrad(dY) -> dX, attributes of the forward plus input_shape.
void infer_average_pool_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape x = c.attrs().ints("input_shape");
  const Pool2d p = avg_geometry(c, x);
  if (c.shape(0) != p.out_shape())
    c.fail("dY has shape ", shape_str(c.shape(0)), ", the pooled output has ", shape_str(p.out_shape()));
  c.set_out(0, x);
}

template <class T>
void average_pool_grad_cpu(const CpuCall& c) {
  const Pool2d p = pool2d_checked(c.node.attrs, *c.out[0].shape, false);
  const bool cip = c.node.attrs.i("count_include_pad", 0) == 1;
  const T* dy = c.in[0].as<T>();  // (N, C, OH, OW)
  T* dx = c.out[0].as<T>();       // (N, C, H, W)
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
    const T* dyp = dy + plane * p.OH * p.OW;
    T* dxp = dx + plane * p.H * p.W;
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        const AvgWindow win = avg_window(p, cip, oh, ow);
        const T g = dyp[oh * p.OW + ow] / static_cast<T>(win.divisor);
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) dxp[ih * p.W + iw] += g;
      }
  }
}

const OpDef average_pool = {.name = "AveragePool", .infer = infer_average_pool, .backward = backward_average_pool,
                            .cpu_f32 = average_pool_cpu<float>, .cpu_f64 = average_pool_cpu<double>};
const OpDef average_pool_grad = {.name = "AveragePoolGrad", .infer = infer_average_pool_grad,
                                 .cpu_f32 = average_pool_grad_cpu<float>, .cpu_f64 = average_pool_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> average_pool_ops;
const std::vector<const OpDef*> average_pool_ops = {&average_pool, &average_pool_grad};

}  // namespace monet::ops
