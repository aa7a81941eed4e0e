// Constant folding of shape arithmetic at import: one rule per ONNX op, each headed by its Before/After.
//
// Shapes are fixed at import, so the subgraphs that compute shapes (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape; torch's x.expand(n, -1, -1) as Reshape -> ConstantOfShape -> Equal -> Where) evaluate to constants:
//   s = Shape(x); n = Gather(s, 0); t = Unsqueeze(n, [0]); u = Concat(t, [-1]); y = Reshape(x, u)
//     =>  y = Reshape(x, [8, -1])                                                     (x of shape (8, 3, 4))
// A rule runs when every input its node gives is a constant (Shape: when its input is defined) and returns the
// node's single output, or nullopt when it cannot fold that case (the node then becomes a runtime node, if monet
// has the op). It throws, with c.where, on inputs no run could accept.
//
// To add a rule: write `fold_<op>(const FoldCall&)` below, headed by its Before/After, and list it in `rules()`
// at the end. Inputs arrive as ConstTensor (values as doubles, is_float for the dtype, an omitted optional input
// empty with has(i) false); attributes through c.attr_i / c.attr_ints / c.attr; a result whose size comes from
// the inputs is bounded by checked_numel(..., kMaxFoldedValues, ...) (fold_broadcast does it for elementwise ops).
#include "ir/onnx_fold.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "ir/onnx_import.h"
#include "ops/common/broadcast.h"

namespace monet::onnx_import {
namespace {

// One node to fold: its inputs as constants and its attributes.
struct FoldCall {
  const onnx::NodeProto& n;
  const std::string& where;
  std::vector<ConstTensor> in;  // an omitted optional input is empty and has given[i] = false
  std::vector<bool> given;

  bool has(size_t i) const { return i < in.size() && given[i]; }
  // Input i, which the rule cannot do without: absent or omitted is an error naming the node.
  const ConstTensor& need(size_t i) const {
    if (!has(i)) fail(where, ": ", n.op_type(), " needs input ", i, ", which the node does not give");
    return in[i];
  }
  const onnx::AttributeProto* attr(const char* name) const {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_i(const char* name, int64_t dflt) const {
    const onnx::AttributeProto* a = attr(name);
    return a ? static_cast<int64_t>(a->i()) : dflt;
  }
  std::vector<int64_t> attr_ints(const char* name) const {
    const onnx::AttributeProto* a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
};

using Folder = std::optional<ConstTensor> (*)(const FoldCall&);

// out[i] = f(x_0[..], x_1[..], ...) over the numpy broadcast of the operands' shapes.
template <class F>
std::optional<ConstTensor> fold_broadcast(const std::string& where, const std::vector<const ConstTensor*>& xs,
                                          bool is_float, F f) {
  Shape shape;
  for (const ConstTensor* x : xs) {
    auto b = ops::broadcast_shapes(shape, x->shape);
    if (!b) return std::nullopt;
    shape = *b;
  }
  const int64_t n = checked_numel(shape, kMaxFoldedValues, where, "folded constant");
  ConstTensor out{shape, is_float, std::vector<double>(static_cast<size_t>(n))};
  std::vector<std::vector<int64_t>> offsets;
  for (const ConstTensor* x : xs) offsets.push_back(ops::broadcast_offsets(x->shape, shape));
  std::vector<double> args(xs.size());
  for (size_t i = 0; i < out.data.size(); ++i) {
    for (size_t k = 0; k < xs.size(); ++k) args[k] = xs[k]->data[offsets[k][i]];
    out.data[i] = f(args);
  }
  return out;
}

// ------------------------------------------------------------------------------------------- the rules

// s = Shape(x)  =>  s = [8, 3, 224, 224]                                       (x's shape, fixed at import)
// With optional start and end (opset 15), clamped like Python slices: Shape(x, start = -2) => [224, 224].
// The one rule that reads a runtime value (its shape, not its data): fold_node calls it apart from the table.
ConstTensor fold_shape(const FoldCall& c, const Shape& s) {
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t start = c.attr_i("start", 0), end = c.attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  ConstTensor out{{end - start}, false, {}};
  for (int64_t i = start; i < end; ++i) out.data.push_back(static_cast<double>(s[i]));
  return out;
}

// c = Constant(value = t)  =>  c = t            (also value_float, value_int, value_floats, value_ints)
std::optional<ConstTensor> fold_constant(const FoldCall& c) {
  for (const auto& a : c.n.attribute()) {
    if (a.name() == "value") return read_tensor(a.t(), c.where);
    if (a.name() == "value_float") return ConstTensor{{}, true, {a.f()}};
    if (a.name() == "value_int") return ConstTensor{{}, false, {static_cast<double>(a.i())}};
    if (a.name() == "value_floats") return ConstTensor{{a.floats_size()}, true, {a.floats().begin(), a.floats().end()}};
    if (a.name() == "value_ints") return ConstTensor{{a.ints_size()}, false, {a.ints().begin(), a.ints().end()}};
  }
  fail(c.where, ": Constant without a supported value attribute");
}

// y = Identity([8, 3])  =>  y = [8, 3]
std::optional<ConstTensor> fold_identity(const FoldCall& c) { return c.need(0); }

// y = Cast([2.7, -2.7], to = INT64)  =>  y = [2, -2]           (into an integer type: truncated towards zero)
// y = Cast([0.5, 0, -3], to = BOOL)  =>  y = [1, 0, 1]          (into bool: nonzero is 1)
std::optional<ConstTensor> fold_cast(const FoldCall& c) {
  ConstTensor x = c.need(0);
  const int to = static_cast<int>(c.attr_i("to", onnx::TensorProto::FLOAT));
  x.is_float = is_float_type(to);
  if (to == onnx::TensorProto::BOOL)
    for (double& d : x.data) d = d != 0 ? 1.0 : 0.0;
  else if (!x.is_float)
    for (double& d : x.data) d = std::trunc(d);
  return x;
}

// y = CastLike(Sqrt(scale), k)  =>  y = Cast(Sqrt(scale), to = k's type)
// Reads only the type of its second input, which may be a runtime value (torch's dynamo exporter casts its
// scaled_dot_product_attention scale and masks like the query). Into a u8 value (a bool mask) only 0s and 1s fold.
std::optional<ConstTensor> fold_cast_like(ConstTensor x, DType like) {
  x.is_float = like == DType::f32;
  if (like == DType::i64)
    for (double& d : x.data) d = std::trunc(d);
  if (like == DType::u8)
    for (double d : x.data)
      if (d != 0 && d != 1) return std::nullopt;
  return x;
}

// Unsqueeze and Squeeze: axes from input 1 (opset 13) or the attribute (earlier).
std::vector<int64_t> fold_axes(const FoldCall& c) { return c.has(1) ? ints_of(c.in[1]) : c.attr_ints("axes"); }

// t = Unsqueeze(8, [0])  =>  t = [8]                                        (a scalar becomes a 1-D shape piece)
std::optional<ConstTensor> fold_unsqueeze(const FoldCall& c) {
  ConstTensor x = c.need(0);
  std::vector<int64_t> axes = fold_axes(c);
  const int64_t r = static_cast<int64_t>(x.shape.size() + axes.size());
  for (int64_t& a : axes) a = a < 0 ? a + r : a;
  std::sort(axes.begin(), axes.end());
  for (int64_t a : axes)
    x.shape.insert(x.shape.begin() + std::clamp<int64_t>(a, 0, static_cast<int64_t>(x.shape.size())), 1);
  return x;
}

// n = Squeeze([8], [0])  =>  n = 8                                    (no axes: every dimension of size 1 goes)
std::optional<ConstTensor> fold_squeeze(const FoldCall& c) {
  ConstTensor x = c.need(0);
  const std::vector<int64_t> axes = fold_axes(c);
  const int64_t r = static_cast<int64_t>(x.shape.size());
  Shape out;
  for (int64_t d = 0; d < r; ++d) {
    bool drop = axes.empty() && x.shape[d] == 1;
    for (int64_t a : axes) drop = drop || (a < 0 ? a + r : a) == d;
    if (!drop) out.push_back(x.shape[d]);
  }
  x.shape = out;
  return x;
}

// s = Shape(x); n = Gather(s, 0)  =>  n = 8                                             (x of shape (8, 3, 4))
// Only from a 1-D constant (a shape): out has the indices' shape; Gather(s, [1, 2]) => [3, 4].
std::optional<ConstTensor> fold_gather(const FoldCall& c) {
  const ConstTensor& x = c.need(0);
  const ConstTensor& idx = c.need(1);
  if (x.shape.size() != 1) return std::nullopt;
  ConstTensor out{idx.shape, x.is_float, {}};
  for (double d : idx.data) {
    int64_t i = to_int(d);
    if (i < 0) i += x.shape[0];
    if (i < 0 || i >= x.shape[0]) fail(c.where, ": Gather index ", d, " out of range");
    out.data.push_back(x.data[static_cast<size_t>(i)]);
  }
  return out;
}

// s = Concat([8], 3, [-1, 4])  =>  s = [8, 3, -1, 4]                         (scalars and 1-D: end to end)
// y = Concat([[1], [2]], [[3], [4]], axis = 1)  =>  y = [[1, 3], [2, 4]]              (higher ranks: along axis)
std::optional<ConstTensor> fold_concat(const FoldCall& c) {
  const ConstTensor& first = c.need(0);
  if (first.shape.size() <= 1) {  // shape pieces: scalars and 1-D constants, end to end
    ConstTensor out{{0}, first.is_float, {}};
    for (const ConstTensor& p : c.in) {
      if (p.shape.size() > 1) return std::nullopt;
      out.data.insert(out.data.end(), p.data.begin(), p.data.end());
    }
    out.shape = {static_cast<int64_t>(out.data.size())};
    return out;
  }
  // Higher ranks along `axis`, every other dim equal (swin's window index pairs: Concat(i, j, axis = -1)).
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  int64_t axis = c.attr_i("axis", 0);
  if (axis < -rank || axis >= rank) fail(c.where, ": Concat axis ", axis, " for constants of rank ", rank);
  if (axis < 0) axis += rank;
  ConstTensor out{first.shape, first.is_float, {}};
  out.shape[static_cast<size_t>(axis)] = 0;
  for (const ConstTensor& p : c.in) {
    for (int64_t d = 0; d < rank; ++d)
      if (p.shape.size() != first.shape.size() ||
          (d != axis && p.shape[static_cast<size_t>(d)] != first.shape[static_cast<size_t>(d)]))
        fail(c.where, ": Concat of ", shape_str(first.shape), " and ", shape_str(p.shape), " along axis ", axis);
    out.shape[static_cast<size_t>(axis)] += p.shape[static_cast<size_t>(axis)];
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= first.shape[static_cast<size_t>(d)];
  out.data.reserve(static_cast<size_t>(checked_numel(out.shape, kMaxFoldedValues, c.where, "folded constant")));
  for (int64_t o = 0; o < outer; ++o)
    for (const ConstTensor& p : c.in) {
      const int64_t run = p.shape[static_cast<size_t>(axis)] * inner;
      out.data.insert(out.data.end(), p.data.begin() + o * run, p.data.begin() + (o + 1) * run);
    }
  return out;
}

// y = ConstantOfShape([2, 3], value = 1)  =>  y = [[1, 1, 1], [1, 1, 1]]                   (no value: float 0)
std::optional<ConstTensor> fold_constant_of_shape(const FoldCall& c) {
  ConstTensor out{{}, true, {}};
  for (double d : c.need(0).data) out.shape.push_back(to_int(d));
  double fill = 0;
  if (const onnx::AttributeProto* a = c.attr("value")) {
    ConstTensor v = read_tensor(a->t(), c.where);
    fill = v.data.empty() ? 0 : v.data[0];
    out.is_float = v.is_float;
  }
  out.data.assign(static_cast<size_t>(checked_numel(out.shape, kMaxFoldedValues, c.where, "ConstantOfShape")), fill);
  return out;
}

// y = Reshape(t of shape (2, 3), [0, -1, 1])  =>  y = t as shape (2, 3, 1)
// 0 copies the input's dim (unless allowzero), one -1 is inferred.
std::optional<ConstTensor> fold_reshape(const FoldCall& c) {
  ConstTensor x = c.need(0);
  const std::vector<int64_t> spec = ints_of(c.need(1));
  const bool allowzero = c.attr_i("allowzero", 0) != 0;
  Shape out(spec.size());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    out[i] = spec[i] == 0 && !allowzero && i < x.shape.size() ? x.shape[i] : spec[i];
    if (out[i] < -1 || (out[i] == -1 && infer_at >= 0))
      fail(c.where, ": cannot reshape ", shape_str(x.shape), " to ", shape_str(spec));
    if (out[i] == -1) infer_at = static_cast<int64_t>(i);
    else if (__builtin_mul_overflow(known, out[i], &known))
      fail(c.where, ": cannot reshape ", shape_str(x.shape), " to ", shape_str(spec));
  }
  const int64_t n = numel(x.shape);
  if (infer_at >= 0 && known > 0) out[infer_at] = n / known;
  if (numel(out) != n) fail(c.where, ": cannot reshape ", shape_str(x.shape), " to ", shape_str(spec));
  x.shape = out;
  return x;
}

// y = Transpose([[0, 0, 1, 1], [0, 1, 0, 1]], perm = [1, 0])  =>  y = [[0, 0], [0, 1], [1, 0], [1, 1]]
// (no perm: the dims reversed). Any constant computed at import: swin's window padding and index arithmetic, its
// shifted-window mask split into windows.
std::optional<ConstTensor> fold_transpose(const FoldCall& c) {
  const ConstTensor& x = c.need(0);
  const size_t rank = x.shape.size();
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  std::vector<char> seen(rank, 0);
  if (perm.size() != rank) fail(c.where, ": Transpose perm has ", perm.size(), " entries for a constant of rank ", rank);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      fail(c.where, ": Transpose perm ", shape_str(perm), " is not a permutation of ", rank, " dims");
    seen[static_cast<size_t>(p)] = 1;
  }
  ConstTensor y;
  y.is_float = x.is_float;
  for (int64_t p : perm) y.shape.push_back(x.shape[static_cast<size_t>(p)]);
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * x.shape[d];
  y.data.resize(x.data.size());
  std::vector<int64_t> idx(rank, 0);  // the output's index, last dim fastest
  for (size_t i = 0; i < y.data.size(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += idx[d] * in_stride[static_cast<size_t>(perm[d])];
    y.data[i] = x.data[static_cast<size_t>(src)];
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < y.shape[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

// y = Expand([[0], [1]], [2, 3])  =>  y = [[0, 0, 0], [1, 1, 1]]           (numpy broadcast of x to the shape)
// Any constant computed at import (swin's shifted-window mask: zeros expanded to a window's shape).
std::optional<ConstTensor> fold_expand(const FoldCall& c) {
  const ConstTensor& x = c.need(0);
  const std::vector<int64_t> target = ints_of(c.need(1));
  for (int64_t d : target)
    if (d < 0) fail(c.where, ": Expand to shape ", shape_str(target), " with a negative dimension");
  const auto shape = ops::broadcast_shapes(x.shape, target);
  if (!shape) fail(c.where, ": cannot expand ", shape_str(x.shape), " to ", shape_str(target));
  const int64_t n = checked_numel(*shape, kMaxFoldedValues, c.where, "folded constant");
  const std::vector<int64_t> offsets = ops::broadcast_offsets(x.shape, *shape);
  ConstTensor y{*shape, x.is_float, std::vector<double>(static_cast<size_t>(n))};
  for (size_t i = 0; i < y.data.size(); ++i) y.data[i] = x.data[static_cast<size_t>(offsets[i])];
  return y;
}

// y = ScatterND([0, 0, 0, 0], [[1], [3]], [5, 6])  =>  y = [0, 5, 0, 6]
// (torch's slice assignment on a tensor built from shapes: swin's shifted-window mask, mask[a:b, c:d] = k).
// indices (..., k) address the first k dims of data; updates hold one slice of data's other dims per index, the
// later of two writes to one place wins (ONNX leaves duplicates undefined). Reductions (opset 16) are not folded.
std::optional<ConstTensor> fold_scatter_nd(const FoldCall& c) {
  const ConstTensor& data = c.need(0);
  const ConstTensor& indices = c.need(1);
  const ConstTensor& updates = c.need(2);
  if (c.attr("reduction") && c.attr("reduction")->s() != "none") return std::nullopt;
  const size_t rank = data.shape.size();
  if (indices.shape.empty()) fail(c.where, ": ScatterND indices of rank 0");
  const int64_t k = indices.shape.back();
  if (k < 1 || k > static_cast<int64_t>(rank))
    fail(c.where, ": ScatterND indices address ", k, " dims of data of rank ", rank);
  Shape want(indices.shape.begin(), indices.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + k, data.shape.end());
  if (updates.shape != want)
    fail(c.where, ": ScatterND updates have shape ", shape_str(updates.shape), ", expected ", shape_str(want));
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < rank; ++d) slice *= data.shape[d];
  const std::vector<int64_t> idx = ints_of(indices);
  ConstTensor y = data;
  y.is_float = data.is_float;
  for (size_t j = 0; j * static_cast<size_t>(k) < idx.size(); ++j) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = idx[j * static_cast<size_t>(k) + static_cast<size_t>(d)];
      const int64_t n = data.shape[static_cast<size_t>(d)];
      if (i < -n || i >= n) fail(c.where, ": ScatterND index ", i, " out of range for a dim of ", n);
      if (i < 0) i += n;
      offset = offset * n + i;
    }
    for (int64_t e = 0; e < slice; ++e)
      y.data[static_cast<size_t>(offset * slice + e)] = updates.data[j * static_cast<size_t>(slice) + static_cast<size_t>(e)];
  }
  return y;
}

// Add, Sub, Mul, Div, Mod, Equal on two broadcasting constants:
// y = Mul([8, 3], 4)  =>  y = [32, 12];  y = Div(7, 2)  =>  y = 3;  y = Mod(-7, 2)  =>  y = 1;
// y = Equal([8, -1], -1)  =>  y = [0, 1] (bool)
template <char kOp>
std::optional<ConstTensor> fold_arith(const FoldCall& c) {
  const ConstTensor& x = c.need(0);
  const ConstTensor& y = c.need(1);
  const bool is_float = x.is_float || y.is_float;
  const bool fmod = c.attr_i("fmod", 0) != 0;
  return fold_broadcast(c.where, {&x, &y}, kOp == '=' ? false : is_float, [&](const std::vector<double>& v) {
    const double a = v[0], b = v[1];
    switch (kOp) {
      case '+': return a + b;
      case '-': return a - b;
      case '*': return a * b;
      case '/': return is_float ? a / b : std::trunc(a / b);       // ONNX integer division truncates
      case '%': return fmod ? std::fmod(a, b) : a - std::floor(a / b) * b;  // fmod=0: the divisor's sign
      default: return a == b ? 1.0 : 0.0;                          // '=': Equal, a bool tensor
    }
  });
}

// y = Not([1, 0])  =>  y = [0, 1]
std::optional<ConstTensor> fold_not(const FoldCall& c) {
  ConstTensor x = c.need(0);
  for (double& d : x.data) d = d == 0 ? 1.0 : 0.0;
  x.is_float = false;
  return x;
}

// y = Where([0, 1, 1], [4, 3, 2], [-1, -1, -1])  =>  y = [-1, 3, 2]          (x where cond holds, else y)
// All three broadcast; with Equal above it folds torch's x.expand(n, -1, -1).
std::optional<ConstTensor> fold_where(const FoldCall& c) {
  const ConstTensor &cond = c.need(0), &x = c.need(1), &y = c.need(2);
  return fold_broadcast(c.where, {&cond, &x, &y}, x.is_float || y.is_float,
                        [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
}

// y = Range(0, 7, 2)  =>  y = [0, 2, 4, 6]                   (scalars: max(ceil((limit - start) / delta), 0) values)
std::optional<ConstTensor> fold_range(const FoldCall& c) {
  const ConstTensor &start = c.need(0), &limit = c.need(1), &delta = c.need(2);
  if (start.data.size() != 1 || limit.data.size() != 1 || delta.data.size() != 1) return std::nullopt;
  const double s = start.data[0], d = delta.data[0];
  if (d == 0) fail(c.where, ": Range with delta 0");
  const double count = std::ceil((limit.data[0] - s) / d);
  if (!(count <= static_cast<double>(kMaxFoldedValues)))  // NaN included
    fail(c.where, ": Range of ", count, " values is too large (over ", kMaxFoldedValues, ")");
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
  ConstTensor out{{n}, start.is_float, {}};
  for (int64_t i = 0; i < n; ++i) out.data.push_back(s + static_cast<double>(i) * d);
  return out;
}

// s = Shape(x); t = Slice(s, [-2], [INT64_MAX])  =>  t = [224, 224]                       (x of shape (8, 3, 224, 224))
// m = Slice(mask, [0, 0], [T, T])  =>  the first T x T of a bool or integer table    (a masked_fill's causal mask)
// Constants of any rank but float tables (1-D float constants fold): starts, ends, axes (default 0, 1, ...) and
// steps (default 1) from inputs 1-4 (opset 10 on) or the attributes (earlier); ONNX's clamping per axis: a negative index counts from the end, then starts and
// ends clamp to [0, n] for a positive step and to [0, n - 1] and [-1, n - 1] for a negative one (INT64_MAX and
// INT64_MIN mean "to the end"). The result may be empty.
std::optional<ConstTensor> fold_slice(const FoldCall& c) {
  const ConstTensor& x = c.need(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  // A float table of rank 2 or more (an additive mask, a rotary table) is sliced at run time: folded, each reader
  // would hold a resident copy of its slice. Shapes and integer or bool tables (a masked_fill's mask) fold.
  if (x.is_float && rank > 1) return std::nullopt;
  if (rank == 0) fail(c.where, ": Slice of a scalar");
  const bool from_inputs = c.has(1) || c.has(2);
  const std::vector<int64_t> starts = from_inputs ? ints_of(c.need(1)) : c.attr_ints("starts");
  const std::vector<int64_t> ends = from_inputs ? (c.has(2) ? ints_of(c.in[2]) : std::vector<int64_t>{})
                                                : c.attr_ints("ends");
  std::vector<int64_t> axes = from_inputs ? (c.has(3) ? ints_of(c.in[3]) : std::vector<int64_t>{})
                                          : c.attr_ints("axes");
  const std::vector<int64_t> steps = c.has(4) ? ints_of(c.in[4]) : std::vector<int64_t>{};
  const size_t k = starts.size();
  if (k == 0 || ends.size() != k || (!axes.empty() && axes.size() != k) || (!steps.empty() && steps.size() != k))
    fail(c.where, ": Slice needs as many starts, ends, axes and steps, got ", k, ", ", ends.size(), ", ",
         axes.size(), ", ", steps.size());
  if (axes.empty())
    for (size_t i = 0; i < k; ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1), len = x.shape;
  std::vector<char> seen(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < k; ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank) fail(c.where, ": Slice axis ", a, " of a constant of rank ", rank);
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) fail(c.where, ": Slice axis ", axes[i], " given twice");
    seen[static_cast<size_t>(a)] = 1;
    const int64_t n = x.shape[static_cast<size_t>(a)], st = steps.empty() ? 1 : steps[i];
    if (st == 0 || st == INT64_MIN) fail(c.where, ": Slice step ", st);
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b = b < -n ? -1 : b + n;  // below -n: clamped below (no int64 overflow on INT64_MIN)
    if (e < 0) e = e < -n ? -1 : e + n;
    int64_t count;  // counted first: b + step may overflow where step is huge
    if (n == 0) {
      count = 0;
    } else if (st > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      count = e > b ? (e - b - 1) / st + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      count = b > e ? (b - e - 1) / -st + 1 : 0;
    }
    first[static_cast<size_t>(a)] = b;
    step[static_cast<size_t>(a)] = st;
    len[static_cast<size_t>(a)] = count;
  }
  ConstTensor out{len, x.is_float, {}};
  const int64_t total = numel(len);
  out.data.reserve(static_cast<size_t>(total));
  std::vector<int64_t> stride(static_cast<size_t>(rank), 1), at(static_cast<size_t>(rank), 0);
  for (int64_t d = rank - 2; d >= 0; --d)
    stride[static_cast<size_t>(d)] = stride[static_cast<size_t>(d + 1)] * x.shape[static_cast<size_t>(d + 1)];
  for (int64_t j = 0; j < total; ++j) {  // at: the output index, last axis fastest
    int64_t offset = 0;
    for (size_t d = 0; d < static_cast<size_t>(rank); ++d) offset += (first[d] + at[d] * step[d]) * stride[d];
    out.data.push_back(x.data[static_cast<size_t>(offset)]);
    for (int64_t d = rank - 1; d >= 0 && ++at[static_cast<size_t>(d)] == len[static_cast<size_t>(d)]; --d)
      at[static_cast<size_t>(d)] = 0;
  }
  return out;
}

// ReduceProd, ReduceSum, ReduceMax, ReduceMin of a scalar or 1-D constant over its one axis:
// n = ReduceProd(Slice(Shape(x), [1], [4]), keepdims = 0)  =>  n = 150528            (torch's x[0].numel())
// Axes from input 1 (ReduceSum from opset 13, the others from 18) or the attribute; keepdims (default 1) keeps a
// dim of 1; no axes with noop_with_empty_axes = 1 is the input itself.
template <char kOp>
std::optional<ConstTensor> fold_reduce(const FoldCall& c) {
  const ConstTensor& x = c.need(0);
  if (x.shape.size() > 1) return std::nullopt;
  const std::vector<int64_t> axes = c.has(1) ? ints_of(c.in[1]) : c.attr_ints("axes");
  for (int64_t a : axes)
    if (a != 0 && a != -1) fail(c.where, ": axis ", a, " of a constant of rank ", x.shape.size());
  if (axes.empty() && c.attr_i("noop_with_empty_axes", 0) != 0) return x;
  if (x.data.empty() && (kOp == '>' || kOp == '<')) fail(c.where, ": the max or min of no values");
  double r = kOp == '*' ? 1.0 : kOp == '+' ? 0.0 : x.data.empty() ? 0.0 : x.data[0];
  for (double d : x.data) {
    if (kOp == '*') r *= d;
    else if (kOp == '+') r += d;
    else if (kOp == '>') r = std::max(r, d);
    else r = std::min(r, d);
  }
  ConstTensor out{{}, x.is_float, {r}};
  if (c.attr_i("keepdims", 1) != 0 && !x.shape.empty()) out.shape = {1};
  return out;
}

// Max and Min of any number of broadcasting constants:  y = Max([3, 8], 5)  =>  y = [5, 8]
template <char kOp>
std::optional<ConstTensor> fold_extremum(const FoldCall& c) {
  std::vector<const ConstTensor*> xs;
  bool is_float = false;
  for (const ConstTensor& x : c.in) {
    xs.push_back(&x);
    is_float = is_float || x.is_float;
  }
  if (xs.empty()) fail(c.where, ": no inputs");
  return fold_broadcast(c.where, xs, is_float, [](const std::vector<double>& v) {
    double r = v[0];
    for (double d : v) r = kOp == '>' ? std::max(r, d) : std::min(r, d);
    return r;
  });
}

// Floor, Ceil, Neg, Abs, Sqrt elementwise:  y = Floor(Mul(Cast(Shape(x)[2:]), 1.5))  =>  y = [336.0, 336.0]
// (F.interpolate(x, scale_factor=1.5) with recompute_scale_factor: the output size from a float scale)
// y = Sqrt(Div(1, Sqrt(Cast(Shape(q)[-1:]))))  =>  y = [0.3535...]                      (q of shape (.., 64))
// (torch's export of F.scaled_dot_product_attention: its scale 1/sqrt(d), and the sqrt of the scale that
// multiplies q and k; folded, the attention fusion takes both into the Attention's scale)
// The same for the elementwise math of a constant computed in the graph (T5's relative-position buckets take the
// Log of a constant distance table, then Cast it to integers): Log, Exp, Reciprocal, Sin, Cos, Tanh, Sigmoid, Erf,
// Relu, Sign and Round (a half to the even neighbour), in double.
template <char kOp>
std::optional<ConstTensor> fold_unary(const FoldCall& c) {
  ConstTensor x = c.need(0);
  for (double& d : x.data) {
    switch (kOp) {
      case 'f': d = std::floor(d); break;
      case 'c': d = std::ceil(d); break;
      case '-': d = -d; break;
      case 's': d = std::sqrt(d); break;
      case 'l': d = std::log(d); break;
      case 'e': d = std::exp(d); break;
      case 'r': d = 1.0 / d; break;
      case 'S': d = std::sin(d); break;
      case 'C': d = std::cos(d); break;
      case 't': d = std::tanh(d); break;
      case 'g': d = 1.0 / (1.0 + std::exp(-d)); break;
      case 'E': d = std::erf(d); break;
      case 'R': d = d < 0 ? 0.0 : d; break;                           // NaN stays NaN
      case 'n': d = d > 0 ? 1.0 : d < 0 ? -1.0 : d; break;           // Sign: 0 and NaN stay
      case 'o': d = std::nearbyint(d); break;                         // Round: the default mode, half to even
      default: d = std::fabs(d); break;  // 'a': Abs
    }
  }
  return x;
}

// y = Trilu(Expand(1.0, [3, 3]), upper = 0)  =>  y = [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
// Over the last two dims (i, j): upper = 1 keeps j - i >= k, upper = 0 keeps j - i <= k, k from the optional
// second input (default 0); the rest become 0. torch's export of scaled_dot_product_attention(is_causal=True)
// builds its causal mask so: Where(Equal(Trilu(ones(Tq, Tk), upper = 0), 0), -inf, 0).
std::optional<ConstTensor> fold_trilu(const FoldCall& c) {
  ConstTensor x = c.need(0);
  const size_t rank = x.shape.size();
  if (rank < 2) fail(c.where, ": Trilu of a constant of rank ", rank, " (needs rank >= 2)");
  int64_t k = 0;
  if (c.has(1)) {
    const std::vector<int64_t> ks = ints_of(c.in[1]);
    if (ks.size() != 1) fail(c.where, ": Trilu's k has ", ks.size(), " values (needs one)");
    k = ks[0];
  }
  const bool upper = c.attr_i("upper", 1) != 0;
  const int64_t rows = x.shape[rank - 2], cols = x.shape[rank - 1];
  for (size_t i = 0; i < x.data.size(); ++i) {
    const int64_t col = static_cast<int64_t>(i) % cols, row = static_cast<int64_t>(i) / cols % rows;
    if (upper ? col - row < k : col - row > k) x.data[i] = 0;
  }
  return x;
}

// Less, Greater, LessOrEqual ('l') and GreaterOrEqual ('g') on two broadcasting constants:
//   y = Less([8, 3], 4)  =>  y = [0, 1] (bool)
template <char kOp>
std::optional<ConstTensor> fold_compare(const FoldCall& c) {
  const ConstTensor &x = c.need(0), &y = c.need(1);
  return fold_broadcast(c.where, {&x, &y}, false, [](const std::vector<double>& v) {
    const bool r = kOp == '<' ? v[0] < v[1] : kOp == '>' ? v[0] > v[1] : kOp == 'l' ? v[0] <= v[1] : v[0] >= v[1];
    return r ? 1.0 : 0.0;
  });
}

// ------------------------------------------------------------------------------------------- the table

// Every op with a rule (Shape and CastLike apart: fold_node calls fold_shape and fold_cast_like, which read a runtime
// input's shape or type). docs/models.md lists them for users.
const std::unordered_map<std::string, Folder>& rules() {
  static const std::unordered_map<std::string, Folder> table = {
      {"Constant", fold_constant},   {"Identity", fold_identity},   {"Cast", fold_cast},
      {"Unsqueeze", fold_unsqueeze}, {"Squeeze", fold_squeeze},     {"Gather", fold_gather},
      {"Concat", fold_concat},       {"ConstantOfShape", fold_constant_of_shape},
      {"Reshape", fold_reshape},     {"Transpose", fold_transpose}, {"Expand", fold_expand},
      {"ScatterND", fold_scatter_nd},
      {"Add", fold_arith<'+'>},      {"Sub", fold_arith<'-'>},
      {"Mul", fold_arith<'*'>},      {"Div", fold_arith<'/'>},      {"Mod", fold_arith<'%'>},
      {"Equal", fold_arith<'='>},    {"Not", fold_not},             {"Where", fold_where},
      {"Range", fold_range},         {"Slice", fold_slice},
      {"ReduceProd", fold_reduce<'*'>}, {"ReduceSum", fold_reduce<'+'>},
      {"ReduceMax", fold_reduce<'>'>},  {"ReduceMin", fold_reduce<'<'>},
      {"Max", fold_extremum<'>'>},   {"Min", fold_extremum<'<'>},   {"Floor", fold_unary<'f'>},
      {"Ceil", fold_unary<'c'>},     {"Neg", fold_unary<'-'>},      {"Abs", fold_unary<'a'>},
      {"Sqrt", fold_unary<'s'>},     {"Trilu", fold_trilu},
      {"Log", fold_unary<'l'>},      {"Exp", fold_unary<'e'>},      {"Reciprocal", fold_unary<'r'>},
      {"Sin", fold_unary<'S'>},      {"Cos", fold_unary<'C'>},      {"Tanh", fold_unary<'t'>},
      {"Sigmoid", fold_unary<'g'>},  {"Erf", fold_unary<'E'>},      {"Relu", fold_unary<'R'>},
      {"Sign", fold_unary<'n'>},     {"Round", fold_unary<'o'>},
      {"Less", fold_compare<'<'>},   {"Greater", fold_compare<'>'>},
      {"LessOrEqual", fold_compare<'l'>}, {"GreaterOrEqual", fold_compare<'g'>},
  };
  return table;
}

}  // namespace

std::optional<ConstTensor> fold_node(const onnx::NodeProto& n, const std::string& where, const ValueLookup& value_of) {
  if (n.op_type() == "Shape") {
    const Value* x = n.input_size() < 1 ? nullptr : value_of(n.input(0));
    if (!x) return std::nullopt;
    FoldCall call{n, where, {}, {}};
    return fold_shape(call, x->shape);
  }
  if (n.op_type() == "CastLike") {
    const Value* x = n.input_size() < 2 ? nullptr : value_of(n.input(0));
    const Value* like = n.input_size() < 2 ? nullptr : value_of(n.input(1));
    if (!x || !like || x->role != Role::constant) return std::nullopt;
    return fold_cast_like(as_const(*x), like->dtype);
  }
  auto it = rules().find(n.op_type());
  if (it == rules().end()) return std::nullopt;
  FoldCall call{n, where, {}, {}};
  for (const auto& in : n.input()) {
    if (in.empty()) {
      call.in.emplace_back();  // an omitted optional input
      call.given.push_back(false);
      continue;
    }
    const Value* v = value_of(in);
    if (!v || v->role != Role::constant) return std::nullopt;
    call.in.push_back(as_const(*v));
    call.given.push_back(true);
  }
  return it->second(call);
}

}  // namespace monet::onnx_import
