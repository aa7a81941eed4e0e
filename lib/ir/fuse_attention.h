// The attention fusion: one Attention node (lib/ops/attention) in place of the nodes an export writes for scaled
// dot-product attention, so that the planner can choose per layer between keeping the probabilities and
// recomputing them in the backward (AttentionGrad's implementations).
#pragma once

#include "ir/graph.h"

namespace monet {

// Before:  S0 = MatMul(Q, Kt);  S1 = Mul(S0, c) | Div(S0, c) | S0;
//          S2 = Add(S1, mask) | Add(mask, S1) | Where(cond, -inf, S1) | Where(cond, S1, -inf) | S1;
//          P = Softmax(S2, axis = last);  O = MatMul(P, V)
// (Where: masked_fill with -inf, cond a constant; the mask is then its additive form, a new constant value
// "<S2>/additive_mask": -inf where Where takes the fill, else 0.)
// After:   O, P, L = Attention(Q, Kt, V[, mask]; scale = c, scale_divides = 1 for Div)
// strided (the default import): the Attention also reads its operands where the export stored them. Walking back
// from Q and Kt it takes in Transposes and Mul/Div by a constant scalar, from V Transposes, and forward from O the
// Transposes that read it. Back from Q, Kt and V, a Reshape of a Transpose of the last two dims of a Reshape counts
// as one Transpose where both Reshapes only regroup the leading dims (the dynamo exporter's K^T over B H merged).
// All this while each value passed is read by the next node alone and is no graph output, and the
// operand keeps its rows or its columns innermost: the layouts become q_perm, kt_perm, v_perm, o_perm (canonical
// dim i is the stored tensor's dim perm[i]; lib/ops/attention) and the scalars join c (a quotient where all
// divide, as BERT's Q / sqrt(d), else a product). Every strided Attention carries all four perms.
// Matched where S0, S1, S2 and P are each read by the next node alone and are no graph outputs, c is a constant
// scalar, Q, Kt and V have one rank and equal batch dims, the mask broadcasts to the scores without enlarging them
// and depends on no parameter (a learned bias needs its gradient: that attention stays as it is). P keeps its value
// (name and id order); L is a new value "<P>/lse". Returns the number of attentions fused.
int fuse_attention(Graph& g, bool strided = true);

// How a schedule or profile of g says to import the model again: "strided" when an Attention carries layouts,
// "fused" when g holds Attention nodes without, else "materialized" (importing without the fusion gives the same
// graph where nothing was fused).
const char* attention_mode(const Graph& g);

}  // namespace monet
