// A product whose rows come or go through a Transpose of leading dims, reading or writing them in that order
// instead (lib/ops/matmul's a_perm). nn.MultiheadAttention with batch_first=True (BERT, ViT) swaps its (B, T, E)
// input to (T, B, E) before the in-projection and the out-projection's (T, B, E) result back to (B, T, E) after it.
// Each of those Transposes copies a whole activation every step and has a Transpose of the gradient behind it; the
// first also keeps its copy from the forward to the backward (MatMulGradB reads it).
#pragma once

#include "ir/graph.h"

namespace monet {

// 1. Before:  At = Transpose(X; perm);  Y = MatMul(At, W[, bias])
//    After:   Y = MatMul(X, W[, bias]; a_perm = perm); At and the Transpose are gone.
//    Where perm swaps two blocks of X's leading dims and keeps its last (ops/common/plans.h row_swap), W is 2-D, and
//    At is read by that MatMul alone (as its A) and is no graph output.
// 2. Before:  Y = Gemm(A, W[, bias]) or MatMul(A, W[, bias]);  S = Reshape(Y);  Z = Transpose(S; perm)
//    After:   As = Reshape(A);  Z = MatMul(As, W[, bias]; a_perm = perm); Y, S and the Transpose are gone.
//    A product acts on each row alone, so it commutes with the rows' order: As is A with its rows split as the
//    Reshape splits Y's (the same leading dims, A's columns), and the product reads it through the Transpose. Where
//    the Reshape splits only Y's rows (its last dim Y's), perm swaps two blocks of its leading dims and keeps its
//    last, W is 2-D, Y and S are each read by the next node alone and are no graph outputs; for a Gemm, alpha = 1,
//    transA = 0, and C absent or a bias per column with beta = 1 (transB becomes trans_b). As is A itself where A
//    has those dims already, and reads A's own Reshape's input where A is a Reshape's output read by the product
//    alone (one Reshape, not two). The product keeps its name; the Reshape's node and value keep theirs.
// Returns the number of products rewritten (2 first, then 1).
//
// A Gemm becomes a MatMul with a bias or trans_b only where `gemm` allows it: the MatMul-bias and MatMul-transpose
// rewrites' modes are read from the graph (a MatMul with a bias, one with trans_b), so an import without those
// rewrites must not show their marks.
struct GemmAsMatMul {
  bool bias = true;     // the import takes MatMul biases in (matmul_bias.h)
  bool trans_b = true;  // the import reads MatMul weights as stored (matmul_transpose.h)
};
int matmul_rows(Graph& g, GemmAsMatMul gemm = {});

// "fused" when a MatMul of g reads its A through a_perm, else "separate": how a schedule or profile of g says to
// import the model again (importing without the rewrite gives the same graph where nothing was rewritten).
const char* matmul_rows_mode(const Graph& g);

}  // namespace monet
