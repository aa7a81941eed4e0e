// Concat(x_0, ..., x_{n-1}) with attribute axis: joins the inputs along one axis; every other dim must agree.
// Backward: Split of the output gradient along the same axis, one piece per input.
// The kernel only moves bytes, so it serves every dtype (integer shape tensors folded at import included).
#include <cstring>

#include "ops/op.h"

namespace monet::ops {
namespace {

// The axis attribute normalised to [0, rank), or -1 when out of range.
int64_t concat_axis(const Attrs& a, int64_t rank) {
  int64_t axis = a.i("axis");
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

void infer_concat(InferCtx& c) {
  if (c.num_inputs() < 1) c.fail("expects at least one input");
  const Shape& s0 = c.shape(0);
  const int64_t rank = static_cast<int64_t>(s0.size());
  if (!c.attrs().has("axis")) c.fail("attribute 'axis' is required");
  const int64_t axis = concat_axis(c.attrs(), rank);
  if (axis < 0) c.fail("axis ", c.attrs().i("axis"), " out of range for rank ", rank);
  Shape out = s0;
  out[axis] = 0;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const Shape& s = c.shape(i);
    if (static_cast<int64_t>(s.size()) != rank || c.in(i).dtype != c.in(0).dtype)
      c.fail("input ", i, " has shape ", shape_str(s), " (", dtype_name(c.in(i).dtype), "), input 0 has ",
             shape_str(s0), " (", dtype_name(c.in(0).dtype), ")");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && s[d] != s0[d])
        c.fail("input ", i, " has shape ", shape_str(s), ", differs from ", shape_str(s0), " outside axis ", axis);
    out[axis] += s[axis];
  }
  c.set_out(0, out, c.in(0).dtype);
}

// dx_i = dy[..., offset_i : offset_i + n_i, ...]: one Split of dy, each piece goes to its input.
void backward_concat(GradBuilder& b) {
  if (b.grad_out(0) < 0) return;
  const Node& n = b.node();
  const int64_t rank = static_cast<int64_t>(b.value(b.in(0)).shape.size());
  const int64_t axis = concat_axis(n.attrs, rank);
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < n.inputs.size(); ++i) sizes.push_back(b.value(b.in(static_cast<int>(i))).shape[axis]);
  Attrs a;
  a.set("axis", axis);
  a.set("split", sizes);
  std::vector<int> pieces = b.emit("Split", {b.grad_out(0)}, a, static_cast<int>(sizes.size()));
  for (size_t i = 0; i < pieces.size(); ++i)
    if (b.needs_grad(static_cast<int>(i))) b.set_grad(static_cast<int>(i), pieces[i]);
}

// Viewing every tensor as (outer, dim_axis * inner): output row o is input rows o laid end to end.
template <class T>
void concat_cpu(const CpuCall& c) {
  const Shape& ys = *c.out[0].shape;
  const int64_t axis = concat_axis(c.node.attrs, static_cast<int64_t>(ys.size()));
  const int64_t esize = element_bytes(c.out[0].dtype, sizeof(T));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= ys[d];
  for (size_t d = axis + 1; d < ys.size(); ++d) inner *= ys[d];
  char* y = static_cast<char*>(c.out[0].data);   // (outer, sum_i n_i * inner)
  const int64_t y_row = ys[axis] * inner * esize;
  int64_t col = 0;                                // byte offset of input i inside an output row
  for (const TensorRef& in : c.in) {
    const char* x = static_cast<const char*>(in.data);  // (outer, n_i * inner)
    const int64_t x_row = (*in.shape)[axis] * inner * esize;
    for (int64_t o = 0; o < outer; ++o) std::memcpy(y + o * y_row + col, x + o * x_row, x_row);
    col += x_row;
  }
}

const OpDef concat = {.name = "Concat", .infer = infer_concat, .backward = backward_concat,
                      .cpu_f32 = concat_cpu<float>, .cpu_f64 = concat_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> concat_ops;
const std::vector<const OpDef*> concat_ops = {&concat};

}  // namespace monet::ops
