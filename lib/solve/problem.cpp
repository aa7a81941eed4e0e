#include "solve/problem.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/error.h"

namespace monet {

namespace {

// read, used and freed_after from needs, impl_extra and candidates.
void derive_step_sets(CheckpointProblem& p) {
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  p.read.assign(T, std::vector<char>(nf, 0));
  p.used.assign(T, std::vector<char>(nf, 0));
  p.freed_after.resize(T);
  const std::vector<std::vector<int>> values_of = p.values_by_producer();
  for (int t = 0; t < T; ++t) {
    for (int f : p.needs[t]) p.read[t][f] = p.used[t][f] = 1;
    for (const std::vector<int>& extra : p.impl_extra[t])
      for (int f : extra) p.read[t][f] = p.used[t][f] = 1;
    const std::vector<int>& cand = p.candidates[t];
    std::vector<int> last(nf, -1);  // index into cand of the last candidate producing or reading f
    for (size_t i = 0; i < cand.size(); ++i) {
      for (int f : p.fwd_inputs[cand[i]]) {
        p.used[t][f] = 1;
        last[f] = static_cast<int>(i);
      }
      for (int f : values_of[cand[i]]) last[f] = static_cast<int>(i);
    }
    p.freed_after[t].resize(cand.size());
    for (size_t i = 0; i < cand.size(); ++i)
      for (int f : values_of[cand[i]])
        if (!p.read[t][f]) p.freed_after[t][last[f]].push_back(f);
  }
}

}  // namespace

CheckpointProblem make_problem(const PlanGraph& plan, int window, bool impls, const std::vector<int>& step_windows) {
  if (window < 0) {
    CheckpointProblem none = make_problem(plan, 0, impls);
    const int w = auto_window(none, kAutoWindowCandidates);
    return w == 0 ? none : make_problem(plan, w, impls);
  }
  CheckpointProblem p;
  p.plan = &plan;
  p.window = window;
  p.step_windows = step_windows;
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
  p.fwd_ms.assign(F, 0);
  p.fwd_impl_ms.assign(F, {0.0});
  p.fwd_impl_ws.assign(F, {0});
  p.fwd_inputs.resize(F);
  for (int k = 0; k < F; ++k) {
    const PlanNode& n = plan.nodes[p.fwd_nodes[k]];
    p.fwd_ws[k] = align_up(n.workspace_bytes);
    p.fwd_ms[k] = n.time_ms;
    for (int i = 1; impls && i < n.num_impls(); ++i) {
      std::vector<int> a = n.reads(0), b = n.reads(i);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a != b)
        fail("plan: implementation '", n.impl_name(i), "' of forward node '", n.name,
             "' reads other values than its default (a forward node chooses only among algorithms)");
      p.fwd_impl_ms[k].push_back(n.impl_ms(i) - n.impl_ms(0));
      p.fwd_impl_ws[k].push_back(align_up(n.impl_workspace(i)) - align_up(n.impl_workspace(0)));
    }
    for (int v : n.outputs) {
      p.out_bytes[k] += plan.values[v].bytes;
      p.fval_of[v] = static_cast<int>(p.fvals.size());
      p.fvals.push_back(v);
      p.fval_bytes.push_back(plan.values[v].bytes);
      p.fval_optional.push_back(std::find(n.optional_outputs.begin(), n.optional_outputs.end(), v) !=
                                n.optional_outputs.end());
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

  // Levels: the longest path of forward nodes from the inputs (parallel branches share levels).
  p.level.assign(F, 0);
  for (int k = 0; k < F; ++k)
    for (int f : p.fwd_inputs[k]) p.level[k] = std::max(p.level[k], p.level[p.producer[f]] + 1);

  // What each step reads (under each implementation), and which forward nodes may be recomputed for it.
  const int nf = static_cast<int>(p.fvals.size());
  p.needs.resize(T);
  p.candidates.resize(T);
  p.impl_extra.resize(T);
  p.impl_ms.resize(T);
  p.impl_ws.resize(T);
  p.last_use.assign(nf, -1);
  for (int t = 0; t < T; ++t) {
    const PlanNode& node = plan.nodes[p.steps[t]];
    const int ni = impls ? node.num_impls() : 1;
    std::vector<std::set<int>> reads(ni);
    for (int i = 0; i < ni; ++i) {
      for (int v : node.reads(i)) {
        if (p.fval_of[v] >= 0) {
          reads[i].insert(p.fval_of[v]);
        } else if (!plan.values[v].resident &&
                   std::find(node.inputs.begin(), node.inputs.end(), v) == node.inputs.end()) {
          fail("plan: implementation '", node.impl_name(i), "' of node '", node.name, "' reads '", plan.values[v].name,
               "', which its default implementation does not read (only forward values may differ)");
        }
      }
      p.impl_ms[t].push_back(node.impl_ms(i) - node.impl_ms(0));
      p.impl_ws[t].push_back(align_up(node.impl_workspace(i)) - align_up(node.impl_workspace(0)));
    }
    std::set<int> need = reads[0], any = reads[0];
    for (int i = 1; i < ni; ++i) {
      std::set<int> both;
      std::set_intersection(need.begin(), need.end(), reads[i].begin(), reads[i].end(), std::inserter(both, both.end()));
      need = std::move(both);
      any.insert(reads[i].begin(), reads[i].end());
    }
    p.needs[t].assign(need.begin(), need.end());
    for (int i = 0; i < ni; ++i) {
      std::vector<int> extra;
      std::set_difference(reads[i].begin(), reads[i].end(), need.begin(), need.end(), std::back_inserter(extra));
      p.impl_extra[t].push_back(std::move(extra));
    }
    if (any.empty()) continue;
    int lo = F;
    for (int f : any) lo = std::min(lo, p.level[p.producer[f]]);
    const int w = step_windows.empty() ? window : step_windows.at(t);
    lo = w > 0 ? std::max(0, lo - w) : 0;
    std::set<int> cand;
    std::vector<int> stack;
    for (int f : any) stack.push_back(p.producer[f]);
    while (!stack.empty()) {
      int k = stack.back();
      stack.pop_back();
      if (p.level[k] < lo || !cand.insert(k).second) continue;
      for (int f : p.fwd_inputs[k]) stack.push_back(p.producer[f]);
    }
    p.candidates[t].assign(cand.begin(), cand.end());
    for (int f : any) p.last_use[f] = std::max(p.last_use[f], t);
    for (int k : cand)
      for (int f : p.fwd_inputs[k]) p.last_use[f] = std::max(p.last_use[f], t);
  }
  derive_step_sets(p);

  // Optional outputs: a lean run where some implementations of their readers read them and others do not (its
  // time and, less their bytes, its workspace); never allocated where none can read them.
  p.fwd_lean.assign(F, -1);
  p.lean_readers.assign(F, {});
  std::vector<char> read_forward(plan.values.size(), 0);  // read by a forward node or the loss: always
  for (int k = 0; k <= F; ++k)
    if (const int node = k < F ? p.fwd_nodes[k] : p.loss_node; node >= 0)
      for (int v : plan.nodes[node].inputs) read_forward[v] = 1;
  for (int k = 0; k < F; ++k) {
    const PlanNode& n = plan.nodes[p.fwd_nodes[k]];
    if (n.optional_outputs.empty() || p.num_fwd_impls(k) > 1) continue;
    bool must = false;
    std::vector<std::pair<int, int>> readers;
    for (int v : n.optional_outputs) must |= read_forward[v] != 0;
    for (int t = 0; t < T && !must; ++t) {
      int reading = 0;
      for (int i = 0; i < p.num_impls(t); ++i) {
        const bool reads = std::any_of(n.optional_outputs.begin(), n.optional_outputs.end(),
                                       [&](int v) { return p.read_by(t, i, p.fval_of[v]); });
        if (reads) readers.push_back({t, i});
        reading += reads;
      }
      must = reading > 0 && reading == p.num_impls(t);
    }
    if (must) continue;
    const double lean = n.lean_ms >= 0 ? n.lean_ms - n.time_ms : 0.0;
    if (readers.empty()) {  // nothing can read them: always lean, never allocated
      p.fwd_ms[k] += lean;
      p.base_ms += lean;
      for (int v : n.optional_outputs) {
        const int f = p.fval_of[v];
        p.out_bytes[k] -= p.fval_bytes[f];
        p.fval_bytes[f] = 0;
      }
      continue;
    }
    int64_t unallocated = 0;
    for (int v : n.optional_outputs) unallocated += p.bytes(p.fval_of[v]);
    p.fwd_lean[k] = 1;
    p.fwd_impl_ms[k].push_back(lean);
    p.fwd_impl_ws[k].push_back(-unallocated);
    p.lean_readers[k] = std::move(readers);
  }

  // The first forward value among forward position k's in-place inputs that satisfies ends_here, or -1.
  auto in_place_input = [&](int k, auto ends_here) {
    for (int v : plan.nodes[p.fwd_nodes[k]].in_place)
      if (const int f = p.fval_of[v]; f >= 0 && ends_here(f)) return f;
    return -1;
  };
  p.rec_in_place.resize(T);
  for (int t = 0; t < T; ++t) {
    p.rec_in_place[t].assign(p.candidates[t].size(), -1);
    for (size_t i = 0; i < p.candidates[t].size(); ++i)
      p.rec_in_place[t][i] = in_place_input(p.candidates[t][i], [&](int f) {
        const std::vector<int>& freed = p.freed_after[t][i];
        return std::find(freed.begin(), freed.end(), f) != freed.end();
      });
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
  // In place in stage 0: over the first allowed input released at k; it counts again at k only if kept.
  p.fwd_in_place.assign(F, -1);
  for (int k = 0; k < F; ++k) {
    p.fwd_in_place[k] = in_place_input(k, [&](int f) { return p.last_fwd[f] == k && p.producer[f] < k; });
    if (p.fwd_in_place[k] >= 0) p.fwd_fixed[k] -= p.bytes(p.fwd_in_place[k]);
  }

  // Gradients (every transient value that is not a forward value) live from their producer to their last reader.
  std::vector<int> step_of(plan.nodes.size(), -2);
  for (int t = 0; t < T; ++t) step_of[p.steps[t]] = t;
  if (p.loss_node >= 0) step_of[p.loss_node] = -1;
  std::vector<int64_t> delta(T + 1, 0);
  std::vector<int> grad_last(plan.values.size(), -2);  // gradient -> its last reading step (-2: not a gradient)
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
    grad_last[v] = to;
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
  // In place at the node: the default's saving in bwd_fixed, each other implementation's relative to it in impl_ws.
  p.bwd_in_place.resize(T);
  for (int t = 0; t < T; ++t) {
    const PlanNode& n = plan.nodes[p.steps[t]];
    for (int i = 0; i < p.num_impls(t); ++i) {
      const std::vector<int>& reads = n.reads(i);
      int over = -1;
      for (int v : n.impl_in_place(i) ? n.in_place : std::vector<int>{}) {
        // A forward value ends here in every schedule when no later step may use it (nor recompute from it): the
        // logits at the loss's gradient.
        const int f = p.fval_of[v];
        const bool ends = f >= 0 ? p.last_use[f] == t && (p.fval_optional.empty() || !p.fval_optional[f])
                                 : grad_last[v] == t;
        if (ends && std::find(reads.begin(), reads.end(), v) != reads.end()) {
          over = v;
          break;
        }
      }
      p.bwd_in_place[t].push_back(over);
    }
    auto saved = [&](int i) { return p.bwd_in_place[t][i] >= 0 ? plan.values[p.bwd_in_place[t][i]].bytes : 0; };
    p.bwd_fixed[t] -= saved(0);
    for (int i = 1; i < p.num_impls(t); ++i) p.impl_ws[t][i] -= saved(i) - saved(0);
  }
  if (p.loss_node >= 0) p.fwd_fixed[F] += align_up(plan.nodes[p.loss_node].workspace_bytes);
  return p;
}

CheckpointProblem::LowerBound CheckpointProblem::lower_bound() const {
  // With every optimizer state on the host where it may be (the host limit aside).
  auto away = [&](int t, int k = 0) {  // in step t (stage 0: at position k)
    int64_t b = 0;
    for (int s = 0; s < num_states(); ++s)
      if (states[s].narrow() && (!states[s].covers(t) || (t < 0 && states[s].fetch > k))) b += state_bytes(s);
    return b;
  };
  LowerBound lb;
  bool set = false;
  auto at_least = [&](int64_t bytes, int node) {
    if (set && bytes <= lb.bytes) return;
    lb = {std::max(bytes, lb.bytes), node};
    set = true;
  };
  for (int k = 0; k < static_cast<int>(fwd_fixed.size()); ++k) {  // at the least-workspace implementation
    const int64_t least = k < num_fwd() ? *std::min_element(fwd_impl_ws[k].begin(), fwd_impl_ws[k].end()) : 0;
    at_least(fwd_fixed[k] + least - away(-1, k), k < num_fwd() ? fwd_nodes[k] : loss_node);
  }
  for (int t = 0; t < num_steps(); ++t) {
    int64_t m = bwd_fixed[t] - away(t);
    for (int f : needs[t]) m += bytes(f);
    int64_t least = INT64_MAX;  // the cheapest implementation's extra reads and workspace
    for (int i = 0; i < num_impls(t); ++i) {
      int64_t extra = impl_ws[t][i];
      for (int f : impl_extra[t][i]) extra += bytes(f);
      least = std::min(least, extra);
    }
    at_least(m + least, steps[t]);
  }
  return lb;
}

bool CheckpointProblem::read_by_all(int t, int f) const {
  return std::binary_search(needs[t].begin(), needs[t].end(), f);
}

bool CheckpointProblem::read_by(int t, int impl, int f) const {
  const std::vector<int>& extra = impl_extra[t][impl];
  return read_by_all(t, f) || std::find(extra.begin(), extra.end(), f) != extra.end();
}

int CheckpointProblem::lean_choice(int k, const std::vector<int>& M) const {
  if (fwd_lean.empty() || fwd_lean[k] < 0) return -1;
  for (const auto& [t, i] : lean_readers[k])
    if (M.at(static_cast<size_t>(t)) == i) return 0;
  return fwd_lean[k];
}

bool CheckpointProblem::written(int f, const std::vector<int>& P) const {
  if (fval_optional.empty() || !fval_optional[f]) return true;
  const int k = producer[f];
  if (!fwd_lean.empty() && fwd_lean[k] >= 0) return P.at(static_cast<size_t>(k)) != fwd_lean[k];
  return fval_bytes[f] > 0 || plan->values[fvals[f]].bytes == 0;  // 0 bytes: nothing can read it
}

std::vector<int> settle_lean(const CheckpointProblem& p, const std::vector<int>& impl, std::vector<int> fwd) {
  if (fwd.empty()) fwd.assign(p.num_fwd(), 0);
  for (int k = 0; k < p.num_fwd(); ++k)
    if (const int i = p.lean_choice(k, impl); i >= 0) fwd[k] = i;
  return fwd;
}

bool CheckpointProblem::has_choices() const {
  for (int t = 0; t < num_steps(); ++t)
    if (num_impls(t) > 1) return true;
  for (int k = 0; k < num_fwd(); ++k)
    if (num_fwd_impls(k) > 1) return true;
  return false;
}

// The lowest level that any implementation of step t reads (the problem's forward count when it reads nothing).
static int lowest_read_level(const CheckpointProblem& p, int t) {
  int lowest = p.num_fwd();
  auto lower = [&](const std::vector<int>& read) {
    for (int f : read) lowest = std::min(lowest, p.level[p.producer[f]]);
  };
  lower(p.needs[t]);
  for (const std::vector<int>& extra : p.impl_extra[t]) lower(extra);
  return lowest;
}

std::vector<int> windows_needed(const CheckpointProblem& unwindowed, const Assignment& a, int base) {
  MONET_CHECK(unwindowed.window <= 0 && unwindowed.step_windows.empty(),
              "windows_needed needs the problem without a window");
  MONET_CHECK(base > 0, "windows_needed: a base window of ", base, " levels");
  std::vector<int> out(unwindowed.num_steps(), base);
  for (int t = 0; t < unwindowed.num_steps(); ++t) {
    const int lowest = lowest_read_level(unwindowed, t);
    for (int k = 0; k < unwindowed.num_fwd(); ++k)
      if (a.R[t][k] && unwindowed.level[k] < lowest) out[t] = std::max(out[t], lowest - unwindowed.level[k]);
  }
  return out;
}

int64_t window_candidates(const CheckpointProblem& unwindowed, int window) {
  MONET_CHECK(unwindowed.window <= 0, "window_candidates needs the problem without a window");
  int64_t count = 0;
  for (int t = 0; t < unwindowed.num_steps(); ++t) {
    if (window <= 0) {
      count += static_cast<int64_t>(unwindowed.candidates[t].size());
      continue;
    }
    // make_problem's window: W levels below the lowest level that any implementation of the step reads. Without a
    // window the candidates are every ancestor; a window keeps those at most W levels below it (make_problem's
    // search stops at the first node below, and every path from a kept one to what the step reads stays above,
    // levels rising along each edge).
    const int lowest = lowest_read_level(unwindowed, t);
    for (int k : unwindowed.candidates[t]) count += unwindowed.level[k] >= lowest - window;
  }
  return count;
}

int auto_window(const CheckpointProblem& unwindowed, int64_t max_candidates) {
  if (window_candidates(unwindowed, 0) <= max_candidates) return 0;
  int w = 1;  // the candidates grow with the window: the largest that stays within max_candidates (at least 1)
  for (int lo = 2, hi = unwindowed.num_fwd(); lo <= hi;) {
    const int mid = lo + (hi - lo) / 2;
    if (window_candidates(unwindowed, mid) <= max_candidates) {
      w = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return w;
}

CheckpointProblem fix_impls(const CheckpointProblem& p, const std::vector<int>& impl, const std::vector<int>& fwd,
                            bool as_counted_by_p) {
  CheckpointProblem q = p;
  const std::vector<int> settled = settle_lean(p, impl, fwd);
  for (int k = 0; k < p.num_fwd(); ++k) {
    const int i = settled[k];
    MONET_CHECK(i >= 0 && i < p.num_fwd_impls(k), "forward position ", k, ": implementation ", i, " of ",
                p.num_fwd_impls(k));
    q.fwd_ws[k] += p.fwd_impl_ws[k][i];
    q.fwd_fixed[k] += p.fwd_impl_ws[k][i];
    q.fwd_ms[k] += p.fwd_impl_ms[k][i];
    q.base_ms += p.fwd_impl_ms[k][i];
  }
  q.fwd_impl_ms.assign(p.num_fwd(), {0.0});
  q.fwd_impl_ws.assign(p.num_fwd(), {0});
  // Under a lean run its optional outputs are never written: nothing may keep them.
  for (int k = 0; k < p.num_fwd(); ++k)
    if (!p.fwd_lean.empty() && p.fwd_lean[k] >= 0 && settled[k] == p.fwd_lean[k])
      for (int v : p.plan->nodes[p.fwd_nodes[k]].optional_outputs) q.last_use[p.fval_of[v]] = -1;
  q.fwd_lean.assign(p.num_fwd(), -1);
  q.lean_readers.assign(p.num_fwd(), {});
  for (int t = 0; t < p.num_steps(); ++t) {
    const int i = impl[t];
    MONET_CHECK(i >= 0 && i < p.num_impls(t), "step ", t, ": implementation ", i, " of ", p.num_impls(t));
    std::vector<int>& need = q.needs[t];
    need.insert(need.end(), p.impl_extra[t][i].begin(), p.impl_extra[t][i].end());
    std::sort(need.begin(), need.end());
    q.bwd_fixed[t] += p.impl_ws[t][i];
    q.base_ms += p.impl_ms[t][i];
    q.impl_extra[t] = {{}};
    q.impl_ms[t] = {0.0};
    q.impl_ws[t] = {0};
    q.bwd_in_place[t] = {p.bwd_in_place[t][i]};
  }
  derive_step_sets(q);
  if (as_counted_by_p) {
    q.read = p.read;
    q.used = p.used;
    q.freed_after = p.freed_after;
  }
  return q;
}

std::vector<std::vector<int>> CheckpointProblem::values_by_producer() const {
  std::vector<std::vector<int>> made(num_fwd());
  for (size_t f = 0; f < fvals.size(); ++f) made[producer[f]].push_back(static_cast<int>(f));
  return made;
}

Assignment empty_assignment(const CheckpointProblem& p) {
  Assignment a;
  a.S.assign(p.num_steps(), std::vector<char>(p.fvals.size(), 0));
  a.R.assign(p.num_steps(), std::vector<char>(p.num_fwd(), 0));
  a.M.assign(p.num_steps(), 0);
  a.P = settle_lean(p, a.M, {});  // the defaults, and the lean runs they leave
  if (p.offload()) {
    a.H.assign(p.fvals.size(), 0);
    a.G.assign(p.num_steps(), std::vector<char>(p.fvals.size(), 0));
    a.Q.assign(p.states.size(), 0);
  }
  return a;
}

Assignment lift_to(const CheckpointProblem& p, Assignment a) {
  if (!p.offload()) return a;
  a.H.assign(p.fvals.size(), 0);
  a.G.assign(p.num_steps(), std::vector<char>(p.fvals.size(), 0));
  a.Q.assign(p.states.size(), 0);
  return a;
}

CheckpointProblem without_offload(const CheckpointProblem& p) {
  CheckpointProblem q = p;
  q.offloadable.clear();
  q.copy_out_ms.clear();
  q.copy_in_ms.clear();
  q.offload_at.clear();
  q.fwd_offloaded.clear();
  q.fwd_end_ms.clear();
  q.step_ms.clear();
  q.host_limit_bytes = 0;
  q.link = HostLink{};
  q.states.clear();
  q.parameter_offers.clear();
  q.fetch_spans.clear();
  q.state_in_spans.clear();
  q.state_out_spans.clear();
  q.copy_in_spans.clear();
  q.copy_in_from = -1;
  q.copy_timing = CopyTiming::hidden;
  return q;
}

const char* copy_timing_name(CopyTiming t) {
  switch (t) {
    case CopyTiming::lean: return "lean";
    case CopyTiming::lean_out: return "lean-out";
    case CopyTiming::lean_in: return "lean-in";
    case CopyTiming::hidden: break;
  }
  return "hidden";
}

CopyTiming parse_copy_timing(const std::string& name) {
  for (CopyTiming t : {CopyTiming::hidden, CopyTiming::lean, CopyTiming::lean_out, CopyTiming::lean_in})
    if (name == copy_timing_name(t)) return t;
  fail("--copy-timing '", name, "': expected auto, hidden, lean, lean-out or lean-in");
}

CheckpointProblem with_copy_timing(const CheckpointProblem& p, CopyTiming timing) {
  MONET_CHECK(p.offload(), "with_copy_timing: a problem without offload");
  CheckpointProblem q = without_offload(p);
  enable_offload(q, p.link, p.host_limit_bytes, timing);
  return q;
}

int64_t states_away(const CheckpointProblem& p, const Assignment& a, int t) {
  int64_t away = 0;
  for (int s = 0; s < p.num_states() && !a.Q.empty(); ++s)
    if (a.Q[s] && (!p.states[s].covers(t) || (t < 0 && p.states[s].fetch > 0))) away += p.state_bytes(s);
  return away;
}

std::vector<NestedSpan> nested_spans(int n, const std::function<std::optional<std::pair<int, int>>(int)>& span) {
  std::map<std::pair<int, int>, std::vector<int>> spans;
  for (int i = 0; i < n; ++i)
    if (const auto s = span(i)) spans[*s];
  for (auto& [outer, within] : spans)
    for (int i = 0; i < n; ++i)
      if (const auto s = span(i); s && s->first >= outer.first && s->second <= outer.second) within.push_back(i);
  std::vector<NestedSpan> out;
  for (auto& [outer, within] : spans) out.push_back({outer.first, outer.second, std::move(within)});
  return out;
}

void index_state_offers(CheckpointProblem& p) {
  p.parameter_offers.clear();
  for (int s = 0; s < p.num_states(); ++s)
    if (p.states[s].parameter()) p.parameter_offers.push_back(s);
  std::stable_sort(p.parameter_offers.begin(), p.parameter_offers.end(), [&](int a, int b) {
    const StateOffer &x = p.states[a], &y = p.states[b];
    return std::pair{x.fetch, x.reader} < std::pair{y.fetch, y.reader};
  });
  // The spans of the resident values' copies, each offer's own with every offer whose own lies within: a
  // parameter's copy in over stage-0 positions [fetch, reader], an optimizer state's over steps [first, u], and
  // every copy out over steps [u+1, last+1].
  using Span = std::optional<std::pair<int, int>>;
  const int n = p.num_states();
  p.fetch_spans = nested_spans(n, [&](int s) -> Span {
    const StateOffer& o = p.states[s];
    return o.parameter() ? Span{{o.fetch, o.reader}} : std::nullopt;
  });
  p.state_in_spans = nested_spans(n, [&](int s) -> Span {
    const StateOffer& o = p.states[s];
    return o.parameter() ? std::nullopt : Span{{o.first, o.step}};
  });
  p.state_out_spans = nested_spans(n, [&](int s) -> Span { return Span{{p.states[s].step + 1, p.states[s].last + 1}}; });
}

void enable_offload(CheckpointProblem& p, const HostLink& link, int64_t host_limit_bytes, CopyTiming timing) {
  const int F = p.num_fwd(), T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  const PlanGraph& plan = *p.plan;
  MONET_CHECK(link.d2h_busy_gbs > 0 && link.h2d_busy_gbs > 0, "host link without rates");
  p.host_limit_bytes = host_limit_bytes;
  p.link = link;
  p.copy_timing = timing;
  p.offloadable.assign(nf, 0);
  for (int t = 1; t < T; ++t)
    for (int f = 0; f < nf; ++f) p.offloadable[f] |= p.used[t][f];
  p.fwd_end_ms.assign(F + 1, 0.0);
  for (int k = 0; k <= F; ++k) {
    const double ms = k < F ? p.fwd_ms[k] : p.loss_node >= 0 ? plan.nodes[p.loss_node].time_ms : 0.0;
    p.fwd_end_ms[k] = (k > 0 ? p.fwd_end_ms[k - 1] : 0.0) + ms;
  }
  p.step_ms.assign(T, 0.0);
  for (int t = 0; t < T; ++t) p.step_ms[t] = plan.nodes[p.steps[t]].time_ms;
  p.copy_out_ms.assign(nf, 0.0);
  p.copy_in_ms.assign(nf, 0.0);
  p.offload_at.assign(nf, -1);
  p.fwd_offloaded.assign(F + 1, {});
  for (int f = 0; f < nf; ++f) {
    p.copy_out_ms[f] = link.copy_ms(p.bytes(f), true);
    p.copy_in_ms[f] = link.copy_ms(p.bytes(f), false);
    if (!p.offloadable[f]) continue;
    int k = p.last_fwd[f];
    if (lean_release(timing)) k = std::min(F, std::max(k, p.producer[f] + 1));
    else
      while (k < F && p.fwd_end_ms[k] - p.fwd_end_ms[p.producer[f]] < p.copy_out_ms[f]) ++k;
    p.offload_at[f] = k;
    p.fwd_offloaded[k].push_back(f);
  }
  // Which resident values may have their home on the host (docs/planner.md, "Offload"):
  // - the optimizer state: resident values whose only reader is one update step u in [1, T-2];
  // - the parameters: read in stage 0, last by their update u <= T-2 (which writes them in place), and by no
  //   recomputation candidate after u.
  std::vector<int> readers(plan.values.size(), 0);
  for (const PlanNode& n : plan.nodes)
    for (int v : std::set<int>(n.inputs.begin(), n.inputs.end())) ++readers[v];
  std::vector<int> stage0_pos(plan.nodes.size(), -1), step_of(plan.nodes.size(), -1);
  for (int k = 0; k < F; ++k) stage0_pos[p.fwd_nodes[k]] = k;
  if (p.loss_node >= 0) stage0_pos[p.loss_node] = F;
  for (int t = 0; t < T; ++t) step_of[p.steps[t]] = t;
  std::vector<int> reader(plan.values.size(), -1), last_step(plan.values.size(), -1);
  std::vector<char> elsewhere(plan.values.size(), 0);  // read by a node that is neither in stage 0 nor a step
  for (size_t n = 0; n < plan.nodes.size(); ++n)
    for (int v : plan.nodes[n].inputs) {
      if (stage0_pos[n] >= 0) reader[v] = reader[v] < 0 ? stage0_pos[n] : std::min(reader[v], stage0_pos[n]);
      else if (step_of[n] >= 0) last_step[v] = std::max(last_step[v], step_of[n]);
      else elsewhere[v] = 1;
    }
  for (int t = 0; t < T; ++t)  // a recomputation reads its node's parameters
    for (int k : p.candidates[t])
      for (int v : plan.nodes[p.fwd_nodes[k]].inputs) last_step[v] = std::max(last_step[v], t);
  auto is_state = [&](int v, int u) { return u >= 1 && plan.values[v].resident && readers[v] == 1 && plan.values[v].bytes > 0; };
  auto is_parameter = [&](int v, int u) {
    return plan.values[v].resident && plan.values[v].bytes > 0 && reader[v] >= 0 && last_step[v] == u && !elsewhere[v];
  };
  // The fewest steps before (after) u whose nodes take `ms`.
  auto first_covering = [&](int u, double in) {
    int first = u - 1;
    for (double ms = p.step_ms[first]; ms < in && first > 0;) ms += p.step_ms[--first];
    return first;
  };
  auto last_covering = [&](int u, double out) {
    int last = u + 1;
    for (double ms = p.step_ms[last]; ms < out && last + 1 < T;) ms += p.step_ms[++last];
    return last;
  };
  // An update's resident values come in and go out together (a layer's parameter and its momentum): each value is
  // also offered the span that covers all their copies each way, where that is wider than its own.
  // And the parameters' copies in, by their first stage-0 reader (position F: the loss).
  std::vector<double> in_together(T, 0.0), out_together(T, 0.0), in_at_reader(F + 1, 0.0);
  for (int u = 0; u + 1 < T; ++u) {
    const PlanNode& n = plan.nodes[p.steps[u]];
    if (n.stage != Stage::update) continue;
    for (int v : std::set<int>(n.inputs.begin(), n.inputs.end())) {
      const bool state = is_state(v, u), parameter = !state && is_parameter(v, u);
      if (state) in_together[u] += link.copy_ms(plan.values[v].bytes, false);
      if (parameter) in_at_reader[reader[v]] += link.copy_ms(plan.values[v].bytes, false);
      if (state || parameter) out_together[u] += link.copy_ms(plan.values[v].bytes, true);
    }
  }
  // Every resident value on offer at home on the host at once: the copies in of all the updates, latest update
  // first, each as late as it can start and end before its update or before the next update's copies start (the
  // optimizer state's stream; the parameters' over stage-0 positions), and the copies out, earliest update first,
  // each as early as it can start after its update and the previous update's copies (the stream to the host). Where
  // the own or together spans of neighbouring updates overlap, these are wider: each value is also offered them.
  std::vector<double> begin(T + 1, 0.0);  // when step t starts on the nodes' times
  for (int t = 0; t < T; ++t) begin[t + 1] = begin[t] + p.step_ms[t];
  std::vector<int> all_first(T, -1), all_last(T, -1);
  double next = begin[T];  // when the copies in of the next update start
  for (int u = T - 2; u >= 1; --u) {
    if (in_together[u] <= 0) continue;
    const double start = std::min(begin[u], next) - in_together[u];
    next = start;
    int first = u - 1;
    while (first > 0 && begin[first] > start) --first;
    all_first[u] = first;
  }
  double end = 0;  // when the copies out of the previous update end
  for (int u = 0; u + 1 < T; ++u) {
    if (out_together[u] <= 0) continue;
    end = std::max(begin[u + 1], end) + out_together[u];
    int last = u + 1;
    while (last + 1 < T && begin[last + 1] < end) ++last;
    all_last[u] = last;
  }
  std::vector<int> all_fetch(F + 1, -1);
  next = p.fwd_end_ms[F];
  for (int r = F; r >= 0; --r) {
    if (in_at_reader[r] <= 0) continue;
    const double start = std::min(p.fwd_begin_ms(r), next) - in_at_reader[r];
    next = start;
    int fetch = r;
    while (fetch > 0 && p.fwd_begin_ms(fetch) > start) --fetch;
    all_fetch[r] = fetch;
  }
  // Appends v's offers: the narrowest first, the widest last, each span once.
  auto offer = [&](StateOffer o) {
    const StateOffer* back = p.states.empty() ? nullptr : &p.states.back();
    if (back && back->value == o.value && back->first == o.first && back->last == o.last && back->fetch == o.fetch)
      return;
    p.states.push_back(o);
  };
  p.states.clear();
  for (int u = 1; u + 1 < T; ++u) {
    const PlanNode& n = plan.nodes[p.steps[u]];
    if (n.stage != Stage::update) continue;
    for (int v : std::set<int>(n.inputs.begin(), n.inputs.end())) {
      if (!is_state(v, u)) continue;
      const double in = link.copy_ms(plan.values[v].bytes, false);
      const double out = link.copy_ms(plan.values[v].bytes, true);
      offer({v, u, u - 1, u + 1, in, out});
      offer({v, u, first_covering(u, in), last_covering(u, out), in, out});
      const int first = first_covering(u, in_together[u]), last = last_covering(u, out_together[u]);
      offer({v, u, first, last, in, out});
      offer({v, u, all_first[u] >= 0 ? std::min(first, all_first[u]) : first, std::max(last, all_last[u]), in, out});
    }
  }
  for (int u = 0; u + 1 < T; ++u) {
    const PlanNode& n = plan.nodes[p.steps[u]];
    if (n.stage != Stage::update) continue;
    for (int v : std::set<int>(n.inputs.begin(), n.inputs.end())) {
      if (is_state(v, u) || !is_parameter(v, u)) continue;
      const double in = link.copy_ms(plan.values[v].bytes, false);
      const double out = link.copy_ms(plan.values[v].bytes, true);
      // The fewest stage-0 positions before its reader whose times cover its copy in.
      int fetch = reader[v];
      for (double ms = 0; fetch > 0 && ms < in;) {
        --fetch;
        ms += p.fwd_position_ms(fetch);
      }
      offer({v, u, -1, u + 1, in, out, reader[v], fetch});
      offer({v, u, -1, last_covering(u, out), in, out, reader[v], fetch});
      const int last = last_covering(u, out_together[u]);
      offer({v, u, -1, last, in, out, reader[v], fetch});
      offer({v, u, -1, std::max(last, all_last[u]), in, out, reader[v],
             all_fetch[reader[v]] >= 0 ? std::min(fetch, all_fetch[reader[v]]) : fetch});
    }
  }
  index_state_offers(p);
  std::set<std::pair<int, int>> spans;  // (need, first)
  p.copy_in_from = -1;
  for (const CopyIn& c : copy_in_offers(p)) {
    spans.insert({c.need, c.first});
    p.copy_in_from = p.copy_in_from < 0 ? c.first : std::min(p.copy_in_from, c.first);
  }
  // And from the earliest first step to each need: every copy needed by then, whatever its own span, in the time
  // from there. Spans that overlap without nesting leave that total out: with every idle value of ResNet-50 b184
  // offloaded (H200 profile, 50 GB/s) the own spans counted 78.8 ms of waits for copies back and the engine's
  // streams 246.5 ms (monet_bench_copy_plan --idle); with these, 246.5 ms.
  for (const auto& [need, first] : std::set<std::pair<int, int>>(spans)) spans.insert({need, p.copy_in_from});
  p.copy_in_spans.clear();
  for (auto [need, first] : spans) p.copy_in_spans.push_back({first, need});
}

std::vector<CopyIn> copy_in_offers(const CheckpointProblem& p) {
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  std::vector<CopyIn> out;
  for (int t = 1; t < T; ++t)
    for (int f = 0; f < nf; ++f)
      if (p.has_g(t, f)) out.push_back({t, p.prefetch_first(t, f), f, p.copy_in_ms[f]});
  return out;
}

int CheckpointProblem::prefetch_first(int t, int f) const {
  int first = t - 1;
  if (lean_take(copy_timing)) return first;
  for (double ms = step_ms[first]; ms < copy_in_ms[f] && first > 0 && t - first < kCopySpanSteps;) ms += step_ms[--first];
  return first;
}

double CopyWaits::total() const {
  double sum = fwd + parameters_in;
  for (double w : step) sum += w;
  return sum;
}

Stage0Copies stage0_copies(const CheckpointProblem& p, const std::vector<char>& H, const std::vector<int>* P) {
  const int F = p.num_fwd(), nf = static_cast<int>(p.fvals.size());
  Stage0Copies c;
  c.wait.assign(F + 1, 0.0);
  c.run.assign(F + 1, {});
  if (!p.offload() || H.empty()) return c;
  std::vector<std::vector<int>> released(F + 1);  // [k]: the copies that may run from position k on
  for (int f = 0; f < nf; ++f)
    if (H[f] && p.copy_out_ms[f] > 0) released[p.out_slots(f).first].push_back(f);
  std::set<std::pair<int, int>> ready;  // (the position it is due at, fval)
  std::vector<double> left(nf, 0.0);
  for (int k = 0; k <= F; ++k) {
    for (int f : released[k]) {
      ready.insert({p.offload_at[f], f});
      left[f] = p.copy_out_ms[f];
    }
    double free = p.fwd_position_ms(k) + (P && k < F ? p.fwd_impl_ms[k][(*P)[k]] : 0.0);  // the node's time
    // The copies due first run first, in the node's time and then, those due at k, in the wait after it.
    while (!ready.empty() && (free > 0 || ready.begin()->first == k)) {
      const int f = ready.begin()->second;
      const bool due = ready.begin()->first == k;
      const double ms = due ? left[f] : std::min(free, left[f]);
      c.run[k].push_back({f, ms});
      if (ms > free) c.wait[k] += ms - std::max(free, 0.0);
      free -= ms;
      left[f] -= ms;
      if (due || left[f] <= 0) ready.erase(ready.begin());
    }
    c.total += c.wait[k];
  }
  return c;
}

CopyWaits copy_waits(const CheckpointProblem& p, const Assignment& a) {
  CopyWaits w;
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  w.step.assign(T, 0.0);
  w.begin_ms.assign(T + 1, 0.0);
  if (!p.offload() || a.H.empty()) return w;
  for (int f = 0; f < nf; ++f)
    if (a.H[f]) w.preference += kCopyPreference * (p.copy_out_ms[f] + p.copy_in_ms[f]);
  auto overlap = [&](int t) {  // step t's node and recomputations, each under its implementation
    double ms = p.step_ms[t] + p.impl_ms[t][a.M[t]];
    for (int k : p.candidates[t])
      if (a.R[t][k]) ms += p.time_ms(k) + p.fwd_impl_ms[k][a.P[k]];
    return ms;
  };
  auto fwd_delta_ms = [&](int from, int to) {  // stage-0 positions from..to-1: their implementations' deltas
    double ms = 0;
    for (int k = from; k < to && k < p.num_fwd(); ++k) ms += p.fwd_impl_ms[k][a.P[k]];
    return ms;
  };
  for (int s = 0; s < p.num_states() && !a.Q.empty(); ++s)
    if (a.Q[s]) w.preference += kCopyPreference * (p.states[s].in_ms + p.states[s].out_ms);
  for (const NestedSpan& span : p.fetch_spans) {
    double ms = 0;  // the parameters' copies in within [fetch, reader]
    for (int s : span.within)
      if (!a.Q.empty() && a.Q[s]) ms += p.states[s].in_ms;
    if (ms > 0)
      w.parameters_in = std::max(w.parameters_in, ms - (p.fwd_begin_ms(span.last) - p.fwd_begin_ms(span.first) +
                                                        fwd_delta_ms(span.first, span.last)));
  }
  w.fwd = stage0_copies(p, a.H, &a.P).total;
  // Each step starts as early as the spans let it (copy_in_spans and the state spans, in the order of their `need`).
  std::vector<std::vector<std::pair<int, double>>> into(T);  // [need]: (first, ms) of a's copies
  for (const CopyIn& c : copy_in_offers(p))
    if (!a.G.empty() && a.G[c.need][c.f]) into[c.need].push_back({c.first, c.ms});
  // need -> the resident values' copies ending there (the state spans, last = need): their start and time.
  std::vector<std::vector<std::pair<int, double>>> state_into(T + 1);
  for (const std::vector<NestedSpan>* spans : {&p.state_in_spans, &p.state_out_spans})
    for (const NestedSpan& span : *spans) {
      double ms = 0;
      for (int s : span.within)
        if (!a.Q.empty() && a.Q[s]) ms += spans == &p.state_out_spans ? p.states[s].out_ms : p.states[s].in_ms;
      if (ms > 0) state_into[span.last].push_back({span.first, ms});
    }
  size_t next = 0;
  for (int t = 1; t <= T; ++t) {
    const double ready = w.begin_ms[t - 1] + overlap(t - 1);
    double begin = ready;
    for (; next < p.copy_in_spans.size() && p.copy_in_spans[next].second <= t; ++next) {
      const auto [first, need] = p.copy_in_spans[next];
      double ms = 0;  // the copies within [first, need]
      for (int u = first + 1; u <= need; ++u)
        for (auto [from, copy_ms] : into[u])
          if (from >= first) ms += copy_ms;
      if (ms > 0) begin = std::max(begin, w.begin_ms[first] + ms);
    }
    for (auto [first, ms] : state_into[t]) begin = std::max(begin, w.begin_ms[first] + ms);
    w.begin_ms[t] = begin;
    w.step[t - 1] = begin - ready;
  }
  return w;
}

namespace {

// The optimizer state to the host (each value's widest offer, within the host limit) and the idle kept values that
// could follow, latest first use first: offload_idle_kept's two parts. Returns the candidates, each with its first
// use; `host` is the host bytes so far.
std::vector<std::pair<int, int>> home_state_and_idle(const CheckpointProblem& p, Assignment& a, int64_t& host) {
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  if (a.H.empty()) {
    a.H.assign(nf, 0);
    a.G.assign(T, std::vector<char>(nf, 0));
    a.Q.assign(p.states.size(), 0);
  }
  host = 0;
  for (int f = 0; f < nf; ++f)
    if (a.H[f]) host += p.bytes(f);
  std::set<int> homed;  // values with an offer taken
  for (int s = 0; s < p.num_states(); ++s)
    if (a.Q[s]) {
      host += p.state_bytes(s);
      homed.insert(p.states[s].value);
    }
  for (int s = p.num_states(); s-- > 0;)  // a value's widest offer comes last
    if (!homed.count(p.states[s].value) && (p.host_limit_bytes == 0 || host + p.state_bytes(s) <= p.host_limit_bytes)) {
      a.Q[s] = 1;
      homed.insert(p.states[s].value);
      host += p.state_bytes(s);
    }
  // The first step that reads each value (its node, or a recomputation it runs), as trim() counts uses.
  std::vector<int> first(nf, T);
  for (int t = T; t-- > 0;) {
    for (int f : p.needs[t]) first[f] = t;
    for (int f : p.impl_extra[t][a.M[t]]) first[f] = t;
    for (int k : p.candidates[t])
      if (a.R[t][k])
        for (int f : p.fwd_inputs[k]) first[f] = t;
  }
  std::vector<std::pair<int, int>> idle;  // (value, first use)
  for (int f = 0; f < nf; ++f) {
    if (!p.offloadable[f] || a.H[f] || !a.S[0][f]) continue;
    const int u = first[f];
    if (u == 0 || u >= T || !p.has_g(u, f)) continue;
    bool held = true;  // kept from the forward pass into step u, never recomputed meanwhile
    for (int t = 0; t <= u && held; ++t) held = a.S[t][f] && !a.R[t][p.producer[f]];
    if (held) idle.push_back({f, u});
  }
  std::stable_sort(idle.begin(), idle.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  return idle;
}

// Offloads the first `count` of `idle` that the host limit lets in.
void offload_first(const CheckpointProblem& p, Assignment& a, const std::vector<std::pair<int, int>>& idle,
                   size_t count, int64_t host) {
  for (size_t i = 0; i < count && i < idle.size(); ++i) {
    const auto [f, u] = idle[i];
    if (p.host_limit_bytes > 0 && host + p.bytes(f) > p.host_limit_bytes) continue;
    for (int t = 0; t <= u; ++t) a.S[t][f] = 0;
    a.G[u][f] = 1;
    a.H[f] = 1;
    host += p.bytes(f);
  }
}

}  // namespace

Assignment offload_idle_kept(const CheckpointProblem& p, Assignment a) {
  if (!p.offload() || p.num_steps() == 0) return a;
  int64_t host = 0;
  const std::vector<std::pair<int, int>> idle = home_state_and_idle(p, a, host);
  offload_first(p, a, idle, idle.size(), host);
  return a;
}

Assignment offload_idle_kept(const CheckpointProblem& p, Assignment a, int64_t budget_bytes) {
  if (!p.offload() || p.num_steps() == 0) return a;
  int64_t host = 0;
  const std::vector<std::pair<int, int>> idle = home_state_and_idle(p, a, host);
  auto with = [&](size_t count) {
    Assignment b = a;
    offload_first(p, b, idle, count, host);
    return b;
  };
  auto fits = [&](const Assignment& b) {
    const Evaluation e = evaluate(p, b);
    return e.feasible && e.peak_bytes <= budget_bytes;
  };
  if (fits(a)) return a;
  Assignment all = with(idle.size());
  if (!fits(all)) return all;
  size_t lo = 0, hi = idle.size();  // with lo none fits; with hi they do
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (fits(with(mid)) ? hi : lo) = mid;
  }
  return with(hi);
}

void trim(const CheckpointProblem& p, Assignment& a) {
  const int T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  std::vector<int> last(nf, -1);
  for (int t = 0; t < T; ++t) {
    for (int f : p.needs[t]) last[f] = t;
    for (int f : p.impl_extra[t][a.M[t]]) last[f] = t;
    for (int k : p.candidates[t])
      if (a.R[t][k])
        for (int f : p.fwd_inputs[k]) last[f] = t;
  }
  for (int f = 0; f < nf; ++f)
    for (int t = last[f] + 1; t < T; ++t) {
      a.S[t][f] = 0;
      if (a.prefetched(t, f)) a.G[t][f] = a.H[f] = 0;  // brought back for nothing
    }
}

int in_place_at(const CheckpointProblem& p, int t, size_t i, const std::vector<char>& R, const std::vector<char>* next) {
  const int f = p.rec_in_place[t][i];
  if (f < 0 || !R[p.candidates[t][i]] || !R[p.producer[f]] || (next && (*next)[f])) return -1;
  return f;
}

int64_t step_peak(const CheckpointProblem& p, int t, const std::vector<char>& S, const std::vector<char>& R,
                  const std::vector<char>* next, int impl, const std::vector<int>* fwd, int64_t incoming) {
  const int nf = static_cast<int>(p.fvals.size());
  auto kept_on = [&](int f) { return next && (*next)[f]; };
  // Kept values: those the step may use until its node runs, the others only if they are kept on; and what is being
  // prefetched for the next step.
  int64_t kept = incoming;
  for (int f = 0; f < nf; ++f)
    if (p.used[t][f] ? S[f] : kept_on(f)) kept += p.bytes(f);
  // Recomputations, in order: outputs accumulate; a value no later candidate reads leaves unless kept on (a kept
  // value that was also present on entry is counted above already) - at once when the candidate overwrites it.
  int64_t peak = 0, recomputed = 0;
  const std::vector<int>& cand = p.candidates[t];
  int overwritten = -1;
  for (size_t i = 0; i < cand.size(); ++i) {
    const int k = cand[i];
    if (i > 0)
      for (int f : p.freed_after[t][i - 1])
        if (f != overwritten && R[p.producer[f]] && !(kept_on(f) && !S[f])) recomputed -= p.bytes(f);
    overwritten = in_place_at(p, t, i, R, next);
    if (overwritten >= 0) recomputed -= p.bytes(overwritten);
    if (R[k]) recomputed += p.out_bytes[k];
    const int64_t ws = R[k] ? p.fwd_ws[k] + (fwd ? p.fwd_impl_ws[k][(*fwd)[k]] : 0) : 0;
    peak = std::max(peak, p.bwd_base[t] + kept + recomputed + ws);
  }
  // The node: what its implementation reads, and what is kept on.
  int64_t node = p.bwd_fixed[t] + p.impl_ws[t][impl] + incoming;
  for (int f = 0; f < nf; ++f) {
    if (!p.read[t][f]) {
      if (kept_on(f)) node += p.bytes(f);
      continue;
    }
    if (p.read_by(t, impl, f) || kept_on(f)) node += p.bytes(f);  // read, kept on, or both: one buffer
  }
  return std::max(peak, node);
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
  if (!a.H.empty() && !p.offload()) return bad("offload in a problem without it");
  // Offload: H where it may be, each offloaded value prefetched exactly once, into a step that uses it and that it
  // is neither kept into nor recomputed in, over steps that neither hold it nor recompute it.
  for (int f = 0; f < nf && !a.H.empty(); ++f) {
    int prefetches = 0;
    for (int t = 0; t < T; ++t) {
      if (!a.G[t][f]) continue;
      ++prefetches;
      const std::string at = "G[" + std::to_string(t) + "] prefetches '" + name(f) + "'";
      if (!p.has_g(t, f)) return bad(at + " into a step that does not use it");
      if (a.S[t][f] || a.R[t][p.producer[f]]) return bad(at + ", which the step holds otherwise");
      for (int u = p.prefetch_first(t, f); u < t; ++u)
        if (a.S[u][f] || a.R[u][p.producer[f]]) return bad(at + " while step " + std::to_string(u) + " holds it");
    }
    if (a.H[f] && !p.has_h(f)) return bad("H offloads '" + name(f) + "', which no step after the first uses");
    for (int t = 0; t < T && a.H[f] && !a.G[t][f]; ++t)
      if (a.R[t][p.producer[f]])
        return bad("step " + std::to_string(t) + " recomputes '" + name(f) + "' while it is on the host");
    if (a.H[f] && T > 0 && a.S[0][f]) return bad("H offloads '" + name(f) + "', which is kept into step 0");
    if (prefetches != (a.H[f] ? 1 : 0))
      return bad("'" + name(f) + "' is prefetched " + std::to_string(prefetches) + " times, offloaded " +
                 std::to_string(static_cast<int>(a.H[f])));
    if (a.H[f]) e.host_bytes += p.bytes(f);
  }
  if (!a.Q.empty() && a.Q.size() != p.states.size()) return bad("Q is not one bit per optimizer state");
  std::set<int> homed;
  for (int s = 0; s < p.num_states() && !a.Q.empty(); ++s)
    if (a.Q[s]) {
      if (!homed.insert(p.states[s].value).second)
        return bad("Q takes two offers of '" + p.plan->values[p.states[s].value].name + "'");
      e.host_bytes += p.state_bytes(s);
    }
  if (p.host_limit_bytes > 0 && e.host_bytes > p.host_limit_bytes)
    return bad("offloads " + std::to_string(e.host_bytes) + " bytes, above the host limit");
  for (int k = 0; k < F; ++k) {
    if (a.P[k] < 0 || a.P[k] >= p.num_fwd_impls(k))
      return bad("P[" + std::to_string(k) + "] is not an implementation");
    if (const int lean = p.lean_choice(k, a.M); lean >= 0 && a.P[k] != lean)
      return bad("P[" + std::to_string(k) + "] " + (lean == 0 ? "runs lean while a step reads its optional outputs"
                                                               : "writes optional outputs that no step reads"));
    if (!p.fwd_lean.empty() && p.fwd_lean[k] >= 0 && a.P[k] == p.fwd_lean[k])
      for (int v : p.plan->nodes[p.fwd_nodes[k]].optional_outputs) {
        const int f = p.fval_of[v];
        for (int t = 0; t < T; ++t)
          if (a.S[t][f]) return bad("S[" + std::to_string(t) + "] keeps '" + name(f) + "', which the lean run does not write");
        if (a.on_host(f)) return bad("H offloads '" + name(f) + "', which the lean run does not write");
      }
    e.recompute_ms += p.fwd_impl_ms[k][a.P[k]];
  }
  // Stage 0: values kept into step 0 stay live after their last stage-0 reader; offloaded ones until offload_at.
  // The offloaded optimizer state is on the host throughout.
  int64_t kept = -states_away(p, a, -1);
  std::vector<int64_t> fetched(F + 1, 0);  // [k]: the parameters on the host back from stage-0 position k > 0
  for (int s : p.parameter_offers)
    if (!a.Q.empty() && a.Q[s] && p.states[s].fetch > 0) fetched[p.states[s].fetch] += p.state_bytes(s);
  for (int k = 0; k <= F; ++k) {
    kept += fetched[k];
    const int ip = k < F ? p.fwd_in_place[k] : -1;
    const int64_t ws = k < F ? p.fwd_impl_ws[k][a.P[k]] : 0;
    const bool over = ip >= 0 && T > 0 && (a.S[0][ip] || a.on_host(ip));
    e.peak_bytes = std::max(e.peak_bytes, p.fwd_fixed[k] + ws + kept + (over ? p.bytes(ip) : 0));
    for (int f : p.fwd_released[k])
      if (T > 0 && (a.S[0][f] || a.on_host(f))) kept += p.bytes(f);
    if (p.offload())
      for (int f : p.fwd_offloaded[k])
        if (a.on_host(f)) kept -= p.bytes(f);
  }
  std::vector<int64_t> incoming(T, 0);  // [t]: the bytes being prefetched during step t for later steps
  for (int t = 1; t < T && !a.G.empty(); ++t)
    for (int f = 0; f < nf; ++f)
      if (a.G[t][f])
        for (int u = p.prefetch_first(t, f); u < t; ++u) incoming[u] += p.bytes(f);
  std::vector<char> held(nf, 0);  // S[t] and what was prefetched into step t
  for (int t = 0; t < T; ++t) {
    for (int f = 0; f < nf; ++f) held[f] = a.S[t][f] || a.prefetched(t, f);
    auto present = [&](int f) { return held[f] || a.R[t][p.producer[f]]; };
    const int impl = a.M[t];
    if (impl < 0 || impl >= p.num_impls(t)) return bad("M[" + std::to_string(t) + "] is not an implementation");
    e.recompute_ms += p.impl_ms[t][impl];
    for (const std::vector<int>* reads : {&p.needs[t], &p.impl_extra[t][impl]})
      for (int f : *reads)
        if (!present(f))
          return bad("step " + std::to_string(t) + " reads '" + name(f) + "', neither kept nor recomputed");
    for (int k = 0; k < F; ++k) {
      if (!a.R[t][k]) continue;
      e.recompute_ms += p.time_ms(k) + p.fwd_impl_ms[k][a.P[k]];
      for (int f : p.fwd_inputs[k])
        if (!present(f)) return bad("step " + std::to_string(t) + " recomputes node " + std::to_string(k) + " without its input '" + name(f) + "'");
    }
    e.peak_bytes = std::max(e.peak_bytes, step_peak(p, t, held, a.R[t], t + 1 < T ? &a.S[t + 1] : nullptr, impl,
                                                    &a.P, incoming[t]) - states_away(p, a, t));
    if (t + 1 < T)
      for (int f = 0; f < nf; ++f)
        if (a.S[t + 1][f] && !present(f))
          return bad("S[" + std::to_string(t + 1) + "] keeps '" + name(f) + "', which step " + std::to_string(t) + " did not hold");
  }
  const CopyWaits waits = copy_waits(p, a);
  e.copy_wait_ms = waits.total();
  e.recompute_ms += e.copy_wait_ms + waits.preference;
  e.feasible = true;
  return e;
}

Schedule extract_schedule(const CheckpointProblem& p, const Assignment& a, const std::string& mode) {
  const PlanGraph& plan = *p.plan;
  const int F = p.num_fwd(), T = p.num_steps(), nf = static_cast<int>(p.fvals.size());
  Schedule s;
  s.mode = mode;
  for (int q = 0; q < p.num_states() && !a.Q.empty(); ++q)
    if (a.Q[q]) s.on_host.push_back(p.states[q].value);
  std::vector<char> live(plan.values.size(), 0);
  auto compute = [&](int node, int impl, int in_place = -1) {
    Step step = compute_step(plan, node, impl);
    step.in_place = in_place;
    s.steps.push_back(step);
    if (in_place >= 0) live[in_place] = 0;  // ends here, without a free step
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

  // Stage 0; an offloaded value is copied to the host (and its device memory released) after its offload_at. The
  // parameters at home on the host come back from the start of position `fetch`, in the order of their readers.
  for (int k = 0; k <= F; ++k) {
    for (int q : p.parameter_offers)
      if (!a.Q.empty() && a.Q[q] && p.states[q].fetch == k) s.steps.push_back({Step::Kind::prefetch, p.states[q].value});
    const int node = k < F ? p.fwd_nodes[k] : p.loss_node;
    const int ip = k < F ? p.fwd_in_place[k] : -1;
    if (node >= 0)
      compute(node, k < F ? p.fwd_plan_impl(k, a.P[k]) : 0, ip >= 0 && (T == 0 || (!a.S[0][ip] && !a.on_host(ip))) ? p.fvals[ip] : -1);
    for (int f : p.fwd_released[k])
      if (T == 0 || (!a.S[0][f] && !a.on_host(f))) release(p.fvals[f]);
    if (p.offload())
      for (int f : p.fwd_offloaded[k])
        if (a.on_host(f)) {
          live[p.fvals[f]] = 0;
          s.steps.push_back({Step::Kind::offload, p.fvals[f]});
        }
    if (k == F && node >= 0)
      for (int v : plan.nodes[node].outputs)
        if (grad_last[v] < 0) release(v);
  }
  // Steps, freeing where step_peak() stops counting; what step u gets back from the host is prefetched at the
  // start of step prefetch_first(u, f).
  std::vector<int> need(nf, -1), first(nf, -1);  // an offloaded value's prefetch: into step need, from step first
  for (int u = 1; u < T && !a.G.empty(); ++u)
    for (int f = 0; f < nf; ++f)
      if (a.G[u][f]) {
        need[f] = u;
        first[f] = p.prefetch_first(u, f);
      }
  for (int t = 0; t < T; ++t) {
    // Kept into step t+1, or on its way back for a later step.
    auto kept_on = [&](int f) { return t + 1 < T && (a.S[t + 1][f] || (first[f] <= t && need[f] > t)); };
    for (int f = 0; f < nf; ++f)  // kept into this step, which cannot use it
      if (!p.used[t][f] && !kept_on(f)) release(p.fvals[f]);
    auto prefetch = [&] {
      for (int f = 0; f < nf; ++f)
        if (first[f] == t) {
          live[p.fvals[f]] = 1;
          s.steps.push_back({Step::Kind::prefetch, p.fvals[f]});
        }
      for (int q = 0; q < p.num_states() && !a.Q.empty(); ++q)  // the optimizer state whose span starts here
        if (a.Q[q] && p.states[q].first == t) s.steps.push_back({Step::Kind::prefetch, p.states[q].value});
    };
    const std::vector<int>& cand = p.candidates[t];
    // Before the recomputations, whose points count what the step holds and the prefetched bytes; in a step without
    // candidates, where only its node is counted, once what the node does not read has gone.
    if (!cand.empty()) prefetch();
    for (size_t i = 0; i < cand.size(); ++i) {
      const int k = cand[i];
      if (a.R[t][k]) {
        const int node = p.fwd_nodes[k];
        for (int v : plan.nodes[node].outputs) release(v);  // a kept copy is replaced by the identical recomputation
        const int over = in_place_at(p, t, i, a.R[t], t + 1 < T ? &a.S[t + 1] : nullptr);
        compute(node, p.fwd_plan_impl(k, a.P[k]), over >= 0 ? p.fvals[over] : -1);
      }
      for (int f : p.freed_after[t][i])  // no later recomputation of this step reads it, nor its node
        if (!kept_on(f)) release(p.fvals[f]);
    }
    const int node = p.steps[t];
    for (int f = 0; f < nf; ++f)  // what the node does not read
      if (!kept_on(f) && !p.read_by(t, a.M[t], f)) release(p.fvals[f]);
    if (cand.empty()) prefetch();
    compute(node, a.M[t], p.bwd_in_place[t][a.M[t]]);
    std::vector<int> touched = plan.nodes[node].inputs;
    touched.insert(touched.end(), plan.nodes[node].outputs.begin(), plan.nodes[node].outputs.end());
    for (int v : touched)
      if (!plan.values[v].resident && p.fval_of[v] < 0 && grad_last[v] <= t) release(v);
    for (int f = 0; f < nf; ++f)
      if (!kept_on(f)) release(p.fvals[f]);
    for (int q = 0; q < p.num_states() && !a.Q.empty(); ++q)  // the optimizer state whose span ends here, back home
      if (a.Q[q] && p.states[q].last == t) s.steps.push_back({Step::Kind::offload, p.states[q].value});
  }
  return s;
}

}  // namespace monet
