// The graph every stage works on: values (shape, dtype, role) and nodes (op, attributes, inputs, outputs).
// Shapes are fully known: monet works at a fixed batch, so every tensor's size is a pure function of the graph.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace monet {

using Shape = std::vector<int64_t>;

// f32 is "the float type of the backend": float in production, double when tests run the CPU backend in double.
enum class DType : uint8_t { f32, i64, u8 };

const char* dtype_name(DType t);
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);

// Every tensor is padded to this many bytes, in the size function and the arena alike.
inline constexpr int64_t kAlignBytes = 256;
inline int64_t align_up(int64_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

// Bytes of one element; float_bytes is 4 for the fp32 engine, 8 for double-precision tests.
int64_t element_bytes(DType t, int float_bytes = 4);
// Bytes one tensor of this shape occupies in the arena (aligned). The single size function of monet.
int64_t tensor_bytes(const Shape& s, DType t, int float_bytes = 4);

enum class Role : uint8_t {
  input,       // the data batch
  label,       // integer class labels for the loss
  param,       // trainable parameter (has a gradient and momentum)
  buffer,      // persistent, not trained (BatchNorm running statistics)
  constant,    // folded at import; data stored in Value::data
  activation,  // produced by a forward node
  gradient,    // produced by a backward node
  momentum,    // SGD momentum buffer of a param
};
const char* role_name(Role r);

// How a param or buffer without data in the file is initialised from the seed, as PyTorch initialises layers.
enum class ParamRole : uint8_t {
  none,          // not a parameter slot
  weight,        // Kaiming-uniform(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = shape[1]*prod(shape[2:])
  weight_kn,     // weight laid out [K, N] (MatMul, Gemm transB=0): fan_in = shape[0]
  bias,          // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with the fan_in of the node's weight (or of the MatMul whose
                 // output it is added to); zeros when there is none
  ones,          // BatchNorm gamma
  zeros,         // BatchNorm beta
  running_mean,  // buffer, 0
  running_var,   // buffer, 1
  small_normal,  // N(0, 0.02^2), as PyTorch's ViT draws its position embedding; a graph input read as a plain
                 // operand that no rule of the importer's plain_operand_role() recognises
};
bool is_persistent(Role r);  // lives for the whole run (not freed by a schedule)

using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>, std::string>;

// Node attributes, typed getters with defaults; a wrong type is an error naming the attribute.
class Attrs {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  int64_t i(const std::string& name, std::optional<int64_t> dflt = std::nullopt) const;
  double f(const std::string& name, std::optional<double> dflt = std::nullopt) const;
  // One number however it is stored: a float, an int, or a one-element list (an importer-moved constant input).
  double scalar(const std::string& name, double dflt) const;
  std::vector<int64_t> ints(const std::string& name, std::optional<std::vector<int64_t>> dflt = std::nullopt) const;
  std::vector<double> floats(const std::string& name, std::optional<std::vector<double>> dflt = std::nullopt) const;
  std::string s(const std::string& name, std::optional<std::string> dflt = std::nullopt) const;
  void set(const std::string& name, AttrValue v) { map_[name] = std::move(v); }
  const std::map<std::string, AttrValue>& all() const { return map_; }

 private:
  const AttrValue& get(const std::string& name) const;
  std::map<std::string, AttrValue> map_;
};

struct Value {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  Role role = Role::activation;
  int producer = -1;              // node index, -1 for graph inputs
  std::vector<double> data;       // constants, and params/buffers whose initial value the file holds
  ParamRole init = ParamRole::none;  // params and buffers without data: how to initialise them
  bool requires_grad = false;
};

struct Node {
  std::string name;
  std::string op;
  std::vector<int> inputs;        // value ids
  std::vector<int> outputs;       // value ids
  Attrs attrs;
  int forward_node = -1;          // for backward nodes: the forward node they differentiate
};

struct Graph {
  std::string model_name;         // file stem of the ONNX model
  std::vector<Value> values;
  std::vector<Node> nodes;        // in a valid execution (topological) order
  int data_input = -1;
  std::vector<int> outputs;       // model outputs
  // build_training_graph fuses a token model's output MatMul with its cross-entropy (fuse_linear_loss.h): set by
  // the importer from ImportOptions::fuse_loss_head; a graph built by hand leaves them separate.
  bool fuse_loss_head = false;
  // The import ran the Concat-Conv split (split_concat_conv.h), whether or not any convolution met its conditions:
  // set by the importer from ImportOptions::split_concat_conv, read by concat_conv_mode.
  bool split_concat_conv = false;

  int add_value(Value v);
  int find_value(const std::string& name) const;  // -1 if absent
  // Nodes that read each value (rebuilt on demand).
  std::vector<std::vector<int>> consumers() const;
  std::vector<int> values_with_role(Role r) const;
  // Structural checks: ids in range, each value produced once, inputs produced before use. Throws on failure.
  void verify() const;
  // Removes the values flagged in `drop` (which no node, graph output or data input may still name), the others
  // keeping their order under new ids.
  void drop_values(const std::vector<char>& drop);
  // Removes the flagged nodes (the others keep their order) and values (drop_values), sets every value's producer
  // from the nodes that remain, and verifies: what a rewrite that merges nodes into others does last.
  void remove(const std::vector<char>& drop_node, const std::vector<char>& drop_value);
};

}  // namespace monet
