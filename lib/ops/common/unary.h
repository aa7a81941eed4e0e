// Helpers shared by float-only elementwise ops: the dtype check, same-shape shape rules and the one-node backward
// of an activation (dx = <Op>Grad(dy, saved)).
#pragma once

#include "ops/common/elementwise.h"

namespace monet::ops {

// Arithmetic ops run on the backend's float type only; integer tensors (shape arithmetic) are rejected clearly.
inline void expect_float_inputs(const InferCtx& c) {
  for (int i = 0; i < c.num_inputs(); ++i)
    if (c.in(i).dtype != DType::f32)
      c.fail("input ", i, " has dtype ", dtype_name(c.in(i).dtype), "; only float tensors are supported");
}

// One float input; the output has its shape.
inline void infer_float_unary(InferCtx& c) {
  c.expect_inputs(1, 1);
  expect_float_inputs(c);
  infer_like_input0(c);
}

// Activation gradient (dy, saved) of one shape -> dx of that shape.
inline void infer_float_grad(InferCtx& c) {
  c.expect_inputs(2, 2);
  expect_float_inputs(c);
  infer_like_input0(c);
}

// dx = grad_op(dy, saved): `saved` is the forward input (b.in(0)) or output (b.out(0)) the gradient reads.
// The forward node's attributes travel along (bounds, alpha/beta).
inline void backward_activation(GradBuilder& b, const char* grad_op, int saved) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  b.set_grad(0, b.emit1(grad_op, {b.grad_out(0), saved}, b.node().attrs));
}

}  // namespace monet::ops
