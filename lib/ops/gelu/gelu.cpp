// Gelu: exact GELU, y = x/2 * (1 + erf(x / c)) with c = sqrt 2 (nn.GELU()). The importer makes one of the five
// nodes torch exports for it at opset 13 (Div by c, Erf, Add 1, Mul by x, Mul by 0.5: lib/ir), so the training graph
// keeps x alone where the decomposition kept x, x / c and 1 + erf(...). Attribute `divisor` is the exported c (sqrt 2
// rounded to float), so that the node computes what the file says.
// Backward (PyTorch's gelu backward for c = sqrt 2): dx = dy * ((1 + erf(x / c)) / 2 + x * exp(-(x / c)^2) /
// (c sqrt pi)); x is kept. Each element is computed from the same element of the input, so both may run in place.
#include <cmath>
#include <numbers>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_gelu(GradBuilder& b) { backward_activation(b, "GeluGrad", b.in(0)); }

void infer_gelu(InferCtx& c) {
  infer_float_unary(c);
  if (!(c.attrs().f("divisor", std::numbers::sqrt2) > 0))
    c.fail("divisor must be > 0, got ", c.attrs().f("divisor", std::numbers::sqrt2));
}

template <class T>
void gelu_cpu(const CpuCall& c) {
  const T divisor = static_cast<T>(c.node.attrs.f("divisor", std::numbers::sqrt2));
  map1<T>(c, [divisor](T x) { return x * (T(1) + std::erf(x / divisor)) * T(0.5); });
}

// GeluGrad(dy, x) -> dx, the forward's attributes.
template <class T>
void gelu_grad_cpu(const CpuCall& c) {
  const T divisor = static_cast<T>(c.node.attrs.f("divisor", std::numbers::sqrt2));
  const T k = static_cast<T>(std::numbers::inv_sqrtpi) / divisor;  // 1 / (c sqrt pi)
  map2<T>(c, [=](T dy, T x) {
    const T u = x / divisor;
    return dy * ((T(1) + std::erf(u)) * T(0.5) + x * k * std::exp(-u * u));
  });
}

const OpDef gelu = {.name = "Gelu", .infer = infer_gelu, .backward = backward_gelu,
                    .cpu_f32 = gelu_cpu<float>, .cpu_f64 = gelu_cpu<double>,
                    .flops = [](const Graph& g, const Node& n) {
                      return 8.0 * static_cast<double>(numel(g.values[n.inputs[0]].shape));
                    },
                    .in_place = {0}};
const OpDef gelu_grad = {.name = "GeluGrad", .infer = infer_float_grad,
                         .cpu_f32 = gelu_grad_cpu<float>, .cpu_f64 = gelu_grad_cpu<double>,
                         .flops = [](const Graph& g, const Node& n) {
                           return 12.0 * static_cast<double>(numel(g.values[n.inputs[0]].shape));
                         },
                         .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> gelu_ops;
const std::vector<const OpDef*> gelu_ops = {&gelu, &gelu_grad};

}  // namespace monet::ops
