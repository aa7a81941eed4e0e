// 2-D convolution as GEMM, shared by Conv and ConvTranspose (whose forward is Conv's data gradient).
//
// Everything here speaks "conv language": a convolution reads x (N, C, H, W) with weights w (M, C/group, kH, kW)
// and writes y (N, M, oH, oW), where output pixel (oy, ox) reads input row iy = oy*sH - pT + ky*dH (likewise
// columns). For one sample and one group, im2col unrolls x into col (Cg*kH*kW, oH*oW) so that y = w_g @ col.
// The three products of a convolution then are
//   forward:        y_g  = w_g (Mg, K) @ col (K, P)                 (conv2d_forward)
//   data gradient:  dcol = w_g^T (K, Mg) @ dy_g (Mg, P), col2im     (conv2d_backward_data; = ConvTranspose forward)
//   weight grad.:   dw_g += dy_g (Mg, P) @ col^T (P, K)             (conv2d_backward_weight)
// with K = Cg*kH*kW and P = oH*oW. The col buffer is the op's declared workspace (none for a pointwise conv).
#pragma once

#include <algorithm>
#include <string>

#include "ops/common/blas.h"
#include "ops/op.h"

namespace monet::ops {

struct ConvGeom {
  int64_t N = 0, C = 0, H = 0, W = 0;  // conv input (N, C, H, W)
  int64_t M = 0, oH = 0, oW = 0;       // conv output (N, M, oH, oW)
  int64_t kH = 1, kW = 1;              // kernel
  int64_t sH = 1, sW = 1;              // strides
  int64_t dH = 1, dW = 1;              // dilations
  int64_t pT = 0, pL = 0;              // top/left padding (bottom/right are implied by oH, oW)
  int64_t group = 1;

  int64_t Cg() const { return C / group; }
  int64_t Mg() const { return M / group; }
  int64_t K() const { return Cg() * kH * kW; }  // rows of col
  int64_t P() const { return oH * oW; }         // columns of col
  // A 1x1, stride-1, unpadded conv needs no unrolling: col is the input itself.
  bool pointwise() const {
    return kH == 1 && kW == 1 && sH == 1 && sW == 1 && pT == 0 && pL == 0 && oH == H && oW == W;
  }
  int64_t col_bytes(int float_bytes) const { return pointwise() ? 0 : K() * P() * float_bytes; }
};

// Runs f(); a monet::Error it throws is re-thrown prefixed with the node, as InferCtx::fail words it. Lets the
// attribute resolution below be shared by shape rules and kernels.
template <class F>
auto with_node(const Node& node, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    fail("node '", node.name, "' (", node.op, "): ", e.what());
  }
}

// Reads an int-list attribute of exactly `n` entries (default `dflt` when absent).
inline std::vector<int64_t> ints_of_len(const Attrs& a, const std::string& name, size_t n, std::vector<int64_t> dflt) {
  std::vector<int64_t> v = a.ints(name, dflt);
  if (v.size() != n) fail("attribute '", name, "' has ", v.size(), " entries, expected ", n, " (2-D only)");
  return v;
}

// col (Cg*kH*kW, oH*oW) from one sample-group slice x (Cg, H, W); zero where the kernel reads padding.
template <class T>
void im2col(const ConvGeom& g, const T* x, T* col) {
  const int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t ky = 0; ky < g.kH; ++ky)
      for (int64_t kx = 0; kx < g.kW; ++kx) {
        T* row = col + ((c * g.kH + ky) * g.kW + kx) * P;  // (oH, oW)
        const T* xc = x + c * g.H * g.W;                      // (H, W)
        for (int64_t oy = 0; oy < g.oH; ++oy) {
          T* out = row + oy * g.oW;
          const int64_t iy = oy * g.sH - g.pT + ky * g.dH;
          if (iy < 0 || iy >= g.H) {
            std::fill(out, out + g.oW, T(0));
            continue;
          }
          const T* xr = xc + iy * g.W;
          for (int64_t ox = 0; ox < g.oW; ++ox) {
            const int64_t ix = ox * g.sW - g.pL + kx * g.dW;
            out[ox] = (ix >= 0 && ix < g.W) ? xr[ix] : T(0);
          }
        }
      }
}

// The adjoint of im2col: x (Cg, H, W) += the col entries that read each pixel (padding entries are dropped).
template <class T>
void col2im_add(const ConvGeom& g, const T* col, T* x) {
  const int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t ky = 0; ky < g.kH; ++ky)
      for (int64_t kx = 0; kx < g.kW; ++kx) {
        const T* row = col + ((c * g.kH + ky) * g.kW + kx) * P;  // (oH, oW)
        T* xc = x + c * g.H * g.W;                                 // (H, W)
        for (int64_t oy = 0; oy < g.oH; ++oy) {
          const int64_t iy = oy * g.sH - g.pT + ky * g.dH;
          if (iy < 0 || iy >= g.H) continue;
          const T* in = row + oy * g.oW;
          T* xr = xc + iy * g.W;
          for (int64_t ox = 0; ox < g.oW; ++ox) {
            const int64_t ix = ox * g.sW - g.pL + kx * g.dW;
            if (ix >= 0 && ix < g.W) xr[ix] += in[ox];
          }
        }
      }
}

// y = conv(x, w) + bias. bias may be null. col: workspace of g.col_bytes().
template <class T>
void conv2d_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, T* col) {
  // x (N, C, H, W), w (M, Cg, kH, kW), bias (M), y (N, M, oH, oW), col (K, P)
  const int64_t Cg = g.Cg(), Mg = g.Mg(), K = g.K(), P = g.P();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const T* xg = x + (n * g.C + grp * Cg) * g.H * g.W;  // (Cg, H, W)
      const T* wg = w + grp * Mg * K;                      // (Mg, K)
      T* yg = y + (n * g.M + grp * Mg) * P;                // (Mg, P)
      const T* cols = xg;
      if (!g.pointwise()) {
        im2col(g, xg, col);
        cols = col;
      }
      blas_gemm(false, false, Mg, P, K, T(1), wg, K, cols, P, T(0), yg, P);
    }
  if (bias)
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t m = 0; m < g.M; ++m) {
        T* ym = y + (n * g.M + m) * P;
        for (int64_t p = 0; p < P; ++p) ym[p] += bias[m];
      }
}

// dx = conv^T(dy, w), the gradient of conv2d_forward with respect to x. col: workspace of g.col_bytes().
template <class T>
void conv2d_backward_data(const ConvGeom& g, const T* dy, const T* w, T* dx, T* col) {
  // dy (N, M, oH, oW), w (M, Cg, kH, kW), dx (N, C, H, W), col (K, P)
  const int64_t Cg = g.Cg(), Mg = g.Mg(), K = g.K(), P = g.P();
  const bool direct = g.pointwise();
  if (!direct) std::fill(dx, dx + g.N * g.C * g.H * g.W, T(0));  // col2im accumulates
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const T* dyg = dy + (n * g.M + grp * Mg) * P;         // (Mg, P)
      const T* wg = w + grp * Mg * K;                       // (Mg, K)
      T* dxg = dx + (n * g.C + grp * Cg) * g.H * g.W;       // (Cg, H, W)
      T* dcol = direct ? dxg : col;                         // (K, P)
      blas_gemm(true, false, K, P, Mg, T(1), wg, K, dyg, P, T(0), dcol, P);
      if (!direct) col2im_add(g, col, dxg);
    }
}

// dw = sum over samples of dy_g @ col^T, the gradient of conv2d_forward with respect to w.
template <class T>
void conv2d_backward_weight(const ConvGeom& g, const T* dy, const T* x, T* dw, T* col) {
  // dy (N, M, oH, oW), x (N, C, H, W), dw (M, Cg, kH, kW), col (K, P)
  const int64_t Cg = g.Cg(), Mg = g.Mg(), K = g.K(), P = g.P();
  for (int64_t grp = 0; grp < g.group; ++grp)
    for (int64_t n = 0; n < g.N; ++n) {
      const T* xg = x + (n * g.C + grp * Cg) * g.H * g.W;  // (Cg, H, W)
      const T* dyg = dy + (n * g.M + grp * Mg) * P;        // (Mg, P)
      T* dwg = dw + grp * Mg * K;                          // (Mg, K)
      const T* cols = xg;
      if (!g.pointwise()) {
        im2col(g, xg, col);
        cols = col;
      }
      blas_gemm(false, true, Mg, K, P, T(1), dyg, P, cols, P, n == 0 ? T(0) : T(1), dwg, K);
    }
}

// db[m] = sum of dy over samples and pixels; dy is (N, M, ...). Summed in double so float keeps its precision.
template <class T>
void channel_sum(const T* dy, const Shape& dy_shape, T* db) {
  const int64_t N = dy_shape[0], M = dy_shape[1], P = numel(dy_shape) / (N * M);
  for (int64_t m = 0; m < M; ++m) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* d = dy + (n * M + m) * P;
      for (int64_t p = 0; p < P; ++p) s += d[p];
    }
    db[m] = static_cast<T>(s);
  }
}

}  // namespace monet::ops
