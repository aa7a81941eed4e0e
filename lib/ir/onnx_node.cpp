#include "ir/onnx_node.h"

namespace monet::onnx_import {

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}

double attr_float(const onnx::NodeProto& n, const std::string& name, double fallback) {
  const auto* a = find_attr(n, name);
  return a ? static_cast<double>(a->f()) : fallback;
}

std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) {
  const auto* a = find_attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

onnx::AttributeProto int_attr(const std::string& name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}

onnx::AttributeProto ints_attr(const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

onnx::AttributeProto float_attr(const std::string& name, double value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(static_cast<float>(value));
  return a;
}

onnx::AttributeProto string_attr(const std::string& name, const std::string& value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(value);
  return a;
}

void set_attr(onnx::NodeProto& n, const onnx::AttributeProto& a) {
  for (auto& b : *n.mutable_attribute())
    if (b.name() == a.name()) {
      b = a;
      return;
    }
  *n.add_attribute() = a;
}

}  // namespace monet::onnx_import
