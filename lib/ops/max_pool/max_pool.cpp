// MaxPool (2-D): y = max over each (dilated) window, padding never wins. The importer gives the node two outputs:
// Y and argmax, the tap of each window's maximum packed in 4 bits (8 or 16 for windows of more than 16 taps; see
// argmax_bytes in ops/common/pool.h). ONNX's Indices output (int64 positions) is not produced.
// Backward MaxPoolGrad(dY, X, argmax) -> dX has two implementations with identical results: input-activated (the
// default: recomputes each window's argmax from X) and intermediate-activated (reads the packed argmax, MONeT's
// max-pool indices: 1/8 of the bytes of Y for 3x3 windows).
// Ties: the argmax is the FIRST maximum in the window scanned row-major (`v > max || isnan(v)`), exactly as
// PyTorch's CPU max_pool2d, because ReLU outputs have many exact ties at zero and the gradient must land on the
// same element PyTorch picks.
#include <cmath>
#include <limits>

#include "ops/common/pool.h"

namespace monet::ops {
namespace {

// The tap (kh * kW + kw) of window (oh, ow) of one (H, W) plane that the window takes its maximum from.
template <class T>
int64_t window_tap(const T* x, const Pool2d& p, int64_t oh, int64_t ow) {
  const int64_t ih0 = oh * p.sH - p.padT;
  const int64_t iw0 = ow * p.sW - p.padL;
  T maxval = -std::numeric_limits<T>::infinity();
  int64_t tap = -1;
  for (int64_t kh = 0; kh < p.kH; ++kh) {
    const int64_t ih = ih0 + kh * p.dH;
    if (ih < 0 || ih >= p.H) continue;
    for (int64_t kw = 0; kw < p.kW; ++kw) {
      const int64_t iw = iw0 + kw * p.dW;
      if (iw < 0 || iw >= p.W) continue;
      const T v = x[ih * p.W + iw];
      // PyTorch starts at the first real element with max = -inf; `tap < 0` reproduces that start.
      if (tap < 0 || v > maxval || std::isnan(v)) {
        maxval = v;
        tap = kh * p.kW + kw;
      }
    }
  }
  return tap;  // >= 0: pool2d_geometry guarantees every window reads a real element
}

// Index (ih * W + iw) in the plane of tap `tap` of window (oh, ow).
int64_t tap_index(const Pool2d& p, int64_t oh, int64_t ow, int64_t tap) {
  return (oh * p.sH - p.padT + (tap / p.kW) * p.dH) * p.W + (ow * p.sW - p.padL + (tap % p.kW) * p.dW);
}

// Packed argmax (ops/common/pool.h): store / load the tap of output element i.
void put_tap(uint8_t* a, int bits, int64_t i, int64_t tap) {
  if (bits == 4)
    a[i / 2] |= static_cast<uint8_t>(tap << (4 * (i % 2)));
  else if (bits == 8)
    a[i] = static_cast<uint8_t>(tap);
  else
    a[2 * i] = static_cast<uint8_t>(tap & 0xff), a[2 * i + 1] = static_cast<uint8_t>(tap >> 8);
}
int64_t get_tap(const uint8_t* a, int bits, int64_t i) {
  if (bits == 4) return (a[i / 2] >> (4 * (i % 2))) & 0xf;
  if (bits == 8) return a[i];
  return a[2 * i] | (int64_t{a[2 * i + 1]} << 8);
}

void infer_max_pool(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.num_outputs() != 2)
    c.fail("expects 2 outputs (Y, argmax), has ", c.num_outputs(), " (ONNX's Indices output is not supported)");
  if (c.attrs().i("storage_order", 0) != 0) c.fail("storage_order=1 (column-major indices) is not supported");
  Pool2d p;
  std::string err = pool2d_geometry(c.attrs(), c.shape(0), /*allow_dilations=*/true, p);
  if (!err.empty()) c.fail(err);
  if (p.kH * p.kW > 65536) c.fail("a window of ", p.kH * p.kW, " taps is too large (at most 65536)");
  c.set_out(0, p.out_shape());
  c.set_out(1, {argmax_bytes(p)}, DType::u8);
}

void backward_max_pool(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("MaxPoolGrad", {b.grad_out(0), b.in(0), b.out(1)}, b.node().attrs));
}

template <class T>
void max_pool_cpu(const CpuCall& c) {
  const Pool2d p = pool2d_checked(c.node.attrs, *c.in[0].shape, true);
  const int bits = argmax_tap_bits(p.kH * p.kW);
  const T* x = c.in[0].as<T>();                 // (N, C, H, W)
  T* y = c.out[0].as<T>();                      // (N, C, OH, OW)
  uint8_t* argmax = c.out[1].as<uint8_t>();     // (argmax_bytes), null when nothing reads it
  if (argmax) std::fill(argmax, argmax + argmax_bytes(p), uint8_t{0});
  for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
    const T* xp = x + plane * p.H * p.W;
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        const int64_t o = (plane * p.OH + oh) * p.OW + ow, tap = window_tap(xp, p, oh, ow);
        y[o] = xp[tap_index(p, oh, ow, tap)];
        if (argmax) put_tap(argmax, bits, o, tap);
      }
  }
}

// MaxPoolGrad(dY, X, argmax) -> dX, same attributes as the forward: each dY goes to its window's argmax.
void infer_max_pool_grad(InferCtx& c) {
  c.expect_inputs(3, 3);
  Pool2d p;
  std::string err = pool2d_geometry(c.attrs(), c.shape(1), true, p);
  if (!err.empty()) c.fail(err);
  if (c.shape(0) != p.out_shape())
    c.fail("dY has shape ", shape_str(c.shape(0)), ", the pooled output has ", shape_str(p.out_shape()));
  if (c.in(2).dtype != DType::u8 || c.shape(2) != Shape{argmax_bytes(p)})
    c.fail("argmax must be uint8 of shape [", argmax_bytes(p), "], got ", dtype_name(c.in(2).dtype), " ",
           shape_str(c.shape(2)));
  c.set_out(0, c.shape(1));
}

// Implementation 0 ("input") finds each window's tap again from X; implementation 1 ("argmax") reads it.
template <class T>
void max_pool_grad_cpu(const CpuCall& c) {
  const Pool2d p = pool2d_checked(c.node.attrs, *c.in[1].shape, true);
  const int bits = argmax_tap_bits(p.kH * p.kW);
  const T* dy = c.in[0].as<T>();                    // (N, C, OH, OW)
  const T* x = c.in[1].as<T>();                     // (N, C, H, W), null for impl 1
  const uint8_t* argmax = c.in[2].as<uint8_t>();    // (argmax_bytes), null for impl 0
  T* dx = c.out[0].as<T>();                         // (N, C, H, W)
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
    T* dxp = dx + plane * p.H * p.W;
    for (int64_t oh = 0; oh < p.OH; ++oh)
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        const int64_t o = (plane * p.OH + oh) * p.OW + ow;
        const int64_t tap = c.impl == 0 ? window_tap(x + plane * p.H * p.W, p, oh, ow) : get_tap(argmax, bits, o);
        dxp[tap_index(p, oh, ow, tap)] += dy[o];
      }
  }
}

// One per element of Y (the argmax output is bookkeeping).
double max_pool_flops(const Graph& g, const Node& n) { return static_cast<double>(numel(g.values[n.outputs[0]].shape)); }

const OpDef max_pool = {.name = "MaxPool", .infer = infer_max_pool, .backward = backward_max_pool,
                        .cpu_f32 = max_pool_cpu<float>, .cpu_f64 = max_pool_cpu<double>, .flops = max_pool_flops,
                        .optional_outputs = {1}};
const OpDef max_pool_grad = {.name = "MaxPoolGrad", .infer = infer_max_pool_grad,
                             .cpu_f32 = max_pool_grad_cpu<float>, .cpu_f64 = max_pool_grad_cpu<double>,
                             .impls = {{"input", 0b011}, {"argmax", 0b101}}};

}  // namespace

extern const std::vector<const OpDef*> max_pool_ops;
const std::vector<const OpDef*> max_pool_ops = {&max_pool, &max_pool_grad};

}  // namespace monet::ops
