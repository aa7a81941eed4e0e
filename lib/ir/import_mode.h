// How a graph was imported, as profiles and schedules record it so that a model imports to the same graph again:
// one string per import rewrite (each rewrite's file says what its strings mean). A file written before a rewrite
// existed lacks its field and imports without it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ir/graph.h"
#include "ir/onnx_import.h"

namespace monet {

struct ImportMode {
  std::string attention = "strided";  // "strided", "fused" or "materialized" (fuse_attention.h attention_mode)
  std::string slices = "split";       // "split" or "sliced" (split_slices.h slices_mode)
  std::string matmul_bias = "fused";  // "fused" or "separate" (matmul_bias.h matmul_bias_mode)
  std::string matmul_transpose = "fused";  // "fused" or "separate" (matmul_transpose.h matmul_transpose_mode)
  std::string matmul_rows = "fused";       // "fused" or "separate" (matmul_rows.h matmul_rows_mode)
  std::string loss_head = "fused";         // "fused" or "separate" (fuse_linear_loss.h loss_head_mode)
  std::string concat_conv = "split";       // "split" or "joined" (split_concat_conv.h concat_conv_mode)
  std::string bn_activation = "fused";     // "fused" or "separate" (fuse_bn_activation.h bn_activation_mode)
  std::string identity_dropout = "dropped";  // "dropped" or "kept" (onnx_import.h identity_dropout_mode)
  bool operator==(const ImportMode&) const = default;
};

// The mode a graph shows.
ImportMode import_mode_of(const Graph& g);

// The import options that give a graph of mode m; throws on a string outside a field's values.
void apply_import_mode(ImportOptions& o, const ImportMode& m);

// An explicit command-line flag's mode against the one a file records: fails "--<flag> <given> differs from the
// <what>'s <recorded> (<path>); omit --<flag> to use the <what>'s" where they differ.
void require_recorded_mode(const char* flag, const std::string& given, const std::string& recorded, const char* what,
                           const std::string& path);

// The fields "attention", "slices", "matmul_bias", "matmul_transpose", "matmul_rows", "loss_head", "concat_conv",
// "bn_activation" and "identity_dropout" of a profile's or schedule's top level: written, and read with each absent
// field at its value before its rewrite ("materialized", "sliced", "separate", "separate", "separate", "separate",
// "joined", "separate", "kept"); a bad value is one error naming `path` and the field.
void write_import_mode(nlohmann::json& j, const ImportMode& m);
ImportMode read_import_mode(const nlohmann::json& j, const std::string& path);

}  // namespace monet
