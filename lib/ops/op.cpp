#include "ops/op.h"

namespace monet {

const Value& InferCtx::in(int i) const {
  if (i < 0 || i >= num_inputs()) fail("input ", i, " missing (has ", num_inputs(), ")");
  return g_.values[node_.inputs[i]];
}

void InferCtx::set_out(int i, Shape shape, DType dtype) {
  if (i < 0 || i >= num_outputs()) fail("output ", i, " not present (has ", num_outputs(), ")");
  for (int64_t d : shape)
    if (d <= 0) fail("output ", i, " would have shape ", shape_str(shape));
  outs_[i]->shape = std::move(shape);
  outs_[i]->dtype = dtype;
  set_[i] = 1;
}

int InferCtx::unset_output() const {
  for (size_t i = 0; i < set_.size(); ++i)
    if (!set_[i]) return static_cast<int>(i);
  return -1;
}

void InferCtx::expect_inputs(int lo, int hi) const {
  if (num_inputs() < lo || num_inputs() > hi) fail("expects ", lo, "..", hi, " inputs, has ", num_inputs());
}

void InferCtx::expect_rank(int i, int lo, int hi) const {
  int r = static_cast<int>(shape(i).size());
  if (r < lo || r > hi) fail("input ", i, " has rank ", r, " (shape ", shape_str(shape(i)), "), expects ", lo, "..", hi);
}

void infer_node(Graph& g, int n) {
  const Node& node = g.nodes[n];
  std::vector<Value*> outs;
  for (int v : node.outputs) outs.push_back(&g.values[v]);
  const OpDef* def = find_op(node.op);
  if (!def) fail("node '", node.name, "': unsupported op type '", node.op, "'");
  InferCtx ctx(g, node, outs);
  def->infer(ctx);
  if (const int i = ctx.unset_output(); i >= 0)
    ctx.fail("output ", i, " ('", g.values[node.outputs[i]].name, "') is not one the op produces (it has ",
             node.outputs.size(), ")");
}

std::vector<ImplDef> impls_of(const Node& n) {
  const OpDef& def = op_def(n.op);
  if (def.impls.empty()) return {ImplDef{"default"}};
  return def.impls;
}

}  // namespace monet
