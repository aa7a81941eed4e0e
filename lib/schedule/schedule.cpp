#include "schedule/schedule.h"

#include <algorithm>

#include "core/error.h"
#include "ops/op.h"

namespace monet {

std::vector<int> resident_values(const Graph& g) {
  std::vector<char> read(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (int v : n.inputs) read[v] = 1;
  std::vector<int> out;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (read[v] && is_persistent(g.values[v].role)) out.push_back(static_cast<int>(v));
  return out;
}

PlanGraph plan_of(const Graph& g, const WorkspaceFn& workspace_bytes, int float_bytes) {
  PlanGraph p;
  std::vector<char> resident(g.values.size(), 0);
  for (int v : resident_values(g)) resident[v] = 1;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    p.values.push_back({val.name, tensor_bytes(val.shape, val.dtype, float_bytes), resident[v] != 0, val.producer});
  }
  for (const Node& n : g.nodes) {
    PlanNode pn;
    pn.name = n.name;
    pn.op = n.op;
    pn.inputs = n.inputs;
    pn.outputs = n.outputs;
    pn.workspace_bytes = workspace_bytes ? workspace_bytes(n, 0) : 0;
    const std::vector<ImplDef> impls = impls_of(n);
    for (size_t i = 0; impls.size() > 1 && i < impls.size(); ++i) {
      PlanImpl impl{std::string(impls[i].name), {}, 0,
                    i == 0 || !workspace_bytes ? pn.workspace_bytes : workspace_bytes(n, static_cast<int>(i))};
      impl.in_place = impls[i].in_place;
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (impls[i].reads_input(static_cast<int>(k))) impl.inputs.push_back(n.inputs[k]);
      pn.impls.push_back(std::move(impl));
    }
    if (!pn.impls.empty()) pn.inputs = pn.impls[0].inputs;
    const OpDef& def = op_def(n.op);
    for (int o : def.optional_outputs)
      if (o < static_cast<int>(n.outputs.size())) pn.optional_outputs.push_back(n.outputs[static_cast<size_t>(o)]);
    for (int i : def.in_place) {
      if (i >= static_cast<int>(n.inputs.size())) continue;  // Sum of one input: no second addend
      const int v = n.inputs.at(static_cast<size_t>(i));
      // Same shape and dtype (equal bytes are not enough: a broadcast operand may round up to the same block); a
      // view's input has its output's elements under another shape.
      const Value& x = g.values[v];
      const bool same = !n.outputs.empty() && x.dtype == g.values[n.outputs[0]].dtype &&
                        (def.view ? numel(x.shape) == numel(g.values[n.outputs[0]].shape)
                                  : x.shape == g.values[n.outputs[0]].shape);
      if (!resident[v] && x.producer >= 0 && same &&
          std::find(pn.in_place.begin(), pn.in_place.end(), v) == pn.in_place.end())
        pn.in_place.push_back(v);
    }
    if (n.op == "SgdUpdate") pn.stage = Stage::update;  // the rest is stage-less here (make_plan_graph knows)
    p.nodes.push_back(std::move(pn));
  }
  return p;
}

Step compute_step(const PlanGraph& p, int node, int impl) {
  Step step{Step::Kind::compute, node, p.nodes[node].op_impl(impl)};
  step.algo = p.nodes[node].algo(impl);
  return step;
}

Schedule store_all_schedule(const PlanGraph& p, const std::vector<int>& impl) {
  auto impl_of = [&](size_t n) { return n < impl.size() ? impl[n] : 0; };
  std::vector<int> last_use(p.values.size(), -1);
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    for (int v : p.nodes[n].outputs) last_use[v] = static_cast<int>(n);
    for (int v : p.nodes[n].reads(impl_of(n))) last_use[v] = static_cast<int>(n);
  }
  Schedule s;
  s.mode = "store-all";
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    Step step = compute_step(p, static_cast<int>(n), impl_of(n));
    const std::vector<int>& reads = p.nodes[n].reads(impl_of(n));
    for (int v : p.nodes[n].impl_in_place(impl_of(n)) ? p.nodes[n].in_place : std::vector<int>{})  // the first input that ends here
      if (last_use[v] == static_cast<int>(n) && std::find(reads.begin(), reads.end(), v) != reads.end()) {
        step.in_place = v;
        last_use[v] = -2;  // ends here: no free step
        break;
      }
    s.steps.push_back(step);
    std::vector<int> touched = reads;
    touched.insert(touched.end(), p.nodes[n].outputs.begin(), p.nodes[n].outputs.end());
    for (int v : touched) {
      if (p.values[v].resident || last_use[v] != static_cast<int>(n)) continue;
      last_use[v] = -2;  // freed once even if the node reads it twice
      s.steps.push_back({Step::Kind::free, v});
    }
  }
  return s;
}

Schedule store_all_schedule(const Graph& g) { return store_all_schedule(plan_of(g, nullptr, 4)); }

Schedule store_all_like(const PlanGraph& p, const Schedule& s) {
  std::vector<int> impl(p.nodes.size(), 0), algo(p.nodes.size(), -1);
  std::vector<bool> seen(p.nodes.size(), false);
  for (const Step& st : s.steps) {
    if (st.kind != Step::Kind::compute || seen.at(st.id)) continue;
    seen[st.id] = true;
    const PlanNode& n = p.nodes[st.id];
    // On a backend's plan an algorithm is no variant of its own: the step names it, the plan node runs it.
    const int i = n.impl_for(st.impl, st.algo);
    if (i < 0) fail("node '", n.name, "': implementation ", st.impl, " (algorithm ", st.algo, ") is not in the plan");
    impl[st.id] = i;
    algo[st.id] = st.algo;
  }
  Schedule r = store_all_schedule(p, impl);
  for (Step& st : r.steps)
    if (st.kind == Step::Kind::compute) st.algo = algo[st.id];
  return r;
}

namespace {

// Per value: read by the implementation of some compute step of s.
std::vector<char> values_read(const PlanGraph& p, const Schedule& s) {
  std::vector<char> read(p.values.size(), 0);
  for (const Step& st : s.steps) {
    if (st.kind != Step::Kind::compute || st.id < 0 || st.id >= static_cast<int>(p.nodes.size())) continue;
    const int impl = p.nodes[st.id].impl_for(st.impl, st.algo);
    if (impl < 0) continue;
    for (int v : p.nodes[st.id].reads(impl)) read[v] = 1;
  }
  return read;
}

}  // namespace

std::vector<char> unwritten_values(const PlanGraph& p, const Schedule& s) {
  const std::vector<char> read = values_read(p, s);
  std::vector<char> unwritten(p.values.size(), 0);
  for (const PlanNode& n : p.nodes)
    for (int v : n.optional_outputs) unwritten[v] = !read[v];
  return unwritten;
}

std::vector<char> lean_nodes(const PlanGraph& p, const Schedule& s) { return lean_nodes(p, values_read(p, s)); }

namespace {

// Pairs of nodes with more than one implementation that touch a common value (produce it, or read it under some
// implementation): the nodes whose choices decide together whether a value is read at all, or may be overwritten
// in place (a Clip over its input only where no later reader's implementation reads that input).
std::vector<std::pair<int, int>> coupled_nodes(const PlanGraph& p) {
  std::vector<std::vector<int>> touching(p.values.size());
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    const PlanNode& node = p.nodes[n];
    if (node.num_impls() < 2) continue;
    auto touch = [&](int v) {
      if (touching[v].empty() || touching[v].back() != static_cast<int>(n)) touching[v].push_back(static_cast<int>(n));
    };
    for (int v : node.outputs) touch(v);
    for (int i = 0; i < node.num_impls(); ++i)
      for (int v : node.reads(i)) touch(v);
  }
  std::vector<std::pair<int, int>> pairs;
  for (const std::vector<int>& nodes : touching)
    for (size_t a = 0; a < nodes.size(); ++a)
      for (size_t b = a + 1; b < nodes.size(); ++b) pairs.push_back({nodes[a], nodes[b]});
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

// Descent over each node's implementations from `impl`, in two phases. First memory alone: a change kept when it
// lowers the bytes in use at the steps, highest first (below), by changes of one node and, where none of those is
// kept, of two coupled nodes at once (coupled_nodes), then single changes again after one is kept: one node's change
// alone can leave the peak where it was (a value still read by the other), where the two together lower it. Then
// time, by the same moves: a change kept when it is faster at a peak within 0.01% of the first phase's and not above
// the start's (peaks within 0.01% count as equal: a few hundred bytes, a BatchNorm's saved mean, do not buy a
// slower kernel). Time is traded only once the peak is settled: a faster implementation with more workspace taken
// early fills a step up to the peak and blocks the changes that lower it later.
std::pair<std::vector<int>, SimResult> descend_store_all_peak(const PlanGraph& p, std::vector<int> impl) {
  // The bytes in use at every compute step, highest first (the first is the peak): a change that leaves the peak
  // where it is but lowers the highest steps below it is kept too (several steps at the peak, each lowered by
  // another node's change). Descending order compared lexicographically is a strict order: the descent ends.
  auto levels = [](const std::vector<MemoryPoint>& timeline) {
    std::vector<int64_t> l;
    l.reserve(timeline.size());
    for (const MemoryPoint& m : timeline) l.push_back(m.total());
    std::sort(l.begin(), l.end(), std::greater<>());
    return l;
  };
  std::vector<MemoryPoint> timeline;
  SimResult best = simulate(p, store_all_schedule(p, impl), &timeline);
  std::vector<int64_t> best_levels = levels(timeline);
  const int64_t start = best.peak_bytes;
  bool peak_phase = true;
  int64_t cap = 0;  // the time phase's: the first phase's peak within 0.01%, never above the start's
  // Whether the implementations now in `impl` are kept (else the caller restores them).
  auto better = [&]() {
    timeline.clear();
    const SimResult r = simulate(p, store_all_schedule(p, impl), peak_phase ? &timeline : nullptr);
    bool keep;
    if (peak_phase) {
      std::vector<int64_t> l = levels(timeline);
      keep = l < best_levels;
      if (keep) best_levels = std::move(l);
    } else {
      keep = r.peak_bytes <= cap && r.time_ms < best.time_ms - 1e-9;
    }
    if (keep) best = r;
    return keep;
  };
  auto singles = [&]() {
    bool changed = false;
    for (size_t n = 0; n < p.nodes.size(); ++n)
      for (int i = 0; i < p.nodes[n].num_impls(); ++i) {
        if (i == impl[n]) continue;
        const int was = impl[n];
        impl[n] = i;
        if (better()) changed = true;
        else impl[n] = was;
      }
    return changed;
  };
  const std::vector<std::pair<int, int>> pairs = coupled_nodes(p);
  auto pair_changes = [&]() {
    bool changed = false;
    for (const auto& [a, b] : pairs)
      for (int i = 0; i < p.nodes[a].num_impls(); ++i)
        for (int j = 0; j < p.nodes[b].num_impls(); ++j) {
          if (i == impl[a] || j == impl[b]) continue;  // a single change: tried by singles
          const int was_a = impl[a], was_b = impl[b];
          impl[a] = i;
          impl[b] = j;
          if (better()) {
            changed = true;
          } else {
            impl[a] = was_a;
            impl[b] = was_b;
          }
        }
    return changed;
  };
  // Single changes until none is kept, then pairs, then singles again after a pair is kept; a bounded number of
  // rounds per phase.
  auto descend = [&]() {
    for (int round = 0; round < 8; ++round)
      if (!singles() && !pair_changes()) break;
  };
  descend();
  peak_phase = false;
  cap = std::min(best.peak_bytes + best.peak_bytes / 10000, start);
  descend();
  return {std::move(impl), best};
}

}  // namespace

std::vector<int> lean_store_all_impls(const PlanGraph& p) {
  const std::vector<int> defaults(p.nodes.size(), 0);
  auto from_defaults = descend_store_all_peak(p, defaults);
  // The descent moves one node at a time, so it can stop above a peak that several changes together reach: the
  // fast store-all's choices are a second start (on 2026-11-30 H200 profiles, UNet's descent from the defaults
  // stopped at 13.15 GB, above the fast store-all's 11.99 GB). A plan without times has the defaults as its fast
  // store-all: one start.
  const std::vector<int> fast = fast_store_all_impls(p);
  if (fast == defaults || fast == from_defaults.first) return std::move(from_defaults.first);
  auto from_fast = descend_store_all_peak(p, fast);
  const SimResult &a = from_defaults.second, &b = from_fast.second;
  const bool take_fast = b.peak_bytes < a.peak_bytes || (b.peak_bytes == a.peak_bytes && b.time_ms < a.time_ms);
  return std::move(take_fast ? from_fast.first : from_defaults.first);
}

Schedule lean_store_all_schedule(const PlanGraph& p) { return store_all_schedule(p, lean_store_all_impls(p)); }

std::vector<int> fast_store_all_impls(const PlanGraph& p) {
  constexpr double kNever = 1e300;  // a reader that cannot leave the optional outputs unread
  std::vector<int> impl(p.nodes.size(), 0);
  const bool timed = std::any_of(p.nodes.begin(), p.nodes.end(), [](const PlanNode& n) {
    for (int i = 0; i < n.num_impls(); ++i)
      if (n.impl_ms(i) > 0) return true;
    return false;
  });
  if (!timed) return impl;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    const PlanNode& node = p.nodes[n];
    for (int i = 1; i < node.num_impls(); ++i) {
      const int best = impl[n];
      if (node.impl_ms(i) < node.impl_ms(best) ||
          (node.impl_ms(i) == node.impl_ms(best) && node.impl_workspace(i) < node.impl_workspace(best)))
        impl[n] = i;
    }
  }
  // A node with optional outputs runs lean where no reader reads them: its readers that do move to their fastest
  // implementation that does not where the lean run saves more than those cost (Attention's fused forward against
  // AttentionGrad's recompute).
  auto reads_any = [](const std::vector<int>& reads, const std::vector<int>& values) {
    return std::any_of(reads.begin(), reads.end(),
                       [&](int v) { return std::find(values.begin(), values.end(), v) != values.end(); });
  };
  for (const PlanNode& node : p.nodes) {
    if (node.lean_ms < 0 || node.optional_outputs.empty()) continue;
    double delta = node.lean_ms - node.time_ms;
    std::vector<std::pair<size_t, int>> moves;
    for (size_t m = 0; m < p.nodes.size() && delta < kNever; ++m) {
      const PlanNode& reader = p.nodes[m];
      if (!reads_any(reader.reads(impl[m]), node.optional_outputs)) continue;
      int best = -1;
      for (int i = 0; i < reader.num_impls(); ++i)
        if (!reads_any(reader.reads(i), node.optional_outputs) &&
            (best < 0 || reader.impl_ms(i) < reader.impl_ms(best) ||
             (reader.impl_ms(i) == reader.impl_ms(best) && reader.impl_workspace(i) < reader.impl_workspace(best))))
          best = i;
      delta = best < 0 ? kNever : delta + reader.impl_ms(best) - reader.impl_ms(impl[m]);
      moves.push_back({m, best});
    }
    if (!moves.empty() && delta < 0)
      for (const auto& [m, i] : moves) impl[m] = i;
  }
  return impl;
}

Schedule fast_store_all_schedule(const PlanGraph& p) { return store_all_schedule(p, fast_store_all_impls(p)); }

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::resident: return "resident";
    case MemoryKind::kept: return "kept activations";
    case MemoryKind::recomputed: return "recomputed";
    case MemoryKind::gradient: return "gradients";
    case MemoryKind::workspace: return "workspace";
  }
  return "?";
}

int64_t MemoryPoint::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

SimResult simulate(const PlanGraph& p, const Schedule& s, std::vector<MemoryPoint>* timeline) {
  // unwritten: an optional output nothing reads, computed (never allocated; a free of it does nothing).
  enum State : uint8_t { absent, live, freed, resident, overwritten, host, unwritten };
  std::vector<State> state(p.values.size(), absent);
  std::vector<int> runs(p.nodes.size(), 0);
  std::vector<int> updated_by(p.values.size(), -1);  // resident value -> the update node that changed it in place
  const std::vector<char> lean = lean_nodes(p, s), skipped = unwritten_values(p, s);
  // The timeline's books: the kind each live value was counted under, and the bytes in use by kind.
  std::vector<MemoryKind> kind(p.values.size(), MemoryKind::resident);
  std::array<int64_t, kMemoryKinds> by_kind{};
  auto count = [&](int v, int64_t sign) { by_kind[static_cast<int>(kind[v])] += sign * p.values[v].bytes; };
  SimResult r;
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].resident) {
      state[v] = resident;
      r.resident_bytes += p.values[v].bytes;
    }
  int64_t host_bytes = 0;  // offloaded values
  std::vector<char> home(p.values.size(), 0);  // Schedule::on_host
  for (int v : s.on_host) {
    if (v < 0 || v >= static_cast<int>(p.values.size())) fail("schedule: on_host names unknown value ", v);
    if (!p.values[v].resident || home[v])
      fail("schedule: on_host names '", p.values[v].name, "', which is ",
           home[v] ? "named twice" : "not resident (only resident values have a home on the host)");
    home[v] = 1;
    state[v] = host;
    r.resident_bytes -= p.values[v].bytes;
    host_bytes += p.values[v].bytes;
    r.host_peak_bytes += p.values[v].bytes;  // its own host block for the whole run
  }
  by_kind[static_cast<int>(MemoryKind::resident)] = r.resident_bytes;
  int64_t live_bytes = r.resident_bytes;
  int copies = 0;          // offloads and prefetches since the last compute step (the timeline's)
  r.peak_bytes = live_bytes;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind == Step::Kind::compute) {
      if (st.id < 0 || st.id >= static_cast<int>(p.nodes.size())) fail("schedule step ", i, ": unknown node ", st.id);
      const PlanNode& n = p.nodes[st.id];
      const int impl = n.impl_for(st.impl, st.algo);
      if (impl < 0)
        fail("schedule step ", i, ": node '", n.name, "' has no implementation ", st.impl,
             st.algo >= 0 ? " with algorithm " + std::to_string(st.algo) : std::string());
      const std::vector<int>& reads = n.reads(impl);
      if (runs[st.id] > 0 && (n.stage == Stage::backward || n.stage == Stage::update || n.stage == Stage::loss))
        fail("schedule step ", i, ": ", stage_name(n.stage), " node '", n.name, "' runs a second time");
      for (int v : reads)
        if (updated_by[v] >= 0 && updated_by[v] != st.id)
          fail("schedule step ", i, ": node '", n.name, "' reads '", p.values[v].name, "' after '",
               p.nodes[updated_by[v]].name, "' updated it in place");
      for (int v : reads)
        if (state[v] != live && state[v] != resident)
          fail("schedule step ", i, ": node '", n.name, "' reads '", p.values[v].name, "', which is ",
               state[v] == freed         ? "already freed"
               : state[v] == overwritten ? "overwritten in place"
               : state[v] == host        ? "offloaded to the host (prefetch it first)"
                                         : "not computed");
      if (st.in_place >= 0) {
        const int v = st.in_place;
        if (std::find(n.in_place.begin(), n.in_place.end(), v) == n.in_place.end() || !n.impl_in_place(impl) ||
            std::find(reads.begin(), reads.end(), v) == reads.end())
          fail("schedule step ", i, ": node '", n.name, "' cannot run in place over '",
               v >= 0 && v < static_cast<int>(p.values.size()) ? p.values[v].name : std::to_string(v), "'");
        if (state[v] != live)
          fail("schedule step ", i, ": node '", n.name, "' runs in place over '", p.values[v].name, "', which is not live");
        state[v] = overwritten;
        live_bytes -= p.values[v].bytes;
        count(v, -1);
      }
      const MemoryKind made = n.stage != Stage::forward ? MemoryKind::gradient
                              : runs[st.id] > 0         ? MemoryKind::recomputed
                                                        : MemoryKind::kept;
      for (int v : n.outputs) {
        if (state[v] == live || state[v] == host)
          fail("schedule step ", i, ": node '", n.name, "' recomputes '", p.values[v].name, "' while it is still ",
               state[v] == live ? "live" : "on the host");
        if (skipped[v]) {
          state[v] = unwritten;
          continue;
        }
        state[v] = live;
        live_bytes += p.values[v].bytes;
        kind[v] = made;
        count(v, +1);
      }
      const int64_t workspace = align_up(n.impl_workspace(impl));
      const int64_t step_peak = live_bytes + workspace;
      if (timeline) {
        MemoryPoint m;
        m.step = static_cast<int>(i);
        m.node = st.id;
        m.backward = n.stage != Stage::forward;
        m.start_ms = r.time_ms;
        m.end_ms = r.time_ms + n.run_ms(impl, lean[st.id]);
        m.bytes = by_kind;
        m.bytes[static_cast<int>(MemoryKind::workspace)] = workspace;
        m.host_bytes = host_bytes;
        m.copies = copies;
        timeline->push_back(m);
      }
      if (step_peak > r.peak_bytes) {
        r.peak_bytes = step_peak;
        r.peak_step = static_cast<int>(i);
      }
      // An update writes its resident inputs (parameter, momentum) in place: a later reader, such as a
      // recomputation of a forward node, would see the new weights.
      if (n.stage == Stage::update)
        for (int v : n.inputs)
          if (state[v] == resident || home[v]) updated_by[v] = st.id;
      r.time_ms += n.run_ms(impl, lean[st.id]);
      if (runs[st.id]++ > 0) ++r.recomputations;
      copies = 0;
    } else {
      const int v = st.id;
      if (v < 0 || v >= static_cast<int>(p.values.size())) fail("schedule step ", i, ": unknown value ", v);
      const char* what = st.kind == Step::Kind::free      ? "frees"
                         : st.kind == Step::Kind::offload ? "offloads"
                                                          : "prefetches";
      if (state[v] == unwritten) {
        if (st.kind != Step::Kind::free)
          fail("schedule step ", i, ": ", what, " '", p.values[v].name,
               "', an optional output that no step reads (never written)");
        continue;
      }
      const bool ok = st.kind == Step::Kind::prefetch ? state[v] == host
                      : st.kind == Step::Kind::free   ? (state[v] == live || state[v] == host) && !home[v]
                                                      : state[v] == live;
      if (!ok && home[v])
        fail("schedule step ", i, ": ", what, " '", p.values[v].name, "', which is resident with its home on the host",
             state[v] == host ? " and there now" : " and on the device now");
      if (!ok)
        fail("schedule step ", i, ": ", what, " '", p.values[v].name, "', which is ",
             state[v] == resident      ? "resident (never freed or moved)"
             : state[v] == freed       ? "already freed"
             : state[v] == overwritten ? "overwritten in place"
             : state[v] == live        ? "on the device (not offloaded)"
             : state[v] == host        ? "on the host already"
                                       : "not computed");
      const int64_t bytes = p.values[v].bytes;
      if (st.kind == Step::Kind::prefetch) {
        state[v] = live;
        live_bytes += bytes;
        host_bytes -= bytes;
        count(v, +1);
        if (live_bytes > r.peak_bytes) {  // the copy's destination is held before the next compute step
          r.peak_bytes = live_bytes;
          r.peak_step = static_cast<int>(i);
        }
      } else if (state[v] == host) {  // freed on the host
        state[v] = freed;
        host_bytes -= bytes;
      } else {
        state[v] = st.kind == Step::Kind::offload ? host : freed;
        live_bytes -= bytes;
        count(v, -1);
        if (st.kind == Step::Kind::offload) {
          host_bytes += bytes;
          if (!home[v]) r.host_peak_bytes += bytes;  // a host block of its own for the step (the executor's host arena)
        }
      }
      if (st.kind != Step::Kind::free) {
        ++copies;
        ++r.transfers;
        r.transfer_bytes += bytes;
      }
    }
  }
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (home[v] && state[v] != host)
      fail("schedule: '", p.values[v].name, "' is on the device at the end (its home is the host: offload it back)");
    if (state[v] == live) fail("schedule: '", p.values[v].name, "' is never freed");
    if (state[v] == host && !home[v])
      fail("schedule: '", p.values[v].name, "' is offloaded and never prefetched or freed");
  }
  for (size_t n = 0; n < p.nodes.size(); ++n)
    if (runs[n] == 0) fail("schedule: node '", p.nodes[n].name, "' is never computed");
  return r;
}

SimResult simulate(const Graph& g, const Schedule& s, const WorkspaceFn& workspace_bytes, int float_bytes) {
  return simulate(plan_of(g, workspace_bytes, float_bytes), s);
}

}  // namespace monet
