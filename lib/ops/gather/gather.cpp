// Gather(x) along attribute axis with constant indices (static input "indices"; the importer adds
// "indices_shape" when they are not 1-D): y = x[..., indices, ...], y.shape = x.shape[:axis] + indices.shape +
// x.shape[axis+1:]. A scalar index drops the axis (ViT's class token x[:, 0]). Negative indices count from the end.
// Backward: GatherGrad(dy) scatters dy into zeros of x's shape, adding where an index repeats.
// The forward copies rows of bytes, so every dtype works; the gradient is for floats.
//
// GatherIdx(x, indices int64) along attribute axis: the same with indices computed at run time - a token
// embedding, whose indices are the model's data input (the importer turns a Gather whose indices are not a
// constant into it). Backward: GatherIdxGrad(dy, indices) adds each dy row into zeros of x's shape, in index order
// (deterministic); the indices get no gradient. An index out of [-A, A) is an error.
#include <cstring>

#include "ops/op.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// x seen as (outer, A, inner) around the axis; indices normalised to [0, A).
struct GatherGeom {
  int64_t outer = 1, A = 1, inner = 1;
  std::vector<int64_t> index;
};

// Resolves axis and indices against x's shape; "" or an error message. out: y's shape.
std::string gather_geom(const Attrs& a, const Shape& x, GatherGeom& g, Shape& out) {
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = a.i("axis", 0);
  if (axis < -r || axis >= r) return "axis " + std::to_string(axis) + " is out of range for shape " + shape_str(x);
  if (axis < 0) axis += r;
  if (!a.has("indices")) return "indices must be constant (attribute 'indices')";
  g.index = a.ints("indices");
  const Shape ishape = a.ints("indices_shape", Shape{static_cast<int64_t>(g.index.size())});
  if (numel(ishape) != static_cast<int64_t>(g.index.size()))
    return "indices_shape " + shape_str(ishape) + " does not hold " + std::to_string(g.index.size()) + " indices";
  g.A = x[axis];
  for (int64_t& i : g.index) {
    if (i < -g.A || i >= g.A)
      return "index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) + " of size " +
             std::to_string(g.A);
    if (i < 0) i += g.A;
  }
  g.outer = g.inner = 1;
  for (int64_t d = 0; d < axis; ++d) g.outer *= x[d];
  for (int64_t d = axis + 1; d < r; ++d) g.inner *= x[d];
  out.assign(x.begin(), x.begin() + axis);
  out.insert(out.end(), ishape.begin(), ishape.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  return "";
}

GatherGeom checked_geom(const Attrs& a, const Shape& x) {
  GatherGeom g;
  Shape out;
  std::string err = gather_geom(a, x, g, out);
  MONET_CHECK(err.empty(), err);
  return g;
}

void infer_gather(InferCtx& c) {
  c.expect_inputs(1, 1);
  GatherGeom g;
  Shape out;
  if (std::string err = gather_geom(c.attrs(), c.shape(0), g, out); !err.empty()) c.fail(err);
  c.set_out(0, out, c.in(0).dtype);
}

void backward_gather(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("x_shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("GatherGrad", {b.grad_out(0)}, a));
}

template <class T>
void gather_cpu(const CpuCall& c) {
  const GatherGeom g = checked_geom(c.node.attrs, *c.in[0].shape);
  const int64_t K = static_cast<int64_t>(g.index.size());
  const int64_t row_bytes = g.inner * element_bytes(c.in[0].dtype, sizeof(T));
  const char* x = static_cast<const char*>(c.in[0].data);  // (outer, A, inner)
  char* y = static_cast<char*>(c.out[0].data);             // (outer, K, inner)
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t k = 0; k < K; ++k)
      std::memcpy(y + (o * K + k) * row_bytes, x + (o * g.A + g.index[k]) * row_bytes, row_bytes);
}

// GatherGrad(dy) with the forward's attributes and x_shape -> dx of x's shape.
void infer_gather_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape x = c.attrs().ints("x_shape");
  GatherGeom g;
  Shape y;
  if (std::string err = gather_geom(c.attrs(), x, g, y); !err.empty()) c.fail(err);
  if (y != c.shape(0)) c.fail("dy has shape ", shape_str(c.shape(0)), ", expected ", shape_str(y));
  c.set_out(0, x);
}

template <class T>
void gather_grad_cpu(const CpuCall& c) {
  const GatherGeom g = checked_geom(c.node.attrs, *c.out[0].shape);
  const int64_t K = static_cast<int64_t>(g.index.size());
  const T* dy = c.in[0].as<T>();  // (outer, K, inner)
  T* dx = c.out[0].as<T>();       // (outer, A, inner)
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t k = 0; k < K; ++k) {
      const T* src = dy + (o * K + k) * g.inner;
      T* dst = dx + (o * g.A + g.index[k]) * g.inner;
      for (int64_t j = 0; j < g.inner; ++j) dst[j] += src[j];
    }
}

// ---- GatherIdx: indices at run time.

// x (outer, A, inner) around the axis; y = x.shape[:axis] + indices.shape + x.shape[axis+1:].
struct IdxGeom {
  int64_t outer = 1, A = 1, inner = 1, K = 1;
  Shape out;
};

std::string idx_geom(const Attrs& a, const Shape& x, const Shape& indices, IdxGeom& g) {
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = a.i("axis", 0);
  if (axis < -r || axis >= r) return "axis " + std::to_string(axis) + " is out of range for shape " + shape_str(x);
  if (axis < 0) axis += r;
  g.A = x[axis];
  g.K = numel(indices);
  g.outer = g.inner = 1;
  for (int64_t d = 0; d < axis; ++d) g.outer *= x[d];
  for (int64_t d = axis + 1; d < r; ++d) g.inner *= x[d];
  g.out.assign(x.begin(), x.begin() + axis);
  g.out.insert(g.out.end(), indices.begin(), indices.end());
  g.out.insert(g.out.end(), x.begin() + axis + 1, x.end());
  return "";
}

IdxGeom checked_idx_geom(const Attrs& a, const Shape& x, const Shape& indices) {
  IdxGeom g;
  std::string err = idx_geom(a, x, indices, g);
  MONET_CHECK(err.empty(), err);
  return g;
}

int64_t checked_index(const int64_t* idx, int64_t k, int64_t A) {
  int64_t i = idx[k];
  if (i < -A || i >= A) fail("GatherIdx: index ", i, " is out of range [", -A, ", ", A, ")");
  return i < 0 ? i + A : i;
}

void infer_gather_idx(InferCtx& c) {
  c.expect_inputs(2, 2);
  if (c.in(1).dtype != DType::i64) c.fail("indices must be int64, got ", dtype_name(c.in(1).dtype));
  IdxGeom g;
  if (std::string err = idx_geom(c.attrs(), c.shape(0), c.shape(1), g); !err.empty()) c.fail(err);
  c.set_out(0, g.out, c.in(0).dtype);
}

void backward_gather_idx(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a = b.node().attrs;
  a.set("x_shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("GatherIdxGrad", {b.grad_out(0), b.in(1)}, a));
}

template <class T>
void gather_idx_cpu(const CpuCall& c) {
  const IdxGeom g = checked_idx_geom(c.node.attrs, *c.in[0].shape, *c.in[1].shape);
  const int64_t row_bytes = g.inner * element_bytes(c.in[0].dtype, sizeof(T));
  const char* x = static_cast<const char*>(c.in[0].data);  // (outer, A, inner)
  const int64_t* idx = c.in[1].as<int64_t>();              // (K)
  char* y = static_cast<char*>(c.out[0].data);             // (outer, K, inner)
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t k = 0; k < g.K; ++k)
      std::memcpy(y + (o * g.K + k) * row_bytes, x + (o * g.A + checked_index(idx, k, g.A)) * row_bytes, row_bytes);
}

// GatherIdxGrad(dy, indices) with the forward's axis and x_shape -> dx of x's shape.
void infer_gather_idx_grad(InferCtx& c) {
  c.expect_inputs(2, 2);
  const Shape x = c.attrs().ints("x_shape");
  IdxGeom g;
  if (std::string err = idx_geom(c.attrs(), x, c.shape(1), g); !err.empty()) c.fail(err);
  if (g.out != c.shape(0)) c.fail("dy has shape ", shape_str(c.shape(0)), ", expected ", shape_str(g.out));
  c.set_out(0, x);
}

template <class T>
void gather_idx_grad_cpu(const CpuCall& c) {
  const IdxGeom g = checked_idx_geom(c.node.attrs, *c.out[0].shape, *c.in[1].shape);
  const T* dy = c.in[0].as<T>();               // (outer, K, inner)
  const int64_t* idx = c.in[1].as<int64_t>();  // (K)
  T* dx = c.out[0].as<T>();                    // (outer, A, inner)
  std::fill(dx, dx + c.out[0].numel(), T(0));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t k = 0; k < g.K; ++k) {
      const T* src = dy + (o * g.K + k) * g.inner;
      T* dst = dx + (o * g.A + checked_index(idx, k, g.A)) * g.inner;
      for (int64_t j = 0; j < g.inner; ++j) dst[j] += src[j];
    }
}

const OpDef gather = {.name = "Gather", .infer = infer_gather, .backward = backward_gather,
                      .cpu_f32 = gather_cpu<float>, .cpu_f64 = gather_cpu<double>, .static_inputs = {"", "indices"}};
const OpDef gather_grad = {.name = "GatherGrad", .infer = infer_gather_grad,
                           .cpu_f32 = gather_grad_cpu<float>, .cpu_f64 = gather_grad_cpu<double>};
const OpDef gather_idx = {.name = "GatherIdx", .infer = infer_gather_idx, .backward = backward_gather_idx,
                          .cpu_f32 = gather_idx_cpu<float>, .cpu_f64 = gather_idx_cpu<double>};
const OpDef gather_idx_grad = {.name = "GatherIdxGrad", .infer = infer_gather_idx_grad,
                               .cpu_f32 = gather_idx_grad_cpu<float>, .cpu_f64 = gather_idx_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> gather_ops;
const std::vector<const OpDef*> gather_ops = {&gather, &gather_grad, &gather_idx, &gather_idx_grad};

// For other backends (ops/common/plans.h).
GatherSpec gather_spec(const Attrs& a, const Shape& x) {
  const GatherGeom g = checked_geom(a, x);
  return {g.outer, g.A, g.inner, g.index};
}

GatherIdxSpec gather_idx_spec(const Attrs& a, const Shape& x, const Shape& indices) {
  const IdxGeom g = checked_idx_geom(a, x, indices);
  return {g.outer, g.A, g.inner, g.K};
}

}  // namespace monet::ops
