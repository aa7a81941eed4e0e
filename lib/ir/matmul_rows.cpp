// The MatMul-rows rewrite (matmul_rows.h has the Before/After).
#include "ir/matmul_rows.h"

#include <algorithm>
#include <optional>
#include <set>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet {

namespace {

// A's rows through a Transpose before the product (matmul_rows.h, "Before/After" 1).
int input_rows(Graph& g) {
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

// The product's attributes as a MatMul (trans_b for a Gemm's transB), or nullopt where the node is no row-wise
// product of A's rows with a 2-D B plus an optional bias per column: a MatMul without a_perm and with a 2-D B, or a
// Gemm with alpha 1, A not transposed, and C absent or a bias added with beta 1.
std::optional<Attrs> product_attrs(const Graph& g, const Node& n, GemmAsMatMul gemm) {
  if (n.inputs.size() < 2 || g.values[n.inputs[1]].shape.size() != 2) return std::nullopt;
  if (n.op == "MatMul") {
    if (n.attrs.has("a_perm")) return std::nullopt;
    return n.attrs;
  }
  if (n.op != "Gemm" || n.attrs.f("alpha", 1.0) != 1.0 || n.attrs.i("transA", 0) != 0) return std::nullopt;
  const bool trans_b = n.attrs.i("transB", 0) != 0;
  if ((trans_b && !gemm.trans_b) || (n.inputs.size() == 3 && !gemm.bias)) return std::nullopt;
  if (n.inputs.size() == 3) {
    const Value& c = g.values[n.inputs[2]];
    if (n.attrs.f("beta", 1.0) != 1.0 || c.dtype != DType::f32 ||
        !ops::matmul_bias_fits(c.shape, g.values[n.outputs[0]].shape, g.values[n.inputs[1]].shape))
      return std::nullopt;
  }
  Attrs a;
  if (trans_b) a.set("trans_b", int64_t{1});
  return a;
}

// A Transpose after the product and a Reshape that splits its rows (matmul_rows.h, "Before/After" 2).
int output_rows(Graph& g, GemmAsMatMul gemm) {
  const std::vector<std::vector<int>> readers = g.consumers();
  const std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  std::vector<char> drop_node(g.nodes.size(), 0), drop_value(g.values.size(), 0);
  // The only reader of value v, where v is no graph output and that reader is `op` reading it once.
  auto only_reader = [&](int v, const char* op) {
    if (outputs.count(v) || readers[v].size() != 1) return -1;
    const Node& r = g.nodes[readers[v][0]];
    return r.op == op && r.inputs.size() == 1 ? readers[v][0] : -1;
  };
  int made = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (drop_node[n]) continue;
    const std::optional<Attrs> attrs = product_attrs(g, g.nodes[n], gemm);
    if (!attrs) continue;
    const int y = g.nodes[n].outputs[0];
    if (g.values[y].dtype != DType::f32) continue;
    const int r = only_reader(y, "Reshape");
    if (r < 0) continue;
    const int split = g.nodes[r].outputs[0];
    const int t = only_reader(split, "Transpose");
    if (t < 0) continue;
    const Shape& s = g.values[split].shape;  // the product's rows split, its columns last
    const std::vector<int64_t> perm = ops::transpose_perm(g.nodes[t].attrs, s.size());
    if (s.empty() || s.back() != g.values[y].shape.back() || !ops::row_swap(s, perm)) continue;
    // A with the product's rows split as the Reshape splits them (K columns), through a Reshape before A's own
    // where A is a Reshape's output read by the product alone.
    int a = g.nodes[n].inputs[0];
    Shape want(s.begin(), s.end() - 1);
    want.push_back(g.values[a].shape.back());
    const int a_from = g.values[a].producer;
    const std::vector<int>& product_in = g.nodes[n].inputs;
    if (g.values[a].shape != want && a_from >= 0 && !outputs.count(a) && readers[a].size() == 1 &&
        std::count(product_in.begin(), product_in.end(), a) == 1 && g.nodes[a_from].op == "Reshape" &&
        g.nodes[a_from].inputs.size() == 1) {
      drop_node[a_from] = 1;
      drop_value[a] = 1;
      a = g.nodes[a_from].inputs[0];
    }
    Node product = g.nodes[n];
    product.op = "MatMul";
    product.attrs = *attrs;
    product.attrs.set("a_perm", perm);
    product.outputs = {g.nodes[t].outputs[0]};
    drop_node[t] = 1;
    drop_value[y] = 1;
    if (g.values[a].shape == want) {  // A already has those rows: the product at its place reads it
      product.inputs[0] = a;
      g.nodes[n] = std::move(product);
      drop_node[r] = 1;
      drop_value[split] = 1;
    } else {  // the Reshape (its node and value) moves to the product's place, the product to the Reshape's
      Node reshape = g.nodes[r];
      reshape.inputs = {a};
      reshape.attrs = Attrs{};
      reshape.attrs.set("shape", want);
      g.values[split].shape = want;
      product.inputs[0] = split;
      g.nodes[n] = std::move(reshape);
      g.nodes[r] = std::move(product);
    }
    ++made;
  }
  if (made > 0) g.remove(drop_node, drop_value);
  return made;
}

}  // namespace

int matmul_rows(Graph& g, GemmAsMatMul gemm) { return output_rows(g, gemm) + input_rows(g); }

const char* matmul_rows_mode(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.op == "MatMul" && n.attrs.has("a_perm")) return "fused";
  return "separate";
}

}  // namespace monet
