// Shape and data-movement ops: Concat, Split, Slice, Flatten, Reshape, Transpose, Pad, Resize.
// Forward on hand values, backward against finite differences, bad attributes rejected.
#include <catch2/catch.hpp>

#include <climits>
#include <map>

#include "core/error.h"
#include "op_harness.h"
#include "ops/op.h"
#include "train/autodiff.h"

using namespace monet;
using namespace monet::test;

namespace {

using Ints = std::vector<int64_t>;
using Doubles = std::vector<double>;

Doubles iota(int64_t n, double from = 0) {
  Doubles v(static_cast<size_t>(n));
  for (auto& e : v) e = from++;
  return v;
}

Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attrs a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

// Runs every node of g with the double kernels; `vals` holds the values no node produces.
void run_graph(const Graph& g, std::map<int, Doubles>& vals) {
  for (const Node& node : g.nodes) {
    for (int v : node.outputs) vals[v].assign(static_cast<size_t>(numel(g.values[v].shape)), 0.0);
    CpuCall call{node, {}, {}, nullptr, 0, false};
    for (int v : node.inputs) call.in.push_back({vals.at(v).data(), &g.values[v].shape, g.values[v].dtype});
    for (int v : node.outputs) call.out.push_back({vals.at(v).data(), &g.values[v].shape, g.values[v].dtype});
    op_def(node.op).cpu_f64(call);
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------ Concat

TEST_CASE("Concat joins along an axis", "[shape]") {
  OpCase c{.op = "Concat", .attrs = attrs({{"axis", int64_t{1}}}), .shapes = {{2, 2}, {2, 1}},
           .data = {{1, 2, 3, 4}, {5, 6}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{2, 3});
  CHECK(r.values[0] == Doubles{1, 2, 5, 3, 4, 6});
  c.attrs = attrs({{"axis", int64_t{-1}}});
  CHECK(run_forward(c, 4).values[0] == Doubles{1, 2, 5, 3, 4, 6});
  OpCase ints{.op = "Concat", .attrs = attrs({{"axis", int64_t{0}}}), .shapes = {{2}, {1}},
              .dtypes = {DType::i64, DType::i64}, .data = {{7, -1}, {3}}};
  CHECK(run_forward(ints, 4).values[0] == Doubles{7, -1, 3});
  CHECK(gradient_error({.op = "Concat", .attrs = attrs({{"axis", int64_t{1}}}), .shapes = {{2, 3, 2}, {2, 1, 2}, {2, 2, 2}}}) < 1e-6);
  CHECK(gradient_error({.op = "Concat", .attrs = attrs({{"axis", int64_t{0}}}), .shapes = {{1, 3}, {2, 3}},
                        .grad = {false, true}}) < 1e-6);
  CHECK_THROWS_AS(run_forward({.op = "Concat", .attrs = attrs({{"axis", int64_t{0}}}), .shapes = {{2, 2}, {2, 3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Concat", .attrs = attrs({{"axis", int64_t{2}}}), .shapes = {{2, 2}, {2, 3}}}), Error);
}

// ------------------------------------------------------------------------------------------------ Split

TEST_CASE("Split cuts by sizes or into equal parts", "[shape]") {
  OpCase c{.op = "Split", .attrs = attrs({{"axis", int64_t{1}}, {"split", Ints{1, 2}}}), .shapes = {{2, 3}},
           .data = {{1, 2, 3, 4, 5, 6}}, .num_outputs = 2};
  OpResult r = run_forward(c);
  CHECK(r.shapes == std::vector<Shape>{{2, 1}, {2, 2}});
  CHECK(r.values[0] == Doubles{1, 4});
  CHECK(r.values[1] == Doubles{2, 3, 5, 6});
  OpCase eq{.op = "Split", .shapes = {{6}}, .data = {iota(6)}, .num_outputs = 3};
  r = run_forward(eq, 4);
  CHECK(r.values == std::vector<Doubles>{{0, 1}, {2, 3}, {4, 5}});
  eq.attrs = attrs({{"split", Ints{}}});  // an empty static input means "absent"
  CHECK(run_forward(eq).values == std::vector<Doubles>{{0, 1}, {2, 3}, {4, 5}});

  CHECK(gradient_error(c) < 1e-6);
  CHECK(gradient_error({.op = "Split", .attrs = attrs({{"axis", int64_t{-1}}}), .shapes = {{2, 3, 4}}, .num_outputs = 2}) < 1e-6);
  CHECK(gradient_error({.op = "Split", .attrs = attrs({{"axis", int64_t{1}}, {"split", Ints{2, 1}}}),
                        .shapes = {{2, 3, 2}}, .num_outputs = 2}) < 1e-6);

  CHECK_THROWS_AS(run_forward({.op = "Split", .attrs = attrs({{"split", Ints{2, 3}}}), .shapes = {{6}}, .num_outputs = 2}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Split", .attrs = attrs({{"split", Ints{2, 2, 2}}}), .shapes = {{6}}, .num_outputs = 2}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Split", .shapes = {{5}}, .num_outputs = 2}), Error);
}

TEST_CASE("Split backward fills missing output gradients with zeros", "[shape]") {
  // x (6, 2) -> Split axis 0 into 3 pieces; only pieces 0 and 2 receive a gradient.
  Graph g;
  Value xv{.name = "x", .shape = {6, 2}, .role = Role::param};
  int x = g.add_value(xv);
  Node split{.name = "split", .op = "Split", .inputs = {x}};
  for (int o = 0; o < 3; ++o) split.outputs.push_back(g.add_value({.name = "y" + std::to_string(o), .producer = 0}));
  g.nodes.push_back(split);
  infer_node(g, 0);
  mark_requires_grad(g);
  int w0 = g.add_value({.name = "w0", .shape = {2, 2}, .role = Role::input});
  int w2 = g.add_value({.name = "w2", .shape = {2, 2}, .role = Role::input});
  std::map<int, int> grads = append_backward(g, 1, {{g.nodes[0].outputs[0], w0}, {g.nodes[0].outputs[2], w2}});
  REQUIRE(grads.count(x));
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[1].op == "SplitGrad");
  std::map<int, Doubles> vals{{x, iota(12)}, {w0, {1, 2, 3, 4}}, {w2, {5, 6, 7, 8}}};
  run_graph(g, vals);
  CHECK(vals[grads[x]] == Doubles{1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8});
}

// ------------------------------------------------------------------------------------------------ Slice

TEST_CASE("Slice follows ONNX clamping, negative indices and steps", "[shape]") {
  auto slice1 = [](Ints starts, Ints ends, Ints steps) {
    return run_forward({.op = "Slice", .attrs = attrs({{"starts", starts}, {"ends", ends}, {"steps", steps}}),
                        .shapes = {{10}}, .data = {iota(10)}}).values[0];
  };
  CHECK(slice1({1}, {8}, {2}) == Doubles{1, 3, 5, 7});
  CHECK(slice1({-1}, {INT64_MIN}, {-3}) == Doubles{9, 6, 3, 0});
  CHECK(slice1({-3}, {INT64_MAX}, {1}) == Doubles{7, 8, 9});
  CHECK(slice1({20}, {-20}, {-4}) == Doubles{9, 5, 1});
  CHECK(slice1({-100}, {2}, {1}) == Doubles{0, 1});

  OpCase c{.op = "Slice",
           .attrs = attrs({{"starts", Ints{0, 3}}, {"ends", Ints{INT64_MAX, 0}}, {"axes", Ints{0, -1}}, {"steps", Ints{2, -1}}}),
           .shapes = {{3, 4}}, .data = {iota(12)}};
  OpResult r = run_forward(c, 4);
  CHECK(r.shapes[0] == Shape{2, 3});
  CHECK(r.values[0] == Doubles{3, 2, 1, 11, 10, 9});
  // axes and steps absent
  OpCase d{.op = "Slice", .attrs = attrs({{"starts", Ints{1}}, {"ends", Ints{3}}}), .shapes = {{3, 2}}, .data = {iota(6)}};
  CHECK(run_forward(d).values[0] == Doubles{2, 3, 4, 5});

  CHECK(gradient_error(c) < 1e-6);
  CHECK(gradient_error({.op = "Slice", .attrs = attrs({{"starts", Ints{1, 0}}, {"ends", Ints{-1, 5}}, {"axes", Ints{2, 1}},
                                                       {"steps", Ints{2, 2}}}),
                        .shapes = {{2, 5, 6}}}) < 1e-6);
  CHECK(gradient_error({.op = "Slice", .attrs = attrs({{"starts", Ints{-2}}, {"ends", Ints{INT64_MIN}}, {"axes", Ints{0}},
                                                       {"steps", Ints{-2}}}),
                        .shapes = {{7, 3}}}) < 1e-6);

  CHECK_THROWS_AS(slice1({1}, {8}, {0}), Error);
  CHECK_THROWS_AS(slice1({5}, {2}, {1}), Error);  // empty
  CHECK_THROWS_AS(run_forward({.op = "Slice", .attrs = attrs({{"starts", Ints{0, 0}}, {"ends", Ints{1, 1}}, {"axes", Ints{0, 0}}}),
                               .shapes = {{3, 3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Slice", .attrs = attrs({{"starts", Ints{0}}, {"ends", Ints{1}}, {"axes", Ints{2}}}),
                               .shapes = {{3, 3}}}), Error);
}

// ------------------------------------------------------------------------------------------------ Flatten, Reshape

TEST_CASE("Flatten and Reshape keep the elements", "[shape]") {
  OpCase f{.op = "Flatten", .attrs = attrs({{"axis", int64_t{2}}}), .shapes = {{2, 3, 4}}, .data = {iota(24)}};
  OpResult r = run_forward(f);
  CHECK(r.shapes[0] == Shape{6, 4});
  CHECK(r.values[0] == iota(24));
  f.attrs = attrs({{"axis", int64_t{-3}}});
  CHECK(run_forward(f, 4).shapes[0] == Shape{1, 24});
  CHECK(run_forward({.op = "Flatten", .shapes = {{2, 3, 4}}}).shapes[0] == Shape{2, 12});
  CHECK(gradient_error({.op = "Flatten", .shapes = {{2, 3, 2, 2}}}) < 1e-6);
  CHECK(gradient_error({.op = "Flatten", .attrs = attrs({{"axis", int64_t{0}}}), .shapes = {{3, 2}}}) < 1e-6);
  CHECK_THROWS_AS(run_forward({.op = "Flatten", .attrs = attrs({{"axis", int64_t{4}}}), .shapes = {{2, 3, 4}}}), Error);

  OpCase rs{.op = "Reshape", .attrs = attrs({{"shape", Ints{0, -1}}}), .shapes = {{2, 3, 4}}, .data = {iota(24)}};
  r = run_forward(rs);
  CHECK(r.shapes[0] == Shape{2, 12});
  CHECK(r.values[0] == iota(24));
  rs.attrs = attrs({{"shape", Ints{4, 0, 2}}});
  CHECK(run_forward(rs, 4).shapes[0] == Shape{4, 3, 2});
  rs.attrs = attrs({{"shape", Ints{-1}}});
  CHECK(run_forward(rs).shapes[0] == Shape{24});
  CHECK(gradient_error({.op = "Reshape", .attrs = attrs({{"shape", Ints{3, -1, 2}}}), .shapes = {{2, 3, 4}}}) < 1e-6);
  CHECK(gradient_error({.op = "ReshapeGrad", .attrs = attrs({{"shape", Ints{6}}}), .shapes = {{2, 3}}}) < 1e-6);
  OpCase ints{.op = "Reshape", .attrs = attrs({{"shape", Ints{2, 1}}}), .shapes = {{2}}, .dtypes = {DType::i64},
              .data = {{-5, 9}}};
  CHECK(run_forward(ints, 4).values[0] == Doubles{-5, 9});

  auto reshape = [](Ints shape, int64_t allowzero = 0) {
    return run_forward({.op = "Reshape", .attrs = attrs({{"shape", shape}, {"allowzero", allowzero}}), .shapes = {{2, 3, 4}}});
  };
  CHECK_THROWS_AS(reshape({5, 5}), Error);        // wrong element count
  CHECK_THROWS_AS(reshape({5, -1}), Error);       // not divisible
  CHECK_THROWS_AS(reshape({-1, -1}), Error);      // two -1
  CHECK_THROWS_AS(reshape({0, 12}, 1), Error);    // allowzero: a real zero dim
  CHECK_THROWS_AS(reshape({2, -3, 4}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Reshape", .shapes = {{2, 3}}}), Error);  // shape not constant
}

// ------------------------------------------------------------------------------------------------ Transpose

TEST_CASE("Transpose permutes axes", "[shape]") {
  OpCase c{.op = "Transpose", .shapes = {{2, 3}}, .data = {{1, 2, 3, 4, 5, 6}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{3, 2});
  CHECK(r.values[0] == Doubles{1, 4, 2, 5, 3, 6});
  OpCase p{.op = "Transpose", .attrs = attrs({{"perm", Ints{1, 2, 0}}}), .shapes = {{2, 2, 3}}, .data = {iota(12)}};
  r = run_forward(p, 4);
  CHECK(r.shapes[0] == Shape{2, 3, 2});
  // y[i][j][k] = x[k][i][j]
  CHECK(r.values[0] == Doubles{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11});
  CHECK(gradient_error(p) < 1e-6);
  CHECK(gradient_error({.op = "Transpose", .attrs = attrs({{"perm", Ints{0, 3, 1, 2}}}), .shapes = {{2, 3, 2, 4}}}) < 1e-6);
  CHECK(gradient_error({.op = "Transpose", .shapes = {{2, 3, 4}}}) < 1e-6);
  CHECK_THROWS_AS(run_forward({.op = "Transpose", .attrs = attrs({{"perm", Ints{0, 0, 1}}}), .shapes = {{2, 2, 3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Transpose", .attrs = attrs({{"perm", Ints{0, 1}}}), .shapes = {{2, 2, 3}}}), Error);
  CHECK_THROWS_AS(run_forward({.op = "Transpose", .attrs = attrs({{"perm", Ints{0, 3, 1}}}), .shapes = {{2, 2, 3}}}), Error);
}

// ------------------------------------------------------------------------------------------------ Pad

TEST_CASE("Pad constant, reflect, edge and cropping", "[shape]") {
  OpCase c{.op = "Pad", .attrs = attrs({{"pads", Ints{0, 1, 1, 1}}, {"constant_value", Doubles{9}}}),
           .shapes = {{2, 3}}, .data = {{1, 2, 3, 4, 5, 6}}};
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{3, 5});
  CHECK(r.values[0] == Doubles{9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9});
  auto pad1 = [](const char* mode, Ints pads, Doubles x) {
    return run_forward({.op = "Pad", .attrs = attrs({{"pads", pads}, {"mode", std::string(mode)}}),
                        .shapes = {{static_cast<int64_t>(x.size())}}, .data = {x}}, 4).values[0];
  };
  CHECK(pad1("reflect", {2, 1}, {1, 2, 3, 4}) == Doubles{3, 2, 1, 2, 3, 4, 3});
  CHECK(pad1("edge", {2, 1}, {1, 2, 3, 4}) == Doubles{1, 1, 1, 2, 3, 4, 4});
  CHECK(pad1("constant", {1, -2}, {1, 2, 3, 4}) == Doubles{0, 1, 2});
  CHECK(pad1("edge", {2, -1}, {1, 2, 3, 4}) == Doubles{1, 1, 1, 2, 3});
  CHECK(pad1("reflect", {-1, 2}, {1, 2, 3, 4, 5}) == Doubles{2, 3, 4, 5, 4, 3});

  CHECK(gradient_error(c) < 1e-6);
  for (const char* mode : {"constant", "reflect", "edge"}) {
    INFO(mode);
    CHECK(gradient_error({.op = "Pad", .attrs = attrs({{"pads", Ints{0, 0, 2, 1, 0, 1, 1, 2}}, {"mode", std::string(mode)}}),
                          .shapes = {{2, 2, 4, 3}}}) < 1e-6);
    CHECK(gradient_error({.op = "Pad", .attrs = attrs({{"pads", Ints{-1, 2, 1, -1}}, {"mode", std::string(mode)}}),
                          .shapes = {{4, 4}}}) < 1e-6);
  }
  CHECK_THROWS_AS(pad1("reflect", {4, 0}, {1, 2, 3, 4}), Error);   // reflect pad must be < length
  CHECK_THROWS_AS(pad1("wrap", {1, 0}, {1, 2, 3, 4}), Error);
  CHECK_THROWS_AS(pad1("constant", {1, 0, 0}, {1, 2, 3, 4}), Error);
  CHECK_THROWS_AS(pad1("constant", {-2, -2}, {1, 2, 3, 4}), Error);
}

// ------------------------------------------------------------------------------------------------ Resize

namespace {
Attrs resize_attrs(const char* mode, const char* ctm, Doubles scales, Ints sizes = {},
                   const char* nearest_mode = "round_prefer_floor") {
  return attrs({{"mode", std::string(mode)}, {"coordinate_transformation_mode", std::string(ctm)},
                {"nearest_mode", std::string(nearest_mode)}, {"roi", Doubles{}}, {"scales", scales}, {"sizes", sizes}});
}
}  // namespace

TEST_CASE("Resize nearest matches PyTorch's nn.Upsample export", "[shape]") {
  // What nn.Upsample(scale_factor=2, mode='nearest') exports (unet.onnx): asymmetric + floor, scales [1,1,2,2].
  OpCase c{.op = "Resize", .attrs = resize_attrs("nearest", "asymmetric", {1, 1, 2, 2}, {}, "floor"),
           .shapes = {{1, 2, 2, 2}}, .data = {{1, 2, 3, 4, 5, 6, 7, 8}}};
  c.attrs.set("cubic_coeff_a", -0.75);
  OpResult r = run_forward(c);
  CHECK(r.shapes[0] == Shape{1, 2, 4, 4});
  CHECK(r.values[0] == Doubles{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4,
                               5, 5, 6, 6, 5, 5, 6, 6, 7, 7, 8, 8, 7, 7, 8, 8});
  CHECK(gradient_error(c) < 1e-6);
  // Absent roi/sizes work as well as empty lists.
  OpCase absent{.op = "Resize", .attrs = attrs({{"mode", std::string("nearest")}, {"scales", Doubles{1, 1, 2, 2}},
                                                {"coordinate_transformation_mode", std::string("asymmetric")},
                                                {"nearest_mode", std::string("floor")}}),
                .shapes = {{1, 2, 2, 2}}, .data = c.data};
  CHECK(run_forward(absent, 4).values[0] == r.values[0]);
  absent.attrs.set("sizes", Doubles{});  // an empty float tensor for sizes
  absent.attrs.set("roi", Doubles{});
  CHECK(run_forward(absent).values[0] == r.values[0]);
  // Non-integer scale: PyTorch's floor(dst * (1/1.5)) -> 0,0,1,2,2,3.
  OpCase s15{.op = "Resize", .attrs = resize_attrs("nearest", "asymmetric", {1, 1, 1, 1.5}, {}, "floor"),
             .shapes = {{1, 1, 1, 4}}, .data = {{10, 20, 30, 40}}};
  CHECK(run_forward(s15).values[0] == Doubles{10, 10, 20, 30, 30, 40});
  CHECK(gradient_error({.op = "Resize", .attrs = resize_attrs("nearest", "asymmetric", {1, 1, 2.5, 1.5}, {}, "floor"),
                        .shapes = {{2, 2, 3, 4}}}) < 1e-6);
}

TEST_CASE("Resize nearest modes and coordinate transforms", "[shape]") {
  // asymmetric, scale 2 on W = [10, 20]: source x = 0, 0.5, 1, 1.5.
  auto near = [](const char* ctm, const char* nm, Doubles scales, int64_t w, Ints sizes = {}) {
    return run_forward({.op = "Resize", .attrs = resize_attrs("nearest", ctm, scales, sizes, nm), .shapes = {{1, 1, 1, w}},
                        .data = {iota(w, 1)}}).values[0];
  };
  CHECK(near("asymmetric", "round_prefer_floor", {1, 1, 1, 2}, 2) == Doubles{1, 1, 2, 2});
  CHECK(near("asymmetric", "round_prefer_ceil", {1, 1, 1, 2}, 2) == Doubles{1, 2, 2, 2});
  CHECK(near("asymmetric", "ceil", {1, 1, 1, 2}, 2) == Doubles{1, 2, 2, 2});
  // half_pixel, 2 -> 4: x = -0.25, 0.25, 0.75, 1.25 -> round 0, 0, 1, 1
  CHECK(near("half_pixel", "round_prefer_floor", {1, 1, 1, 2}, 2) == Doubles{1, 1, 2, 2});
  // half_pixel, 4 -> 2 (scale 0.5): x = 0.5, 2.5 -> prefer floor 0, 2; prefer ceil 1, 3
  CHECK(near("half_pixel", "round_prefer_floor", {1, 1, 1, 0.5}, 4) == Doubles{1, 3});
  CHECK(near("half_pixel", "round_prefer_ceil", {1, 1, 1, 0.5}, 4) == Doubles{2, 4});
  // align_corners 3 -> 5 via sizes: x = 0, 0.5, 1, 1.5, 2 -> prefer floor
  CHECK(near("align_corners", "round_prefer_floor", {}, 3, {1, 1, 1, 5}) == Doubles{1, 1, 2, 2, 3});
  CHECK(gradient_error({.op = "Resize", .attrs = resize_attrs("nearest", "half_pixel", {1, 1, 1.7, 0.6}, {}, "round_prefer_ceil"),
                        .shapes = {{1, 2, 4, 5}}}) < 1e-6);
  CHECK(gradient_error({.op = "Resize", .attrs = resize_attrs("nearest", "align_corners", {}, {2, 1, 5, 3}),
                        .shapes = {{2, 1, 3, 4}}}) < 1e-6);
}

TEST_CASE("Resize linear is PyTorch's bilinear", "[shape]") {
  // align_corners, 2x2 -> 3x3
  OpCase ac{.op = "Resize", .attrs = resize_attrs("linear", "align_corners", {}, {1, 1, 3, 3}), .shapes = {{1, 1, 2, 2}},
            .data = {{1, 2, 3, 4}}};
  OpResult r = run_forward(ac);
  CHECK(r.shapes[0] == Shape{1, 1, 3, 3});
  CHECK(r.values[0] == Doubles{1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  // pytorch_half_pixel, [0, 4] x2: F.interpolate(..., mode='bilinear', align_corners=False) gives 0, 1, 3, 4.
  OpCase hp{.op = "Resize", .attrs = resize_attrs("linear", "pytorch_half_pixel", {1, 1, 1, 2}), .shapes = {{1, 1, 1, 2}},
            .data = {{0, 4}}};
  CHECK(run_forward(hp, 4).values[0] == Doubles{0, 1, 3, 4});
  // asymmetric, [0, 4] x2: x = 0, 0.5, 1, 1.5 (clamped at the last pixel)
  hp.attrs = resize_attrs("linear", "asymmetric", {1, 1, 1, 2});
  CHECK(run_forward(hp).values[0] == Doubles{0, 2, 4, 4});

  for (const char* ctm : {"align_corners", "pytorch_half_pixel", "half_pixel", "asymmetric"}) {
    INFO(ctm);
    CHECK(gradient_error({.op = "Resize", .attrs = resize_attrs("linear", ctm, {1, 1, 1.7, 2.3}), .shapes = {{2, 2, 3, 4}}}) < 1e-6);
    CHECK(gradient_error({.op = "Resize", .attrs = resize_attrs("linear", ctm, {1, 1, 0.6, 0.75}), .shapes = {{1, 2, 5, 4}}}) < 1e-6);
    CHECK(gradient_error({.op = "Resize", .attrs = resize_attrs("linear", ctm, {}, {1, 1, 7, 1}), .shapes = {{1, 1, 3, 3}}}) < 1e-6);
  }
}

TEST_CASE("Resize rejects what it does not support", "[shape]") {
  auto fails = [](Attrs a, Shape s = {1, 1, 2, 2}) {
    CHECK_THROWS_AS(run_forward({.op = "Resize", .attrs = a, .shapes = {s}}), Error);
  };
  fails(resize_attrs("cubic", "half_pixel", {1, 1, 2, 2}));
  fails(resize_attrs("nearest", "tf_crop_and_resize", {1, 1, 2, 2}));
  fails(resize_attrs("nearest", "half_pixel", {1, 2, 2, 2}));           // C resized
  fails(resize_attrs("nearest", "half_pixel", {1, 1, 2}));              // wrong length
  fails(resize_attrs("nearest", "half_pixel", {}, {}));                  // neither scales nor sizes
  fails(resize_attrs("nearest", "half_pixel", {1, 1, 2, 2}, {1, 1, 4, 4}));  // both
  fails(resize_attrs("nearest", "half_pixel", {1, 2, 2}), {1, 2, 2});   // 3-D
  fails(resize_attrs("nearest", "half_pixel", {1, 1, 0.1, 1}));         // empty output
}
