// The batch norm - activation fusion (fuse_bn_activation.h has the Before/After).
#include "ir/fuse_bn_activation.h"

#include <algorithm>
#include <cmath>

#include "ops/common/plans.h"

namespace monet {
namespace {

bool is_output(const Graph& g, int v) { return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end(); }

// The activation node that reads batch norm `bn`'s Y where the pair fuses, else -1.
int fusable_activation(const Graph& g, const Node& bn, const std::vector<std::vector<int>>& readers) {
  if (bn.op != "BatchNormalization" || bn.attrs.has("activation") || bn.outputs.size() != 3) return -1;
  const int y = bn.outputs[0];
  if (readers[y].size() != 1 || is_output(g, y)) return -1;
  const int a = readers[y][0];
  const Node& act = g.nodes[static_cast<size_t>(a)];
  if (act.inputs.size() != 1 || act.inputs[0] != y || act.outputs.empty()) return -1;
  if (act.op == "Relu") {
    if (act.outputs.size() != 2) return -1;
    const int mask = act.outputs[1];
    return readers[mask].empty() && !is_output(g, mask) ? a : -1;
  }
  if (act.op == "Clip") {
    const auto [lo, hi] = ops::clip_bounds(act.attrs);
    return act.outputs.size() == 1 && lo < hi ? a : -1;  // min >= max: a constant, no gate to fuse
  }
  return -1;
}

}  // namespace

int fuse_bn_activation(Graph& g) {
  const std::vector<std::vector<int>> readers = g.consumers();
  std::vector<char> drop_node(g.nodes.size(), 0), drop_value(g.values.size(), 0);
  int fused = 0;
  for (Node& bn : g.nodes) {
    const int a = fusable_activation(g, bn, readers);
    if (a < 0 || drop_node[static_cast<size_t>(a)]) continue;
    const Node& act = g.nodes[static_cast<size_t>(a)];
    const int z = act.outputs[0];
    int mask;
    if (act.op == "Relu") {
      bn.attrs.set("activation", std::string("relu"));
      mask = act.outputs[1];  // the Relu's mask becomes the batch norm's
    } else {
      const auto [lo, hi] = ops::clip_bounds(act.attrs);
      bn.attrs.set("activation", std::string("clip"));
      if (std::isfinite(lo)) bn.attrs.set("activation_min", lo);  // absent: unbounded, as Clip's own bounds
      if (std::isfinite(hi)) bn.attrs.set("activation_max", hi);
      Value m;
      m.name = g.values[static_cast<size_t>(z)].name + "/mask";
      m.dtype = DType::u8;
      m.shape = {ops::relu_mask_bytes(numel(g.values[static_cast<size_t>(z)].shape))};
      mask = g.add_value(std::move(m));
    }
    drop_value[static_cast<size_t>(bn.outputs[0])] = 1;
    bn.outputs[0] = z;
    bn.outputs.push_back(mask);
    drop_node[static_cast<size_t>(a)] = 1;
    ++fused;
  }
  if (fused > 0) {
    drop_value.resize(g.values.size(), 0);
    g.remove(drop_node, drop_value);
  }
  return fused;
}

const char* bn_activation_mode(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [](const Node& n) { return n.op == "BatchNormalization" && n.attrs.has("activation"); })
             ? "fused"
             : "separate";
}

}  // namespace monet
