// Translation of ONNX nodes into our Graph: each node is folded (onnx_fold.h), or becomes one of our nodes with its
// attributes and constant inputs translated and its shape rule run; torch's opset-13 nn.LayerNorm and nn.GELU
// become one node each. Holds the graph being built; reading (onnx_import.cpp) adds the initializers and inputs
// first and the outputs last. Internal to the importer: included only by lib/ir/onnx_*.cpp.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/onnx_tensor.h"

namespace monet::onnx_import {

class Translator {
 public:
  // `path` names the model in messages.
  explicit Translator(std::string path) : path_(std::move(path)) {}

  Graph& graph() { return g_; }
  bool defines(const std::string& name) const { return by_name_.count(name) != 0; }
  // The value's id; an error naming `what` ("input", "graph output") if no value has this name.
  int lookup(const std::string& name, const char* what);
  int add(Value v);
  // An initializer: a constant until a node reads it in a parameter slot (decide_param_roles()).
  void add_initializer(const std::string& name, ConstTensor c);

  // Every node in graph order, after the initializers and inputs are added.
  void convert_nodes(const onnx::GraphProto& gp);
  // Whether an identity Dropout whose mask nothing reads becomes no node (ImportOptions::drop_identity_dropout).
  void set_drop_identity_dropout(bool drop) { drop_identity_dropout_ = drop; }
  // The model's ai.onnx opset: Softmax and LogSoftmax before 13 flatten their input to 2-D at the axis.
  void set_opset(int64_t opset) { opset_ = opset; }
  // The file fixes the data input's batch at `file_batch` and the import runs it at `batch` (--batch): a Reshape to
  // a constant shape that keeps the batch, written with the file's, keeps the import's (batch_following_shape).
  void set_rebatch(int64_t file_batch, int64_t batch) { rebatch_ = {file_batch, batch}; }

  // Once every node is in: which graph inputs and initializers are params, buffers or constants, and how each
  // param is initialised.
  void decide_param_roles();

 private:
  // A pattern of ONNX nodes made one node (onnx_translate.cpp, above match_fusions, shows both).
  struct Fusion {
    std::string op;          // LayerNorm or Gelu
    std::vector<int> nodes;  // the pattern's nodes in graph order; the last is where the node is emitted
    std::string x, scale, bias;
    int64_t axis = -1;
    double epsilon = 0, divisor = 0;
  };

  bool is_const(const std::string& name) const;
  ConstTensor const_of(const std::string& name);
  void add_const(const std::string& name, ConstTensor c);
  bool fold(const onnx::NodeProto& n, const std::string& where);

  void convert_node(const onnx::NodeProto& n);
  bool alias_identity_dropout(const onnx::NodeProto& n);
  std::optional<std::vector<int64_t>> batch_following_shape(const onnx::NodeProto& n);
  void convert_if(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  void add_node(Node node, const std::vector<std::string>& outs, const std::string& where);
  void convert_layer_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // InstanceNormalization and GroupNormalization as a LayerNorm over rows and a per-channel (or per-group) Mul and
  // Add (onnx_translate.cpp).
  // Softmax or LogSoftmax of opset < 13 (the input coerced to 2-D at the axis) as Reshape, the op, Reshape.
  // Upsample and Resize before opset 11 (scales alone, nearest) as opset 11's Resize.
  void convert_upsample(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  void convert_softmax_2d(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  void convert_instance_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  void convert_group_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // RMSNormalization (opset 23) as its formula's nodes (onnx_translate.cpp).
  void convert_rms_norm(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  void check_affine_inputs(const onnx::NodeProto& n, const Shape& want, const Shape& x, const std::string& where);
  bool const_all(const std::string& v, double want);
  bool is_identity_affine(const onnx::NodeProto& n);
  void emit_normalize_rows(const std::string& name, const std::string& x, double epsilon, const std::string& z,
                           const std::string& where);
  void emit_channel_affine(const std::string& name, const std::string& z, const std::string& scale,
                           const std::string& bias, size_t rank, const std::string& y);
  // Converts the ONNX node op(inputs; attrs) -> output named `name`, as if the model held it (onnx_node.h builds
  // the attributes).
  void convert_synthetic(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                         const std::string& name, const std::vector<onnx::AttributeProto>& attrs = {});
  // A 1-D int64 constant named `name` (a shape, axes, a slice's bounds); returns the name.
  std::string add_int64_const(const std::string& name, const std::vector<int64_t>& values);
  // Our node `op` named `name` of value ids `inputs` with `attrs`, its one output named `out`; the output's id.
  int emit_node(const std::string& name, const std::string& op, std::vector<int> inputs, Attrs attrs,
                const std::string& out, const std::string& where);
  // Opset 23's Attention as the nodes of scaled dot-product attention, for the fusion to take (onnx_attention.cpp).
  void convert_attention(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool and Resize on (N, C, L) as the 2-D op over a
  // height of 1 (onnx_spatial_1d.cpp).
  bool is_spatial_1d(const onnx::NodeProto& n);
  void convert_spatial_1d(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // Conv on (N, C, D, H, W) as a sum over the kernel's depth of 2-D convolutions (onnx_conv_3d.cpp).
  bool is_conv_3d(const onnx::NodeProto& n);
  void convert_conv_3d(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // MaxPool and AveragePool of rank 5 and above whose window spans at most two spatial dims as the 2-D op
  // (onnx_pool_nd.cpp).
  bool is_pool_nd(const onnx::NodeProto& n);
  void convert_pool_nd(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  void convert_pool_3d(const onnx::NodeProto& n, const std::string& name, const Shape& x,
                       const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                       const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads);
  // Variadic Max and Min, a broadcasting Sum, ReduceSumSquare, ReduceL1, ReduceL2, ReduceMin, ReduceLogSumExp,
  // Celu, DepthToSpace, SpaceToDepth, Mean, Softsign, ThresholdedRelu, GlobalMaxPool and LRN as monet's own ops
  // (onnx_decompose.cpp).
  bool decomposes(const onnx::NodeProto& n);
  void convert_decomposed(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // LSTM and GRU unrolled over the sequence into monet's own ops (onnx_rnn.cpp).
  void convert_rnn(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // Einsum of two operands as Transpose, Reshape, MatMul, Reshape, Transpose (onnx_einsum.cpp).
  void convert_einsum(const onnx::NodeProto& n, const std::string& name, const std::string& where);
  // y = Gelu(x; divisor): opset 20's Gelu op and the erf form the fusion recognises.
  void emit_gelu(const std::string& name, const std::string& x, const std::string& y, double divisor,
                 const std::string& where);
  void emit_layer_norm(const std::string& name, const std::string& x, const std::string& scale,
                       const std::string& bias, int64_t axis, double epsilon, const std::vector<std::string>& outs,
                       const std::string& where);

  void match_fusions(const onnx::GraphProto& gp);
  static std::vector<int64_t> trailing_axes(const onnx::NodeProto& n);
  template <class OnlyReader, class Scalar, class IsLeaf, class Other>
  std::optional<Fusion> match_layer_norm(const onnx::GraphProto& gp, int i,
                                         const std::unordered_map<std::string, std::vector<int>>& readers,
                                         const std::set<std::string>& graph_outputs, OnlyReader only_reader,
                                         Scalar scalar, IsLeaf is_leaf, Other other);
  template <class OnlyReader, class Scalar, class Other>
  std::optional<Fusion> match_gelu(const onnx::GraphProto& gp, int i, OnlyReader only_reader, Scalar scalar,
                                   Other other);
  void convert_fusion(const onnx::GraphProto& gp, const Fusion& f);

  static bool is_onnx_op(const std::string& op);
  void normalise_outputs(const std::string& op, std::vector<std::string>& outs);
  static bool constant_like(const Value& v);
  ParamRole plain_operand_role(int v, const std::vector<ParamRole>& slot_role,
                               const std::vector<std::vector<int>>& consumers) const;

  std::string path_;
  Graph g_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, bool> float_const_;  // the initializers
  std::set<std::string> dropped_;
  std::unordered_map<int, Fusion> fusions_;  // by the index of the pattern's last ONNX node
  std::set<int> fused_inner_;                // the other nodes of each pattern (not converted alone)
  std::set<std::string> read_;               // names some node or the graph's outputs read
  std::set<std::string> graph_outputs_;
  bool drop_identity_dropout_ = true;
  int64_t opset_ = 13;
  std::optional<std::pair<int64_t, int64_t>> rebatch_;  // (the file's batch, the import's)
};

}  // namespace monet::onnx_import
