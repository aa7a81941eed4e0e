// SoftmaxCrossEntropy(logits (N, C, d...), labels (N, d...) int64) -> loss (): the mean over N and every position
// d of -log softmax(logits)[label] along dim 1, as torch.nn.functional.cross_entropy computes it. Attribute axis
// (default 1) puts the classes elsewhere: axis -1 for (N, T, V) logits of a language model, labels (N, T).
// Its gradient recomputes the softmax from the logits, so nothing but the logits is kept for it.
#include <cmath>

#include "ops/op.h"
#include "ops/common/cross_entropy.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

// The class axis resolved against the logits' rank (>= 2); -1 when out of range.
int64_t class_axis(const Attrs& a, const Shape& x) {
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = a.i("axis", 1);
  if (axis < 0) axis += r;
  return axis >= 1 && axis < r ? axis : -1;
}

void infer_ce(InferCtx& c) {
  c.expect_inputs(2, 2);
  const Shape& x = c.shape(0);
  if (x.size() < 2) c.fail("logits need rank >= 2 (N, C, ...), got ", shape_str(x));
  const int64_t axis = class_axis(c.attrs(), x);
  if (axis < 0) c.fail("axis ", c.attrs().i("axis", 1), " is not a class axis of ", shape_str(x), " (1 .. rank-1)");
  Shape label = x;
  label.erase(label.begin() + axis);
  if (c.shape(1) != label || c.in(1).dtype != DType::i64)
    c.fail("labels must be int64 of shape ", shape_str(label), ", got ", dtype_name(c.in(1).dtype), " ",
           shape_str(c.shape(1)));
  c.set_out(0, {});
}

void backward_ce(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("SoftmaxCrossEntropyGrad", {b.grad_out(0), b.in(0), b.in(1)}, b.node().attrs));
}

// Logits viewed as (N, C, P) around the class axis: N the product of the dims before it, P of those after.
struct Layout {
  int64_t n, c, p;
  Layout(const Node& node, const Shape& s) {
    const CeLayout l = ce_layout(node.attrs, s);
    n = l.n, c = l.c, p = l.p;
  }
};

int64_t checked_label(const int64_t* labels, int64_t i, int64_t classes) {
  return ops::checked_label("SoftmaxCrossEntropy", labels, i, classes);
}

template <class T>
void ce_cpu(const CpuCall& c) {
  const T* x = c.in[0].as<T>();              // (N, C, P)
  const int64_t* y = c.in[1].as<int64_t>();  // (N, P)
  Layout l(c.node, *c.in[0].shape);
  double total = 0;
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t p = 0; p < l.p; ++p) {
      const T* row = x + n * l.c * l.p + p;  // stride P along C
      double mx, sum;
      softmax_row_stats(row, l.c, l.p, mx, sum);
      int64_t label = checked_label(y, n * l.p + p, l.c);
      total += std::log(sum) + mx - row[label * l.p];
    }
  c.out[0].as<T>()[0] = static_cast<T>(total / static_cast<double>(l.n * l.p));
}

void infer_ce_grad(InferCtx& c) {
  c.expect_inputs(3, 3);
  c.set_out(0, c.shape(1));
}

// SoftmaxCrossEntropyGrad(dloss (), logits, labels) -> dlogits = dloss * (softmax(logits) - onehot) / (N * P)
template <class T>
void ce_grad_cpu(const CpuCall& c) {
  const T dloss = c.in[0].as<T>()[0];
  const T* x = c.in[1].as<T>();              // (N, C, P)
  const int64_t* y = c.in[2].as<int64_t>();  // (N, P)
  T* dx = c.out[0].as<T>();                  // (N, C, P)
  Layout l(c.node, *c.in[1].shape);
  const double scale = static_cast<double>(dloss) / static_cast<double>(l.n * l.p);
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t p = 0; p < l.p; ++p) {
      const T* row = x + n * l.c * l.p + p;
      T* drow = dx + n * l.c * l.p + p;
      double mx, sum;
      softmax_row_stats(row, l.c, l.p, mx, sum);
      int64_t label = checked_label(y, n * l.p + p, l.c);
      for (int64_t k = 0; k < l.c; ++k) {
        double s = std::exp(row[k * l.p] - mx) / sum - (k == label ? 1.0 : 0.0);
        drow[k * l.p] = static_cast<T>(s * scale);
      }
    }
}

const OpDef ce = {.name = "SoftmaxCrossEntropy", .infer = infer_ce, .backward = backward_ce,
                  .cpu_f32 = ce_cpu<float>, .cpu_f64 = ce_cpu<double>};
// In place over the logits (input 1) where nothing reads them afterwards: every kernel, CPU and CUDA, reads a row's
// elements for its maximum and sum before it writes any, and each element of the row just before writing it.
const OpDef ce_grad = {.name = "SoftmaxCrossEntropyGrad", .infer = infer_ce_grad,
                       .cpu_f32 = ce_grad_cpu<float>, .cpu_f64 = ce_grad_cpu<double>, .in_place = {1}};

}  // namespace

CeLayout ce_layout(const Attrs& a, const Shape& x) {
  const int64_t axis = class_axis(a, x);
  MONET_CHECK(axis >= 1, "SoftmaxCrossEntropy: no class axis in ", shape_str(x));
  CeLayout l{1, x[static_cast<size_t>(axis)], 1};
  for (int64_t d = 0; d < axis; ++d) l.n *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) l.p *= x[d];
  return l;
}

extern const std::vector<const OpDef*> softmax_cross_entropy_ops;
const std::vector<const OpDef*> softmax_cross_entropy_ops = {&ce, &ce_grad};

}  // namespace monet::ops
