// Import modes (import_mode.h): the graph's, the options', and their fields in profiles and schedules.
#include "ir/import_mode.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ir/fuse_attention.h"
#include "ir/fuse_bn_activation.h"
#include "ir/fuse_linear_loss.h"
#include "ir/matmul_bias.h"
#include "ir/matmul_rows.h"
#include "ir/matmul_transpose.h"
#include "ir/split_concat_conv.h"
#include "ir/split_slices.h"

namespace monet {
namespace {

// Each field: its name, its values, and its value in files written before its rewrite existed.
struct Field {
  const char* name;
  std::string ImportMode::*member;
  std::vector<std::string> values;
  const char* before;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"attention", &ImportMode::attention, {"strided", "fused", "materialized"}, "materialized"},
      {"slices", &ImportMode::slices, {"split", "sliced"}, "sliced"},
      {"matmul_bias", &ImportMode::matmul_bias, {"fused", "separate"}, "separate"},
      {"matmul_transpose", &ImportMode::matmul_transpose, {"fused", "separate"}, "separate"},
      {"matmul_rows", &ImportMode::matmul_rows, {"fused", "separate"}, "separate"},
      {"loss_head", &ImportMode::loss_head, {"fused", "separate"}, "separate"},
      {"concat_conv", &ImportMode::concat_conv, {"split", "joined"}, "joined"},
      {"bn_activation", &ImportMode::bn_activation, {"fused", "separate"}, "separate"},
      {"identity_dropout", &ImportMode::identity_dropout, {"dropped", "kept"}, "kept"},
  };
  return f;
}

void check(const Field& f, const std::string& value, const std::string& where) {
  if (std::find(f.values.begin(), f.values.end(), value) != f.values.end()) return;
  std::string expected;
  for (size_t i = 0; i < f.values.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == f.values.size() ? " or " : ", ") + f.values[i];
  fail(where, f.name, " '", value, "': expected ", expected);
}

}  // namespace

ImportMode import_mode_of(const Graph& g) {
  return {attention_mode(g),        slices_mode(g),      matmul_bias_mode(g), matmul_transpose_mode(g),
          matmul_rows_mode(g),      loss_head_mode(g),   concat_conv_mode(g), bn_activation_mode(g),
          identity_dropout_mode(g)};
}

void apply_import_mode(ImportOptions& o, const ImportMode& m) {
  for (const Field& f : fields()) check(f, m.*f.member, "");
  set_attention_mode(o, m.attention);
  o.split_slices = m.slices == "split";
  o.matmul_bias = m.matmul_bias == "fused";
  o.matmul_transpose = m.matmul_transpose == "fused";
  o.matmul_rows = m.matmul_rows == "fused";
  set_loss_head_mode(o, m.loss_head);
  set_concat_conv_mode(o, m.concat_conv);
  set_bn_activation_mode(o, m.bn_activation);
  set_identity_dropout_mode(o, m.identity_dropout);
}

void require_recorded_mode(const char* flag, const std::string& given, const std::string& recorded, const char* what,
                           const std::string& path) {
  if (given != recorded)
    fail("--", flag, " ", given, " differs from the ", what, "'s ", recorded, " (", path, "); omit --", flag,
         " to use the ", what, "'s");
}

void write_import_mode(nlohmann::json& j, const ImportMode& m) {
  for (const Field& f : fields()) j[f.name] = m.*f.member;
}

ImportMode read_import_mode(const nlohmann::json& j, const std::string& path) {
  ImportMode m;
  for (const Field& f : fields()) {
    std::string value = f.before;
    if (j.contains(f.name)) {
      if (!j[f.name].is_string()) fail(path, ": ", f.name, ": expected a string, got ", j[f.name].dump());
      value = j[f.name].get<std::string>();
    }
    check(f, value, path + ": ");
    m.*f.member = value;
  }
  return m;
}

}  // namespace monet
