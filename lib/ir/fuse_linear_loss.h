// The loss-head fusion: a language model's output MatMul and the cross-entropy on its logits as one
// LinearCrossEntropy node (lib/ops/linear_cross_entropy), so that the planner can choose between keeping the logits
// for the backward pass and recomputing them a chunk of rows at a time (LinearCrossEntropyGrad's implementations).
// build_training_graph makes it when it puts the loss on a token model's output (Graph::fuse_loss_head).
#pragma once

#include <cstdint>
#include <optional>

#include "ir/graph.h"

namespace monet {

// The bytes of logits one chunk holds at most (the node's chunk_rows: this over V floats, at least 1 row).
inline constexpr int64_t kLossChunkBytes = int64_t{128} << 20;

// Before:  Z = MatMul(H, W[, bias]) (W of rank 2, attribute trans_b alone at most), the logits, read by no node.
// After:   losses, Z = LinearCrossEntropy(H, W, labels[, bias]; trans_b, chunk_rows) at the MatMul's position;
//          Z keeps its value (name and id), losses is a new value "<Z>/losses" of labels' shape (Z's without its
//          last axis).
// The caller averages the losses (the loss node). Returns the losses' value, or nothing where Z is not such a
// product (the graph is then unchanged). chunk_bytes: kLossChunkBytes, less in tests that want several chunks.
std::optional<int> fuse_linear_loss(Graph& g, int logits, int labels, int64_t chunk_bytes = kLossChunkBytes);

// "fused" when g holds a LinearCrossEntropy node, else "separate": how a schedule or profile of g says to import
// the model again (importing without the fusion gives the same graph where nothing was fused).
const char* loss_head_mode(const Graph& g);

}  // namespace monet
