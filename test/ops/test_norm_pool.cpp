// Tests of BatchNormalization, MaxPool, AveragePool, GlobalAveragePool, ReduceMean, ReduceSum, Softmax, LogSoftmax
// and Dropout: forward on hand values, backward against finite differences, PyTorch's tie-breaking and divisor rules,
// running-statistics updates and dropout masks (kernels called directly where a seed or in-place update matters).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "op_harness.h"
#include "ops/common/plans.h"
#include "ops/common/pool.h"
#include "ops/op.h"

using namespace monet;
using namespace monet::test;

namespace {

// Runs one node's double kernel directly, with a chosen seed and recompute flag. Every input is f32 (double
// here); inputs are returned after the call so in-place updates are visible. u8 outputs come back as 0/1 doubles.
struct Direct {
  std::vector<std::vector<double>> inputs;
  std::vector<std::vector<double>> outputs;
};

Direct run_direct(const std::string& op, const Attrs& attrs, const std::vector<Shape>& shapes,
                  std::vector<std::vector<double>> data, int num_outputs, uint64_t seed = 1,
                  bool recompute = false, int impl = 0) {
  Graph g;
  Node node;
  node.name = "n0";
  node.op = op;
  node.attrs = attrs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Value v;
    v.name = "x" + std::to_string(i);
    v.shape = shapes[i];
    v.role = Role::input;
    node.inputs.push_back(g.add_value(v));
  }
  for (int o = 0; o < num_outputs; ++o) {
    Value v;
    v.name = "y" + std::to_string(o);
    v.producer = 0;
    node.outputs.push_back(g.add_value(v));
  }
  g.nodes.push_back(node);
  infer_node(g, 0);
  const Node& n = g.nodes[0];
  const OpDef& def = op_def(op);
  CpuCall call{n, {}, {}, nullptr, seed, recompute, impl};
  const ImplDef reads = impls_of(n).at(impl);  // inputs the implementation does not read are passed without data
  for (size_t i = 0; i < shapes.size(); ++i)
    call.in.push_back({reads.reads_input(static_cast<int>(i)) ? data[i].data() : nullptr,
                       &g.values[n.inputs[i]].shape, DType::f32});
  std::vector<std::vector<char>> out_mem;
  for (int v : n.outputs) out_mem.emplace_back(numel(g.values[v].shape) * element_bytes(g.values[v].dtype, 8));
  for (size_t o = 0; o < n.outputs.size(); ++o)
    call.out.push_back({out_mem[o].data(), &g.values[n.outputs[o]].shape, g.values[n.outputs[o]].dtype});
  std::vector<char> ws;
  if (def.cpu_workspace_bytes) {
    ws.resize(def.cpu_workspace_bytes(g, n, 8));
    call.workspace = ws.data();
  }
  def.cpu_f64(call);
  Direct r;
  r.inputs = std::move(data);
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    const Value& v = g.values[n.outputs[o]];
    std::vector<double> vals(numel(v.shape));
    for (size_t i = 0; i < vals.size(); ++i)
      vals[i] = v.dtype == DType::u8 ? reinterpret_cast<const uint8_t*>(out_mem[o].data())[i]
                                     : reinterpret_cast<const double*>(out_mem[o].data())[i];
    r.outputs.push_back(vals);
  }
  return r;
}

Attrs pool_attrs(std::vector<int64_t> kernel, std::vector<int64_t> strides = {1, 1},
                 std::vector<int64_t> pads = {0, 0, 0, 0}, int64_t ceil_mode = 0) {
  Attrs a;
  a.set("kernel_shape", kernel);
  a.set("strides", strides);
  a.set("pads", pads);
  a.set("ceil_mode", ceil_mode);
  return a;
}

// The shape rule of a one-node case must throw a monet::Error whose message contains `what`.
void check_rejects(const OpCase& c, const std::string& what) {
  INFO("expecting rejection: " << what);
  CHECK_THROWS_AS(run_forward(c), Error);
  CHECK_THROWS_WITH(run_forward(c), Catch::Contains(what));
}

}  // namespace

// ---------------------------------------------------------------------------------------------- BatchNormalization

TEST_CASE("BatchNormalization forward uses batch statistics", "[ops][norm]") {
  // X (N=2, C=2, S=2): channel 0 holds 1,2 | 3,4 (mean 2.5, biased var 1.25), channel 1 holds 10,10 | 10,14
  // (mean 11, biased var 3).
  OpCase c{.op = "BatchNormalization",
           .shapes = {{2, 2, 2}, {2}, {2}, {2}, {2}},
           .data = {{1, 2, 10, 10, 3, 4, 10, 14}, {2, 1}, {0.5, -1}, {0, 0}, {1, 1}},
           .num_outputs = 3};
  OpResult r = run_forward(c);
  REQUIRE(r.shapes == std::vector<Shape>{{2, 2, 2}, {2}, {2}});
  const double i0 = 1 / std::sqrt(1.25 + 1e-5), i1 = 1 / std::sqrt(3 + 1e-5);
  // The means are exact; the square roots are not, and the kernel normalises in its own order: a few ulps (1e-15
  // relative). The float kernel within 1e-6 of the output's scale (about 8 of float's ulps).
  check_relative(r.values[0], {(1 - 2.5) * i0 * 2 + 0.5, (2 - 2.5) * i0 * 2 + 0.5, -1 * i1 - 1, -1 * i1 - 1,
                               (3 - 2.5) * i0 * 2 + 0.5, (4 - 2.5) * i0 * 2 + 0.5, -1 * i1 - 1, 3 * i1 - 1}, 1e-15);
  check_exact(r.values[1], {2.5, 11});
  check_relative(r.values[2], {i0, i1}, 1e-15);
  OpResult f = run_forward(c, 4);
  check_to_scale(f.values[0], r.values[0], 1e-6);
}

TEST_CASE("BatchNormalization updates running statistics like PyTorch", "[ops][norm]") {
  const std::vector<Shape> shapes = {{2, 2, 2}, {2}, {2}, {2}, {2}};
  const std::vector<std::vector<double>> data = {{1, 2, 10, 10, 3, 4, 10, 14}, {2, 1}, {0.5, -1}, {0.5, -1}, {2, 0.5}};
  // ONNX momentum 0.9 (PyTorch's 0.1); running_var takes the unbiased variance: 1.25 * 4/3 and 3 * 4/3.
  // momentum * running + (1 - momentum) * batch, in the kernel's order: 0.9 and 0.1 are not exact, and the second
  // channel's mean cancels (-0.9 + 1.1), so 1e-14 relative (a few ulps of its terms).
  Direct d = run_direct("BatchNormalization", {}, shapes, data, 3);
  check_relative(d.inputs[3], {0.5 * 0.9 + 2.5 * 0.1, -1 * 0.9 + 11 * 0.1}, 1e-14);
  check_relative(d.inputs[4], {2 * 0.9 + 1.25 * 4 / 3 * 0.1, 0.5 * 0.9 + 4 * 0.1}, 1e-14);
  Attrs a;
  a.set("momentum", 0.25);
  d = run_direct("BatchNormalization", a, shapes, data, 3);
  check_relative(d.inputs[3], {0.5 * 0.25 + 2.5 * 0.75, -1 * 0.25 + 11 * 0.75}, 1e-14);
  check_relative(d.inputs[4], {2 * 0.25 + 1.25 * 4 / 3 * 0.75, 0.5 * 0.25 + 4 * 0.75}, 1e-14);
  // A recomputation has no side effects but the same outputs, bit for bit.
  Direct re = run_direct("BatchNormalization", a, shapes, data, 3, 1, /*recompute=*/true);
  check_exact(re.inputs[3], data[3]);
  check_exact(re.inputs[4], data[4]);
  check_exact(re.outputs[0], d.outputs[0]);
}

TEST_CASE("BatchNormalization backward matches finite differences", "[ops][norm]") {
  const std::vector<bool> no_running = {true, true, true, false, false};
  for (Shape x : {Shape{2, 3, 4, 5}, Shape{5, 3}, Shape{3, 2, 7}, Shape{1, 4, 3, 3}}) {
    INFO("X " << shape_str(x));
    const Shape ch = {x[1]};
    CHECK(gradient_error({.op = "BatchNormalization", .shapes = {x, ch, ch, ch, ch}, .grad = no_running,
                          .num_outputs = 3}) < 1e-6);
  }
  Attrs a;
  a.set("epsilon", 0.1);
  CHECK(gradient_error({.op = "BatchNormalization", .attrs = a, .shapes = {{2, 3, 2, 2}, {3}, {3}, {3}, {3}},
                        .grad = no_running, .num_outputs = 3, .seed = 7}) < 1e-6);
  // Only X, only the affine parameters.
  CHECK(gradient_error({.op = "BatchNormalization", .shapes = {{2, 3, 2, 2}, {3}, {3}, {3}, {3}},
                        .grad = {true, false, false, false, false}, .num_outputs = 3}) < 1e-6);
  CHECK(gradient_error({.op = "BatchNormalization", .shapes = {{2, 3, 2, 2}, {3}, {3}, {3}, {3}},
                        .grad = {false, true, true, false, false}, .num_outputs = 3}) < 1e-6);
}

TEST_CASE("BatchNormGrad alone matches finite differences of Y", "[ops][norm]") {
  // Differentiate <Y, W> only (saved statistics unweighted): the path every real model takes.
  const Shape xs = {2, 3, 2, 2};
  std::vector<double> x(24), w(24);  // X and the weights of the loss <Y, W>
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::sin(1.7 * static_cast<double>(i)) + 0.1 * static_cast<double>(i % 5);
    w[i] = std::cos(0.9 * static_cast<double>(i));
  }
  const std::vector<double> scale = {0.5, -1.5, 2}, bias = {0.1, 0.2, 0.3};
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& sv, const std::vector<double>& bv) {
    Direct d = run_direct("BatchNormalization", {}, {xs, {3}, {3}, {3}, {3}}, {xv, sv, bv, {0, 0, 0}, {1, 1, 1}}, 3);
    double l = 0;
    for (size_t i = 0; i < w.size(); ++i) l += w[i] * d.outputs[0][i];
    return l;
  };
  Direct f = run_direct("BatchNormalization", {}, {xs, {3}, {3}, {3}, {3}}, {x, scale, bias, {0, 0, 0}, {1, 1, 1}}, 3);
  // Both implementations: input-activated (reads X, saved_mean) and output-activated (reads Y, B).
  const int impl = GENERATE(0, 1);
  INFO("implementation " << impl);
  Direct g = run_direct("BatchNormGrad", {}, {xs, xs, {3}, {3}, {3}, xs, {3}},
                        {w, x, scale, f.outputs[1], f.outputs[2], f.outputs[0], bias}, 3, 1, false, impl);
  const double eps = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += eps, xm[i] -= eps;
    const double numeric = (loss(xp, scale, bias) - loss(xm, scale, bias)) / (2 * eps);
    CHECK(g.outputs[0][i] == Approx(numeric).epsilon(0).margin(1e-7));
  }
  for (size_t k = 0; k < 3; ++k) {
    std::vector<double> sp = scale, sm = scale, bp = bias, bm = bias;
    sp[k] += eps, sm[k] -= eps, bp[k] += eps, bm[k] -= eps;
    CHECK(g.outputs[1][k] == Approx((loss(x, sp, bias) - loss(x, sm, bias)) / (2 * eps)).epsilon(0).margin(1e-7));
    CHECK(g.outputs[2][k] == Approx((loss(x, scale, bp) - loss(x, scale, bm)) / (2 * eps)).epsilon(0).margin(1e-7));
  }
}

namespace {

Attrs activation(const std::string& kind, double lo = 0, double hi = 6) {
  Attrs a;
  a.set("activation", kind);
  if (kind == "clip") {
    a.set("activation_min", lo);
    a.set("activation_max", hi);
  }
  return a;
}

}  // namespace

TEST_CASE("BatchNormalization with an activation: Y activated, its mask where the gradient passes", "[ops][norm]") {
  const Shape xs = {3, 2, 5, 7};  // 210 elements: the mask's last word partly used
  const std::vector<double> x = random_values(xs, 5), scale = {3, -2.5}, bias = {0.5, 1};
  const std::vector<std::vector<double>> in = {x, scale, bias, {0, 0}, {1, 1}};
  const Direct plain = run_direct("BatchNormalization", {}, {xs, {2}, {2}, {2}, {2}}, in, 3);
  for (const Attrs& a : {activation("relu"), activation("clip", -1, 2)}) {
    const bool relu = a.s("activation") == "relu";
    INFO(a.s("activation"));
    const Direct d = run_direct("BatchNormalization", a, {xs, {2}, {2}, {2}, {2}}, in, 4);
    REQUIRE(d.outputs[3].size() == static_cast<size_t>(ops::relu_mask_bytes(210)));
    int passing = 0, clipped = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = plain.outputs[0][i];
      const double want = relu ? std::max(v, 0.0) : std::min(std::max(v, -1.0), 2.0);
      CHECK(d.outputs[0][i] == want);  // the same arithmetic, then the activation: bit for bit
      const bool bit = (static_cast<int>(d.outputs[3][i / 8]) >> (i % 8)) & 1;
      CHECK(bit == (relu ? v > 0 : v > -1 && v < 2));
      passing += bit;
      clipped += !bit;
    }
    CHECK(passing > 20);
    CHECK(clipped > 20);
    for (size_t b = 210 / 8 + 1; b < d.outputs[3].size(); ++b) CHECK(d.outputs[3][b] == 0);  // padding bits 0
    CHECK(d.outputs[1] == plain.outputs[1]);
    CHECK(d.outputs[2] == plain.outputs[2]);
  }
  CHECK_THROWS_WITH(run_direct("BatchNormalization", activation("clip", 2, 1), {xs, {2}, {2}, {2}, {2}}, in, 4),
                    Catch::Contains("activation clip needs activation_min < activation_max"));
  CHECK_THROWS_WITH(run_direct("BatchNormalization", activation("gelu"), {xs, {2}, {2}, {2}, {2}}, in, 4),
                    Catch::Contains("activation must be 'relu' or 'clip', got 'gelu'"));
  CHECK_THROWS_WITH(run_direct("BatchNormalization", activation("relu"), {xs, {2}, {2}, {2}, {2}}, in, 3),
                    Catch::Contains("expects 4 outputs (Y, saved_mean, saved_invstd, mask) with an activation"));
}

TEST_CASE("BatchNormalization with an activation: backward (BatchNormActGrad, both gates) matches finite differences",
          "[ops][norm][impl]") {
  const std::vector<bool> no_running = {true, true, true, false, false};
  const std::vector<bool> weighed = {true, true, true, false};  // Y and the saved statistics; not the mask
  const int impl = GENERATE(0, 1);  // the gate from Y, from the mask
  INFO("implementation " << impl);
  for (const Attrs& a : {activation("relu"), activation("clip", -0.5, 0.8)}) {
    INFO(a.s("activation"));
    for (Shape x : {Shape{2, 3, 4, 5}, Shape{3, 2, 7}}) {
      INFO("X " << shape_str(x));
      const Shape ch = {x[1]};
      CHECK(gradient_error({.op = "BatchNormalization", .attrs = a, .shapes = {x, ch, ch, ch, ch},
                            .grad = no_running, .num_outputs = 4, .loss_outputs = weighed, .seed = 3,
                            .backward_impl = impl}) < 1e-6);
    }
  }
}

TEST_CASE("output-activated BatchNormGrad refuses a zero scale (X cannot be recovered)", "[ops][norm][impl]") {
  const Shape xs = {2, 2, 3};
  const std::vector<double> x = random_values(xs, 3), scale = {1.5, 0}, bias = {0.1, 0.2};
  Direct f = run_direct("BatchNormalization", {}, {xs, {2}, {2}, {2}, {2}}, {x, scale, bias, {0, 0}, {1, 1}}, 3);
  CHECK_THROWS_WITH(run_direct("BatchNormGrad", {}, {xs, xs, {2}, {2}, {2}, xs, {2}},
                               {x, x, scale, f.outputs[1], f.outputs[2], f.outputs[0], bias}, 3, 1, false, 1),
                    Catch::Contains("scale of channel 1 is 0"));
}

TEST_CASE("BatchNormalization rejects bad shapes and attributes", "[ops][norm]") {
  OpCase ok{.op = "BatchNormalization", .shapes = {{2, 3, 2}, {3}, {3}, {3}, {3}}, .num_outputs = 3};
  OpCase c = ok;
  c.shapes[1] = {4};
  check_rejects(c, "scale");
  c = ok;
  c.num_outputs = 1;
  check_rejects(c, "3 outputs");
  c = ok;
  c.shapes = {{1, 3, 1, 1}, {3}, {3}, {3}, {3}};
  check_rejects(c, "more than 1 value per channel");
  c = ok;
  c.attrs.set("momentum", 2.0);
  check_rejects(c, "momentum");
  c = ok;
  c.shapes = {{3}, {3}, {3}, {3}, {3}};
  check_rejects(c, "rank");
}

// ---------------------------------------------------------------------------------------------- MaxPool

namespace {

// MaxPool with its two outputs (Y, argmax).
OpCase max_pool_case(const Attrs& a, const Shape& x, std::vector<double> data = {}) {
  OpCase c{.op = "MaxPool", .attrs = a, .shapes = {x}, .num_outputs = 2};
  if (!data.empty()) c.data = {std::move(data)};
  return c;
}

// MaxPoolGrad(dy, x, argmax) by both implementations: input-activated (finds the argmax in x) and
// intermediate-activated (reads the packed argmax the forward wrote). Checks they agree bitwise; returns dx.
std::vector<double> max_pool_grad_both(const Attrs& a, const Shape& x_shape, const std::vector<double>& dy,
                                       const std::vector<double>& x, int float_bytes = 8) {
  const OpResult f = run_forward(max_pool_case(a, x_shape, x), float_bytes);
  std::vector<double> dx[2];
  for (int impl : {0, 1}) {
    OpCase c{.op = "MaxPoolGrad", .attrs = a, .shapes = {f.shapes[0], x_shape, f.shapes[1]},
             .dtypes = {DType::f32, DType::f32, DType::u8}, .data = {dy, x, f.values[1]}, .impl = impl};
    dx[impl] = run_forward(c, float_bytes).values[0];
  }
  CHECK(dx[0] == dx[1]);
  return dx[0];
}

}  // namespace

TEST_CASE("MaxPool forward on hand values", "[ops][pool]") {
  // 4x4 input 0..15, kernel 2 stride 2: the bottom-right element of each window.
  std::vector<double> x(16);
  for (int i = 0; i < 16; ++i) x[i] = i;
  OpResult r = run_forward(max_pool_case(pool_attrs({2, 2}, {2, 2}), {1, 1, 4, 4}, x));
  CHECK(r.shapes[0] == Shape{1, 1, 2, 2});
  CHECK(r.values[0] == std::vector<double>{5, 7, 13, 15});
  // argmax: tap 3 (kh 1, kw 1) of every window, 4 bits each, two per byte.
  CHECK(r.shapes[1] == Shape{2});
  CHECK(r.values[1] == std::vector<double>{0x33, 0x33});
  // Padding never wins, even over negative values: -x with kernel 3, stride 2, pad 1.
  for (double& v : x) v = -v - 1;
  r = run_forward(max_pool_case(pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}), {1, 1, 4, 4}, x));
  CHECK(r.shapes[0] == Shape{1, 1, 2, 2});
  CHECK(r.values[0] == std::vector<double>{-1, -2, -5, -6});
  // Dilation 2: taps (0,0), (0,2), (2,0), (2,2) of each window.
  for (int i = 0; i < 16; ++i) x[i] = (i * 7) % 16;
  Attrs a = pool_attrs({2, 2});
  a.set("dilations", std::vector<int64_t>{2, 2});
  r = run_forward(max_pool_case(a, {1, 1, 4, 4}, x));
  CHECK(r.shapes[0] == Shape{1, 1, 2, 2});
  // x = 0 7 14 5 | 12 3 10 1 | 8 15 6 13 | 4 11 2 9
  CHECK(r.values[0] == std::vector<double>{14, 15, 12, 11});
  // Taps (row-major over the 2x2 dilated taps): 14 is tap 1 of window 0, 15 tap 2 of window 1, 12 tap 0 of
  // window 2, 11 tap 2 of window 3.
  CHECK(r.values[1] == std::vector<double>{0x21, 0x20});
  // A 5x4 window (20 taps) stores 8 bits per output, an 18x16 one (288 taps) 16.
  r = run_forward(max_pool_case(pool_attrs({5, 4}), {1, 1, 5, 5}, std::vector<double>(25, 0.0)));
  CHECK(r.shapes[1] == Shape{2});
  CHECK(r.values[1] == std::vector<double>{0, 0});
  std::vector<double> big(18 * 16, 0.0);
  big[17 * 16 + 15] = 1;
  r = run_forward(max_pool_case(pool_attrs({18, 16}), {1, 1, 18, 16}, big));
  CHECK(r.values[1] == std::vector<double>{287 & 0xff, 287 >> 8});
}

TEST_CASE("MaxPool output sizes follow PyTorch's ceil_mode rule", "[ops][pool]") {
  auto out_hw = [](Shape x, Attrs a) { return run_forward(max_pool_case(a, x)).shapes[0]; };
  CHECK(out_hw({1, 1, 5, 6}, pool_attrs({2, 2}, {2, 2})) == Shape{1, 1, 2, 3});
  CHECK(out_hw({1, 1, 5, 6}, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}, 1)) == Shape{1, 1, 3, 3});
  CHECK(out_hw({1, 1, 6, 6}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, 0)) == Shape{1, 1, 3, 3});
  CHECK(out_hw({1, 1, 6, 6}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, 1)) == Shape{1, 1, 4, 4});
  // The last ceil window would start in the right padding: dropped (5 + pad 1, kernel 2, stride 2 -> 3 not 4).
  CHECK(out_hw({1, 1, 5, 5}, pool_attrs({2, 2}, {2, 2}, {1, 1, 1, 1}, 1)) == Shape{1, 1, 3, 3});
  // ResNet's stem pool: 32x32, kernel 3, stride 2, pad 1.
  CHECK(out_hw({2, 64, 32, 32}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})) == Shape{2, 64, 16, 16});
  Attrs same = pool_attrs({3, 3}, {2, 2});
  same.set("auto_pad", std::string("SAME_UPPER"));
  CHECK(out_hw({1, 1, 5, 6}, same) == Shape{1, 1, 3, 3});
}

TEST_CASE("MaxPoolGrad sends tied gradients to the first maximum, as PyTorch", "[ops][pool]") {
  // Every case by both implementations (max_pool_grad_both checks they agree bitwise).
  // x = 0 0 3 3 | 0 0 1 3, kernel 2 stride 2: the all-zero window picks (0,0), the 3-window picks (0,2).
  const std::vector<double> x = {0, 0, 3, 3, 0, 0, 1, 3};
  CHECK(max_pool_grad_both(pool_attrs({2, 2}, {2, 2}), {1, 1, 2, 4}, {5, 7}, x) ==
        std::vector<double>{5, 0, 7, 0, 0, 0, 0, 0});
  // Overlapping windows (kernel 2, stride 1) over all zeros: each window routes to its top-left element.
  CHECK(max_pool_grad_both(pool_attrs({2, 2}), {1, 1, 3, 3}, {1, 2, 3, 4}, std::vector<double>(9, 0.0)) ==
        std::vector<double>{1, 2, 0, 3, 4, 0, 0, 0, 0});
  // With padding the first real element wins a tie, never the padding; ReLU-like zeros with a pad of 1.
  CHECK(max_pool_grad_both(pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}), {1, 1, 4, 4}, {1, 2, 3, 4},
                           std::vector<double>(16, 0.0)) ==
        std::vector<double>{1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // NaN wins (PyTorch propagates it): the last NaN in scan order.
  CHECK(max_pool_grad_both(pool_attrs({2, 2}, {2, 2}), {1, 1, 2, 2}, {1}, {9, NAN, 2, 1}) ==
        std::vector<double>{0, 1, 0, 0});
  // Dilated, padded, ceil-mode windows and 8- and 16-bit taps, on random values in float and double.
  Attrs dil = pool_attrs({3, 3}, {1, 2}, {2, 1, 2, 1}, 1);
  dil.set("dilations", std::vector<int64_t>{2, 2});
  for (int fb : {8, 4})
    for (const auto& [a, xs] : std::vector<std::pair<Attrs, Shape>>{{dil, {2, 3, 7, 8}},
                                                                    {pool_attrs({5, 4}, {2, 1}), {1, 2, 9, 6}},
                                                                    {pool_attrs({17, 16}, {1, 2}), {1, 1, 18, 19}}}) {
      ops::Pool2d p;
      REQUIRE(ops::pool2d_geometry(a, xs, true, p).empty());
      INFO("X " << shape_str(xs) << " float bytes " << fb);
      max_pool_grad_both(a, xs, random_values(p.out_shape(), 5), random_values(xs, 6), fb);
    }
}

TEST_CASE("MaxPool backward matches finite differences", "[ops][pool]") {
  struct Cfg {
    Shape x;
    Attrs a;
  };
  Attrs dil = pool_attrs({3, 3}, {1, 2}, {2, 1, 2, 1});
  dil.set("dilations", std::vector<int64_t>{2, 2});
  Attrs same = pool_attrs({3, 2}, {2, 2});
  same.set("auto_pad", std::string("SAME_LOWER"));
  const std::vector<Cfg> cfgs = {
      {{2, 3, 6, 6}, pool_attrs({2, 2}, {2, 2})},
      {{2, 2, 7, 7}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {{1, 2, 6, 7}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, 1)},
      {{1, 2, 5, 5}, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}, 1)},
      {{1, 2, 6, 5}, pool_attrs({3, 2}, {1, 1}, {0, 1, 2, 0})},
      {{1, 2, 7, 7}, dil},
      {{1, 1, 5, 6}, same},
  };
  for (const Cfg& cfg : cfgs) {
    INFO("X " << shape_str(cfg.x));
    for (int impl : {0, 1}) {
      OpCase c = max_pool_case(cfg.a, cfg.x);
      c.backward_impl = impl;
      CHECK(gradient_error(c) < 1e-6);
    }
  }
}

TEST_CASE("MaxPool rejects unsupported attributes", "[ops][pool]") {
  OpCase ok = max_pool_case(pool_attrs({2, 2}), {1, 1, 4, 4});
  OpCase c = ok;
  c.num_outputs = 1;
  check_rejects(c, "2 outputs (Y, argmax)");
  c = ok;
  c.attrs.set("storage_order", int64_t{1});
  check_rejects(c, "storage_order");
  c = ok;
  c.attrs = Attrs{};
  check_rejects(c, "kernel_shape");
  c = ok;
  c.shapes = {{1, 1, 4}};
  check_rejects(c, "4-D");
  c = ok;
  c.attrs.set("kernel_shape", std::vector<int64_t>{2, 2, 2});
  check_rejects(c, "kernel_shape");
  c = ok;
  c.attrs.set("pads", std::vector<int64_t>{1, 1});
  check_rejects(c, "pads");
  c = ok;
  c.attrs.set("pads", std::vector<int64_t>{2, 0, 0, 0});
  check_rejects(c, "entirely in the padding");
  c = ok;
  c.attrs.set("kernel_shape", std::vector<int64_t>{5, 5});
  check_rejects(c, "exceeds");
  c = ok;
  c.attrs.set("auto_pad", std::string("SAME"));
  check_rejects(c, "auto_pad");
}

// ---------------------------------------------------------------------------------------------- AveragePool

TEST_CASE("AveragePool forward with and without padding in the count", "[ops][pool]") {
  // 3x3 input 1..9, kernel 2, stride 1, pad 1 -> 4x4.
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Attrs a = pool_attrs({2, 2}, {1, 1}, {1, 1, 1, 1});
  OpResult r = run_forward({.op = "AveragePool", .attrs = a, .shapes = {{1, 1, 3, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{1, 1, 4, 4});
  // Sums of small integers over their counts, each quotient exact in double (as every pooling and mean below).
  check_exact(r.values[0], {1, 1.5, 2.5, 3, 2.5, 3, 4, 4.5, 5.5, 6, 7, 7.5, 7, 7.5, 8.5, 9});
  a.set("count_include_pad", int64_t{1});
  r = run_forward({.op = "AveragePool", .attrs = a, .shapes = {{1, 1, 3, 3}}, .data = {x}});
  check_exact(r.values[0], {0.25, 0.75, 1.25, 0.75, 1.25, 3, 4, 2.25, 2.75, 6, 7, 3.75, 1.75, 3.75, 4.25, 2.25});
}

TEST_CASE("AveragePool ceil_mode windows past the padded border use PyTorch's divisor", "[ops][pool]") {
  // One row 1..6, kernel 3, stride 2, pad 1, ceil_mode: windows start at -1, 1, 3, 5; the last covers 6, the
  // right pad and one column beyond it, which no divisor counts.
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};
  Attrs a = pool_attrs({1, 3}, {1, 2}, {0, 1, 0, 1}, 1);
  OpResult r = run_forward({.op = "AveragePool", .attrs = a, .shapes = {{1, 1, 1, 6}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{1, 1, 1, 4});
  check_exact(r.values[0], {1.5, 3, 5, 6});
  a.set("count_include_pad", int64_t{1});
  r = run_forward({.op = "AveragePool", .attrs = a, .shapes = {{1, 1, 1, 6}}, .data = {x}});
  check_exact(r.values[0], {1, 3, 5, 3});
  // Without padding: 1..5, kernel 2, stride 2, ceil -> the last window holds only 5.
  a = pool_attrs({1, 2}, {1, 2}, {0, 0, 0, 0}, 1);
  a.set("count_include_pad", int64_t{1});
  r = run_forward({.op = "AveragePool", .attrs = a, .shapes = {{1, 1, 1, 5}}, .data = {{1, 2, 3, 4, 5}}});
  check_exact(r.values[0], {1.5, 3.5, 5});
}

TEST_CASE("AveragePool backward matches finite differences", "[ops][pool]") {
  for (int64_t cip : {0, 1}) {
    const std::vector<std::pair<Shape, Attrs>> cfgs = {
        {{2, 3, 6, 6}, pool_attrs({2, 2}, {2, 2})},
        {{2, 2, 7, 7}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
        {{1, 2, 6, 7}, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, 1)},
        {{1, 2, 5, 5}, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}, 1)},
        {{1, 2, 6, 5}, pool_attrs({3, 2}, {1, 2}, {0, 1, 2, 0}, 1)},
    };
    for (auto [x, a] : cfgs) {
      a.set("count_include_pad", cip);
      INFO("X " << shape_str(x) << " count_include_pad " << cip);
      CHECK(gradient_error({.op = "AveragePool", .attrs = a, .shapes = {x}}) < 1e-6);
    }
  }
}

TEST_CASE("AveragePool rejects unsupported attributes", "[ops][pool]") {
  OpCase ok{.op = "AveragePool", .attrs = pool_attrs({2, 2}), .shapes = {{1, 1, 4, 4}}};
  OpCase c = ok;
  c.attrs.set("dilations", std::vector<int64_t>{2, 2});
  check_rejects(c, "dilations");
  c = ok;
  c.attrs.set("count_include_pad", int64_t{2});
  check_rejects(c, "count_include_pad");
  c = ok;
  c.attrs.set("strides", std::vector<int64_t>{0, 1});
  check_rejects(c, "strides");
}

// ---------------------------------------------------------------------------------------------- GlobalAveragePool

TEST_CASE("GlobalAveragePool averages each channel", "[ops][pool]") {
  OpResult r =
      run_forward({.op = "GlobalAveragePool", .shapes = {{1, 2, 2, 2}}, .data = {{1, 2, 3, 4, 10, 20, 30, 41}}});
  CHECK(r.shapes[0] == Shape{1, 2, 1, 1});
  check_exact(r.values[0], {2.5, 25.25});
  CHECK(gradient_error({.op = "GlobalAveragePool", .shapes = {{2, 3, 4, 5}}}) < 1e-6);
  CHECK(gradient_error({.op = "GlobalAveragePool", .shapes = {{2, 3, 7}}}) < 1e-6);
  check_rejects({.op = "GlobalAveragePool", .shapes = {{2, 3}}}, "rank");
}

// ---------------------------------------------------------------------------------------------- ReduceMean

TEST_CASE("ReduceMean forward on hand values", "[ops][norm][reduce_mean]") {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};  // (2, 3)
  Attrs a;
  a.set("axes", std::vector<int64_t>{1});
  OpResult r = run_forward({.op = "ReduceMean", .attrs = a, .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{2, 1});
  check_exact(r.values[0], {2, 5});
  a.set("keepdims", int64_t{0});
  a.set("axes", std::vector<int64_t>{-2});
  r = run_forward({.op = "ReduceMean", .attrs = a, .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{3});
  check_exact(r.values[0], {2.5, 3.5, 4.5});
  r = run_forward({.op = "ReduceMean", .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{1, 1});
  check_exact(r.values[0], {3.5});
  a.set("axes", std::vector<int64_t>{1, 0});
  r = run_forward({.op = "ReduceMean", .attrs = a, .shapes = {{2, 3}}, .data = {x}});
  CHECK(r.shapes[0] == Shape{});
  check_exact(r.values[0], {3.5});
}

TEST_CASE("ReduceMean backward matches finite differences", "[ops][norm][reduce_mean]") {
  for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, {0, 2}, {-1}, {}, {2, 3}, {0, 1, 2, 3}})
    for (int64_t keep : {0, 1}) {
      Attrs a;
      if (!axes.empty()) a.set("axes", axes);
      a.set("keepdims", keep);
      INFO("axes " << shape_str(axes) << " keepdims " << keep);
      CHECK(gradient_error({.op = "ReduceMean", .attrs = a, .shapes = {{2, 3, 4, 2}}}) < 1e-6);
    }
}

TEST_CASE("ReduceMean rejects bad axes", "[ops][norm][reduce_mean]") {
  Attrs a;
  a.set("axes", std::vector<int64_t>{2});
  check_rejects({.op = "ReduceMean", .attrs = a, .shapes = {{2, 3}}}, "out of range");
  a.set("axes", std::vector<int64_t>{1, -1});
  check_rejects({.op = "ReduceMean", .attrs = a, .shapes = {{2, 3}}}, "twice");
}

TEST_CASE("ReduceSum forward, backward, and the identity form refused", "[ops][norm][reduce_mean]") {
  Attrs a;
  a.set("axes", std::vector<int64_t>{1});
  a.set("keepdims", int64_t{0});
  check_exact(run_forward({.op = "ReduceSum", .attrs = a, .shapes = {{2, 3}}, .data = {{1, 2, 4, -1, 0.5, 8}}})
                  .values[0],
              {7, 7.5});
  for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, {0, 2}, {}})
    for (int64_t keep : {0, 1}) {
      Attrs b;
      if (!axes.empty()) b.set("axes", axes);
      b.set("keepdims", keep);
      INFO("axes " << shape_str(axes) << " keepdims " << keep);
      CHECK(gradient_error({.op = "ReduceSum", .attrs = b, .shapes = {{2, 3, 4}}}) < 1e-6);
    }
  Attrs noop;
  noop.set("noop_with_empty_axes", int64_t{1});
  check_rejects({.op = "ReduceSum", .attrs = noop, .shapes = {{2, 3}}}, "noop_with_empty_axes");
}

// ---------------------------------------------------------------------------------------------- Softmax

TEST_CASE("Softmax forward on hand values", "[ops][norm][softmax]") {
  OpResult r = run_forward({.op = "Softmax", .shapes = {{2, 3}}, .data = {{0, std::log(2.0), std::log(5.0), 7, 7, 7}}});
  // exp and log: a few ulps (1e-15 relative).
  check_relative(r.values[0], {0.125, 0.25, 0.625, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-15);
  Attrs a;
  a.set("axis", int64_t{0});
  r = run_forward({.op = "Softmax", .attrs = a, .shapes = {{2, 2}}, .data = {{0, 1000, std::log(3.0), 1000}}});
  check_relative(r.values[0], {0.25, 0.5, 0.75, 0.5}, 1e-15);
}

TEST_CASE("Softmax backward matches finite differences", "[ops][norm][softmax]") {
  for (int64_t axis : {-1, 1, 0, 2, -3}) {
    Attrs a;
    a.set("axis", axis);
    INFO("axis " << axis);
    CHECK(gradient_error({.op = "Softmax", .attrs = a, .shapes = {{2, 3, 4}}}) < 1e-6);
  }
  CHECK(gradient_error({.op = "Softmax", .shapes = {{4, 10}}}) < 1e-6);
  Attrs bad;
  bad.set("axis", int64_t{3});
  check_rejects({.op = "Softmax", .attrs = bad, .shapes = {{2, 3, 4}}}, "out of range");
}

TEST_CASE("LogSoftmax forward on hand values and backward against finite differences", "[ops][norm][softmax]") {
  OpResult r =
      run_forward({.op = "LogSoftmax", .shapes = {{2, 3}}, .data = {{0, std::log(2.0), std::log(5.0), 7, 7, 7}}});
  check_relative(r.values[0], {std::log(0.125), std::log(0.25), std::log(0.625), -std::log(3.0), -std::log(3.0),
                               -std::log(3.0)},
                 1e-15);
  // No overflow: the row's max is taken out first.
  r = run_forward({.op = "LogSoftmax", .shapes = {{1, 2}}, .data = {{1000, 1000}}});
  check_relative(r.values[0], {-std::log(2.0), -std::log(2.0)}, 1e-15);
  for (int64_t axis : {-1, 1, 0}) {
    Attrs a;
    a.set("axis", axis);
    INFO("axis " << axis);
    CHECK(gradient_error({.op = "LogSoftmax", .attrs = a, .shapes = {{2, 3, 4}}}) < 1e-6);
  }
}

// ---------------------------------------------------------------------------------------------- Dropout

namespace {
Attrs dropout_attrs(double ratio, int64_t training_mode) {
  Attrs a;
  a.set("ratio", std::vector<double>{ratio});
  a.set("training_mode", std::vector<int64_t>{training_mode});
  return a;
}
}  // namespace

TEST_CASE("Dropout keeps about 1 - ratio of the elements and scales them", "[ops][dropout]") {
  const int64_t n = 100000;
  std::vector<double> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 1 + static_cast<double>(i % 17);
  Direct d = run_direct("Dropout", dropout_attrs(0.3, 1), {{n}}, {x}, 2, /*seed=*/42);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double m = d.outputs[1][i];
    REQUIRE((m == 0 || m == 1));
    kept += m == 1;
    REQUIRE(d.outputs[0][i] == Approx(m * x[i] / 0.7));
  }
  CHECK(std::abs(static_cast<double>(kept) / n - 0.7) < 0.01);  // ~7 standard deviations
  // The float kernel draws the same mask.
  OpCase c{.op = "Dropout", .attrs = dropout_attrs(0.5, 1), .shapes = {{1000}}, .num_outputs = 2};
  CHECK(run_forward(c, 4).values[1] == run_forward(c, 8).values[1]);
}

TEST_CASE("Dropout masks are a function of the seed", "[ops][dropout]") {
  const int64_t n = 10000;
  std::vector<double> x(n, 1.0);
  Direct a = run_direct("Dropout", dropout_attrs(0.5, 1), {{n}}, {x}, 2, 7);
  Direct b = run_direct("Dropout", dropout_attrs(0.5, 1), {{n}}, {x}, 2, 7, /*recompute=*/true);
  Direct c = run_direct("Dropout", dropout_attrs(0.5, 1), {{n}}, {x}, 2, 8);
  CHECK(a.outputs[1] == b.outputs[1]);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += a.outputs[1][i] != c.outputs[1][i];
  CHECK(differ > n / 3);  // independent masks differ in about half the places
}

TEST_CASE("Dropout backward matches finite differences", "[ops][dropout]") {
  for (double ratio : {0.0, 0.25, 0.6}) {
    INFO("ratio " << ratio);
    CHECK(gradient_error({.op = "Dropout", .attrs = dropout_attrs(ratio, 1), .shapes = {{3, 4, 5}},
                          .num_outputs = 2}) < 1e-6);
  }
  CHECK(gradient_error({.op = "Dropout", .attrs = dropout_attrs(0.5, 0), .shapes = {{3, 4}}, .num_outputs = 2}) < 1e-6);
}

TEST_CASE("Dropout with ratio 0 or in inference mode is the identity", "[ops][dropout]") {
  const std::vector<double> x = {1, -2, 3, -4, 5, 6};
  for (Attrs a : {dropout_attrs(0.0, 1), dropout_attrs(0.5, 0), Attrs{}}) {
    OpResult r = run_forward({.op = "Dropout", .attrs = a, .shapes = {{2, 3}}, .data = {x}, .num_outputs = 2});
    CHECK(r.values[0] == x);
    CHECK(r.values[1] == std::vector<double>(6, 1.0));
  }
}

TEST_CASE("Dropout rejects bad ratios and outputs", "[ops][dropout]") {
  check_rejects({.op = "Dropout", .attrs = dropout_attrs(1.0, 1), .shapes = {{4}}, .num_outputs = 2}, "ratio");
  check_rejects({.op = "Dropout", .attrs = dropout_attrs(-0.1, 1), .shapes = {{4}}, .num_outputs = 2}, "ratio");
  check_rejects({.op = "Dropout", .attrs = dropout_attrs(0.5, 2), .shapes = {{4}}, .num_outputs = 2}, "training_mode");
  check_rejects({.op = "Dropout", .attrs = dropout_attrs(0.5, 1), .shapes = {{4}}}, "2 outputs");
}

// ---------------------------------------------------------------------------------------------- float kernels

TEST_CASE("Float kernels agree with double ones", "[ops][norm][pool][dropout]") {
  auto agree = [](const OpCase& c) {
    INFO("op " << c.op);
    OpResult d = run_forward(c, 8), f = run_forward(c, 4);
    // Within 1e-6 of each output's scale: about 8 of float's ulps.
    for (size_t o = 0; o < d.values.size(); ++o) check_to_scale(f.values[o], d.values[o], 1e-6);
  };
  Attrs pool = pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, 1);
  Attrs pool_grad = pool;
  pool_grad.set("input_shape", std::vector<int64_t>{2, 3, 6, 7});
  Attrs axes;
  axes.set("axes", std::vector<int64_t>{0, 2});
  Attrs axes_grad = axes;
  axes_grad.set("input_shape", std::vector<int64_t>{2, 3, 4});
  Attrs gap_grad;
  gap_grad.set("input_shape", std::vector<int64_t>{2, 3, 4, 5});
  Attrs axis;
  axis.set("axis", int64_t{1});
  Attrs ratio;
  ratio.set("ratio", 0.25);
  Attrs stat;
  stat.set("stat", std::string("invstd"));
  std::vector<double> mask(60);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = static_cast<double>(i % 3 != 0);
  agree({.op = "BatchNormalization", .shapes = {{2, 3, 4, 5}, {3}, {3}, {3}, {3}}, .num_outputs = 3});
  agree({.op = "BatchNormGrad", .shapes = {{2, 3, 4, 5}, {2, 3, 4, 5}, {3}, {3}, {3}, {2, 3, 4, 5}, {3}},
         .num_outputs = 3});
  agree({.op = "BatchNormStatGrad", .attrs = stat, .shapes = {{3}, {2, 3, 4, 5}, {3}, {3}}});
  agree(max_pool_case(pool, {2, 3, 6, 7}));
  agree({.op = "MaxPoolGrad", .attrs = pool, .shapes = {{2, 3, 4, 4}, {2, 3, 6, 7}, {48}},
         .dtypes = {DType::f32, DType::f32, DType::u8}});
  agree({.op = "AveragePool", .attrs = pool, .shapes = {{2, 3, 6, 7}}});
  agree({.op = "AveragePoolGrad", .attrs = pool_grad, .shapes = {{2, 3, 4, 4}}});
  agree({.op = "GlobalAveragePool", .shapes = {{2, 3, 4, 5}}});
  agree({.op = "GlobalAveragePoolGrad", .attrs = gap_grad, .shapes = {{2, 3, 1, 1}}});
  agree({.op = "ReduceMean", .attrs = axes, .shapes = {{2, 3, 4}}});
  agree({.op = "ReduceMeanGrad", .attrs = axes_grad, .shapes = {{1, 3, 1}}});
  agree({.op = "Softmax", .attrs = axis, .shapes = {{2, 3, 4}}});
  agree({.op = "SoftmaxGrad", .attrs = axis, .shapes = {{2, 3, 4}, {2, 3, 4}}});
  agree({.op = "Dropout", .attrs = dropout_attrs(0.4, 1), .shapes = {{3, 4, 5}}, .num_outputs = 2});
  agree({.op = "DropoutGrad", .attrs = ratio, .shapes = {{3, 4, 5}, {3, 4, 5}}, .dtypes = {DType::f32, DType::u8},
         .data = {{}, mask}});
}
