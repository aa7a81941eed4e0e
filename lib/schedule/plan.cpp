#include "schedule/plan.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "schedule/schedule.h"

namespace monet {

std::string algorithm_name(int algo) {
  if (algo == kOwnAlgorithm) return "ours";
  if (algo < kBatchSlices) return "cudnn" + std::to_string(algo);
  return "cudnn" + std::to_string(algo % kBatchSlices) + "/" + std::to_string(algo / kBatchSlices);
}

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::forward: return "forward";
    case Stage::loss: return "loss";
    case Stage::backward: return "backward";
    case Stage::update: return "update";
  }
  return "?";
}

Stage parse_stage(const std::string& s) {
  for (Stage st : {Stage::forward, Stage::loss, Stage::backward, Stage::update})
    if (s == stage_name(st)) return st;
  fail("unknown stage '", s, "'");
}

const std::string& PlanNode::impl_name(int impl) const {
  static const std::string kDefault = "default";
  return impls.empty() ? kDefault : impls.at(impl).name;
}

int PlanNode::find_impl(const std::string& n) const {
  if (impls.empty()) return n == "default" ? 0 : -1;
  for (size_t i = 0; i < impls.size(); ++i)
    if (impls[i].name == n) return static_cast<int>(i);
  return -1;
}

bool PlanNode::has_algorithms() const {
  for (const PlanImpl& i : impls)
    if (i.algo >= 0) return true;
  return false;
}

int PlanNode::impl_for(int op, int a) const {
  for (int i = 0; i < num_impls(); ++i)
    if (op_impl(i) == op && algo(i) == a) return i;
  if (a >= 0 && !has_algorithms() && op >= 0 && op < num_impls()) return op;
  return -1;
}

std::vector<char> lean_nodes(const PlanGraph& p, const std::vector<char>& read) {
  std::vector<char> lean(p.nodes.size(), 0);
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    const std::vector<int>& optional = p.nodes[n].optional_outputs;
    lean[n] = !optional.empty() && std::none_of(optional.begin(), optional.end(), [&](int v) { return read[v] != 0; });
  }
  return lean;
}

void PlanNode::set_impl_ms(int impl, double ms) {
  if (impl == 0) time_ms = ms;
  if (!impls.empty()) impls.at(impl).time_ms = ms;
}

int64_t PlanGraph::resident_bytes() const {
  int64_t total = 0;
  for (const PlanValue& v : values)
    if (v.resident) total += v.bytes;
  return total;
}

int PlanGraph::find_node(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

int PlanGraph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

// FNV-1a, 64 bit: stable across platforms and runs.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

void print_attr(std::ostream& out, const AttrValue& a) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
          for (auto x : v) out << x << ',';
        } else {
          out << v;
        }
      },
      a);
}

}  // namespace

std::string fingerprint(const TrainingGraph& tg) {
  const Graph& g = tg.graph;
  std::ostringstream out;
  out.precision(17);
  out << "monet-fp-1|" << loss_name(tg.options.loss) << '|';
  for (const Value& v : g.values)
    out << v.name << ':' << shape_str(v.shape) << ':' << dtype_name(v.dtype) << ':' << role_name(v.role) << '|';
  for (const Node& n : g.nodes) {
    out << n.name << ':' << n.op << '(';
    for (int v : n.inputs) out << v << ',';
    out << ")->(";
    for (int v : n.outputs) out << v << ',';
    out << ')';
    // The optimizer's hyperparameters (lr, momentum) change neither sizes nor dependencies: one schedule serves
    // every learning rate.
    if (n.op == "SgdUpdate") {
      out << '|';
      continue;
    }
    for (const auto& [k, a] : n.attrs.all()) {
      out << k << '=';
      print_attr(out, a);
      out << ';';
    }
    out << '|';
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(out.str())));
  return hex;
}

PlanGraph make_plan_graph(const TrainingGraph& tg, const WorkspaceFn& workspace_bytes,
                          int float_bytes, const std::function<double(const Node&)>& time_ms) {
  const Graph& g = tg.graph;
  PlanGraph p = plan_of(g, workspace_bytes, float_bytes);
  p.fingerprint = fingerprint(tg);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const int i = static_cast<int>(n);
    PlanNode& pn = p.nodes[n];
    pn.stage = i < tg.forward_end ? Stage::forward
               : i == tg.loss_node ? Stage::loss
               : g.nodes[n].op == "SgdUpdate" ? Stage::update
                                              : Stage::backward;
    const double ms = time_ms ? time_ms(g.nodes[n]) : 0.0;
    for (int i = 0; i < pn.num_impls(); ++i) pn.set_impl_ms(i, ms);
  }
  return p;
}

}  // namespace monet
