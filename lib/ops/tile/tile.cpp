// Tile(x) with the repeats as static input "repeats" (a constant 1-D tensor, one entry >= 1 per dim of x): y
// repeats x r_d times along dim d, y[i_0, ..] = x[i_0 mod d_0, ..]. Seen as (r_0, d_0, r_1, d_1, ...) (tile.h),
// y is x broadcast over the r's.
// Backward TileGrad(dy) -> dx: each x element sums the dy of its prod(r) copies, in double, in copy order.
#include <cstring>

#include "ops/common/broadcast.h"
#include "ops/tile/tile.h"

namespace monet::ops {
namespace {

// An error message for repeats that do not fit x, or "".
std::string check_repeats(const Attrs& a, const Shape& x) {
  if (!a.has("repeats")) return "repeats must be constant (attribute 'repeats')";
  const std::vector<int64_t> r = a.ints("repeats");
  if (r.size() != x.size())
    return "repeats has " + std::to_string(r.size()) + " entries for input shape " + shape_str(x);
  for (int64_t v : r)
    if (v < 1) return "repeats must be at least 1, got " + shape_str(r);
  return "";
}

void infer_tile(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (std::string err = check_repeats(c.attrs(), c.shape(0)); !err.empty()) c.fail(err);
  const std::vector<int64_t> r = c.attrs().ints("repeats");
  Shape y = c.shape(0);
  for (size_t d = 0; d < y.size(); ++d)
    if (__builtin_mul_overflow(y[d], r[d], &y[d])) c.fail("repeats ", shape_str(r), " overflow the output's size");
  c.set_out(0, y, c.in(0).dtype);
}

void backward_tile(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("repeats", b.node().attrs.ints("repeats"));
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("TileGrad", {b.grad_out(0)}, a));
}

// Moves bytes, so it serves every dtype.
template <class T>
void tile_cpu(const CpuCall& c) {
  const TileSpec s = tile_spec(c.node.attrs, *c.in[0].shape);
  const int64_t esize = element_bytes(c.in[0].dtype, sizeof(T));
  const char* x = static_cast<const char*>(c.in[0].data);  // (x_dims)
  char* y = static_cast<char*>(c.out[0].data);             // (view)
  const std::vector<int64_t> off = broadcast_offsets(s.x_dims, s.view);
  for (size_t i = 0; i < off.size(); ++i) std::memcpy(y + i * esize, x + off[i] * esize, esize);
}

// TileGrad(dy) with attributes repeats and shape (x's shape).
void infer_tile_grad(InferCtx& c) {
  c.expect_inputs(1, 1);
  const Shape x = c.attrs().ints("shape");
  if (std::string err = check_repeats(c.attrs(), x); !err.empty()) c.fail(err);
  if (tile_spec(c.attrs(), x).out != c.shape(0))
    c.fail("dy has shape ", shape_str(c.shape(0)), ", tiling ", shape_str(x), " gives ",
           shape_str(tile_spec(c.attrs(), x).out));
  c.set_out(0, x);
}

int64_t tile_grad_workspace(const Graph& g, const Node& node, int) {
  return numel(g.values[node.outputs[0]].shape) * static_cast<int64_t>(sizeof(double));
}

template <class T>
void tile_grad_cpu(const CpuCall& c) {
  const TileSpec s = tile_spec(c.node.attrs, *c.out[0].shape);
  const T* dy = c.in[0].as<T>();                     // (view)
  T* dx = c.out[0].as<T>();                          // (x_dims)
  double* acc = static_cast<double*>(c.workspace);   // (x_dims)
  const int64_t nx = c.out[0].numel();
  std::fill(acc, acc + nx, 0.0);
  const std::vector<int64_t> off = broadcast_offsets(s.x_dims, s.view);
  for (size_t i = 0; i < off.size(); ++i) acc[off[i]] += dy[i];
  for (int64_t i = 0; i < nx; ++i) dx[i] = static_cast<T>(acc[i]);
}

const OpDef tile = {.name = "Tile", .infer = infer_tile, .backward = backward_tile, .cpu_f32 = tile_cpu<float>,
                    .cpu_f64 = tile_cpu<double>, .static_inputs = {"", "repeats"}};
const OpDef tile_grad = {.name = "TileGrad", .infer = infer_tile_grad, .cpu_f32 = tile_grad_cpu<float>,
                         .cpu_f64 = tile_grad_cpu<double>, .cpu_workspace_bytes = tile_grad_workspace};

}  // namespace

extern const std::vector<const OpDef*> tile_ops;
const std::vector<const OpDef*> tile_ops = {&tile, &tile_grad};

// For other backends (tile.h).
TileSpec tile_spec(const Attrs& a, const Shape& x) {
  const std::vector<int64_t> r = a.ints("repeats");
  MONET_CHECK(r.size() == x.size(), "Tile repeats ", shape_str(r), " for ", shape_str(x));
  TileSpec s;
  for (size_t d = 0; d < x.size(); ++d) {
    s.out.push_back(r[d] * x[d]);
    if (r[d] != 1) {
      s.view.push_back(r[d]);
      s.x_dims.push_back(1);
    }
    s.view.push_back(x[d]);
    s.x_dims.push_back(x[d]);
  }
  return s;
}

}  // namespace monet::ops
