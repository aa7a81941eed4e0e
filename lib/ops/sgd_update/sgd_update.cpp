// SgdUpdate(param, grad, momentum): PyTorch's SGD with momentum, in place on the persistent param and momentum
// buffer: buf = momentum * buf + grad; param -= lr * buf. (PyTorch's first step sets buf = grad, which is the same
// rule from buf = 0.) No outputs: the node exists so the schedule can free each gradient once it is applied.
#include "ops/op.h"

namespace monet::ops {
namespace {

void infer_sgd(InferCtx& c) {
  c.expect_inputs(3, 3);
  if (c.shape(1) != c.shape(0) || c.shape(2) != c.shape(0))
    c.fail("param, grad and momentum shapes differ: ", shape_str(c.shape(0)), " ", shape_str(c.shape(1)), " ",
           shape_str(c.shape(2)));
  if (c.attrs().f("lr") <= 0) c.fail("learning rate must be positive");
}

template <class T>
void sgd_cpu(const CpuCall& c) {
  T* p = c.in[0].as<T>();          // (n) updated in place
  const T* g = c.in[1].as<T>();    // (n)
  T* buf = c.in[2].as<T>();        // (n) updated in place
  const T lr = static_cast<T>(c.node.attrs.f("lr"));
  const T mom = static_cast<T>(c.node.attrs.f("momentum"));
  for (int64_t i = 0, n = c.in[0].numel(); i < n; ++i) {
    buf[i] = mom * buf[i] + g[i];
    p[i] -= lr * buf[i];
  }
}

const OpDef sgd_update = {.name = "SgdUpdate", .infer = infer_sgd, .cpu_f32 = sgd_cpu<float>,
                          .cpu_f64 = sgd_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> sgd_update_ops;
const std::vector<const OpDef*> sgd_update_ops = {&sgd_update};

}  // namespace monet::ops
