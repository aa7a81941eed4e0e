// What other backends need from Tile (lib/ops/tile): the CPU's own resolution of its attributes.
#pragma once

#include "ir/graph.h"

namespace monet::ops {

// y of shape (r_0 d_0, r_1 d_1, ...) is, in memory, the tensor (r_0, d_0, r_1, d_1, ...) whose element
// (a_0, b_0, a_1, b_1, ...) is x[b_0, b_1, ...]. `view` is that shape with the pairs whose r is 1 given as d alone,
// `x_dims` x's shape in it with 1 at every r: y = broadcast of x (as x_dims) to view, and dx = dy (as view)
// summed back to x_dims.
struct TileSpec {
  Shape out, view, x_dims;
};
TileSpec tile_spec(const Attrs& a, const Shape& x);

}  // namespace monet::ops
