// The Concat-Conv split (split_concat_conv.h has the Before/After).
#include "ir/split_concat_conv.h"

#include <algorithm>
#include <map>

#include "ops/op.h"

namespace monet {
namespace {

// The Concat that produces a Conv's X where the rewrite applies to the pair (split_concat_conv.h), else -1.
int splittable_concat(const Graph& g, const Node& conv, const std::vector<std::vector<int>>& readers) {
  if (conv.op != "Conv" || conv.inputs.size() < 2 || conv.attrs.i("group", 1) != 1) return -1;
  const int x = conv.inputs[0];
  const Value& xv = g.values[x];
  const int k = xv.producer;
  if (k < 0 || g.nodes[k].op != "Concat" || g.nodes[k].inputs.size() < 2) return -1;
  if (readers[x].size() != 1 || std::count(conv.inputs.begin(), conv.inputs.end(), x) != 1) return -1;
  if (std::find(g.outputs.begin(), g.outputs.end(), x) != g.outputs.end() || xv.shape.size() < 2) return -1;
  int64_t axis = g.nodes[k].attrs.i("axis");
  if (axis < 0) axis += static_cast<int64_t>(xv.shape.size());
  if (axis != 1) return -1;
  for (int in : g.nodes[k].inputs)
    if (g.values[in].shape.size() != xv.shape.size() || g.values[in].shape[1] < 1) return -1;
  // The split holds the weight's pieces and their gradients (twice the weight) where the joined Conv holds the
  // concatenation and its gradient: worth it where the concatenation is at least twice the weight.
  if (numel(xv.shape) < 2 * numel(g.values[conv.inputs[1]].shape)) return -1;
  return k;
}

// The last mark of a split convolution's node in `name` that ends a segment (split_concat_conv.h
// split_conv_joined_name): where it starts and ends (npos when there is none), and whether it is a part's.
struct Mark {
  size_t at = std::string::npos, end = std::string::npos;
  bool part = false;
};
Mark last_mark(const std::string& name) {
  Mark best;
  for (const std::string mark : {"/part", "/weight_split", "/sum"}) {
    for (size_t at = name.find(mark); at != std::string::npos; at = name.find(mark, at + 1)) {
      size_t end = at + mark.size();
      if (mark == "/part") {
        const size_t digits = name.find_first_not_of("0123456789", end);
        if (digits == end) continue;
        end = digits == std::string::npos ? name.size() : digits;
      }
      const bool ends = end == name.size() || name[end] == '/';
      if (ends && (best.at == std::string::npos || at > best.at)) best = {at, end, mark == "/part"};
    }
  }
  return best;
}

}  // namespace

std::string split_conv_part_name(const std::string& conv, int part) { return conv + "/part" + std::to_string(part); }

int split_concat_conv(Graph& g) {
  const std::vector<std::vector<int>> readers = g.consumers();
  std::vector<char> drop_node(g.nodes.size(), 0), drop_value(g.values.size(), 0);
  std::map<int, std::vector<Node>> replaced;  // the Conv's position -> the nodes in its place
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    const Node& conv = g.nodes[c];
    const int k = splittable_concat(g, conv, readers);
    if (k < 0) continue;
    const Node& concat = g.nodes[k];
    const int w = conv.inputs[1];
    const DType w_dtype = g.values[w].dtype, y_dtype = g.values[conv.outputs[0]].dtype;  // add_value moves values
    const int parts = static_cast<int>(concat.inputs.size());
    std::vector<Node> nodes;

    Node split;
    split.name = conv.name + "/weight_split";
    split.op = "Split";
    split.inputs = {w};
    std::vector<int64_t> channels;
    for (int i = 0; i < parts; ++i) {
      const int64_t ci = g.values[concat.inputs[i]].shape[1];
      channels.push_back(ci);
      Value part;
      part.name = conv.name + "/weight_part" + std::to_string(i);
      part.dtype = w_dtype;
      split.outputs.push_back(g.add_value(std::move(part)));
    }
    split.attrs.set("axis", int64_t{1});
    split.attrs.set("split", channels);
    split.attrs.set("from_concat", int64_t{1});

    Node sum;
    sum.name = conv.name + "/sum";
    sum.op = "Sum";
    sum.outputs = {conv.outputs[0]};
    sum.attrs.set("from_concat", int64_t{1});
    nodes.push_back(std::move(split));
    for (int i = 0; i < parts; ++i) {
      Node p;
      p.name = split_conv_part_name(conv.name, i);
      p.op = "Conv";
      p.attrs = conv.attrs;
      p.attrs.set("concat_part", static_cast<int64_t>(i));
      p.inputs = {concat.inputs[i], nodes.front().outputs[i]};
      if (i == 0 && conv.inputs.size() > 2) p.inputs.push_back(conv.inputs[2]);
      Value out;
      out.name = p.name + "_out";
      out.dtype = y_dtype;
      p.outputs = {g.add_value(std::move(out))};
      sum.inputs.push_back(p.outputs[0]);
      nodes.push_back(std::move(p));
    }
    nodes.push_back(std::move(sum));
    replaced[static_cast<int>(c)] = std::move(nodes);
    drop_node[static_cast<size_t>(k)] = 1;
    drop_value[static_cast<size_t>(conv.inputs[0])] = 1;
  }
  if (replaced.empty()) return 0;
  drop_value.resize(g.values.size(), 0);
  std::vector<Node> nodes;
  std::vector<char> drop;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (auto it = replaced.find(static_cast<int>(n)); it != replaced.end()) {
      for (Node& r : it->second) {
        nodes.push_back(std::move(r));
        drop.push_back(0);
      }
    } else {
      nodes.push_back(std::move(g.nodes[n]));
      drop.push_back(drop_node[n]);
    }
  }
  g.nodes = std::move(nodes);
  // Producers as the nodes stand now (the new values' shapes come from their nodes, in order), then the Concats and
  // their outputs removed.
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : g.nodes[n].outputs) g.values[v].producer = static_cast<int>(n);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (node.attrs.has("from_concat") || node.attrs.has("concat_part")) infer_node(g, static_cast<int>(n));
  }
  g.remove(drop, drop_value);
  return static_cast<int>(replaced.size());
}

const char* concat_conv_mode(const Graph& g) {
  if (g.split_concat_conv) return "split";
  for (const Node& n : g.nodes)
    if (n.op == "Conv" && n.attrs.has("concat_part")) return "split";
  return "joined";
}

bool from_split_conv(const Graph& g, int node) {
  const Node& n = g.nodes[static_cast<size_t>(node)];
  const Node& f = n.forward_node >= 0 ? g.nodes[static_cast<size_t>(n.forward_node)] : n;
  return f.attrs.has("concat_part") || f.attrs.has("from_concat");
}

std::string split_conv_joined_name(const std::string& name) {
  const Mark m = last_mark(name);
  return m.part ? name.substr(0, m.at) + name.substr(m.end) : "";
}

}  // namespace monet
