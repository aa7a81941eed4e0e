// GatherElements(data, indices int64; axis) (torch.gather): y has the indices' shape, and
//   y[i_0, ..., i_{r-1}] = data[i_0, ..., indices[i_0, ..., i_{r-1}], ..., i_{r-1}]      (the index at `axis`)
// Indices of the data's rank, each dim other than the axis at most the data's; an index counts from the end where
// negative (ONNX), and one outside [-A, A) is an error on the CPU (the CUDA kernel reads 0 and adds nothing).
// Backward: GatherElementsGrad(dy, indices; axis, x_shape) adds each dy element into zeros of the data's shape at
// the element it was read from. Every dx element takes the dy elements of its own column (the indices' coordinates
// other than the axis) in the axis' order, so the sum is one order on every backend: deterministic, the CUDA
// kernel equal to the CPU bit for bit. The indices take no gradient.
#include <algorithm>

#include "ops/common/plans.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

std::string geometry(const Attrs& a, const Shape& x, const Shape& indices, GatherElementsSpec& s) {
  const int64_t r = static_cast<int64_t>(x.size());
  if (r == 0) return "data must have rank >= 1, got a scalar";
  if (static_cast<int64_t>(indices.size()) != r)
    return "indices " + shape_str(indices) + " must have the data's rank (data " + shape_str(x) + ")";
  int64_t axis = a.i("axis", 0);
  if (axis < -r || axis >= r) return "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r);
  if (axis < 0) axis += r;
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && indices[d] > x[d])
      return "indices " + shape_str(indices) + " exceed the data " + shape_str(x) + " along dim " + std::to_string(d);
  s.axis = static_cast<int>(axis);
  s.x = x;
  s.indices = indices;
  return "";
}

GatherElementsSpec checked(const Attrs& a, const Shape& x, const Shape& indices) {
  GatherElementsSpec s;
  const std::string err = geometry(a, x, indices, s);
  MONET_CHECK(err.empty(), err);
  return s;
}

// Visits every element of the indices' shape in row-major order: f(element, offset of its data element without the
// axis' term).
template <class F>
void for_each_element(const GatherElementsSpec& s, F f) {
  const size_t r = s.x.size();
  std::vector<int64_t> stride(r, 1), coord(r, 0);
  for (size_t d = r - 1; d > 0; --d) stride[d - 1] = stride[d] * s.x[d];
  const int64_t n = numel(s.indices);
  int64_t base = 0;  // sum over d != axis of coord[d] * stride[d]
  for (int64_t i = 0; i < n; ++i) {
    f(i, base);
    for (size_t d = r; d-- > 0;) {  // the next coordinate, row-major
      if (++coord[d] < s.indices[d]) {
        if (static_cast<int>(d) != s.axis) base += stride[d];
        break;
      }
      if (static_cast<int>(d) != s.axis) base -= (coord[d] - 1) * stride[d];
      coord[d] = 0;
    }
  }
}

int64_t axis_stride(const GatherElementsSpec& s) {
  int64_t stride = 1;
  for (size_t d = static_cast<size_t>(s.axis) + 1; d < s.x.size(); ++d) stride *= s.x[d];
  return stride;
}

int64_t checked_index(int64_t i, int64_t A) {
  if (i < -A || i >= A) fail("GatherElements: index ", i, " is out of range [", -A, ", ", A, ")");
  return i < 0 ? i + A : i;
}

void infer_gather_elements(InferCtx& c) {
  c.expect_inputs(2, 2);
  if (c.in(0).dtype != DType::f32) c.fail("data must be a float tensor, got ", dtype_name(c.in(0).dtype));
  if (c.in(1).dtype != DType::i64) c.fail("indices must be int64, got ", dtype_name(c.in(1).dtype));
  GatherElementsSpec s;
  if (std::string err = geometry(c.attrs(), c.shape(0), c.shape(1), s); !err.empty()) c.fail(err);
  c.set_out(0, c.shape(1), DType::f32);
}

void backward_gather_elements(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("x_shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("GatherElementsGrad", {b.grad_out(0), b.in(1)}, a));
}

template <class T>
void gather_elements_cpu(const CpuCall& c) {
  const GatherElementsSpec s = checked(c.node.attrs, *c.in[0].shape, *c.in[1].shape);
  const int64_t A = s.x[static_cast<size_t>(s.axis)], step = axis_stride(s);
  const T* x = c.in[0].as<T>();
  const int64_t* idx = c.in[1].as<int64_t>();
  T* y = c.out[0].as<T>();
  for_each_element(s, [&](int64_t i, int64_t base) { y[i] = x[base + checked_index(idx[i], A) * step]; });
}

// GatherElementsGrad(dy, indices) with the forward's axis and x_shape -> dx of the data's shape.
void infer_gather_elements_grad(InferCtx& c) {
  c.expect_inputs(2, 2);
  const Shape x = c.attrs().ints("x_shape");
  GatherElementsSpec s;
  if (std::string err = geometry(c.attrs(), x, c.shape(1), s); !err.empty()) c.fail(err);
  if (c.shape(0) != c.shape(1)) c.fail("dy has shape ", shape_str(c.shape(0)), ", expected ", shape_str(c.shape(1)));
  c.set_out(0, x);
}

template <class T>
void gather_elements_grad_cpu(const CpuCall& c) {
  const GatherElementsSpec s = checked(c.node.attrs, *c.out[0].shape, *c.in[1].shape);
  const int64_t A = s.x[static_cast<size_t>(s.axis)], step = axis_stride(s);
  const T* dy = c.in[0].as<T>();
  const int64_t* idx = c.in[1].as<int64_t>();
  T* dx = c.out[0].as<T>();
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for_each_element(s, [&](int64_t i, int64_t base) { dx[base + checked_index(idx[i], A) * step] += dy[i]; });
}

const OpDef gather_elements = {.name = "GatherElements", .infer = infer_gather_elements,
                               .backward = backward_gather_elements, .cpu_f32 = gather_elements_cpu<float>,
                               .cpu_f64 = gather_elements_cpu<double>};
const OpDef gather_elements_grad = {.name = "GatherElementsGrad", .infer = infer_gather_elements_grad,
                                    .cpu_f32 = gather_elements_grad_cpu<float>,
                                    .cpu_f64 = gather_elements_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> gather_elements_ops;
const std::vector<const OpDef*> gather_elements_ops = {&gather_elements, &gather_elements_grad};

GatherElementsSpec gather_elements_spec(const Attrs& a, const Shape& x, const Shape& indices) {
  return checked(a, x, indices);
}

}  // namespace monet::ops
