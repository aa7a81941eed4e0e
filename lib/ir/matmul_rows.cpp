// The MatMul-rows rewrite (matmul_rows.h has the Before/After).
#include "ir/matmul_rows.h"

#include <set>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet {

int matmul_rows(Graph& g) {
  const std::vector<std::vector<int>> readers = g.consumers();
  const std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  std::vector<char> drop_node(g.nodes.size(), 0), drop_value(g.values.size(), 0);
  int made = 0;
  for (Node& mm : g.nodes) {
    if (mm.op != "MatMul" || mm.inputs.size() < 2 || mm.attrs.has("a_perm")) continue;
    const int at = mm.inputs[0];
    const int t = g.values[at].producer;
    if (t < 0 || outputs.count(at) || readers[at].size() != 1 || mm.inputs[1] == at) continue;
    if (g.values[mm.inputs[1]].shape.size() != 2) continue;
    const Node& tr = g.nodes[t];
    if (tr.op != "Transpose" || tr.inputs.size() != 1) continue;
    const Shape& x = g.values[tr.inputs[0]].shape;
    const std::vector<int64_t> perm = ops::transpose_perm(tr.attrs, x.size());
    if (!ops::row_swap(x, perm)) continue;
    mm.inputs[0] = tr.inputs[0];
    mm.attrs.set("a_perm", perm);
    drop_node[t] = 1;
    drop_value[at] = 1;
    ++made;
  }
  if (made > 0) g.remove(drop_node, drop_value);
  return made;
}

const char* matmul_rows_mode(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.op == "MatMul" && n.attrs.has("a_perm")) return "fused";
  return "separate";
}

}  // namespace monet
