// A one-node ONNX model as bytes, for the importer's checks of malformed or unusual nodes: float input "x" of a
// given shape, int64 initializer "c" = [3, 8] and float initializers "s", "b" of shape (channels), the node `op`
// reading `inputs` and writing graph output "y".
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace monet::test {

inline std::string one_node_model(const std::string& op, const std::vector<std::string>& inputs, int opset,
                                  const std::vector<int64_t>& x_shape = {2, 12},
                                  const std::vector<onnx::AttributeProto>& attrs = {}, int64_t channels = 1) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : x_shape) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  onnx::TensorProto* c = g->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::INT64);
  c->add_dims(2);
  c->add_int64_data(3);
  c->add_int64_data(8);
  for (const char* name : {"s", "b"}) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(channels);
    for (int64_t i = 0; i < channels; ++i) t->add_float_data(0.5f);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_name("n");
  n->set_op_type(op);
  for (const std::string& i : inputs) n->add_input(i);
  for (const onnx::AttributeProto& a : attrs) *n->add_attribute() = a;
  n->add_output("y");
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (size_t d = 0; d < x_shape.size(); ++d)  // of x's rank, sizes left to the importer
    y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(d));
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

// An attribute of `type` named `name`, its value left to the caller.
inline onnx::AttributeProto named_attr(const std::string& name, onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(type);
  return a;
}

inline onnx::AttributeProto int_attr(const std::string& name, int64_t v) {
  onnx::AttributeProto a = named_attr(name, onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

inline onnx::AttributeProto float_attr(const std::string& name, float v) {
  onnx::AttributeProto a = named_attr(name, onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

inline onnx::AttributeProto str_attr(const std::string& name, const std::string& v) {
  onnx::AttributeProto a = named_attr(name, onnx::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

}  // namespace monet::test
