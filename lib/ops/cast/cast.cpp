// Cast(x) with attribute `to` (an ONNX TensorProto data type) between floats, integers and bool masks:
//   to = FLOAT or DOUBLE  -> a float tensor (the backend's float type; DOUBLE is not wider than it)
//   to = INT64 or INT32   -> int64, truncated towards zero (a float outside int64's range is undefined)
//   to = BOOL             -> a uint8 mask, 1 where x != 0
// from float, int64 or uint8 (a mask). Float -> float passes the gradient through unchanged (no node, as
// Identity); an integer or mask output takes no gradient, and nothing flows back through an integer input.
#include "ops/common/elementwise.h"

namespace monet::ops {
namespace {

// ONNX TensorProto::DataType codes.
constexpr int64_t kFloat = 1, kInt32 = 6, kInt64 = 7, kBool = 9, kDouble = 11;

void infer_cast(InferCtx& c) {
  c.expect_inputs(1, 1);
  const int64_t to = c.attrs().i("to");
  DType out;
  if (to == kFloat || to == kDouble) out = DType::f32;
  else if (to == kInt64 || to == kInt32) out = DType::i64;
  else if (to == kBool) out = DType::u8;
  else c.fail("cast to ONNX data type ", to, " is not supported (FLOAT, DOUBLE, INT32, INT64 and BOOL are)");
  c.set_out(0, c.shape(0), out);
}

void backward_cast(GradBuilder& b) {
  if (b.grad_out(0) < 0 || !b.needs_grad(0)) return;
  if (b.value(b.in(0)).dtype != DType::f32 || b.value(b.out(0)).dtype != DType::f32) return;
  b.set_grad(0, b.grad_out(0));
}

template <class From, class To>
void convert(const CpuCall& c, bool to_bool) {
  const From* x = c.in[0].as<From>();  // (n)
  To* y = c.out[0].as<To>();           // (n)
  const int64_t n = c.in[0].numel();
  if (to_bool) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] != From(0) ? To(1) : To(0);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<To>(x[i]);  // float -> int truncates towards zero
  }
}

template <class T, class From>
void cast_from(const CpuCall& c) {
  const bool to_bool = c.out[0].dtype == DType::u8;
  switch (c.out[0].dtype) {
    case DType::f32: return convert<From, T>(c, false);
    case DType::i64: return convert<From, int64_t>(c, false);
    case DType::u8: return convert<From, uint8_t>(c, to_bool);
  }
}

template <class T>
void cast_cpu(const CpuCall& c) {
  switch (c.in[0].dtype) {
    case DType::f32: return cast_from<T, T>(c);
    case DType::i64: return cast_from<T, int64_t>(c);
    case DType::u8: return cast_from<T, uint8_t>(c);
  }
}

const OpDef cast = {.name = "Cast", .infer = infer_cast, .backward = backward_cast,
                    .cpu_f32 = cast_cpu<float>, .cpu_f64 = cast_cpu<double>};

}  // namespace

extern const std::vector<const OpDef*> cast_ops;
const std::vector<const OpDef*> cast_ops = {&cast};

}  // namespace monet::ops
