// A MatMul whose product only a bias Add reads, as one MatMul with the bias as its third input (lib/ops/matmul):
// the product is accumulated onto the bias instead of written and read again by the Add (torch's Linear without
// Gemm, y = x W^T + b, exports so: nn.MultiheadAttention's in_proj, BERT's and GPT-2's feed-forward layers).
#pragma once

#include "ir/graph.h"

namespace monet {

// Before:  Y = MatMul(A, W);  Z = Add(Y, b) | Add(b, Y)
// After:   Z = MatMul(A, W, b), named as the MatMul, at its position; Y and the Add are gone.
// Where Y is read by the Add alone and is no graph output, W has rank >= 2, b is float with one value per column
// of Y (shape (m) or (1, ..., 1, m), rank at most Y's: Z has Y's shape) and is there before the MatMul (an input,
// a constant, a parameter, or made by an earlier node). Returns the number of MatMuls that took a bias.
int matmul_bias(Graph& g);

// "fused" when a MatMul of g takes a bias, else "separate": how a schedule or profile of g says to import the model
// again (importing without the rewrite gives the same graph where nothing was rewritten).
const char* matmul_bias_mode(const Graph& g);

}  // namespace monet
