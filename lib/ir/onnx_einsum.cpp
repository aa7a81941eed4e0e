// Einsum at import: a contraction of two operands, as torch exports torch.einsum (maxvit's attention:
// "bghid,bghjd->bghij" and "bghij,bghjd->bghid"), becomes the nodes a hand-written batched matmul would be:
//
//   Y = Einsum(A, B; "b i k, b k j -> b j i")
//     =>  A2 = Reshape(Transpose(A, batch + left + contracted), [b..., L, K])
//         B2 = Reshape(Transpose(B, batch + contracted + right), [b..., K, R])
//         Y  = Transpose(Reshape(MatMul(A2, B2), [b..., left..., right...]), to the output's order)
//
// Letters in both operands and the output are batch dims (sizes equal, or 1 on one side: MatMul broadcasts them),
// in both operands only are contracted, in one operand and the output are that side's free dims. A Transpose or
// Reshape that would change nothing is left out. Not taken: one or three operands, an ellipsis, a letter twice in
// one operand (a diagonal), a letter summed over one operand alone; each is an error naming the equation.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <numeric>

#include "core/error.h"
#include "ir/onnx_translate.h"

namespace monet::onnx_import {
namespace {

std::string without_spaces(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch != ' ') out += ch;
  return out;
}

bool has(const std::string& term, char letter) { return term.find(letter) != std::string::npos; }

}  // namespace

void Translator::convert_einsum(const onnx::NodeProto& n, const std::string& name, const std::string& where) {
  std::string equation;
  for (const auto& a : n.attribute())
    if (a.name() == "equation") equation = a.s();
  const std::string eq = without_spaces(equation);
  auto refuse = [&](const std::string& why) { fail(where, ": equation '", equation, "': ", why); };
  if (n.input_size() != 2) refuse("monet takes Einsum of two operands, this has " + std::to_string(n.input_size()));
  if (eq.find('.') != std::string::npos) refuse("an ellipsis (...) is not supported");
  const size_t comma = eq.find(','), arrow = eq.find("->");
  if (comma == std::string::npos || eq.find(',', comma + 1) != std::string::npos) refuse("expected two operands");
  const std::string a = eq.substr(0, comma);
  const std::string b = eq.substr(comma + 1, arrow == std::string::npos ? std::string::npos : arrow - comma - 1);
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {  // implicit output: the letters that appear once, in alphabetical order
    for (char ch = 'A'; ch <= 'z'; ++ch)
      if (std::isalpha(static_cast<unsigned char>(ch)) && (has(a, ch) + has(b, ch)) == 1) out += ch;
  }
  for (const std::string* term : std::initializer_list<const std::string*>{&a, &b, &out}) {
    for (size_t i = 0; i < term->size(); ++i) {
      if (!std::isalpha(static_cast<unsigned char>((*term)[i]))) refuse(std::string("'") + (*term)[i] + "' is not a letter");
      if (term->find((*term)[i], i + 1) != std::string::npos)
        refuse(std::string("letter '") + (*term)[i] + "' twice in one term (a diagonal) is not supported");
    }
  }
  for (char ch : out)
    if (!has(a, ch) && !has(b, ch)) refuse(std::string("output letter '") + ch + "' is in no operand");
  for (char ch : a + b)
    if (!has(out, ch) && !(has(a, ch) && has(b, ch)))
      refuse(std::string("letter '") + ch + "' is summed over one operand alone (not supported)");

  const int ia = lookup(n.input(0), "input"), ib = lookup(n.input(1), "input");
  const Shape sa = g_.values[ia].shape, sb = g_.values[ib].shape;
  if (sa.size() != a.size() || sb.size() != b.size())
    fail(where, ": equation '", equation, "' does not fit operands of shapes ", shape_str(sa), " and ", shape_str(sb));
  if (g_.values[ia].dtype != DType::f32 || g_.values[ib].dtype != DType::f32)
    fail(where, ": Einsum of non-float operands is not supported");
  auto size_in = [](const std::string& term, const Shape& s, char ch) { return s[term.find(ch)]; };

  std::string batch, left, right, contracted;
  for (char ch : out) {
    if (has(a, ch) && has(b, ch)) batch += ch;
    else if (has(a, ch)) left += ch;
    else right += ch;
  }
  for (char ch : a)
    if (has(b, ch) && !has(out, ch)) contracted += ch;
  for (char ch : batch + contracted) {
    const int64_t x = size_in(a, sa, ch), y = size_in(b, sb, ch);
    if (x != y && (has(contracted, ch) || (x != 1 && y != 1)))
      fail(where, ": equation '", equation, "': letter '", ch, "' is ", x, " in ", shape_str(sa), " and ", y, " in ",
           shape_str(sb));
  }

  int step = 0;
  auto emit = [&](const std::string& op, int x, Attrs attrs, const std::string& out_name) {
    return emit_node(name + "/einsum_" + std::to_string(step++) + "_" + op, op, {x}, std::move(attrs), out_name, where);
  };
  auto permute = [&](int x, const std::string& from, const std::string& to, const std::string& out_name) {
    std::vector<int64_t> perm;
    for (char ch : to) perm.push_back(static_cast<int64_t>(from.find(ch)));
    std::vector<int64_t> identity(perm.size());
    std::iota(identity.begin(), identity.end(), 0);
    if (perm == identity) return x;
    Attrs attrs;
    attrs.set("perm", perm);
    return emit("Transpose", x, attrs, out_name.empty() ? name + "/einsum_" + std::to_string(step) : out_name);
  };
  auto reshape = [&](int x, const Shape& to, const std::string& out_name) {
    if (g_.values[x].shape == to && out_name.empty()) return x;  // the output is always written
    Attrs attrs;
    attrs.set("shape", std::vector<int64_t>(to.begin(), to.end()));
    attrs.set("allowzero", int64_t{1});
    return emit("Reshape", x, attrs, out_name.empty() ? name + "/einsum_" + std::to_string(step) : out_name);
  };
  auto product = [&](const std::string& letters, const std::string& term, const Shape& s) {
    int64_t p = 1;
    for (char ch : letters) p *= size_in(term, s, ch);
    return p;
  };
  auto batch_dims = [&](const std::string& term, const Shape& s) {
    Shape d;
    for (char ch : batch) d.push_back(size_in(term, s, ch));
    return d;
  };

  Shape a2 = batch_dims(a, sa), b2 = batch_dims(b, sb);
  a2.push_back(product(left, a, sa));
  a2.push_back(product(contracted, a, sa));
  b2.push_back(product(contracted, b, sb));
  b2.push_back(product(right, b, sb));
  const int xa = reshape(permute(ia, a, batch + left + contracted, ""), a2, "");
  const int xb = reshape(permute(ib, b, batch + contracted + right, ""), b2, "");

  Shape result;  // (batch, left, right) as the output's sizes
  for (char ch : batch) result.push_back(std::max(size_in(a, sa, ch), size_in(b, sb, ch)));
  for (char ch : left) result.push_back(size_in(a, sa, ch));
  for (char ch : right) result.push_back(size_in(b, sb, ch));
  const std::string result_order = batch + left + right;
  const bool reshaped = result.size() != batch.size() + 2 || left.size() != 1 || right.size() != 1;
  const bool permuted = result_order != out;
  const std::string mm_out = reshaped || permuted ? name + "/einsum_matmul" : n.output(0);
  Node mm;
  mm.name = name + "/einsum_matmul";
  mm.op = "MatMul";
  mm.inputs = {xa, xb};
  add_node(std::move(mm), {mm_out}, where);
  int y = lookup(mm_out, "value");
  if (reshaped) y = reshape(y, result, permuted ? "" : n.output(0));
  if (permuted) permute(y, result_order, out, n.output(0));
}

}  // namespace monet::onnx_import
