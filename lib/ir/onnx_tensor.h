// Constant tensors as the ONNX importer holds them (initializers, Constant nodes, folded shape arithmetic): values
// as doubles, read from a TensorProto, and the checked element counts that keep a strange file from overflowing.
// Internal to the importer: included only by lib/ir/onnx_*.cpp.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ir/graph.h"

namespace monet::onnx_import {

struct ConstTensor {
  Shape shape;
  bool is_float = true;
  std::vector<double> data;
};

// A constant value of the graph being built as a tensor.
inline ConstTensor as_const(const Value& v) { return {v.shape, v.dtype == DType::f32, v.data}; }

// Saturating: NaN becomes INT64_MIN, which every size or index check refuses.
int64_t to_int(double d);
std::vector<int64_t> ints_of(const ConstTensor& t);

// Elements of a shape, refusing negative dims and products beyond `max_elements` (checked: never wraps).
int64_t checked_numel(const Shape& s, int64_t max_elements, const std::string& where, const std::string& what);
// A tensor monet will hold: at most kMaxTensorBytes at 8 bytes an element.
int64_t checked_tensor_numel(const Shape& s, const std::string& where, const std::string& what);

// The tensor's values; `where` starts every error line.
ConstTensor read_tensor(const onnx::TensorProto& t, const std::string& where);

bool is_float_type(int onnx_type);

}  // namespace monet::onnx_import
