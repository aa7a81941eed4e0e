// The Slices-to-Split rewrite (split_slices.h has the Before/After).
#include "ir/split_slices.h"

#include <algorithm>
#include <map>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet {
namespace {

// A Slice of x that cuts one axis with step 1: the axis and its range.
struct Cut {
  int node = -1;
  int64_t axis = -1, start = 0, len = 0;
};

// The Slice node n of x as a Cut, or a Cut with axis -1 when it cuts no axis, several, or with a step.
Cut cut_of(const Graph& g, int n) {
  const Node& node = g.nodes[n];
  const Shape& xs = g.values[node.inputs[0]].shape;
  const ops::SliceSpec s = ops::slice_spec(node.attrs, xs);
  Cut c;
  c.node = n;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (s.start[d] == 0 && s.step[d] == 1 && s.len[d] == xs[d]) continue;  // the whole axis
    if (c.axis >= 0 || s.step[d] != 1) return {n};
    c.axis = static_cast<int64_t>(d);
    c.start = s.start[d];
    c.len = s.len[d];
  }
  return c;
}

}  // namespace

int split_slices(Graph& g) {
  const std::vector<std::vector<int>> readers = g.consumers();
  std::vector<char> drop(g.nodes.size(), 0);
  std::map<int, Node> split_at;  // the first Slice's position -> the Split in its place
  for (size_t x = 0; x < g.values.size(); ++x) {
    std::map<int64_t, std::vector<Cut>> by_axis;
    for (int n : readers[x])
      if (g.nodes[n].op == "Slice" && g.nodes[n].inputs[0] == static_cast<int>(x)) {
        const Cut c = cut_of(g, n);
        if (c.axis >= 0) by_axis[c.axis].push_back(c);
      }
    for (auto& [axis, cuts] : by_axis) {
      if (cuts.size() < 2) continue;
      std::sort(cuts.begin(), cuts.end(), [](const Cut& a, const Cut& b) { return a.start < b.start; });
      int64_t at = 0;
      for (const Cut& c : cuts) at = c.start == at ? at + c.len : -1;
      if (at != g.values[x].shape[static_cast<size_t>(axis)]) continue;  // a gap, an overlap or short of the end
      int first = cuts.front().node;
      for (const Cut& c : cuts) first = std::min(first, c.node);
      Node split;
      split.name = g.nodes[first].name + "/split";
      split.op = "Split";
      split.inputs = {static_cast<int>(x)};
      std::vector<int64_t> sizes;
      for (const Cut& c : cuts) {
        split.outputs.push_back(g.nodes[c.node].outputs[0]);
        sizes.push_back(c.len);
        drop[c.node] = 1;
      }
      split.attrs.set("axis", axis);
      split.attrs.set("split", sizes);
      split.attrs.set("from_slices", int64_t{1});
      split_at[first] = std::move(split);
    }
  }
  if (split_at.empty()) return 0;
  std::vector<Node> nodes;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (auto it = split_at.find(static_cast<int>(n)); it != split_at.end()) nodes.push_back(std::move(it->second));
    else if (!drop[n]) nodes.push_back(std::move(g.nodes[n]));
  }
  g.nodes = std::move(nodes);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : g.nodes[n].outputs) g.values[v].producer = static_cast<int>(n);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].attrs.has("from_slices")) infer_node(g, static_cast<int>(n));
  g.verify();
  return static_cast<int>(split_at.size());
}

const char* slices_mode(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.op == "Split" && n.attrs.has("from_slices")) return "split";
  return "sliced";
}

}  // namespace monet
