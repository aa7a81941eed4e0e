// The MatMul-bias rewrite (matmul_bias.h has the Before/After).
#include "ir/matmul_bias.h"

#include <algorithm>
#include <set>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet {

int matmul_bias(Graph& g) {
  const std::vector<std::vector<int>> readers = g.consumers();
  const std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  std::vector<char> drop_node(g.nodes.size(), 0), drop_value(g.values.size(), 0);
  int made = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& mm = g.nodes[n];
    if (mm.op != "MatMul" || mm.inputs.size() != 2) continue;
    const int y = mm.outputs[0];
    if (outputs.count(y) || readers[y].size() != 1) continue;
    const int a = readers[y][0];
    const Node& add = g.nodes[a];
    if (add.op != "Add" || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) continue;
    const int b = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
    const Value &yv = g.values[y], &bv = g.values[b];
    if (yv.dtype != DType::f32 || bv.dtype != DType::f32) continue;
    if (!ops::matmul_bias_fits(bv.shape, yv.shape, g.values[mm.inputs[1]].shape)) continue;
    if (g.values[add.outputs[0]].shape != yv.shape) continue;
    if (bv.producer >= static_cast<int>(n)) continue;  // made between the MatMul and the Add
    mm.inputs.push_back(b);
    mm.outputs = {add.outputs[0]};
    g.values[add.outputs[0]].producer = static_cast<int>(n);
    drop_node[a] = 1;
    drop_value[y] = 1;
    ++made;
  }
  if (made > 0) g.remove(drop_node, drop_value);
  return made;
}

const char* matmul_bias_mode(const Graph& g) {
  for (const Node& n : g.nodes)
    // The loss-head fusion (fuse_linear_loss.h) keeps the MatMul's bias as its node's fourth input.
    if ((n.op == "MatMul" && n.inputs.size() == 3) || (n.op == "LinearCrossEntropy" && n.inputs.size() == 4))
      return "fused";
  return "separate";
}

}  // namespace monet
