#include "ir/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "ir/fuse_attention.h"
#include "ops/common/broadcast.h"
#include "ops/op.h"

namespace monet {
namespace {

// ------------------------------------------------------------------------------------------- tensors and attrs

struct ConstTensor {
  Shape shape;
  bool is_float = true;
  std::vector<double> data;
};

int64_t to_int(double d) {
  if (std::isnan(d)) return INT64_MIN;  // refused wherever a size or an index is expected
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(d);
}

// Elements of a shape, refusing negative dims and products beyond `max_elements` (checked: never wraps).
int64_t checked_numel(const Shape& s, int64_t max_elements, const std::string& where, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d < 0) fail(where, ": ", what, " has a negative dimension: ", shape_str(s));
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n) || n > max_elements)
      fail(where, ": ", what, " ", shape_str(s), " is too large (over ", max_elements, " elements)");
  return n;
}

// A tensor monet will hold: at most kMaxTensorBytes at 8 bytes an element.
int64_t checked_tensor_numel(const Shape& s, const std::string& where, const std::string& what) {
  return checked_numel(s, kMaxTensorBytes / 8, where, what);
}

ConstTensor read_tensor(const onnx::TensorProto& t, const std::string& where) {
  ConstTensor c;
  for (int64_t d : t.dims()) c.shape.push_back(d);
  // Its values are in the file (checked below), so only the count itself must not overflow.
  const int64_t n = checked_tensor_numel(c.shape, where, "tensor '" + t.name() + "'");
  if (t.data_location() == onnx::TensorProto::EXTERNAL) fail(where, ": external tensor data is not supported");
  const std::string& raw = t.raw_data();
  auto from_raw = [&](auto sample) {
    using T = decltype(sample);
    if (static_cast<int64_t>(raw.size()) != n * static_cast<int64_t>(sizeof(T)))
      fail(where, ": tensor '", t.name(), "' raw_data has ", raw.size(), " bytes, expected ", n * sizeof(T));
    c.data.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
      c.data[i] = static_cast<double>(v);
    }
  };
  auto from_field = [&](const auto& field) {
    if (static_cast<int64_t>(field.size()) != n)
      fail(where, ": tensor '", t.name(), "' has ", field.size(), " values, expected ", n);
    c.data.assign(field.begin(), field.end());
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: raw.empty() ? from_field(t.float_data()) : from_raw(float{}); break;
    case onnx::TensorProto::DOUBLE: raw.empty() ? from_field(t.double_data()) : from_raw(double{}); break;
    case onnx::TensorProto::INT64: c.is_float = false; raw.empty() ? from_field(t.int64_data()) : from_raw(int64_t{}); break;
    case onnx::TensorProto::INT32: c.is_float = false; raw.empty() ? from_field(t.int32_data()) : from_raw(int32_t{}); break;
    case onnx::TensorProto::INT8: c.is_float = false; raw.empty() ? from_field(t.int32_data()) : from_raw(int8_t{}); break;
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: c.is_float = false; raw.empty() ? from_field(t.int32_data()) : from_raw(uint8_t{}); break;
    default: fail(where, ": tensor '", t.name(), "' has unsupported data type ", t.data_type());
  }
  return c;
}

bool is_float_type(int onnx_type) {
  return onnx_type == onnx::TensorProto::FLOAT || onnx_type == onnx::TensorProto::DOUBLE ||
         onnx_type == onnx::TensorProto::FLOAT16 || onnx_type == onnx::TensorProto::BFLOAT16;
}

AttrValue convert_attr(const onnx::AttributeProto& a, const std::string& where) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return a.i();
    case onnx::AttributeProto::FLOAT: return static_cast<double>(a.f());
    case onnx::AttributeProto::STRING: return a.s();
    case onnx::AttributeProto::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::FLOATS: return std::vector<double>(a.floats().begin(), a.floats().end());
    default: fail(where, ": attribute '", a.name(), "' has an unsupported type (", a.type(), ")");
  }
}

// ------------------------------------------------------------------------------------------- constant folding
//
// Shapes are fixed at import, so the subgraphs that compute shapes (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape; torch's x.expand(n, -1, -1) as Reshape -> ConstantOfShape -> Equal -> Where) evaluate to constants.
// Each foldable op has one evaluator; it runs when every given input is a constant and returns the node's single
// output, or nullopt when it cannot fold that case (the node then becomes a runtime node, if monet has the op).

// One node to fold: its inputs as constants and its attributes.
struct FoldCall {
  const onnx::NodeProto& n;
  const std::string& where;
  std::vector<ConstTensor> in;  // an omitted optional input is empty and has given[i] = false
  std::vector<bool> given;

  bool has(size_t i) const { return i < in.size() && given[i]; }
  const onnx::AttributeProto* attr(const char* name) const {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_i(const char* name, int64_t dflt) const {
    const onnx::AttributeProto* a = attr(name);
    return a ? static_cast<int64_t>(a->i()) : dflt;
  }
  std::vector<int64_t> attr_ints(const char* name) const {
    const onnx::AttributeProto* a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
};

using Folder = std::optional<ConstTensor> (*)(const FoldCall&);

std::vector<int64_t> ints_of(const ConstTensor& t) {
  std::vector<int64_t> out;
  for (double d : t.data) out.push_back(to_int(d));
  return out;
}

// out[i] = f(x_0[..], x_1[..], ...) over the numpy broadcast of the operands' shapes.
template <class F>
std::optional<ConstTensor> fold_broadcast(const std::string& where, const std::vector<const ConstTensor*>& xs,
                                          bool is_float, F f) {
  Shape shape;
  for (const ConstTensor* x : xs) {
    auto b = ops::broadcast_shapes(shape, x->shape);
    if (!b) return std::nullopt;
    shape = *b;
  }
  const int64_t n = checked_numel(shape, kMaxFoldedValues, where, "folded constant");
  ConstTensor out{shape, is_float, std::vector<double>(static_cast<size_t>(n))};
  std::vector<std::vector<int64_t>> offsets;
  for (const ConstTensor* x : xs) offsets.push_back(ops::broadcast_offsets(x->shape, shape));
  std::vector<double> args(xs.size());
  for (size_t i = 0; i < out.data.size(); ++i) {
    for (size_t k = 0; k < xs.size(); ++k) args[k] = xs[k]->data[offsets[k][i]];
    out.data[i] = f(args);
  }
  return out;
}

// Shape(x) with optional start and end (opset 15), clamped like Python slices.
ConstTensor fold_shape(const FoldCall& c, const Shape& s) {
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t start = c.attr_i("start", 0), end = c.attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  ConstTensor out{{end - start}, false, {}};
  for (int64_t i = start; i < end; ++i) out.data.push_back(static_cast<double>(s[i]));
  return out;
}

std::optional<ConstTensor> fold_constant(const FoldCall& c) {
  for (const auto& a : c.n.attribute()) {
    if (a.name() == "value") return read_tensor(a.t(), c.where);
    if (a.name() == "value_float") return ConstTensor{{}, true, {a.f()}};
    if (a.name() == "value_int") return ConstTensor{{}, false, {static_cast<double>(a.i())}};
    if (a.name() == "value_floats") return ConstTensor{{a.floats_size()}, true, {a.floats().begin(), a.floats().end()}};
    if (a.name() == "value_ints") return ConstTensor{{a.ints_size()}, false, {a.ints().begin(), a.ints().end()}};
  }
  fail(c.where, ": Constant without a supported value attribute");
}

std::optional<ConstTensor> fold_identity(const FoldCall& c) { return c.in.at(0); }

std::optional<ConstTensor> fold_cast(const FoldCall& c) {
  ConstTensor x = c.in.at(0);
  x.is_float = is_float_type(static_cast<int>(c.attr_i("to", onnx::TensorProto::FLOAT)));
  if (!x.is_float)
    for (double& d : x.data) d = std::trunc(d);
  return x;
}

// Unsqueeze and Squeeze: axes from input 1 (opset 13) or the attribute (earlier).
std::vector<int64_t> fold_axes(const FoldCall& c) { return c.has(1) ? ints_of(c.in[1]) : c.attr_ints("axes"); }

std::optional<ConstTensor> fold_unsqueeze(const FoldCall& c) {
  ConstTensor x = c.in.at(0);
  std::vector<int64_t> axes = fold_axes(c);
  const int64_t r = static_cast<int64_t>(x.shape.size() + axes.size());
  for (int64_t& a : axes) a = a < 0 ? a + r : a;
  std::sort(axes.begin(), axes.end());
  for (int64_t a : axes)
    x.shape.insert(x.shape.begin() + std::clamp<int64_t>(a, 0, static_cast<int64_t>(x.shape.size())), 1);
  return x;
}

std::optional<ConstTensor> fold_squeeze(const FoldCall& c) {
  ConstTensor x = c.in.at(0);
  const std::vector<int64_t> axes = fold_axes(c);
  const int64_t r = static_cast<int64_t>(x.shape.size());
  Shape out;
  for (int64_t d = 0; d < r; ++d) {
    bool drop = axes.empty() && x.shape[d] == 1;
    for (int64_t a : axes) drop = drop || (a < 0 ? a + r : a) == d;
    if (!drop) out.push_back(x.shape[d]);
  }
  x.shape = out;
  return x;
}

// Gather from a 1-D constant (a shape): out has the indices' shape.
std::optional<ConstTensor> fold_gather(const FoldCall& c) {
  const ConstTensor& x = c.in.at(0);
  const ConstTensor& idx = c.in.at(1);
  if (x.shape.size() != 1) return std::nullopt;
  ConstTensor out{idx.shape, x.is_float, {}};
  for (double d : idx.data) {
    int64_t i = to_int(d);
    if (i < 0) i += x.shape[0];
    if (i < 0 || i >= x.shape[0]) fail(c.where, ": Gather index ", d, " out of range");
    out.data.push_back(x.data[static_cast<size_t>(i)]);
  }
  return out;
}

// Concat of 1-D (or scalar) constants.
std::optional<ConstTensor> fold_concat(const FoldCall& c) {
  ConstTensor out{{0}, c.in.at(0).is_float, {}};
  for (const ConstTensor& p : c.in) {
    if (p.shape.size() > 1) return std::nullopt;
    out.data.insert(out.data.end(), p.data.begin(), p.data.end());
  }
  out.shape = {static_cast<int64_t>(out.data.size())};
  return out;
}

std::optional<ConstTensor> fold_constant_of_shape(const FoldCall& c) {
  ConstTensor out{{}, true, {}};
  for (double d : c.in.at(0).data) out.shape.push_back(to_int(d));
  double fill = 0;
  if (const onnx::AttributeProto* a = c.attr("value")) {
    ConstTensor v = read_tensor(a->t(), c.where);
    fill = v.data.empty() ? 0 : v.data[0];
    out.is_float = v.is_float;
  }
  out.data.assign(static_cast<size_t>(checked_numel(out.shape, kMaxFoldedValues, c.where, "ConstantOfShape")), fill);
  return out;
}

// Reshape of a constant: 0 copies the input's dim (unless allowzero), one -1 is inferred.
std::optional<ConstTensor> fold_reshape(const FoldCall& c) {
  ConstTensor x = c.in.at(0);
  const std::vector<int64_t> spec = ints_of(c.in.at(1));
  const bool allowzero = c.attr_i("allowzero", 0) != 0;
  Shape out(spec.size());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    out[i] = spec[i] == 0 && !allowzero && i < x.shape.size() ? x.shape[i] : spec[i];
    if (out[i] < -1 || (out[i] == -1 && infer_at >= 0))
      fail(c.where, ": cannot reshape ", shape_str(x.shape), " to ", shape_str(spec));
    if (out[i] == -1) infer_at = static_cast<int64_t>(i);
    else if (__builtin_mul_overflow(known, out[i], &known))
      fail(c.where, ": cannot reshape ", shape_str(x.shape), " to ", shape_str(spec));
  }
  const int64_t n = numel(x.shape);
  if (infer_at >= 0 && known > 0) out[infer_at] = n / known;
  if (numel(out) != n) fail(c.where, ": cannot reshape ", shape_str(x.shape), " to ", shape_str(spec));
  x.shape = out;
  return x;
}

// Add, Sub, Mul, Div, Mod, Equal on two broadcasting constants.
template <char kOp>
std::optional<ConstTensor> fold_arith(const FoldCall& c) {
  const ConstTensor& x = c.in.at(0);
  const ConstTensor& y = c.in.at(1);
  const bool is_float = x.is_float || y.is_float;
  const bool fmod = c.attr_i("fmod", 0) != 0;
  return fold_broadcast(c.where, {&x, &y}, kOp == '=' ? false : is_float, [&](const std::vector<double>& v) {
    const double a = v[0], b = v[1];
    switch (kOp) {
      case '+': return a + b;
      case '-': return a - b;
      case '*': return a * b;
      case '/': return is_float ? a / b : std::trunc(a / b);       // ONNX integer division truncates
      case '%': return fmod ? std::fmod(a, b) : a - std::floor(a / b) * b;  // fmod=0: the divisor's sign
      default: return a == b ? 1.0 : 0.0;                          // '=': Equal, a bool tensor
    }
  });
}

std::optional<ConstTensor> fold_not(const FoldCall& c) {
  ConstTensor x = c.in.at(0);
  for (double& d : x.data) d = d == 0 ? 1.0 : 0.0;
  x.is_float = false;
  return x;
}

// Where(cond, x, y): x where cond holds, else y, all three broadcast.
std::optional<ConstTensor> fold_where(const FoldCall& c) {
  const ConstTensor &cond = c.in.at(0), &x = c.in.at(1), &y = c.in.at(2);
  return fold_broadcast(c.where, {&cond, &x, &y}, x.is_float || y.is_float,
                        [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
}

// Range(start, limit, delta) of scalars: max(ceil((limit - start) / delta), 0) elements.
std::optional<ConstTensor> fold_range(const FoldCall& c) {
  const ConstTensor &start = c.in.at(0), &limit = c.in.at(1), &delta = c.in.at(2);
  if (start.data.size() != 1 || limit.data.size() != 1 || delta.data.size() != 1) return std::nullopt;
  const double s = start.data[0], d = delta.data[0];
  if (d == 0) fail(c.where, ": Range with delta 0");
  const double count = std::ceil((limit.data[0] - s) / d);
  if (!(count <= static_cast<double>(kMaxFoldedValues)))  // NaN included
    fail(c.where, ": Range of ", count, " values is too large (over ", kMaxFoldedValues, ")");
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
  ConstTensor out{{n}, start.is_float, {}};
  for (int64_t i = 0; i < n; ++i) out.data.push_back(s + static_cast<double>(i) * d);
  return out;
}

const std::unordered_map<std::string, Folder>& folders() {
  static const std::unordered_map<std::string, Folder> table = {
      {"Constant", fold_constant},   {"Identity", fold_identity},   {"Cast", fold_cast},
      {"Unsqueeze", fold_unsqueeze}, {"Squeeze", fold_squeeze},     {"Gather", fold_gather},
      {"Concat", fold_concat},       {"ConstantOfShape", fold_constant_of_shape},
      {"Reshape", fold_reshape},     {"Add", fold_arith<'+'>},      {"Sub", fold_arith<'-'>},
      {"Mul", fold_arith<'*'>},      {"Div", fold_arith<'/'>},      {"Mod", fold_arith<'%'>},
      {"Equal", fold_arith<'='>},    {"Not", fold_not},             {"Where", fold_where},
      {"Range", fold_range},
  };
  return table;
}

// ------------------------------------------------------------------------------------------- the converter

class Importer {
 public:
  // Reads the file at `path`, or `bytes` when given (then `path` only names the model in messages).
  Importer(std::string path, const ImportOptions& options, const std::string* bytes = nullptr)
      : path_(std::move(path)), options_(options), bytes_(bytes) {}

  Graph run() {
    onnx::ModelProto model = load();
    const onnx::GraphProto& gp = model.graph();
    g_.model_name = std::filesystem::path(path_).stem().string();
    if (gp.node_size() == 0) fail(path_, ": the model's graph has no nodes");
    for (const auto& op : model.opset_import())
      if ((op.domain().empty() || op.domain() == "ai.onnx") && (op.version() < 7 || op.version() > 17))
        fail(path_, ": opset ", op.version(), " is not supported (monet reads opsets 7-17; exported models use 13)");
    read_initializers(gp);
    read_inputs(gp);
    match_fusions(gp);
    for (int i = 0; i < gp.node_size(); ++i) {
      if (auto m = fusions_.find(i); m != fusions_.end()) {
        convert_fusion(gp, m->second);
      } else if (!fused_inner_.count(i)) {
        convert_node(gp.node(i));
      }
    }
    for (const auto& out : gp.output()) {
      int v = lookup(out.name(), "graph output");
      if (g_.values[v].role != Role::activation) fail(path_, ": graph output '", out.name(), "' is not computed by the graph");
      g_.outputs.push_back(v);
    }
    if (g_.outputs.empty()) fail(path_, ": the model has no outputs");
    decide_param_roles();
    g_.verify();
    if (options_.fuse_attention) fuse_attention(g_);
    return std::move(g_);
  }

 private:
  std::string read_file() const {
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec)) fail(path_, ": no such file");
    if (std::filesystem::is_directory(path_, ec)) fail(path_, ": is a directory, expected an ONNX file");
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail(path_, ": cannot open for reading");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  onnx::ModelProto load() {
    const std::string bytes = bytes_ ? *bytes_ : read_file();
    if (bytes.empty()) fail(path_, ": empty file, expected an ONNX model");
    onnx::ModelProto model;
    if (!model.ParseFromString(bytes)) fail(path_, ": not an ONNX model (protobuf parse failed; truncated or wrong file?)");
    if (!model.has_graph()) fail(path_, ": not an ONNX model (no graph)");
    // The checker prints warnings (experimental ops) on std::cerr; the commands promise one line, so it is muted:
    // what matters comes back as an error here or later as "unsupported op".
    struct MuteCerr {
      std::ostringstream sink;
      std::streambuf* saved = std::cerr.rdbuf(sink.rdbuf());
      ~MuteCerr() { std::cerr.rdbuf(saved); }
    };
    try {
      MuteCerr mute;
      onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      fail(path_, ": ONNX checker: ", msg);
    }
    return model;
  }

  int lookup(const std::string& name, const char* what) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) fail(path_, ": ", what, " '", name, "' is not defined");
    return it->second;
  }

  int add(Value v) {
    std::string name = v.name;
    int id = g_.add_value(std::move(v));
    by_name_[name] = id;
    return id;
  }

  void read_initializers(const onnx::GraphProto& gp) {
    for (const auto& t : gp.initializer()) {
      ConstTensor c = read_tensor(t, path_);
      Value v;
      v.name = t.name();
      v.shape = c.shape;
      v.dtype = c.is_float ? DType::f32 : DType::i64;
      v.role = Role::constant;  // becomes param/buffer if a node reads it in a parameter slot
      v.data = std::move(c.data);
      float_const_[t.name()] = c.is_float;
      add(std::move(v));
    }
  }

  void read_inputs(const onnx::GraphProto& gp) {
    for (const auto& in : gp.input()) {
      if (by_name_.count(in.name())) continue;  // an initializer listed as input
      const auto& tt = in.type().tensor_type();
      Value v;
      v.name = in.name();
      v.dtype = is_float_type(tt.elem_type()) ? DType::f32 : DType::i64;
      bool is_data = g_.data_input < 0;
      if (tt.shape().dim_size() > kMaxRank) fail(path_, ": input '", in.name(), "' has rank ", tt.shape().dim_size(),
                                                 ", more than ", kMaxRank, " dimensions");
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        int64_t size = dim.has_dim_value() ? dim.dim_value() : -1;
        if (is_data && d == 0 && options_.batch) size = *options_.batch;
        if (is_data && d > 0 && options_.input_shape) continue;
        if (size <= 0) {
          if (is_data && d == 0) fail(path_, ": data input '", in.name(), "' has a dynamic batch dimension: give --batch");
          fail(path_, is_data ? ": data input '" : ": input '", in.name(), "' dimension ", d, " is dynamic",
               is_data ? ": give --input-shape" : " (parameters must have static shapes)");
        }
        v.shape.push_back(size);
      }
      if (is_data) {
        if (options_.input_shape) {
          if (v.shape.empty()) fail(path_, ": data input '", in.name(), "' has no batch dimension");
          for (int64_t d : *options_.input_shape) v.shape.push_back(d);
        }
        checked_tensor_numel(v.shape, path_, "data input '" + in.name() + "'");
        if (v.shape.empty()) fail(path_, ": data input '", in.name(), "' is a scalar; expected (N, ...)");
        v.role = Role::input;
        g_.data_input = add(std::move(v));
      } else {
        checked_tensor_numel(v.shape, path_, "input '" + in.name() + "'");
        v.role = Role::param;  // refined in decide_param_roles()
        add(std::move(v));
      }
    }
    if (g_.data_input < 0) fail(path_, ": the model has no data input (every input has an initializer)");
  }

  // ---- constant folding of shape-computing nodes (shapes are fixed, so Shape(x) is known at import)

  bool is_const(const std::string& name) const {
    auto it = by_name_.find(name);
    return it != by_name_.end() && g_.values[it->second].role == Role::constant;
  }

  ConstTensor const_of(const std::string& name) {
    const Value& v = g_.values[lookup(name, "value")];
    return {v.shape, v.dtype == DType::f32, v.data};
  }

  void add_const(const std::string& name, ConstTensor c) {
    Value v;
    v.name = name;
    v.shape = c.shape;
    v.dtype = c.is_float ? DType::f32 : DType::i64;
    v.role = Role::constant;
    v.data = std::move(c.data);
    add(std::move(v));
  }

  // Evaluates a node whose result is a constant (see the folding table above); returns false if the node is not
  // foldable here, and it becomes a runtime node.
  bool fold(const onnx::NodeProto& n, const std::string& where) {
    if (n.op_type() == "Shape") {  // the one fold that reads a runtime value: its shape, fixed at import
      if (n.input_size() < 1 || !by_name_.count(n.input(0))) return false;
      const Shape& s = g_.values[by_name_[n.input(0)]].shape;
      FoldCall call{n, where, {}, {}};
      add_const(n.output(0), fold_shape(call, s));
      return true;
    }
    auto it = folders().find(n.op_type());
    if (it == folders().end()) return false;
    FoldCall call{n, where, {}, {}};
    for (const auto& in : n.input()) {
      if (in.empty()) {
        call.in.emplace_back();  // an omitted optional input
        call.given.push_back(false);
        continue;
      }
      if (!is_const(in)) return false;
      call.in.push_back(const_of(in));
      call.given.push_back(true);
    }
    std::optional<ConstTensor> out = it->second(call);
    if (!out) return false;
    add_const(n.output(0), std::move(*out));
    return true;
  }

  // ---- conversion of a runtime node

  void convert_node(const onnx::NodeProto& n) {
    std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(g_.nodes.size()) : n.name();
    std::string where = path_ + ": node '" + name + "' (" + n.op_type() + ")";
    if (!n.domain().empty() && n.domain() != "ai.onnx") fail(where, ": op domain '", n.domain(), "' is not supported");
    if (fold(n, where)) return;
    if (n.op_type() == "LayerNormalization") return convert_layer_norm(n, name, where);
    const OpDef* def = find_op(n.op_type());
    if (!def || !is_onnx_op(n.op_type())) fail(where, ": unsupported op type '", n.op_type(), "'");
    // A Gather whose indices are computed (a token embedding reading the data input) is GatherIdx: both inputs at
    // run time.
    const bool runtime_gather = n.op_type() == "Gather" && n.input_size() == 2 && !is_const(n.input(1));
    if (runtime_gather) def = find_op("GatherIdx");

    Node node;
    node.name = name;
    node.op = runtime_gather ? "GatherIdx" : n.op_type();
    for (const auto& a : n.attribute()) node.attrs.set(a.name(), convert_attr(a, where));
    // Static inputs become attributes; runtime inputs must come before them.
    for (int i = 0; i < n.input_size(); ++i) {
      const std::string& in = n.input(i);
      std::string_view static_name = i < static_cast<int>(def->static_inputs.size()) ? def->static_inputs[i] : "";
      if (!static_name.empty()) {
        if (in.empty()) continue;
        if (!is_const(in)) fail(where, ": input ", i, " ('", in, "') must be a constant (it sets '", static_name, "')");
        ConstTensor c = const_of(in);
        if (c.is_float) node.attrs.set(std::string(static_name), c.data);
        else node.attrs.set(std::string(static_name), ints_of(c));
        // The values are stored flat; a rank other than 1 is kept beside them (Gather's scalar index drops a dim).
        if (c.shape.size() != 1) node.attrs.set(std::string(static_name) + "_shape", c.shape);
        continue;
      }
      if (in.empty()) {
        if (i + 1 < n.input_size()) fail(where, ": optional input ", i, " omitted before later inputs");
        continue;
      }
      node.inputs.push_back(lookup(in, "input"));
    }
    std::vector<std::string> outs(n.output().begin(), n.output().end());
    normalise_outputs(node.op, outs);
    add_node(std::move(node), outs, where);
  }

  // Appends a node whose inputs are set, with outputs named `outs`, and runs its shape rule.
  void add_node(Node node, const std::vector<std::string>& outs, const std::string& where) {
    const int id = static_cast<int>(g_.nodes.size());
    for (const std::string& out : outs) {
      Value v;
      v.name = out;
      v.producer = id;
      v.role = Role::activation;
      if (by_name_.count(out)) fail(where, ": value '", out, "' is produced twice");
      node.outputs.push_back(add(std::move(v)));
    }
    g_.nodes.push_back(std::move(node));
    try {
      infer_node(g_, id);
    } catch (const Error& e) {
      fail(path_, ": ", e.what());
    }
    // Sizes are computed from shapes everywhere after this (plan, simulator, arena): refuse what cannot be held.
    for (int v : g_.nodes[id].outputs)
      checked_tensor_numel(g_.values[v].shape, where, "output '" + g_.values[v].name + "'");
  }

  // LayerNormalization (opset 17) is our LayerNorm (lib/ops/layer_norm): the same inputs and attributes; the optional
  // Mean and InvStdDev outputs are its second and third (named after Y when the model does not name them), and a
  // missing B is a constant of zeros.
  void convert_layer_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
    if (n.input_size() < 2 || n.input(0).empty() || n.input(1).empty())
      fail(where, ": expected inputs X and Scale (and an optional B)");
    double epsilon = 1e-5;
    int64_t axis = -1;
    for (const auto& a : n.attribute()) {
      if (a.name() == "axis") axis = a.i();
      if (a.name() == "epsilon") epsilon = a.f();
    }
    const bool has_bias = n.input_size() > 2 && !n.input(2).empty();
    std::vector<std::string> outs = {n.output(0)};
    for (int i = 1; i <= 2; ++i)
      outs.push_back(i < n.output_size() && !n.output(i).empty() ? n.output(i)
                                                                   : n.output(0) + (i == 1 ? "/mean" : "/invstd"));
    emit_layer_norm(name, n.input(0), n.input(1), has_bias ? n.input(2) : "", axis, epsilon, outs, where);
  }

  void emit_layer_norm(const std::string& name, const std::string& x, const std::string& scale,
                       const std::string& bias, int64_t axis, double epsilon, const std::vector<std::string>& outs,
                       const std::string& where) {
    Node node;
    node.name = name;
    node.op = "LayerNorm";
    node.attrs.set("axis", axis);
    node.attrs.set("epsilon", epsilon);
    node.inputs = {lookup(x, "input"), lookup(scale, "input")};
    if (bias.empty()) {
      const Shape& s = g_.values[node.inputs[1]].shape;
      add_const(name + "/zero_bias", ConstTensor{s, true, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)});
      node.inputs.push_back(lookup(name + "/zero_bias", "input"));
    } else {
      node.inputs.push_back(lookup(bias, "input"));
    }
    add_node(std::move(node), outs, where);
  }

  // ---- what torch exports at opset 13 for nn.LayerNorm and nn.GELU, made one node each
  // nn.LayerNorm:
  //   m = ReduceMean(X, axes = [-k..-1]), d = Sub(X, m), v = ReduceMean(Pow(d, 2), the same axes),
  //   Y = Add(Mul(Div(d, Sqrt(Add(v, epsilon))), Scale), B)
  //     =>  Y = LayerNorm(X, Scale, B; axis = -k, epsilon)         (B absent: Y = Mul(...) and a zero B)
  // nn.GELU (exact):
  //   Y = Mul(Mul(X, Add(Erf(Div(X, c)), 1)), 0.5)  =>  Y = Gelu(X; divisor = c)     (c = sqrt 2 as a float)
  // Matched on the ONNX nodes before any is converted: each intermediate is read by the next node of the pattern
  // alone and is no graph output, the constants (2, epsilon, c, 1, 0.5) are scalars of Constant nodes or
  // initializers, Scale and B are graph inputs or initializers. When a LayerNorm's last node is reached, Scale and B
  // must have X's normalised shape; otherwise its nodes convert one by one (the decomposition runs as it is).
  struct Fusion {
    std::string op;          // LayerNorm or Gelu
    std::vector<int> nodes;  // the pattern's nodes in graph order; the last is where the node is emitted
    std::string x, scale, bias;
    int64_t axis = -1;
    double epsilon = 0, divisor = 0;
  };

  void match_fusions(const onnx::GraphProto& gp) {
    std::unordered_map<std::string, int> producer;
    std::unordered_map<std::string, std::vector<int>> readers;
    for (int i = 0; i < gp.node_size(); ++i) {
      for (const auto& o : gp.node(i).output()) producer[o] = i;
      for (const auto& in : gp.node(i).input()) readers[in].push_back(i);
    }
    std::set<std::string> graph_outputs;
    for (const auto& o : gp.output()) graph_outputs.insert(o.name());
    // The one reader of `value` if it is `op` (and the value is no graph output), else -1.
    auto only_reader = [&](const std::string& value, const char* op) {
      auto it = readers.find(value);
      if (value.empty() || graph_outputs.count(value) || it == readers.end() || it->second.size() != 1) return -1;
      return gp.node(it->second[0]).op_type() == op ? it->second[0] : -1;
    };
    // A scalar from a Constant node or an initializer.
    auto scalar = [&](const std::string& value) -> std::optional<double> {
      std::optional<ConstTensor> t;
      if (auto p = producer.find(value); p != producer.end()) {
        const onnx::NodeProto& c = gp.node(p->second);
        if (c.op_type() != "Constant" || c.attribute_size() != 1 || c.attribute(0).name() != "value") return {};
        t = read_tensor(c.attribute(0).t(), path_);
      } else if (is_const(value)) {
        t = const_of(value);
      }
      if (!t || t->data.size() != 1) return {};
      return t->data[0];
    };
    auto is_leaf = [&](const std::string& value) { return !producer.count(value) && by_name_.count(value); };
    // The other operand of a binary node with `value` as one of its two inputs ("" if neither is).
    auto other = [](const onnx::NodeProto& n, const std::string& value) -> std::string {
      if (n.input_size() != 2) return "";
      return n.input(0) == value ? n.input(1) : n.input(1) == value ? n.input(0) : "";
    };
    auto add = [&](Fusion f) {
      std::sort(f.nodes.begin(), f.nodes.end());
      for (int n : f.nodes)
        if (n != f.nodes.back()) fused_inner_.insert(n);
      fusions_[f.nodes.back()] = std::move(f);
    };
    for (int i = 0; i < gp.node_size(); ++i) {
      if (gp.node(i).op_type() == "ReduceMean") {
        if (std::optional<Fusion> f = match_layer_norm(gp, i, readers, graph_outputs, only_reader, scalar, is_leaf,
                                                       other))
          add(std::move(*f));
      } else if (gp.node(i).op_type() == "Div") {
        if (std::optional<Fusion> f = match_gelu(gp, i, only_reader, scalar, other)) add(std::move(*f));
      }
    }
  }

  // axes = [-k, ..., -1] and keepdims = 1 (a ReduceMean of the LayerNorm pattern): the axes, else none.
  static std::vector<int64_t> trailing_axes(const onnx::NodeProto& n) {
    std::vector<int64_t> axes;
    for (const auto& a : n.attribute()) {
      if (a.name() == "axes") axes.assign(a.ints().begin(), a.ints().end());
      if (a.name() == "keepdims" && a.i() != 1) return {};
    }
    if (n.input_size() != 1 || axes.empty()) return {};
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != -static_cast<int64_t>(axes.size() - i)) return {};
    return axes;
  }

  template <class OnlyReader, class Scalar, class IsLeaf, class Other>
  std::optional<Fusion> match_layer_norm(const onnx::GraphProto& gp, int i,
                                         const std::unordered_map<std::string, std::vector<int>>& readers,
                                         const std::set<std::string>& graph_outputs, OnlyReader only_reader,
                                         Scalar scalar, IsLeaf is_leaf, Other other) {
    const onnx::NodeProto& m = gp.node(i);
    const std::vector<int64_t> axes = trailing_axes(m);
    if (axes.empty()) return {};
    const std::string& x = m.input(0);
    const int sub = only_reader(m.output(0), "Sub");
    if (sub < 0 || gp.node(sub).input_size() != 2 || gp.node(sub).input(0) != x || gp.node(sub).input(1) != m.output(0))
      return {};
    const std::string& d = gp.node(sub).output(0);
    const auto d_readers = readers.find(d);
    if (graph_outputs.count(d) || d_readers == readers.end() || d_readers->second.size() != 2) return {};
    int pow = -1, div = -1;
    for (int r : d_readers->second) (gp.node(r).op_type() == "Pow" ? pow : div) = r;
    if (pow < 0 || div < 0 || gp.node(div).op_type() != "Div" || gp.node(pow).input_size() != 2 ||
        gp.node(pow).input(0) != d || scalar(gp.node(pow).input(1)) != 2.0 || gp.node(div).input_size() != 2 ||
        gp.node(div).input(0) != d)
      return {};
    const int var = only_reader(gp.node(pow).output(0), "ReduceMean");
    if (var < 0 || trailing_axes(gp.node(var)) != axes) return {};
    const int add = only_reader(gp.node(var).output(0), "Add");
    if (add < 0) return {};
    const std::optional<double> epsilon = scalar(other(gp.node(add), gp.node(var).output(0)));
    if (!epsilon || !(*epsilon >= 0)) return {};
    const int sqrt = only_reader(gp.node(add).output(0), "Sqrt");
    if (sqrt < 0 || only_reader(gp.node(sqrt).output(0), "Div") != div ||
        gp.node(div).input(1) != gp.node(sqrt).output(0))
      return {};
    const int mul = only_reader(gp.node(div).output(0), "Mul");
    if (mul < 0) return {};
    const std::string scale = other(gp.node(mul), gp.node(div).output(0));
    if (!is_leaf(scale)) return {};
    Fusion f{"LayerNorm", {i, sub, pow, var, add, sqrt, div, mul}, x, scale, "", -static_cast<int64_t>(axes.size()),
             *epsilon};
    if (const int bias = only_reader(gp.node(mul).output(0), "Add"); bias >= 0) {
      const std::string b = other(gp.node(bias), gp.node(mul).output(0));
      if (is_leaf(b)) {
        f.bias = b;
        f.nodes.push_back(bias);
      }
    }
    return f;
  }

  template <class OnlyReader, class Scalar, class Other>
  std::optional<Fusion> match_gelu(const onnx::GraphProto& gp, int i, OnlyReader only_reader, Scalar scalar,
                                   Other other) {
    const onnx::NodeProto& div = gp.node(i);
    const std::optional<double> divisor = div.input_size() == 2 ? scalar(div.input(1)) : std::nullopt;
    if (!divisor || std::abs(*divisor - std::sqrt(2.0)) > 1e-6) return {};
    const std::string& x = div.input(0);
    const int erf = only_reader(div.output(0), "Erf");
    if (erf < 0) return {};
    const int add = only_reader(gp.node(erf).output(0), "Add");
    if (add < 0 || scalar(other(gp.node(add), gp.node(erf).output(0))) != 1.0) return {};
    const int mul = only_reader(gp.node(add).output(0), "Mul");
    if (mul < 0 || other(gp.node(mul), gp.node(add).output(0)) != x) return {};
    const int half = only_reader(gp.node(mul).output(0), "Mul");
    if (half < 0 || scalar(other(gp.node(half), gp.node(mul).output(0))) != 0.5) return {};
    Fusion f;
    f.op = "Gelu";
    f.nodes = {i, erf, add, mul, half};
    f.x = x;
    f.divisor = *divisor;
    return f;
  }

  void convert_fusion(const onnx::GraphProto& gp, const Fusion& f) {
    const onnx::NodeProto& last = gp.node(f.nodes.back());
    const std::string name = last.name().empty() ? f.op + "_" + std::to_string(g_.nodes.size()) : last.name();
    const std::string& y = last.output(0);
    const std::string where = path_ + ": node '" + name + "' (" + last.op_type() + ", the end of a " + f.op + ")";
    if (f.op == "Gelu") {
      Node node;
      node.name = name;
      node.op = "Gelu";
      node.attrs.set("divisor", f.divisor);
      node.inputs = {lookup(f.x, "input")};
      add_node(std::move(node), {y}, where);
      return;
    }
    const Shape& x = g_.values[lookup(f.x, "input")].shape;
    const size_t k = static_cast<size_t>(-f.axis);
    auto normalised = [&](const std::string& v) {
      const Shape& s = g_.values[lookup(v, "input")].shape;
      return x.size() >= k && s == Shape(x.end() - static_cast<std::ptrdiff_t>(k), x.end()) &&
             g_.values[lookup(v, "input")].dtype == DType::f32;
    };
    if (!normalised(f.scale) || (!f.bias.empty() && !normalised(f.bias))) {
      for (int n : f.nodes) convert_node(gp.node(n));
      return;
    }
    emit_layer_norm(name, f.x, f.scale, f.bias, f.axis, f.epsilon, {y, y + "/mean", y + "/invstd"}, where);
  }

  // Our backward, loss and optimizer ops are not ONNX ops: a model naming one is rejected like any unknown op.
  static bool is_onnx_op(const std::string& op) {
    return op.find("Grad") == std::string::npos && op != "ReduceSumTo" && op != "BroadcastTo" && op != "GatherIdx" &&
           op != "LayerNorm" && op != "Gelu" &&
           op != "SoftmaxCrossEntropy" && op != "SumLoss" && op != "SgdUpdate";
  }

  // Our nodes have a fixed output list per op where ONNX has optional outputs. Dropped outputs are remembered:
  // a node that reads one is rejected in decide_param_roles().
  void normalise_outputs(const std::string& op, std::vector<std::string>& outs) {
    auto drop_from = [&](size_t from) {
      for (size_t k = from; k < outs.size(); ++k)
        if (!outs[k].empty()) dropped_.insert(outs[k]);
      outs.resize(std::min(outs.size(), from));
    };
    if (op == "BatchNormalization") {
      // Y, saved_mean, saved_invstd; ONNX's running-stat outputs are updated in place by our kernel.
      drop_from(1);
      outs.push_back(outs[0] + "/saved_mean");
      outs.push_back(outs[0] + "/saved_invstd");
    } else if (op == "Dropout") {
      if (outs.size() < 2 || outs[1].empty()) {
        outs.resize(1);
        outs.push_back(outs[0] + "/mask");
      }
    } else if (op == "MaxPool") {
      // Y, argmax (packed window taps); ONNX's Indices (int64 positions) is not produced.
      drop_from(1);
      outs.push_back(outs[0] + "/argmax");
    } else if (op == "Relu") {
      drop_from(1);
      outs.push_back(outs[0] + "/mask");  // 1 bit per element, for the intermediate-activated backward
    }
  }

  // Graph inputs and initializers read in a parameter slot become params (or buffers for running stats).
  // A float graph input read as a plain operand is a param too; plain_operand_role() picks its initialisation.
  void decide_param_roles() {
    std::vector<ParamRole> role(g_.values.size(), ParamRole::none);
    for (const Node& node : g_.nodes) {
      const OpDef& def = op_def(node.op);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        ParamRole r = i < def.param_roles.size() ? def.param_roles[i] : ParamRole::none;
        if (r == ParamRole::weight && node.op == "Gemm" && node.attrs.i("transB", 0) == 0) r = ParamRole::weight_kn;
        int v = node.inputs[i];
        if (r != ParamRole::none) role[v] = r;
      }
    }
    for (const Node& node : g_.nodes)
      for (int v : node.inputs)
        if (dropped_.count(g_.values[v].name))
          fail(path_, ": node '", node.name, "' reads '", g_.values[v].name, "', an optional output monet does not produce");
    const std::vector<std::vector<int>> consumers = g_.consumers();
    for (size_t v = 0; v < g_.values.size(); ++v) {
      Value& val = g_.values[v];
      if (val.role != Role::param && val.role != Role::constant) continue;
      if (val.role == Role::constant && !float_const_.count(val.name)) continue;  // folded constants stay
      ParamRole r = role[v];
      if (r == ParamRole::none) {
        // An initializer read as a plain operand stays a constant (it may be an epsilon or a scale).
        if (val.role == Role::param) {
          if (val.dtype != DType::f32) fail(path_, ": graph input '", val.name, "' is neither the data input nor a parameter");
          val.init = plain_operand_role(static_cast<int>(v), role, consumers);
        }
        continue;
      }
      val.role = (r == ParamRole::running_mean || r == ParamRole::running_var) ? Role::buffer : Role::param;
      val.init = r;
    }
  }

  // How to initialise a param no op slot names, from its first reader that tells (transformers export Linear
  // and LayerNorm as plain ops):
  //   Transpose (2-D) into a weight slot  -> the slot's role, transposed: Linear's W (out, in) read as
  //                                          MatMul(x, W^T) is a `weight` with fan_in = in, as in PyTorch
  //   Mul by a vector (one dim > 1)       -> ones (LayerNorm gamma, ConvNeXt's layer scale)
  //   Add/Sub of a vector                 -> bias (U(+-1/sqrt(fan_in)) after a MatMul, else zeros: LayerNorm beta)
  //   anything else                       -> small_normal (ViT's class token and position embedding)
  ParamRole plain_operand_role(int v, const std::vector<ParamRole>& slot_role,
                               const std::vector<std::vector<int>>& consumers) const {
    const Shape& shape = g_.values[v].shape;
    const bool vector_like = std::count_if(shape.begin(), shape.end(), [](int64_t d) { return d > 1; }) <= 1;
    for (int n : consumers[v]) {
      const Node& node = g_.nodes[n];
      if (node.op == "Transpose" && shape.size() == 2) {
        const ParamRole r = slot_role[node.outputs[0]];
        if (r == ParamRole::weight_kn) return ParamRole::weight;
        if (r == ParamRole::weight) return ParamRole::weight_kn;
      }
      if (node.op == "Mul" && vector_like) return ParamRole::ones;
      if ((node.op == "Add" || node.op == "Sub") && vector_like) return ParamRole::bias;
    }
    return ParamRole::small_normal;
  }

 private:
  static constexpr int kMaxRank = 16;

  std::string path_;
  ImportOptions options_;
  const std::string* bytes_;
  Graph g_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, bool> float_const_;
  std::set<std::string> dropped_;
  std::unordered_map<int, Fusion> fusions_;  // by the index of the pattern's last ONNX node
  std::set<int> fused_inner_;                // the other nodes of each pattern (not converted alone)
};

}  // namespace

Graph import_onnx(const std::string& path, const ImportOptions& options) {
  if (options.batch && *options.batch <= 0) fail("--batch must be a positive integer, got ", *options.batch);
  Importer imp(path, options);
  return imp.run();
}

Graph import_onnx_bytes(const std::string& bytes, const std::string& name, const ImportOptions& options) {
  if (options.batch && *options.batch <= 0) fail("--batch must be a positive integer, got ", *options.batch);
  Importer imp(name, options, &bytes);
  return imp.run();
}

Shape parse_input_shape(const std::string& text) {
  Shape s;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string tok = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos || tok.size() > 9)
      fail("--input-shape '", text, "': expected positive integers like 3,224,224");
    int64_t d = std::stoll(tok);
    if (d <= 0) fail("--input-shape '", text, "': dimensions must be positive");
    s.push_back(d);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return s;
}

}  // namespace monet
