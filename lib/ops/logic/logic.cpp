// And, Or, Xor (numpy broadcasting) and Not of bool masks (DType::u8, as the comparisons write them): combining a
// padding mask with a causal one (`pad & causal`, `~key_padding_mask`). Bool in, bool out, as ONNX defines them;
// a mask takes no gradient, so these ops have no backward.
#include "ops/common/binary.h"

namespace monet::ops {
namespace {

void expect_masks(InferCtx& c) {
  for (int i = 0; i < c.num_inputs(); ++i)
    if (c.in(i).dtype != DType::u8)
      c.fail("input ", i, " has dtype ", dtype_name(c.in(i).dtype), "; expected a bool mask");
}

void infer_logic(InferCtx& c) {
  c.expect_inputs(2, 2);
  expect_masks(c);
  auto out = broadcast_shapes(c.shape(0), c.shape(1));
  if (!out) c.fail("shapes ", shape_str(c.shape(0)), " and ", shape_str(c.shape(1)), " do not broadcast");
  c.set_out(0, *out, DType::u8);
}

void infer_not(InferCtx& c) {
  c.expect_inputs(1, 1);
  expect_masks(c);
  c.set_out(0, c.shape(0), DType::u8);
}

template <class F>
void logic_cpu(const CpuCall& c) {
  const uint8_t* a = c.in[0].as<uint8_t>();  // (A shape)
  const uint8_t* b = c.in[1].as<uint8_t>();  // (B shape)
  uint8_t* y = c.out[0].as<uint8_t>();       // (broadcast shape)
  for_each_broadcast<2>(*c.out[0].shape, {c.in[0].shape, c.in[1].shape},
                        [&](int64_t i, const std::array<int64_t, 2>& o) { y[i] = F{}(a[o[0]] != 0, b[o[1]] != 0); });
}

void not_cpu(const CpuCall& c) {
  const uint8_t* x = c.in[0].as<uint8_t>();
  uint8_t* y = c.out[0].as<uint8_t>();
  for (int64_t i = 0, n = c.in[0].numel(); i < n; ++i) y[i] = x[i] == 0 ? 1 : 0;
}

struct And { uint8_t operator()(bool a, bool b) const { return a && b; } };
struct Or { uint8_t operator()(bool a, bool b) const { return a || b; } };
struct Xor { uint8_t operator()(bool a, bool b) const { return a != b; } };

const OpDef and_op = {.name = "And", .infer = infer_logic, .cpu_f32 = logic_cpu<And>, .cpu_f64 = logic_cpu<And>};
const OpDef or_op = {.name = "Or", .infer = infer_logic, .cpu_f32 = logic_cpu<Or>, .cpu_f64 = logic_cpu<Or>};
const OpDef xor_op = {.name = "Xor", .infer = infer_logic, .cpu_f32 = logic_cpu<Xor>, .cpu_f64 = logic_cpu<Xor>};
const OpDef not_op = {.name = "Not", .infer = infer_not, .cpu_f32 = not_cpu, .cpu_f64 = not_cpu};

}  // namespace

extern const std::vector<const OpDef*> logic_ops;
const std::vector<const OpDef*> logic_ops = {&and_op, &or_op, &xor_op, &not_op};

}  // namespace monet::ops
