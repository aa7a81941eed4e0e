// Reverse-mode autodiff on the graph: each forward node's OpDef::backward emits ordinary graph nodes.
#pragma once

#include <map>

#include "ir/graph.h"

namespace monet {

// Marks Value::requires_grad: params, values already marked, and everything computed from them.
void mark_requires_grad(Graph& g);

// Appends the backward of g.nodes[0 .. forward_end) to g, in reverse order, given the gradients flowing into
// some values (seeds: value id -> gradient value id). Contributions from several consumers are summed eagerly.
// Returns, for every value that requires a gradient and received one, its gradient value id.
std::map<int, int> append_backward(Graph& g, int forward_end, const std::map<int, int>& seeds);

}  // namespace monet
