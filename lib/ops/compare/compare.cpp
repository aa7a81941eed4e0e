// Equal, Less, Greater, LessOrEqual, GreaterOrEqual: y = a <op> b with numpy broadcasting, a bool mask (DType::u8,
// 1 where the comparison holds). a and b share one dtype: float (the backend's float type), int64 or uint8
// (masks). A mask takes no gradient (autodiff gives non-float values none), so these ops have no backward.
// Comparisons follow IEEE: NaN compares unequal to everything, as in torch.
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void infer_compare(InferCtx& c) {
  c.expect_inputs(2, 2);
  if (c.in(0).dtype != c.in(1).dtype)
    c.fail("inputs have dtypes ", dtype_name(c.in(0).dtype), " and ", dtype_name(c.in(1).dtype), "; they must agree");
  auto out = broadcast_shapes(c.shape(0), c.shape(1));
  if (!out) c.fail("shapes ", shape_str(c.shape(0)), " and ", shape_str(c.shape(1)), " do not broadcast");
  c.set_out(0, *out, DType::u8);
}

template <class V, class F>
void compare_as(const CpuCall& c, F f) {
  const V* a = c.in[0].as<V>();     // (A shape)
  const V* b = c.in[1].as<V>();     // (B shape)
  uint8_t* y = c.out[0].as<uint8_t>();  // (broadcast shape)
  for_each_broadcast<2>(*c.out[0].shape, {c.in[0].shape, c.in[1].shape},
                        [&](int64_t i, const std::array<int64_t, 2>& o) { y[i] = f(a[o[0]], b[o[1]]) ? 1 : 0; });
}

// T: the backend's float type, for float inputs.
template <class T, class Pred>
void compare_cpu(const CpuCall& c) {
  switch (c.in[0].dtype) {
    case DType::f32: return compare_as<T>(c, Pred{});
    case DType::i64: return compare_as<int64_t>(c, Pred{});
    case DType::u8: return compare_as<uint8_t>(c, Pred{});
  }
}

struct Eq { template <class V> bool operator()(V a, V b) const { return a == b; } };
struct Lt { template <class V> bool operator()(V a, V b) const { return a < b; } };
struct Gt { template <class V> bool operator()(V a, V b) const { return a > b; } };
struct Le { template <class V> bool operator()(V a, V b) const { return a <= b; } };
struct Ge { template <class V> bool operator()(V a, V b) const { return a >= b; } };

const OpDef equal = {.name = "Equal", .infer = infer_compare,
                     .cpu_f32 = compare_cpu<float, Eq>, .cpu_f64 = compare_cpu<double, Eq>};
const OpDef less = {.name = "Less", .infer = infer_compare,
                    .cpu_f32 = compare_cpu<float, Lt>, .cpu_f64 = compare_cpu<double, Lt>};
const OpDef greater = {.name = "Greater", .infer = infer_compare,
                       .cpu_f32 = compare_cpu<float, Gt>, .cpu_f64 = compare_cpu<double, Gt>};
const OpDef less_or_equal = {.name = "LessOrEqual", .infer = infer_compare,
                             .cpu_f32 = compare_cpu<float, Le>, .cpu_f64 = compare_cpu<double, Le>};
const OpDef greater_or_equal = {.name = "GreaterOrEqual", .infer = infer_compare,
                                .cpu_f32 = compare_cpu<float, Ge>, .cpu_f64 = compare_cpu<double, Ge>};

}  // namespace

extern const std::vector<const OpDef*> compare_ops;
const std::vector<const OpDef*> compare_ops = {&equal, &less, &greater, &less_or_equal, &greater_or_equal};

}  // namespace monet::ops
