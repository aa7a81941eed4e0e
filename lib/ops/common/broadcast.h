// Numpy-style broadcasting: the broadcast shape of two inputs, and the offset of each output element in an input.
#pragma once

#include <algorithm>

#include "ops/op.h"

namespace monet::ops {

// Broadcast shape of a and b, or nullopt if they do not broadcast.
inline std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;  // numpy: a 1 takes the other's size, 0 included
  }
  return out;
}

// For an input of shape `in` broadcast to `out`: offsets[i] is the input element read by output element i.
inline std::vector<int64_t> broadcast_offsets(const Shape& in, const Shape& out) {
  const size_t r = out.size();
  std::vector<int64_t> stride(r, 0);  // input stride per output dim (0 where broadcast)
  int64_t s = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    size_t d = in.size() - 1 - k;
    size_t od = r - 1 - k;
    stride[od] = in[d] == 1 ? 0 : s;
    s *= in[d];
  }
  std::vector<int64_t> offsets(static_cast<size_t>(numel(out)));
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    offsets[i] = off;
    for (size_t d = r; d-- > 0;) {  // odometer increment over the output index
      off += stride[d];
      if (++idx[d] < out[d]) break;
      off -= stride[d] * out[d];
      idx[d] = 0;
    }
  }
  return offsets;
}

}  // namespace monet::ops
