// How many nodes of each op a graph has: what the import tests compare.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace monet::test {

inline std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> ops;
  for (const Node& n : g.nodes) ++ops[n.op];
  return ops;
}

}  // namespace monet::test
