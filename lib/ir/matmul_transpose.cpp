// The MatMul-transpose rewrite (matmul_transpose.h has the Before/After).
#include "ir/matmul_transpose.h"

#include <set>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet {

int matmul_transpose(Graph& g) {
  const std::vector<std::vector<int>> readers = g.consumers();
  const std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  std::vector<char> drop_node(g.nodes.size(), 0), drop_value(g.values.size(), 0);
  int made = 0;
  for (Node& mm : g.nodes) {
    if (mm.op != "MatMul" || mm.inputs.size() < 2 || mm.attrs.i("trans_b", 0) != 0) continue;
    const int wt = mm.inputs[1];
    const int t = g.values[wt].producer;
    if (t < 0 || outputs.count(wt) || readers[wt].size() != 1 || mm.inputs[0] == wt) continue;
    const Node& tr = g.nodes[t];
    if (tr.op != "Transpose" || tr.inputs.size() != 1 || g.values[tr.inputs[0]].shape.size() != 2) continue;
    if (ops::transpose_perm(tr.attrs, 2) != std::vector<int64_t>{1, 0}) continue;
    mm.inputs[1] = tr.inputs[0];
    mm.attrs.set("trans_b", int64_t{1});
    drop_node[t] = 1;
    drop_value[wt] = 1;
    ++made;
  }
  if (made > 0) g.remove(drop_node, drop_value);
  return made;
}

const char* matmul_transpose_mode(const Graph& g) {
  for (const Node& n : g.nodes)
    // The loss-head fusion (fuse_linear_loss.h) keeps the MatMul's trans_b on the node it makes.
    if ((n.op == "MatMul" || n.op == "LinearCrossEntropy") && n.attrs.i("trans_b", 0) != 0) return "fused";
  return "separate";
}

}  // namespace monet
