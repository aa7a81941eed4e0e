#include "solve/problem.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace monet {

CheckpointProblem make_problem(const PlanGraph& plan, int window) {
  CheckpointProblem p;
  p.plan = &plan;
  p.window = window;
  std::vector<int> pos_of(plan.nodes.size(), -1);
  for (size_t n = 0; n < plan.nodes.size(); ++n) {
    const Stage st = plan.nodes[n].stage;
    if (st == Stage::forward) {
      if (!p.steps.empty() || p.loss_node >= 0) fail("plan: forward node '", plan.nodes[n].name, "' after the loss");
      pos_of[n] = p.num_fwd();
      p.fwd_nodes.push_back(static_cast<int>(n));
    } else if (st == Stage::loss) {
      p.loss_node = static_cast<int>(n);
    } else {
      p.steps.push_back(static_cast<int>(n));
    }
    p.base_ms += plan.nodes[n].time_ms;
  }
  const int F = p.num_fwd(), T = p.num_steps();

  // Forward values and their stage-0 lifetimes.
  p.fval_of.assign(plan.values.size(), -1);
  p.out_bytes.assign(F, 0);
  p.fwd_ws.assign(F, 0);
  p.fwd_inputs.resize(F);
  for (int k = 0; k < F; ++k) {
    const PlanNode& n = plan.nodes[p.fwd_nodes[k]];
    p.fwd_ws[k] = align_up(n.workspace_bytes);
    for (int v : n.outputs) {
      p.out_bytes[k] += plan.values[v].bytes;
      p.fval_of[v] = static_cast<int>(p.fvals.size());
      p.fvals.push_back(v);
      p.producer.push_back(k);
      p.last_fwd.push_back(k);
    }
  }
  for (int k = 0; k <= F; ++k) {
    const int node = k < F ? p.fwd_nodes[k] : p.loss_node;
    if (node < 0) continue;
    for (int v : plan.nodes[node].inputs) {
      const int f = p.fval_of[v];
      if (f < 0) continue;
      p.last_fwd[f] = std::max(p.last_fwd[f], k);
      if (k < F && std::find(p.fwd_inputs[k].begin(), p.fwd_inputs[k].end(), f) == p.fwd_inputs[k].end())
        p.fwd_inputs[k].push_back(f);
    }
  }

  // What each step reads, and which forward nodes may be recomputed for it.
  const int nf = static_cast<int>(p.fvals.size());
  p.needs.resize(T);
  p.candidates.resize(T);
  p.last_use.assign(nf, -1);
  for (int t = 0; t < T; ++t) {
    std::set<int> need;
    for (int v : plan.nodes[p.steps[t]].inputs)
      if (p.fval_of[v] >= 0) need.insert(p.fval_of[v]);
    p.needs[t].assign(need.begin(), need.end());
    if (need.empty()) continue;
    int lo = F;
    for (int f : need) lo = std::min(lo, p.producer[f]);
    lo = window > 0 ? std::max(0, lo - window) : 0;
    std::set<int> cand;
    std::vector<int> stack;
    for (int f : need) stack.push_back(p.producer[f]);
    while (!stack.empty()) {
      int k = stack.back();
      stack.pop_back();
      if (k < lo || !cand.insert(k).second) continue;
      for (int f : p.fwd_inputs[k]) stack.push_back(p.producer[f]);
    }
    p.candidates[t].assign(cand.begin(), cand.end());
    for (int f : need) p.last_use[f] = std::max(p.last_use[f], t);
    for (int k : cand)
      for (int f : p.fwd_inputs[k]) p.last_use[f] = std::max(p.last_use[f], t);
  }

  // Fixed memory in stage 0.
  const int64_t resident = plan.resident_bytes();
  p.fwd_fixed.assign(F + 1, resident);
  p.fwd_released.resize(F + 1);
  for (int f = 0; f < nf; ++f) {
    for (int k = p.producer[f]; k <= p.last_fwd[f]; ++k) p.fwd_fixed[k] += p.bytes(f);
    p.fwd_released[p.last_fwd[f]].push_back(f);
  }
  for (int k = 0; k < F; ++k) p.fwd_fixed[k] += p.fwd_ws[k];

  // Gradients (every transient value that is not a forward value) live from their producer to their last reader.
  std::vector<int> step_of(plan.nodes.size(), -2);
  for (int t = 0; t < T; ++t) step_of[p.steps[t]] = t;
  if (p.loss_node >= 0) step_of[p.loss_node] = -1;
  std::vector<int64_t> delta(T + 1, 0);
  p.bwd_fixed.assign(T, resident);
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& val = plan.values[v];
    if (val.resident || p.fval_of[v] >= 0 || val.producer < 0) continue;
    const int from = step_of[val.producer];
    MONET_CHECK(from >= -1, "value ", val.name, " has an unplaced producer");
    int to = from;
    for (int t = 0; t < T; ++t)
      for (int in : plan.nodes[p.steps[t]].inputs)
        if (in == static_cast<int>(v)) to = std::max(to, t);
    if (from == -1) {
      if (p.loss_node >= 0) p.fwd_fixed[F] += val.bytes;  // produced by the loss node
      if (to >= 0) { delta[0] += val.bytes; delta[to + 1] -= val.bytes; }
    } else if (to > from) {
      delta[from + 1] += val.bytes;  // live while later steps run
      delta[to + 1] -= val.bytes;
    }
  }
  p.bwd_base.assign(T, resident);
  int64_t live = 0;
  for (int t = 0; t < T; ++t) {
    live += delta[t];
    p.bwd_base[t] = resident + live;
    const PlanNode& n = plan.nodes[p.steps[t]];
    int64_t out = 0;
    for (int v : n.outputs) out += plan.values[v].bytes;
    p.bwd_fixed[t] = p.bwd_base[t] + out + align_up(n.workspace_bytes);
  }
  if (p.loss_node >= 0) p.fwd_fixed[F] += align_up(plan.nodes[p.loss_node].workspace_bytes);
  return p;
}

int64_t CheckpointProblem::lower_bound_bytes() const {
  int64_t lb = 0;
  for (int64_t m : fwd_fixed) lb = std::max(lb, m);
  for (int t = 0; t < num_steps(); ++t) {
    int64_t m = bwd_fixed[t];
    for (int f : needs[t]) m += bytes(f);
    lb = std::max(lb, m);
  }
  return lb;
}

Assignment empty_assignment(const CheckpointProblem& p) {
  Assignment a;
  a.S.assign(p.num_steps(), std::vector<char>(p.fvals.size(), 0));
  a.R.assign(p.num_steps(), std::vector<char>(p.num_fwd(), 0));
  return a;
}

void trim(const CheckpointProblem& p, Assignment& a) {
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  std::vector<int> last(nf, -1);
  for (int t = 0; t < T; ++t) {
    for (int f : p.needs[t]) last[f] = t;
    for (int k : p.candidates[t])
      if (a.R[t][k])
        for (int f : p.fwd_inputs[k]) last[f] = t;
  }
  for (int f = 0; f < nf; ++f)
    for (int t = last[f] + 1; t < T; ++t) a.S[t][f] = 0;
}

Evaluation evaluate(const CheckpointProblem& p, const Assignment& a) {
  Evaluation e;
  const int F = p.num_fwd(), T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  auto bad = [&](std::string why) {
    e.feasible = false;
    e.violation = std::move(why);
    return e;
  };
  auto name = [&](int f) { return p.plan->values[p.fvals[f]].name; };
  // Variables that do not exist must be 0.
  for (int t = 0; t < T; ++t) {
    for (int f = 0; f < nf; ++f)
      if (a.S[t][f] && !p.has_s(t, f)) return bad("S[" + std::to_string(t) + "] keeps '" + name(f) + "' past its last use");
    for (int k = 0; k < F; ++k)
      if (a.R[t][k] && !std::binary_search(p.candidates[t].begin(), p.candidates[t].end(), k))
        return bad("R[" + std::to_string(t) + "] recomputes a non-candidate node");
  }
  // Stage 0: values kept into step 0 stay live after their last stage-0 reader.
  int64_t kept = 0;
  for (int k = 0; k <= F; ++k) {
    e.peak_bytes = std::max(e.peak_bytes, p.fwd_fixed[k] + kept);
    for (int f : p.fwd_released[k])
      if (T > 0 && a.S[0][f]) kept += p.bytes(f);
  }
  for (int t = 0; t < T; ++t) {
    auto present = [&](int f) { return a.S[t][f] || a.R[t][p.producer[f]]; };
    for (int f : p.needs[t])
      if (!present(f)) return bad("step " + std::to_string(t) + " reads '" + name(f) + "', neither kept nor recomputed");
    int64_t live = 0;
    for (int f = 0; f < nf; ++f)
      if (a.S[t][f]) live += p.bytes(f);
    for (int k = 0; k < F; ++k) {
      if (!a.R[t][k]) continue;
      live += p.out_bytes[k];
      e.recompute_ms += p.time_ms(k);
      for (int f : p.fwd_inputs[k])
        if (!present(f)) return bad("step " + std::to_string(t) + " recomputes node " + std::to_string(k) + " without its input '" + name(f) + "'");
    }
    e.peak_bytes = std::max(e.peak_bytes, p.bwd_fixed[t] + live);
    for (int k = 0; k < F; ++k)
      if (a.R[t][k]) e.peak_bytes = std::max(e.peak_bytes, p.bwd_base[t] + live + p.fwd_ws[k]);
    if (t + 1 < T)
      for (int f = 0; f < nf; ++f)
        if (a.S[t + 1][f] && !present(f))
          return bad("S[" + std::to_string(t + 1) + "] keeps '" + name(f) + "', which step " + std::to_string(t) + " did not hold");
  }
  e.feasible = true;
  return e;
}

Schedule extract_schedule(const CheckpointProblem& p, const Assignment& a, const std::string& mode) {
  const PlanGraph& plan = *p.plan;
  const int F = p.num_fwd(), T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  Schedule s;
  s.mode = mode;
  std::vector<char> live(plan.values.size(), 0);
  auto compute = [&](int node) {
    s.steps.push_back({Step::Kind::compute, node});
    for (int v : plan.nodes[node].outputs) live[v] = 1;
  };
  auto release = [&](int v) {
    if (!live[v]) return;
    live[v] = 0;
    s.steps.push_back({Step::Kind::free, v});
  };
  // Last step reading each gradient value (the loss node counts as -1).
  std::vector<int> grad_last(plan.values.size(), -2);
  for (int t = 0; t < T; ++t)
    for (int v : plan.nodes[p.steps[t]].inputs) grad_last[v] = t;

  // Stage 0.
  for (int k = 0; k <= F; ++k) {
    const int node = k < F ? p.fwd_nodes[k] : p.loss_node;
    if (node < 0) continue;
    compute(node);
    for (int f : p.fwd_released[k])
      if (T == 0 || !a.S[0][f]) release(p.fvals[f]);
    if (k == F)
      for (int v : plan.nodes[node].outputs)
        if (grad_last[v] < 0) release(v);
  }
  // Steps.
  for (int t = 0; t < T; ++t) {
    for (int k : p.candidates[t]) {
      if (!a.R[t][k]) continue;
      const int node = p.fwd_nodes[k];
      for (int v : plan.nodes[node].outputs) release(v);  // a kept copy is replaced by the identical recomputation
      compute(node);
    }
    const int node = p.steps[t];
    compute(node);
    std::vector<int> touched = plan.nodes[node].inputs;
    touched.insert(touched.end(), plan.nodes[node].outputs.begin(), plan.nodes[node].outputs.end());
    for (int v : touched)
      if (!plan.values[v].resident && p.fval_of[v] < 0 && grad_last[v] <= t) release(v);
    for (int f = 0; f < nf; ++f)
      if (live[p.fvals[f]] && (t + 1 >= T || !a.S[t + 1][f])) release(p.fvals[f]);
  }
  return s;
}

}  // namespace monet
