// Translation of ONNX nodes into our Graph, one node at a time: folded when its output is a constant (onnx_fold.cpp),
// otherwise one of our nodes, with ONNX attributes as ours, constant inputs the op declares static moved into
// attributes, our fixed output lists, and its shape rule run. Also the two multi-node patterns torch exports
// (nn.LayerNorm, nn.GELU) made one node each, and the roles of graph inputs and initializers once every reader is
// known.
#include "ir/onnx_translate.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>

#include "core/error.h"
#include "ir/onnx_fold.h"
#include "ir/onnx_node.h"
#include "ops/op.h"

namespace monet::onnx_import {
namespace {

// One ONNX attribute as ours; graph- and tensor-valued attributes have no counterpart.
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

}  // namespace

// ------------------------------------------------------------------------------------------- the graph's values

int Translator::lookup(const std::string& name, const char* what) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) fail(path_, ": ", what, " '", name, "' is not defined");
  return it->second;
}

int Translator::add(Value v) {
  std::string name = v.name;
  int id = g_.add_value(std::move(v));
  by_name_[name] = id;
  return id;
}

void Translator::add_initializer(const std::string& name, ConstTensor c) {
  float_const_[name] = c.is_float;
  add_const(name, std::move(c));
}

bool Translator::is_const(const std::string& name) const {
  auto it = by_name_.find(name);
  return it != by_name_.end() && g_.values[it->second].role == Role::constant;
}

ConstTensor Translator::const_of(const std::string& name) { return as_const(g_.values[lookup(name, "value")]); }

void Translator::add_const(const std::string& name, ConstTensor c) {
  Value v;
  v.name = name;
  v.shape = c.shape;
  v.dtype = c.is_float ? DType::f32 : DType::i64;
  v.role = Role::constant;
  v.data = std::move(c.data);
  add(std::move(v));
}

// ------------------------------------------------------------------------------------------- nodes

void Translator::convert_nodes(const onnx::GraphProto& gp) {
  match_fusions(gp);
  for (const auto& n : gp.node())
    for (const std::string& in : n.input()) read_.insert(in);
  for (const auto& o : gp.output()) {
    read_.insert(o.name());
    graph_outputs_.insert(o.name());
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    if (auto m = fusions_.find(i); m != fusions_.end()) {
      convert_fusion(gp, m->second);
    } else if (!fused_inner_.count(i)) {
      convert_node(gp.node(i));
    }
  }
}

// A node whose output is a constant becomes that constant (onnx_fold.h); false if it is not foldable here, and it
// becomes a runtime node.
// A float initializer is never folded into: it may be a parameter (decide_param_roles decides after the nodes),
// and a node computed from it at import would freeze it (-w, max(w, 0), w.sum() computed once, never trained).
bool Translator::fold(const onnx::NodeProto& n, const std::string& where) {
  for (const std::string& in : n.input())
    if (auto it = float_const_.find(in); it != float_const_.end() && it->second) return false;
  std::optional<ConstTensor> out = fold_node(n, where, [&](const std::string& name) -> const Value* {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &g_.values[it->second];
  });
  if (!out) return false;
  add_const(n.output(0), std::move(*out));
  return true;
}

// A file exported at a fixed batch B0 writes the batch into constant shapes: Reshape(x, (B0, -1)) flattens each
// example (the model zoo's older CNNs, static-shape exports). Imported at batch B != B0 (--batch), where x's first
// dim is B and the shape's is B0, and the shape's other entries take x's other dims (a -1 that divides them, or a
// product equal to theirs; a 0 copies x's dim, as allowzero 0 reads it), the shape becomes (B, ...): the Reshape
// keeps the batch, as it did at B0. Any other Reshape is left as written (nullopt).
std::optional<std::vector<int64_t>> Translator::batch_following_shape(const onnx::NodeProto& n) {
  if (!rebatch_ || n.input_size() != 2 || !defines(n.input(0)) || !is_const(n.input(1)) ||
      attr_int(n, "allowzero", 0) != 0)
    return std::nullopt;
  const auto [file_batch, batch] = *rebatch_;
  const Shape& x = g_.values[lookup(n.input(0), "input")].shape;
  std::vector<int64_t> shape = ints_of(const_of(n.input(1)));
  if (x.empty() || x[0] != batch || shape.empty() || shape[0] != file_batch) return std::nullopt;
  const int64_t per_example = numel(Shape(x.begin() + 1, x.end()));
  int64_t known = 1;
  int wildcards = 0;
  for (size_t i = 1; i < shape.size(); ++i) {
    const int64_t e = shape[i] == 0 && i < x.size() ? x[i] : shape[i];
    if (e == -1) ++wildcards;
    else if (e <= 0 || e > per_example / known) return std::nullopt;  // known * e > per_example
    else known *= e;
  }
  const bool keeps = wildcards == 0 ? known == per_example : wildcards == 1 && per_example % known == 0;
  if (!keeps) return std::nullopt;
  shape[0] = batch;
  return shape;
}

// An If whose condition is known at import becomes the nodes of the branch it takes, the branch's outputs named as
// the If's (a view of the same value; an Identity node where the output is a graph output or the branch passes a
// graph input through). torch writes one for a squeeze of a dim whose size the export did not know,
// If(Equal(Shape(x)[d], 1)) then Squeeze(x) else Identity(x), whose condition folds once shapes are fixed. A
// branch's initializers are constants. A condition computed at run time is refused.
void Translator::convert_if(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() != 1 || n.input(0).empty() || !is_const(n.input(0)))
    fail(where, ": the condition must be known at import (a condition computed at run time is not supported)");
  const ConstTensor cond = const_of(n.input(0));
  if (cond.data.size() != 1) fail(where, ": the condition has ", cond.data.size(), " elements; expected one");
  const std::string branch = cond.data[0] != 0 ? "then_branch" : "else_branch";
  const onnx::AttributeProto* a = find_attr(n, branch);
  if (!a || !a->has_g()) fail(where, ": the ", branch, " graph is missing");
  const onnx::GraphProto& g = a->g();
  if (g.output_size() != n.output_size())
    fail(where, ": the ", branch, " has ", g.output_size(), " outputs; the If has ", n.output_size());
  for (const auto& t : g.initializer()) add_const(t.name(), read_tensor(t, where));
  for (const auto& m : g.node())
    for (const std::string& in : m.input()) read_.insert(in);
  for (const auto& m : g.node()) convert_node(m);
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty()) continue;
    const int v = lookup(g.output(i).name(), "branch output");
    if (!graph_outputs_.count(n.output(i)) && (g_.values[v].producer >= 0 || g_.values[v].role == Role::constant))
      by_name_[n.output(i)] = v;
    else
      convert_synthetic("Identity", {g.output(i).name()}, n.output(i), name + "/output" + std::to_string(i));
  }
}

// A Dropout that is the identity (inference mode, training_mode absent or 0, or a ratio of 0), whose mask nothing
// reads, becomes no node: its output names its input's value. torch's dynamo exporter writes
// Dropout(P, dropout_p) between scaled_dot_product_attention's Softmax and its last MatMul even at dropout_p = 0;
// without it the attention fusion sees the pattern. Kept as a node where its output is a graph output or its input
// is not a node's output (a graph input), so that no graph output or input changes its value.
bool Translator::alias_identity_dropout(const onnx::NodeProto& n) {
  if (n.input_size() < 1 || n.output_size() < 1 || n.input(0).empty()) return false;
  auto constant = [&](int i, double dflt) -> std::optional<double> {
    if (i >= n.input_size() || n.input(i).empty()) return dflt;
    if (!is_const(n.input(i))) return std::nullopt;
    const ConstTensor c = const_of(n.input(i));
    if (c.data.size() != 1) return std::nullopt;
    return c.data[0];
  };
  const std::optional<double> ratio = constant(1, 0.5), training = constant(2, 0);
  if (!ratio || !training || (*training != 0 && *ratio != 0)) return false;
  if (n.output_size() > 1 && !n.output(1).empty() && read_.count(n.output(1))) return false;
  if (graph_outputs_.count(n.output(0))) return false;
  auto in = by_name_.find(n.input(0));
  if (in == by_name_.end() || g_.values[in->second].producer < 0) return false;
  by_name_[n.output(0)] = in->second;
  return true;
}

void Translator::convert_node(const onnx::NodeProto& n) {
  std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(g_.nodes.size()) : n.name();
  std::string where = path_ + ": node '" + name + "' (" + n.op_type() + ")";
  if (!n.domain().empty() && n.domain() != "ai.onnx") fail(where, ": op domain '", n.domain(), "' is not supported");
  if (fold(n, where)) return;
  if (n.op_type() == "Dropout" && drop_identity_dropout_ && alias_identity_dropout(n)) return;
  if (n.op_type() == "If") return convert_if(n, name, where);
  if (n.op_type() == "Reshape")
    if (auto shape = batch_following_shape(n)) {
      onnx::NodeProto m = n;
      m.set_name(name);
      m.set_input(1, add_int64_const(n.output(0) + "/batch_shape", *shape));
      return convert_node(m);
    }
  if (n.op_type() == "CastLike" && n.input_size() == 2) {
    // At run time: Cast to the second input's type (bool for a u8 value).
    onnx::NodeProto cast = n;
    cast.set_op_type("Cast");
    cast.mutable_input()->RemoveLast();
    const DType like = g_.values[lookup(n.input(1), "input")].dtype;
    set_attr(cast, int_attr("to", like == DType::f32   ? onnx::TensorProto::FLOAT
                                  : like == DType::i64 ? onnx::TensorProto::INT64
                                                       : onnx::TensorProto::BOOL));
    if (cast.name().empty()) cast.set_name(name);
    return convert_node(cast);
  }
  if (n.op_type() == "LayerNormalization") return convert_layer_norm(n, name, where);
  if (n.op_type() == "InstanceNormalization") return convert_instance_norm(n, name, where);
  if ((n.op_type() == "Softmax" || n.op_type() == "LogSoftmax") && opset_ < 13)
    return convert_softmax_2d(n, name, where);
  if (n.op_type() == "GroupNormalization") return convert_group_norm(n, name, where);
  if (n.op_type() == "RMSNormalization") return convert_rms_norm(n, name, where);
  if (n.op_type() == "Attention") return convert_attention(n, name, where);
  if (n.op_type() == "Upsample" || (n.op_type() == "Resize" && opset_ < 11)) return convert_upsample(n, name, where);
  if (n.op_type() == "Gelu") {
    // Opset 20's Gelu is our Gelu with c = sqrt 2 (lib/ops/gelu); its tanh approximation is not built.
    const std::string approximate = attr_string(n, "approximate", "none");
    if (approximate != "none") fail(where, ": approximate '", approximate, "' is not supported (none)");
    if (n.input_size() != 1 || n.output_size() != 1) fail(where, ": Gelu takes one input and one output");
    return emit_gelu(name, n.input(0), n.output(0), std::numbers::sqrt2, where);
  }
  if (n.op_type() == "Einsum") return convert_einsum(n, name, where);
  if (is_spatial_1d(n)) return convert_spatial_1d(n, name, where);
  if (is_pool_nd(n)) return convert_pool_nd(n, name, where);
  if (is_conv_3d(n)) return convert_conv_3d(n, name, where);
  if (decomposes(n)) return convert_decomposed(n, name, where);
  if (n.op_type() == "LSTM" || n.op_type() == "GRU") return convert_rnn(n, name, where);
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
void Translator::add_node(Node node, const std::vector<std::string>& outs, const std::string& where) {
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
void Translator::convert_layer_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() < 2 || n.input(0).empty() || n.input(1).empty())
    fail(where, ": expected inputs X and Scale (and an optional B)");
  const double epsilon = attr_float(n, "epsilon", 1e-5);
  const int64_t axis = attr_int(n, "axis", -1);
  const bool has_bias = n.input_size() > 2 && !n.input(2).empty();
  std::vector<std::string> outs = {n.output(0)};
  for (int i = 1; i <= 2; ++i)
    outs.push_back(i < n.output_size() && !n.output(i).empty() ? n.output(i)
                                                                 : n.output(0) + (i == 1 ? "/mean" : "/invstd"));
  emit_layer_norm(name, n.input(0), n.input(1), has_bias ? n.input(2) : "", axis, epsilon, outs, where);
}

// Softmax and LogSoftmax before opset 13 normalise over every dim from `axis` on (default 1), the input seen as
// (outer, inner). Where that is the last dim alone it is opset 13's op; otherwise
//   Y = Softmax(X; axis)  =>  Y = Reshape(Softmax(Reshape(X, (outer, inner)); axis = 1), X's shape)
void Translator::convert_softmax_2d(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() != 1 || n.input(0).empty() || n.output_size() != 1)
    fail(where, ": expected one input and one output");
  const Shape x = g_.values[lookup(n.input(0), "input")].shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = attr_int(n, "axis", 1);
  if (rank == 0 || axis < -rank || axis >= rank)
    fail(where, ": axis ", axis, " is out of range for input shape ", shape_str(x));
  if (axis < 0) axis += rank;
  const auto emit = [&](const std::string& in, const std::string& out) {
    Node node;
    node.name = name;
    node.op = n.op_type();
    node.attrs.set("axis", int64_t{-1});
    node.inputs = {lookup(in, "input")};
    add_node(std::move(node), {out}, where);
  };
  const std::string& y = n.output(0);
  if (axis == rank - 1) return emit(n.input(0), y);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[static_cast<size_t>(d)];
  add_int64_const(name + "/rows_shape", {outer, outer ? numel(x) / outer : 0});
  add_int64_const(name + "/shape", x);
  convert_synthetic("Reshape", {n.input(0), name + "/rows_shape"}, y + "/rows_in", name + "/rows");
  emit(y + "/rows_in", y + "/rows_out");
  convert_synthetic("Reshape", {y + "/rows_out", name + "/shape"}, y, name + "/unrows");
}

// Upsample (opsets 7-9; deprecated since 10) and Resize before opset 11 take scales alone (Upsample-7 as an
// attribute, else as input 1) and map output pixel o to source pixel floor(o / scale): opset 11's Resize with
// coordinate_transformation_mode asymmetric and nearest_mode floor, as torch's F.interpolate(mode='nearest')
// computes it. Their linear mode is not taken.
void Translator::convert_upsample(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() < 1 || n.input(0).empty() || n.output_size() != 1)
    fail(where, ": expected input X and one output");
  std::string mode = "nearest";
  std::vector<double> scales;
  for (const auto& a : n.attribute()) {
    if (a.name() == "mode") mode = a.s();
    if (a.name() == "scales") scales.assign(a.floats().begin(), a.floats().end());
  }
  if (n.input_size() > 1 && !n.input(1).empty()) {
    if (!is_const(n.input(1))) fail(where, ": scales ('", n.input(1), "') must be a constant");
    scales = const_of(n.input(1)).data;
  }
  if (scales.empty()) fail(where, ": no scales given");
  if (mode != "nearest") fail(where, ": mode '", mode, "' before opset 11 is not supported (nearest)");
  Node node;
  node.name = name;
  node.op = "Resize";
  node.attrs.set("mode", std::string("nearest"));
  node.attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
  node.attrs.set("nearest_mode", std::string("floor"));
  node.attrs.set("scales", scales);
  node.inputs = {lookup(n.input(0), "input")};
  add_node(std::move(node), {n.output(0)}, where);
}

// InstanceNormalization(X, scale, B; epsilon) over X of shape (N, C, D...) normalises each (n, c) slice over D
// with biased variance, then scales and shifts per channel:
//   Y = InstanceNormalization(X, s, B)
//     =>  Z = LayerNorm(X, ones(D...), zeros(D...); axis = 2, epsilon);  Y = Add(Mul(Z, s'), B')
// with s' and B' of shape (C, 1, ...) (Reshape; folded where s and B are constants). The Mul is left out where s is
// a constant of ones and the Add where B is one of zeros: torch's GroupNorm export (Reshape to (N, G, -1),
// InstanceNormalization with constant ones and zeros, Reshape back, then its own affine Mul and Add) and an
// InstanceNorm2d without affine become one LayerNorm. Our LayerNorm keeps a mean and an inverse deviation per row.
void Translator::convert_instance_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() != 3 || n.input(0).empty() || n.input(1).empty() || n.input(2).empty())
    fail(where, ": expected inputs X, scale and B");
  const Shape x = g_.values[lookup(n.input(0), "input")].shape;
  if (x.size() < 3)
    fail(where, ": X has shape ", shape_str(x), "; InstanceNormalization needs rank >= 3 (N, C, D...)");
  check_affine_inputs(n, {x[1]}, x, where);
  const std::string& y = n.output(0);
  const bool affine = !is_identity_affine(n);
  const std::string z = affine ? y + "/normalized" : y;
  emit_normalize_rows(name, n.input(0), attr_float(n, "epsilon", 1e-5), z, where);
  if (affine) emit_channel_affine(name, z, n.input(1), n.input(2), x.size(), y);
}

// GroupNormalization(X, scale, B; num_groups G, epsilon) over X of shape (N, C, D...) normalises each group of C / G
// channels over the group's channels and D, then scales and shifts per channel (opset 21: scale and B of shape
// (C)) or per group (opset 18: (G); the same where G = C, so the shapes tell the two apart):
//   =>  Z = LayerNorm(Reshape(X, (N, G, C / G * D)), ones, zeros; axis = 2, epsilon);
//       per channel: Y = Add(Mul(Reshape(Z, X's shape), s'), B')    per group: Y = Reshape(Add(Mul(Z, s'), B'), ...)
void Translator::convert_group_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() != 3 || n.input(0).empty() || n.input(1).empty() || n.input(2).empty())
    fail(where, ": expected inputs X, scale and B");
  const Shape x = g_.values[lookup(n.input(0), "input")].shape;
  if (x.size() < 3) fail(where, ": X has shape ", shape_str(x), "; GroupNormalization needs rank >= 3 (N, C, D...)");
  const int64_t groups = attr_int(n, "num_groups", 0);
  if (groups < 1 || x[1] % groups != 0)
    fail(where, ": num_groups ", groups, " does not divide the ", x[1], " channels of X ", shape_str(x));
  const Shape scale = g_.values[lookup(n.input(1), "input")].shape;
  const bool per_group = scale == Shape{groups} && groups != x[1];
  check_affine_inputs(n, {per_group ? groups : x[1]}, x, where);
  const Shape grouped{x[0], groups, x[1] / groups * numel(Shape(x.begin() + 2, x.end()))};
  const std::string& y = n.output(0);
  const auto reshape = [&](const std::string& from, const Shape& to, const std::string& out, const char* suffix) {
    convert_synthetic("Reshape", {from, add_int64_const(name + suffix, to)}, out, name + suffix + "/reshape");
  };
  reshape(n.input(0), grouped, y + "/grouped", "/grouped_shape");
  const std::string z = y + "/normalized";
  emit_normalize_rows(name, y + "/grouped", attr_float(n, "epsilon", 1e-5), z, where);
  if (is_identity_affine(n)) return reshape(z, x, y, "/shape");
  if (per_group) {
    emit_channel_affine(name, z, n.input(1), n.input(2), grouped.size(), y + "/affine");
    return reshape(y + "/affine", x, y, "/shape");
  }
  reshape(z, x, y + "/ungrouped", "/shape");
  emit_channel_affine(name, y + "/ungrouped", n.input(1), n.input(2), x.size(), y);
}

// RMSNormalization(X, scale; axis, epsilon) (opset 23) over the dims from axis on, its formula as nodes:
//   Y = Mul(Div(X, Sqrt(Add(ReduceMean(Mul(X, X), axes = [axis..rank - 1]), epsilon))), scale)
// stash_type 1 (float) only: the engine computes in its own precision.
void Translator::convert_rms_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() != 2 || n.input(0).empty() || n.input(1).empty() || n.output_size() != 1)
    fail(where, ": expected inputs X and scale and one output Y");
  const Shape x = g_.values[lookup(n.input(0), "input")].shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = -1;
  for (const auto& a : n.attribute()) {
    if (a.name() == "axis") axis = a.i();
    if (a.name() == "stash_type" && a.i() != 1)
      fail(where, ": stash_type ", a.i(), " is not supported (1, float)");
  }
  if (rank < 1 || axis < -rank || axis >= rank)
    fail(where, ": axis ", axis, " is out of range for X of shape ", shape_str(x));
  if (axis < 0) axis += rank;
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  add_int64_const(name + "/axes", axes);
  add_const(name + "/epsilon", ConstTensor{{}, true, {attr_float(n, "epsilon", 1e-5)}});
  const std::string& y = n.output(0);
  convert_synthetic("Mul", {n.input(0), n.input(0)}, y + "/square", name + "/square");
  convert_synthetic("ReduceMean", {y + "/square", name + "/axes"}, y + "/mean_square", name + "/mean_square");
  convert_synthetic("Add", {y + "/mean_square", name + "/epsilon"}, y + "/plus_epsilon", name + "/plus_epsilon");
  convert_synthetic("Sqrt", {y + "/plus_epsilon"}, y + "/rms", name + "/rms");
  convert_synthetic("Div", {n.input(0), y + "/rms"}, y + "/normalized", name + "/normalize");
  convert_synthetic("Mul", {y + "/normalized", n.input(1)}, y, name + "/scale");
}

// Inputs 1 and 2 (scale, B) are floats of shape `want`.
void Translator::check_affine_inputs(const onnx::NodeProto& n, const Shape& want, const Shape& x,
                                     const std::string& where) {
  for (int i = 1; i <= 2; ++i) {
    const Value& v = g_.values[lookup(n.input(i), "input")];
    if (v.shape != want || v.dtype != DType::f32)
      fail(where, ": input ", i, " has shape ", shape_str(v.shape), "; expected float ", shape_str(want),
           " (per channel or group of X ", shape_str(x), ")");
  }
}

// Whether value v is a constant whose every element is `want`. A float initializer is not: it may be a parameter
// (an InstanceNorm's learned scale, stored at its initial ones), decided after the nodes (decide_param_roles).
bool Translator::const_all(const std::string& v, double want) {
  if (!is_const(v)) return false;
  if (auto it = float_const_.find(v); it != float_const_.end() && it->second) return false;
  const ConstTensor c = const_of(v);
  return std::all_of(c.data.begin(), c.data.end(), [&](double d) { return d == want; });
}

// Whether the scale (input 1) is a constant of ones and B (input 2) one of zeros.
bool Translator::is_identity_affine(const onnx::NodeProto& n) {
  return const_all(n.input(1), 1.0) && const_all(n.input(2), 0.0);
}

// z = LayerNorm(x, ones, zeros; axis = 2, epsilon): each (n, c) row of x normalised over the dims after c.
void Translator::emit_normalize_rows(const std::string& name, const std::string& x, double epsilon,
                                     const std::string& z, const std::string& where) {
  const Shape s = g_.values[lookup(x, "input")].shape;
  const Shape row(s.begin() + 2, s.end());
  add_const(name + "/ones", ConstTensor{row, true, std::vector<double>(static_cast<size_t>(numel(row)), 1.0)});
  emit_layer_norm(name, x, name + "/ones", "", 2, epsilon, {z, z + "/mean", z + "/invstd"}, where);
}

// y = z * scale' + bias' with scale and bias of shape (K) reshaped to (K, 1, ...) against z of shape (N, K, ...) of
// rank `rank`; a constant of ones leaves out the Mul, one of zeros the Add (not both: is_identity_affine keeps Z).
void Translator::emit_channel_affine(const std::string& name, const std::string& z, const std::string& scale,
                                     const std::string& bias, size_t rank, const std::string& y) {
  const bool scaled = !const_all(scale, 1.0), shifted = !const_all(bias, 0.0);
  std::vector<double> shape{static_cast<double>(numel(g_.values[lookup(scale, "input")].shape))};
  shape.resize(rank - 1, 1.0);
  add_const(name + "/channel_shape", ConstTensor{{static_cast<int64_t>(shape.size())}, false, shape});
  const auto per_channel = [&](const std::string& v, const char* suffix) {
    const std::string out = name + suffix;
    convert_synthetic("Reshape", {v, name + "/channel_shape"}, out, out);
    return out;
  };
  const std::string scaled_z = shifted ? y + "/scaled" : y;
  if (scaled) convert_synthetic("Mul", {z, per_channel(scale, "/scale")}, scaled_z, name + "/mul");
  if (shifted) convert_synthetic("Add", {scaled ? scaled_z : z, per_channel(bias, "/bias")}, y, name + "/add");
}

void Translator::convert_synthetic(const std::string& op, const std::vector<std::string>& inputs,
                                   const std::string& output, const std::string& name,
                                   const std::vector<onnx::AttributeProto>& attrs) {
  onnx::NodeProto m;
  m.set_op_type(op);
  m.set_name(name);
  for (const std::string& i : inputs) m.add_input(i);
  m.add_output(output);
  for (const auto& a : attrs) *m.add_attribute() = a;
  convert_node(m);
}

std::string Translator::add_int64_const(const std::string& name, const std::vector<int64_t>& values) {
  add_const(name, ConstTensor{{static_cast<int64_t>(values.size())}, false, {values.begin(), values.end()}});
  return name;
}

int Translator::emit_node(const std::string& name, const std::string& op, std::vector<int> inputs, Attrs attrs,
                          const std::string& out, const std::string& where) {
  Node node;
  node.name = name;
  node.op = op;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  add_node(std::move(node), {out}, where);
  return lookup(out, "value");
}

void Translator::emit_layer_norm(const std::string& name, const std::string& x, const std::string& scale,
                                 const std::string& bias, int64_t axis, double epsilon,
                                 const std::vector<std::string>& outs, const std::string& where) {
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

// ------------------------------------------------------------------------------------------- fusions
//
// What torch exports at opset 13 for nn.LayerNorm and nn.GELU, made one node each.
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
void Translator::match_fusions(const onnx::GraphProto& gp) {
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
std::vector<int64_t> Translator::trailing_axes(const onnx::NodeProto& n) {
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
std::optional<Translator::Fusion> Translator::match_layer_norm(
    const onnx::GraphProto& gp, int i, const std::unordered_map<std::string, std::vector<int>>& readers,
    const std::set<std::string>& graph_outputs, OnlyReader only_reader, Scalar scalar, IsLeaf is_leaf, Other other) {
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
std::optional<Translator::Fusion> Translator::match_gelu(const onnx::GraphProto& gp, int i, OnlyReader only_reader,
                                                          Scalar scalar, Other other) {
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

void Translator::emit_gelu(const std::string& name, const std::string& x, const std::string& y, double divisor,
                           const std::string& where) {
  Node node;
  node.name = name;
  node.op = "Gelu";
  node.attrs.set("divisor", divisor);
  node.inputs = {lookup(x, "input")};
  add_node(std::move(node), {y}, where);
}

void Translator::convert_fusion(const onnx::GraphProto& gp, const Fusion& f) {
  const onnx::NodeProto& last = gp.node(f.nodes.back());
  const std::string name = last.name().empty() ? f.op + "_" + std::to_string(g_.nodes.size()) : last.name();
  const std::string& y = last.output(0);
  const std::string where = path_ + ": node '" + name + "' (" + last.op_type() + ", the end of a " + f.op + ")";
  if (f.op == "Gelu") return emit_gelu(name, f.x, y, f.divisor, where);
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
bool Translator::is_onnx_op(const std::string& op) {
  return op.find("Grad") == std::string::npos && op != "ReduceSumTo" && op != "BroadcastTo" && op != "GatherIdx" &&
         op != "LayerNorm" && op != "Gelu" &&
         op != "SoftmaxCrossEntropy" && op != "SumLoss" && op != "SgdUpdate";
}

// Our nodes have a fixed output list per op where ONNX has optional outputs. Dropped outputs are remembered:
// a node that reads one is rejected in decide_param_roles().
void Translator::normalise_outputs(const std::string& op, std::vector<std::string>& outs) {
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

// ------------------------------------------------------------------------------------------- parameters

// Graph inputs and initializers read in a parameter slot become params (or buffers for running stats).
// A float graph input read as a plain operand is a param too, and so is a float initializer, where the file stores
// its parameters as initializers, unless it is constant_like(); plain_operand_role() picks their initialisation.
void Translator::decide_param_roles() {
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
  // A file whose parameters are graph inputs (export_params=False) keeps in its initializers only what is not one:
  // buffers torch embeds (non-persistent ones, rotary tables) and constants. Only where no float graph input is a
  // parameter may a float initializer read as a plain operand be one (constant_like).
  const bool params_are_inputs =
      std::any_of(g_.values.begin(), g_.values.end(), [](const Value& x) { return x.role == Role::param; });
  for (size_t v = 0; v < g_.values.size(); ++v) {
    Value& val = g_.values[v];
    if (val.role != Role::param && val.role != Role::constant) continue;
    if (val.role == Role::constant && !float_const_.count(val.name)) continue;  // folded constants stay
    ParamRole r = role[v];
    if (r == ParamRole::none) {
      if (val.role == Role::constant && val.dtype == DType::f32 && !params_are_inputs && !consumers[v].empty() &&
          !constant_like(val))
        val.role = Role::param;
      if (val.role == Role::param) val.init = plain_operand_role(static_cast<int>(v), role, consumers);
      continue;
    }
    val.role = (r == ParamRole::running_mean || r == ParamRole::running_var) ? Role::buffer : Role::param;
    val.init = r;
  }
}

// Whether a float initializer that nodes read only as plain operands stays a constant: a scalar (an epsilon, a
// scale) or one holding a non-finite value or one of magnitude >= 1e4 (an additive mask: -inf, -1e4, -1e9, the
// float's lowest). Every other such initializer is a parameter, as the same model exported with its parameters as
// graph inputs (export_params=False) has it: torch exports a Linear on a 3-D input as MatMul(x, Transpose(W)) and
// Add(b, ...), a layer scale or a learned position embedding as a plain Mul or Add, and all of them train in PyTorch.
bool Translator::constant_like(const Value& v) {
  if (numel(v.shape) < 2) return true;
  return std::any_of(v.data.begin(), v.data.end(), [](double d) { return !std::isfinite(d) || std::fabs(d) >= 1e4; });
}

// How to initialise a param no op slot names, from its first reader that tells (transformers export Linear
// and LayerNorm as plain ops):
//   a view (Reshape, Unsqueeze, ...)    -> the role of the slot its output fills (a 1-D Conv's weight,
//     into a slot                          unsqueezed to the 2-D Conv's, onnx_spatial_1d.cpp)
//   Transpose (2-D) into a weight slot  -> the slot's role, transposed: Linear's W (out, in) read as
//                                          MatMul(x, W^T) is a `weight` with fan_in = in, as in PyTorch
//   Mul by a vector (one dim > 1)       -> ones (LayerNorm gamma, ConvNeXt's layer scale)
//   Add/Sub of a vector                 -> bias (U(+-1/sqrt(fan_in)) after a MatMul, else zeros: LayerNorm beta)
//   anything else                       -> small_normal (ViT's class token and position embedding)
ParamRole Translator::plain_operand_role(int v, const std::vector<ParamRole>& slot_role,
                                         const std::vector<std::vector<int>>& consumers) const {
  const Shape& shape = g_.values[v].shape;
  const bool vector_like = std::count_if(shape.begin(), shape.end(), [](int64_t d) { return d > 1; }) <= 1;
  for (int n : consumers[v]) {
    const Node& node = g_.nodes[n];
    if (op_def(node.op).view && slot_role[node.outputs[0]] != ParamRole::none) return slot_role[node.outputs[0]];
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

}  // namespace monet::onnx_import
