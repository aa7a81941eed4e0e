#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <iterator>
#include <map>

#include "core/error.h"
#include "ir/onnx_import.h"
#include "ir/op_counts.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {
ImportOptions at(int64_t batch, Shape chw = {}) {
  ImportOptions o;
  o.batch = batch;
  if (!chw.empty()) o.input_shape = chw;
  return o;
}
}  // namespace

TEST_CASE("every model in models/ imports and infers shapes at its batch", "[import]") {
  struct Case { const char* name; int64_t batch; Shape chw; Shape out; };
  const Case cases[] = {
      {"resnet50", 184, {}, {184, 1000}},     {"resnet50", 2, {3, 64, 64}, {2, 1000}},
      {"googlenet", 320, {}, {320, 1000}},    {"googlenet", 2, {3, 64, 64}, {2, 1000}},
      {"mobilenet_v2", 272, {}, {272, 1000}}, {"mobilenet_v2", 2, {3, 64, 64}, {2, 1000}},
      {"vgg16", 176, {}, {176, 1000}},        {"vgg16", 1, {3, 224, 224}, {1, 1000}},
      {"unet", 11, {}, {11, 2, 416, 608}},    {"unet", 2, {3, 64, 64}, {2, 2, 64, 64}},
      {"tiny", 2, {}, {2, 5}},
  };
  for (const Case& c : cases) {
    INFO(c.name << " batch " << c.batch);
    Graph g = import_onnx(model_path(c.name), at(c.batch, c.chw));
    REQUIRE(g.outputs.size() == 1);
    CHECK(g.values[g.outputs[0]].shape == c.out);
    CHECK(g.values[g.data_input].shape[0] == c.batch);
    for (const Value& v : g.values) CHECK(numel(v.shape) > 0);
  }
}

TEST_CASE("import classifies params, buffers and folds shape subgraphs", "[import]") {
  Graph g = import_onnx(model_path("resnet50"), at(2, {3, 64, 64}));
  CHECK(g.values_with_role(Role::param).size() == 161);   // 53 conv + 2*53 BN + fc weight and bias
  CHECK(g.values_with_role(Role::buffer).size() == 106);  // BN running mean and var
  CHECK(g.nodes.size() == 175 - 33);  // 33 of the 49 ReLUs fused into the batch norms before them

  Graph f = import_onnx(data_path("float_data_init.onnx"), at(5));
  CHECK(f.values[f.outputs[0]].shape == Shape{5, 3});
  int w = f.find_value("w");
  REQUIRE(w >= 0);
  CHECK(f.values[w].role == Role::param);
  CHECK(f.values[w].data.at(11) == Approx(1.1));
  for (const Node& n : f.nodes) CHECK(n.op != "Shape");  // folded
}

TEST_CASE("transformer export: shape subgraphs fold, plain-operand params get roles from their readers", "[import]") {
  Graph g = import_onnx(data_path("tiny_transformer.onnx"), at(3));
  CHECK(g.values[g.outputs[0]].shape == Shape{3, 5});
  std::map<std::string, int> ops = op_counts(g);
  // class_token.expand(n, -1, -1): Reshape/Equal/Where fold to the target [3, 1, 1]; only the Expand runs.
  for (const char* folded : {"Shape", "Equal", "Where", "ConstantOfShape", "Constant"}) CHECK(ops[folded] == 0);
  CHECK(ops["Expand"] == 1);
  CHECK(ops["Gather"] == 1);  // x[:, 0] on the activation
  for (const Node& n : g.nodes)
    if (n.op == "Expand") CHECK(n.attrs.ints("shape") == std::vector<int64_t>{3, 1, 1});
  auto init = [&](const char* name) {
    int v = g.find_value(name);
    REQUIRE(v >= 0);
    CHECK(g.values[v].role == Role::param);
    return g.values[v].init;
  };
  CHECK(init("conv_w") == ParamRole::weight);        // a Conv slot, as before
  CHECK(init("qkv_w") == ParamRole::weight);         // Transpose -> MatMul B (weight_kn) = Linear's (out, in)
  CHECK(init("fc2_w") == ParamRole::weight);
  CHECK(init("out_w") == ParamRole::weight);         // Gemm transB=1
  CHECK(init("qkv_b") == ParamRole::bias);           // added to a MatMul output
  CHECK(init("ln1_g") == ParamRole::ones);           // multiplied
  CHECK(init("ln1_b") == ParamRole::zeros);          // LayerNorm's B (the decomposition fused, below)
  CHECK(ops["LayerNorm"] == 2);                      // nn.LayerNorm's opset-13 nodes, one node each
  for (const char* fused : {"ReduceMean", "Pow", "Sqrt"}) CHECK(ops[fused] == 0);
  CHECK(ops["Gelu"] == 1);                           // nn.GELU's five nodes, one node
  CHECK(ops["Erf"] == 0);
  for (const Node& n : g.nodes)
    if (n.op == "Gelu") CHECK(n.attrs.f("divisor") == 1.4142135381698608);  // the exported constant
  CHECK(init("class_token") == ParamRole::small_normal);
  CHECK(init("pos_embedding") == ParamRole::small_normal);
}

TEST_CASE("initializers read as plain operands train unless they look constant", "[import]") {
  // initializer_params.onnx: torch.onnx.export's defaults (parameters stored as initializers, constants folded).
  Graph g = import_onnx(data_path("initializer_params.onnx"), at(2));
  auto role = [&](const char* name) {
    const int v = g.find_value(name);
    REQUIRE(v >= 0);
    return g.values[v].role;
  };
  // A Linear on a 3-D input (MatMul of a folded transposed weight, its bias a plain Add), a position embedding
  // added, a layer scale multiplied, and a buffer of sinusoids, which the file cannot tell from a learned table.
  for (const char* p : {"proj.bias", "head.bias", "pos", "scale", "sinusoid"}) CHECK(role(p) == Role::param);
  // An InstanceNorm's affine scale and bias, stored at their initial ones and zeros: parameters, not an identity.
  CHECK(role("inorm.weight") == Role::param);
  CHECK(role("inorm.bias") == Role::param);
  int matmul_weights = 0;  // the folded transposed weights, named by the exporter
  for (const Value& v : g.values)
    if (v.name.rfind("onnx::MatMul_", 0) == 0 && v.role == Role::param) ++matmul_weights;
  CHECK(matmul_weights == 2);
  CHECK(role("mask") == Role::constant);         // -1e9 above the diagonal: an additive mask
  CHECK(role("temperature") == Role::constant);  // a scalar, as a folded epsilon or scale is
  CHECK(g.values[g.find_value("proj.bias")].init == ParamRole::bias);
  CHECK(g.values[g.find_value("scale")].init == ParamRole::ones);

  // The same file with a parameter as a graph input (as export_params=False writes every parameter): its
  // initializers are then buffers and constants, and those read as plain operands stay constants.
  onnx::ModelProto m;
  std::ifstream in(data_path("initializer_params.onnx"), std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  onnx::GraphProto* gp = m.mutable_graph();
  for (int i = 0; i < gp->initializer_size(); ++i) {
    if (gp->initializer(i).name() != "proj.bias") continue;
    onnx::ValueInfoProto* input = gp->add_input();
    input->set_name("proj.bias");
    input->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    input->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(8);
    gp->mutable_initializer()->DeleteSubrange(i, 1);
    break;
  }
  std::string bytes;
  m.SerializeToString(&bytes);
  Graph h = import_onnx_bytes(bytes, "inputs.onnx", at(2));
  CHECK(h.values[h.find_value("proj.bias")].role == Role::param);
  for (const char* c : {"pos", "scale", "sinusoid"}) CHECK(h.values[h.find_value(c)].role == Role::constant);
}

TEST_CASE("1-D convolutions, pools and resizes run as the 2-D ops over a height of 1", "[import]") {
  Graph g = import_onnx(data_path("conv1d_net.onnx"), at(3));
  CHECK(g.values[g.outputs[0]].shape == Shape{3, 5});
  std::map<std::string, int> ops = op_counts(g);
  CHECK(ops["Conv"] == 3);
  CHECK(ops["ConvTranspose"] == 1);
  CHECK(ops["Resize"] == 2);
  CHECK(ops["Squeeze"] == 9);  // one per 1-D op
  for (const Node& n : g.nodes) {
    if (n.op != "Conv" && n.op != "ConvTranspose" && n.op != "MaxPool" && n.op != "AveragePool") continue;
    INFO(n.name);
    CHECK(g.values[n.inputs[0]].shape.size() == 4);
    CHECK(g.values[n.inputs[0]].shape[2] == 1);
    if (n.attrs.has("pads")) CHECK(n.attrs.ints("pads")[0] == 0);
  }
  // The weights stay the model's parameters, of the model's shape, and keep their Conv roles through the view.
  const Value& w = g.values[g.find_value("c1.weight")];
  CHECK(w.role == Role::param);
  CHECK(w.shape == Shape{8, 3, 5});
  CHECK(w.init == ParamRole::weight);
}

TEST_CASE("variadic Max and Min, a broadcasting Sum, the norms and LogSumExp, Celu and the depth-space moves "
          "become monet's own ops", "[import]") {
  Graph g = import_onnx(data_path("decomposed_forms_opset18.onnx"), at(3));
  CHECK(g.values[g.outputs[0]].shape == Shape{3, 4, 4, 4});
  std::map<std::string, int> ops = op_counts(g);
  CHECK(ops["Max"] == 2);  // Max of three, chained
  CHECK(ops["Min"] == 0);  // Min of one: an Identity
  CHECK(ops["Sum"] == 0);  // five inputs of three shapes: four Adds
  CHECK(ops["ReduceSum"] == 3);  // SumSquare, L2 and LogSumExp's sum
  CHECK(ops["ReduceMax"] == 2);  // LogSumExp's shift and ReduceMin's Neg-Max-Neg
  CHECK(ops["Elu"] == 1);
  CHECK(ops["Transpose"] == 2);  // DepthToSpace and SpaceToDepth, one each
  for (const char* gone : {"ReduceSumSquare", "ReduceL2", "ReduceLogSumExp", "ReduceMin", "Celu", "DepthToSpace"})
    CHECK(ops[gone] == 0);
  for (const Node& n : g.nodes)
    if (n.op == "Transpose") CHECK(n.attrs.ints("perm").size() == 6);
}

TEST_CASE("LSTM and GRU unroll over the sequence, unsupported forms are refused in one line", "[import]") {
  Graph g = import_onnx(data_path("rnn_torch.onnx"), at(3));
  CHECK(g.values[g.outputs[0]].shape == Shape{3, 5, 3});
  std::map<std::string, int> ops = op_counts(g);
  CHECK(ops["LSTM"] == 0);
  CHECK(ops["GRU"] == 0);
  // Two LSTM layers of two directions over five steps, then a GRU over five: LSTM i, o, f and GRU z, r (together)
  // through a Sigmoid each, LSTM c~ and tanh(C) and GRU h~ through a Tanh each.
  CHECK(ops["Sigmoid"] == 2 * 2 * 5 * 3 + 5);
  CHECK(ops["Tanh"] == 2 * 2 * 5 * 2 + 5);
  // sequence_lens and peepholes: one error line naming the node.
  onnx::ModelProto m;
  std::ifstream in(data_path("rnn_forms_opset14.onnx"), std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  m.mutable_graph()->mutable_node(0)->set_input(4, "x");
  std::string bytes;
  m.SerializeToString(&bytes);
  CHECK_THROWS_WITH(import_onnx_bytes(bytes, "rnn.onnx", at(2)),
                    Contains("rnn.onnx: node 'lstm' (LSTM): sequence_lens is not supported"));
  m.mutable_graph()->mutable_node(0)->set_input(4, "");
  m.mutable_graph()->mutable_node(0)->add_input("lh");
  m.SerializeToString(&bytes);
  CHECK_THROWS_WITH(import_onnx_bytes(bytes, "rnn.onnx", at(2)), Contains("peepholes (P) are not supported"));
  // A sequence too long to unroll (the steps of the data input's second dim, batch first).
  CHECK_THROWS_WITH(import_onnx(data_path("rnn_forms_opset14.onnx"), at(2, {20000, 3})),
                    Contains("20000 steps in 1 direction(s) are too many to unroll"));
}

TEST_CASE("nn.LayerNorm's decomposition becomes one LayerNorm where its form allows, as LayerNormalization does",
          "[import]") {
  // layer_norm_forms.onnx (scripts/make_test_models.py): ln_a and ln_b fuse, ln_c (a broadcast Scale) and ln_d (the
  // centred value read elsewhere) stay as the exported nodes.
  const Graph g = import_onnx(data_path("layer_norm_forms.onnx"), at(2));
  std::vector<const Node*> ln;
  std::map<std::string, int> ops;
  for (const Node& n : g.nodes) {
    ++ops[n.op];
    if (n.op == "LayerNorm") ln.push_back(&n);
  }
  REQUIRE(ln.size() == 2);
  CHECK(ln[0]->name == "ln_a");
  CHECK(ln[0]->attrs.i("axis") == -1);
  CHECK(ln[0]->attrs.f("epsilon") == Approx(1e-5));
  CHECK(g.values[ln[0]->inputs[1]].name == "a_g");
  CHECK(g.values[ln[0]->inputs[2]].name == "a_b");
  CHECK(g.values[ln[0]->outputs[0]].name == "ln_a");
  CHECK(ln[1]->name == "ln_b_mul");  // no B: the pattern ends at the Mul, and B is a constant of zeros
  CHECK(ln[1]->attrs.i("axis") == -2);
  CHECK(g.values[ln[1]->inputs[2]].role == Role::constant);
  CHECK(g.values[ln[1]->inputs[2]].data == std::vector<double>(12, 0.0));
  CHECK(ops["ReduceMean"] == 4);  // ln_c and ln_d
  CHECK(ops["Sqrt"] == 2);
  for (const char* name : {"a_g", "b_g"}) CHECK(g.values[g.find_value(name)].init == ParamRole::ones);
  CHECK(g.values[g.find_value("a_b")].init == ParamRole::zeros);
  // The same model at opset 17 (LayerNormalization nodes) and 13 (the decomposition) import to the same graph.
  const Graph g13 = import_onnx(data_path("gpt2_tiny.onnx"), at(2));
  const Graph g17 = import_onnx(data_path("gpt2_tiny_opset17.onnx"), at(2));
  REQUIRE(g13.nodes.size() == g17.nodes.size());
  int layer_norms = 0;
  for (size_t i = 0; i < g13.nodes.size(); ++i) {
    CHECK(g13.nodes[i].op == g17.nodes[i].op);
    layer_norms += g13.nodes[i].op == "LayerNorm";
  }
  CHECK(layer_norms == 5);  // two per block, two blocks, and the final one
}

TEST_CASE("a batch fixed in the file is used unless --batch replaces it", "[import]") {
  CHECK(import_onnx(data_path("static_batch.onnx"), {}).values[0].shape[0] == 2);
  CHECK(import_onnx(data_path("static_batch.onnx"), at(3)).values[0].shape[0] == 3);
}

TEST_CASE("bad model files get one clear error", "[import][errors]") {
  CHECK_THROWS_WITH(import_onnx(data_path("missing.onnx"), at(2)), Contains("missing.onnx: no such file"));
  CHECK_THROWS_WITH(import_onnx(data_path("empty.onnx"), at(2)), Contains("empty file"));
  CHECK_THROWS_WITH(import_onnx(data_path("random_bytes.onnx"), at(2)), Contains("not an ONNX model"));
  CHECK_THROWS_WITH(import_onnx(data_path("truncated.onnx"), at(2)), Contains("truncated.onnx"));
  CHECK_THROWS_WITH(import_onnx(data_path("unsupported_op.onnx"), at(2)),
                    Contains("unsupported_op.onnx: node 'act' (Hardmax): unsupported op type 'Hardmax'"));
  CHECK_THROWS_WITH(import_onnx(data_path("conv_relu.onnx"), {}), Contains("dynamic batch dimension: give --batch"));
  CHECK_THROWS_WITH(import_onnx(data_path("conv_relu.onnx"), at(0)), Contains("--batch must be a positive integer"));
  CHECK_THROWS_WITH(import_onnx(data_path("conv_relu.onnx"), at(-3)), Contains("--batch must be a positive integer"));
  CHECK_THROWS_WITH(import_onnx(data_path("conv_relu.onnx"), at(2, {5, 8, 8})), Contains("node 'conv' (Conv)"));
  // vgg16's adaptive pooling is exported for 224x224 inputs: other sizes fail at the classifier, by name.
  CHECK_THROWS_WITH(import_onnx(model_path("vgg16"), at(2, {3, 32, 32})), Contains("(Gemm)"));
}

TEST_CASE("import from bytes is import from the file, and sizes that cannot be held are refused", "[import][errors]") {
  std::ifstream in(model_path("tiny"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Graph from_file = import_onnx(model_path("tiny"), at(2));
  const Graph from_bytes = import_onnx_bytes(bytes, "tiny.onnx", at(2));
  CHECK(from_bytes.model_name == "tiny");
  REQUIRE(from_bytes.values.size() == from_file.values.size());
  for (size_t v = 0; v < from_file.values.size(); ++v) CHECK(from_bytes.values[v].shape == from_file.values[v].shape);
  CHECK_THROWS_WITH(import_onnx_bytes("", "x.onnx", at(2)), Contains("x.onnx: empty file"));
  CHECK_THROWS_WITH(import_onnx_bytes(bytes.substr(0, bytes.size() / 2), "x.onnx", at(2)), Contains("x.onnx: "));
  // A weight whose element count overflows int64, and a batch whose bytes would: refused, never wrapped.
  CHECK_THROWS_WITH(import_onnx(data_path("huge_weight.onnx"), at(2)),
                    Contains("input 'w' [4000000000000000000,3,3,3] is too large"));
  CHECK_THROWS_WITH(import_onnx(data_path("conv_relu.onnx"), at(int64_t{1} << 40, {3, 1 << 20, 1 << 20})),
                    Contains("data input 'x'") && Contains("is too large"));
  // Within the limit per tensor, but the convolution's output is not.
  CHECK_THROWS_WITH(import_onnx(data_path("conv_relu.onnx"), at(5 << 17, {3, 1 << 10, 1 << 10})),
                    Contains("node 'conv' (Conv): output 'c'") && Contains("is too large"));
}

TEST_CASE("input shape parsing (--input-shape)", "[import][errors]") {
  CHECK(parse_input_shape("3,224,224") == Shape{3, 224, 224});
  CHECK(parse_input_shape("7") == Shape{7});
  for (const char* bad : {"", "3,,4", "3,x,4", "-3,4", "3,0,4", "3,4,", "1e3"})
    CHECK_THROWS_AS(parse_input_shape(bad), Error);
}

TEST_CASE("Legacy CNN ops, 5-D pools of a 2-D window and an If on a known condition import as monet's ops",
          "[import]") {
  // legacy_cnn.onnx: two LRNs (each one AveragePool over (N, 1, C, H W) and a Pow), GlobalMaxPool as a ReduceMax,
  // Mean of three as two Adds and a Div, Softsign, ThresholdedRelu as a Where.
  Graph g = import_onnx(data_path("legacy_cnn.onnx"), at(3));
  CHECK(g.values[g.outputs[0]].shape == Shape{3, 10});
  std::map<std::string, int> ops = op_counts(g);
  for (const char* gone : {"LRN", "GlobalMaxPool", "Mean", "Softsign", "ThresholdedRelu"}) CHECK(ops[gone] == 0);
  CHECK(ops["AveragePool"] == 2);
  CHECK(ops["Pow"] == 2);
  CHECK(ops["ReduceMax"] == 1);
  CHECK(ops["Where"] == 1);
  for (const Node& n : g.nodes)
    if (n.op == "AveragePool") {
      CHECK(g.values[n.inputs[0]].shape.size() == 4);
      CHECK(n.attrs.i("count_include_pad") == 1);
    }
  // pool3d_torch.onnx: MaxPool3d (1, 2, 2), AvgPool3d (1, 3, 3) and the LRN's AveragePool (3, 1, 1) run as 2-D
  // pools; the If of the LRN's squeeze takes its then branch.
  g = import_onnx(data_path("pool3d_torch.onnx"), at(2));
  ops = op_counts(g);
  CHECK(ops["If"] == 0);
  CHECK(ops["MaxPool"] == 1);
  CHECK(ops["AveragePool"] == 2);
  for (const Node& n : g.nodes)
    if (n.op == "MaxPool" || n.op == "AveragePool") CHECK(g.values[n.inputs[0]].shape.size() == 4);
  CHECK(g.values[g.outputs[0]].shape == Shape{2, 5});
}

TEST_CASE("A 5-D pool over three dims with SAME padding and an If on a runtime condition are refused in one line",
          "[import]") {
  onnx::ModelProto m;
  std::ifstream in(data_path("pool3d_torch.onnx"), std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  onnx::NodeProto* pool = m.mutable_graph()->mutable_node(0);  // MaxPool3d (1, 2, 2)
  REQUIRE(pool->op_type() == "MaxPool");
  for (auto& a : *pool->mutable_attribute()) {
    if (a.name() == "kernel_shape") a.set_ints(0, 2);
    if (a.name() == "pads") a.set_ints(3, 1);  // a frame of padding after the clip: still 4 frames out
  }
  std::string bytes;
  m.SerializeToString(&bytes);
  // Over three dims it runs as two 2-D pools.
  const Graph three = import_onnx_bytes(bytes, "pool.onnx", at(2));
  std::map<std::string, int> ops = op_counts(three);
  CHECK(ops["MaxPool"] == 2);
  auto* same = pool->add_attribute();
  same->set_name("auto_pad");
  same->set_type(onnx::AttributeProto::STRING);
  same->set_s("SAME_UPPER");
  const auto erase = [](onnx::NodeProto* node, const std::string& attr) {
    for (int i = 0; i < node->attribute_size(); ++i)
      if (node->attribute(i).name() == attr) node->mutable_attribute()->DeleteSubrange(i, 1);
  };
  erase(pool, "pads");
  m.SerializeToString(&bytes);
  CHECK_THROWS_WITH(import_onnx_bytes(bytes, "pool.onnx", at(2)),
                    Contains("pool.onnx: node '/max/MaxPool' (MaxPool): a window over 3 spatial dims"));
  // The If's condition read from the data input: not known at import.
  REQUIRE(m.ParseFromString(bytes));
  pool = m.mutable_graph()->mutable_node(0);
  for (auto& a : *pool->mutable_attribute())
    if (a.name() == "kernel_shape") a.set_ints(0, 1);
  erase(pool, "auto_pad");
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "If") {
      onnx::NodeProto cast;
      cast.set_op_type("Cast");
      cast.set_name("runtime_cond");
      cast.add_input("x");
      cast.add_output("cond_from_x");
      auto* to = cast.add_attribute();
      to->set_name("to");
      to->set_type(onnx::AttributeProto::INT);
      to->set_i(onnx::TensorProto::BOOL);
      n.set_input(0, "cond_from_x");
      *m.mutable_graph()->add_node() = cast;
    }
  // The Cast goes first so that the graph stays sorted.
  auto* nodes = m.mutable_graph()->mutable_node();
  for (int i = nodes->size() - 1; i > 0; --i) nodes->SwapElements(i, i - 1);
  m.SerializeToString(&bytes);
  CHECK_THROWS_WITH(import_onnx_bytes(bytes, "if.onnx", at(2)),
                    Contains("(If): the condition must be known at import"));
}

TEST_CASE("A file of a fixed batch imported at another: Reshapes that keep each example keep the batch", "[import]") {
  // static_batch_reshape.onnx fixes the batch at 1 and writes it into both Reshapes' shapes, (1, 4, 16), (1, -1).
  for (int64_t batch : {1, 3}) {
    const Graph g = import_onnx(data_path("static_batch_reshape.onnx"), at(batch));
    CHECK(g.values[g.outputs[0]].shape == Shape{batch, 5});
    for (const Node& n : g.nodes)
      if (n.op == "Reshape") CHECK(g.values[n.outputs[0]].shape[0] == batch);
  }
}

TEST_CASE("T5's relative-position buckets, computed in the graph from the sequence length, fold at import",
          "[import][fold]") {
  // t5_relative_bias.onnx: Range, Sub, Greater, Abs, Less, Cast, Div, Log, Mul, Min and Where on constants fold;
  // what runs is the attention and the Gather of one bias per bucket (its table a parameter).
  const Graph g = import_onnx(data_path("t5_relative_bias.onnx"), at(2));
  std::map<std::string, int> ops = op_counts(g);
  for (const char* gone : {"Log", "Range", "Where", "Min", "Less", "Greater", "Abs", "Cast"}) CHECK(ops[gone] == 0);
  CHECK(ops["Gather"] == 1);
  int params = 0;
  for (const Value& v : g.values) params += v.role == Role::param;
  CHECK(params == 3);
}

TEST_CASE("Conv3d runs as 2-D convolutions summed over the kernel's depth, 3-D pools as two 2-D pools", "[import]") {
  // conv3d_net.onnx: Conv3d with kernels of depth 3, 3 and 1; MaxPool3d and AvgPool3d over all three dims.
  const Graph g = import_onnx(data_path("conv3d_net.onnx"), at(2));
  CHECK(g.values[g.outputs[0]].shape == Shape{2, 5});
  std::map<std::string, int> ops = op_counts(g);
  CHECK(ops["Conv"] == 3 + 3 + 1);
  CHECK(ops["MaxPool"] == 2);
  CHECK(ops["AveragePool"] == 2);
  for (const Node& n : g.nodes)
    if (n.op == "Conv" || n.op == "MaxPool" || n.op == "AveragePool") CHECK(g.values[n.inputs[0]].shape.size() == 4);
  // The weights stay parameters of the model's 5-D shapes.
  int params5 = 0;
  for (const Value& v : g.values) params5 += v.role == Role::param && v.shape.size() == 5;
  CHECK(params5 == 3);
}
