// The CUDA kernels of the fused Attention op (lib/engine/cuda/cuda_attention.cpp, attention_kernels.cu) against the
// CPU reference (lib/ops/attention): every path of the forward (P requested: cuBLAS and the softmax row kernel;
// P not requested: the tiled online-softmax kernel; heads wider than the tiled kernels take: chunks of heads in
// workspace) and of both backward implementations (probs; recompute: the tiled dKt/dV and dQ kernels), with and
// without masks, run-to-run bitwise equality of the recompute backward, and training steps of the token models
// with either implementation (the device arena's peak equal to the prediction). Part of monet_cuda_tests (main in
// cuda_tests.cpp: without a usable GPU the executable exits 77, SKIP).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/session.h"
#include "ops/op.h"
#include "schedule/schedule.h"
#include "tensor_close.h"

using namespace monet;

namespace {

enum class MaskKind {
  none,
  causal,    // (Tq, Tk): -inf where j > i + Tk - Tq (every row keeps its first keys)
  leading,   // (Tq, Tk): -inf where j < i (later rows lose whole leading K/V tiles: a running max of -inf)
  padding,   // (N, 1, 1, Tk) over batch (N, H): -10000 past each entry's length, small values before
  per_head,  // (1, H, Tq, Tk) over batch (N, H): random values, different per head
  per_row,   // (Tq, 1): one value per query, broadcast along the keys (stride 0 along j)
  // Masks with whole 64 x 64 tiles masked, which the tiled kernels skip where every row has met a score:
  causal_lowest,   // causal with float's lowest (PyTorch's finfo.min) in place of -inf
  padding_lowest,  // (N, 1, 1, Tk): float's lowest past each entry's length, whole key tiles among it
  rows_lowest,     // causal with float's lowest, and every third row wholly masked (its softmax uniform)
};

// Layouts (the node's q_perm, kt_perm, v_perm, o_perm; lib/ops/attention): none, or where an export stores them.
struct Layouts {
  std::vector<int64_t> q, kt, v, o;
};
const Layouts kContiguous{};
const Layouts kBertHeads{{1, 0, 2}, {1, 2, 0}, {1, 0, 2}, {1, 0, 2}};           // (T, B H, d), K too
const Layouts kGpt2Heads{{0, 2, 1, 3}, {0, 2, 3, 1}, {0, 2, 1, 3}, {0, 2, 1, 3}};  // (N, T, H, d)
const Layouts kRowsInnermost{{0, 2, 1}, {}, {}, {0, 2, 1}};                        // Q and O stored (B, d, T)

struct AttentionCase {
  std::string name;
  Shape batch;
  int64_t Tq, Tk, d, dv;
  double scale;
  bool divides;
  MaskKind mask;
  Layouts layout = kContiguous;
};

// Sizes that are not multiples of the 64 x 64 tiles nor of the 32-row steps; head widths 16 .. 64, 80 and 96 (the
// tiled kernels' widths), 136 and 160 (beyond them: the chunked materialised path); rows beyond 1024 keys (the
// block-per-row kernels).
std::vector<AttentionCase> attention_cases() {
  return {
      {"GPT-2-like heads, causal -inf mask, d 64", {2, 3}, 130, 130, 64, 64, 0.125, false, MaskKind::causal},
      {"cross attention, Tq != Tk, d != dv, Div", {3}, 70, 100, 64, 40, 8.0, true, MaskKind::none},
      {"d 80, padding mask (N,1,1,Tk)", {2, 2}, 33, 129, 80, 80, 1.0 / std::sqrt(80.0), false, MaskKind::padding},
      {"leading keys masked (rows whose first tiles are all -inf)", {2}, 100, 150, 32, 96, 0.2, false,
       MaskKind::leading},
      {"per-head mask (1,H,Tq,Tk), d 64 dv 80", {2, 3}, 17, 65, 64, 80, 0.125, false, MaskKind::per_head},
      {"per-row mask (Tq,1), Div", {3}, 70, 100, 48, 16, 4.0, true, MaskKind::per_row},
      {"rows beyond 1024 keys", {2}, 5, 1100, 16, 24, 4.0, true, MaskKind::none},
      {"rows beyond 1024 keys with a padding mask", {2, 1}, 3, 1030, 16, 16, 0.25, false, MaskKind::padding},
      {"wide heads d 160 dv 136 (materialised in workspace)", {2, 2}, 20, 37, 160, 136, 0.08, false,
       MaskKind::padding},
      {"wide heads d 64 dv 160, causal", {3}, 40, 45, 64, 160, 0.125, false, MaskKind::causal},
      // 35 MB of scores per head: one head per chunk (kChunkBytes 64 MiB), three chunks.
      {"wide heads over several chunks, 8000 keys", {3}, 1100, 8000, 136, 8, 0.1, false, MaskKind::per_row},
      // Strided operands: the tiled kernels read and write them in place, cuBLAS takes runs of heads at one stride.
      {"BERT's heads strided (T, B H, d), Div", {6}, 130, 130, 64, 64, 8.0, true, MaskKind::none, kBertHeads},
      {"GPT-2's heads strided (N, T, H, d), causal", {2, 3}, 130, 130, 64, 64, 0.125, false, MaskKind::causal,
       kGpt2Heads},
      {"Q and O with the rows innermost, per-row mask", {3}, 70, 100, 40, 40, 0.3, false, MaskKind::per_row,
       kRowsInnermost},
      {"wide heads strided (N, T, H, d): chunks within runs of H heads", {2, 2}, 20, 37, 160, 136, 0.08, false,
       MaskKind::padding, kGpt2Heads},
      // Widths and key counts of 1: a column's transpose is a single row (cuBLAS's leading dimension).
      {"d 1, dv 1, strided", {4}, 9, 7, 1, 1, 0.5, false, MaskKind::none, kBertHeads},
      // Whole tiles masked (skipped by the tiled kernels where every row of the block has met a score).
      {"causal mask of float's lowest, 200 x 200", {2, 2}, 200, 200, 64, 64, 0.125, false,
       MaskKind::causal_lowest, kGpt2Heads},
      {"padding of float's lowest over whole key tiles", {3, 2}, 150, 230, 32, 48, 0.2, false,
       MaskKind::padding_lowest},
      {"wholly masked rows under a finite fill", {2}, 140, 140, 64, 64, 0.125, false, MaskKind::rows_lowest},
      {"one key, d 1", {3}, 5, 1, 1, 8, 1.0, false, MaskKind::none},
  };
}

std::vector<double> uniform(size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

Shape with(Shape batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

// A padding mask (N, 1, ..., 1, Tk) over the batch (N, ...): small values before entry n's length(n) keys (at least
// one), `fill` from there on.
template <class Length>
std::pair<Shape, std::vector<double>> padding_mask(const AttentionCase& k, double fill, Length length,
                                                   std::mt19937_64& rng) {
  const int64_t N = k.batch[0];
  Shape s = {N};
  for (size_t i = 1; i < k.batch.size(); ++i) s.push_back(1);
  s.push_back(1);
  s.push_back(k.Tk);
  std::vector<double> m = uniform(static_cast<size_t>(N * k.Tk), -0.5, 0.5, rng);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = std::max<int64_t>(1, length(n)); j < k.Tk; ++j) m[static_cast<size_t>(n * k.Tk + j)] = fill;
  return {s, m};
}

// The mask's shape and values.
std::pair<Shape, std::vector<double>> make_mask(const AttentionCase& k, std::mt19937_64& rng) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (k.mask) {
    case MaskKind::none: return {};
    case MaskKind::causal:
    case MaskKind::leading: {
      std::vector<double> m(static_cast<size_t>(k.Tq * k.Tk), 0.0);
      for (int64_t i = 0; i < k.Tq; ++i)
        for (int64_t j = 0; j < k.Tk; ++j) {
          const bool masked = k.mask == MaskKind::causal ? j > i + k.Tk - k.Tq : j < i;
          if (masked) m[static_cast<size_t>(i * k.Tk + j)] = -inf;
        }
      return {{k.Tq, k.Tk}, m};
    }
    case MaskKind::padding:  // -10000 past each entry's length (5 + 7 n keys)
      return padding_mask(k, -10000.0, [&](int64_t n) { return k.Tk - 5 - 7 * n; }, rng);
    case MaskKind::per_head: {
      Shape s = {1, k.batch.back(), k.Tq, k.Tk};
      return {s, uniform(static_cast<size_t>(numel(s)), -2.0, 2.0, rng)};
    }
    case MaskKind::per_row: return {{k.Tq, 1}, uniform(static_cast<size_t>(k.Tq), -3.0, 3.0, rng)};
    case MaskKind::causal_lowest:
    case MaskKind::rows_lowest: {
      const double lowest = std::numeric_limits<float>::lowest();
      std::vector<double> m(static_cast<size_t>(k.Tq * k.Tk), 0.0);
      for (int64_t i = 0; i < k.Tq; ++i)
        for (int64_t j = 0; j < k.Tk; ++j)
          if (j > i + k.Tk - k.Tq || (k.mask == MaskKind::rows_lowest && i % 3 == 1))
            m[static_cast<size_t>(i * k.Tk + j)] = lowest;
      return {{k.Tq, k.Tk}, m};
    }
    case MaskKind::padding_lowest:  // every key from 64 on masked for every entry
      return padding_mask(k, std::numeric_limits<float>::lowest(), [](int64_t n) { return 60 - 25 * n; }, rng);
  }
  return {};
}

// One node (node 0 of g) whose inputs are values 0 .. n-1 and outputs the values after them.
struct OneNode {
  Graph g;
  std::map<int, std::vector<double>> inputs;  // value id -> host data
};

int add_input(OneNode& b, const std::string& name, const Shape& s, std::vector<double> data) {
  Value v;
  v.name = name;
  v.shape = s;
  v.role = Role::input;
  const int id = b.g.add_value(v);
  b.inputs[id] = std::move(data);
  return id;
}

void finish(OneNode& b, Node node, int outputs) {
  node.name = "n0";
  for (int o = 0; o < outputs; ++o) {
    Value v;
    v.name = "y" + std::to_string(o);
    v.producer = 0;
    node.outputs.push_back(b.g.add_value(v));
  }
  b.g.nodes.push_back(node);
  infer_node(b.g, 0);
}

Attrs scale_attrs(const AttentionCase& k) {
  Attrs a;
  a.set("scale", k.scale);
  a.set("scale_divides", int64_t{k.divides ? 1 : 0});
  if (!k.layout.q.empty()) {
    const size_t r = k.batch.size() + 2;
    auto perm = [&](const std::vector<int64_t>& p) {
      if (!p.empty()) return p;
      std::vector<int64_t> id(r);
      for (size_t i = 0; i < r; ++i) id[i] = static_cast<int64_t>(i);
      return id;
    };
    a.set("q_perm", perm(k.layout.q));
    a.set("kt_perm", perm(k.layout.kt));
    a.set("v_perm", perm(k.layout.v));
    a.set("o_perm", perm(k.layout.o));
  }
  return a;
}

// The stored shape of a canonical one under a layout perm (canonical dim i is stored dim perm[i]).
Shape stored(const Shape& canonical, const std::vector<int64_t>& perm) {
  if (perm.empty()) return canonical;
  Shape s(canonical.size());
  for (size_t i = 0; i < perm.size(); ++i) s[static_cast<size_t>(perm[i])] = canonical[i];
  return s;
}

OneNode forward_node(const AttentionCase& k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  OneNode b;
  Node n;
  n.op = "Attention";
  n.attrs = scale_attrs(k);
  const Shape q = stored(with(k.batch, {k.Tq, k.d}), k.layout.q), kt = stored(with(k.batch, {k.d, k.Tk}), k.layout.kt),
              v = stored(with(k.batch, {k.Tk, k.dv}), k.layout.v);
  // Q spread wider than K so that rows have clear maxima (the online softmax rescales often).
  n.inputs.push_back(add_input(b, "q", q, uniform(static_cast<size_t>(numel(q)), -3.0, 3.0, rng)));
  n.inputs.push_back(add_input(b, "kt", kt, uniform(static_cast<size_t>(numel(kt)), -1.0, 1.0, rng)));
  n.inputs.push_back(add_input(b, "v", v, uniform(static_cast<size_t>(numel(v)), -1.0, 1.0, rng)));
  if (k.mask != MaskKind::none) {
    auto [s, m] = make_mask(k, rng);
    n.inputs.push_back(add_input(b, "mask", s, std::move(m)));
  }
  finish(b, n, 3);
  return b;
}

// AttentionGrad over the forward's inputs and its CPU outputs (O, P, L), dO random.
OneNode grad_node(const AttentionCase& k, const OneNode& fwd, const std::vector<std::vector<double>>& fwd_out,
                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  OneNode b;
  Node n;
  n.op = "AttentionGrad";
  n.attrs = scale_attrs(k);
  const Node& f = fwd.g.nodes[0];
  const auto in = [&](int i) -> const Value& { return fwd.g.values[static_cast<size_t>(f.inputs[i])]; };
  const auto data = [&](int i) { return fwd.inputs.at(f.inputs[static_cast<size_t>(i)]); };
  const Shape o = fwd.g.values[static_cast<size_t>(f.outputs[0])].shape;
  n.inputs.push_back(add_input(b, "dout", o, uniform(static_cast<size_t>(numel(o)), -1.0, 1.0, rng)));
  for (int i = 0; i < 3; ++i) n.inputs.push_back(add_input(b, in(i).name, in(i).shape, data(i)));
  const char* names[] = {"o", "p", "l"};
  for (int i = 0; i < 3; ++i)
    n.inputs.push_back(add_input(b, names[i], fwd.g.values[static_cast<size_t>(f.outputs[i])].shape, fwd_out[i]));
  if (f.inputs.size() == 4) n.inputs.push_back(add_input(b, "mask", in(3).shape, data(3)));
  finish(b, n, 3);
  return b;
}

// Runs node 0 on a backend with implementation `impl` (its unread inputs without data, as the executor passes
// them) and outputs `skip` without data; returns every output (empty where skipped).
std::vector<std::vector<double>> run_node(const OneNode& b, Backend& be, int impl = 0, std::vector<int> skip = {}) {
  const Graph& g = b.g;
  const Node& n = g.nodes[0];
  std::vector<int64_t> offset(g.values.size(), -1);
  int64_t total = 0;
  for (size_t v = 0; v < g.values.size(); ++v) {
    offset[v] = total;
    total += align_up(tensor_bytes(g.values[v].shape, g.values[v].dtype, 4));
  }
  const int64_t ws = be.workspace_bytes(g, n);
  char* block = static_cast<char*>(be.reserve(total + align_up(ws)));
  auto ref = [&](int v) {
    const Value& val = g.values[static_cast<size_t>(v)];
    return TensorRef{block + offset[static_cast<size_t>(v)], &val.shape, val.dtype};
  };
  const std::vector<ImplDef> impls = impls_of(n);  // by value: keep it alive
  const ImplDef& def = impls.at(static_cast<size_t>(impl));
  std::vector<TensorRef> in, out;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    TensorRef r = ref(n.inputs[i]);
    be.upload(r, b.inputs.at(n.inputs[i]));
    if (!def.reads_input(static_cast<int>(i))) r.data = nullptr;
    in.push_back(r);
  }
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    TensorRef r = ref(n.outputs[o]);
    if (std::find(skip.begin(), skip.end(), static_cast<int>(o)) != skip.end()) r.data = nullptr;
    out.push_back(r);
  }
  be.run(g, n, in, out, ws > 0 ? block + total : nullptr, 12345, false, impl);
  be.synchronize();
  std::vector<std::vector<double>> r;
  for (const TensorRef& t : out) r.push_back(t.data ? be.download(t) : std::vector<double>{});
  be.unreserve(block);
  return r;
}

// |got - want| <= 1e-6 + 1e-4 max|want| over the tensor, as the op cases of cuda_tests.cpp.
using monet::test::check_close;

constexpr int kProbs = 0, kRecompute = 1;

}  // namespace

TEST_CASE("Attention on CUDA matches the CPU with and without P", "[cuda][attention]") {
  auto cpu = make_cpu_backend(4);
  auto gpu = cuda::make_cuda_backend("fp32");
  uint64_t seed = 11;
  for (const AttentionCase& k : attention_cases()) {
    INFO("case: " << k.name);
    const OneNode f = forward_node(k, seed++);
    const auto want = run_node(f, *cpu);
    const auto with_p = run_node(f, *gpu);
    check_close(want[0], with_p[0], "O (P requested)");
    check_close(want[1], with_p[1], "P");
    check_close(want[2], with_p[2], "L (P requested)");
    const auto without_p = run_node(f, *gpu, 0, {1});
    CHECK(without_p[1].empty());
    check_close(want[0], without_p[0], "O (no P)");
    check_close(want[2], without_p[2], "L (no P)");
    CHECK(run_node(f, *gpu, 0, {1}) == without_p);  // the tiled forward: the same bits twice
  }
}

TEST_CASE("AttentionGrad on CUDA matches the CPU with either implementation", "[cuda][attention]") {
  auto cpu = make_cpu_backend(4);
  auto gpu = cuda::make_cuda_backend("fp32");
  uint64_t seed = 101;
  for (const AttentionCase& k : attention_cases()) {
    INFO("case: " << k.name);
    const OneNode f = forward_node(k, seed++);
    const OneNode b = grad_node(k, f, run_node(f, *cpu), seed++);
    // One workspace per node, whichever implementation runs.
    CHECK(gpu->workspace_bytes(b.g, b.g.nodes[0]) > 0);
    for (int impl : {kProbs, kRecompute}) {
      INFO("implementation " << (impl == kProbs ? "probs" : "recompute"));
      const auto want = run_node(b, *cpu, impl);
      const auto got = run_node(b, *gpu, impl);
      check_close(want[0], got[0], "dQ");
      check_close(want[1], got[1], "dKt");
      check_close(want[2], got[2], "dV");
    }
  }
}

TEST_CASE("AttentionGrad's recompute on CUDA gives the same bits on two runs", "[cuda][attention][determinism]") {
  // No atomics: the dKt/dV kernel sums over the query tiles and the dQ kernel over the key tiles in tile order.
  auto cpu = make_cpu_backend(4);
  auto gpu = cuda::make_cuda_backend("fp32");
  uint64_t seed = 301;
  for (const AttentionCase& k : attention_cases()) {
    INFO("case: " << k.name);
    const OneNode f = forward_node(k, seed++);
    const OneNode b = grad_node(k, f, run_node(f, *cpu), seed++);
    const auto first = run_node(b, *gpu, kRecompute);
    CHECK(run_node(b, *gpu, kRecompute) == first);
    CHECK(run_node(b, *gpu, kProbs) == run_node(b, *gpu, kProbs));
  }
}

namespace {

struct StepOutcome {
  double loss = 0;
  std::vector<std::vector<double>> gradients;  // the momentum after one step from zero: the gradients
  int64_t peak = 0, predicted = 0;
  int recompute_nodes = 0;
};

// One training step of a token model with every AttentionGrad on implementation `impl` (store-all otherwise on
// the defaults).
StepOutcome attention_step(const std::string& model, const std::string& device, int impl) {
  SessionOptions o;
  o.model_path = std::string(MONET_SOURCE_DIR) + "/test/data/" + model + ".onnx";
  o.import.batch = 2;
  o.import.fuse_attention = true;
  o.device = device;
  o.math = "fp32";
  o.seed = 3;
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  std::vector<int> impls(s->plan.nodes.size(), 0);
  StepOutcome r;
  for (size_t i = 0; i < s->plan.nodes.size(); ++i)
    if (s->plan.nodes[i].op == "AttentionGrad") {
      impls[i] = impl == kRecompute ? s->plan.nodes[i].find_impl("recompute") : 0;
      REQUIRE(impls[i] >= 0);
      r.recompute_nodes += impl == kRecompute;
    }
  const Schedule sched = store_all_schedule(s->plan, impls);
  Executor e(g, sched, *s->backend, 3);
  for (int v : resident_values(g)) e.set_value(v, s->initial[static_cast<size_t>(v)]);
  r.loss = e.step({s->tg.loss}).at(s->tg.loss).at(0);
  for (int v : resident_values(g))
    if (g.values[static_cast<size_t>(v)].role == Role::momentum) r.gradients.push_back(e.get_value(v));
  r.peak = e.arena().peak_bytes();
  r.predicted = simulate(s->plan, sched).peak_bytes;
  return r;
}

}  // namespace

TEST_CASE("training steps of the token models with fused attention on CUDA match the CPU", "[cuda][model][attention]") {
  for (const char* model : {"gpt2_tiny", "bert_tiny"}) {
    for (int impl : {kProbs, kRecompute}) {
      INFO(model << ", AttentionGrad " << (impl == kProbs ? "probs" : "recompute"));
      const StepOutcome cpu = attention_step(model, "cpu", impl);
      const StepOutcome gpu = attention_step(model, "cuda", impl);
      if (impl == kRecompute) CHECK(gpu.recompute_nodes > 0);
      CHECK(std::abs(gpu.loss - cpu.loss) <= 1e-4 * std::max(1.0, std::abs(cpu.loss)));
      REQUIRE(gpu.gradients.size() == cpu.gradients.size());
      double d2 = 0, n2 = 0;
      for (size_t k = 0; k < cpu.gradients.size(); ++k)
        for (size_t i = 0; i < cpu.gradients[k].size(); ++i) {
          d2 += (gpu.gradients[k][i] - cpu.gradients[k][i]) * (gpu.gradients[k][i] - cpu.gradients[k][i]);
          n2 += cpu.gradients[k][i] * cpu.gradients[k][i];
        }
      INFO("gradients: relative difference " << std::sqrt(d2 / std::max(n2, 1e-300)));
      CHECK(std::sqrt(d2 / std::max(n2, 1e-300)) <= 1e-4);
      CHECK(gpu.peak == gpu.predicted);  // the attention workspaces are exactly what the plan counted
      CHECK(gpu.predicted > 0);
    }
  }
}
