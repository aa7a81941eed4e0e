#include "schedule/schedule.h"

#include "core/error.h"

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

Schedule store_all_schedule(const Graph& g) {
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int v : g.nodes[n].outputs) last_use[v] = static_cast<int>(n);
    for (int v : g.nodes[n].inputs) last_use[v] = static_cast<int>(n);
  }
  Schedule s;
  s.mode = "store-all";
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    s.steps.push_back({Step::Kind::compute, static_cast<int>(n)});
    std::vector<int> touched = g.nodes[n].inputs;
    touched.insert(touched.end(), g.nodes[n].outputs.begin(), g.nodes[n].outputs.end());
    for (int v : touched) {
      if (is_persistent(g.values[v].role) || last_use[v] != static_cast<int>(n)) continue;
      last_use[v] = -2;  // freed once even if the node reads it twice
      s.steps.push_back({Step::Kind::free, v});
    }
  }
  return s;
}

SimResult simulate(const Graph& g, const Schedule& s, const WorkspaceFn& workspace_bytes, int float_bytes) {
  enum State : uint8_t { absent, live, freed, resident };
  std::vector<State> state(g.values.size(), absent);
  SimResult r;
  for (int v : resident_values(g)) {
    state[v] = resident;
    r.resident_bytes += tensor_bytes(g.values[v].shape, g.values[v].dtype, float_bytes);
  }
  int64_t live_bytes = r.resident_bytes;
  r.peak_bytes = live_bytes;
  auto bytes = [&](int v) { return tensor_bytes(g.values[v].shape, g.values[v].dtype, float_bytes); };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind == Step::Kind::compute) {
      if (st.id < 0 || st.id >= static_cast<int>(g.nodes.size())) fail("schedule step ", i, ": unknown node ", st.id);
      const Node& n = g.nodes[st.id];
      for (int v : n.inputs)
        if (state[v] != live && state[v] != resident)
          fail("schedule step ", i, ": node '", n.name, "' reads '", g.values[v].name, "', which is ",
               state[v] == freed ? "already freed" : "not computed");
      for (int v : n.outputs) {
        if (state[v] == live) fail("schedule step ", i, ": node '", n.name, "' recomputes '", g.values[v].name,
                                   "' while it is still live");
        state[v] = live;
        live_bytes += bytes(v);
      }
      int64_t step_peak = live_bytes + align_up(workspace_bytes(n));
      if (step_peak > r.peak_bytes) {
        r.peak_bytes = step_peak;
        r.peak_step = static_cast<int>(i);
      }
    } else {
      if (st.id < 0 || st.id >= static_cast<int>(g.values.size())) fail("schedule step ", i, ": unknown value ", st.id);
      if (state[st.id] != live)
        fail("schedule step ", i, ": frees '", g.values[st.id].name, "', which is ",
             state[st.id] == resident ? "resident (never freed)" : state[st.id] == freed ? "already freed" : "not computed");
      state[st.id] = freed;
      live_bytes -= bytes(st.id);
    }
  }
  for (size_t v = 0; v < g.values.size(); ++v)
    if (state[v] == live) fail("schedule: '", g.values[v].name, "' is never freed");
  return r;
}

}  // namespace monet
