// CUDA kernels of the elementwise ops (host side): activations and their gradients, Add/Sub/Mul/Div and their
// fused reduce-to-input gradients, Sum, ReduceSumTo/BroadcastTo/Expand, Identity, the comparisons and Where on
// masks, Cast, Dropout, SgdUpdate.
// Semantics are the CPU kernels' of lib/ops/<op> (attributes read the same way, the same broadcasting).
#include <cmath>
#include <numbers>

#include "engine/cuda/cuda_ops.h"
#include "ops/common/plans.h"

namespace monet::cuda {
namespace {

int64_t n_of(const CudaCall& c) { return c.in[0].numel(); }

// ---------------------------------------------------------------------------------------------- activations

template <Unary op>
void run_unary(const CudaCall& c) {
  MONET_CUDA_CHECK(unary(op, n_of(c), c.fin(0), c.fout(0), 0.f, 0.f, c.ctx.stream));
}

void run_clip(const CudaCall& c) {
  const auto [lo, hi] = ops::clip_bounds(c.node.attrs);
  MONET_CUDA_CHECK(unary(Unary::clip, n_of(c), c.fin(0), c.fout(0), static_cast<float>(lo), static_cast<float>(hi),
                         c.ctx.stream));
}

void run_hard_sigmoid(const CudaCall& c) {
  const float alpha = static_cast<float>(c.node.attrs.f("alpha", 0.2));
  const float beta = static_cast<float>(c.node.attrs.f("beta", 0.5));
  MONET_CUDA_CHECK(unary(Unary::hard_sigmoid, n_of(c), c.fin(0), c.fout(0), alpha, beta, c.ctx.stream));
}

float exponent_of(const Node& n) { return static_cast<float>(n.attrs.floats("exponent")[0]); }

void run_pow(const CudaCall& c) {
  const float p = exponent_of(c.node);
  MONET_CUDA_CHECK(unary(p == 2.f ? Unary::square : Unary::pow, n_of(c), c.fin(0), c.fout(0), p, 0.f, c.ctx.stream));
}

template <UnaryGrad op>
void run_unary_grad(const CudaCall& c) {
  MONET_CUDA_CHECK(unary_grad(op, n_of(c), c.fin(0), c.fin(1), c.fout(0), 0.f, 0.f, c.ctx.stream));
}

// Relu(x) -> y, mask (1 bit per element, lib/ops/relu).
void run_relu(const CudaCall& c) {
  MONET_CUDA_CHECK(relu_mask(n_of(c), c.fin(0), c.fout(0), static_cast<uint32_t*>(c.out[1].data), c.ctx.stream));
}

// ReluGrad(dy, y, x, mask): output-activated (impl 0) reads y, input-activated (impl 1) x, intermediate-activated
// (impl 2) the mask; y > 0 exactly where x > 0, exactly where the mask bit is set.
void run_relu_grad(const CudaCall& c) {
  if (c.impl == 2) {
    MONET_CUDA_CHECK(
        relu_grad_mask(n_of(c), c.fin(0), static_cast<const uint32_t*>(c.in[3].data), c.fout(0), c.ctx.stream));
    return;
  }
  MONET_CUDA_CHECK(
      unary_grad(UnaryGrad::relu, n_of(c), c.fin(0), c.fin(c.impl == 0 ? 1 : 2), c.fout(0), 0.f, 0.f, c.ctx.stream));
}

// ClipGrad(dy, x, y): input-activated (impl 0, x, bounds inclusive) or output-activated (impl 1, y, exclusive).
void run_clip_grad(const CudaCall& c) {
  const auto [lo, hi] = ops::clip_bounds(c.node.attrs);
  MONET_CUDA_CHECK(unary_grad(c.impl == 0 ? UnaryGrad::clip : UnaryGrad::clip_output, n_of(c), c.fin(0),
                              c.fin(c.impl == 0 ? 1 : 2), c.fout(0), static_cast<float>(lo), static_cast<float>(hi),
                              c.ctx.stream));
}

void run_hard_sigmoid_grad(const CudaCall& c) {
  const float alpha = static_cast<float>(c.node.attrs.f("alpha", 0.2));
  const float beta = static_cast<float>(c.node.attrs.f("beta", 0.5));
  MONET_CUDA_CHECK(
      unary_grad(UnaryGrad::hard_sigmoid, n_of(c), c.fin(0), c.fin(1), c.fout(0), alpha, beta, c.ctx.stream));
}

void run_pow_grad(const CudaCall& c) {
  MONET_CUDA_CHECK(
      unary_grad(UnaryGrad::pow, n_of(c), c.fin(0), c.fin(1), c.fout(0), exponent_of(c.node), 0.f, c.ctx.stream));
}

void run_erf_grad(const CudaCall& c) {
  const float two_over_sqrt_pi = static_cast<float>(2.0 * std::numbers::inv_sqrtpi);  // as the CPU kernel
  MONET_CUDA_CHECK(
      unary_grad(UnaryGrad::erf, n_of(c), c.fin(0), c.fin(1), c.fout(0), two_over_sqrt_pi, 0.f, c.ctx.stream));
}

float gelu_divisor(const Node& n) { return static_cast<float>(n.attrs.f("divisor", std::numbers::sqrt2)); }

void run_gelu(const CudaCall& c) {
  MONET_CUDA_CHECK(unary(Unary::gelu, n_of(c), c.fin(0), c.fout(0), gelu_divisor(c.node), 0.f, c.ctx.stream));
}

void run_gelu_grad(const CudaCall& c) {
  const float divisor = gelu_divisor(c.node);
  const float k = static_cast<float>(std::numbers::inv_sqrtpi / c.node.attrs.f("divisor", std::numbers::sqrt2));
  MONET_CUDA_CHECK(unary_grad(UnaryGrad::gelu, n_of(c), c.fin(0), c.fin(1), c.fout(0), divisor, k, c.ctx.stream));
}

void run_leaky_relu(const CudaCall& c) {
  const float alpha = static_cast<float>(c.node.attrs.f("alpha", 0.01));
  MONET_CUDA_CHECK(unary(Unary::leaky_relu, n_of(c), c.fin(0), c.fout(0), alpha, 0.f, c.ctx.stream));
}

void run_leaky_relu_grad(const CudaCall& c) {
  const float alpha = static_cast<float>(c.node.attrs.f("alpha", 0.01));
  MONET_CUDA_CHECK(
      unary_grad(UnaryGrad::leaky_relu, n_of(c), c.fin(0), c.fin(1), c.fout(0), alpha, 0.f, c.ctx.stream));
}

// Elu, Selu and EluGrad: alpha and gamma as the CPU kernels read them.
void run_elu(const CudaCall& c) {
  const ops::EluScale s = ops::elu_scale(c.node);
  MONET_CUDA_CHECK(unary(Unary::elu, n_of(c), c.fin(0), c.fout(0), static_cast<float>(s.alpha),
                         static_cast<float>(s.gamma), c.ctx.stream));
}

void run_elu_grad(const CudaCall& c) {
  const ops::EluScale s = ops::elu_scale(c.node);
  MONET_CUDA_CHECK(unary_grad(UnaryGrad::elu, n_of(c), c.fin(0), c.fin(1), c.fout(0), static_cast<float>(s.alpha),
                              static_cast<float>(s.gamma), c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- binary

template <Binary op>
void run_binary(const CudaCall& c) {
  binary_op(c, op, c.out_shape(0), c.in_shape(0), c.fin(0), c.in_shape(1), c.fin(1), c.fout(0));
}

// dx = ReduceSumTo(term(dy, operands...), attr shape): dy is input 0, the operands follow. A reduction over many
// terms into few outputs is split over blocks, its partial sums in the workspace (kernels.h reduce_to), a pure
// function of the shapes: the workspace function builds the same geometry as the run.
template <int K>
ReduceGeom grad_sum_to_geom(const Graph& g, const Node& n) {
  const Shape& dy = g.values[n.inputs[0]].shape;
  const Shape* p0 = K >= 1 ? &g.values[n.inputs[1]].shape : nullptr;
  const Shape* p1 = K >= 2 ? &g.values[n.inputs[2]].shape : nullptr;
  return reduce_geom(dy, g.values[n.outputs[0]].shape, p0, p1);
}

template <int K>
int64_t grad_sum_to_workspace(const Graph& g, const Node& n, CudaContext&) {
  return reduce_to_workspace_bytes(grad_sum_to_geom<K>(g, n));
}

template <Term t, int K>
void run_grad_sum_to(const CudaCall& c) {
  const ReduceGeom g = grad_sum_to_geom<K>(c.g, c.node);
  MONET_CHECK(c.workspace_bytes >= reduce_to_workspace_bytes(g), "workspace too small for ", c.node.name);
  MONET_CUDA_CHECK(reduce_to(t, g, c.fin(0), K >= 1 ? c.fin(1) : nullptr, K >= 2 ? c.fin(2) : nullptr, c.fout(0), 1.0,
                             static_cast<double*>(c.workspace), c.ctx.stream));
}

// Sum(x0, x1, ...): y = x0, then y += xk in input order (the CPU's order).
void run_sum(const CudaCall& c) {
  if (c.in.size() == 1) return copy_bytes(c, c.fout(0), c.fin(0), c.out[0].numel() * 4);
  // y = x0 + x1 in one pass (not a copy, then an add), then each further input added in place.
  binary_op(c, Binary::add, c.out_shape(0), c.in_shape(0), c.fin(0), c.in_shape(1), c.fin(1), c.fout(0));
  for (size_t k = 2; k < c.in.size(); ++k)
    binary_op(c, Binary::add, c.out_shape(0), c.out_shape(0), c.fout(0), c.in_shape(static_cast<int>(k)),
              c.fin(static_cast<int>(k)), c.fout(0));
}

// BroadcastTo, Expand: y = x broadcast to y's shape.
void run_broadcast(const CudaCall& c) {
  binary_op(c, Binary::copy_a, c.out_shape(0), c.in_shape(0), c.fin(0), c.in_shape(0), nullptr, c.fout(0));
}

// Identity: a byte copy of any dtype.
void run_identity(const CudaCall& c) {
  copy_bytes(c, c.out[0].data, c.in[0].data, c.in[0].numel() * element_bytes(c.in[0].dtype, 4));
}

// ---------------------------------------------------------------------------------------------- masks, cast

Elem elem_of(DType t) {
  switch (t) {
    case DType::f32: return Elem::f32;
    case DType::i64: return Elem::i64;
    case DType::u8: return Elem::u8;
  }
  return Elem::f32;
}

// Where(cond, X, Y) -> out.
void run_where(const CudaCall& c) {
  const Shape& out = c.out_shape(0);
  MONET_CUDA_CHECK(where_select(dims_of(out), broadcast_strides_to(c.in_shape(0), out), c.in[0].data,
                                elem_of(c.in[0].dtype), broadcast_strides_to(c.in_shape(1), out), c.fin(1),
                                broadcast_strides_to(c.in_shape(2), out), c.fin(2), c.fout(0), c.ctx.stream));
}

// WhereGrad(dy, cond) -> dx = ReduceSumTo(where(cond == pick, dy, 0), shape): straight into dx where nothing is
// reduced, else the masked dy into the workspace (dy's shape) and reduce_to (Term::x) from there, its partial sums
// after it.
bool where_grad_reduces(const Shape& dy, const Shape& dx) { return dy != dx; }

int64_t where_grad_masked_bytes(const Graph& g, const Node& n) {
  return align_up(numel(g.values[n.inputs[0]].shape) * 4);
}

int64_t where_grad_workspace(const Graph& g, const Node& n, CudaContext&) {
  const Shape& dy = g.values[n.inputs[0]].shape;
  const Shape& dx = g.values[n.outputs[0]].shape;
  if (!where_grad_reduces(dy, dx)) return 0;
  return where_grad_masked_bytes(g, n) + reduce_to_workspace_bytes(reduce_geom(dy, dx));
}

void run_where_grad(const CudaCall& c) {
  const Shape& dy = c.in_shape(0);
  const Shape& dx = c.out_shape(0);
  const bool pick = c.node.attrs.i("pick") != 0;
  const bool reduces = where_grad_reduces(dy, dx);
  float* masked = reduces ? static_cast<float*>(c.workspace) : c.fout(0);
  if (reduces)
    MONET_CHECK(c.workspace_bytes >= where_grad_workspace(c.g, c.node, c.ctx), "workspace too small for ",
                c.node.name);
  const Strides sy = contiguous_strides(dy);
  MONET_CUDA_CHECK(where_select(dims_of(dy), broadcast_strides_to(c.in_shape(1), dy), c.in[1].data,
                                elem_of(c.in[1].dtype), sy, pick ? c.fin(0) : nullptr, sy,
                                pick ? nullptr : c.fin(0), masked, c.ctx.stream));
  if (!reduces) return;
  const ReduceGeom g = reduce_geom(dy, dx);
  double* partial = reinterpret_cast<double*>(static_cast<char*>(c.workspace) + where_grad_masked_bytes(c.g, c.node));
  MONET_CUDA_CHECK(reduce_to(Term::x, g, masked, nullptr, nullptr, c.fout(0), 1.0, partial, c.ctx.stream));
}

template <Compare op>
void run_compare(const CudaCall& c) {
  const Shape& out = c.out_shape(0);
  MONET_CUDA_CHECK(compare(op, elem_of(c.in[0].dtype), dims_of(out), broadcast_strides_to(c.in_shape(0), out),
                           c.in[0].data, broadcast_strides_to(c.in_shape(1), out), c.in[1].data,
                           static_cast<uint8_t*>(c.out[0].data), c.ctx.stream));
}

// Not as the mask kernel's lnot, which reads its first operand alone (given twice).
void run_not(const CudaCall& c) {
  const Shape& out = c.out_shape(0);
  const Strides s = broadcast_strides_to(c.in_shape(0), out);
  MONET_CUDA_CHECK(compare(Compare::lnot, Elem::u8, dims_of(out), s, c.in[0].data, s, c.in[0].data,
                           static_cast<uint8_t*>(c.out[0].data), c.ctx.stream));
}

void run_cast(const CudaCall& c) {
  MONET_CUDA_CHECK(cast(elem_of(c.in[0].dtype), elem_of(c.out[0].dtype), c.in[0].numel(), c.in[0].data,
                        c.out[0].data, c.ctx.stream));
}

// ---------------------------------------------------------------------------------------------- dropout, sgd

uint64_t splitmix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void run_dropout(const CudaCall& c) {
  const double ratio = ops::dropout_ratio(c.node.attrs);
  const float scale = static_cast<float>(1.0 / (1.0 - ratio));
  MONET_CUDA_CHECK(dropout(n_of(c), c.fin(0), c.fout(0), static_cast<uint8_t*>(c.out[1].data), splitmix64(c.seed),
                           ratio, scale, c.ctx.stream));
}

void run_dropout_grad(const CudaCall& c) {
  const float scale = static_cast<float>(1.0 / (1.0 - c.node.attrs.scalar("ratio", 0.5)));
  MONET_CUDA_CHECK(dropout_grad(n_of(c), c.fin(0), static_cast<const uint8_t*>(c.in[1].data), c.fout(0), scale,
                                c.ctx.stream));
}

// SgdUpdate joins the context's pending batch (flush_sgd launches it): consecutive updates of a schedule, up to
// kSgdBatch (512 with CUDA 12.1+) with one lr and momentum, go out as one multi-tensor kernel (kernels.h
// sgd_update), so ResNet-50's 161 parameters take as many launches as the schedule has runs of consecutive updates.
void run_sgd(const CudaCall& c) {
  const float lr = static_cast<float>(c.node.attrs.f("lr"));
  const float momentum = static_cast<float>(c.node.attrs.f("momentum"));
  PendingSgd& q = c.ctx.pending_sgd;
  if (q.batch.count == kSgdBatch || (q.batch.count > 0 && (q.lr != lr || q.momentum != momentum))) flush_sgd(c.ctx);
  q.lr = lr;
  q.momentum = momentum;
  q.batch.t[q.batch.count++] = SgdTensor{c.fin_mut(0), c.fin(1), c.fin_mut(2), n_of(c)};
}

}  // namespace

void flush_sgd(CudaContext& ctx) {
  PendingSgd& q = ctx.pending_sgd;
  if (q.batch.count == 0) return;
  const SgdBatch batch = q.batch;
  q.batch.count = 0;
  MONET_CUDA_CHECK(sgd_update(batch, q.lr, q.momentum, ctx.stream));
}

void add_elementwise_kernels(CudaKernelTable& t) {
  t["Relu"] = {run_relu};
  t["ReluGrad"] = {run_relu_grad};
  t["Clip"] = {run_clip};
  t["ClipGrad"] = {run_clip_grad};
  t["Sigmoid"] = {run_unary<Unary::sigmoid>};
  t["SigmoidGrad"] = {run_unary_grad<UnaryGrad::sigmoid>};
  t["HardSigmoid"] = {run_hard_sigmoid};
  t["HardSigmoidGrad"] = {run_hard_sigmoid_grad};
  t["HardSwish"] = {run_unary<Unary::hard_swish>};
  t["HardSwishGrad"] = {run_unary_grad<UnaryGrad::hard_swish>};
  t["Tanh"] = {run_unary<Unary::tanh>};
  t["TanhGrad"] = {run_unary_grad<UnaryGrad::tanh>};
  t["Pow"] = {run_pow};
  t["PowGrad"] = {run_pow_grad};
  t["Sqrt"] = {run_unary<Unary::sqrt>};
  t["SqrtGrad"] = {run_unary_grad<UnaryGrad::sqrt>};
  t["Erf"] = {run_unary<Unary::erf>};
  t["ErfGrad"] = {run_erf_grad};
  t["Gelu"] = {run_gelu};
  t["GeluGrad"] = {run_gelu_grad};
  t["Identity"] = {run_identity};
  t["Neg"] = {run_unary<Unary::neg>};
  t["Exp"] = {run_unary<Unary::exp>};
  t["ExpGrad"] = {run_unary_grad<UnaryGrad::exp>};
  t["Log"] = {run_unary<Unary::log>};
  t["LogGrad"] = {run_unary_grad<UnaryGrad::log>};
  t["Reciprocal"] = {run_unary<Unary::reciprocal>};
  t["ReciprocalGrad"] = {run_unary_grad<UnaryGrad::reciprocal>};
  t["Sin"] = {run_unary<Unary::sin>};
  t["SinGrad"] = {run_unary_grad<UnaryGrad::sin>};
  t["Cos"] = {run_unary<Unary::cos>};
  t["CosGrad"] = {run_unary_grad<UnaryGrad::cos>};
  t["LeakyRelu"] = {run_leaky_relu};
  t["LeakyReluGrad"] = {run_leaky_relu_grad};
  t["Elu"] = {run_elu};
  t["Selu"] = {run_elu};
  t["EluGrad"] = {run_elu_grad};
  t["Softplus"] = {run_unary<Unary::softplus>};
  t["SoftplusGrad"] = {run_unary_grad<UnaryGrad::softplus>};
  t["Mish"] = {run_unary<Unary::mish>};
  t["MishGrad"] = {run_unary_grad<UnaryGrad::mish>};
  t["Abs"] = {run_unary<Unary::abs>};
  t["AbsGrad"] = {run_unary_grad<UnaryGrad::abs>};
  t["Sign"] = {run_unary<Unary::sign>};
  t["Floor"] = {run_unary<Unary::floor>};
  t["Ceil"] = {run_unary<Unary::ceil>};
  t["Round"] = {run_unary<Unary::round>};
#define MONET_TRIG(Name, kind)                                   \
  t[#Name] = {run_unary<Unary::kind>};                           \
  t[#Name "Grad"] = {run_unary_grad<UnaryGrad::kind>};
  MONET_TRIG(Tan, tan) MONET_TRIG(Atan, atan) MONET_TRIG(Asin, asin) MONET_TRIG(Acos, acos) MONET_TRIG(Sinh, sinh)
  MONET_TRIG(Cosh, cosh) MONET_TRIG(Asinh, asinh) MONET_TRIG(Acosh, acosh) MONET_TRIG(Atanh, atanh)
#undef MONET_TRIG

  t["Where"] = {run_where};
  t["WhereGrad"] = {run_where_grad, where_grad_workspace};
  t["Equal"] = {run_compare<Compare::eq>};
  t["Less"] = {run_compare<Compare::lt>};
  t["Greater"] = {run_compare<Compare::gt>};
  t["LessOrEqual"] = {run_compare<Compare::le>};
  t["GreaterOrEqual"] = {run_compare<Compare::ge>};
  t["And"] = {run_compare<Compare::land>};
  t["Or"] = {run_compare<Compare::lor>};
  t["Xor"] = {run_compare<Compare::lxor>};
  t["Not"] = {run_not};
  t["Cast"] = {run_cast};

  t["Add"] = {run_binary<Binary::add>};
  t["Sub"] = {run_binary<Binary::sub>};
  t["Mul"] = {run_binary<Binary::mul>};
  t["Div"] = {run_binary<Binary::div>};
  t["SubGradB"] = {run_grad_sum_to<Term::neg_x, 0>, grad_sum_to_workspace<0>};
  t["MulGrad"] = {run_grad_sum_to<Term::x_mul_p0, 1>, grad_sum_to_workspace<1>};
  t["DivGradA"] = {run_grad_sum_to<Term::x_div_p0, 1>, grad_sum_to_workspace<1>};
  t["DivGradB"] = {run_grad_sum_to<Term::div_grad_b, 2>, grad_sum_to_workspace<2>};
  t["ReduceSumTo"] = {run_grad_sum_to<Term::x, 0>, grad_sum_to_workspace<0>};
  t["PRelu"] = {run_binary<Binary::prelu>};
  t["PReluGradX"] = {run_grad_sum_to<Term::prelu_dx, 2>, grad_sum_to_workspace<2>};
  t["PReluGradSlope"] = {run_grad_sum_to<Term::prelu_dslope, 1>, grad_sum_to_workspace<1>};
  t["Max"] = {run_binary<Binary::max>};
  t["Min"] = {run_binary<Binary::min>};
  t["MaxGradA"] = {run_grad_sum_to<Term::max_a, 2>, grad_sum_to_workspace<2>};
  t["MaxGradB"] = {run_grad_sum_to<Term::max_b, 2>, grad_sum_to_workspace<2>};
  t["MinGradA"] = {run_grad_sum_to<Term::min_a, 2>, grad_sum_to_workspace<2>};
  t["MinGradB"] = {run_grad_sum_to<Term::min_b, 2>, grad_sum_to_workspace<2>};
  t["BroadcastTo"] = {run_broadcast};
  t["Sum"] = {run_sum};

  t["Dropout"] = {run_dropout};
  t["DropoutGrad"] = {run_dropout_grad};
  t["SgdUpdate"] = {run_sgd};
}

}  // namespace monet::cuda
