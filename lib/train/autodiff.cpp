#include "train/autodiff.h"

#include "ops/op.h"

namespace monet {

void mark_requires_grad(Graph& g) {
  for (Value& v : g.values)
    if (v.role == Role::param) v.requires_grad = true;
  for (const Node& node : g.nodes) {
    bool any = false;
    for (int v : node.inputs) any = any || g.values[v].requires_grad;
    for (int v : node.outputs)
      g.values[v].requires_grad = any && g.values[v].dtype == DType::f32;
  }
}

namespace {

class Builder final : public GradBuilder {
 public:
  Builder(Graph& g, std::map<int, int>& grads, int forward_node)
      : g_(g), grads_(grads), fwd_(forward_node), node_(g.nodes[forward_node]) {}

  const Node& node() const override { return node_; }
  Value value(int id) const override { return g_.values.at(id); }

  int grad_out(int i) const override {
    auto it = grads_.find(node().outputs.at(i));
    return it == grads_.end() ? -1 : it->second;
  }

  bool needs_grad(int i) const override { return g_.values[node().inputs.at(i)].requires_grad; }

  std::vector<int> emit(const std::string& op, const std::vector<int>& inputs, Attrs attrs,
                        int num_outputs) override {
    Node n;
    n.name = node().name + "/grad/" + op + std::to_string(emitted_++);
    n.op = op;
    n.inputs = inputs;
    n.attrs = std::move(attrs);
    n.forward_node = fwd_;
    int id = static_cast<int>(g_.nodes.size());
    for (int k = 0; k < num_outputs; ++k) {
      Value v;
      v.name = n.name + ":" + std::to_string(k);
      v.role = Role::gradient;
      v.producer = id;
      n.outputs.push_back(g_.add_value(std::move(v)));
    }
    g_.nodes.push_back(std::move(n));
    infer_node(g_, id);
    return g_.nodes[id].outputs;
  }

  void set_grad(int i, int grad_value) override {
    int v = node().inputs.at(i);
    if (!g_.values[v].requires_grad) return;
    if (g_.values.at(grad_value).shape != g_.values[v].shape)
      fail("node '", node().name, "' (", node().op, "): gradient of input ", i, " has shape ",
           shape_str(g_.values[grad_value].shape), ", input has ", shape_str(g_.values[v].shape));
    auto it = grads_.find(v);
    if (it == grads_.end()) {
      grads_[v] = grad_value;
    } else {
      it->second = emit1("Sum", {it->second, grad_value});
    }
  }

 private:
  Graph& g_;
  std::map<int, int>& grads_;
  int fwd_;
  const Node node_;  // a copy: emit() may reallocate g_.nodes
  int emitted_ = 0;
};

}  // namespace

std::map<int, int> append_backward(Graph& g, int forward_end, const std::map<int, int>& seeds) {
  std::map<int, int> grads = seeds;
  for (int n = forward_end - 1; n >= 0; --n) {
    const OpDef& def = op_def(g.nodes[n].op);
    bool flows = false;
    for (int v : g.nodes[n].outputs) flows = flows || grads.count(v);
    bool wanted = false;
    for (int v : g.nodes[n].inputs) wanted = wanted || g.values[v].requires_grad;
    if (!flows || !wanted) continue;
    if (!def.backward) fail("node '", g.nodes[n].name, "' (", g.nodes[n].op, "): op has no gradient");
    Builder b(g, grads, n);
    def.backward(b);
  }
  std::map<int, int> out;
  for (auto [v, gv] : grads)
    if (g.values[v].requires_grad) out[v] = gv;
  return out;
}

}  // namespace monet
