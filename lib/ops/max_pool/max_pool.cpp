// MaxPool (2-D): y = max over each (dilated) window, padding never wins. Only the Y output is supported (the
// importer drops an unused Indices output). Backward MaxPoolGrad(dY, X) -> dX recomputes each window's argmax
// from X, so no index tensor is kept alive between forward and backward.
// Ties: the argmax is the FIRST maximum in the window scanned row-major (`v > max || isnan(v)`), exactly as
// PyTorch's CPU max_pool2d, because ReLU outputs have many exact ties at zero and the gradient must land on the
// same element PyTorch picks.
#include <cmath>
#include <limits>

#include "ops/common/pool.h"

namespace monet::ops {
namespace {

// Index (ih * W + iw) of the element of one (H, W) plane that window (oh, ow) takes its maximum from.
template <class T>
int64_t window_argmax(const T* x, const Pool2d& p, int64_t oh, int64_t ow) {
  const int64_t ih0 = oh * p.sH - p.padT;
  const int64_t iw0 = ow * p.sW - p.padL;
  T maxval = -std::numeric_limits<T>::infinity();
  int64_t maxidx = -1;
  for (int64_t kh = 0; kh < p.kH; ++kh) {
    const int64_t ih = ih0 + kh * p.dH;
    if (ih < 0 || ih >= p.H) continue;
    for (int64_t kw = 0; kw < p.kW; ++kw) {
      const int64_t iw = iw0 + kw * p.dW;
      if (iw < 0 || iw >= p.W) continue;
      const T v = x[ih * p.W + iw];
      // PyTorch starts at the first real element with max = -inf; `maxidx < 0` reproduces that start.
      if (maxidx < 0 || v > maxval || std::isnan(v)) {
        maxval = v;
        maxidx = ih * p.W + iw;
      }
    }
  }
  return maxidx;  // >= 0: pool2d_geometry guarantees every window reads a real element
}

void infer_max_pool(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.num_outputs() != 1)
    c.fail("only the Y output is supported (", c.num_outputs(), " outputs given); the Indices output is not");
  if (c.attrs().i("storage_order", 0) != 0) c.fail("storage_order=1 (column-major indices) is not supported");
  Pool2d p;
  std::string err = pool2d_geometry(c.attrs(), c.shape(0), /*allow_dilations=*/true, p);
  if (!err.empty()) c.fail(err);
  c.set_out(0, p.out_shape());
}

void backward_max_pool(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("MaxPoolGrad", {b.grad_out(0), b.in(0)}, b.node().attrs));
}

template <class T>
void max_pool_cpu(const CpuCall& c) {
  const Pool2d p = pool2d_checked(c.node.attrs, *c.in[0].shape, true);
  const T* x = c.in[0].as<T>();   // (N, C, H, W)
  T* y = c.out[0].as<T>();        // (N, C, OH, OW)
  for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
    const T* xp = x + plane * p.H * p.W;
    T* yp = y + plane * p.OH * p.OW;
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) yp[oh * p.OW + ow] = xp[window_argmax(xp, p, oh, ow)];
  }
}

// MaxPoolGrad(dY, X) -> dX, same attributes as the forward: each dY goes to its window's argmax.
void infer_max_pool_grad(InferCtx& c) {
  c.expect_inputs(2, 2);
  Pool2d p;
  std::string err = pool2d_geometry(c.attrs(), c.shape(1), true, p);
  if (!err.empty()) c.fail(err);
  if (c.shape(0) != p.out_shape())
    c.fail("dY has shape ", shape_str(c.shape(0)), ", the pooled output has ", shape_str(p.out_shape()));
  c.set_out(0, c.shape(1));
}

template <class T>
void max_pool_grad_cpu(const CpuCall& c) {
  const Pool2d p = pool2d_checked(c.node.attrs, *c.in[1].shape, true);
  const T* dy = c.in[0].as<T>();  // (N, C, OH, OW)
  const T* x = c.in[1].as<T>();   // (N, C, H, W)
  T* dx = c.out[0].as<T>();       // (N, C, H, W)
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
    const T* xp = x + plane * p.H * p.W;
    const T* dyp = dy + plane * p.OH * p.OW;
    T* dxp = dx + plane * p.H * p.W;
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) dxp[window_argmax(xp, p, oh, ow)] += dyp[oh * p.OW + ow];
  }
}

const OpDef max_pool = {.name = "MaxPool", .infer = infer_max_pool, .backward = backward_max_pool,
                        .cpu_f32 = max_pool_cpu<float>, .cpu_f64 = max_pool_cpu<double>};
const OpDef max_pool_grad = {.name = "MaxPoolGrad", .infer = infer_max_pool_grad,
                             .cpu_f32 = max_pool_grad_cpu<float>, .cpu_f64 = max_pool_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> max_pool_ops;
const std::vector<const OpDef*> max_pool_ops = {&max_pool, &max_pool_grad};

}  // namespace monet::ops
