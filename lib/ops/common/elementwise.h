// Helpers shared by elementwise ops: same-shape shape rules and element-by-element CPU loops.
#pragma once

#include "ops/op.h"

namespace monet::ops {

// One input (or several of the same shape); every output has the shape of input 0.
inline void infer_like_input0(InferCtx& c) {
  for (int i = 1; i < c.num_inputs(); ++i)
    if (c.shape(i) != c.shape(0))
      c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected ", shape_str(c.shape(0)));
  for (int o = 0; o < c.num_outputs(); ++o) c.set_out(o, c.shape(0), c.in(0).dtype);
}

// y[i] = f(x[i])
template <class T, class F>
void map1(const CpuCall& c, F f) {
  const T* x = c.in[0].as<T>();  // (n)
  T* y = c.out[0].as<T>();       // (n)
  const int64_t n = c.in[0].numel();
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// z[i] = f(a[i], b[i]), a and b of the same shape
template <class T, class F>
void map2(const CpuCall& c, F f) {
  const T* a = c.in[0].as<T>();  // (n)
  const T* b = c.in[1].as<T>();  // (n)
  T* z = c.out[0].as<T>();       // (n)
  const int64_t n = c.in[0].numel();
  for (int64_t i = 0; i < n; ++i) z[i] = f(a[i], b[i]);
}

}  // namespace monet::ops
