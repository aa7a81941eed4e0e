// ONNX import: the one place that includes ONNX headers. Loads a model file, runs ONNX's checker, folds the
// shape-computing subgraphs (shapes are fixed at a given batch) and converts it to our Graph, running our own
// shape rules node by node.
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"

namespace monet {

struct ImportOptions {
  std::optional<int64_t> batch;          // replaces the data input's first dimension
  std::optional<Shape> input_shape;      // replaces the remaining dimensions (C,H,W)
};

// Throws monet::Error with one line naming the file and the problem (node, op, value) on any failure.
Graph import_onnx(const std::string& path, const ImportOptions& options);

// Parses "C,H,W" (positive integers) into a shape; throws on anything else.
Shape parse_input_shape(const std::string& text);

}  // namespace monet
