// ONNX import, reading: the model file (parsed and checked by ONNX's checker), its opsets, initializers, graph
// inputs (the data input at the given batch and input shape) and outputs, and the driver that hands the nodes to
// the translator (onnx_translate.h), which folds shape arithmetic (onnx_fold.h) and converts the rest.
#include "ir/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/npy.h"
#include "ir/fuse_attention.h"
#include "ir/matmul_bias.h"
#include "ir/matmul_rows.h"
#include "ir/matmul_transpose.h"
#include "ir/fuse_bn_activation.h"
#include "ir/split_concat_conv.h"
#include "ir/split_slices.h"
#include "ops/common/plans.h"
#include "ir/onnx_tensor.h"
#include "ir/onnx_translate.h"

namespace monet {
namespace {

using onnx_import::checked_tensor_numel;
using onnx_import::is_float_type;
using onnx_import::read_tensor;
using onnx_import::Translator;

class Importer {
 public:
  // Reads the file at `path`, or `bytes` when given (then `path` only names the model in messages).
  Importer(std::string path, const ImportOptions& options, const std::string* bytes = nullptr)
      : path_(std::move(path)), options_(options), bytes_(bytes), translator_(path_) {}

  Graph run() {
    onnx::ModelProto model = load();
    const onnx::GraphProto& gp = model.graph();
    Graph& g = translator_.graph();
    g.model_name = std::filesystem::path(path_).stem().string();
    if (gp.node_size() == 0) fail(path_, ": the model's graph has no nodes");
    for (const auto& op : model.opset_import())
      if ((op.domain().empty() || op.domain() == "ai.onnx") && (op.version() < 7 || op.version() > 23))
        fail(path_, ": opset ", op.version(), " is not supported (monet reads opsets 7-23)");
    read_initializers(gp);
    read_inputs(gp);
    translator_.set_drop_identity_dropout(options_.drop_identity_dropout);
    for (const auto& op : model.opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") translator_.set_opset(op.version());
    translator_.convert_nodes(gp);
    for (const auto& out : gp.output()) {
      int v = translator_.lookup(out.name(), "graph output");
      if (g.values[v].role != Role::activation) fail(path_, ": graph output '", out.name(), "' is not computed by the graph");
      g.outputs.push_back(v);
    }
    if (g.outputs.empty()) fail(path_, ": the model has no outputs");
    translator_.decide_param_roles();
    g.verify();
    if (options_.fuse_attention) fuse_attention(g, options_.strided_attention);
    if (options_.split_slices) split_slices(g);
    if (options_.matmul_bias) matmul_bias(g);
    if (options_.matmul_transpose) matmul_transpose(g);
    if (options_.matmul_rows) matmul_rows(g, {.bias = options_.matmul_bias, .trans_b = options_.matmul_transpose});
    if (options_.split_concat_conv) split_concat_conv(g);
    if (options_.fuse_bn_activation) fuse_bn_activation(g);
    g.split_concat_conv = options_.split_concat_conv;
    g.fuse_loss_head = options_.fuse_loss_head;
    return std::move(g);
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
    // The checker knows the opsets of the ONNX library monet is built with (onnx 1.12 on Debian 12: up to 17). A
    // model of a later opset is left to the translator's own checks (each op's inputs, attributes and shapes,
    // lib/ops): the older schemas would refuse its valid nodes (opset 18's ReduceMean reads axes as an input).
    const int64_t known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
    for (const auto& op : model.opset_import())
      if ((op.domain().empty() || op.domain() == "ai.onnx") && op.version() > known) {
        for (const auto& n : model.graph().node()) check_arity(n, known);
        return model;
      }
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

  // What the translator takes from the checker in a model of a later opset: every node has an output, one input
  // (Constant apart), and at least the inputs and outputs the newest schema the library knows requires, each
  // required input named. Later opsets lowered no minimum of an op monet reads, so the older schema's minimum
  // holds; its maximum does not (opset 18's ReduceMean gained an axes input) and is left to the translator.
  void check_arity(const onnx::NodeProto& n, int64_t known) const {
    const auto where = [&] { return "node '" + n.name() + "' (" + n.op_type() + ")"; };
    if (n.output_size() < 1) fail(path_, ": ", where(), " has no outputs");
    if (n.input_size() < 1 && n.op_type() != "Constant") fail(path_, ": ", where(), " has no inputs");
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const onnx::OpSchema* schema =
        onnx_domain ? onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(known), "") : nullptr;
    if (!schema) return;  // an op newer than the library (opset 20's Gelu): the translator's rule checks it
    if (n.input_size() < schema->min_input())
      fail(path_, ": ", where(), " has ", n.input_size(), " inputs (needs at least ", schema->min_input(), ")");
    if (n.output_size() < schema->min_output())
      fail(path_, ": ", where(), " has ", n.output_size(), " outputs (needs at least ", schema->min_output(), ")");
    const auto& formal = schema->inputs();
    for (int i = 0; i < n.input_size() && i < static_cast<int>(formal.size()); ++i)
      if (n.input(i).empty() && formal[i].GetOption() == onnx::OpSchema::Single)
        fail(path_, ": ", where(), " leaves its required input ", i, " (", formal[i].GetName(), ") unnamed");
  }

  void read_initializers(const onnx::GraphProto& gp) {
    for (const auto& t : gp.initializer()) translator_.add_initializer(t.name(), read_tensor(t, path_));
  }

  // Graph inputs without an initializer, in order. The first is the data input (its first dimension the batch);
  // a later one is a data input too when its first dimension is symbolic (torch.onnx.export's dynamic_axes), as
  // token models' attention masks and token types are. A dimension named like one of the first input's takes its
  // size. Another input of static shape is a parameter (float) or, named by --input, takes the file's values as
  // an initializer would; an integer one without a file is an error (an integer buffer the export left out).
  void read_inputs(const onnx::GraphProto& gp) {
    Graph& g = translator_.graph();
    std::map<std::string, int64_t> symbols;  // the data input's named dimensions
    for (const auto& [name, file] : options_.input_files) {
      bool found = false;
      for (const auto& in : gp.input()) found = found || in.name() == name;
      if (!found) fail(path_, ": --input ", name, "=", file, ": the model has no graph input '", name, "'");
      if (translator_.defines(name))
        fail(path_, ": --input ", name, "=", file, ": '", name, "' has its values in the file (an initializer)");
    }
    for (const auto& in : gp.input()) {
      if (translator_.defines(in.name())) continue;  // an initializer listed as input
      const auto& tt = in.type().tensor_type();
      if (tt.shape().dim_size() > kMaxRank) fail(path_, ": input '", in.name(), "' has rank ", tt.shape().dim_size(),
                                                 ", more than ", kMaxRank, " dimensions");
      Value v;
      v.name = in.name();
      v.dtype = is_float_type(tt.elem_type()) ? DType::f32
                : tt.elem_type() == onnx::TensorProto::BOOL ? DType::u8
                                                             : DType::i64;
      const bool primary = g.data_input < 0;
      const bool symbolic_batch = tt.shape().dim_size() > 0 && !tt.shape().dim(0).has_dim_value();
      const bool is_data = primary || symbolic_batch;
      const auto file = options_.input_files.find(in.name());
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        int64_t size = dim.has_dim_value() ? dim.dim_value() : -1;
        if (primary && d == 0 && options_.batch) {
          if (size > 0 && size != *options_.batch) translator_.set_rebatch(size, *options_.batch);
          size = *options_.batch;
        }
        if (primary && d > 0 && options_.input_shape) continue;
        if (!primary && size <= 0 && dim.has_dim_param()) {
          if (auto it = symbols.find(dim.dim_param()); it != symbols.end()) size = it->second;
        }
        if (!primary && size <= 0 && d == 0 && !dim.has_dim_param() && is_data) size = g.values[g.data_input].shape[0];
        if (size <= 0) {
          if (primary && d == 0) fail(path_, ": data input '", in.name(), "' has a dynamic batch dimension: give --batch");
          if (primary) fail(path_, ": data input '", in.name(), "' dimension ", d, " is dynamic: give --input-shape");
          fail(path_, is_data ? ": data input '" : ": input '", in.name(), "' dimension ", d, " ('", dim.dim_param(),
               "') is dynamic", is_data ? " and not one of the first data input's dimensions" : " (parameters must have static shapes)");
        }
        if (primary && dim.has_dim_param()) symbols[dim.dim_param()] = size;
        v.shape.push_back(size);
      }
      if (primary && options_.input_shape) {
        if (v.shape.empty()) fail(path_, ": data input '", in.name(), "' has no batch dimension");
        for (int64_t d : *options_.input_shape) v.shape.push_back(d);
        for (int d = 1; d < tt.shape().dim_size(); ++d)
          if (tt.shape().dim(d).has_dim_param() && d < static_cast<int>(v.shape.size()))
            symbols[tt.shape().dim(d).dim_param()] = v.shape[static_cast<size_t>(d)];
      }
      const std::string what = (is_data ? "data input '" : "input '") + in.name() + "'";
      checked_tensor_numel(v.shape, path_, what);
      if (file != options_.input_files.end()) v.data = values_from_file(v, file->second);
      if (is_data) {
        if (v.shape.empty()) fail(path_, ": data input '", in.name(), "' is a scalar; expected (N, ...)");
        v.role = Role::input;
        const int id = translator_.add(std::move(v));
        if (primary) g.data_input = id;
      } else if (file != options_.input_files.end()) {
        translator_.add_initializer(v.name, {v.shape, v.dtype == DType::f32, std::move(v.data)});
      } else if (v.dtype != DType::f32) {
        fail(path_, ": graph input '", v.name, "' (", dtype_name(v.dtype), " ", shape_str(v.shape),
             ") is an integer buffer without values (a position or relative-position index the export left out): "
             "pass them with --input ", v.name, "=FILE.npy, or export with export_params=True or the buffer "
             "registered with persistent=False; a per-example input needs a symbolic first dimension "
             "(torch.onnx.export's dynamic_axes)");
      } else {
        v.role = Role::param;  // refined in decide_param_roles()
        translator_.add(std::move(v));
      }
    }
    if (g.data_input < 0) fail(path_, ": the model has no data input (every input has an initializer)");
  }

  // FILE's values for graph input v: its shape must be v's, its dtype float for a float input and integer or bool
  // for any other; an integer input's values must be integers (bool: 0 or 1).
  std::vector<double> values_from_file(const Value& v, const std::string& file) const {
    const std::string where = path_ + ": --input " + v.name + "=" + file;
    npy::Array a;
    try {
      a = npy::read(file);
    } catch (const Error& e) {
      fail(where, ": ", e.what());
    }
    if (a.shape != v.shape)
      fail(where, ": the file holds ", shape_str(a.shape), ", the input is ", shape_str(v.shape),
           " (its batch from --batch where the first dimension is symbolic)");
    const bool want_float = v.dtype == DType::f32;
    if (npy::is_float(a) != want_float)
      fail(where, ": the file holds ", a.descr, " values, the input is ", dtype_name(v.dtype),
           want_float ? " (save it as float32 or float64)" : " (save it as int64, int32 or bool)");
    std::vector<double> x = npy::as_values(a);
    for (double e : x) {
      if (!std::isfinite(e)) fail(where, ": the file holds a non-finite value (", e, ")");
      if (v.dtype == DType::u8 && e != 0 && e != 1) fail(where, ": a bool input holds ", e);
    }
    return x;
  }

  static constexpr int kMaxRank = 16;

  std::string path_;
  ImportOptions options_;
  const std::string* bytes_;
  Translator translator_;  // holds the graph being built
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

void set_attention_mode(ImportOptions& o, const std::string& mode) {
  if (mode != "strided" && mode != "fused" && mode != "materialized")
    fail("attention '", mode, "': expected strided, fused or materialized");
  o.fuse_attention = mode != "materialized";
  o.strided_attention = mode == "strided";
}

const char* import_attention_mode(const ImportOptions& o) {
  return !o.fuse_attention ? "materialized" : o.strided_attention ? "strided" : "fused";
}

void set_loss_head_mode(ImportOptions& o, const std::string& mode) {
  if (mode != "fused" && mode != "separate") fail("--loss-head '", mode, "': expected fused or separate");
  o.fuse_loss_head = mode == "fused";
}

const char* import_loss_head_mode(const ImportOptions& o) { return o.fuse_loss_head ? "fused" : "separate"; }

void set_concat_conv_mode(ImportOptions& o, const std::string& mode) {
  if (mode != "split" && mode != "joined") fail("--concat-conv '", mode, "': expected split or joined");
  o.split_concat_conv = mode == "split";
}

const char* import_concat_conv_mode(const ImportOptions& o) { return o.split_concat_conv ? "split" : "joined"; }

void set_bn_activation_mode(ImportOptions& o, const std::string& mode) {
  if (mode != "fused" && mode != "separate") fail("--bn-activation '", mode, "': expected fused or separate");
  o.fuse_bn_activation = mode == "fused";
}

const char* import_bn_activation_mode(const ImportOptions& o) { return o.fuse_bn_activation ? "fused" : "separate"; }

void set_identity_dropout_mode(ImportOptions& o, const std::string& mode) {
  if (mode != "dropped" && mode != "kept") fail("--identity-dropout '", mode, "': expected dropped or kept");
  o.drop_identity_dropout = mode == "dropped";
}

const char* import_identity_dropout_mode(const ImportOptions& o) {
  return o.drop_identity_dropout ? "dropped" : "kept";
}

const char* identity_dropout_mode(const Graph& g) {
  std::vector<char> read(g.values.size(), 0);
  for (const Node& n : g.nodes)
    if (n.op != "DropoutGrad")  // the training graph's reader of every mask
      for (int v : n.inputs) read[v] = 1;
  for (int v : g.outputs) read[v] = 2;
  for (const Node& n : g.nodes)
    if (n.op == "Dropout" && ops::dropout_ratio(n.attrs) == 0 && n.outputs.size() == 2 && !read[n.outputs[1]] &&
        read[n.outputs[0]] != 2 && g.values[n.inputs[0]].producer >= 0)
      return "kept";
  return "dropped";
}

}  // namespace monet
