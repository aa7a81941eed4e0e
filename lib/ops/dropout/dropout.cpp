// Dropout: Y = X * mask / (1 - ratio), mask (uint8, 1 = kept) drawn from the node's seed. ratio and
// training_mode are static inputs (attributes); training_mode 0 (the default) is inference: Y = X, mask all 1.
// The importer gives the node exactly two outputs (Y, mask). Backward DropoutGrad(dY, mask) -> dX = dY * mask *
// scale with the same scale, so X need not be kept.
//
// The mask is a pure function of (call.seed, i), so a recomputation draws the same mask and no random state is
// carried between calls: element i is kept iff u(seed, i) >= ratio, where
//   key      = splitmix64(seed)
//   u(seed,i) = top 53 bits of splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15) / 2^53, uniform in [0, 1)
// and splitmix64(z) is the splitmix64 finaliser (xor-shift-multiply by 0xBF58476D1CE4E5B9, 0x94D049BB133111EB).
// The same formula must be used by every backend (it is what makes CPU and CUDA masks identical).
#include <variant>

#include "ops/common/elementwise.h"
#include "ops/common/plans.h"

namespace monet::ops {
namespace {

inline uint64_t splitmix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) for element i of a call with this seed (see the header).
inline double dropout_uniform(uint64_t key, int64_t i) {
  const uint64_t h = splitmix64(key + (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// The ratio in effect: 0 in inference mode, where Dropout is the identity.
double effective_ratio(const Attrs& a) {
  return a.scalar("training_mode", 0) != 0 ? a.scalar("ratio", 0.5) : 0.0;
}

void infer_dropout(InferCtx& c) {
  c.expect_inputs(1, 1);
  if (c.num_outputs() != 2) c.fail("expects 2 outputs (Y, mask), has ", c.num_outputs());
  const double ratio = c.attrs().scalar("ratio", 0.5);
  const double training_mode = c.attrs().scalar("training_mode", 0);
  if (!(ratio >= 0 && ratio < 1)) c.fail("ratio must be in [0, 1), got ", ratio);
  if (training_mode != 0 && training_mode != 1) c.fail("training_mode must be 0 or 1, got ", training_mode);
  c.set_out(0, c.shape(0), DType::f32);
  c.set_out(1, c.shape(0), DType::u8);
}

void backward_dropout(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  Attrs a;
  a.set("ratio", effective_ratio(b.node().attrs));
  b.set_grad(0, b.emit1("DropoutGrad", {b.grad_out(0), b.out(1)}, a));
}

template <class T>
void dropout_cpu(const CpuCall& c) {
  const double ratio = effective_ratio(c.node.attrs);
  const T scale = static_cast<T>(1.0 / (1.0 - ratio));
  const uint64_t key = splitmix64(c.seed);
  const T* x = c.in[0].as<T>();                // (n)
  T* y = c.out[0].as<T>();                     // (n)
  uint8_t* mask = c.out[1].as<uint8_t>();      // (n)
  const int64_t n = c.in[0].numel();
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = ratio == 0 || dropout_uniform(key, i) >= ratio;
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : T(0);
  }
}

// DropoutGrad(dY, mask) -> dX with attribute ratio (the effective one: 0 in inference mode).
void infer_dropout_grad(InferCtx& c) {
  c.expect_inputs(2, 2);
  const double ratio = c.attrs().scalar("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1)) c.fail("ratio must be in [0, 1), got ", ratio);
  if (c.shape(1) != c.shape(0) || c.in(1).dtype != DType::u8)
    c.fail("mask must be uint8 of shape ", shape_str(c.shape(0)), ", got ", dtype_name(c.in(1).dtype), " ",
           shape_str(c.shape(1)));
  c.set_out(0, c.shape(0));
}

template <class T>
void dropout_grad_cpu(const CpuCall& c) {
  const T scale = static_cast<T>(1.0 / (1.0 - c.node.attrs.scalar("ratio", 0.5)));
  const T* dy = c.in[0].as<T>();              // (n)
  const uint8_t* mask = c.in[1].as<uint8_t>();  // (n)
  T* dx = c.out[0].as<T>();                   // (n)
  const int64_t n = c.in[0].numel();
  for (int64_t i = 0; i < n; ++i) dx[i] = mask[i] ? dy[i] * scale : T(0);
}

const OpDef dropout = {.name = "Dropout", .infer = infer_dropout, .backward = backward_dropout,
                       .cpu_f32 = dropout_cpu<float>, .cpu_f64 = dropout_cpu<double>,
                       .static_inputs = {"", "ratio", "training_mode"}};
const OpDef dropout_grad = {.name = "DropoutGrad", .infer = infer_dropout_grad,
                            .cpu_f32 = dropout_grad_cpu<float>, .cpu_f64 = dropout_grad_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> dropout_ops;
const std::vector<const OpDef*> dropout_ops = {&dropout, &dropout_grad};

// For other backends (ops/common/plans.h).
double dropout_ratio(const Attrs& a) { return effective_ratio(a); }

}  // namespace monet::ops
