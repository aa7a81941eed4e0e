// A MatMul whose A comes through a Transpose of its leading dims, reading A as it is stored (lib/ops/matmul's
// a_perm): nn.MultiheadAttention with batch_first=True (BERT, ViT) swaps its (B, T, E) input to (T, B, E) before the
// in-projection, and that Transpose copies the whole input every step, keeps the copy from the forward to the
// backward (MatMulGradB reads it), and has a Transpose of the gradient behind it.
#pragma once

#include "ir/graph.h"

namespace monet {

// Before:  At = Transpose(X; perm);  Y = MatMul(At, W[, bias])
// After:   Y = MatMul(X, W[, bias]; a_perm = perm); At and the Transpose are gone.
// Where perm swaps two blocks of X's leading dims and keeps its last (ops/common/plans.h row_swap), W is 2-D, and At
// is read by that MatMul alone (as its A) and is no graph output. Returns the number of MatMuls rewritten.
int matmul_rows(Graph& g);

// "fused" when a MatMul of g reads its A through a_perm, else "separate": how a schedule or profile of g says to
// import the model again (importing without the rewrite gives the same graph where nothing was rewritten).
const char* matmul_rows_mode(const Graph& g);

}  // namespace monet
