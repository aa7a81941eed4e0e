#include "op_harness.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "core/error.h"
#include "ops/op.h"
#include "train/autodiff.h"

namespace monet::test {
namespace {

// Host storage for every value of a small graph; runs nodes with the CPU kernels.
class HostRunner {
 public:
  HostRunner(const Graph& g, int float_bytes) : g_(g), fb_(float_bytes), mem_(g.values.size()) {}

  void set(int v, const std::vector<double>& x) {
    alloc(v);
    const Value& val = g_.values[v];
    MONET_CHECK(static_cast<int64_t>(x.size()) == numel(val.shape), val.name);
    for (size_t i = 0; i < x.size(); ++i) put(v, static_cast<int64_t>(i), x[i]);
  }

  std::vector<double> get(int v) const {
    std::vector<double> out(static_cast<size_t>(numel(g_.values[v].shape)));
    for (size_t i = 0; i < out.size(); ++i) out[i] = at(v, static_cast<int64_t>(i));
    return out;
  }

  void run(int n, int impl = 0) {
    const Node& node = g_.nodes[n];
    const OpDef& def = op_def(node.op);
    CpuCall call{node, {}, {}, nullptr, 12345, false, impl};
    const ImplDef reads = impls_of(node).at(impl);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      TensorRef r = ref(node.inputs[i]);
      if (!reads.reads_input(static_cast<int>(i))) r.data = nullptr;  // as the executor passes it
      call.in.push_back(r);
    }
    for (int v : node.outputs) {
      alloc(v);
      call.out.push_back(ref(v));
    }
    std::vector<char> ws;
    if (def.cpu_workspace_bytes) {
      ws.resize(static_cast<size_t>(def.cpu_workspace_bytes(g_, node, fb_)));
      call.workspace = ws.empty() ? nullptr : ws.data();
    }
    CpuKernel k = fb_ == 8 ? def.cpu_f64 : def.cpu_f32;
    MONET_CHECK(k != nullptr, "op ", node.op, " has no CPU kernel");
    k(call);
  }

 private:
  void alloc(int v) {
    const Value& val = g_.values[v];
    mem_[v].assign(static_cast<size_t>(numel(val.shape) * element_bytes(val.dtype, fb_)), 0);
  }
  TensorRef ref(int v) { return {mem_[v].data(), &g_.values[v].shape, g_.values[v].dtype}; }
  void put(int v, int64_t i, double x) {
    char* p = mem_[v].data();
    switch (g_.values[v].dtype) {
      case DType::f32:
        if (fb_ == 8) reinterpret_cast<double*>(p)[i] = x; else reinterpret_cast<float*>(p)[i] = static_cast<float>(x);
        break;
      case DType::i64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(x); break;
      case DType::u8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(x); break;
    }
  }
  double at(int v, int64_t i) const {
    const char* p = mem_[v].data();
    switch (g_.values[v].dtype) {
      case DType::f32: return fb_ == 8 ? reinterpret_cast<const double*>(p)[i] : reinterpret_cast<const float*>(p)[i];
      case DType::i64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
      case DType::u8: return reinterpret_cast<const uint8_t*>(p)[i];
    }
    return 0;
  }

  const Graph& g_;
  int fb_;
  std::vector<std::vector<char>> mem_;
};

struct Built {
  Graph g;
  std::vector<std::vector<double>> inputs;
};

Built build(const OpCase& c) {
  Built b;
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  Node node;
  node.name = "n0";
  node.op = c.op;
  node.attrs = c.attrs;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Value v;
    v.name = "x" + std::to_string(i);
    v.shape = c.shapes[i];
    v.dtype = i < c.dtypes.size() ? c.dtypes[i] : DType::f32;
    bool wants = v.dtype == DType::f32 && (i >= c.grad.size() || c.grad[i]);
    v.role = wants ? Role::param : Role::input;
    node.inputs.push_back(b.g.add_value(v));
    std::vector<double> x;
    if (i < c.data.size() && !c.data[i].empty()) {
      x = c.data[i];
    } else {
      x.resize(static_cast<size_t>(numel(v.shape)));
      for (double& e : x) e = uni(rng);
    }
    b.inputs.push_back(std::move(x));
  }
  for (int o = 0; o < c.num_outputs; ++o) {
    Value v;
    v.name = "y" + std::to_string(o);
    v.producer = 0;
    node.outputs.push_back(b.g.add_value(v));
  }
  b.g.nodes.push_back(node);
  infer_node(b.g, 0);
  return b;
}

// Outputs of the forward node for the given inputs, in double.
std::vector<std::vector<double>> forward_outputs(const Built& b, const std::vector<std::vector<double>>& inputs) {
  HostRunner r(b.g, 8);
  for (size_t i = 0; i < inputs.size(); ++i) r.set(b.g.nodes[0].inputs[i], inputs[i]);
  r.run(0);
  std::vector<std::vector<double>> outs;
  for (int v : b.g.nodes[0].outputs) outs.push_back(r.get(v));
  return outs;
}

// Whether the loss of gradient_error weighs output o of the forward node.
bool weighed(const OpCase& c, const Graph& g, size_t o) {
  if (g.values[g.nodes[0].outputs[o]].dtype != DType::f32) return false;
  return c.loss_outputs.empty() || (o < c.loss_outputs.size() && c.loss_outputs[o]);
}

}  // namespace

std::vector<double> random_values(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (double& e : v) e = uni(rng);
  return v;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  MONET_CHECK(a.size() == b.size(), a.size(), " vs ", b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

OpResult run_forward(const OpCase& c, int float_bytes) {
  Built b = build(c);
  HostRunner r(b.g, float_bytes);
  for (size_t i = 0; i < b.inputs.size(); ++i) r.set(b.g.nodes[0].inputs[i], b.inputs[i]);
  r.run(0, c.impl);
  OpResult res;
  for (int v : b.g.nodes[0].outputs) {
    res.shapes.push_back(b.g.values[v].shape);
    res.values.push_back(r.get(v));
  }
  return res;
}

double gradient_error(const OpCase& c, double eps) {
  Built b = build(c);
  mark_requires_grad(b.g);
  std::mt19937_64 rng(c.seed + 99);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);

  // Seeds: a random weight per float output (the gradient of the loss sum_o <y_o, w_o>).
  std::map<int, int> seeds;
  std::vector<std::pair<int, std::vector<double>>> weights;
  for (size_t o = 0; o < b.g.nodes[0].outputs.size(); ++o) {
    int y = b.g.nodes[0].outputs[o];
    if (!weighed(c, b.g, o)) continue;
    Value w;
    w.name = "w" + std::to_string(o);
    w.shape = b.g.values[y].shape;
    w.role = Role::input;
    int wid = b.g.add_value(w);
    std::vector<double> wv(static_cast<size_t>(numel(w.shape)));
    for (double& e : wv) e = uni(rng);
    weights.emplace_back(wid, wv);
    seeds[y] = wid;
  }
  auto loss = [&](const std::vector<std::vector<double>>& inputs) {
    std::vector<std::vector<double>> outs = forward_outputs(b, inputs);
    double l = 0;
    size_t k = 0;
    for (size_t o = 0; o < b.g.nodes[0].outputs.size(); ++o) {
      if (!weighed(c, b.g, o)) continue;
      for (size_t i = 0; i < outs[o].size(); ++i) l += outs[o][i] * weights[k].second[i];
      ++k;
    }
    return l;
  };

  Graph& g = b.g;
  std::map<int, int> grads = append_backward(g, 1, seeds);
  HostRunner r(g, 8);
  for (size_t i = 0; i < b.inputs.size(); ++i) r.set(g.nodes[0].inputs[i], b.inputs[i]);
  for (auto& [wid, wv] : weights) r.set(wid, wv);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const bool has = n > 0 && c.backward_impl < static_cast<int>(impls_of(g.nodes[n]).size());
    r.run(static_cast<int>(n), has ? c.backward_impl : 0);
  }

  double worst = 0;
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    int v = g.nodes[0].inputs[i];
    if (!g.values[v].requires_grad) continue;
    auto it = grads.find(v);
    std::vector<double> analytic = it == grads.end() ? std::vector<double>(b.inputs[i].size(), 0.0) : r.get(it->second);
    std::vector<std::vector<double>> x = b.inputs;
    for (size_t e = 0; e < x[i].size(); ++e) {
      double keep = x[i][e];
      x[i][e] = keep + eps;
      double lp = loss(x);
      x[i][e] = keep - eps;
      double lm = loss(x);
      x[i][e] = keep;
      double numeric = (lp - lm) / (2 * eps);
      worst = std::max(worst, std::abs(analytic[e] - numeric) / std::max(1.0, std::abs(numeric)));
    }
  }
  return worst;
}

void check_exact(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == want[i]);
  }
}

void check_relative(const std::vector<double>& got, const std::vector<double>& want, double rel) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ", relative tolerance " << rel);
    CHECK(got[i] == Approx(want[i]).epsilon(rel).margin(0));
  }
}

void check_to_scale(const std::vector<double>& got, const std::vector<double>& want, double rel) {
  REQUIRE(got.size() == want.size());
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ", tolerance " << rel << " of the scale " << scale);
    CHECK(got[i] == Approx(want[i]).epsilon(0).margin(rel * scale));
  }
}

}  // namespace monet::test
