#include "schedule/streams.h"

#include <algorithm>

namespace monet {

std::vector<std::vector<int>> copies_out_after(const Schedule& s, const std::vector<char>& home, const WritesFn& writes) {
  std::vector<std::vector<int>> after(s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    if (s.steps[i].kind != Step::Kind::offload) continue;
    const int v = s.steps[i].id;
    const bool at_home = v < static_cast<int>(home.size()) && home[v];
    for (size_t j = i; j-- > 0;) {
      const Step& st = s.steps[j];
      if (st.kind == Step::Kind::prefetch && st.id == v) break;  // back from the host: copied at the offload step
      if (st.kind != Step::Kind::compute) continue;
      if (st.in_place == v) break;
      const std::vector<int>& w = writes(st.id, at_home);
      if (std::find(w.begin(), w.end(), v) != w.end()) {
        after[j].push_back(static_cast<int>(i));
        break;
      }
    }
  }
  return after;
}

StreamTimes time_streams(const PlanGraph& p, const Schedule& s, const HostLink& link) {
  std::vector<char> home(p.values.size(), 0);
  for (int v : s.on_host) home[v] = 1;
  const std::vector<std::vector<int>> after = copies_out_after(
      s, home, [&](int node, bool at_home) -> const std::vector<int>& {
        return at_home ? p.nodes[node].inputs : p.nodes[node].outputs;
      });
  StreamTimes r;
  double compute = 0, to_host = 0, to_device = 0, state_to_device = 0;  // when each stream is free
  std::vector<double> out_end(s.steps.size(), -1);  // offload step -> its copy's end, once issued
  std::vector<double> in_end(p.values.size(), -1);  // value -> its copy back's end, until waited for
  auto begin_out = [&](size_t i) {
    const double ms = link.copy_ms(p.values[s.steps[i].id].bytes, true);
    to_host = std::max(to_host, compute) + ms;
    r.to_host_busy_ms += ms;
    out_end[i] = to_host;
  };
  auto wait_in = [&](int v) {
    if (in_end[v] < 0) return;
    r.wait_to_device_ms += std::max(0.0, in_end[v] - compute);
    compute = std::max(compute, in_end[v]);
    in_end[v] = -1;
  };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    switch (st.kind) {
      case Step::Kind::compute: {
        const PlanNode& n = p.nodes[st.id];
        const int impl = std::max(0, n.impl_for(st.impl, st.algo));
        for (int v : n.inputs) wait_in(v);
        for (int v : n.reads(impl)) wait_in(v);
        const double ms = n.impl_ms(impl);
        compute += ms;
        r.compute_ms += ms;
        for (int k : after[i]) begin_out(static_cast<size_t>(k));
        break;
      }
      case Step::Kind::offload:
        wait_in(st.id);
        if (out_end[i] < 0) begin_out(i);
        r.wait_to_host_ms += std::max(0.0, out_end[i] - compute);
        compute = std::max(compute, out_end[i]);
        break;
      case Step::Kind::prefetch: {  // the optimizer state's on a stream of its own (CopyLane)
        const double ms = link.copy_ms(p.values[st.id].bytes, false);
        double& stream = home[st.id] ? state_to_device : to_device;
        stream = std::max(stream, compute) + ms;
        r.to_device_busy_ms += ms;
        in_end[st.id] = stream;
        break;
      }
      case Step::Kind::free:
        wait_in(st.id);
        break;
    }
  }
  r.step_ms = std::max({compute, to_host, to_device, state_to_device});
  r.wait_ms = r.step_ms - r.compute_ms;
  return r;
}

}  // namespace monet
