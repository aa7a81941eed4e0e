// Conv and ConvTranspose: forward against hand values and a naive direct loop, backward against finite
// differences over strides, pads, dilations, groups (depthwise included), 1x1 and bias/no bias; bad attributes.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "core/error.h"
#include "op_harness.h"
#include "ops/op.h"
#include "train/autodiff.h"

using namespace monet;
using namespace monet::test;

namespace {

struct ConvCfg {
  Shape x, w;
  std::vector<int64_t> strides = {1, 1}, pads = {0, 0, 0, 0}, dilations = {1, 1};
  int64_t group = 1;
  bool bias = true;
  std::vector<int64_t> output_padding = {0, 0};  // ConvTranspose only
};

Attrs attrs_of(const ConvCfg& k, bool transpose) {
  Attrs a;
  a.set("strides", k.strides);
  a.set("pads", k.pads);
  a.set("dilations", k.dilations);
  a.set("group", k.group);
  if (transpose) a.set("output_padding", k.output_padding);
  return a;
}

OpCase case_of(const ConvCfg& k, bool transpose, uint64_t seed = 1) {
  OpCase c{.op = transpose ? "ConvTranspose" : "Conv", .attrs = attrs_of(k, transpose), .shapes = {k.x, k.w},
           .seed = seed};
  if (k.bias) c.shapes.push_back({transpose ? k.w[1] * k.group : k.w[0]});
  return c;
}

// Direct-loop convolution: y[n, m, oy, ox] = b[m] + sum_{c, ky, kx} x[n, g*Cg + c, iy, ix] * w[m, c, ky, kx].
std::vector<double> naive_conv(const ConvCfg& k, const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b, Shape& y_shape) {
  const int64_t N = k.x[0], C = k.x[1], H = k.x[2], W = k.x[3], M = k.w[0], kH = k.w[2], kW = k.w[3];
  const int64_t Cg = C / k.group, Mg = M / k.group;
  const int64_t oH = (H + k.pads[0] + k.pads[2] - (kH - 1) * k.dilations[0] - 1) / k.strides[0] + 1;
  const int64_t oW = (W + k.pads[1] + k.pads[3] - (kW - 1) * k.dilations[1] - 1) / k.strides[1] + 1;
  y_shape = {N, M, oH, oW};
  std::vector<double> y(static_cast<size_t>(numel(y_shape)));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oy = 0; oy < oH; ++oy)
        for (int64_t ox = 0; ox < oW; ++ox) {
          double s = b.empty() ? 0.0 : b[m];
          const int64_t grp = m / Mg;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ky = 0; ky < kH; ++ky)
              for (int64_t kx = 0; kx < kW; ++kx) {
                const int64_t iy = oy * k.strides[0] - k.pads[0] + ky * k.dilations[0];
                const int64_t ix = ox * k.strides[1] - k.pads[1] + kx * k.dilations[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += x[((n * C + grp * Cg + c) * H + iy) * W + ix] * w[((m * Cg + c) * kH + ky) * kW + kx];
              }
          y[((n * M + m) * oH + oy) * oW + ox] = s;
        }
  return y;
}

// Direct-loop transposed convolution: every x pixel scatters x * w into the output it reaches.
std::vector<double> naive_conv_transpose(const ConvCfg& k, const std::vector<double>& x, const std::vector<double>& w,
                                         const std::vector<double>& b, Shape& y_shape) {
  const int64_t N = k.x[0], C = k.x[1], H = k.x[2], W = k.x[3], Mg = k.w[1], kH = k.w[2], kW = k.w[3];
  const int64_t Cg = C / k.group, M = Mg * k.group;
  const int64_t oH = k.strides[0] * (H - 1) + k.output_padding[0] + (kH - 1) * k.dilations[0] + 1 - k.pads[0] - k.pads[2];
  const int64_t oW = k.strides[1] * (W - 1) + k.output_padding[1] + (kW - 1) * k.dilations[1] + 1 - k.pads[1] - k.pads[3];
  y_shape = {N, M, oH, oW};
  std::vector<double> y(static_cast<size_t>(numel(y_shape)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t p = 0; p < oH * oW; ++p) y[(n * M + m) * oH * oW + p] = b.empty() ? 0.0 : b[m];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < C; ++ci)
      for (int64_t iy = 0; iy < H; ++iy)
        for (int64_t ix = 0; ix < W; ++ix) {
          const int64_t grp = ci / Cg;
          for (int64_t m = 0; m < Mg; ++m)
            for (int64_t ky = 0; ky < kH; ++ky)
              for (int64_t kx = 0; kx < kW; ++kx) {
                const int64_t oy = iy * k.strides[0] - k.pads[0] + ky * k.dilations[0];
                const int64_t ox = ix * k.strides[1] - k.pads[1] + kx * k.dilations[1];
                if (oy < 0 || oy >= oH || ox < 0 || ox >= oW) continue;
                y[((n * M + grp * Mg + m) * oH + oy) * oW + ox] +=
                    x[((n * C + ci) * H + iy) * W + ix] * w[((ci * Mg + m) * kH + ky) * kW + kx];
              }
        }
  return y;
}

// Runs the op on random inputs and compares with the naive loop.
void check_against_naive(const ConvCfg& k, bool transpose) {
  OpCase c = case_of(k, transpose);
  for (size_t i = 0; i < c.shapes.size(); ++i) c.data.push_back(random_values(c.shapes[i], 100 + i));
  Shape want_shape;
  std::vector<double> bias = k.bias ? c.data[2] : std::vector<double>{};
  std::vector<double> want = transpose ? naive_conv_transpose(k, c.data[0], c.data[1], bias, want_shape)
                                       : naive_conv(k, c.data[0], c.data[1], bias, want_shape);
  OpResult r = run_forward(c);
  REQUIRE(r.shapes[0] == want_shape);
  CHECK(max_abs_diff(r.values[0], want) < 1e-12);
}

const std::vector<ConvCfg>& conv_configs() {
  static const std::vector<ConvCfg> cfgs = {
      {.x = {2, 3, 5, 5}, .w = {4, 3, 3, 3}, .pads = {1, 1, 1, 1}},                                    // same 3x3
      {.x = {1, 2, 6, 5}, .w = {3, 2, 3, 2}, .strides = {2, 2}, .pads = {0, 1, 1, 0}},                 // stride 2
      {.x = {1, 2, 7, 7}, .w = {2, 2, 3, 3}, .pads = {2, 2, 2, 2}, .dilations = {2, 2}, .bias = false},  // dilation
      {.x = {2, 4, 5, 5}, .w = {6, 2, 3, 3}, .pads = {1, 0, 1, 0}, .group = 2},                        // groups
      {.x = {1, 3, 5, 5}, .w = {3, 1, 3, 3}, .pads = {1, 1, 1, 1}, .group = 3},                        // depthwise
      {.x = {2, 3, 4, 4}, .w = {6, 1, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .group = 3},     // depth x2
      {.x = {2, 3, 4, 4}, .w = {5, 3, 1, 1}, .bias = false},                                           // 1x1
      {.x = {1, 4, 5, 5}, .w = {2, 4, 1, 1}, .strides = {2, 2}},                                       // 1x1 s2
      {.x = {1, 2, 4, 5}, .w = {3, 2, 2, 3}, .strides = {1, 2}, .pads = {0, 2, 1, 1}, .dilations = {2, 1}},
  };
  return cfgs;
}

const std::vector<ConvCfg>& conv_transpose_configs() {
  static const std::vector<ConvCfg> cfgs = {
      {.x = {1, 2, 3, 3}, .w = {2, 3, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .output_padding = {1, 1}},
      {.x = {2, 3, 3, 4}, .w = {3, 2, 2, 2}, .strides = {2, 2}, .bias = false},                  // DCGAN-like k2 s2
      {.x = {2, 4, 3, 3}, .w = {4, 1, 3, 3}, .strides = {2, 1}, .pads = {0, 1, 1, 0}, .group = 2},  // groups
      {.x = {1, 2, 3, 3}, .w = {2, 2, 3, 3}, .pads = {1, 1, 1, 1}, .dilations = {2, 2}},            // dilation
      {.x = {1, 3, 4, 4}, .w = {3, 2, 1, 1}},                                                      // 1x1
      {.x = {1, 2, 2, 3}, .w = {2, 2, 3, 2}, .strides = {3, 2}, .pads = {2, 0, 0, 1}, .output_padding = {2, 1}},
  };
  return cfgs;
}

}  // namespace

TEST_CASE("Conv forward on hand values", "[conv]") {
  // x = 1..9 as 3x3, w = [[1, 0], [0, 1]]: each output adds a pixel and its lower-right neighbour, plus 0.5.
  OpCase c{.op = "Conv", .shapes = {{1, 1, 3, 3}, {1, 1, 2, 2}, {1}},
           .data = {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 0, 0, 1}, {0.5}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{1, 1, 2, 2});
  CHECK(r.values[0] == std::vector<double>{6.5, 8.5, 12.5, 14.5});

  // Padding 1, stride 2, a 2x2 box filter: windows {1}, {2,3}, {4,7}, {5,6,8,9}.
  Attrs a;
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  OpCase p{.op = "Conv", .attrs = a, .shapes = {{1, 1, 3, 3}, {1, 1, 2, 2}},
           .data = {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 1, 1}}};
  r = run_forward(p);
  CHECK(r.shapes[0] == Shape{1, 1, 2, 2});
  CHECK(r.values[0] == std::vector<double>{1, 5, 11, 28});
}

TEST_CASE("Conv forward matches a direct loop", "[conv]") {
  for (const ConvCfg& k : conv_configs()) check_against_naive(k, false);
}

TEST_CASE("Conv backward matches finite differences", "[conv]") {
  for (const ConvCfg& k : conv_configs()) {
    INFO("x " << shape_str(k.x) << " w " << shape_str(k.w) << " group " << k.group);
    CHECK(gradient_error(case_of(k, false)) < 1e-6);
  }
}

TEST_CASE("Conv auto_pad", "[conv]") {
  auto shape_with = [](const std::string& auto_pad, Shape x, Shape w, int64_t stride) {
    Attrs a;
    a.set("auto_pad", auto_pad);
    a.set("strides", std::vector<int64_t>{stride, stride});
    return run_forward({.op = "Conv", .attrs = a, .shapes = {x, w}}).shapes[0];
  };
  CHECK(shape_with("VALID", {1, 1, 5, 5}, {1, 1, 3, 3}, 1) == Shape{1, 1, 3, 3});
  CHECK(shape_with("SAME_UPPER", {1, 1, 5, 5}, {1, 1, 3, 3}, 1) == Shape{1, 1, 5, 5});
  CHECK(shape_with("SAME_LOWER", {1, 1, 5, 6}, {1, 1, 2, 2}, 2) == Shape{1, 1, 3, 3});

  // SAME_UPPER with an even kernel pads the end, SAME_LOWER the start: compare with explicit pads.
  for (std::string mode : {"SAME_UPPER", "SAME_LOWER"}) {
    Attrs a;
    a.set("auto_pad", mode);
    OpCase c{.op = "Conv", .attrs = a, .shapes = {{1, 2, 4, 4}, {2, 2, 2, 2}}};
    Attrs e;
    e.set("pads", mode == "SAME_UPPER" ? std::vector<int64_t>{0, 0, 1, 1} : std::vector<int64_t>{1, 1, 0, 0});
    OpCase d{.op = "Conv", .attrs = e, .shapes = c.shapes};
    CHECK(run_forward(c).values[0] == run_forward(d).values[0]);
    CHECK(gradient_error(c) < 1e-6);
  }
}

TEST_CASE("Conv in float agrees with double", "[conv]") {
  OpCase c = case_of({.x = {2, 8, 9, 9}, .w = {16, 4, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .group = 2}, false);
  std::vector<double> d = run_forward(c, 8).values[0];
  std::vector<double> f = run_forward(c, 4).values[0];
  double scale = 0;
  for (double v : d) scale = std::max(scale, std::abs(v));
  CHECK(max_abs_diff(d, f) / scale < 1e-5);
}

TEST_CASE("Conv emits only the gradients its inputs need", "[conv]") {
  // The first conv of a network: data input X needs no gradient, W and B do.
  Graph g;
  auto add = [&](const std::string& name, Shape s, Role r) {
    Value v;
    v.name = name;
    v.shape = std::move(s);
    v.role = r;
    return g.add_value(v);
  };
  int x = add("x", {1, 2, 5, 5}, Role::input), w = add("w", {3, 2, 3, 3}, Role::param), b = add("b", {3}, Role::param);
  int y = add("y", {}, Role::activation);
  g.values[y].producer = 0;
  Node n;
  n.name = "conv";
  n.op = "Conv";
  n.inputs = {x, w, b};
  n.outputs = {y};
  g.nodes.push_back(n);
  infer_node(g, 0);
  int dy = add("dy", g.values[y].shape, Role::input);
  mark_requires_grad(g);
  std::map<int, int> grads = append_backward(g, 1, {{y, dy}});
  std::vector<std::string> ops;
  for (size_t i = 1; i < g.nodes.size(); ++i) ops.push_back(g.nodes[i].op);
  CHECK(ops == std::vector<std::string>{"ConvGradWeight", "ConvGradBias"});
  CHECK(grads.count(w) == 1);
  CHECK(grads.count(b) == 1);
  CHECK(grads.count(x) == 0);
}

TEST_CASE("Conv rejects bad attributes and shapes", "[conv]") {
  auto conv = [](Shape x, Shape w, Attrs a = {}) { return run_forward({.op = "Conv", .attrs = a, .shapes = {x, w}}); };
  Attrs g2;
  g2.set("group", int64_t{2});
  REQUIRE_THROWS_WITH(conv({1, 3, 5, 5}, {4, 1, 3, 3}, g2), Catch::Contains("not divisible by group"));
  REQUIRE_THROWS_WITH(conv({1, 4, 5, 5}, {3, 2, 3, 3}, g2), Catch::Contains("not divisible by group"));
  REQUIRE_THROWS_WITH(conv({1, 4, 5, 5}, {4, 4, 3, 3}, g2), Catch::Contains("input channels per group"));
  REQUIRE_THROWS_WITH(conv({1, 1, 2, 2}, {1, 1, 3, 3}), Catch::Contains("larger than the padded input"));
  Attrs dil;
  dil.set("dilations", std::vector<int64_t>{3, 3});
  REQUIRE_THROWS_WITH(conv({1, 1, 5, 5}, {1, 1, 3, 3}, dil), Catch::Contains("larger than the padded input"));
  REQUIRE_THROWS_WITH(conv({1, 1, 5}, {1, 1, 3}), Catch::Contains("only 1-D and 2-D convolution"));
  REQUIRE_NOTHROW(conv({1, 1, 3, 3}, {1, 1, 3, 3}));  // a kernel exactly as large as the input is fine
  Attrs ap;
  ap.set("auto_pad", std::string("SAME"));
  REQUIRE_THROWS_WITH(conv({1, 1, 5, 5}, {1, 1, 3, 3}, ap), Catch::Contains("unknown auto_pad"));
  Attrs st;
  st.set("strides", std::vector<int64_t>{0, 1});
  REQUIRE_THROWS_AS(conv({1, 1, 5, 5}, {1, 1, 3, 3}, st), monet::Error);
  Attrs ks;
  ks.set("kernel_shape", std::vector<int64_t>{2, 2});
  REQUIRE_THROWS_WITH(conv({1, 1, 5, 5}, {1, 1, 3, 3}, ks), Catch::Contains("kernel_shape"));
  REQUIRE_THROWS_WITH(run_forward({.op = "Conv", .shapes = {{1, 2, 5, 5}, {3, 2, 3, 3}, {2}}}),
                      Catch::Contains("B has shape"));
  // Messages name the node and the op.
  REQUIRE_THROWS_WITH(conv({1, 3, 5, 5}, {4, 1, 3, 3}, g2), Catch::StartsWith("node 'n0' (Conv): "));
}

TEST_CASE("ConvTranspose forward on hand values", "[conv]") {
  // x = [[1, 2], [3, 4]] scattered through a 2x2 box of ones, stride 1: each output sums the inputs it overlaps.
  OpCase c{.op = "ConvTranspose", .shapes = {{1, 1, 2, 2}, {1, 1, 2, 2}}, .data = {{1, 2, 3, 4}, {1, 1, 1, 1}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{1, 1, 3, 3});
  CHECK(r.values[0] == std::vector<double>{1, 3, 2, 4, 10, 6, 3, 7, 4});

  // Stride 2 with a 2x2 kernel tiles the input: each pixel becomes a 2x2 block of x * w.
  Attrs a;
  a.set("strides", std::vector<int64_t>{2, 2});
  OpCase s{.op = "ConvTranspose", .attrs = a, .shapes = {{1, 1, 1, 2}, {1, 1, 2, 2}, {1}},
           .data = {{1, 2}, {1, 2, 3, 4}, {10}}};
  r = run_forward(s);
  CHECK(r.shapes[0] == Shape{1, 1, 2, 4});
  CHECK(r.values[0] == std::vector<double>{11, 12, 12, 14, 13, 14, 16, 18});
}

TEST_CASE("ConvTranspose forward matches a direct loop", "[conv]") {
  for (const ConvCfg& k : conv_transpose_configs()) check_against_naive(k, true);
}

TEST_CASE("ConvTranspose backward matches finite differences", "[conv]") {
  for (const ConvCfg& k : conv_transpose_configs()) {
    INFO("x " << shape_str(k.x) << " w " << shape_str(k.w) << " group " << k.group);
    CHECK(gradient_error(case_of(k, true)) < 1e-6);
  }
}

TEST_CASE("ConvTranspose output_shape and auto_pad", "[conv]") {
  // output_shape 6x6 from 3x3 at stride 2, k3: full extent 7, total padding 1 (at the start unless SAME_UPPER).
  Attrs a;
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("output_shape", std::vector<int64_t>{6, 6});
  OpCase c{.op = "ConvTranspose", .attrs = a, .shapes = {{1, 2, 3, 3}, {2, 2, 3, 3}}};
  ConvCfg k{.x = {1, 2, 3, 3}, .w = {2, 2, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 0, 0}, .bias = false};
  OpCase explicit_pads = case_of(k, true);
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{1, 2, 6, 6});
  CHECK(r.values[0] == run_forward(explicit_pads).values[0]);
  CHECK(gradient_error(c) < 1e-6);

  Attrs same;
  same.set("strides", std::vector<int64_t>{2, 2});
  same.set("auto_pad", std::string("SAME_UPPER"));
  OpCase u{.op = "ConvTranspose", .attrs = same, .shapes = {{1, 2, 3, 3}, {2, 2, 3, 3}}};
  k.pads = {0, 0, 1, 1};
  CHECK(run_forward(u).values[0] == run_forward(case_of(k, true)).values[0]);
}

TEST_CASE("ConvTranspose rejects bad attributes and shapes", "[conv]") {
  auto convt = [](Shape x, Shape w, Attrs a = {}) {
    return run_forward({.op = "ConvTranspose", .attrs = a, .shapes = {x, w}});
  };
  Attrs g2;
  g2.set("group", int64_t{2});
  REQUIRE_THROWS_WITH(convt({1, 3, 3, 3}, {3, 2, 3, 3}, g2), Catch::Contains("not divisible by group"));
  REQUIRE_THROWS_WITH(convt({1, 4, 3, 3}, {3, 2, 3, 3}), Catch::Contains("input channels"));
  Attrs crop;
  crop.set("pads", std::vector<int64_t>{2, 2, 2, 2});
  REQUIRE_THROWS_WITH(convt({1, 1, 1, 1}, {1, 1, 3, 3}, crop), Catch::Contains("crop the whole output"));
  REQUIRE_THROWS_WITH(convt({1, 1, 3}, {1, 1, 3}), Catch::Contains("only 1-D and 2-D"));
  Attrs big;
  big.set("output_shape", std::vector<int64_t>{9, 9});
  REQUIRE_THROWS_AS(convt({1, 1, 3, 3}, {1, 1, 3, 3}, big), monet::Error);
}
