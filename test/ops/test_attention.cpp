// The fused Attention op (lib/ops/attention) against a direct computation of the unfused nodes, both AttentionGrad
// implementations against finite differences and against each other, and the fusion pass (lib/ir/fuse_attention)
// on the exported transformers and on hand-made graphs.
#include <catch2/catch.hpp>

#include <cmath>

#include "ir/add_node.h"
#include "ir/fuse_attention.h"
#include "ir/onnx_import.h"
#include "op_harness.h"
#include "ops/op.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {

using Doubles = std::vector<double>;

Attrs scale_attrs(double scale, bool divides) {
  Attrs a;
  a.set("scale", scale);
  a.set("scale_divides", int64_t{divides ? 1 : 0});
  return a;
}

// O, P and L of the unfused nodes: S = (Q Kt) * c (or / c) + mask, P = softmax(S), O = P V, L = logsumexp(S).
struct Reference {
  Doubles o, p, l;
};
Reference reference(const Doubles& q, const Doubles& kt, const Doubles& v, const Doubles* mask, int64_t B, int64_t Tq,
                    int64_t Tk, int64_t d, int64_t dv, double c, bool divides, bool mask_per_batch) {
  Reference r{Doubles(B * Tq * dv), Doubles(B * Tq * Tk), Doubles(B * Tq)};
  for (int64_t e = 0; e < B; ++e)
    for (int64_t i = 0; i < Tq; ++i) {
      Doubles s(Tk);
      double mx = -INFINITY;
      for (int64_t j = 0; j < Tk; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < d; ++k) acc += q[(e * Tq + i) * d + k] * kt[(e * d + k) * Tk + j];
        s[j] = divides ? acc / c : acc * c;
        if (mask) s[j] += (*mask)[(mask_per_batch ? e * Tq * Tk : 0) + i * Tk + j];
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double x : s) sum += std::exp(x - mx);
      r.l[e * Tq + i] = mx + std::log(sum);
      for (int64_t j = 0; j < Tk; ++j) r.p[(e * Tq + i) * Tk + j] = std::exp(s[j] - mx) / sum;
      for (int64_t k = 0; k < dv; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < Tk; ++j) acc += r.p[(e * Tq + i) * Tk + j] * v[(e * Tk + j) * dv + k];
        r.o[(e * Tq + i) * dv + k] = acc;
      }
    }
  return r;
}

// A causal mask: 0 on and below the diagonal, -1e9 above (a finite stand-in for -inf).
Doubles causal(int64_t T) {
  Doubles m(T * T, 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) m[i * T + j] = -1e9;
  return m;
}

}  // namespace

TEST_CASE("Attention forward equals the unfused nodes", "[ops][attention]") {
  const int64_t H = 3, Tq = 4, Tk = 5, d = 2, dv = 3;
  const Doubles q = random_values({2, H, Tq, d}, 3), kt = random_values({2, H, d, Tk}, 4),
                v = random_values({2, H, Tk, dv}, 5), mask = random_values({Tq, Tk}, 6);
  for (bool divides : {false, true})
    for (bool with_mask : {false, true}) {
      OpCase c{.op = "Attention", .attrs = scale_attrs(0.7, divides), .shapes = {{2, H, Tq, d}, {2, H, d, Tk},
               {2, H, Tk, dv}}, .data = {q, kt, v}, .num_outputs = 3};
      if (with_mask) {
        c.shapes.push_back({Tq, Tk});  // broadcast over batch and heads
        c.data.push_back(mask);
      }
      const OpResult got = run_forward(c);
      const Reference want = reference(q, kt, v, with_mask ? &mask : nullptr, 2 * H, Tq, Tk, d, dv, 0.7, divides, false);
      CHECK(got.shapes[0] == Shape{2, H, Tq, dv});
      CHECK(got.shapes[1] == Shape{2, H, Tq, Tk});
      CHECK(got.shapes[2] == Shape{2, H, Tq});
      CHECK(max_abs_diff(got.values[0], want.o) < 1e-14);
      CHECK(max_abs_diff(got.values[1], want.p) < 1e-14);
      CHECK(max_abs_diff(got.values[2], want.l) < 1e-14);
    }
}

TEST_CASE("AttentionGrad: both implementations against finite differences and each other", "[ops][attention]") {
  const int64_t T = 4;
  for (int impl : {0, 1})
    for (bool divides : {false, true}) {
      // Causal mask over (T, T), scores scaled; rectangular attention (Tq != Tk, d != dv) without a mask.
      OpCase masked{.op = "Attention", .attrs = scale_attrs(divides ? 1.3 : 0.5, divides),
                    .shapes = {{2, 2, T, 3}, {2, 2, 3, T}, {2, 2, T, 2}, {1, 1, T, T}},
                    .data = {{}, {}, {}, causal(T)}, .grad = {true, true, true, false}, .num_outputs = 3,
                    .loss_outputs = {true, false, false}, .backward_impl = impl};
      CHECK(gradient_error(masked) < 1e-7);
      OpCase rect{.op = "Attention", .attrs = scale_attrs(0.8, divides), .shapes = {{3, 2, 4}, {3, 4, 5}, {3, 5, 3}},
                  .num_outputs = 3, .loss_outputs = {true, false, false}, .backward_impl = impl};
      CHECK(gradient_error(rect) < 1e-7);
      // A mask per batch entry and head (BERT's padding mask broadcast per head is (N, 1, 1, T)).
      OpCase padded{.op = "Attention", .shapes = {{2, 3, T, 2}, {2, 3, 2, T}, {2, 3, T, 2}, {2, 1, 1, T}},
                    .data = {{}, {}, {}, {0, 0, -1e9, -1e9, 0, 0, 0, -1e9}}, .grad = {true, true, true, false},
                    .num_outputs = 3, .loss_outputs = {true, false, false}, .backward_impl = impl};
      CHECK(gradient_error(padded) < 1e-7);
    }
}

namespace {

// The canonical tensor (dim i = stored dim perm[i]) of a stored row-major one: what the Transposes an export writes
// make of it.
Doubles canonical(const Doubles& stored, const Shape& shape, const std::vector<int64_t>& perm) {
  const size_t r = shape.size();
  std::vector<int64_t> stride(r, 1), cshape(r);
  for (size_t k = r; k-- > 1;) stride[k - 1] = stride[k] * shape[k];
  for (size_t i = 0; i < r; ++i) cshape[i] = shape[static_cast<size_t>(perm[i])];
  Doubles out(stored.size());
  for (size_t flat = 0; flat < out.size(); ++flat) {
    int64_t rem = static_cast<int64_t>(flat), at = 0;
    for (size_t i = r; i-- > 0;) {
      at += rem % cshape[i] * stride[static_cast<size_t>(perm[i])];
      rem /= cshape[i];
    }
    out[flat] = stored[static_cast<size_t>(at)];
  }
  return out;
}

// One layout case: stored shapes of Q, K (Kt's source), V and O, and the four perms.
struct Strided {
  Shape q, kt, v, o;
  std::vector<int64_t> q_perm, kt_perm, v_perm, o_perm;
  Attrs attrs(double scale, bool divides) const {
    Attrs a = scale_attrs(scale, divides);
    a.set("q_perm", q_perm);
    a.set("kt_perm", kt_perm);
    a.set("v_perm", v_perm);
    a.set("o_perm", o_perm);
    return a;
  }
};

// BERT's (T, B H, d) from nn.MultiheadAttention, K in it too (Kt: the rows innermost); GPT-2's (N, T, H, d), with
// O written back as (N, T, H, dv); a layout of Q with the rows innermost.
std::vector<Strided> strided_cases() {
  return {{{4, 3, 2}, {5, 3, 2}, {5, 3, 3}, {4, 3, 3}, {1, 0, 2}, {1, 2, 0}, {1, 0, 2}, {1, 0, 2}},
          {{2, 4, 3, 2}, {2, 5, 3, 2}, {2, 5, 3, 3}, {2, 4, 3, 3}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 2, 1, 3},
           {0, 2, 1, 3}},
          {{2, 3, 2, 4}, {2, 3, 2, 5}, {2, 3, 5, 3}, {2, 3, 4, 3}, {0, 1, 3, 2}, {0, 1, 2, 3}, {0, 1, 2, 3},
           {0, 1, 2, 3}}};
}

}  // namespace

TEST_CASE("Attention reads and writes strided operands as the contiguous one does through Transposes",
          "[ops][attention]") {
  for (const Strided& t : strided_cases()) {
    INFO("Q stored " << shape_str(t.q));
    const Doubles q = random_values(t.q, 3), k = random_values(t.kt, 4), v = random_values(t.v, 5);
    for (bool divides : {false, true}) {
      const OpResult got = run_forward({.op = "Attention", .attrs = t.attrs(0.7, divides),
                                        .shapes = {t.q, t.kt, t.v}, .data = {q, k, v}, .num_outputs = 3});
      CHECK(got.shapes[0] == t.o);
      // The same attention on the canonical tensors.
      Shape cq(t.q.size()), ck(t.q.size()), cv(t.q.size()), co(t.q.size());
      for (size_t i = 0; i < t.q.size(); ++i) {
        cq[i] = t.q[static_cast<size_t>(t.q_perm[i])];
        ck[i] = t.kt[static_cast<size_t>(t.kt_perm[i])];
        cv[i] = t.v[static_cast<size_t>(t.v_perm[i])];
        co[i] = t.o[static_cast<size_t>(t.o_perm[i])];
      }
      const OpResult want = run_forward({.op = "Attention", .attrs = scale_attrs(0.7, divides), .shapes = {cq, ck, cv},
                                         .data = {canonical(q, t.q, t.q_perm), canonical(k, t.kt, t.kt_perm),
                                                  canonical(v, t.v, t.v_perm)},
                                         .num_outputs = 3});
      CHECK(max_abs_diff(canonical(got.values[0], t.o, t.o_perm), want.values[0]) < 1e-14);
      CHECK(max_abs_diff(got.values[1], want.values[1]) < 1e-14);
      CHECK(max_abs_diff(got.values[2], want.values[2]) < 1e-14);
      for (int impl : {0, 1}) {
        OpCase c{.op = "Attention", .attrs = t.attrs(divides ? 1.3 : 0.6, divides), .shapes = {t.q, t.kt, t.v},
                 .num_outputs = 3, .loss_outputs = {true, false, false}, .backward_impl = impl};
        CHECK(gradient_error(c) < 1e-7);
      }
    }
  }
  // Widths and key counts of 1 (a column's transpose is a single row: BLAS's leading dimension), contiguous and
  // strided, against finite differences with both implementations.
  for (const Shape& dims : {Shape{1, 3, 2}, Shape{3, 1, 1}, Shape{4, 2, 1}}) {  // d, Tk, dv
    const int64_t d = dims[0], Tk = dims[1], dv = dims[2], Tq = 3;
    INFO("d " << d << ", Tk " << Tk << ", dv " << dv);
    for (int impl : {0, 1}) {
      OpCase plain{.op = "Attention", .attrs = scale_attrs(0.9, false), .shapes = {{2, Tq, d}, {2, d, Tk}, {2, Tk, dv}},
                   .num_outputs = 3, .loss_outputs = {true, false, false}, .backward_impl = impl};
      CHECK(gradient_error(plain) < 1e-7);
      const Strided bert{{Tq, 2, d}, {Tk, 2, d}, {Tk, 2, dv}, {Tq, 2, dv}, {1, 0, 2}, {1, 2, 0}, {1, 0, 2}, {1, 0, 2}};
      OpCase strided{.op = "Attention", .attrs = bert.attrs(0.9, false), .shapes = {bert.q, bert.kt, bert.v},
                     .num_outputs = 3, .loss_outputs = {true, false, false}, .backward_impl = impl};
      CHECK(gradient_error(strided) < 1e-7);
    }
  }
  // A layout with neither the rows nor the columns innermost, or no permutation, is refused by name.
  Strided bad = strided_cases()[0];
  bad.q_perm = {2, 0, 1};
  CHECK_THROWS_WITH(run_forward({.op = "Attention", .attrs = bad.attrs(1, false), .shapes = {{3, 2, 4}, bad.kt, bad.v},
                                 .num_outputs = 3}),
                    Contains("q_perm [2,0,1] puts neither the rows nor the columns innermost"));
  bad.q_perm = {0, 0, 2};
  CHECK_THROWS_WITH(run_forward({.op = "Attention", .attrs = bad.attrs(1, false), .shapes = {bad.q, bad.kt, bad.v},
                                 .num_outputs = 3}),
                    Contains("q_perm [0,0,2] is not a permutation of rank 3"));
}

TEST_CASE("Attention's P and L take no gradient, and a mask that needs one is refused", "[ops][attention][errors]") {
  OpCase all{.op = "Attention", .shapes = {{2, 3, 2}, {2, 2, 3}, {2, 3, 2}}, .num_outputs = 3};
  CHECK_THROWS_WITH(gradient_error(all), Contains("take no gradient"));
  OpCase mask_grad{.op = "Attention", .shapes = {{2, 3, 2}, {2, 2, 3}, {2, 3, 2}, {3, 3}}, .num_outputs = 3,
                   .loss_outputs = {true, false, false}};
  CHECK_THROWS_WITH(gradient_error(mask_grad), Contains("the mask needs a gradient"));
  CHECK_THROWS_WITH(run_forward({.op = "Attention", .shapes = {{2, 3, 2}, {2, 3, 3}, {2, 3, 2}}, .num_outputs = 3}),
                    Contains("does not multiply"));
  CHECK_THROWS_WITH(run_forward({.op = "Attention", .shapes = {{2, 3, 2}, {2, 2, 3}, {2, 3, 2}, {2, 2, 3, 3}},
                                 .num_outputs = 3}),
                    Contains("does not broadcast to the scores"));
  CHECK_THROWS_WITH(run_forward({.op = "Attention", .shapes = {{2, 3, 2}, {1, 2, 3}, {2, 3, 2}}, .num_outputs = 3}),
                    Contains("equal batch dimensions"));
}

TEST_CASE("the exported transformers import with one Attention per layer", "[import][attention]") {
  ImportOptions fused;
  fused.batch = 2;
  ImportOptions plain = fused;
  plain.fuse_attention = false;
  for (const char* model : {"gpt2_tiny.onnx", "gpt2_tiny_opset17.onnx", "bert_tiny.onnx", "tiny_transformer.onnx"}) {
    INFO(model);
    const Graph g = import_onnx(data_path(model), fused);
    const Graph u = import_onnx(data_path(model), plain);
    int attention = 0, softmax = 0, softmax_unfused = 0;
    for (const Node& n : g.nodes) {
      attention += n.op == "Attention";
      softmax += n.op == "Softmax";
    }
    for (const Node& n : u.nodes) softmax_unfused += n.op == "Softmax";
    CHECK(attention >= 1);
    CHECK(attention == softmax_unfused);
    CHECK(softmax == 0);
    CHECK(g.values[g.outputs[0]].shape == u.values[u.outputs[0]].shape);
    for (const Node& n : g.nodes)
      if (n.op == "Attention") CHECK(g.values[n.outputs[2]].name == g.values[n.outputs[1]].name + "/lse");
  }
}

namespace {

// Q, Kt, V graph inputs -> MatMul -> Mul(c) -> Add(mask of `mask_role`) -> Softmax -> MatMul (by V, or by P itself).
Graph hand_attention(Role mask_role, bool by_p = false) {
  Graph g;
  auto value = [&](const char* name, Shape s, Role r, int producer = -1) {
    Value v;
    v.name = name;
    v.shape = std::move(s);
    v.role = r;
    v.producer = producer;
    return g.add_value(v);
  };
  const int q = value("q", {2, 3, 4}, Role::input), kt = value("kt", {2, 4, 3}, Role::param),
            v = value("v", {2, 3, 4}, Role::param), mask = value("mask", {3, 3}, mask_role);
  const int c = value("c", {}, Role::constant);
  g.values[c].data = {0.5};
  if (mask_role == Role::constant) g.values[mask].data = causal(3);
  g.data_input = q;
  auto node = [&](const char* name, const char* op, std::vector<int> in, const char* out) {
    const int y = value(out, {}, Role::activation, static_cast<int>(g.nodes.size()));
    Node n;
    n.name = name;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {y};
    g.nodes.push_back(n);
    infer_node(g, static_cast<int>(g.nodes.size()) - 1);
    return y;
  };
  const int s0 = node("mm1", "MatMul", {q, kt}, "s0");
  const int s1 = node("scale", "Mul", {s0, c}, "s1");
  const int s2 = node("mask", "Add", {mask, s1}, "s2");
  const int p = node("softmax", "Softmax", {s2}, "p");
  g.outputs = {node("mm2", "MatMul", {p, by_p ? p : v}, "o")};
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("the fusion keeps a learned mask unfused and names what it fuses", "[ir][attention]") {
  Graph learned = hand_attention(Role::param);
  CHECK(fuse_attention(learned) == 0);
  CHECK(learned.nodes.size() == 5);
  Graph squared = hand_attention(Role::constant, true);  // P @ P: the probabilities are an operand too
  CHECK(fuse_attention(squared) == 0);
  CHECK(squared.nodes.size() == 5);

  Graph g = hand_attention(Role::constant);
  REQUIRE(fuse_attention(g) == 1);
  REQUIRE(g.nodes.size() == 1);
  const Node& a = g.nodes[0];
  CHECK(a.op == "Attention");
  CHECK(a.name == "mm2");
  CHECK(a.attrs.f("scale") == 0.5);
  CHECK(a.attrs.i("scale_divides") == 0);
  REQUIRE(a.inputs.size() == 4);
  CHECK(g.values[a.inputs[3]].name == "mask");
  CHECK(g.values[a.outputs[0]].name == "o");
  CHECK(g.values[a.outputs[1]].name == "p");
  CHECK(g.values[a.outputs[2]].shape == Shape{2, 3});
  for (const char* gone : {"s0", "s1", "s2"}) CHECK(g.find_value(gone) < 0);
  CHECK(g.values[g.outputs[0]].producer == 0);
}

namespace {

// nn.MultiheadAttention's heads as an export writes them, on graph inputs q, k, v stored (T, B H, d): Q = Transpose
// (1, 0, 2) then Div by 2 (or Mul by 0.5), Kt = Transpose(k, (1, 2, 0)), V = Transpose(v, (1, 0, 2)); the scores
// unscaled; O = P V transposed back to (T, B H, dv). q_layout: Q's Transpose perm (BERT's (1, 0, 2), or one that
// leaves the heads innermost).
Graph strided_attention(bool divides, std::vector<int64_t> q_layout = {1, 0, 2}) {
  Graph g;
  auto value = [&](const char* name, Shape s, Role r) {
    Value v;
    v.name = name;
    v.shape = std::move(s);
    v.role = r;
    return g.add_value(v);
  };
  Shape q_shape = {4, 6, 2};
  if (q_layout == std::vector<int64_t>{2, 0, 1}) q_shape = {4, 2, 6};  // (T, d, B H): Q (B H, T, d), heads innermost
  const int q = value("q", q_shape, Role::input), k = value("k", {4, 6, 2}, Role::param),
            v = value("v", {4, 6, 3}, Role::param), c = value("c", {}, Role::constant);
  g.values[c].data = {divides ? 2.0 : 0.5};
  g.data_input = q;
  auto node = [&](const char* op, std::vector<int> in, Attrs a = {}) {
    const int y = value(("y" + std::to_string(g.nodes.size())).c_str(), {}, Role::activation);
    g.values[y].producer = static_cast<int>(g.nodes.size());
    Node n;
    n.name = std::string(op) + std::to_string(g.nodes.size());
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {y};
    n.attrs = std::move(a);
    g.nodes.push_back(n);
    infer_node(g, static_cast<int>(g.nodes.size()) - 1);
    return y;
  };
  auto perm = [](std::vector<int64_t> p) {
    Attrs a;
    a.set("perm", std::move(p));
    return a;
  };
  const int qt = node("Transpose", {q}, perm(q_layout));
  const int qs = node(divides ? "Div" : "Mul", {qt, c});
  const int kt = node("Transpose", {k}, perm({1, 2, 0}));
  const int vt = node("Transpose", {v}, perm({1, 0, 2}));
  const int s = node("MatMul", {qs, kt});
  const int p = node("Softmax", {s});
  const int o = node("MatMul", {p, vt});
  g.outputs = {node("Transpose", {o}, perm({1, 0, 2}))};
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("the strided fusion takes the operands' Transposes and scalar scales in", "[ir][attention]") {
  for (bool divides : {true, false}) {
    INFO((divides ? "Q / 2" : "Q * 0.5"));
    Graph fused = strided_attention(divides);
    REQUIRE(fuse_attention(fused, false) == 1);
    CHECK(fused.nodes.size() == 6);  // the four Transposes and the scale stay
    Graph g = strided_attention(divides);
    REQUIRE(fuse_attention(g) == 1);
    REQUIRE(g.nodes.size() == 1);
    const Node& a = g.nodes[0];
    CHECK(a.op == "Attention");
    CHECK(a.attrs.ints("q_perm") == std::vector<int64_t>{1, 0, 2});
    CHECK(a.attrs.ints("kt_perm") == std::vector<int64_t>{1, 2, 0});
    CHECK(a.attrs.ints("v_perm") == std::vector<int64_t>{1, 0, 2});
    CHECK(a.attrs.ints("o_perm") == std::vector<int64_t>{1, 0, 2});
    CHECK(a.attrs.f("scale") == (divides ? 2.0 : 0.5));
    CHECK(a.attrs.i("scale_divides") == (divides ? 1 : 0));
    CHECK(g.values[a.inputs[0]].name == "q");
    CHECK(g.values[a.inputs[1]].name == "k");
    CHECK(g.values[a.inputs[2]].name == "v");
    CHECK(g.values[a.outputs[0]].name == "y7");  // O: the last Transpose's output, the graph's
    CHECK(g.values[a.outputs[0]].shape == Shape{4, 6, 3});
    CHECK(g.outputs[0] == a.outputs[0]);
    CHECK(std::string(attention_mode(g)) == "strided");
    CHECK(std::string(attention_mode(fused)) == "fused");
  }
  // Q's Transpose (2, 0, 1) of a (T, d, B H) tensor would leave its heads innermost: it stays a node; the scale is
  // still taken in.
  Graph g = strided_attention(true, {2, 0, 1});
  REQUIRE(fuse_attention(g) == 1);
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].op == "Transpose");
  CHECK(g.nodes[1].attrs.ints("q_perm") == std::vector<int64_t>{0, 1, 2});
  CHECK(g.nodes[1].attrs.f("scale") == 2.0);
}

namespace {

// Attention over (B, H, T, d) = (2, 3, 4, 5) with K^T written as the dynamo exporter writes it: Reshape of k to
// `merged`, Transpose (0, 2, 1), Reshape to (2, 3, 5, 4). k_shape: k's shape.
Graph reshaped_kt_attention(const Shape& k_shape, const Shape& merged) {
  Graph g;
  const int q = g.add_value({.name = "q", .shape = {2, 3, 4, 5}, .role = Role::input});
  const int k = g.add_value({.name = "k", .shape = k_shape, .role = Role::param});
  const int v = g.add_value({.name = "v", .shape = {2, 3, 4, 5}, .role = Role::param});
  g.data_input = q;
  auto attrs = [](const char* name, std::vector<int64_t> ints) {
    Attrs a;
    a.set(name, std::move(ints));
    return a;
  };
  const int k3 = add_node(g, "r1", "Reshape", {k}, "k3", attrs("shape", merged));
  const int k3t = add_node(g, "t", "Transpose", {k3}, "k3t", attrs("perm", {0, 2, 1}));
  const int kt = add_node(g, "r2", "Reshape", {k3t}, "kt", attrs("shape", {2, 3, 5, 4}));
  const int s = add_node(g, "qk", "MatMul", {q, kt}, "s");
  const int p = add_node(g, "softmax", "Softmax", {s}, "p");
  g.outputs = {add_node(g, "pv", "MatMul", {p, v}, "o")};
  g.verify();
  return g;
}

}  // namespace

TEST_CASE("the strided fusion reads K^T through Reshape, Transpose of the last two dims, Reshape back",
          "[ir][attention]") {
  Graph g = reshaped_kt_attention({2, 3, 4, 5}, {6, 4, 5});
  REQUIRE(fuse_attention(g) == 1);
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.values[g.nodes[0].inputs[1]].name == "k");
  CHECK(g.nodes[0].attrs.ints("kt_perm") == std::vector<int64_t>{0, 1, 3, 2});
  // k (2, 3, 5, 4) read as (6, 4, 5): the three nodes are no transpose of k, and stay.
  Graph h = reshaped_kt_attention({2, 3, 5, 4}, {6, 4, 5});
  REQUIRE(fuse_attention(h) == 1);
  CHECK(h.nodes.size() == 4);
  CHECK(h.values[h.nodes.back().inputs[1]].name == "kt");
  CHECK(h.nodes.back().attrs.ints("kt_perm") == std::vector<int64_t>{0, 1, 2, 3});
  // Heads merged into the rows, (B, H T, d): more than the leading dims regrouped, and the nodes stay too.
  Graph rows = reshaped_kt_attention({2, 3, 4, 5}, {2, 12, 5});
  REQUIRE(fuse_attention(rows) == 1);
  CHECK(rows.nodes.size() == 4);
  CHECK(rows.values[rows.nodes.back().inputs[1]].name == "kt");
}
