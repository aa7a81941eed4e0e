// The operator contract. Each op lives in lib/ops/<op>/ and defines one OpDef: its shape rule, how its gradient
// is expressed as nodes of the training graph, its workspace, its parameter roles and its CPU kernels.
// registry.cpp lists every op explicitly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"

namespace monet {

// ---------------------------------------------------------------------------------------------- shape inference

// What a shape rule sees: the node's attributes and its input values; it sets every output's shape and dtype.
class InferCtx {
 public:
  InferCtx(const Graph& g, const Node& node, std::vector<Value*> outs)
      : g_(g), node_(node), outs_(std::move(outs)), set_(outs_.size(), 0) {}
  const Node& node() const { return node_; }
  const Attrs& attrs() const { return node_.attrs; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(outs_.size()); }
  const Value& in(int i) const;
  const Shape& shape(int i) const { return in(i).shape; }
  void set_out(int i, Shape shape, DType dtype = DType::f32);
  // Throws monet::Error naming the node and op: "node 'x' (Conv): <message>".
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    monet::fail("node '", node_.name, "' (", node_.op, "): ", args...);
  }
  void expect_inputs(int lo, int hi) const;   // lo <= num_inputs <= hi
  void expect_rank(int i, int lo, int hi) const;
  // The first output the rule did not set (one the op does not produce), or -1.
  int unset_output() const;

 private:
  const Graph& g_;
  const Node& node_;
  std::vector<Value*> outs_;
  std::vector<char> set_;
};

// ---------------------------------------------------------------------------------------------- autodiff

// Builds the backward of one forward node inside the training graph. Values are ids in that graph.
// node() and value() stay valid across emit() (which grows the graph): node() is a copy held by the builder and
// value() returns a copy.
class GradBuilder {
 public:
  virtual ~GradBuilder() = default;
  virtual const Node& node() const = 0;            // the forward node
  int in(int i) const { return node().inputs.at(i); }
  int out(int i) const { return node().outputs.at(i); }
  virtual Value value(int id) const = 0;
  // Gradient flowing into forward output i, or -1 when none does.
  virtual int grad_out(int i) const = 0;
  // Whether forward input i needs a gradient (a param or something computed from one).
  virtual bool needs_grad(int i) const = 0;
  // Appends a backward node (shape rule run at once) and returns its output value ids.
  virtual std::vector<int> emit(const std::string& op, const std::vector<int>& inputs, Attrs attrs = {},
                                int num_outputs = 1) = 0;
  int emit1(const std::string& op, const std::vector<int>& inputs, Attrs attrs = {}) {
    return emit(op, inputs, std::move(attrs), 1)[0];
  }
  // Declares the gradient of forward input i (accumulated when several nodes contribute).
  virtual void set_grad(int i, int grad_value) = 0;
};

// ---------------------------------------------------------------------------------------------- kernels

struct TensorRef {
  void* data = nullptr;
  const Shape* shape = nullptr;
  DType dtype = DType::f32;
  int64_t numel() const { return monet::numel(*shape); }
  template <class T>
  T* as() const { return static_cast<T*>(data); }
};

// One kernel invocation. The kernel's T (float or double) is the backend's float type for DType::f32 tensors.
struct CpuCall {
  const Node& node;
  std::vector<TensorRef> in;
  std::vector<TensorRef> out;
  void* workspace = nullptr;      // workspace_bytes(...) bytes, or null when 0
  uint64_t seed = 0;              // per (run seed, step, node): random ops draw from it, identically on recompute
  bool recompute = false;         // true when a schedule runs this forward node again (no side effects twice)
  int impl = 0;                   // index into OpDef::impls; inputs the implementation does not read have data null
};

using CpuKernel = void (*)(const CpuCall&);

// One implementation of a node: which of its inputs it reads. Implementations of one op compute the same outputs
// from different saved tensors (MONeT's input- vs output-activated backward); the planner picks one per run, and
// a tensor only some implementation reads need not be kept for the others.
struct ImplDef {
  std::string_view name;
  uint32_t reads = ~0u;  // bit i set: reads input i
  // Whether this implementation may run in place (OpDef::in_place) on every backend: cuDNN's input-activated
  // BatchNormGrad does not document aliasing dX with dY, so it does not; our own kernels read each element first.
  bool in_place = true;
  bool reads_input(int i) const { return (reads >> i) & 1u; }
};

struct OpDef {
  std::string_view name;
  // Shape rule: checks attributes and input shapes, sets outputs. Required.
  void (*infer)(InferCtx&) = nullptr;
  // Emits backward nodes; null for ops that are never differentiated (backward ops, loss gradients).
  void (*backward)(GradBuilder&) = nullptr;
  // CPU kernels for T = float and T = double.
  CpuKernel cpu_f32 = nullptr;
  CpuKernel cpu_f64 = nullptr;
  // Scratch bytes the CPU kernel needs (0 if null); float_bytes = sizeof(T).
  int64_t (*cpu_workspace_bytes)(const Graph&, const Node&, int float_bytes) = nullptr;
  // Inputs that must be constant at import and become attributes: static_inputs[i] names the attribute for
  // input i ("" = runtime input). The importer moves them out of the runtime inputs. The attribute holds the values
  // flat; when the constant is not 1-D its shape goes to attribute "<name>_shape" too (a scalar: []).
  std::vector<std::string_view> static_inputs = {};
  // Role of each input when it is a graph input without data (params / buffers).
  std::vector<ParamRole> param_roles = {};
  // Floating-point operations of one run, for estimated profiles; null = one per output element.
  double (*flops)(const Graph&, const Node&) = nullptr;
  // Implementations, the default first; empty = one implementation that reads every input.
  std::vector<ImplDef> impls = {};
  // FLOPs of one run of implementation `impl` where implementations differ in work (null: `flops` for every one).
  double (*impl_flops)(const Graph&, const Node&, int impl) = nullptr;
  // Inputs whose buffer output 0 may take over (run in place), in order of preference: the kernels read each
  // element of that input before writing the same element of output 0, on every backend. The planner runs a node in
  // place only when that input has output 0's bytes and nothing reads it afterwards.
  std::vector<int> in_place = {};
  // Outputs (index > 0) that only some implementations of the node's consumers read (Relu's mask, MaxPool's
  // argmax, Attention's probabilities): where no step of a schedule reads one, the executor neither allocates it nor
  // writes it (it passes it with data null and the kernels skip it, on every backend), profiled steps included: a
  // profile times such a node both ways (PlanNode::lean_ms), and the planner counts no bytes for it there.
  std::vector<int> optional_outputs = {};
  // Output 0 is input 0's bytes unchanged under another shape (Reshape, Flatten, Squeeze, Unsqueeze, ReshapeGrad,
  // Identity): with in_place = {0} the planner may run it in place over an input of equal bytes whatever its shape,
  // and in place the kernels do nothing, on every backend.
  bool view = false;
};

// The implementations of a node's op (at least one: the default).
std::vector<ImplDef> impls_of(const Node& n);

// ---------------------------------------------------------------------------------------------- registry

const OpDef* find_op(std::string_view name);     // null if unknown
const OpDef& op_def(std::string_view name);      // throws if unknown
const std::vector<const OpDef*>& all_ops();

// Runs the shape rule of g.nodes[node] and writes its outputs' shapes and dtypes into g.
void infer_node(Graph& g, int node);

}  // namespace monet
