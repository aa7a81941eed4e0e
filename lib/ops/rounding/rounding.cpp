// Sign, Floor, Ceil and Round of a float tensor (torch.sign, floor, ceil, round: straight-through estimators and
// quantisation write them, LPPool's export multiplies by the sign). Round takes a half to the even neighbour, as
// ONNX and torch do; Sign is 1, -1 or the element itself (0, -0, NaN). Their derivative is 0 wherever it exists, so
// the backward emits nothing: no gradient reaches X through them, as in torch.
#include <cmath>

#include "ops/common/unary.h"

namespace monet::ops {
namespace {

void backward_none(GradBuilder&) {}

template <class T>
T sign_of(T x) {
  return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;
}

template <class T>
void sign_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return sign_of(x); });
}
template <class T>
void floor_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::floor(x); });
}
template <class T>
void ceil_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::ceil(x); });
}
template <class T>
void round_cpu(const CpuCall& c) {
  map1<T>(c, [](T x) { return std::nearbyint(x); });  // the default rounding mode: a half to even
}

const OpDef sign = {.name = "Sign", .infer = infer_float_unary, .backward = backward_none,
                    .cpu_f32 = sign_cpu<float>, .cpu_f64 = sign_cpu<double>, .in_place = {0}};
const OpDef floor_op = {.name = "Floor", .infer = infer_float_unary, .backward = backward_none,
                        .cpu_f32 = floor_cpu<float>, .cpu_f64 = floor_cpu<double>, .in_place = {0}};
const OpDef ceil_op = {.name = "Ceil", .infer = infer_float_unary, .backward = backward_none,
                       .cpu_f32 = ceil_cpu<float>, .cpu_f64 = ceil_cpu<double>, .in_place = {0}};
const OpDef round_op = {.name = "Round", .infer = infer_float_unary, .backward = backward_none,
                        .cpu_f32 = round_cpu<float>, .cpu_f64 = round_cpu<double>, .in_place = {0}};

}  // namespace

extern const std::vector<const OpDef*> rounding_ops;
const std::vector<const OpDef*> rounding_ops = {&sign, &floor_op, &ceil_op, &round_op};

}  // namespace monet::ops
