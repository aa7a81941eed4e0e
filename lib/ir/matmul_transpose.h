// A MatMul whose weight comes through a Transpose, reading the weight as it is stored (lib/ops/matmul's trans_b):
// torch's Linear without Gemm exports y = x W^T as MatMul(x, Transpose(W)), and that Transpose copies the whole
// weight every step and keeps the copy from the forward to the backward (MatMulGradA reads it), beside a second
// Transpose for its gradient.
#pragma once

#include "ir/graph.h"

namespace monet {

// Before:  Wt = Transpose(W; perm = (1, 0) or none);  Y = MatMul(A, Wt[, bias])
// After:   Y = MatMul(A, W[, bias]; trans_b = 1); Wt and the Transpose are gone.
// Where W is 2-D and Wt is read by that MatMul alone (as its B) and is no graph output. Returns the number of MatMuls
// that read their weight transposed.
int matmul_transpose(Graph& g);

// "fused" when a MatMul of g reads its B transposed, else "separate": how a schedule or profile of g says to import
// the model again (importing without the rewrite gives the same graph where nothing was rewritten).
const char* matmul_transpose_mode(const Graph& g);

}  // namespace monet
