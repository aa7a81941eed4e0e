// The inverse and hyperbolic trigonometric functions and Tan, elementwise on float tensors: y = f(x). Each backward
// is input-activated, dx = dy * f'(x):
//
//   Tan    1 / cos(x)^2          Sinh   cosh(x)                Asinh  1 / sqrt(x^2 + 1)
//   Atan   1 / (1 + x^2)         Cosh   sinh(x)                Acosh  1 / sqrt(x^2 - 1)
//   Asin   1 / sqrt(1 - x^2)                                   Atanh  1 / (1 - x^2)
//   Acos   -1 / sqrt(1 - x^2)
//
// Outside a function's domain (|x| > 1 for Asin, Acos, Atanh; x < 1 for Acosh) y is NaN, as in torch; at its
// edge the derivative is infinite. Sin and Cos are ops of their own (lib/ops/sin, lib/ops/cos).
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

enum class Fn { tan, atan, asin, acos, sinh, cosh, asinh, acosh, atanh };

template <Fn f, class T>
T value(T x) {
  if constexpr (f == Fn::tan) return std::tan(x);
  else if constexpr (f == Fn::atan) return std::atan(x);
  else if constexpr (f == Fn::asin) return std::asin(x);
  else if constexpr (f == Fn::acos) return std::acos(x);
  else if constexpr (f == Fn::sinh) return std::sinh(x);
  else if constexpr (f == Fn::cosh) return std::cosh(x);
  else if constexpr (f == Fn::asinh) return std::asinh(x);
  else if constexpr (f == Fn::acosh) return std::acosh(x);
  else return std::atanh(x);
}

template <Fn f, class T>
T derivative(T x) {
  if constexpr (f == Fn::tan) {
    const T c = std::cos(x);
    return T(1) / (c * c);
  } else if constexpr (f == Fn::atan) {
    return T(1) / (T(1) + x * x);
  } else if constexpr (f == Fn::asin) {
    return T(1) / std::sqrt(T(1) - x * x);
  } else if constexpr (f == Fn::acos) {
    return T(-1) / std::sqrt(T(1) - x * x);
  } else if constexpr (f == Fn::sinh) {
    return std::cosh(x);
  } else if constexpr (f == Fn::cosh) {
    return std::sinh(x);
  } else if constexpr (f == Fn::asinh) {
    return T(1) / std::sqrt(x * x + T(1));
  } else if constexpr (f == Fn::acosh) {
    return T(1) / std::sqrt(x * x - T(1));
  } else {
    return T(1) / (T(1) - x * x);
  }
}

template <Fn f, class T>
void forward_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return value<f>(x); });
}

// <Op>Grad(dy, x) -> dx
template <Fn f, class T>
void grad_cpu(const CpuCall& c) {
  map2<T>(c, [](T dy, T x) { return dy * derivative<f>(x); });
}

template <const char* grad_name>
void backward(GradBuilder& b) {
  backward_activation(b, grad_name, b.in(0));
}

template <Fn f, const char* name, const char* grad_name>
struct Trig {
  static inline const OpDef op = {.name = name, .infer = infer_float_unary, .backward = backward<grad_name>,
                               .cpu_f32 = forward_cpu<f, float>, .cpu_f64 = forward_cpu<f, double>};
  static inline const OpDef grad = {.name = grad_name, .infer = infer_float_grad, .cpu_f32 = grad_cpu<f, float>,
                                 .cpu_f64 = grad_cpu<f, double>, .in_place = {0}};
};

constexpr char kTan[] = "Tan", kTanGrad[] = "TanGrad", kAtan[] = "Atan", kAtanGrad[] = "AtanGrad";
constexpr char kAsin[] = "Asin", kAsinGrad[] = "AsinGrad", kAcos[] = "Acos", kAcosGrad[] = "AcosGrad";
constexpr char kSinh[] = "Sinh", kSinhGrad[] = "SinhGrad", kCosh[] = "Cosh", kCoshGrad[] = "CoshGrad";
constexpr char kAsinh[] = "Asinh", kAsinhGrad[] = "AsinhGrad", kAcosh[] = "Acosh", kAcoshGrad[] = "AcoshGrad";
constexpr char kAtanh[] = "Atanh", kAtanhGrad[] = "AtanhGrad";

using Tan = Trig<Fn::tan, kTan, kTanGrad>;
using Atan = Trig<Fn::atan, kAtan, kAtanGrad>;
using Asin = Trig<Fn::asin, kAsin, kAsinGrad>;
using Acos = Trig<Fn::acos, kAcos, kAcosGrad>;
using Sinh = Trig<Fn::sinh, kSinh, kSinhGrad>;
using Cosh = Trig<Fn::cosh, kCosh, kCoshGrad>;
using Asinh = Trig<Fn::asinh, kAsinh, kAsinhGrad>;
using Acosh = Trig<Fn::acosh, kAcosh, kAcoshGrad>;
using Atanh = Trig<Fn::atanh, kAtanh, kAtanhGrad>;

}  // namespace

extern const std::vector<const OpDef*> trig_ops;
const std::vector<const OpDef*> trig_ops = {
    &Tan::op,   &Tan::grad,   &Atan::op,  &Atan::grad,  &Asin::op,  &Asin::grad,  &Acos::op,  &Acos::grad,
    &Sinh::op,  &Sinh::grad,  &Cosh::op,  &Cosh::grad,  &Asinh::op, &Asinh::grad, &Acosh::op, &Acosh::grad,
    &Atanh::op, &Atanh::grad};

}  // namespace monet::ops
