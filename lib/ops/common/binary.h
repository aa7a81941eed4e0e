// What Add, Sub, Mul and Div share: the numpy-broadcast shape rule, a strided broadcast walk that keeps O(rank)
// state (no per-element offset tables), and the gradient pattern "elementwise expression of dy, reduced by summation
// to a forward input's shape" (a fused ReduceSumTo, so no full-size temporary is materialised).
#pragma once

#include <array>

#include "ops/common/broadcast.h"
#include "ops/common/unary.h"

namespace monet::ops {

// Stride of an input of shape `in` per dimension of `out` (right-aligned): 0 where the input is broadcast or lacks
// the dimension.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  const size_t r = out.size();
  std::vector<int64_t> stride(r, 0);
  int64_t s = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    size_t d = in.size() - 1 - k;
    stride[r - 1 - k] = in[d] == 1 ? 0 : s;
    s *= in[d];
  }
  return stride;
}

// Calls f(i, off) for every element i of `out` in row-major order; off[k] is the element of operand k (of shape
// *operands[k], which broadcasts to `out`) that numpy broadcasting pairs with it. The last dimension is the inner
// loop; an odometer advances the others.
template <size_t K, class F>
void for_each_broadcast(const Shape& out, const std::array<const Shape*, K>& operands, F&& f) {
  const size_t r = out.size();
  std::array<int64_t, K> off{};
  if (r == 0) {  // a scalar: every operand is a scalar too
    f(int64_t{0}, off);
    return;
  }
  std::array<std::vector<int64_t>, K> stride;
  std::array<int64_t, K> inner_step;
  for (size_t k = 0; k < K; ++k) {
    stride[k] = broadcast_strides(*operands[k], out);
    inner_step[k] = stride[k][r - 1];
  }
  const int64_t inner = out[r - 1];
  const int64_t n = numel(out);
  std::vector<int64_t> idx(r, 0);  // index over the outer dims 0..r-2
  for (int64_t row = 0; row < n; row += inner) {
    std::array<int64_t, K> o = off;
    for (int64_t j = 0; j < inner; ++j) {
      f(row + j, o);
      for (size_t k = 0; k < K; ++k) o[k] += inner_step[k];
    }
    for (size_t d = r - 1; d-- > 0;) {
      for (size_t k = 0; k < K; ++k) off[k] += stride[k][d];
      if (++idx[d] < out[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= stride[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

// Add/Sub/Mul/Div(A, B): two float inputs, output of their numpy-broadcast shape.
inline void infer_broadcast_binary(InferCtx& c) {
  c.expect_inputs(2, 2);
  expect_float_inputs(c);
  auto out = broadcast_shapes(c.shape(0), c.shape(1));
  if (!out) c.fail("shapes ", shape_str(c.shape(0)), " and ", shape_str(c.shape(1)), " do not broadcast");
  c.set_out(0, *out);
}

// z = f(a, b) with numpy broadcasting; a plain loop when the shapes agree (the common case: residual adds).
template <class T, class F>
void broadcast_map2(const CpuCall& c, F f) {
  const Shape& sa = *c.in[0].shape;
  const Shape& sb = *c.in[1].shape;
  if (sa == sb) {
    map2<T>(c, f);
    return;
  }
  const T* a = c.in[0].as<T>();  // (A shape)
  const T* b = c.in[1].as<T>();  // (B shape)
  T* z = c.out[0].as<T>();       // (broadcast shape)
  for_each_broadcast<2>(*c.out[0].shape, {&sa, &sb},
                        [&](int64_t i, const std::array<int64_t, 2>& o) { z[i] = f(a[o[0]], b[o[1]]); });
}

// Gradient op (dy, operands...) with attribute "shape" (a forward input's shape): every operand broadcasts to dy's
// shape (the forward output's), and so does `shape`; the output has `shape`.
inline void infer_grad_sum_to(InferCtx& c, int num_operands) {
  c.expect_inputs(1 + num_operands, 1 + num_operands);
  expect_float_inputs(c);
  const Shape& dy = c.shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    auto b = broadcast_shapes(c.shape(i), dy);
    if (!b || *b != dy) c.fail("input ", i, " of shape ", shape_str(c.shape(i)), " does not broadcast to ", shape_str(dy));
  }
  Shape target = c.attrs().ints("shape");
  auto b = broadcast_shapes(target, dy);
  if (!b || *b != dy) c.fail("shape ", shape_str(target), " does not broadcast to ", shape_str(dy));
  c.set_out(0, target);
}

// dx = ReduceSumTo(f(dy, p_0, ..., p_{K-1}), shape) in one pass: each dy element adds f(...) into the dx element it
// was broadcast from. K (0..2) operands p_k follow dy in the inputs, each read with broadcasting.
template <class T, size_t K, class F>
void grad_sum_to(const CpuCall& c, F f) {
  static_assert(K <= 2);
  const T* dy = c.in[0].as<T>();  // (forward output shape)
  T* dx = c.out[0].as<T>();       // (attr shape = forward input shape)
  std::array<const T*, K> p{};    // (each broadcasting to dy's shape)
  for (size_t k = 0; k < K; ++k) p[k] = c.in[k + 1].as<T>();
  auto term = [&](int64_t i, const int64_t* o) {
    if constexpr (K == 0) return f(dy[i]);
    else if constexpr (K == 1) return f(dy[i], p[0][o[0]]);
    else return f(dy[i], p[0][o[0]], p[1][o[1]]);
  };

  const Shape& ys = *c.in[0].shape;
  bool same = *c.out[0].shape == ys;
  for (size_t k = 0; k < K; ++k) same = same && *c.in[k + 1].shape == ys;
  if (same) {  // nothing broadcast: dx[i] = f(dy[i], p[i]...)
    const int64_t n = c.in[0].numel();
    std::array<int64_t, (K > 0 ? K : 1)> o{};
    for (int64_t i = 0; i < n; ++i) {
      o.fill(i);
      dx[i] = term(i, o.data());
    }
    return;
  }
  std::fill(dx, dx + c.out[0].numel(), T(0));
  std::array<const Shape*, K + 1> shapes{};
  shapes[0] = c.out[0].shape;
  for (size_t k = 0; k < K; ++k) shapes[k + 1] = c.in[k + 1].shape;
  for_each_broadcast<K + 1>(ys, shapes, [&](int64_t i, const std::array<int64_t, K + 1>& o) {
    dx[o[0]] += term(i, o.data() + 1);
  });
}

// Attribute {"shape": shape of forward input i}, the target of a gradient reduced to that input.
inline Attrs input_shape_attr(const GradBuilder& b, int i) {
  Attrs a;
  a.set("shape", b.value(b.in(i)).shape);
  return a;
}

// The gradient of forward input i when it is the output gradient g summed to the input's shape: g itself when the
// input was not broadcast, else ReduceSumTo(g).
inline int sum_to_input(GradBuilder& b, int i, int g) {
  if (b.value(g).shape == b.value(b.in(i)).shape) return g;
  return b.emit1("ReduceSumTo", {g}, input_shape_attr(b, i));
}

}  // namespace monet::ops
