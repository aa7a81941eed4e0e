// Constant folding of shape arithmetic at import. monet works at a fixed batch, so every shape is known and the
// subgraphs that compute shapes evaluate to constants; the rules, one per ONNX op, are in onnx_fold.cpp.
// Internal to the importer: included only by lib/ir/onnx_*.cpp.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "ir/onnx_tensor.h"

namespace monet::onnx_import {

// The value defined under a name in the graph being built, or nullptr.
using ValueLookup = std::function<const Value*(const std::string& name)>;

// Node `n`'s single output when it folds: its op has a rule and every input it gives is a constant (Shape reads
// only its input's shape). nullopt when it does not fold here: it then becomes a runtime node, if monet has the op.
// Throws monet::Error, starting with `where`, on inputs no run could accept (an index out of range, a reshape that
// does not fit, a constant too large).
std::optional<ConstTensor> fold_node(const onnx::NodeProto& n, const std::string& where, const ValueLookup& value_of);

}  // namespace monet::onnx_import
