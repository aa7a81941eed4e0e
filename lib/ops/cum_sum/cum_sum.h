// What other backends need from CumSum (lib/ops/cum_sum): the CPU's own resolution of its attributes.
#pragma once

#include "ir/graph.h"

namespace monet::ops {

// x seen as (outer, A, inner) around the summed axis, and the two flags.
struct CumSumSpec {
  int64_t outer = 1, A = 1, inner = 1;
  bool exclusive = false, reverse = false;
};
CumSumSpec cum_sum_spec(const Attrs& a, const Shape& x);

}  // namespace monet::ops
