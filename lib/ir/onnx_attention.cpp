// Opset 23's Attention at import: the nodes an export of scaled dot-product attention writes, which the attention
// fusion (fuse_attention.h) then makes one Attention node with its operands read in place:
//
//   Y = Attention(Q, K, V[, attn_mask]; scale, is_causal, q_num_heads, kv_num_heads)
//     =>  rank 3 (B, T, H d): Q, K, V each Reshape (B, T, H, d) and Transpose (0, 2, 1, 3) to (B, H, T, d)
//         S = Mul(MatMul(Q, Transpose(K, (0, 1, 3, 2))), scale)        scale: 1 / sqrt(d) by default
//         M = Where(attn_mask, 0, -inf) (a bool mask: True takes part) | attn_mask; Add the causal mask
//             (-inf where key j > query i) where is_causal
//         O = MatMul(Softmax(Add(S, M), axis = -1), V)
//         rank 3: Y = Reshape(Transpose(O, (0, 2, 1, 3)), (B, T, H dv)), else Y = O
//
// Not taken, each with one error line: a KV cache (past_key, past_value, nonpad_kv_seqlen) or its outputs, the
// scores as an output (qk_matmul_output_mode), softcap, a softmax precision other than float, grouped heads
// (q_num_heads != kv_num_heads), a mask shorter than the keys (the op pads it).
#include <onnx/onnx_pb.h>

#include <cmath>
#include <optional>

#include "core/error.h"
#include "ir/onnx_import.h"
#include "ir/onnx_tensor.h"
#include "ir/onnx_translate.h"

namespace monet::onnx_import {

void Translator::convert_attention(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  if (n.input_size() < 3 || n.input(0).empty() || n.input(1).empty() || n.input(2).empty())
    fail(where, ": expected inputs Q, K and V");
  for (int i = 4; i < n.input_size(); ++i)
    if (!n.input(i).empty()) fail(where, ": input ", i, " (a KV cache or its lengths) is not supported");
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty()) fail(where, ": output ", i, " (the KV cache or the scores) is not supported");
  std::optional<double> scale;
  bool causal = false;
  int64_t q_heads = 0, kv_heads = 0;
  for (const auto& a : n.attribute()) {
    if (a.name() == "scale") scale = a.f();
    if (a.name() == "is_causal") causal = a.i() != 0;
    if (a.name() == "q_num_heads") q_heads = a.i();
    if (a.name() == "kv_num_heads") kv_heads = a.i();
    if (a.name() == "softcap" && a.f() != 0) fail(where, ": softcap ", a.f(), " is not supported (0)");
    if (a.name() == "qk_matmul_output_mode" && a.i() != 0)
      fail(where, ": qk_matmul_output_mode ", a.i(), " is not supported (0)");
    if (a.name() == "softmax_precision" && a.i() != onnx::TensorProto::FLOAT)
      fail(where, ": softmax_precision ", a.i(), " is not supported (1, float)");
  }
  const bool has_mask = n.input_size() > 3 && !n.input(3).empty();
  int ids[3];
  for (int i = 0; i < 3; ++i) ids[i] = lookup(n.input(i), "input");
  const Shape qs = g_.values[ids[0]].shape, ks = g_.values[ids[1]].shape, vs = g_.values[ids[2]].shape;
  const size_t rank = qs.size();
  if ((rank != 3 && rank != 4) || ks.size() != rank || vs.size() != rank)
    fail(where, ": Q ", shape_str(qs), ", K ", shape_str(ks), " and V ", shape_str(vs),
         " must all be of rank 4 (B, H, T, d) or all of rank 3 (B, T, H d)");
  if (rank == 3 && (q_heads < 1 || kv_heads < 1))
    fail(where, ": rank-3 inputs need q_num_heads and kv_num_heads");
  const int64_t heads_q = rank == 3 ? q_heads : qs[1], heads_kv = rank == 3 ? kv_heads : ks[1];
  if (heads_q != heads_kv)
    fail(where, ": ", heads_q, " query heads against ", heads_kv, " key and value heads (grouped heads) is not "
         "supported");
  if (rank == 3)
    for (const Shape* s : {&qs, &ks, &vs})
      if ((*s)[2] % heads_q != 0) fail(where, ": ", shape_str(*s), " does not split into ", heads_q, " heads");

  int step = 0;
  auto emit = [&](const std::string& op, std::vector<int> in, Attrs attrs, const std::string& out) {
    return emit_node(name + "/" + std::to_string(step++) + "_" + op, op, std::move(in), std::move(attrs), out, where);
  };
  auto ints = [](const char* key, std::vector<int64_t> v) {
    Attrs a;
    a.set(key, std::move(v));
    return a;
  };
  auto constant = [&](const std::string& suffix, Shape shape, std::vector<double> data) {
    add_const(name + suffix, ConstTensor{std::move(shape), true, std::move(data)});
    return lookup(name + suffix, "value");
  };
  const std::string& y = n.output(0);
  // (B, T, H d) -> (B, H, T, d)
  auto heads = [&](int x, const char* what) {
    const Shape s = g_.values[x].shape;  // a copy: emit adds values
    const int r = emit("Reshape", {x}, ints("shape", {s[0], s[1], heads_q, s[2] / heads_q}), y + "/" + what + "_split");
    return emit("Transpose", {r}, ints("perm", {0, 2, 1, 3}), y + "/" + what + "_heads");
  };
  const int q = rank == 3 ? heads(ids[0], "q") : ids[0];
  const int k = rank == 3 ? heads(ids[1], "k") : ids[1];
  const int v = rank == 3 ? heads(ids[2], "v") : ids[2];
  const Shape q4 = g_.values[q].shape;
  const int64_t t_q = q4[2], t_k = g_.values[k].shape[2];
  const int kt = emit("Transpose", {k}, ints("perm", {0, 1, 3, 2}), y + "/kt");
  const int s0 = emit("MatMul", {q, kt}, {}, y + "/scores");
  const double c = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q4[3]));
  int scores = emit("Mul", {s0, constant("/scale", {}, {c})}, {}, y + "/scaled");
  int mask = -1;
  if (has_mask) {
    mask = lookup(n.input(3), "input");
    const Shape mask_shape = g_.values[mask].shape;
    const DType mask_dtype = g_.values[mask].dtype;
    if (mask_shape.empty() || mask_shape.back() != t_k)
      fail(where, ": attn_mask ", shape_str(mask_shape), " must end in the ", t_k, " keys");
    const std::optional<ConstTensor> fixed =
        is_const(n.input(3)) ? std::optional<ConstTensor>(const_of(n.input(3))) : std::nullopt;
    if (fixed && !fixed->is_float) {  // a constant bool mask: its additive form
      std::vector<double> additive = fixed->data;
      for (double& a : additive) a = a != 0 ? 0.0 : -HUGE_VAL;
      mask = constant("/additive_mask", mask_shape, std::move(additive));
    } else if (mask_dtype == DType::u8) {  // a bool mask at run time
      mask = emit("Where", {mask, constant("/attend", {}, {0.0}), constant("/masked", {}, {-HUGE_VAL})}, {},
                  y + "/additive_mask");
    }
  }
  if (causal) {
    const int64_t cells = checked_numel({t_q, t_k}, kMaxFoldedValues, where, "causal mask");
    std::vector<double> upper(static_cast<size_t>(cells), 0.0);
    for (int64_t i = 0; i < t_q; ++i)
      for (int64_t j = i + 1; j < t_k; ++j) upper[static_cast<size_t>(i * t_k + j)] = -HUGE_VAL;
    const int causal_mask = constant("/causal_mask", {t_q, t_k}, std::move(upper));
    mask = mask < 0 ? causal_mask : emit("Add", {mask, causal_mask}, {}, y + "/mask");
  }
  if (mask >= 0) scores = emit("Add", {scores, mask}, {}, y + "/masked");
  Attrs last;
  last.set("axis", int64_t{-1});
  const int p = emit("Softmax", {scores}, last, y + "/probs");
  if (rank == 4) {
    emit("MatMul", {p, v}, {}, y);
    return;
  }
  const int o = emit("MatMul", {p, v}, {}, y + "/heads_out");
  const int ot = emit("Transpose", {o}, ints("perm", {0, 2, 1, 3}), y + "/joined");
  const Shape os = g_.values[ot].shape;
  emit("Reshape", {ot}, ints("shape", {os[0], os[1], os[2] * os[3]}), y);
}

}  // namespace monet::onnx_import
