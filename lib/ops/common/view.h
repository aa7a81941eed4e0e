// What the ops that only change a tensor's shape (Reshape, Flatten, Squeeze, Unsqueeze) share: their data is
// copied unchanged, or left where it is when the planner runs them in place (OpDef::view), and their gradient is
// the output gradient given the input's shape back (ReshapeGrad).
#pragma once

#include <cstring>

#include "ops/op.h"

namespace monet::ops {

// dx = dy viewed with x's shape.
inline void backward_as_reshape(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("shape", b.value(b.in(0)).shape);
  b.set_grad(0, b.emit1("ReshapeGrad", {b.grad_out(0)}, a));
}

// y = x, byte for byte (any dtype); nothing to do in place.
template <class T>
void copy_cpu(const CpuCall& c) {
  if (c.out[0].data != c.in[0].data)
    std::memcpy(c.out[0].data, c.in[0].data, c.in[0].numel() * element_bytes(c.in[0].dtype, sizeof(T)));
}

}  // namespace monet::ops
