// The attention fusion (fuse_attention.h has the Before/After): match on the imported graph, then rebuild it
// without the fused nodes and their intermediate values.
#include "ir/fuse_attention.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "core/error.h"
#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet {
namespace {

struct Match {
  int first_matmul = -1, scale_node = -1, mask_add = -1, softmax = -1, last_matmul = -1;
  int q = -1, kt = -1, v = -1, mask = -1;
  double scale = 1;
  bool divides = false;
  // Strided mode: the Transposes and scalar Mul/Div nodes taken into the Attention (dropped with their outputs),
  // each operand's layout, and the value O ends in (the last matmul's output, or the last Transpose's after it).
  bool strided = false;
  std::vector<int> absorbed;
  std::vector<int64_t> q_perm, kt_perm, v_perm, o_perm;
  int o_value = -1;
  // A masked_fill (Where(c, -inf, S) or Where(c, S, -inf), c constant) in the mask_add position: its additive form
  // (-inf where the scores are replaced, else 0), a new constant of c's shape, is the mask.
  std::optional<Value> fill_mask;
};

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), readers_(g.consumers()) {
    for (int v : g.outputs) is_output_.insert(v);
  }

  // strided: take the operands' Transposes and scalar scales in (fuse_attention.h).
  std::optional<Match> at_softmax(int n, bool strided) const {
    const Node& sm = g_.nodes[n];
    const Value& p = g_.values[sm.outputs[0]];
    const int64_t rank = static_cast<int64_t>(p.shape.size());
    const int64_t axis = sm.attrs.i("axis", -1);
    if (rank < 2 || (axis != -1 && axis != rank - 1)) return {};
    Match m;
    m.softmax = n;
    m.strided = strided;
    m.last_matmul = only_reader(sm.outputs[0], "MatMul");
    if (m.last_matmul < 0 || g_.nodes[m.last_matmul].inputs[0] != sm.outputs[0]) return {};
    m.v = g_.nodes[m.last_matmul].inputs[1];
    // Walk back: [Add mask] <- [Mul | Div by a scalar] <- MatMul.
    int x = sm.inputs[0];
    if (!single_use(x)) return {};
    int prod = g_.values[x].producer;
    if (prod >= 0 && g_.nodes[prod].op == "Where") {
      const Node& w = g_.nodes[prod];
      const Value& c = g_.values[w.inputs[0]];
      const std::optional<double> a = scalar(w.inputs[1]), b = scalar(w.inputs[2]);
      // The scores' operand: the one that is not the constant -inf.
      const int scores = a && *a == -HUGE_VAL ? 2 : b && *b == -HUGE_VAL ? 1 : -1;
      if (scores < 0 || c.role != Role::constant || c.data.size() != static_cast<size_t>(numel(c.shape))) return {};
      Value mask;
      mask.name = g_.values[w.outputs[0]].name + "/additive_mask";
      mask.shape = c.shape;
      mask.role = Role::constant;
      mask.data.resize(c.data.size());
      for (size_t i = 0; i < c.data.size(); ++i)  // -inf where Where takes the fill
        mask.data[i] = (c.data[i] != 0) == (scores == 2) ? -HUGE_VAL : 0.0;
      m.mask_add = prod;
      m.fill_mask = std::move(mask);
      x = w.inputs[scores];
      if (!single_use(x)) return {};
      prod = g_.values[x].producer;
    } else if (prod >= 0 && g_.nodes[prod].op == "Add") {
      const Node& add = g_.nodes[prod];
      const int chain = chain_operand(add);
      if (chain < 0) return {};
      m.mask_add = prod;
      m.mask = add.inputs[1 - chain];
      x = add.inputs[chain];
      if (!single_use(x)) return {};
      prod = g_.values[x].producer;
    }
    if (prod >= 0 && (g_.nodes[prod].op == "Mul" || g_.nodes[prod].op == "Div")) {
      const Node& sc = g_.nodes[prod];
      const bool div = sc.op == "Div";
      int operand = -1;
      for (int i = 0; i < 2 && operand < 0; ++i)
        if ((i == 0 || !div) && scalar(sc.inputs[1 - i]) && produced_by_matmul(sc.inputs[i])) operand = i;
      if (operand < 0) return {};
      m.scale_node = prod;
      m.scale = *scalar(sc.inputs[1 - operand]);
      m.divides = div;
      x = sc.inputs[operand];
      if (!single_use(x)) return {};
      prod = g_.values[x].producer;
    }
    if (prod < 0 || g_.nodes[prod].op != "MatMul") return {};
    m.first_matmul = prod;
    m.q = g_.nodes[prod].inputs[0];
    m.kt = g_.nodes[prod].inputs[1];
    m.o_value = g_.nodes[m.last_matmul].outputs[0];
    if (strided) absorb_layouts(m);
    if (!(m.scale != 0 && std::isfinite(m.scale))) return {};
    for (int v : {m.q, m.kt, m.v, m.mask})
      if (v >= 0 && g_.values[v].dtype != DType::f32) return {};
    if (m.mask >= 0 && depends_on_param(m.mask)) return {};
    // No operand may be one of the values the fusion removes or makes (MatMul(P, P), a mask read from the scores).
    std::vector<int> inner = {g_.nodes[m.first_matmul].outputs[0], sm.outputs[0]};
    for (int n : {m.scale_node, m.mask_add})
      if (n >= 0) inner.push_back(g_.nodes[n].outputs[0]);
    for (int n : m.absorbed) inner.push_back(g_.nodes[n].outputs[0]);
    if (m.o_value != g_.nodes[m.last_matmul].outputs[0]) inner.push_back(g_.nodes[m.last_matmul].outputs[0]);
    for (int v : {m.q, m.kt, m.v, m.mask})
      if (std::find(inner.begin(), inner.end(), v) != inner.end()) return {};
    return m;
  }

 private:
  // Walks back from Q and Kt through Transposes and scalar Mul/Div (Q and Kt only: a scale of V is no scale of the
  // scores), from V through Transposes, and forward from O through Transposes, while each value passed is read by
  // the next node alone and the layout keeps the rows or the columns innermost. Scales join the scores' scale.
  void absorb_layouts(Match& m) const {
    const size_t rank = g_.values[m.q].shape.size();
    std::vector<int64_t> identity(rank);
    for (size_t i = 0; i < rank; ++i) identity[i] = static_cast<int64_t>(i);
    double mul = m.divides ? 1.0 : m.scale, div = m.divides ? m.scale : 1.0;
    bool any_mul = !m.divides && m.scale_node >= 0, any_div = m.divides;
    auto back = [&](int& x, std::vector<int64_t>& perm, bool scales) {
      perm = identity;
      while (single_use(x)) {
        const int prod = g_.values[x].producer;
        if (prod < 0) return;
        const Node& node = g_.nodes[prod];
        if (node.op == "Transpose") {
          if (!through(transpose_perm(node, rank), perm)) return;
          x = node.inputs[0];
        } else if (scales && (node.op == "Mul" || node.op == "Div") && node.inputs.size() == 2) {
          const bool is_div = node.op == "Div";
          int operand = -1;
          for (int i = 0; i < 2 && operand < 0; ++i)
            if ((i == 0 || !is_div) && scalar(node.inputs[1 - i]) &&
                g_.values[node.inputs[i]].shape == g_.values[x].shape)
              operand = i;
          if (operand < 0) return;
          const double c = *scalar(node.inputs[1 - operand]);
          if (!(c != 0 && std::isfinite(c))) return;
          (is_div ? div : mul) *= c;
          (is_div ? any_div : any_mul) = true;
          x = node.inputs[operand];
        } else if (node.op == "Reshape") {
          // Reshape, Transpose of the last two dims, Reshape back (the dynamo exporter's K^T over merged batch
          // dims): the Transpose of the last two dims of the first Reshape's input.
          std::vector<int> between;
          const int y = last_two_swapped(prod, between);
          if (y < 0 || !through(swap_last_two(rank), perm)) return;
          x = y;
          m.absorbed.insert(m.absorbed.end(), between.begin(), between.end());
        } else {
          return;
        }
        m.absorbed.push_back(prod);
      }
    };
    back(m.q, m.q_perm, true);
    back(m.kt, m.kt_perm, true);
    back(m.v, m.v_perm, false);
    // O: canonical dim i is dim o_perm[i] of the stored value; a Transpose t after it moves dim j of its input
    // to dim i where t[i] = j.
    m.o_perm = identity;
    while (single_use(m.o_value)) {
      const int r = readers_[m.o_value][0];
      const Node& node = g_.nodes[r];
      if (node.op != "Transpose") break;
      const std::vector<int64_t> t = transpose_perm(node, rank);
      if (t.empty()) break;
      std::vector<int64_t> inverse(rank), composed(rank);
      for (size_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(t[i])] = static_cast<int64_t>(i);
      for (size_t i = 0; i < rank; ++i) composed[i] = inverse[static_cast<size_t>(m.o_perm[i])];
      if (!unit_inner(composed)) break;
      m.o_perm = composed;
      m.absorbed.push_back(r);
      m.o_value = node.outputs[0];
    }
    // One factor: a quotient where every scale divides (BERT's Q / sqrt(d): the same bits as before), else a product.
    if (any_div && !any_mul) {
      m.scale = div;
      m.divides = true;
    } else {
      m.scale = mul / div;
      m.divides = false;
    }
  }

  // Where Reshape `r2` reads a Transpose of the last two dims of a Reshape of y, each value between read by the next
  // node alone, and both Reshapes only regroup the leading dims (y and r2's output agree on them, and every
  // value keeps its last two dims, swapped by the Transpose): y, with the Transpose and the first Reshape in
  // `between`. Else -1. The three are then the one Transpose of y that swaps its last two dims.
  int last_two_swapped(int r2, std::vector<int>& between) const {
    const Node& reshape2 = g_.nodes[r2];
    if (reshape2.inputs.size() != 1 || !single_use(reshape2.inputs[0])) return -1;
    const int t = g_.values[reshape2.inputs[0]].producer;
    if (t < 0 || g_.nodes[t].op != "Transpose" || g_.nodes[t].inputs.size() != 1) return -1;
    const int u = g_.nodes[t].inputs[0];
    const int r1 = g_.values[u].producer;
    if (!single_use(u) || r1 < 0 || g_.nodes[r1].op != "Reshape" || g_.nodes[r1].inputs.size() != 1) return -1;
    const int y = g_.nodes[r1].inputs[0];
    const Shape &xs = g_.values[reshape2.outputs[0]].shape, &ts = g_.values[reshape2.inputs[0]].shape,
                &us = g_.values[u].shape, &ys = g_.values[y].shape;
    const size_t rank = xs.size(), inner = us.size();
    if (rank < 2 || ys.size() != rank || inner < 2 || ts.size() != inner) return -1;
    if (!std::equal(xs.begin(), xs.end() - 2, ys.begin())) return -1;
    if (ys[rank - 2] != xs[rank - 1] || ys[rank - 1] != xs[rank - 2]) return -1;
    if (us[inner - 2] != ys[rank - 2] || us[inner - 1] != ys[rank - 1]) return -1;
    if (ts[inner - 2] != xs[rank - 2] || ts[inner - 1] != xs[rank - 1]) return -1;
    if (ops::transpose_perm(g_.nodes[t].attrs, inner) != swap_last_two(inner)) return -1;
    between = {t, r1};
    return y;
  }

  // The layout `perm` read through a Transpose `t` (empty: none to read through), where the rows or the columns
  // stay innermost.
  static bool through(const std::vector<int64_t>& t, std::vector<int64_t>& perm) {
    if (t.empty()) return false;
    std::vector<int64_t> composed(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) composed[i] = t[static_cast<size_t>(perm[i])];
    if (!unit_inner(composed)) return false;
    perm = composed;
    return true;
  }

  // The perm of rank `rank` that swaps the last two dims.
  static std::vector<int64_t> swap_last_two(size_t rank) {
    std::vector<int64_t> p(rank);
    for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(i);
    std::swap(p[rank - 2], p[rank - 1]);
    return p;
  }

  // A Transpose's perm, or empty where its input is not of rank `rank`.
  std::vector<int64_t> transpose_perm(const Node& node, size_t rank) const {
    if (node.inputs.size() != 1 || g_.values[node.inputs[0]].shape.size() != rank) return {};
    return ops::transpose_perm(node.attrs, rank);
  }

  // The rows (dim rank-2) or the columns (rank-1) of the operand are the stored tensor's innermost dim.
  static bool unit_inner(const std::vector<int64_t>& perm) {
    const int64_t last = static_cast<int64_t>(perm.size()) - 1;
    return perm[perm.size() - 1] == last || perm[perm.size() - 2] == last;
  }

  bool single_use(int v) const { return !is_output_.count(v) && readers_[v].size() == 1; }

  int only_reader(int v, const char* op) const {
    if (!single_use(v)) return -1;
    const int r = readers_[v][0];
    return g_.nodes[r].op == op ? r : -1;
  }

  bool produced_by_matmul(int v) const {
    const int p = g_.values[v].producer;
    return p >= 0 && g_.nodes[p].op == "MatMul";
  }

  // Which operand of the mask's Add carries the scores: the one made by the scale node or the first MatMul.
  int chain_operand(const Node& add) const {
    if (add.inputs.size() != 2) return -1;
    for (int i = 0; i < 2; ++i) {
      const int p = g_.values[add.inputs[i]].producer;
      if (p < 0) continue;
      const std::string& op = g_.nodes[p].op;
      if (op == "MatMul" || ((op == "Mul" || op == "Div") && single_use(add.inputs[i]))) {
        const int other = g_.values[add.inputs[1 - i]].producer;
        // Both operands scores-like (e.g. two attention maps summed): not this pattern.
        if (other >= 0 && g_.nodes[other].op == "MatMul" && op == "MatMul") return -1;
        return i;
      }
    }
    return -1;
  }

  std::optional<double> scalar(int v) const {
    const Value& val = g_.values[v];
    if (val.role != Role::constant || val.data.size() != 1 || numel(val.shape) != 1) return {};
    return val.data[0];
  }

  bool depends_on_param(int v) const {
    std::vector<int> stack = {v};
    std::vector<char> seen(g_.values.size(), 0);
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      if (seen[x]) continue;
      seen[x] = 1;
      const Value& val = g_.values[x];
      if (val.role == Role::param || val.requires_grad) return true;
      if (val.producer >= 0)
        for (int in : g_.nodes[val.producer].inputs) stack.push_back(in);
    }
    return false;
  }

  const Graph& g_;
  std::vector<std::vector<int>> readers_;
  std::set<int> is_output_;
};

// The operands' layouts of a strided match (every one, the identity too: attention_mode() reads them).
void set_layouts(Attrs& a, const Match& m) {
  a.set("q_perm", m.q_perm);
  a.set("kt_perm", m.kt_perm);
  a.set("v_perm", m.v_perm);
  a.set("o_perm", m.o_perm);
}

// The graph without the matched nodes, each match's last MatMul replaced by its Attention node.
Graph rebuild(const Graph& g, const std::vector<Match>& matches) {
  std::vector<char> drop_node(g.nodes.size(), 0), drop_value(g.values.size(), 0);
  std::vector<const Match*> attention_at(g.nodes.size(), nullptr);
  for (const Match& m : matches) {
    for (int n : {m.first_matmul, m.scale_node, m.mask_add})
      if (n >= 0) {
        drop_node[n] = 1;
        drop_value[g.nodes[n].outputs[0]] = 1;
      }
    for (int n : m.absorbed) {
      drop_node[n] = 1;
      drop_value[g.nodes[n].outputs[0]] = 1;
    }
    drop_node[m.softmax] = 1;  // its output stays: it is the Attention's P
    attention_at[m.last_matmul] = &m;
    if (m.o_value != g.nodes[m.last_matmul].outputs[0]) {
      drop_value[g.nodes[m.last_matmul].outputs[0]] = 1;
      drop_value[m.o_value] = 0;  // O's value: the last absorbed Transpose's output
    }
  }
  Graph out;
  out.model_name = g.model_name;
  std::vector<int> id(g.values.size(), -1);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (!drop_value[v]) id[v] = out.add_value(g.values[v]);
  std::vector<int> fill_mask_id(g.nodes.size(), -1);  // by last MatMul: the new additive mask of a masked_fill
  for (const Match& m : matches)
    if (m.fill_mask) fill_mask_id[m.last_matmul] = out.add_value(*m.fill_mask);
  auto ids = [&](const std::vector<int>& vs) {
    std::vector<int> r;
    for (int v : vs) r.push_back(id.at(v));
    return r;
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (drop_node[n]) continue;
    Node node = g.nodes[n];
    if (const Match* m = attention_at[n]) {
      Value lse;
      const Value& p = g.values[g.nodes[m->softmax].outputs[0]];
      lse.name = p.name + "/lse";
      lse.role = Role::activation;
      node.op = "Attention";
      node.attrs = Attrs();
      node.attrs.set("scale", m->scale);
      node.attrs.set("scale_divides", int64_t{m->divides ? 1 : 0});
      if (m->strided) set_layouts(node.attrs, *m);
      node.inputs = {m->q, m->kt, m->v};
      if (m->mask >= 0) node.inputs.push_back(m->mask);
      node.outputs = {m->o_value, g.nodes[m->softmax].outputs[0]};
      node.inputs = ids(node.inputs);
      if (fill_mask_id[n] >= 0) node.inputs.push_back(fill_mask_id[n]);
      node.outputs = ids(node.outputs);
      node.outputs.push_back(out.add_value(lse));
    } else {
      node.inputs = ids(node.inputs);
      node.outputs = ids(node.outputs);
    }
    const int index = static_cast<int>(out.nodes.size());
    for (int v : node.outputs) out.values[v].producer = index;
    out.nodes.push_back(std::move(node));
    if (attention_at[n]) infer_node(out, index);
  }
  out.data_input = g.data_input >= 0 ? id.at(g.data_input) : -1;
  out.outputs = ids(g.outputs);
  return out;
}

}  // namespace

int fuse_attention(Graph& g, bool strided) {
  const Matcher matcher(g);
  // Shapes: Q, Kt, V and the mask must form one attention (the op's own rule decides, with the layouts).
  auto forms_attention = [&](const Match& m) {
    Node probe;
    probe.name = g.nodes[m.softmax].name;
    probe.op = "Attention";
    if (m.strided) set_layouts(probe.attrs, m);
    try {
      const Shape* mask = m.fill_mask ? &m.fill_mask->shape : m.mask >= 0 ? &g.values[m.mask].shape : nullptr;
      ops::attention_geometry(probe, g.values[m.q].shape, g.values[m.kt].shape, g.values[m.v].shape, mask);
    } catch (const Error&) {
      return false;
    }
    return true;
  };
  std::vector<Match> matches;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (g.nodes[n].op != "Softmax") continue;
    std::optional<Match> m = matcher.at_softmax(static_cast<int>(n), strided);
    if (m && !forms_attention(*m)) m.reset();
    if (!m) continue;
    matches.push_back(*m);
  }
  if (matches.empty()) return 0;
  Graph fused = rebuild(g, matches);
  fused.verify();
  g = std::move(fused);
  return static_cast<int>(matches.size());
}

const char* attention_mode(const Graph& g) {
  const char* mode = "materialized";
  for (const Node& n : g.nodes)
    if (n.op == "Attention") {
      if (n.attrs.has("q_perm")) return "strided";
      mode = "fused";
    }
  return mode;
}

}  // namespace monet
