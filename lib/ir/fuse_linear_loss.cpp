// The loss-head fusion (fuse_linear_loss.h).
#include "ir/fuse_linear_loss.h"

#include <algorithm>

#include "ops/op.h"

namespace monet {

std::optional<int> fuse_linear_loss(Graph& g, int logits, int labels, int64_t chunk_bytes) {
  const int p = g.values[logits].producer;
  if (p < 0) return std::nullopt;
  const Node& mm = g.nodes[p];
  if (mm.op != "MatMul" || mm.inputs.size() < 2 || mm.outputs.size() != 1) return std::nullopt;
  for (const auto& [name, value] : mm.attrs.all())
    if (name != "trans_b") return std::nullopt;  // a_perm (rows read through a Transpose) and others: unfused
  const Value &h = g.values[mm.inputs[0]], &w = g.values[mm.inputs[1]], &z = g.values[logits];
  if (w.shape.size() != 2 || h.shape.size() < 2 || h.dtype != DType::f32 || w.dtype != DType::f32) return std::nullopt;
  const std::vector<std::vector<int>> readers = g.consumers();
  if (!readers[logits].empty()) return std::nullopt;
  const int64_t V = z.shape.back();
  Value losses;
  losses.name = z.name + "/losses";
  losses.shape.assign(z.shape.begin(), z.shape.end() - 1);
  losses.producer = p;
  const int64_t R = numel(losses.shape);
  const int id = g.add_value(std::move(losses));
  Node& n = g.nodes[p];
  n.op = "LinearCrossEntropy";
  n.inputs.insert(n.inputs.begin() + 2, labels);  // H, W, labels[, bias]
  n.outputs = {id, logits};
  n.attrs.set("chunk_rows", std::clamp<int64_t>(chunk_bytes / std::max<int64_t>(V * 4, 1), 1, std::max<int64_t>(R, 1)));
  infer_node(g, p);
  return id;
}

const char* loss_head_mode(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op == "LinearCrossEntropy"; })
             ? "fused"
             : "separate";
}

}  // namespace monet
