// Reductions over attribute `axes` shared by ReduceMean and ReduceMax and their gradients: which axes are reduced,
// the output shape, and the walk from each input element to the output element it reduces into.
#pragma once

#include <string>
#include <vector>

#include "ops/op.h"

namespace monet::ops {

// Which axes of input shape x are reduced (`axes`, negative counting from the end; absent or empty: all). The shape
// rule's form: an out-of-range or repeated axis fails the node.
inline std::vector<bool> reduced_axes(InferCtx& c, const Shape& x) {
  const int64_t r = static_cast<int64_t>(x.size());
  const std::vector<int64_t> axes = c.attrs().ints("axes", std::vector<int64_t>{});
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t a : axes) {
    if (a < -r || a >= r) c.fail("axis ", a, " is out of range for input shape ", shape_str(x));
    const int64_t d = a < 0 ? a + r : a;
    if (reduced[d]) c.fail("axis ", a, " is listed twice");
    reduced[d] = true;
  }
  return reduced;
}

// The same for gradients and kernels: the shape rule has validated the attribute.
inline std::vector<bool> reduced_axes(const Attrs& attrs, const Shape& x) {
  const int64_t r = static_cast<int64_t>(x.size());
  const std::vector<int64_t> axes = attrs.ints("axes", std::vector<int64_t>{});
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + r : a] = true;
  return reduced;
}

// The output shape: x without (keepdims = 0) or with 1 at (keepdims = 1) the reduced axes.
inline Shape reduced_shape(const Shape& x, const std::vector<bool>& reduced, bool keepdims) {
  Shape y;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!reduced[d]) y.push_back(x[d]);
    else if (keepdims) y.push_back(1);
  }
  return y;
}

// Calls f(i, o) for every element i of x (row-major) with o the output element it reduces into.
template <class F>
void for_each_reduced(const Shape& x, const std::vector<bool>& reduced, F f) {
  const size_t r = x.size();
  std::vector<int64_t> ostride(r, 0);  // output stride per input dim, 0 on reduced dims
  int64_t s = 1;
  for (size_t d = r; d-- > 0;)
    if (!reduced[d]) {
      ostride[d] = s;
      s *= x[d];
    }
  std::vector<int64_t> idx(r, 0);
  int64_t o = 0;
  const int64_t n = numel(x);
  for (int64_t i = 0; i < n; ++i) {
    f(i, o);
    for (size_t d = r; d-- > 0;) {  // odometer increment over the input index
      o += ostride[d];
      if (++idx[d] < x[d]) break;
      o -= ostride[d] * x[d];
      idx[d] = 0;
    }
  }
}

}  // namespace monet::ops
