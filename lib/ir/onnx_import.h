// ONNX import (lib/ir/onnx_*.cpp, the only files that include ONNX headers). Loads a model file, runs ONNX's
// checker, folds the shape-computing subgraphs (shapes are fixed at a given batch) and converts it to our Graph,
// running our own shape rules node by node.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "ir/graph.h"

namespace monet {

struct ImportOptions {
  std::optional<int64_t> batch;          // replaces the data input's first dimension
  std::optional<Shape> input_shape;      // replaces the remaining dimensions (C,H,W)
  bool fuse_attention = true;            // one Attention node per scaled dot-product attention (fuse_attention.h)
  bool strided_attention = true;         // with its operands' Transposes and scalar scales taken in (the same)
  bool split_slices = true;              // one Split for Slices that cut an axis into pieces (split_slices.h)
  bool matmul_bias = true;               // a MatMul's bias Add taken into the MatMul (matmul_bias.h)
  bool matmul_transpose = true;          // a MatMul's weight read through its Transpose as stored (matmul_transpose.h)
  bool matmul_rows = true;               // a MatMul's A read through its Transpose as stored (matmul_rows.h)
  bool split_concat_conv = true;         // a Conv over a channel Concat as one Conv per input (split_concat_conv.h)
  bool fuse_bn_activation = true;        // a batch norm and the ReLU or Clip after it as one node (fuse_bn_activation.h)
  // A Dropout that is the identity (inference mode or ratio 0) and whose mask nothing reads as no node (its output
  // names its input's value; identity_dropout_mode below).
  bool drop_identity_dropout = true;
  // The training graph's cross-entropy and the output MatMul it reads as one node (fuse_linear_loss.h); carried
  // as Graph::fuse_loss_head.
  bool fuse_loss_head = true;
  // --input NAME=FILE.npy: graph input NAME takes FILE's values (shape and dtype class must match): a data input
  // keeps them for every step, an integer buffer (an input of static shape) becomes a constant at import.
  std::map<std::string, std::string> input_files;
};

// The options that import a model in an attention mode of fuse_attention.h's attention_mode() ("strided",
// "fused" or "materialized"; throws on any other string), and the mode that given options import in.
void set_attention_mode(ImportOptions& o, const std::string& mode);
const char* import_attention_mode(const ImportOptions& o);
// The same for the loss head (fuse_linear_loss.h loss_head_mode: "fused" or "separate"; any other string throws
// "--loss-head '<mode>': expected fused or separate").
void set_loss_head_mode(ImportOptions& o, const std::string& mode);
const char* import_loss_head_mode(const ImportOptions& o);
// The same for a convolution over a channel concatenation (split_concat_conv.h concat_conv_mode: "split" or
// "joined"; any other string throws "--concat-conv '<mode>': expected split or joined").
void set_concat_conv_mode(ImportOptions& o, const std::string& mode);
const char* import_concat_conv_mode(const ImportOptions& o);
// The same for a batch norm's activation (fuse_bn_activation.h bn_activation_mode: "fused" or "separate"; any other
// string throws "--bn-activation '<mode>': expected fused or separate").
void set_bn_activation_mode(ImportOptions& o, const std::string& mode);
const char* import_bn_activation_mode(const ImportOptions& o);
// The same for identity Dropouts ("dropped" or "kept"; any other string throws "--identity-dropout '<mode>':
// expected dropped or kept").
void set_identity_dropout_mode(ImportOptions& o, const std::string& mode);
const char* import_identity_dropout_mode(const ImportOptions& o);
// "kept" where g (imported or training graph) holds a Dropout the import would drop (the identity, its mask read by
// no node but a DropoutGrad, its output no graph output, its input a node's output), else "dropped": importing g's
// model with drop_identity_dropout gives g then.
const char* identity_dropout_mode(const Graph& g);

// Throws monet::Error with one line naming the file and the problem (node, op, value) on any failure.
Graph import_onnx(const std::string& path, const ImportOptions& options);

// The same from a model file's bytes in memory (the fuzz target's entry); `name` stands for the file in messages
// and gives the model its name (the stem, as for a path).
Graph import_onnx_bytes(const std::string& bytes, const std::string& name, const ImportOptions& options);

// Limits the importer enforces so that a strange file gets an error line instead of an overflow or an allocation
// of exabytes: any one tensor's bytes (any dtype, up to 8 bytes an element), and the values a folded constant
// (a shape-computing subgraph, evaluated at import) may hold.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 44;  // 16 TiB: no device has this much
inline constexpr int64_t kMaxFoldedValues = int64_t{1} << 24;

// Parses "C,H,W" (positive integers) into a shape; throws on anything else.
Shape parse_input_shape(const std::string& text);

}  // namespace monet
