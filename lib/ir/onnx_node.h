// ONNX node attributes for the importer's rewrites: read one by name with a default, and build one for a node the
// importer writes itself (a rewrite's Transpose, Concat, Reshape...). Internal to the importer: included only by
// lib/ir/onnx_*.cpp.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace monet::onnx_import {

// The node's attribute named `name`, or null.
const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name);
int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback);
double attr_float(const onnx::NodeProto& n, const std::string& name, double fallback);
std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& fallback);
// An INTS attribute's values; empty where the node has none.
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name);

onnx::AttributeProto int_attr(const std::string& name, int64_t value);
onnx::AttributeProto ints_attr(const std::string& name, const std::vector<int64_t>& values);
onnx::AttributeProto float_attr(const std::string& name, double value);
onnx::AttributeProto string_attr(const std::string& name, const std::string& value);
// Sets `a` on the node, replacing an attribute of its name.
void set_attr(onnx::NodeProto& n, const onnx::AttributeProto& a);

}  // namespace monet::onnx_import
