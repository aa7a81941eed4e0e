// Constant tensors of the ONNX importer: reading a TensorProto's values (raw or typed fields, each data type monet
// reads) and the element counts checked before anything is allocated.
#include "ir/onnx_tensor.h"

#include <climits>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ir/onnx_import.h"

namespace monet::onnx_import {

int64_t to_int(double d) {
  if (std::isnan(d)) return INT64_MIN;  // refused wherever a size or an index is expected
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(d);
}

std::vector<int64_t> ints_of(const ConstTensor& t) {
  std::vector<int64_t> out;
  for (double d : t.data) out.push_back(to_int(d));
  return out;
}

int64_t checked_numel(const Shape& s, int64_t max_elements, const std::string& where, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d < 0) fail(where, ": ", what, " has a negative dimension: ", shape_str(s));
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n) || n > max_elements)
      fail(where, ": ", what, " ", shape_str(s), " is too large (over ", max_elements, " elements)");
  return n;
}

int64_t checked_tensor_numel(const Shape& s, const std::string& where, const std::string& what) {
  return checked_numel(s, kMaxTensorBytes / 8, where, what);
}

ConstTensor read_tensor(const onnx::TensorProto& t, const std::string& where) {
  ConstTensor c;
  for (int64_t d : t.dims()) c.shape.push_back(d);
  // Its values are in the file (checked below), so only the count itself must not overflow.
  const int64_t n = checked_tensor_numel(c.shape, where, "tensor '" + t.name() + "'");
  if (t.data_location() == onnx::TensorProto::EXTERNAL) fail(where, ": external tensor data is not supported");
  const std::string& raw = t.raw_data();
  auto from_raw = [&](auto sample) {
    using T = decltype(sample);
    if (static_cast<int64_t>(raw.size()) != n * static_cast<int64_t>(sizeof(T)))
      fail(where, ": tensor '", t.name(), "' raw_data has ", raw.size(), " bytes, expected ", n * sizeof(T));
    c.data.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
      c.data[i] = static_cast<double>(v);
    }
  };
  auto from_field = [&](const auto& field) {
    if (static_cast<int64_t>(field.size()) != n)
      fail(where, ": tensor '", t.name(), "' has ", field.size(), " values, expected ", n);
    c.data.assign(field.begin(), field.end());
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: raw.empty() ? from_field(t.float_data()) : from_raw(float{}); break;
    case onnx::TensorProto::DOUBLE: raw.empty() ? from_field(t.double_data()) : from_raw(double{}); break;
    case onnx::TensorProto::INT64: c.is_float = false; raw.empty() ? from_field(t.int64_data()) : from_raw(int64_t{}); break;
    case onnx::TensorProto::INT32: c.is_float = false; raw.empty() ? from_field(t.int32_data()) : from_raw(int32_t{}); break;
    case onnx::TensorProto::INT8: c.is_float = false; raw.empty() ? from_field(t.int32_data()) : from_raw(int8_t{}); break;
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: c.is_float = false; raw.empty() ? from_field(t.int32_data()) : from_raw(uint8_t{}); break;
    default: fail(where, ": tensor '", t.name(), "' has unsupported data type ", t.data_type());
  }
  return c;
}

bool is_float_type(int onnx_type) {
  return onnx_type == onnx::TensorProto::FLOAT || onnx_type == onnx::TensorProto::DOUBLE ||
         onnx_type == onnx::TensorProto::FLOAT16 || onnx_type == onnx::TensorProto::BFLOAT16;
}

}  // namespace monet::onnx_import
