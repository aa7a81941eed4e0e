// CUDA kernels of the data-movement ops (host side): Concat, Split, SplitGrad, Slice, SliceGrad, Transpose,
// Pad, PadGrad, Resize, ResizeGrad, Gather, GatherGrad, GatherIdx, GatherIdxGrad, GatherElements and its gradient,
// Tile, Trilu, and the reshaping copies (Flatten, Reshape, ReshapeGrad, Squeeze, Unsqueeze). Slices, permutations
// and tilings are strided copies;
// Pad, Resize and Gather read index tables that their op folders compute (ops/common/plans.h) and that are copied
// into the node's workspace (so they live in the arena like every other device byte). Byte-moving ops serve every
// dtype, as on the CPU.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "engine/cuda/cuda_ops.h"
#include "ops/common/plans.h"
#include "ops/tile/tile.h"
#include "ops/trilu/trilu.h"

namespace monet::cuda {
namespace {

int esize(const TensorRef& t) { return static_cast<int>(element_bytes(t.dtype, 4)); }

// Consecutive 256-byte-aligned pieces of a workspace.
struct Layout {
  std::vector<int64_t> at;
  int64_t total = 0;
  int64_t add(int64_t bytes) {
    at.push_back(total);
    total += align_up(std::max<int64_t>(bytes, 1));
    return at.back();
  }
};

Dims dims2(int64_t a, int64_t b) {
  Dims d;
  d.rank = 2;
  d.size[0] = a, d.size[1] = b;
  return d;
}
Strides strides2(int64_t a, int64_t b) {
  Strides s;
  s.s[0] = a, s.s[1] = b;
  return s;
}

int64_t normalised_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// outer = product of dims before axis, inner = after it.
void outer_inner(const Shape& s, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
}

// ---------------------------------------------------------------------------------------------- copies

void run_copy(const CudaCall& c) {
  copy_bytes(c, c.out[0].data, c.in[0].data, c.in[0].numel() * esize(c.in[0]));
}

// Concat: output row o (of outer rows) is the inputs' rows o laid end to end.
void run_concat(const CudaCall& c) {
  const Shape& ys = c.out_shape(0);
  const int64_t axis = normalised_axis(c.node.attrs.i("axis"), ys.size());
  int64_t outer, inner;
  outer_inner(ys, axis, outer, inner);
  const int64_t y_row = ys[axis] * inner;
  int64_t col = 0;
  for (const TensorRef& in : c.in) {
    const int64_t x_row = (*in.shape)[axis] * inner;
    MONET_CUDA_CHECK(strided_copy(esize(in), dims2(outer, x_row), strides2(x_row, 1), 0, in.data,
                                  strides2(y_row, 1), col, c.out[0].data, c.ctx.stream));
    col += x_row;
  }
}

void run_split(const CudaCall& c) {
  const Shape& xs = c.in_shape(0);
  const int64_t axis = normalised_axis(c.node.attrs.i("axis", 0), xs.size());
  int64_t outer, inner;
  outer_inner(xs, axis, outer, inner);
  const int64_t x_row = xs[axis] * inner;
  int64_t col = 0;
  for (const TensorRef& out : c.out) {
    const int64_t y_row = (*out.shape)[axis] * inner;
    MONET_CUDA_CHECK(strided_copy(esize(c.in[0]), dims2(outer, y_row), strides2(x_row, 1), col, c.in[0].data,
                                  strides2(y_row, 1), 0, out.data, c.ctx.stream));
    col += y_row;
  }
}

// SplitGrad(dy_present...): the present pieces copied into place, the absent ones zero (each absent piece's columns
// of every outer row set alone: the output is written once).
void run_split_grad(const CudaCall& c) {
  const Shape& xs = c.out_shape(0);
  const int64_t axis = normalised_axis(c.node.attrs.i("axis", 0), xs.size());
  const std::vector<int64_t> sizes = c.node.attrs.ints("split"), present = c.node.attrs.ints("present");
  int64_t outer, inner;
  outer_inner(xs, axis, outer, inner);
  const int64_t x_row = xs[axis] * inner;
  int64_t col = 0;
  int i = 0;
  for (size_t o = 0; o < sizes.size(); ++o) {
    const int64_t y_row = sizes[o] * inner;
    if (present[o]) {
      MONET_CUDA_CHECK(strided_copy(4, dims2(outer, y_row), strides2(y_row, 1), 0, c.in[i].data, strides2(x_row, 1),
                                    col, c.out[0].data, c.ctx.stream));
      ++i;
    } else if (y_row > 0 && outer > 0) {
      MONET_CUDA_CHECK(cudaMemset2DAsync(static_cast<float*>(c.out[0].data) + col, static_cast<size_t>(x_row) * 4, 0,
                                         static_cast<size_t>(y_row) * 4, static_cast<size_t>(outer), c.ctx.stream));
    }
    col += y_row;
  }
}

// The strided view of x that a Slice reads: shape len, stride step * x stride, base at the starts.
void slice_view(const Shape& xs, const ops::SliceSpec& s, Strides& stride, int64_t& base) {
  const Strides xst = contiguous_strides(xs);
  base = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    stride.s[d] = s.step[d] * xst.s[d];
    base += s.start[d] * xst.s[d];
  }
}

void run_slice(const CudaCall& c) {
  const ops::SliceSpec s = ops::slice_spec(c.node.attrs, c.in_shape(0));
  Strides src;
  int64_t base;
  slice_view(c.in_shape(0), s, src, base);
  MONET_CUDA_CHECK(strided_copy(esize(c.in[0]), dims_of(s.len), src, base, c.in[0].data, contiguous_strides(s.len), 0,
                                c.out[0].data, c.ctx.stream));
}

void run_slice_grad(const CudaCall& c) {
  const ops::SliceSpec s = ops::slice_spec(c.node.attrs, c.out_shape(0));
  Strides dst;
  int64_t base;
  slice_view(c.out_shape(0), s, dst, base);
  MONET_CUDA_CHECK(cudaMemsetAsync(c.out[0].data, 0, static_cast<size_t>(c.out[0].numel()) * 4, c.ctx.stream));
  MONET_CUDA_CHECK(strided_copy(4, dims_of(s.len), contiguous_strides(s.len), 0, c.in[0].data, dst, base,
                                c.out[0].data, c.ctx.stream));
}

// Transpose: y axis k walks x axis perm[k] (default perm: the axes reversed).
void run_transpose(const CudaCall& c) {
  const Shape& xs = c.in_shape(0);
  const std::vector<int64_t> perm = ops::transpose_perm(c.node.attrs, xs.size());
  const Strides xst = contiguous_strides(xs);
  Strides src;
  for (size_t k = 0; k < perm.size(); ++k) src.s[k] = xst.s[perm[k]];
  const Shape& ys = c.out_shape(0);
  if (ys.empty()) return run_copy(c);
  MONET_CUDA_CHECK(strided_copy(esize(c.in[0]), dims_of(ys), src, 0, c.in[0].data, contiguous_strides(ys), 0,
                                c.out[0].data, c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- Pad

// Pad's tables: per axis, the x index each y index reads (-1: the constant), laid end to end.
struct PadTables {
  std::vector<int64_t> table;
  Strides axis_offset;
};
PadTables pad_tables(const ops::PadSpec& p) {
  PadTables t;
  for (size_t d = 0; d < p.src.size(); ++d) {
    t.axis_offset.s[d] = static_cast<int64_t>(t.table.size());
    t.table.insert(t.table.end(), p.src[d].begin(), p.src[d].end());
  }
  return t;
}

int64_t pad_workspace(const Graph& g, const Node& n, CudaContext&) {
  return align_up(static_cast<int64_t>(pad_tables(ops::pad_spec(n.attrs, g.values[n.inputs[0]].shape)).table.size()) * 8);
}

void run_pad(const CudaCall& c) {
  const ops::PadSpec p = ops::pad_spec(c.node.attrs, c.in_shape(0));
  const PadTables t = pad_tables(p);
  const int64_t* table = upload_table(c, 0, t.table);
  MONET_CUDA_CHECK(pad(dims_of(c.in_shape(0)), dims_of(p.out), table, t.axis_offset, static_cast<float>(p.value),
                       c.fin(0), c.fout(0), c.ctx.stream));
}

// PadGrad's tables: per axis, for each x index the y indices that read it (CSR: starts, then entries).
struct PadGradTables {
  std::vector<int64_t> csr;
  CsrAxes axes;
};
PadGradTables pad_grad_tables(const ops::PadSpec& p, const Shape& xs) {
  PadGradTables t;
  for (size_t d = 0; d < xs.size(); ++d) {
    const std::vector<int64_t>& src = p.src[d];
    std::vector<std::vector<int64_t>> readers(static_cast<size_t>(xs[d]));
    for (size_t o = 0; o < src.size(); ++o)
      if (src[o] >= 0) readers[static_cast<size_t>(src[o])].push_back(static_cast<int64_t>(o));
    t.axes.start_offset[d] = static_cast<int64_t>(t.csr.size());
    int64_t at = 0;
    for (const auto& r : readers) {
      t.csr.push_back(at);
      at += static_cast<int64_t>(r.size());
    }
    t.csr.push_back(at);
    t.axes.entry_offset[d] = static_cast<int64_t>(t.csr.size());
    for (const auto& r : readers) t.csr.insert(t.csr.end(), r.begin(), r.end());
  }
  return t;
}

int64_t pad_grad_workspace(const Graph& g, const Node& n, CudaContext&) {
  const Shape& xs = g.values[n.outputs[0]].shape;
  return align_up(static_cast<int64_t>(pad_grad_tables(ops::pad_spec(n.attrs, xs), xs).csr.size()) * 8);
}

void run_pad_grad(const CudaCall& c) {
  const Shape& xs = c.out_shape(0);
  const ops::PadSpec p = ops::pad_spec(c.node.attrs, xs);
  const PadGradTables t = pad_grad_tables(p, xs);
  const int64_t* csr = upload_table(c, 0, t.csr);
  MONET_CUDA_CHECK(pad_grad(dims_of(xs), dims_of(p.out), csr, t.axes, c.fin(0), c.fout(0), c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- Resize

// Forward tables: i0h, i1h, i0w, i1w (int64), w0h, w1h, w0w, w1w (double).
Layout resize_layout(const ops::ResizeSpec& r) {
  Layout l;
  const int64_t OH = r.out[2], OW = r.out[3];
  for (int64_t len : {OH, OH, OW, OW, OH, OH, OW, OW}) l.add(len * 8);
  return l;
}

// The factor f where an axis's nearest taps are those of upsampling `in` by f (out = f in, tap o = o / f), else 0.
// Such a Resize runs without its tables (kernels.h resize_nearest_up); its workspace stays the tables' size, so that
// a profile's workspaces hold whichever kernel runs.
int whole_factor(const std::vector<int64_t>& taps, int64_t in) {
  const int64_t out = static_cast<int64_t>(taps.size());
  if (in < 1 || out % in != 0 || out / in > (int64_t{1} << 20)) return 0;
  const int64_t f = out / in;
  for (int64_t o = 0; o < out; ++o)
    if (taps[static_cast<size_t>(o)] != o / f) return 0;
  return static_cast<int>(f);
}

struct WholeFactors {
  int h = 0, w = 0;
  bool any() const { return h > 0 && w > 0; }
};
WholeFactors nearest_whole_factors(const ops::ResizeSpec& r, const Shape& xs) {
  if (r.linear) return {};
  return {whole_factor(r.i0h, xs[2]), whole_factor(r.i0w, xs[3])};
}

int64_t resize_workspace(const Graph& g, const Node& n, CudaContext&) {
  return resize_layout(ops::resize_spec(n.attrs, g.values[n.inputs[0]].shape)).total;
}

void run_resize(const CudaCall& c) {
  const Shape& xs = c.in_shape(0);
  const ops::ResizeSpec r = ops::resize_spec(c.node.attrs, xs);
  if (const WholeFactors f = nearest_whole_factors(r, xs); f.any()) {
    MONET_CUDA_CHECK(resize_nearest_up(xs[0] * xs[1] * xs[2], xs[3], f.h, f.w, c.fin(0), c.fout(0), c.ctx.stream));
    return;
  }
  const Layout l = resize_layout(r);
  ResizeTables t;
  t.i0h = upload_table(c, l.at[0], r.i0h);
  t.i1h = upload_table(c, l.at[1], r.i1h);
  t.i0w = upload_table(c, l.at[2], r.i0w);
  t.i1w = upload_table(c, l.at[3], r.i1w);
  t.w0h = upload_table(c, l.at[4], r.w0h);
  t.w1h = upload_table(c, l.at[5], r.w1h);
  t.w0w = upload_table(c, l.at[6], r.w0w);
  t.w1w = upload_table(c, l.at[7], r.w1w);
  MONET_CUDA_CHECK(
      resize(xs[0] * xs[1], xs[2], xs[3], r.out[2], r.out[3], r.linear, t, c.fin(0), c.fout(0), c.ctx.stream));
}

// Gradient tables of one axis: for input index i, the (output index, weight) pairs that read it, in output
// order and, within one output, tap 0 before tap 1 (nearest reads tap 0 only).
struct AxisReaders {
  std::vector<int64_t> start, out;
  std::vector<double> weight;
};
AxisReaders axis_readers(int64_t in, const std::vector<int64_t>& i0, const std::vector<int64_t>& i1,
                         const std::vector<double>& w0, const std::vector<double>& w1, bool linear) {
  std::vector<std::vector<std::pair<int64_t, double>>> r(static_cast<size_t>(in));
  for (size_t o = 0; o < i0.size(); ++o) {
    r[static_cast<size_t>(i0[o])].emplace_back(static_cast<int64_t>(o), w0[o]);
    if (linear) r[static_cast<size_t>(i1[o])].emplace_back(static_cast<int64_t>(o), w1[o]);
  }
  AxisReaders a;
  for (const auto& list : r) {
    a.start.push_back(static_cast<int64_t>(a.out.size()));
    for (const auto& [o, w] : list) {
      a.out.push_back(o);
      a.weight.push_back(w);
    }
  }
  a.start.push_back(static_cast<int64_t>(a.out.size()));
  return a;
}

struct ResizeGradPlan {
  AxisReaders h, w;
  Layout layout;  // start_h, out_h, weight_h, start_w, out_w, weight_w
};
ResizeGradPlan resize_grad_plan(const ops::ResizeSpec& r, const Shape& xs) {
  ResizeGradPlan p;
  p.h = axis_readers(xs[2], r.i0h, r.i1h, r.w0h, r.w1h, r.linear);
  p.w = axis_readers(xs[3], r.i0w, r.i1w, r.w0w, r.w1w, r.linear);
  for (const AxisReaders* a : {&p.h, &p.w}) {
    p.layout.add(static_cast<int64_t>(a->start.size()) * 8);
    p.layout.add(static_cast<int64_t>(a->out.size()) * 8);
    p.layout.add(static_cast<int64_t>(a->weight.size()) * 8);
  }
  return p;
}

int64_t resize_grad_workspace(const Graph& g, const Node& n, CudaContext&) {
  const Shape& xs = g.values[n.outputs[0]].shape;
  return resize_grad_plan(ops::resize_spec(n.attrs, xs), xs).layout.total;
}

void run_resize_grad(const CudaCall& c) {
  const Shape& xs = c.out_shape(0);
  const ops::ResizeSpec r = ops::resize_spec(c.node.attrs, xs);
  if (const WholeFactors f = nearest_whole_factors(r, xs); f.any()) {
    MONET_CUDA_CHECK(
        resize_nearest_up_grad(xs[0] * xs[1] * xs[2], xs[3], f.h, f.w, c.fin(0), c.fout(0), c.ctx.stream));
    return;
  }
  const ResizeGradPlan p = resize_grad_plan(r, xs);
  ResizeGradTables t;
  t.start_h = upload_table(c, p.layout.at[0], p.h.start);
  t.out_h = upload_table(c, p.layout.at[1], p.h.out);
  t.weight_h = upload_table(c, p.layout.at[2], p.h.weight);
  t.start_w = upload_table(c, p.layout.at[3], p.w.start);
  t.out_w = upload_table(c, p.layout.at[4], p.w.out);
  t.weight_w = upload_table(c, p.layout.at[5], p.w.weight);
  MONET_CUDA_CHECK(
      resize_grad(xs[0] * xs[1], xs[2], xs[3], r.out[2], r.out[3], t, c.fin(0), c.fout(0), c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- Gather

int64_t gather_workspace(const Graph&, const Node& n, CudaContext&) {
  return align_up(static_cast<int64_t>(n.attrs.ints("indices").size()) * 8);
}

void run_gather(const CudaCall& c) {
  const ops::GatherSpec s = ops::gather_spec(c.node.attrs, c.in_shape(0));
  const int64_t* idx = upload_table(c, 0, s.index);
  MONET_CUDA_CHECK(gather(esize(c.in[0]), s.outer, s.A, static_cast<int64_t>(s.index.size()), s.inner, idx,
                          c.in[0].data, c.out[0].data, c.ctx.stream));
}

// The indices are the node's constants: sorted on the host with their positions (stable: k order among equal ones),
// in the same K x 8 bytes of workspace as the forward's table.
void run_gather_grad(const CudaCall& c) {
  const ops::GatherSpec s = ops::gather_spec(c.node.attrs, c.out_shape(0));
  const int64_t K = static_cast<int64_t>(s.index.size());
  MONET_CHECK(s.A <= INT32_MAX && K <= INT32_MAX, c.node.name, ": GatherGrad on CUDA takes at most 2^31 - 1 rows and indices");
  std::vector<int32_t> order(static_cast<size_t>(K)), keys(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) order[static_cast<size_t>(k)] = static_cast<int32_t>(k);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return s.index[x] < s.index[y]; });
  for (int64_t k = 0; k < K; ++k) keys[static_cast<size_t>(k)] = static_cast<int32_t>(s.index[order[k]]);
  const int32_t* keys_d = upload_table(c, 0, keys);
  const int32_t* order_d = upload_table(c, K * 4, order);
  MONET_CUDA_CHECK(gather_grad(s.outer, s.A, K, s.inner, keys_d, order_d, c.fin(0), c.fout(0), c.ctx.stream));
}

void run_gather_idx(const CudaCall& c) {
  const ops::GatherIdxSpec s = ops::gather_idx_spec(c.node.attrs, c.in_shape(0), c.in_shape(1));
  MONET_CUDA_CHECK(gather_idx(esize(c.in[0]), s.outer, s.A, s.K, s.inner, static_cast<const int64_t*>(c.in[1].data),
                              c.in[0].data, c.out[0].data, c.ctx.stream));
}

void run_gather_idx_grad(const CudaCall& c) {
  const ops::GatherIdxSpec s = ops::gather_idx_spec(c.node.attrs, c.out_shape(0), c.in_shape(1));
  MONET_CUDA_CHECK(gather_idx_grad(s.outer, s.A, s.K, s.inner, static_cast<const int64_t*>(c.in[1].data), c.fin(0),
                                   c.fout(0), c.workspace, c.workspace_bytes, c.ctx.stream));
}

void run_gather_elements(const CudaCall& c) {
  const ops::GatherElementsSpec s = ops::gather_elements_spec(c.node.attrs, c.in_shape(0), c.in_shape(1));
  MONET_CUDA_CHECK(gather_elements(dims_of(s.indices), contiguous_strides(s.x), s.axis, s.x[s.axis],
                                   static_cast<const int64_t*>(c.in[1].data), c.fin(0), c.fout(0), c.ctx.stream));
}

void run_gather_elements_grad(const CudaCall& c) {
  const ops::GatherElementsSpec s = ops::gather_elements_spec(c.node.attrs, c.out_shape(0), c.in_shape(1));
  MONET_CUDA_CHECK(gather_elements_grad(dims_of(s.indices), contiguous_strides(s.x), s.axis, s.x[s.axis],
                                        static_cast<const int64_t*>(c.in[1].data), c.fin(0), c.fout(0),
                                        numel(s.x), c.ctx.stream));
}

// Inputs dY 0, indices 1; output dX (the data's shape).
int64_t gather_idx_grad_ws(const Graph& g, const Node& n, CudaContext&) {
  const ops::GatherIdxSpec s =
      ops::gather_idx_spec(n.attrs, g.values[n.outputs[0]].shape, g.values[n.inputs[1]].shape);
  const int64_t bytes = gather_idx_grad_workspace(s.A, s.K);
  if (bytes < 0)
    fail("node '", n.name, "' (GatherIdxGrad): ", s.K, " indices into ", s.A,
         " rows exceed the CUDA kernel's int32 sort (at most 2^31 - 2 each)");
  return bytes;
}

// ---------------------------------------------------------------------------------------------- Tile, Trilu

// Tile: y is x broadcast over tile.h's view (r_0, d_0, r_1, d_1, ...), a strided copy with stride 0 on the r's.
void run_tile(const CudaCall& c) {
  const ops::TileSpec s = ops::tile_spec(c.node.attrs, c.in_shape(0));
  if (s.view.empty()) return run_copy(c);
  MONET_CUDA_CHECK(strided_copy(esize(c.in[0]), dims_of(s.view), broadcast_strides_to(s.x_dims, s.view), 0,
                                c.in[0].data, contiguous_strides(s.view), 0, c.out[0].data, c.ctx.stream));
}

// Expand: every dtype, as a copy whose source strides are 0 along the broadcast dims.
void run_expand(const CudaCall& c) {
  const Shape& out = c.out_shape(0);
  if (out.empty() || c.in_shape(0) == out) return run_copy(c);
  MONET_CUDA_CHECK(strided_copy(esize(c.in[0]), dims_of(out), broadcast_strides_to(c.in_shape(0), out), 0,
                                c.in[0].data, contiguous_strides(out), 0, c.out[0].data, c.ctx.stream));
}

void run_trilu(const CudaCall& c) {
  const ops::TriluSpec s = ops::trilu_spec(c.node.attrs, c.in_shape(0));
  MONET_CUDA_CHECK(trilu(s.batch, s.R, s.C, s.k, s.upper, c.fin(0), c.fout(0), c.ctx.stream));
}

}  // namespace

void add_shape_kernels(CudaKernelTable& t) {
  for (const char* op : {"Flatten", "Reshape", "ReshapeGrad", "Squeeze", "Unsqueeze"}) t[op] = {run_copy};
  t["Concat"] = {run_concat};
  t["Split"] = {run_split};
  t["SplitGrad"] = {run_split_grad};
  t["Slice"] = {run_slice};
  t["SliceGrad"] = {run_slice_grad};
  t["Transpose"] = {run_transpose};
  t["Pad"] = {run_pad, pad_workspace};
  t["PadGrad"] = {run_pad_grad, pad_grad_workspace};
  t["Resize"] = {run_resize, resize_workspace};
  t["ResizeGrad"] = {run_resize_grad, resize_grad_workspace};
  t["Gather"] = {run_gather, gather_workspace};
  t["GatherGrad"] = {run_gather_grad, gather_workspace};
  t["GatherIdx"] = {run_gather_idx};
  t["GatherIdxGrad"] = {run_gather_idx_grad, gather_idx_grad_ws};
  t["GatherElements"] = {run_gather_elements};
  t["GatherElementsGrad"] = {run_gather_elements_grad};
  t["Tile"] = {run_tile};
  t["Expand"] = {run_expand};
  t["Trilu"] = {run_trilu};
}

}  // namespace monet::cuda
