// LSTM and GRU at import, unrolled over the sequence (its length is known from the shapes) into monet's own ops, so
// that the planner keeps or recomputes each step's gates like any activation:
//
//   per direction d:  XW = MatMul(X, W_d^T) + Wb_d                        (every step at once: (T, B, G H))
//   per step t (reverse: from the last), H and C from the step before (initial_h, initial_c or zeros):
//     LSTM:  i, o, f, c~ = Split(XW[t] + H R_d^T + Rb_d)                  (ONNX's gate order i, o, f, c)
//            C = sigmoid(f) C + sigmoid(i) tanh(c~);   H = sigmoid(o) tanh(C)
//     GRU:   z, r = sigmoid(Split(XW[t][z, r] + H R_d[z, r]^T + Rb_d[z, r]))
//            h~ = tanh(XW[t][h] + r (H R_d[h]^T + Rb_d[h]))                 (linear_before_reset = 1, torch's)
//            h~ = tanh(XW[t][h] + (r H) R_d[h]^T + Rb_d[h])                 (linear_before_reset = 0)
//            H = (1 - z) h~ + z H
//   Y = Concat over t of Concat over d of H (T, D, B, H); Y_h, Y_c the last step of each direction (D, B, H).
//
// layout 1 (batch first) transposes X in and Y, Y_h, Y_c out. The first step's terms of a zero initial state are
// left out (they add exact zeros). Not taken, one error line each: sequence_lens, peepholes (P), activations other
// than the defaults, clip, input_forget, and more than 2^14 steps (all directions together).
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "ir/onnx_node.h"
#include "ir/onnx_translate.h"

namespace monet::onnx_import {

void Translator::convert_rnn(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  const bool lstm = n.op_type() == "LSTM";
  const int64_t G = lstm ? 4 : 3;  // gates
  int64_t hidden = 0, layout = 0, linear_before_reset = 0;
  std::string direction = "forward";
  for (const auto& a : n.attribute()) {
    const std::string& k = a.name();
    if (k == "hidden_size") hidden = a.i();
    else if (k == "layout") layout = a.i();
    else if (k == "linear_before_reset") linear_before_reset = a.i();
    else if (k == "direction") direction = a.s();
    else if (k == "clip") fail(where, ": clip is not supported");
    else if (k == "input_forget" && a.i() != 0) fail(where, ": input_forget = 1 is not supported");
    else if (k == "activations" || k == "activation_alpha" || k == "activation_beta")
      fail(where, ": attribute '", k, "' is not supported (the default activations only)");
  }
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    fail(where, ": direction '", direction, "' is not supported");
  auto given = [&](int i) { return i < n.input_size() && !n.input(i).empty(); };
  if (!given(0) || !given(1) || !given(2)) fail(where, ": expected inputs X, W and R");
  if (given(4)) fail(where, ": sequence_lens is not supported (every sequence of the full length)");
  if (lstm && given(7)) fail(where, ": peepholes (P) are not supported");
  const Shape x_shape = g_.values[lookup(n.input(0), "input")].shape;
  if (x_shape.size() != 3) fail(where, ": X has shape ", shape_str(x_shape), "; expected rank 3");
  const int64_t D = direction == "bidirectional" ? 2 : 1;
  const int64_t T = layout ? x_shape[1] : x_shape[0], B = layout ? x_shape[0] : x_shape[1], I = x_shape[2];
  // About 15 nodes a step and direction: a longer sequence would make a graph no plan could be solved for.
  constexpr int64_t kMaxSteps = 1 << 14;
  if (T * D > kMaxSteps)
    fail(where, ": ", T, " steps in ", D, " direction(s) are too many to unroll (at most ", kMaxSteps, " in all)");
  const Shape w = g_.values[lookup(n.input(1), "input")].shape, r = g_.values[lookup(n.input(2), "input")].shape;
  if (hidden < 1 || w != Shape{D, G * hidden, I} || r != Shape{D, G * hidden, hidden})
    fail(where, ": W ", shape_str(w), " and R ", shape_str(r), " do not match hidden_size ", hidden, ", ", D,
         " direction(s) and X ", shape_str(x_shape));
  if (given(3) && g_.values[lookup(n.input(3), "input")].shape != Shape{D, 2 * G * hidden})
    fail(where, ": B has shape ", shape_str(g_.values[lookup(n.input(3), "input")].shape), "; expected ",
         shape_str(Shape{D, 2 * G * hidden}));
  for (int i : {5, 6})
    if (given(i) && (i == 5 || lstm)) {
      const Shape s = g_.values[lookup(n.input(i), "input")].shape;
      const Shape want = layout ? Shape{B, D, hidden} : Shape{D, B, hidden};
      if (s != want) fail(where, ": input ", i, " has shape ", shape_str(s), "; expected ", shape_str(want));
    }
  const int64_t H = hidden;
  const std::string p = (n.output_size() > 0 && !n.output(0).empty() ? n.output(0) : name) + "/rnn";

  // Emitters: a constant of int64 values, and nodes by op, inputs, output and integer attributes.
  int next = 0;
  auto fresh = [&](const std::string& what) { return p + "/" + what + std::to_string(next++); };
  auto ints = [&](const std::vector<int64_t>& v) { return add_int64_const(fresh("c"), v); };
  auto node = [&](const std::string& op, const std::vector<std::string>& ins, const std::string& out,
                  const std::vector<onnx::AttributeProto>& attrs = {}) {
    convert_synthetic(op, ins, out, out, attrs);
    return out;
  };
  auto op1 = [&](const std::string& op, const std::vector<std::string>& ins) { return node(op, ins, fresh(op)); };
  auto slice = [&](const std::string& v, int64_t axis, int64_t from, int64_t to) {
    return node("Slice", {v, ints({from}), ints({to}), ints({axis})}, fresh("slice"));
  };
  auto reshape = [&](const std::string& v, const std::vector<int64_t>& shape) {
    return node("Reshape", {v, ints(shape)}, fresh("reshape"));
  };
  auto transpose = [&](const std::string& v, const std::vector<int64_t>& perm) {
    return node("Transpose", {v}, fresh("transpose"), {ints_attr("perm", perm)});
  };
  // Direction d of a (D, ...) input as (rest...).
  auto of_direction = [&](const std::string& v, int64_t d, const std::vector<int64_t>& rest) {
    return reshape(D == 1 ? v : slice(v, 0, d, d + 1), rest);
  };

  const std::string x = layout ? transpose(n.input(0), {1, 0, 2}) : n.input(0);
  std::string init_h, init_c;  // (D, B, H) in layout 0
  if (given(5)) init_h = layout ? transpose(n.input(5), {1, 0, 2}) : n.input(5);
  if (lstm && given(6)) init_c = layout ? transpose(n.input(6), {1, 0, 2}) : n.input(6);
  std::string one;
  if (!lstm) {
    one = fresh("one");
    add_const(one, ConstTensor{{}, true, {1.0}});
  }

  std::vector<std::vector<std::string>> y(static_cast<size_t>(T));  // y[t][d]: (1, 1, B, H)
  std::vector<std::string> last_h, last_c;
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const std::string wd = of_direction(n.input(1), d, {G * H, I}), rd = of_direction(n.input(2), d, {G * H, H});
    std::string xw = op1("MatMul", {x, transpose(wd, {1, 0})});  // (T, B, G H)
    std::string rb;                                             // R's bias (G H), where given
    if (given(3)) {
      const std::string bd = of_direction(n.input(3), d, {2 * G * H});
      xw = op1("Add", {xw, slice(bd, 0, 0, G * H)});
      rb = slice(bd, 0, G * H, 2 * G * H);
    }
    // GRU with linear_before_reset 0 multiplies H by r before R's h rows: R's z, r rows and h rows apart.
    const bool split_r = !lstm && linear_before_reset == 0;
    const std::string rt = transpose(split_r ? slice(rd, 0, 0, 2 * H) : rd, {1, 0});
    const std::string rt_h = split_r ? transpose(slice(rd, 0, 2 * H, 3 * H), {1, 0}) : "";
    const std::string rb_zr = split_r && !rb.empty() ? slice(rb, 0, 0, 2 * H) : rb;
    const std::string rb_h = split_r && !rb.empty() ? slice(rb, 0, 2 * H, 3 * H) : "";
    std::string h = init_h.empty() ? "" : of_direction(init_h, d, {B, H});
    std::string c = init_c.empty() ? "" : of_direction(init_c, d, {B, H});
    for (int64_t k = 0; k < T; ++k) {
      const int64_t t = reverse ? T - 1 - k : k;
      const std::string xt = reshape(slice(xw, 0, t, t + 1), {B, G * H});
      // H R^T (+ Rb) of the rows in rt, nothing for a zero state without a bias.
      std::string hr = h.empty() ? rb_zr : rb_zr.empty() ? op1("MatMul", {h, rt})
                                                         : op1("Add", {op1("MatMul", {h, rt}), rb_zr});
      if (lstm) {
        const std::string gates = hr.empty() ? xt : op1("Add", {xt, hr});
        std::vector<std::string> parts;
        onnx::NodeProto split;
        split.set_op_type("Split");
        split.set_name(fresh("split"));
        split.add_input(gates);
        split.add_input(ints({H, H, H, H}));
        for (int g = 0; g < 4; ++g) parts.push_back(split.name() + "_" + std::to_string(g));
        for (const std::string& o : parts) split.add_output(o);
        set_attr(split, int_attr("axis", 1));
        convert_node(split);
        const std::string i_g = op1("Sigmoid", {parts[0]}), o_g = op1("Sigmoid", {parts[1]});
        const std::string f_g = op1("Sigmoid", {parts[2]}), c_g = op1("Tanh", {parts[3]});
        const std::string ic = op1("Mul", {i_g, c_g});
        c = c.empty() ? ic : op1("Add", {op1("Mul", {f_g, c}), ic});
        h = op1("Mul", {o_g, op1("Tanh", {c})});
      } else {
        const std::string xzr = slice(xt, 1, 0, 2 * H), xh = slice(xt, 1, 2 * H, 3 * H);
        const std::string hzr = hr.empty() ? "" : split_r ? hr : slice(hr, 1, 0, 2 * H);
        const std::string zr = op1("Sigmoid", {hzr.empty() ? xzr : op1("Add", {xzr, hzr})});
        const std::string z = slice(zr, 1, 0, H), rg = slice(zr, 1, H, 2 * H);
        std::string inner;  // the h gate's recurrent term
        if (!split_r) {
          if (!hr.empty()) inner = op1("Mul", {rg, slice(hr, 1, 2 * H, 3 * H)});
        } else if (!h.empty()) {
          inner = op1("MatMul", {op1("Mul", {rg, h}), rt_h});
          if (!rb_h.empty()) inner = op1("Add", {inner, rb_h});
        } else if (!rb_h.empty()) {
          inner = rb_h;
        }
        const std::string hh = op1("Tanh", {inner.empty() ? xh : op1("Add", {xh, inner})});
        const std::string keep_new = op1("Mul", {op1("Sub", {one, z}), hh});
        h = h.empty() ? keep_new : op1("Add", {keep_new, op1("Mul", {z, h})});
      }
      y[static_cast<size_t>(t)].push_back(reshape(h, {1, 1, B, H}));
    }
    last_h.push_back(reshape(h, {1, B, H}));
    if (lstm) last_c.push_back(reshape(c, {1, B, H}));
  }

  // Outputs: Y (T, D, B, H), Y_h and Y_c (D, B, H); batch first (layout 1): (B, T, D, H) and (B, D, H).
  auto concat = [&](const std::vector<std::string>& parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : node("Concat", parts, fresh("concat"), {int_attr("axis", axis)});
  };
  auto emit = [&](int i, const std::string& v, const std::vector<int64_t>& batch_first) {
    if (i >= n.output_size() || n.output(i).empty()) return;
    const std::string src = layout ? transpose(v, batch_first) : v;
    node("Identity", {src}, n.output(i));
  };
  std::vector<std::string> steps;
  for (const auto& dirs : y) steps.push_back(concat(dirs, 1));
  emit(0, concat(steps, 0), {2, 0, 1, 3});
  emit(1, concat(last_h, 0), {1, 0, 2});
  if (lstm) emit(2, concat(last_c, 0), {1, 0, 2});
}

}  // namespace monet::onnx_import
