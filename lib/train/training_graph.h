// The training graph: forward nodes, a loss on the model output, autodiff's backward nodes, and one SGD update
// per parameter, all as nodes of one Graph that any schedule can execute.
#pragma once

#include <string>

#include "ir/graph.h"

namespace monet {

enum class LossKind { cross_entropy, sum };
LossKind parse_loss(const std::string& text);  // "ce" | "cross-entropy" | "sum"
const char* loss_name(LossKind k);

struct TrainOptions {
  LossKind loss = LossKind::cross_entropy;
  double lr = 0.01;
  double momentum = 0.9;
};

struct ParamSlot {
  int param = -1;
  int grad = -1;      // value produced by backward
  int momentum = -1;  // persistent SGD state
};

struct TrainingGraph {
  Graph graph;
  TrainOptions options;
  int forward_end = 0;     // nodes [0, forward_end) are the model's forward pass
  int loss_node = -1;      // the loss node (right after the forward pass)
  int loss = -1;           // loss value ()
  int labels = -1;         // label value (cross-entropy only)
  int64_t class_axis = 1;  // the output's class axis (cross-entropy only): 1, or the last for a token model
  std::vector<ParamSlot> params;
};

// Builds the training graph of a forward graph (as imported). Params that receive no gradient are not updated.
TrainingGraph build_training_graph(Graph forward, const TrainOptions& options);

// Initial host values of every persistent tensor (params, buffers, momentum, constants, data input, labels),
// indexed by value id (empty for transient values). Params and buffers without data in the file are drawn as
// PyTorch initialises layers; the data batch ~ N(0, 1); labels uniform in [0, C).
std::vector<std::vector<double>> initial_values(const TrainingGraph& tg, uint64_t seed);

}  // namespace monet
