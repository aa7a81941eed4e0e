// ONNX import, reading: the model file (parsed and checked by ONNX's checker), its opsets, initializers, graph
// inputs (the data input at the given batch and input shape) and outputs, and the driver that hands the nodes to
// the translator (onnx_translate.h), which folds shape arithmetic (onnx_fold.h) and converts the rest.
#include "ir/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "ir/fuse_attention.h"
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
      if ((op.domain().empty() || op.domain() == "ai.onnx") && (op.version() < 7 || op.version() > 17))
        fail(path_, ": opset ", op.version(), " is not supported (monet reads opsets 7-17; exported models use 13)");
    read_initializers(gp);
    read_inputs(gp);
    translator_.convert_nodes(gp);
    for (const auto& out : gp.output()) {
      int v = translator_.lookup(out.name(), "graph output");
      if (g.values[v].role != Role::activation) fail(path_, ": graph output '", out.name(), "' is not computed by the graph");
      g.outputs.push_back(v);
    }
    if (g.outputs.empty()) fail(path_, ": the model has no outputs");
    translator_.decide_param_roles();
    g.verify();
    if (options_.fuse_attention) fuse_attention(g);
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

  void read_initializers(const onnx::GraphProto& gp) {
    for (const auto& t : gp.initializer()) translator_.add_initializer(t.name(), read_tensor(t, path_));
  }

  void read_inputs(const onnx::GraphProto& gp) {
    Graph& g = translator_.graph();
    for (const auto& in : gp.input()) {
      if (translator_.defines(in.name())) continue;  // an initializer listed as input
      const auto& tt = in.type().tensor_type();
      Value v;
      v.name = in.name();
      v.dtype = is_float_type(tt.elem_type()) ? DType::f32 : DType::i64;
      bool is_data = g.data_input < 0;
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
        g.data_input = translator_.add(std::move(v));
      } else {
        checked_tensor_numel(v.shape, path_, "input '" + in.name() + "'");
        v.role = Role::param;  // refined in decide_param_roles()
        translator_.add(std::move(v));
      }
    }
    if (g.data_input < 0) fail(path_, ": the model has no data input (every input has an initializer)");
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

}  // namespace monet
