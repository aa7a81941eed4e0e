// Relu: y = max(x, 0), and a 1-bit mask of where x > 0 (the importer gives the node two outputs, Y and mask).
// ReluGrad(dy, y, x, mask) -> dx has three implementations that give identical results (y > 0 exactly where x > 0,
// which is exactly where the mask bit is set): output-activated (the default, reads y: the tensor the next layer
// keeps anyway), input-activated (reads x) and intermediate-activated (reads the mask: 1 bit per element, MONeT's
// ReLU mask). The planner picks per run which saved tensor backward needs.
// Mask layout (every backend): 32-bit little-endian words, bit k of word w for element 32 w + k - equivalently bit
// i % 8 of byte i / 8 - padded with zero bits to a whole word: relu_mask_bytes(n) bytes.
#include <algorithm>

#include "ops/common/elementwise.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

void infer_relu(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.num_outputs() != 2) c.fail("expects 2 outputs (Y, mask), has ", c.num_outputs());
  c.set_out(0, c.shape(0), c.in(0).dtype);
  c.set_out(1, {relu_mask_bytes(numel(c.shape(0)))}, DType::u8);
}

void backward_relu(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1("ReluGrad", {b.grad_out(0), b.out(0), b.in(0), b.out(1)}));
}

template <class T>
void relu_cpu(const CpuCall& c) {
  const T* x = c.in[0].as<T>();              // (n)
  T* y = c.out[0].as<T>();                   // (n)
  uint8_t* mask = c.out[1].as<uint8_t>();    // (relu_mask_bytes(n)), null when nothing reads it
  const int64_t n = c.in[0].numel();
  if (!mask) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
    return;
  }
  std::fill(mask, mask + relu_mask_bytes(n), uint8_t{0});
  for (int64_t i = 0; i < n; ++i) {
    const bool on = x[i] > T(0);
    y[i] = on ? x[i] : T(0);
    mask[i / 8] |= static_cast<uint8_t>(on ? 1u << (i % 8) : 0u);
  }
}

// ReluGrad(dy, y, x, mask): dy, y and x of one shape, mask the forward's.
void infer_relu_grad(InferCtx& c) {
  c.expect_inputs(4, 4);
  const Shape& s = c.shape(0);
  for (int i = 1; i <= 2; ++i)
    if (c.shape(i) != s) c.fail("input ", i, " has shape ", shape_str(c.shape(i)), ", expected ", shape_str(s));
  if (c.in(3).dtype != DType::u8 || c.shape(3) != Shape{relu_mask_bytes(numel(s))})
    c.fail("mask must be uint8 of shape [", relu_mask_bytes(numel(s)), "], got ", dtype_name(c.in(3).dtype), " ",
           shape_str(c.shape(3)));
  c.set_out(0, s, c.in(0).dtype);
}

// dx = dy where y > 0 (impl "output"), where x > 0 (impl "input") or where the mask bit is set (impl "mask").
template <class T>
void relu_grad_cpu(const CpuCall& c) {
  const T* dy = c.in[0].as<T>();  // (n)
  T* dx = c.out[0].as<T>();       // (n)
  const int64_t n = c.in[0].numel();
  if (c.impl == 2) {
    const uint8_t* mask = c.in[3].as<uint8_t>();
    for (int64_t i = 0; i < n; ++i) dx[i] = (mask[i / 8] >> (i % 8)) & 1u ? dy[i] : T(0);
    return;
  }
  const T* saved = c.in[c.impl == 0 ? 1 : 2].as<T>();  // y or x (n)
  for (int64_t i = 0; i < n; ++i) dx[i] = saved[i] > T(0) ? dy[i] : T(0);
}

double relu_flops(const Graph& g, const Node& n) { return static_cast<double>(numel(g.values[n.inputs[0]].shape)); }

const OpDef relu = {.name = "Relu", .infer = infer_relu, .backward = backward_relu,
                    .cpu_f32 = relu_cpu<float>, .cpu_f64 = relu_cpu<double>, .flops = relu_flops,
                    .in_place = {0}, .optional_outputs = {1}};
const OpDef relu_grad = {.name = "ReluGrad", .infer = infer_relu_grad,
                         .cpu_f32 = relu_grad_cpu<float>, .cpu_f64 = relu_grad_cpu<double>,
                         .impls = {{"output", 0b0011}, {"input", 0b0101}, {"mask", 0b1001}}, .in_place = {0}};

}  // namespace

int64_t relu_mask_bytes(int64_t n) { return 4 * ((n + 31) / 32); }

extern const std::vector<const OpDef*> relu_ops;
const std::vector<const OpDef*> relu_ops = {&relu, &relu_grad};

}  // namespace monet::ops
