// What other backends need from Trilu (lib/ops/trilu): the CPU's own resolution of its attributes.
#pragma once

#include "ir/graph.h"

namespace monet::ops {

// x seen as (batch, R, C); element (i, j) of each matrix is kept where j - i >= k (upper) or j - i <= k (lower).
struct TriluSpec {
  int64_t batch = 1, R = 1, C = 1, k = 0;
  bool upper = true;
  bool keeps(int64_t i, int64_t j) const { return upper ? j - i >= k : j - i <= k; }
};
TriluSpec trilu_spec(const Attrs& a, const Shape& x);

}  // namespace monet::ops
