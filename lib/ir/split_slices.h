// Slices that cut one axis of a value into consecutive pieces, as one Split: their gradients then join into the
// value's gradient in one pass (SplitGrad), where each Slice's SliceGrad writes a zero tensor of the whole value
// around its piece and Sums add them up (nn.MultiheadAttention's in_proj exports its Q, K, V so: on BERT b32 the
// three SliceGrads and two Sums of each layer took 5.0 ms a step on an H200).
#pragma once

#include "ir/graph.h"

namespace monet {

// Before:  y_i = Slice(x; starts, ends, axes, steps), i = 1..n (n >= 2), every Slice of x that cuts exactly one axis
//          a with step 1, their ranges [start_i, end_i) (resolved against x's shape) disjoint and covering
//          [0, x.shape[a]).
// After:   (y_i in range order) = Split(x; axis = a, split = their lengths, from_slices = 1), named after the first
//          of the Slices with "/split" added, at that Slice's position. The y_i keep their values (names, ids);
//          x's other readers stay. Returns the number of Splits made.
int split_slices(Graph& g);

// "split" when g holds a Split made by split_slices, else "sliced": how a schedule or profile of g says to import
// the model again (importing without the rewrite gives the same graph where nothing was rewritten).
const char* slices_mode(const Graph& g);

}  // namespace monet
