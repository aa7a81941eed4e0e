// Split(x) -> y_0, ..., y_{n-1} with attributes axis (default 0) and split (opset 13 static input: the piece sizes;
// absent or empty = n equal pieces; with opset 18's attribute num_outputs, pieces of ceil(length / n), the last
// smaller). Backward: SplitGrad joins the output gradients that exist and fills the
// pieces without one with zeros. The forward kernel only moves bytes, so it serves every dtype.
#include <algorithm>
#include <cstring>

#include "ops/op.h"

namespace monet::ops {
namespace {

// Piece sizes along `axis` of a tensor whose axis has length `dim`, cut into `n` pieces; an error message or "".
std::string split_sizes(const Attrs& a, int64_t dim, int n, std::vector<int64_t>& sizes) {
  sizes = a.ints("split", std::vector<int64_t>{});
  if (sizes.empty() && a.has("num_outputs")) {
    // Opset 18: num_outputs parts of ceil(dim / n), the last one smaller where dim does not divide.
    if (a.i("num_outputs", 0) != n)
      return "num_outputs is " + std::to_string(a.i("num_outputs", 0)) + " for " + std::to_string(n) + " outputs";
    const int64_t part = n < 1 ? 0 : (dim + n - 1) / n;
    if (n < 1 || part * (n - 1) >= dim)
      return "axis of length " + std::to_string(dim) + " does not split into " + std::to_string(n) + " parts";
    sizes.assign(static_cast<size_t>(n), part);
    sizes.back() = dim - part * (n - 1);
    return "";
  }
  if (sizes.empty()) {
    if (n < 1 || dim % n != 0)
      return "axis of length " + std::to_string(dim) + " does not split into " + std::to_string(n) + " equal parts";
    sizes.assign(static_cast<size_t>(n), dim / n);
    return "";
  }
  if (static_cast<int>(sizes.size()) != n)
    return "split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(n) + " outputs";
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s <= 0) return "split sizes must be positive, got " + shape_str(sizes);
    sum += s;
  }
  if (sum != dim) return "split sizes " + shape_str(sizes) + " sum to " + std::to_string(sum) +
                         ", axis has length " + std::to_string(dim);
  return "";
}

int64_t split_axis(const Attrs& a, int64_t rank) {
  int64_t axis = a.i("axis", 0);
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

void infer_split(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape& xs = c.shape(0);
  const int64_t axis = split_axis(c.attrs(), static_cast<int64_t>(xs.size()));
  if (axis < 0) c.fail("axis ", c.attrs().i("axis", 0), " out of range for rank ", xs.size());
  std::vector<int64_t> sizes;
  if (std::string err = split_sizes(c.attrs(), xs[axis], c.num_outputs(), sizes); !err.empty()) c.fail(err);
  for (int o = 0; o < c.num_outputs(); ++o) {
    Shape s = xs;
    s[axis] = sizes[o];
    c.set_out(o, s, c.in(0).dtype);
  }
}

// dx = concat of dy_o along axis, with zeros where output o received no gradient.
void backward_split(GradBuilder& b) {
  if (!b.needs_grad(0)) return;
  const Node& n = b.node();
  const Shape& xs = b.value(b.in(0)).shape;
  const int64_t axis = split_axis(n.attrs, static_cast<int64_t>(xs.size()));
  std::vector<int64_t> sizes, present;
  split_sizes(n.attrs, xs[axis], static_cast<int>(n.outputs.size()), sizes);
  std::vector<int> grads;
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    int g = b.grad_out(static_cast<int>(o));
    present.push_back(g >= 0 ? 1 : 0);
    if (g >= 0) grads.push_back(g);
  }
  if (grads.empty()) return;
  Attrs a;
  a.set("axis", axis);
  a.set("split", sizes);
  a.set("present", present);
  b.set_grad(0, b.emit1("SplitGrad", grads, a));
}

// Viewing x as (outer, dim * inner): piece o is the column block [offset_o, offset_o + n_o) of every row.
template <class T>
void split_cpu(const CpuCall& c) {
  const Shape& xs = *c.in[0].shape;
  const int64_t axis = split_axis(c.node.attrs, static_cast<int64_t>(xs.size()));
  const int64_t esize = element_bytes(c.in[0].dtype, sizeof(T));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= xs[d];
  for (size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
  const char* x = static_cast<const char*>(c.in[0].data);  // (outer, dim * inner)
  const int64_t x_row = xs[axis] * inner * esize;
  int64_t col = 0;
  for (const TensorRef& out : c.out) {
    char* y = static_cast<char*>(out.data);                 // (outer, n_o * inner)
    const int64_t y_row = (*out.shape)[axis] * inner * esize;
    for (int64_t o = 0; o < outer; ++o) std::memcpy(y + o * y_row, x + o * x_row + col, y_row);
    col += y_row;
  }
}

// SplitGrad(dy_present...) with attrs axis, split (all piece sizes), present (1 where a gradient exists).
void infer_split_grad(InferCtx& c) {
  const std::vector<int64_t> sizes = c.attrs().ints("split");
  const std::vector<int64_t> present = c.attrs().ints("present");
  if (present.size() != sizes.size()) c.fail("present has ", present.size(), " entries, split has ", sizes.size());
  int n_present = 0;
  for (int64_t p : present) n_present += p != 0;
  if (n_present < 1 || c.num_inputs() != n_present)
    c.fail("has ", c.num_inputs(), " inputs, present lists ", n_present, " pieces");
  const int64_t rank = static_cast<int64_t>(c.shape(0).size());
  const int64_t axis = split_axis(c.attrs(), rank);
  if (axis < 0) c.fail("axis out of range for rank ", rank);
  Shape out = c.shape(0);
  out[axis] = 0;
  for (int64_t s : sizes) out[axis] += s;
  int i = 0;
  for (size_t o = 0; o < sizes.size(); ++o) {
    if (!present[o]) continue;
    Shape want = out;
    want[axis] = sizes[o];
    if (c.shape(i) != want) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected ", shape_str(want));
    ++i;
  }
  c.set_out(0, out);
}

template <class T>
void split_grad_cpu(const CpuCall& c) {
  const Shape& xs = *c.out[0].shape;
  const int64_t axis = split_axis(c.node.attrs, static_cast<int64_t>(xs.size()));
  const std::vector<int64_t> sizes = c.node.attrs.ints("split");
  const std::vector<int64_t> present = c.node.attrs.ints("present");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= xs[d];
  for (size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
  T* dx = c.out[0].as<T>();  // (outer, dim * inner)
  const int64_t x_row = xs[axis] * inner;
  int64_t col = 0;
  int i = 0;
  for (size_t o = 0; o < sizes.size(); ++o) {
    const int64_t y_row = sizes[o] * inner;
    const T* dy = present[o] ? c.in[i++].as<T>() : nullptr;  // (outer, n_o * inner)
    for (int64_t r = 0; r < outer; ++r) {
      T* dst = dx + r * x_row + col;
      if (dy) std::copy(dy + r * y_row, dy + (r + 1) * y_row, dst);
      else std::fill(dst, dst + y_row, T(0));
    }
    col += y_row;
  }
}

const OpDef split = {.name = "Split", .infer = infer_split, .backward = backward_split,
                     .cpu_f32 = split_cpu<float>, .cpu_f64 = split_cpu<double>,
                     .static_inputs = {"", "split"}};
const OpDef split_grad = {.name = "SplitGrad", .infer = infer_split_grad,
                          .cpu_f32 = split_grad_cpu<float>, .cpu_f64 = split_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> split_ops;
const std::vector<const OpDef*> split_ops = {&split, &split_grad};

}  // namespace monet::ops
