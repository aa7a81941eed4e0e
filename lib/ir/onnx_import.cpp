#include "ir/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <unordered_map>

#include "core/error.h"
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
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(d);
}

ConstTensor read_tensor(const onnx::TensorProto& t, const std::string& where) {
  ConstTensor c;
  for (int64_t d : t.dims()) c.shape.push_back(d);
  const int64_t n = numel(c.shape);
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

// ------------------------------------------------------------------------------------------- the converter

class Importer {
 public:
  Importer(std::string path, const ImportOptions& options) : path_(std::move(path)), options_(options) {}

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
    for (int i = 0; i < gp.node_size(); ++i) convert_node(gp.node(i));
    for (const auto& out : gp.output()) {
      int v = lookup(out.name(), "graph output");
      if (g_.values[v].role != Role::activation) fail(path_, ": graph output '", out.name(), "' is not computed by the graph");
      g_.outputs.push_back(v);
    }
    if (g_.outputs.empty()) fail(path_, ": the model has no outputs");
    decide_param_roles();
    g_.verify();
    return std::move(g_);
  }

 private:
  onnx::ModelProto load() {
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec)) fail(path_, ": no such file");
    if (std::filesystem::is_directory(path_, ec)) fail(path_, ": is a directory, expected an ONNX file");
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail(path_, ": cannot open for reading");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty()) fail(path_, ": empty file, expected an ONNX model");
    onnx::ModelProto model;
    if (!model.ParseFromString(bytes)) fail(path_, ": not an ONNX model (protobuf parse failed; truncated or wrong file?)");
    if (!model.has_graph()) fail(path_, ": not an ONNX model (no graph)");
    try {
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
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        int64_t size = dim.has_dim_value() ? dim.dim_value() : -1;
        if (is_data && d == 0 && options_.batch) size = *options_.batch;
        if (is_data && d > 0 && options_.input_shape) continue;
        if (size <= 0) {
          if (is_data && d == 0) fail(path_, ": data input '", in.name(), "' has a dynamic batch dimension: give --batch");
          fail(path_, ": input '", in.name(), "' dimension ", d, " is dynamic",
               is_data ? ": give --input-shape" : " (parameters must have static shapes)");
        }
        v.shape.push_back(size);
      }
      if (is_data) {
        if (options_.input_shape) {
          if (v.shape.empty()) fail(path_, ": data input '", in.name(), "' has no batch dimension");
          for (int64_t d : *options_.input_shape) v.shape.push_back(d);
        }
        if (v.shape.empty()) fail(path_, ": data input '", in.name(), "' is a scalar; expected (N, ...)");
        v.role = Role::input;
        g_.data_input = add(std::move(v));
      } else {
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

  // Evaluates a node whose result is a constant; returns false if the node is not foldable here.
  bool fold(const onnx::NodeProto& n, const std::string& where) {
    const std::string& op = n.op_type();
    auto attr_i = [&](const char* name, int64_t dflt) {
      for (const auto& a : n.attribute()) if (a.name() == name) return static_cast<int64_t>(a.i());
      return dflt;
    };
    auto attr_ints = [&](const char* name) {
      std::vector<int64_t> out;
      for (const auto& a : n.attribute()) if (a.name() == name) out.assign(a.ints().begin(), a.ints().end());
      return out;
    };
    if (op == "Constant") {
      for (const auto& a : n.attribute()) {
        if (a.name() == "value") { add_const(n.output(0), read_tensor(a.t(), where)); return true; }
        if (a.name() == "value_float") { add_const(n.output(0), {{}, true, {a.f()}}); return true; }
        if (a.name() == "value_int") { add_const(n.output(0), {{}, false, {static_cast<double>(a.i())}}); return true; }
        if (a.name() == "value_floats") { add_const(n.output(0), {{a.floats_size()}, true, {a.floats().begin(), a.floats().end()}}); return true; }
        if (a.name() == "value_ints") { add_const(n.output(0), {{a.ints_size()}, false, {a.ints().begin(), a.ints().end()}}); return true; }
      }
      fail(where, ": Constant without a supported value attribute");
    }
    if (op == "Shape") {
      if (n.input_size() < 1 || !by_name_.count(n.input(0))) return false;
      const Shape& s = g_.values[by_name_[n.input(0)]].shape;
      int64_t r = static_cast<int64_t>(s.size());
      int64_t start = attr_i("start", 0), end = attr_i("end", r);
      if (start < 0) start += r;
      if (end < 0) end += r;
      start = std::clamp<int64_t>(start, 0, r);
      end = std::clamp<int64_t>(end, start, r);
      ConstTensor c{{end - start}, false, {}};
      for (int64_t i = start; i < end; ++i) c.data.push_back(static_cast<double>(s[i]));
      add_const(n.output(0), c);
      return true;
    }
    for (const auto& in : n.input())
      if (!in.empty() && !is_const(in)) return false;
    if (n.input_size() == 0) return false;
    ConstTensor x = const_of(n.input(0));
    if (op == "Identity") { add_const(n.output(0), x); return true; }
    if (op == "Cast") {
      int64_t to = attr_i("to", 1);
      x.is_float = is_float_type(static_cast<int>(to));
      if (!x.is_float) for (double& d : x.data) d = std::trunc(d);
      add_const(n.output(0), x);
      return true;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      std::vector<int64_t> axes = n.input_size() > 1 ? std::vector<int64_t>() : attr_ints("axes");
      if (n.input_size() > 1) for (double d : const_of(n.input(1)).data) axes.push_back(to_int(d));
      Shape s = x.shape;
      if (op == "Unsqueeze") {
        int64_t r = static_cast<int64_t>(s.size() + axes.size());
        for (int64_t& a : axes) a = a < 0 ? a + r : a;
        std::sort(axes.begin(), axes.end());
        for (int64_t a : axes) s.insert(s.begin() + std::clamp<int64_t>(a, 0, static_cast<int64_t>(s.size())), 1);
      } else {
        Shape out;
        for (size_t d = 0; d < s.size(); ++d) {
          bool drop = axes.empty() ? s[d] == 1 : false;
          for (int64_t a : axes) drop = drop || (a < 0 ? a + static_cast<int64_t>(s.size()) : a) == static_cast<int64_t>(d);
          if (!drop) out.push_back(s[d]);
        }
        s = out;
      }
      x.shape = s;
      add_const(n.output(0), x);
      return true;
    }
    if (op == "Gather") {
      ConstTensor idx = const_of(n.input(1));
      if (x.shape.size() != 1) return false;
      ConstTensor out{idx.shape, x.is_float, {}};
      for (double d : idx.data) {
        int64_t i = to_int(d);
        if (i < 0) i += x.shape[0];
        if (i < 0 || i >= x.shape[0]) fail(where, ": Gather index ", d, " out of range");
        out.data.push_back(x.data[static_cast<size_t>(i)]);
      }
      add_const(n.output(0), out);
      return true;
    }
    if (op == "Concat") {
      ConstTensor out{{0}, x.is_float, {}};
      for (const auto& in : n.input()) {
        ConstTensor p = const_of(in);
        if (p.shape.size() > 1) return false;
        out.data.insert(out.data.end(), p.data.begin(), p.data.end());
      }
      out.shape = {static_cast<int64_t>(out.data.size())};
      add_const(n.output(0), out);
      return true;
    }
    if (op == "ConstantOfShape") {
      ConstTensor out{{}, true, {}};
      for (double d : x.data) out.shape.push_back(to_int(d));
      double fill = 0;
      for (const auto& a : n.attribute())
        if (a.name() == "value") {
          ConstTensor v = read_tensor(a.t(), where);
          fill = v.data.empty() ? 0 : v.data[0];
          out.is_float = v.is_float;
        }
      out.data.assign(static_cast<size_t>(numel(out.shape)), fill);
      add_const(n.output(0), out);
      return true;
    }
    if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && n.input_size() == 2) {
      ConstTensor y = const_of(n.input(1));
      if (x.data.size() != y.data.size() && y.data.size() != 1 && x.data.size() != 1) return false;
      ConstTensor out = x.data.size() >= y.data.size() ? x : y;
      out.is_float = x.is_float || y.is_float;
      for (size_t i = 0; i < out.data.size(); ++i) {
        double a = x.data[x.data.size() == 1 ? 0 : i], b = y.data[y.data.size() == 1 ? 0 : i];
        double r = op == "Add" ? a + b : op == "Sub" ? a - b : op == "Mul" ? a * b : a / b;
        out.data[i] = (!out.is_float && op == "Div") ? std::trunc(r) : r;
      }
      add_const(n.output(0), out);
      return true;
    }
    return false;
  }

  // ---- conversion of a runtime node

  void convert_node(const onnx::NodeProto& n) {
    std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(g_.nodes.size()) : n.name();
    std::string where = path_ + ": node '" + name + "' (" + n.op_type() + ")";
    if (!n.domain().empty() && n.domain() != "ai.onnx") fail(where, ": op domain '", n.domain(), "' is not supported");
    if (fold(n, where)) return;
    const OpDef* def = find_op(n.op_type());
    if (!def || !is_onnx_op(n.op_type())) fail(where, ": unsupported op type '", n.op_type(), "'");

    Node node;
    node.name = name;
    node.op = n.op_type();
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
        else {
          std::vector<int64_t> ints;
          for (double d : c.data) ints.push_back(to_int(d));
          node.attrs.set(std::string(static_name), ints);
        }
        continue;
      }
      if (in.empty()) {
        if (i + 1 < n.input_size()) fail(where, ": optional input ", i, " omitted before later inputs");
        continue;
      }
      node.inputs.push_back(lookup(in, "input"));
    }
    int id = static_cast<int>(g_.nodes.size());
    std::vector<std::string> outs(n.output().begin(), n.output().end());
    normalise_outputs(node.op, outs, where);
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
  }

  // Our backward, loss and optimizer ops are not ONNX ops: a model naming one is rejected like any unknown op.
  static bool is_onnx_op(const std::string& op) {
    return op.find("Grad") == std::string::npos && op != "ReduceSumTo" && op != "BroadcastTo" &&
           op != "SoftmaxCrossEntropy" && op != "SumLoss" && op != "SgdUpdate";
  }

  // Our nodes have a fixed output list per op where ONNX has optional outputs.
  void normalise_outputs(const std::string& op, std::vector<std::string>& outs, const std::string& where) {
    auto require_unused = [&](size_t from) {
      for (size_t k = from; k < outs.size(); ++k)
        if (!outs[k].empty()) dropped_.insert(outs[k]);
      outs.resize(std::min(outs.size(), from));
    };
    if (op == "BatchNormalization") {
      // Y, saved_mean, saved_invstd; ONNX's running-stat outputs are updated in place by our kernel.
      require_unused(1);
      outs.push_back(outs[0] + "/saved_mean");
      outs.push_back(outs[0] + "/saved_invstd");
    } else if (op == "Dropout") {
      if (outs.size() < 2 || outs[1].empty()) outs.resize(1), outs.push_back(outs[0] + "/mask");
    } else if (op == "MaxPool") {
      require_unused(1);
    }
    (void)where;
  }

  // Graph inputs and initializers read in a parameter slot become params (or buffers for running stats).
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
    for (size_t v = 0; v < g_.values.size(); ++v) {
      Value& val = g_.values[v];
      if (val.role != Role::param && val.role != Role::constant) continue;
      if (val.role == Role::constant && !float_const_.count(val.name)) continue;  // folded constants stay
      ParamRole r = role[v];
      if (r == ParamRole::none) {
        // A float graph input read as a plain operand is trained too, initialised to zeros (no layer tells its
        // PyTorch init); an initializer there stays a constant.
        if (val.role == Role::param) {
          if (val.dtype != DType::f32) fail(path_, ": graph input '", val.name, "' is neither the data input nor a parameter");
          val.init = ParamRole::zeros;
        }
        continue;
      }
      val.role = (r == ParamRole::running_mean || r == ParamRole::running_var) ? Role::buffer : Role::param;
      val.init = r;
    }
  }

 private:
  std::string path_;
  ImportOptions options_;
  Graph g_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, bool> float_const_;
  std::set<std::string> dropped_;
};

}  // namespace

Graph import_onnx(const std::string& path, const ImportOptions& options) {
  if (options.batch && *options.batch <= 0) fail("--batch must be a positive integer, got ", *options.batch);
  Importer imp(path, options);
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
