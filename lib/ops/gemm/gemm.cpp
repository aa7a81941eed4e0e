// Gemm (ONNX opset 13): Y = alpha * A' B' + beta * C, A' = transA ? A^T : A (M, K), B' = transB ? B^T : B (K, N),
// C optional and broadcast unidirectionally to (M, N).
// Backward ops: GemmGradA(dY, B) -> dA and GemmGradB(A, dY) -> dB (one BLAS call each, trans flags folded in);
// dC = ReduceSumTo(dY) to C's shape when beta = 1, else GemmGradC(dY) which reduces and scales by beta.
//
// Parameter roles are {none, weight, bias}: right for the PyTorch export of nn.Linear (transB = 1, B is (N, K)).
// With transB = 0, B is laid out (K, N) and the importer must give B the role weight_kn instead.
#include <algorithm>

#include "ops/common/blas.h"
#include "ops/op.h"

namespace monet::ops {
namespace {

// Row and column strides of C broadcast to (M, N): 0 along a broadcast axis. C has rank 0, 1 or 2.
void c_strides(const Shape& c, int64_t& row_stride, int64_t& col_stride) {
  const int64_t rows = c.size() == 2 ? c[0] : 1;
  const int64_t cols = c.empty() ? 1 : c.back();
  row_stride = rows == 1 ? 0 : cols;
  col_stride = cols == 1 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------- Gemm

void infer_gemm(InferCtx& c) {
  c.expect_inputs(2, 3);
  c.expect_rank(0, 2, 2);
  c.expect_rank(1, 2, 2);
  const bool ta = c.attrs().i("transA", 0) != 0, tb = c.attrs().i("transB", 0) != 0;
  const Shape& a = c.shape(0);
  const Shape& b = c.shape(1);
  const int64_t M = ta ? a[1] : a[0], K = ta ? a[0] : a[1];
  const int64_t Kb = tb ? b[1] : b[0], N = tb ? b[0] : b[1];
  if (K != Kb)
    c.fail("A", ta ? "^T" : "", " is (", M, ", ", K, ") but B", tb ? "^T" : "", " is (", Kb, ", ", N,
           "): inner dimensions differ");
  if (c.num_inputs() == 3) {
    const Shape& cs = c.shape(2);
    const bool ok = cs.size() <= 2 && (cs.empty() || cs.back() == 1 || cs.back() == N) &&
                    (cs.size() < 2 || cs[0] == 1 || cs[0] == M);
    if (!ok) c.fail("C has shape ", shape_str(cs), ", which does not broadcast to (", M, ", ", N, ")");
  }
  c.set_out(0, {M, N});
}

void backward_gemm(GradBuilder& b) {
  const int dy = b.grad_out(0);
  if (dy < 0) return;
  const Attrs fa = b.node().attrs;  // a copy: emit() may reallocate the node list
  Attrs a;
  a.set("alpha", fa.f("alpha", 1.0));
  a.set("transA", fa.i("transA", 0));
  a.set("transB", fa.i("transB", 0));
  // B's (the weight's) and C's gradients before A's, as for Conv (conv.cpp says why).
  if (b.needs_grad(1)) b.set_grad(1, b.emit1("GemmGradB", {b.in(0), dy}, a));
  if (b.node().inputs.size() == 3 && b.needs_grad(2)) {
    const double beta = fa.f("beta", 1.0);
    Attrs r;
    r.set("shape", b.value(b.in(2)).shape);
    if (beta == 1.0) {
      b.set_grad(2, b.emit1("ReduceSumTo", {dy}, r));
    } else {
      r.set("beta", beta);
      b.set_grad(2, b.emit1("GemmGradC", {dy}, r));
    }
  }
  if (b.needs_grad(0)) b.set_grad(0, b.emit1("GemmGradA", {dy, b.in(1)}, a));
}

template <class T>
void gemm_cpu(const CpuCall& c) {
  const Attrs& at = c.node.attrs;
  const bool ta = at.i("transA", 0) != 0, tb = at.i("transB", 0) != 0;
  const T alpha = static_cast<T>(at.f("alpha", 1.0)), beta = static_cast<T>(at.f("beta", 1.0));
  const Shape& as = *c.in[0].shape;
  const int64_t M = ta ? as[1] : as[0], K = ta ? as[0] : as[1];
  const int64_t N = (*c.out[0].shape)[1];
  const T* a = c.in[0].as<T>();  // (M, K) or (K, M) when transA
  const T* b = c.in[1].as<T>();  // (K, N) or (N, K) when transB
  T* y = c.out[0].as<T>();       // (M, N)
  const bool has_c = c.in.size() == 3 && beta != T(0);
  if (has_c) {
    const T* cc = c.in[2].as<T>();  // broadcastable to (M, N)
    int64_t rs, cs;
    c_strides(*c.in[2].shape, rs, cs);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) y[i * N + j] = beta * cc[i * rs + j * cs];
  }
  blas_gemm(ta, tb, M, N, K, alpha, a, ta ? M : K, b, tb ? K : N, has_c ? T(1) : T(0), y, N);
}

// ---------------------------------------------------------------------------------------------- GemmGradA

// GemmGradA(dY, B) -> dA, attrs alpha, transA, transB. dA' = alpha dY B'^T, and dA = dA'^T when transA.
void infer_gemm_grad_a(InferCtx& c) {
  c.expect_inputs(2, 2);
  c.expect_rank(0, 2, 2);
  c.expect_rank(1, 2, 2);
  const bool ta = c.attrs().i("transA") != 0, tb = c.attrs().i("transB") != 0;
  const int64_t M = c.shape(0)[0], N = c.shape(0)[1];
  const int64_t K = tb ? c.shape(1)[1] : c.shape(1)[0];
  if ((tb ? c.shape(1)[0] : c.shape(1)[1]) != N) c.fail("B ", shape_str(c.shape(1)), " does not match dY's N = ", N);
  c.set_out(0, ta ? Shape{K, M} : Shape{M, K});
}

template <class T>
void gemm_grad_a_cpu(const CpuCall& c) {
  const Attrs& at = c.node.attrs;
  const bool ta = at.i("transA") != 0, tb = at.i("transB") != 0;
  const T alpha = static_cast<T>(at.f("alpha"));
  const int64_t M = (*c.in[0].shape)[0], N = (*c.in[0].shape)[1];
  const int64_t K = tb ? (*c.in[1].shape)[1] : (*c.in[1].shape)[0];
  const T* dy = c.in[0].as<T>();  // (M, N)
  const T* b = c.in[1].as<T>();   // (K, N) or (N, K) when transB
  T* da = c.out[0].as<T>();       // (M, K) or (K, M) when transA
  const int64_t ldb = tb ? K : N;
  if (!ta)  // dA (M, K) = alpha dY (M, N) B'^T (N, K)
    blas_gemm(false, !tb, M, K, N, alpha, dy, N, b, ldb, T(0), da, K);
  else      // dA (K, M) = alpha B' (K, N) dY^T (N, M)
    blas_gemm(tb, true, K, M, N, alpha, b, ldb, dy, N, T(0), da, M);
}

// ---------------------------------------------------------------------------------------------- GemmGradB

// GemmGradB(A, dY) -> dB, attrs alpha, transA, transB. dB' = alpha A'^T dY, and dB = dB'^T when transB.
void infer_gemm_grad_b(InferCtx& c) {
  c.expect_inputs(2, 2);
  c.expect_rank(0, 2, 2);
  c.expect_rank(1, 2, 2);
  const bool ta = c.attrs().i("transA") != 0, tb = c.attrs().i("transB") != 0;
  const int64_t M = c.shape(1)[0], N = c.shape(1)[1];
  const int64_t K = ta ? c.shape(0)[0] : c.shape(0)[1];
  if ((ta ? c.shape(0)[1] : c.shape(0)[0]) != M) c.fail("A ", shape_str(c.shape(0)), " does not match dY's M = ", M);
  c.set_out(0, tb ? Shape{N, K} : Shape{K, N});
}

template <class T>
void gemm_grad_b_cpu(const CpuCall& c) {
  const Attrs& at = c.node.attrs;
  const bool ta = at.i("transA") != 0, tb = at.i("transB") != 0;
  const T alpha = static_cast<T>(at.f("alpha"));
  const int64_t M = (*c.in[1].shape)[0], N = (*c.in[1].shape)[1];
  const int64_t K = ta ? (*c.in[0].shape)[0] : (*c.in[0].shape)[1];
  const T* a = c.in[0].as<T>();   // (M, K) or (K, M) when transA
  const T* dy = c.in[1].as<T>();  // (M, N)
  T* db = c.out[0].as<T>();       // (K, N) or (N, K) when transB
  const int64_t lda = ta ? M : K;
  if (!tb)  // dB (K, N) = alpha A'^T (K, M) dY (M, N)
    blas_gemm(!ta, false, K, N, M, alpha, a, lda, dy, N, T(0), db, N);
  else      // dB (N, K) = alpha dY^T (N, M) A' (M, K)
    blas_gemm(true, ta, N, K, M, alpha, dy, N, a, lda, T(0), db, K);
}

// ---------------------------------------------------------------------------------------------- GemmGradC

// GemmGradC(dY) -> dC = beta * (dY summed to attr shape), for beta != 1 (beta = 1 uses ReduceSumTo).
void infer_gemm_grad_c(InferCtx& c) {
  c.expect_inputs(1, 1);
  c.expect_rank(0, 2, 2);
  Shape s = c.attrs().ints("shape");
  const int64_t M = c.shape(0)[0], N = c.shape(0)[1];
  const bool ok = s.size() <= 2 && (s.empty() || s.back() == 1 || s.back() == N) &&
                  (s.size() < 2 || s[0] == 1 || s[0] == M);
  if (!ok) c.fail("shape ", shape_str(s), " does not broadcast to ", shape_str(c.shape(0)));
  c.set_out(0, s);
}

template <class T>
void gemm_grad_c_cpu(const CpuCall& c) {
  const T beta = static_cast<T>(c.node.attrs.f("beta"));
  const int64_t M = (*c.in[0].shape)[0], N = (*c.in[0].shape)[1];
  const T* dy = c.in[0].as<T>();  // (M, N)
  T* dc = c.out[0].as<T>();       // (C's shape)
  int64_t rs, cs;
  c_strides(*c.out[0].shape, rs, cs);
  std::fill(dc, dc + c.out[0].numel(), T(0));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) dc[i * rs + j * cs] += dy[i * N + j];
  for (int64_t e = 0; e < c.out[0].numel(); ++e) dc[e] *= beta;
}

// ---------------------------------------------------------------------------------------------- flops

// Gemm and its two operand gradients are one (M, K) x (K, N) product each: 2 * M * N * K.
double gemm_flops(const Graph& gr, const Node& node) {
  const Shape& a = gr.values[node.inputs[0]].shape;
  const Shape& y = gr.values[node.outputs[0]].shape;  // (M, N)
  const int64_t K = node.attrs.i("transA", 0) != 0 ? a[0] : a[1];
  return 2.0 * y[0] * y[1] * K;
}

double gemm_grad_a_flops(const Graph& gr, const Node& node) {
  const Shape& dy = gr.values[node.inputs[0]].shape;  // (M, N)
  const Shape& b = gr.values[node.inputs[1]].shape;
  const int64_t K = node.attrs.i("transB") != 0 ? b[1] : b[0];
  return 2.0 * dy[0] * dy[1] * K;
}

double gemm_grad_b_flops(const Graph& gr, const Node& node) {
  const Shape& a = gr.values[node.inputs[0]].shape;
  const Shape& dy = gr.values[node.inputs[1]].shape;  // (M, N)
  const int64_t K = node.attrs.i("transA") != 0 ? a[0] : a[1];
  return 2.0 * dy[0] * dy[1] * K;
}

// One add (and a scale) per element of dY.
double gemm_grad_c_flops(const Graph& gr, const Node& node) {
  return static_cast<double>(numel(gr.values[node.inputs[0]].shape));
}

const OpDef gemm = {.name = "Gemm", .infer = infer_gemm, .backward = backward_gemm,
                    .cpu_f32 = gemm_cpu<float>, .cpu_f64 = gemm_cpu<double>,
                    .param_roles = {ParamRole::none, ParamRole::weight, ParamRole::bias},
                    .flops = gemm_flops};
const OpDef gemm_grad_a = {.name = "GemmGradA", .infer = infer_gemm_grad_a,
                           .cpu_f32 = gemm_grad_a_cpu<float>, .cpu_f64 = gemm_grad_a_cpu<double>,
                           .flops = gemm_grad_a_flops};
const OpDef gemm_grad_b = {.name = "GemmGradB", .infer = infer_gemm_grad_b,
                           .cpu_f32 = gemm_grad_b_cpu<float>, .cpu_f64 = gemm_grad_b_cpu<double>,
                           .flops = gemm_grad_b_flops};
const OpDef gemm_grad_c = {.name = "GemmGradC", .infer = infer_gemm_grad_c,
                           .cpu_f32 = gemm_grad_c_cpu<float>, .cpu_f64 = gemm_grad_c_cpu<double>,
                           .flops = gemm_grad_c_flops};

}  // namespace

extern const std::vector<const OpDef*> gemm_ops;
const std::vector<const OpDef*> gemm_ops = {&gemm, &gemm_grad_a, &gemm_grad_b, &gemm_grad_c};

}  // namespace monet::ops
