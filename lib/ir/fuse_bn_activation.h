// A batch norm and the ReLU or Clip (ReLU6) after it as one node: BatchNormalization with attribute `activation`
// writes the activated Y in the same pass that normalises, and its gradient BatchNormActGrad gates dY by where Y is
// strictly inside the activation's range (lib/ops/batch_norm). The activation's own passes are gone: on CUDA a
// separate BN-ReLU pair moves 13 full tensors a store-all step, the fused node 10 (docs/models.md, "A batch norm and
// its activation"); store-all keeps what the separate pair keeps (X and the activated Y), and a 1-bit mask where a
// schedule gates the gradient by it.
#pragma once

#include "ir/graph.h"

namespace monet {

// Before:  y = BatchNormalization(x, scale, B, running_mean, running_var) (training mode: Y, saved_mean,
//          saved_invstd), its Y read by one node alone and not a graph output; that node
//          z, mask = Relu(y) (mask read by no node and not a graph output), or z = Clip(y; min, max) with min < max
//          (either bound may be absent: -inf, +inf).
// After:   z, saved_mean, saved_invstd, mask = BatchNormalization(x, ...; activation = "relu", or "clip" with
//          activation_min and activation_max, each absent where Clip's is) at the batch norm's position: mask is
//          where the activation passes, 1 bit per element as Relu's (the Relu's own value; for a Clip a new value
//          "<z>/mask"), an optional output (only BatchNormActGrad's "mask" implementation reads it). The activation
//          node and y are gone (the values after them move down). z keeps its name. Returns the pairs fused.
int fuse_bn_activation(Graph& g);

// "fused" when g holds a batch norm with an activation, else "separate": how a schedule or profile of g says to
// import the model again (importing without the rewrite gives the same graph where nothing was fused).
const char* bn_activation_mode(const Graph& g);

}  // namespace monet
