#include "train/training_graph.h"

#include <cctype>
#include <cmath>
#include <random>
#include <set>

#include "core/error.h"
#include "ir/fuse_linear_loss.h"
#include "ops/op.h"
#include "train/autodiff.h"

namespace monet {

LossKind parse_loss(const std::string& text) {
  if (text == "ce" || text == "cross-entropy" || text == "cross_entropy") return LossKind::cross_entropy;
  if (text == "sum") return LossKind::sum;
  fail("--loss '", text, "': expected 'ce' or 'sum'");
}

const char* loss_name(LossKind k) { return k == LossKind::sum ? "sum" : "cross_entropy"; }

namespace {

int append_node(Graph& g, const std::string& name, const std::string& op, std::vector<int> inputs, Attrs attrs,
                std::vector<Value> outputs) {
  int id = static_cast<int>(g.nodes.size());
  Node n{name, op, std::move(inputs), {}, std::move(attrs), -1};
  for (Value& v : outputs) {
    v.producer = id;
    n.outputs.push_back(g.add_value(std::move(v)));
  }
  g.nodes.push_back(std::move(n));
  infer_node(g, id);
  return id;
}

// Moves each SgdUpdate (appended at the end) to right after the last node that reads its parameter or produces
// its gradient. The update changes the parameter in place, so nothing may read it afterwards; with every update
// at the end (PyTorch's order) all parameter gradients would be live at once, a floor no schedule can go under.
// Backward runs in reverse forward order, so no later step recomputes a node that reads an updated parameter;
// the simulator refuses any schedule that would.
void place_updates_early(Graph& g) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> last_touch(g.values.size(), -1);
  std::vector<int> updates;
  for (int i = 0; i < n; ++i) {
    if (g.nodes[i].op == "SgdUpdate") {
      updates.push_back(i);
      continue;
    }
    for (int v : g.nodes[i].inputs) last_touch[v] = i;
    for (int v : g.nodes[i].outputs) last_touch[v] = i;
  }
  std::vector<std::vector<int>> after(n);  // node -> updates placed right after it
  for (int u : updates) {
    const Node& node = g.nodes[u];
    after[std::max(last_touch[node.inputs[0]], last_touch[node.inputs[1]])].push_back(u);
  }
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    if (g.nodes[i].op == "SgdUpdate") continue;
    order.push_back(i);
    order.insert(order.end(), after[i].begin(), after[i].end());
  }
  std::vector<int> new_index(n);
  std::vector<Node> nodes;
  for (int i : order) {
    new_index[i] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(g.nodes[i]));
  }
  for (Value& v : g.values)
    if (v.producer >= 0) v.producer = new_index[v.producer];
  for (Node& node : nodes)
    if (node.forward_node >= 0) node.forward_node = new_index[node.forward_node];
  g.nodes = std::move(nodes);
}

}  // namespace

TrainingGraph build_training_graph(Graph forward, const TrainOptions& options) {
  TrainingGraph tg;
  tg.options = options;
  Graph& g = tg.graph;
  g = std::move(forward);
  tg.forward_end = static_cast<int>(g.nodes.size());
  if (g.outputs.empty()) fail("model has no output to put a loss on");
  const int out = g.outputs[0];
  const Value& y = g.values[out];

  // Loss on the first model output.
  Value loss;
  loss.name = "loss";
  if (options.loss == LossKind::cross_entropy) {
    if (y.shape.size() < 2) fail("cross-entropy needs an output of rank >= 2 (N, C, ...), output '", y.name, "' is ",
                                 shape_str(y.shape), "; use --loss sum");
    // Classes on dim 1 (N, C, ...), as vision models have them; a model of token ids (an integer data input) has
    // them last (N, T, V): next-token prediction, token classification.
    const bool tokens = g.values[g.data_input].dtype == DType::i64;
    const int64_t axis = tokens ? static_cast<int64_t>(y.shape.size()) - 1 : 1;
    Value labels;
    labels.name = "labels";
    labels.shape = y.shape;
    labels.shape.erase(labels.shape.begin() + axis);
    labels.dtype = DType::i64;
    labels.role = Role::label;
    tg.labels = g.add_value(labels);
    tg.class_axis = axis;
    // A token model's output MatMul and the loss as one node, the loss node the mean of its rows' terms.
    const std::optional<int> losses = tokens && g.fuse_loss_head ? fuse_linear_loss(g, out, tg.labels) : std::nullopt;
    if (losses) {
      Attrs mean;
      mean.set("keepdims", int64_t{0});
      tg.loss_node = append_node(g, "loss", "ReduceMean", {*losses}, mean, {loss});
    } else {
      Attrs attrs;
      if (axis != 1) attrs.set("axis", axis);
      tg.loss_node = append_node(g, "loss", "SoftmaxCrossEntropy", {out, tg.labels}, attrs, {loss});
    }
  } else {
    tg.loss_node = append_node(g, "loss", "SumLoss", {out}, {}, {loss});
  }
  tg.loss = g.nodes[tg.loss_node].outputs[0];

  // d loss / d loss = 1, a constant.
  Value seed;
  seed.name = "loss/grad_seed";
  seed.role = Role::constant;
  seed.data = {1.0};
  int seed_id = g.add_value(seed);

  mark_requires_grad(g);
  std::map<int, int> grads = append_backward(g, tg.loss_node + 1, {{tg.loss, seed_id}});

  Attrs sgd;
  sgd.set("lr", options.lr);
  sgd.set("momentum", options.momentum);
  for (int p : g.values_with_role(Role::param)) {
    auto it = grads.find(p);
    if (it == grads.end()) continue;
    Value m;
    m.name = g.values[p].name + "/momentum";
    m.shape = g.values[p].shape;
    m.role = Role::momentum;
    int mid = g.add_value(m);
    append_node(g, g.values[p].name + "/sgd", "SgdUpdate", {p, it->second, mid}, sgd, {});
    tg.params.push_back({p, it->second, mid});
  }
  place_updates_early(g);
  g.verify();
  return tg;
}

namespace {

// fan_in as torch.nn.init._calculate_fan_in_and_fan_out computes it for a weight of this role.
int64_t fan_in(const Shape& w, ParamRole role) {
  if (w.empty()) return 1;
  if (role == ParamRole::weight_kn || w.size() == 1) return w[0];
  int64_t f = w[1];
  for (size_t d = 2; d < w.size(); ++d) f *= w[d];
  return f;
}

bool is_weight(const Value& v) { return v.init == ParamRole::weight || v.init == ParamRole::weight_kn; }

// The weight whose fan_in a bias read by node n takes: one n reads itself (Conv, Gemm) or through a view, or a part
// of (a Conv split over its concatenated inputs reads a piece of the weight's Split, lib/ir/split_concat_conv.h),
// else the weight of a MatMul that adds the bias itself (lib/ir/matmul_bias.h) or whose output n adds it to, read
// directly or through a Transpose (torch's Linear without Gemm, y = x W^T + b). -1 when there is none (LayerNorm's
// beta).
int weight_for_bias(const Graph& g, const Node& n) {
  for (int w : n.inputs) {
    if (is_weight(g.values[w])) return w;
    const int split = g.values[w].producer;
    if (split >= 0 && op_def(g.nodes[split].op).view && is_weight(g.values[g.nodes[split].inputs[0]]))
      return g.nodes[split].inputs[0];  // a 1-D Conv's weight unsqueezed (lib/ir/onnx_spatial_1d.cpp)
    if (n.op == "Conv" && split >= 0 && g.nodes[split].attrs.has("from_concat") &&
        is_weight(g.values[g.nodes[split].inputs[0]]))
      return g.nodes[split].inputs[0];
  }
  auto matmul_weight = [&](const Node& mm) {
    int w = mm.inputs[1];
    const int t = g.values[w].producer;
    if (t >= 0 && g.nodes[t].op == "Transpose") w = g.nodes[t].inputs[0];
    return is_weight(g.values[w]) ? w : -1;
  };
  if (n.op == "MatMul" && n.inputs.size() == 3) return matmul_weight(n);
  if (n.op != "Add") return -1;
  for (int x : n.inputs) {
    const int mm = g.values[x].producer;
    if (mm < 0 || g.nodes[mm].op != "MatMul") continue;
    if (const int w = matmul_weight(g.nodes[mm]); w >= 0) return w;
  }
  return -1;
}

}  // namespace

namespace {

// The number of ids an integer data input may take: the smallest table a GatherIdx or GatherElements reads with it
// (its size along the gathered axis), directly or through ops that only move or convert its elements (Unsqueeze, Reshape, ...);
// 0 when neither reads it: it is then a mask.
int64_t index_range(const Graph& g, int input) {
  static const std::set<std::string> kViews = {"Unsqueeze", "Squeeze", "Reshape", "Flatten", "Expand", "Identity",
                                               "Transpose", "Slice", "Cast", "Tile", "Concat"};
  const std::vector<std::vector<int>> readers = g.consumers();
  int64_t range = 0;
  std::vector<int> todo = {input};
  std::set<int> seen = {input};
  while (!todo.empty()) {
    const int v = todo.back();
    todo.pop_back();
    for (int n : readers[static_cast<size_t>(v)]) {
      const Node& node = g.nodes[static_cast<size_t>(n)];
      if ((node.op == "GatherIdx" || node.op == "GatherElements") && node.inputs.size() == 2 &&
          node.inputs[1] == v) {
        const Shape& table = g.values[static_cast<size_t>(node.inputs[0])].shape;
        int64_t axis = node.attrs.i("axis", 0);
        if (axis < 0) axis += static_cast<int64_t>(table.size());
        const int64_t size = table[static_cast<size_t>(axis)];
        range = range == 0 ? size : std::min(range, size);
      } else if (kViews.count(node.op) && g.values[static_cast<size_t>(node.outputs[0])].dtype != DType::f32) {
        for (int out : node.outputs)
          if (seen.insert(out).second) todo.push_back(out);
      }
    }
  }
  return range;
}

// Whether an integer input read as indices holds positions: its name says so, as exports name the input Hugging
// Face's models take ("position_ids"; also "positions", "pos", "pos_ids", any name ending in "position_ids").
bool is_positions(const std::string& name) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto ends_with = [&](const std::string& tail) {
    return lower.size() >= tail.size() && lower.compare(lower.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with("position_ids") || lower == "positions" || lower == "pos" || lower == "pos_ids";
}

// A mask as a padding mask is: each row (the last axis) 1 up to a length drawn in [1, T-1], 0 after it, so that
// either reading (1 = attend, as Hugging Face's attention_mask; 1 = padding, as torch's key_padding_mask) leaves
// every row something to attend to and something masked.
void draw_mask(const Shape& shape, std::mt19937_64& rng, std::vector<double>& x) {
  const int64_t T = shape.empty() ? 1 : shape.back();
  if (T <= 0) return;
  std::uniform_int_distribution<int64_t> pick(1, std::max<int64_t>(1, T - 1));
  for (size_t row = 0; row < x.size() / static_cast<size_t>(T); ++row) {
    const int64_t len = pick(rng);
    for (int64_t t = 0; t < T; ++t) x[row * static_cast<size_t>(T) + static_cast<size_t>(t)] = t < len ? 1.0 : 0.0;
  }
}

}  // namespace

std::vector<std::vector<double>> initial_values(const TrainingGraph& tg, uint64_t seed) {
  const Graph& g = tg.graph;
  std::vector<std::vector<double>> out(g.values.size());
  std::mt19937_64 rng(seed);

  // Each bias takes the fan_in of its weight (weight_for_bias); 0 = none, the bias starts at zeros.
  std::vector<int64_t> bias_fan_in(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (int v : n.inputs)
      if (g.values[v].init == ParamRole::bias)
        if (int w = weight_for_bias(g, n); w >= 0) bias_fan_in[v] = fan_in(g.values[w].shape, g.values[w].init);

  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    if (!is_persistent(val.role)) continue;
    const size_t n = static_cast<size_t>(numel(val.shape));
    std::vector<double>& x = out[v];
    if (!val.data.empty()) {
      if (val.role == Role::input && val.dtype != DType::f32)
        if (const int64_t range = index_range(g, static_cast<int>(v)); range > 0)
          for (size_t i = 0; i < val.data.size(); ++i)
            if (val.data[i] < 0 || val.data[i] >= static_cast<double>(range))
              fail("data input '", val.name, "' (its --input file) element ", i, " is ", val.data[i],
                   ", outside the embedding table it indexes (ids 0 to ", range - 1, ")");
      x = val.data;
      continue;
    }
    x.assign(n, 0.0);
    auto uniform = [&](double bound) {
      std::uniform_real_distribution<double> u(-bound, bound);
      for (double& e : x) e = u(rng);
    };
    switch (val.role) {
      case Role::input: {
        if (val.dtype != DType::f32) {  // ids within every embedding table the input indexes, else a mask
          if (const int64_t range = index_range(g, static_cast<int>(v)); range > 0 && is_positions(val.name)) {
            // Position ids: 0, 1, ... along the last axis (the table's last row where the axis is longer).
            const int64_t T = val.shape.empty() ? 1 : val.shape.back();
            for (size_t i = 0; i < x.size(); ++i)
              x[i] = static_cast<double>(std::min<int64_t>(static_cast<int64_t>(i) % std::max<int64_t>(T, 1), range - 1));
          } else if (range > 0) {
            std::uniform_int_distribution<int64_t> pick(0, range - 1);
            for (double& e : x) e = static_cast<double>(pick(rng));
          } else {
            draw_mask(val.shape, rng, x);
          }
          break;
        }
        std::normal_distribution<double> normal(0.0, 1.0);
        for (double& e : x) e = normal(rng);
        break;
      }
      case Role::label: {
        const int64_t classes = g.values[g.outputs[0]].shape[static_cast<size_t>(tg.class_axis)];
        std::uniform_int_distribution<int64_t> pick(0, classes - 1);
        for (double& e : x) e = static_cast<double>(pick(rng));
        break;
      }
      case Role::param:
      case Role::buffer:
        switch (val.init) {
          case ParamRole::weight:
          case ParamRole::weight_kn: uniform(1.0 / std::sqrt(static_cast<double>(fan_in(val.shape, val.init)))); break;
          case ParamRole::bias:
            if (bias_fan_in[v] > 0) uniform(1.0 / std::sqrt(static_cast<double>(bias_fan_in[v])));
            break;
          case ParamRole::ones:
          case ParamRole::running_var: std::fill(x.begin(), x.end(), 1.0); break;
          case ParamRole::small_normal: {
            std::normal_distribution<double> normal(0.0, 0.02);
            for (double& e : x) e = normal(rng);
            break;
          }
          default: break;  // zeros, running_mean
        }
        break;
      default: break;  // momentum starts at 0; constants always carry data
    }
  }
  return out;
}

}  // namespace monet
