// Tiny hand-made and random training graphs for the solver's tests (brute force stays within reach on them), and
// what those tests evaluate on the programs of them.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "schedule/schedule.h"
#include "solve/milp.h"

namespace monet::test {

// A hand-made plan graph: values sized in units of kAlignBytes, nodes appended in order (each returns its index and
// becomes the producer of its outputs).
struct PlanBuilder {
  PlanGraph plan;
  int value(const std::string& name, int units, bool resident) {
    plan.values.push_back({name, units * kAlignBytes, resident, -1});
    return static_cast<int>(plan.values.size()) - 1;
  }
  int node(const std::string& name, Stage st, std::vector<int> in, std::vector<int> out, double ms = 1.0, int ws = 0,
           const char* op = "Op") {
    for (int v : out) plan.values[v].producer = static_cast<int>(plan.nodes.size());
    plan.nodes.push_back({name, op, st, std::move(in), std::move(out), ms, ws * kAlignBytes});
    return static_cast<int>(plan.nodes.size()) - 1;
  }
};

// A random training graph shape: n forward nodes (each reads one or two earlier values, or the input), a loss,
// one backward node per forward node in reverse order (reads the running gradient and some of the node's inputs
// and output), and one update node.
// With impls, about half the backward nodes get a second implementation reading other saved values (the node's
// output instead of an input, or the reverse) with its own time and workspace. With in_place, about half the
// forward nodes after the first may run in place over their first input (their output gets its size). With
// bwd_in_place, about three in four backward nodes may run in place over the gradient they read (which ends there), their
// second implementation (with impls) only half of the time (ImplDef::in_place: cuDNN's BatchNormGrad does not). With
// algos,
// the second implementation is instead an algorithm variant of the first (same reads, its own time and workspace:
// what a CUDA profile adds for a backward convolution). With fwd_algos, about half the forward nodes get an algorithm
// variant too (what a CUDA profile adds for a forward convolution). With optional, about half the forward nodes get a
// second, optional output (PlanNode::optional_outputs) and a lean time, faster or slower than their time, and its
// backward node (instead of impls' implementations) reads it always, never, or under one of two implementations (Attention's P and AttentionGrad's probs and recompute).
inline PlanGraph random_plan(int n, uint64_t seed, bool impls = false, bool in_place = false, bool algos = false,
                      bool fwd_algos = false, bool bwd_in_place = false, bool optional = false) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  PlanBuilder pb;
  PlanGraph& p = pb.plan;
  // An algorithm variant of node b's default: faster with more workspace, or slower with less (a trade-off).
  auto add_algorithm = [&](PlanNode& b) {
    const bool faster = pick(0, 1);
    const double ms = faster ? std::max(0.5, b.time_ms - pick(1, 4)) : b.time_ms + pick(1, 4);
    const int64_t ws = faster ? b.workspace_bytes + pick(1, 3) * kAlignBytes : 0;
    if (b.impls.empty()) b.impls.push_back({"default", b.inputs, b.time_ms, b.workspace_bytes});
    PlanImpl v{"cudnn5", b.inputs, ms, ws};
    v.op_impl = 0;
    v.algo = 5;
    b.impls.push_back(std::move(v));
  };
  const int x = pb.value("x", 2, true);
  const int w = pb.value("w", 1, true);
  std::vector<int> outs, ins0, opt(n, -1);
  std::vector<std::vector<int>> ins(n);
  for (int i = 0; i < n; ++i) {
    ins[i].push_back(i == 0 ? x : outs[pick(std::max(0, i - 2), i - 1)]);
    if (i >= 2 && pick(0, 2) == 0) ins[i].push_back(outs[pick(0, i - 2)]);
    const bool over = in_place && i > 0 && pick(0, 1);
    const int units = over ? static_cast<int>(p.values[ins[i][0]].bytes / kAlignBytes) : pick(1, 6);
    const int y = pb.value("a" + std::to_string(i), units, false);
    // Draws in named order: the order of a call's arguments (and of a product's operands) is unspecified, and GCC
    // and Clang differ, which gave the Release and ASan builds different graphs.
    const int ms = pick(1, 9);
    const int has_ws = pick(0, 1);
    const int ws = has_ws * pick(1, 3);
    std::vector<int> made = {y};
    if (optional && !fwd_algos && pick(0, 1)) {
      const int o_units = pick(1, 4);
      opt[i] = pb.value("o" + std::to_string(i), o_units, false);
      made.push_back(opt[i]);
    }
    pb.node("f" + std::to_string(i), Stage::forward, ins[i], made, ms, ws);
    if (opt[i] >= 0) {
      p.nodes.back().optional_outputs = {opt[i]};
      const int saved = pick(-3, 3);  // below 0: the lean run is slower (a measurement may say so)
      p.nodes.back().lean_ms = std::max(0.5, static_cast<double>(ms - saved));
    }
    if (over) p.nodes.back().in_place = {ins[i][0]};
    if (fwd_algos && pick(0, 1)) add_algorithm(p.nodes.back());
    outs.push_back(y);
  }
  const int loss = pb.value("loss", 1, false);
  pb.node("loss", Stage::loss, {outs.back()}, {loss}, 1, 0);
  // With bwd_in_place, on every other seed the loss's gradient may also run in place over the last forward value
  // (SoftmaxCrossEntropyGrad over the logits), which it can only where no later step uses that value. Decided by
  // the seed, not drawn, so that the draws (and the graphs of other seeds) stay as they were.
  const bool loss_over = bwd_in_place && !outs.empty() && seed % 2 == 0;
  int grad = pb.value("g_out", loss_over ? static_cast<int>(p.values[outs.back()].bytes / kAlignBytes) : outs.empty() ? 1 : 2,
                      false);
  pb.node("loss_grad", Stage::backward, {outs.back()}, {grad}, 1, 0);
  if (loss_over) p.nodes.back().in_place = {outs.back()};
  for (int i = n - 1; i >= 0; --i) {
    std::vector<int> in = {grad};
    for (int v : ins[i])
      if (v != x && pick(0, 1)) in.push_back(v);
    if (pick(0, 1)) in.push_back(outs[i]);
    const int g_units = pick(1, 4);
    const bool over = bwd_in_place && pick(0, 3) > 0;
    const int g = pb.value("g" + std::to_string(i), over ? static_cast<int>(p.values[grad].bytes / kAlignBytes) : g_units,
                           false);
    const int ms = pick(1, 9);
    const int ws = pick(0, 1);
    pb.node("b" + std::to_string(i), Stage::backward, in, {g}, ms, ws);
    if (over) p.nodes.back().in_place = {grad};
    if (impls && opt[i] < 0 && pick(0, 1)) {
      PlanNode& b = p.nodes.back();
      std::vector<int> alt = {grad};
      if (std::find(in.begin(), in.end(), outs[i]) == in.end()) alt.push_back(outs[i]);
      else alt.push_back(ins[i][0]);
      if (algos) {
        add_algorithm(b);
      } else {
        b.impls.push_back({"a", b.inputs, b.time_ms, b.workspace_bytes});
        b.impls.push_back({"b", alt, static_cast<double>(pick(1, 9)), pick(0, 2) * kAlignBytes});
        if (over) b.impls.back().in_place = pick(0, 1);
      }
    }
    if (opt[i] >= 0 && p.nodes.back().impls.empty()) {
      PlanNode& b = p.nodes.back();
      const int how = pick(0, 3);  // 0: always read, 1: never, 2: by the default only, 3: by the second only
      if (how == 0) b.inputs.push_back(opt[i]);
      if (how >= 2) {
        std::vector<int> with = b.inputs;
        with.push_back(opt[i]);
        const double other_ms = pick(1, 9);
        b.impls.push_back({"a", how == 2 ? with : b.inputs, b.time_ms, b.workspace_bytes});
        b.impls.push_back({"b", how == 2 ? b.inputs : with, other_ms, b.workspace_bytes});
        b.inputs = b.impls[0].inputs;
      }
    }
    grad = g;
  }
  pb.node("update", Stage::update, {w, grad}, {}, 1, 0);
  return std::move(pb.plan);
}


// A chain x -> f0 -> a0 -> ... -> f(n-1) -> a(n-1) -> loss, each backward node b_i reading the running gradient and
// f_i's input (the classic checkpointing graph, as in "memory within a step" below), with outputs of random sizes,
// random forward workspaces and small gradients: recomputing a run of the chain holds two outputs at once, which may
// be more than the step's node needs.
inline PlanGraph chain_plan(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  PlanBuilder pb;
  const int x = pb.value("x", 1, true), w = pb.value("w", 1, true);
  std::vector<int> a;
  for (int i = 0; i < n; ++i) {
    const int units = pick(2, 8);
    a.push_back(pb.value("a" + std::to_string(i), units, false));
    const int ms = pick(1, 9);
    const int ws = pick(0, 2);
    pb.node("f" + std::to_string(i), Stage::forward, {i == 0 ? x : a[i - 1]}, {a[i]}, ms, ws);
  }
  const int loss = pb.value("loss", 1, false);
  pb.node("loss", Stage::loss, {a.back()}, {loss});
  int grad = pb.value("g", 1, false);
  pb.node("loss_grad", Stage::backward, {a.back()}, {grad});
  for (int i = n - 1; i >= 0; --i) {
    const int g = pb.value("g" + std::to_string(i), 1, false);
    std::vector<int> in = {grad};
    if (i > 0) in.push_back(a[i - 1]);
    pb.node("b" + std::to_string(i), Stage::backward, in, {g}, pick(1, 9));
    grad = g;
  }
  pb.node("update", Stage::update, {w, grad}, {});
  return std::move(pb.plan);
}

// A chain as chain_plan's where forward node f_i also reads its parameter w_i and each backward node b_i also gives
// w_i's gradient, which an update right after it applies with w_i's momentum m_i (read by nothing else: the
// optimizer state an offloading plan may keep on the host). Parameters and momenta of random sizes; backward nodes
// of 1 to 3 ms, so a momentum's copy may outlast the step it overlaps.
inline PlanGraph momentum_chain_plan(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  PlanBuilder pb;
  const int x = pb.value("x", 1, true);
  std::vector<int> a, w, m;
  for (int i = 0; i < n; ++i) {
    const int units = pick(1, 6);
    w.push_back(pb.value("w" + std::to_string(i), units, true));
    m.push_back(pb.value("m" + std::to_string(i), units, true));
  }
  for (int i = 0; i < n; ++i) {
    const int units = pick(2, 6);
    a.push_back(pb.value("a" + std::to_string(i), units, false));
    const int ms = pick(1, 9);
    pb.node("f" + std::to_string(i), Stage::forward, {i == 0 ? x : a[i - 1], w[i]}, {a[i]}, ms, 0);
  }
  const int loss = pb.value("loss", 1, false);
  pb.node("loss", Stage::loss, {a.back()}, {loss});
  int grad = pb.value("g", 1, false);
  pb.node("loss_grad", Stage::backward, {a.back()}, {grad});
  for (int i = n - 1; i >= 0; --i) {
    const int g = pb.value("g" + std::to_string(i), 1, false);
    const int gw = pb.value("gw" + std::to_string(i), static_cast<int>(pb.plan.values[w[i]].bytes / kAlignBytes), false);
    std::vector<int> in = {grad, w[i]};
    if (i > 0) in.push_back(a[i - 1]);
    pb.node("b" + std::to_string(i), Stage::backward, in, {g, gw}, pick(1, 3));
    pb.node("update" + std::to_string(i), Stage::update, {w[i], gw, m[i]}, {}, 0.5, 0);
    grad = g;
  }
  return std::move(pb.plan);
}

// A chain of n layers with parameters w_i (1 to 6 units) and no optimizer state, whose first layer's backward
// writes a large gradient (2 to 8 units) at the end of the backward pass, after the later layers' updates: the
// step where a parameter away from the device (offload) lowers the peak, as VGG-16's first convolutions' data
// gradients do.
inline PlanGraph parameter_chain_plan(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  PlanBuilder pb;
  const int x = pb.value("x", 1, true);
  std::vector<int> a, w;
  for (int i = 0; i < n; ++i) w.push_back(pb.value("w" + std::to_string(i), pick(1, 6), true));
  for (int i = 0; i < n; ++i) {
    a.push_back(pb.value("a" + std::to_string(i), pick(1, 4), false));
    pb.node("f" + std::to_string(i), Stage::forward, {i == 0 ? x : a[i - 1], w[i]}, {a[i]}, pick(1, 9), 0);
  }
  const int loss = pb.value("loss", 1, false);
  pb.node("loss", Stage::loss, {a.back()}, {loss});
  int grad = pb.value("g", 1, false);
  pb.node("loss_grad", Stage::backward, {a.back()}, {grad});
  for (int i = n - 1; i >= 0; --i) {
    const int g = pb.value("g" + std::to_string(i), i == 0 ? pick(2, 8) : 1, false);
    const int gw = pb.value("gw" + std::to_string(i), static_cast<int>(pb.plan.values[w[i]].bytes / kAlignBytes), false);
    std::vector<int> in = {grad, w[i]};
    in.push_back(i > 0 ? a[i - 1] : x);
    pb.node("b" + std::to_string(i), Stage::backward, in, {g, gw}, pick(1, 3));
    pb.node("update" + std::to_string(i), Stage::update, {w[i], gw}, {}, 0.5, 0);
    grad = g;
  }
  return std::move(pb.plan);
}

// A row's left-hand side at the point x (column values).
inline double activity(const LinearProgram::Row& r, const std::vector<double>& x) {
  double sum = 0;
  for (size_t i = 0; i < r.cols.size(); ++i) sum += r.coefs[i] * x[r.cols[i]];
  return sum;
}

}  // namespace monet::test
