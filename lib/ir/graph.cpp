#include "ir/graph.h"

#include <numeric>

#include "core/error.h"

namespace monet {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
  }
  return "?";
}

int64_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t element_bytes(DType t, int float_bytes) {
  switch (t) {
    case DType::f32: return float_bytes;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

int64_t tensor_bytes(const Shape& s, DType t, int float_bytes) {
  return align_up(numel(s) * element_bytes(t, float_bytes));
}

const char* role_name(Role r) {
  switch (r) {
    case Role::input: return "input";
    case Role::label: return "label";
    case Role::param: return "param";
    case Role::buffer: return "buffer";
    case Role::constant: return "constant";
    case Role::activation: return "activation";
    case Role::gradient: return "gradient";
    case Role::momentum: return "momentum";
  }
  return "?";
}

bool is_persistent(Role r) {
  return r == Role::input || r == Role::label || r == Role::param || r == Role::buffer || r == Role::constant ||
         r == Role::momentum;
}

const AttrValue& Attrs::get(const std::string& name) const { return map_.at(name); }

template <class T>
static T typed(const std::map<std::string, AttrValue>& map, const std::string& name, const std::optional<T>& dflt,
               const char* want) {
  auto it = map.find(name);
  if (it == map.end()) {
    if (dflt) return *dflt;
    fail("missing attribute '", name, "'");
  }
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  fail("attribute '", name, "' is not ", want);
}

int64_t Attrs::i(const std::string& name, std::optional<int64_t> dflt) const {
  return typed<int64_t>(map_, name, dflt, "an int");
}
double Attrs::f(const std::string& name, std::optional<double> dflt) const {
  auto it = map_.find(name);
  if (it != map_.end())
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  return typed<double>(map_, name, dflt, "a float");
}
double Attrs::scalar(const std::string& name, double dflt) const {
  auto it = map_.find(name);
  if (it == map_.end()) return dflt;
  const AttrValue& v = it->second;
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* ds = std::get_if<std::vector<double>>(&v); ds && ds->size() == 1) return (*ds)[0];
  if (auto* is = std::get_if<std::vector<int64_t>>(&v); is && is->size() == 1) return static_cast<double>((*is)[0]);
  fail("attribute '", name, "' must be a single number");
}
std::vector<int64_t> Attrs::ints(const std::string& name, std::optional<std::vector<int64_t>> dflt) const {
  return typed<std::vector<int64_t>>(map_, name, dflt, "a list of ints");
}
std::vector<double> Attrs::floats(const std::string& name, std::optional<std::vector<double>> dflt) const {
  auto it = map_.find(name);
  if (it != map_.end())
    if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return {v->begin(), v->end()};
  return typed<std::vector<double>>(map_, name, dflt, "a list of floats");
}
std::string Attrs::s(const std::string& name, std::optional<std::string> dflt) const {
  return typed<std::string>(map_, name, dflt, "a string");
}

int Graph::add_value(Value v) {
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

int Graph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<std::vector<int>> Graph::consumers() const {
  std::vector<std::vector<int>> out(values.size());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int v : nodes[n].inputs)
      if (out[v].empty() || out[v].back() != static_cast<int>(n)) out[v].push_back(static_cast<int>(n));
  return out;
}

std::vector<int> Graph::values_with_role(Role r) const {
  std::vector<int> out;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].role == r) out.push_back(static_cast<int>(i));
  return out;
}

void Graph::drop_values(const std::vector<char>& drop) {
  MONET_CHECK(drop.size() == values.size(), "drop_values: ", drop.size(), " flags for ", values.size(), " values");
  std::vector<int> id(values.size(), -1);
  int next = 0;
  for (size_t v = 0; v < values.size(); ++v)
    if (!drop[v]) id[v] = next++;
  auto map = [&](int v) { return id[static_cast<size_t>(v)]; };
  auto named = [&](int v) {  // checked before anything changes
    MONET_CHECK(v >= 0 && static_cast<size_t>(v) < values.size() && id[static_cast<size_t>(v)] >= 0,
                "drop_values: a dropped value is still named");
  };
  for (const Node& n : nodes) {
    for (int v : n.inputs) named(v);
    for (int v : n.outputs) named(v);
  }
  for (int v : outputs) named(v);
  if (data_input >= 0) named(data_input);
  std::vector<Value> kept;
  for (size_t v = 0; v < values.size(); ++v)
    if (!drop[v]) kept.push_back(std::move(values[v]));
  for (Node& n : nodes) {
    for (int& v : n.inputs) v = map(v);
    for (int& v : n.outputs) v = map(v);
  }
  for (int& v : outputs) v = map(v);
  if (data_input >= 0) data_input = map(data_input);
  values = std::move(kept);
}

void Graph::remove(const std::vector<char>& drop_node, const std::vector<char>& drop_value) {
  MONET_CHECK(drop_node.size() == nodes.size(), "remove: ", drop_node.size(), " flags for ", nodes.size(), " nodes");
  std::vector<Node> kept;
  for (size_t n = 0; n < nodes.size(); ++n)
    if (!drop_node[n]) kept.push_back(std::move(nodes[n]));
  nodes = std::move(kept);
  drop_values(drop_value);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int v : nodes[n].outputs) values[v].producer = static_cast<int>(n);
  verify();
}

void Graph::verify() const {
  std::vector<int> produced(values.size(), -1);
  for (size_t v = 0; v < values.size(); ++v)
    if (values[v].producer < 0) produced[v] = -2;  // graph input / persistent
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    for (int v : node.inputs) {
      MONET_CHECK(v >= 0 && v < static_cast<int>(values.size()), "node ", node.name);
      if (produced[v] == -1) fail("node '", node.name, "' (", node.op, ") reads '", values[v].name, "' before it is produced");
    }
    for (int v : node.outputs) {
      MONET_CHECK(v >= 0 && v < static_cast<int>(values.size()), "node ", node.name);
      MONET_CHECK(values[v].producer == static_cast<int>(n), "value ", values[v].name, " producer mismatch");
      produced[v] = static_cast<int>(n);
    }
  }
}

}  // namespace monet
