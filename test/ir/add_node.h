// Hand-built graphs for the import tests: one node appended at a time, its outputs' shapes inferred.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ops/op.h"

namespace monet::test {

// Appends node `name` of `op` reading `in` (attributes `a`), with one output `out` (and `<out>_mask`, Relu's second
// output); returns the first output's id.
inline int add_node(Graph& g, const std::string& name, const std::string& op, std::vector<int> in,
                    const std::string& out, Attrs a = {}) {
  Node n{.name = name, .op = op, .inputs = std::move(in), .attrs = std::move(a)};
  const int index = static_cast<int>(g.nodes.size());
  n.outputs = {g.add_value({.name = out, .producer = index})};
  if (op == "Relu") n.outputs.push_back(g.add_value({.name = out + "_mask", .producer = index}));
  g.nodes.push_back(n);
  infer_node(g, index);
  return g.nodes.back().outputs[0];
}

}  // namespace monet::test
