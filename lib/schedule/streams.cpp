#include "schedule/streams.h"

#include <algorithm>
#include <array>
#include <set>

#include "core/error.h"

namespace monet {

namespace {

bool contains(const std::vector<int>& values, int v) { return std::find(values.begin(), values.end(), v) != values.end(); }

// The implementation a compute step runs of its node (its algorithm variant where it names one).
int step_impl(const PlanNode& n, const Step& st) { return std::max(0, n.impl_for(st.impl, st.algo)); }

// A plan's compute step reads what its implementation reads and writes the node's outputs.
NodeValuesFn plan_values(const PlanGraph& p, const Schedule& s) {
  return [&p, &s](int step, bool outputs) -> const std::vector<int>& {
    const Step& st = s.steps[step];
    const PlanNode& n = p.nodes[st.id];
    return outputs ? n.outputs : n.reads(step_impl(n, st));
  };
}

std::vector<char> home_of(size_t values, const Schedule& s) {
  std::vector<char> home(values, 0);
  for (int v : s.on_host) home[v] = 1;
  return home;
}

int64_t piece_bytes(int64_t bytes, const CopyChunk& c) {
  return part_begin(bytes, c.part + 1, c.parts) - part_begin(bytes, c.part, c.parts);
}

}  // namespace

std::vector<int> copy_index(const std::vector<ScheduledCopy>& copies, size_t steps) {
  std::vector<int> index(steps, -1);
  for (size_t k = 0; k < copies.size(); ++k) index[copies[k].step] = static_cast<int>(k);
  return index;
}

std::vector<ScheduledCopy> scheduled_copies(const Schedule& s, const std::vector<char>& home, const NodeValuesFn& io) {
  const int n = static_cast<int>(s.steps.size());
  std::vector<ScheduledCopy> out;
  for (int i = 0; i < n; ++i) {
    const Step& st = s.steps[i];
    if (st.kind != Step::Kind::offload && st.kind != Step::Kind::prefetch) continue;
    const int v = st.id;
    const bool at_home = v < static_cast<int>(home.size()) && home[v];
    ScheduledCopy c;
    c.step = i;
    c.value = v;
    if (st.kind == Step::Kind::offload) {
      c.lane = CopyLane::to_host;
      c.earliest = c.deadline = i;
      for (int j = i; j-- > 0;) {
        const Step& w = s.steps[j];
        if (w.kind == Step::Kind::prefetch && w.id == v) break;  // back from the host: copied at the offload step
        if (w.kind != Step::Kind::compute) continue;
        if (w.in_place == v) break;
        // A value at home on the host is written in place by the update that reads it.
        if (contains(io(j, !at_home), v)) {
          c.earliest = j + 1;
          break;
        }
      }
    } else {
      c.lane = at_home ? CopyLane::state_to_device : CopyLane::to_device;
      c.earliest = i + 1;
      c.deadline = n;
      for (int j = i + 1; j < n; ++j) {
        const Step& u = s.steps[j];
        if (u.kind == Step::Kind::compute ? contains(io(j, false), v) : u.id == v) {
          c.deadline = j;
          break;
        }
      }
    }
    out.push_back(c);
  }
  return out;
}

std::vector<CopyChunk> copy_plan_of(const Schedule& s, const std::vector<ScheduledCopy>& copies) {
  std::vector<CopyChunk> plan;
  if (s.copy_plan.empty()) {
    for (const ScheduledCopy& c : copies) plan.push_back({c.earliest, c.step, 0, 1});
    std::stable_sort(plan.begin(), plan.end(), [](const CopyChunk& a, const CopyChunk& b) { return a.at < b.at; });
    return plan;
  }
  const std::vector<int> index = copy_index(copies, s.steps.size());
  std::vector<int> next(copies.size(), 0), parts(copies.size(), 0);
  int at = 0;
  for (size_t e = 0; e < s.copy_plan.size(); ++e) {
    const CopyChunk& c = s.copy_plan[e];
    if (c.copy < 0 || c.copy >= static_cast<int>(s.steps.size()) || index[c.copy] < 0)
      fail("copy plan entry ", e, ": step ", c.copy, " is not an offload or prefetch step");
    const int k = index[c.copy];
    const ScheduledCopy& sc = copies[k];
    if (c.at < at) fail("copy plan entry ", e, ": issued at step ", c.at, ", after an entry issued at step ", at);
    at = c.at;
    if (next[k] > 0 && c.parts != parts[k])
      fail("copy plan entry ", e, ": the copy of step ", c.copy, " in ", c.parts, " parts, an earlier entry says ",
           parts[k]);
    if (c.parts < 1 || c.part != next[k])
      fail("copy plan entry ", e, ": part ", c.part, " of ", c.parts, " of the copy of step ", c.copy,
           ", where part ", next[k], " comes next");
    if (c.at < sc.earliest || c.at > sc.deadline)
      fail("copy plan entry ", e, ": the copy of step ", c.copy, " is issued at step ", c.at, ", outside steps ",
           sc.earliest, " to ", sc.deadline, " (its value written, the step that waits for it)");
    parts[k] = c.parts;
    ++next[k];
  }
  for (size_t k = 0; k < copies.size(); ++k)
    if (next[k] == 0 || next[k] != parts[k])
      fail("copy plan: the copy of step ", copies[k].step, " is issued in ", next[k], " of its ",
           std::max(1, parts[k]), " parts");
  return s.copy_plan;
}

std::vector<CopyChunk> copy_plan_of(const PlanGraph& p, const Schedule& s) {
  return copy_plan_of(s, scheduled_copies(s, home_of(p.values.size(), s), plan_values(p, s)));
}

StreamTimes time_streams(const PlanGraph& p, const Schedule& s, const HostLink& link) {
  const std::vector<char> home = home_of(p.values.size(), s);
  const std::vector<ScheduledCopy> copies = scheduled_copies(s, home, plan_values(p, s));
  const std::vector<CopyChunk> plan = copy_plan_of(s, copies);
  const std::vector<int> index = copy_index(copies, s.steps.size());
  const std::vector<char> lean = lean_nodes(p, s);

  StreamTimes r;
  double compute = 0;
  std::array<double, 3> lane{0, 0, 0};  // when each copy stream is free, by CopyLane
  std::vector<double> end(copies.size(), -1);  // each copy's end, once its last piece is issued
  std::vector<int> in(p.values.size(), -1);    // value -> its copy back (index), until waited for
  size_t e = 0;
  auto issue = [&](int at) {
    for (; e < plan.size() && plan[e].at == at; ++e) {
      const int k = index[plan[e].copy];
      const bool to_host = copies[k].lane == CopyLane::to_host;
      const double ms = link.copy_ms(piece_bytes(p.values[copies[k].value].bytes, plan[e]), to_host);
      double& free = lane[static_cast<int>(copies[k].lane)];
      free = std::max(free, compute) + ms;
      (to_host ? r.to_host_busy_ms : r.to_device_busy_ms) += ms;
      if (plan[e].part == plan[e].parts - 1) end[k] = free;
    }
  };
  auto wait_in = [&](int v) {
    if (in[v] < 0) return;
    r.wait_to_device_ms += std::max(0.0, end[in[v]] - compute);
    compute = std::max(compute, end[in[v]]);
    in[v] = -1;
  };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    issue(static_cast<int>(i));
    const Step& st = s.steps[i];
    switch (st.kind) {
      case Step::Kind::compute: {
        const PlanNode& n = p.nodes[st.id];
        const int impl = step_impl(n, st);
        for (int v : n.reads(impl)) wait_in(v);
        const double ms = n.run_ms(impl, lean[st.id]);
        compute += ms;
        r.compute_ms += ms;
        break;
      }
      case Step::Kind::offload: {
        wait_in(st.id);
        const double done = end[index[i]];
        r.wait_to_host_ms += std::max(0.0, done - compute);
        compute = std::max(compute, done);
        break;
      }
      case Step::Kind::prefetch:
        in[st.id] = index[i];
        break;
      case Step::Kind::free:
        wait_in(st.id);
        break;
    }
  }
  issue(static_cast<int>(s.steps.size()));
  r.step_ms = std::max({compute, lane[0], lane[1], lane[2]});
  r.wait_ms = r.step_ms - r.compute_ms;
  return r;
}

std::vector<CopyChunk> plan_copies(const PlanGraph& p, const Schedule& s, const HostLink& link, int64_t piece_bytes_max) {
  MONET_CHECK(piece_bytes_max > 0, "plan_copies: pieces of ", piece_bytes_max, " bytes");
  const std::vector<char> home = home_of(p.values.size(), s);
  const std::vector<ScheduledCopy> copies = scheduled_copies(s, home, plan_values(p, s));
  const int n = static_cast<int>(s.steps.size());
  const std::vector<char> lean = lean_nodes(p, s);
  std::vector<std::vector<int>> starting(n + 1), due(n + 1);  // copies by earliest step, by deadline
  std::vector<int> parts(copies.size()), next(copies.size(), 0);
  for (size_t k = 0; k < copies.size(); ++k) {
    const int64_t bytes = p.values[copies[k].value].bytes;
    parts[k] = static_cast<int>(std::max<int64_t>(1, (bytes + piece_bytes_max - 1) / piece_bytes_max));
    starting[copies[k].earliest].push_back(static_cast<int>(k));
    due[copies[k].deadline].push_back(static_cast<int>(k));
  }
  std::array<std::set<std::pair<int, int>>, 3> ready;  // per lane: (deadline, copy) of the copies it may start
  std::array<double, 3> lane{0, 0, 0};
  std::vector<double> end(copies.size(), 0);
  std::vector<CopyChunk> plan;
  double compute = 0;
  auto push = [&](int at, int k) {  // the next piece of copy k, at step `at`
    const CopyChunk c{at, copies[k].step, next[k], parts[k]};
    const int l = static_cast<int>(copies[k].lane);
    lane[l] = std::max(lane[l], compute) +
              link.copy_ms(piece_bytes(p.values[copies[k].value].bytes, c), copies[k].lane == CopyLane::to_host);
    plan.push_back(c);
    if (++next[k] == parts[k]) {
      end[k] = lane[l];
      ready[l].erase({copies[k].deadline, k});
    }
  };
  for (int a = 0; a <= n; ++a) {
    for (int k : starting[a]) ready[static_cast<int>(copies[k].lane)].insert({copies[k].deadline, k});
    double start = compute;  // after the step's waits
    for (int k : due[a]) {
      while (next[k] < parts[k]) push(a, k);
      start = std::max(start, end[k]);
    }
    if (a == n) break;
    const Step& st = s.steps[a];
    double ms = 0;
    if (st.kind == Step::Kind::compute) {
      const PlanNode& node = p.nodes[st.id];
      ms = node.run_ms(step_impl(node, st), lean[st.id]);
    }
    for (int l = 0; l < 3; ++l)
      while (!ready[l].empty() && lane[l] < start + ms) push(a, ready[l].begin()->second);
    compute = start + ms;
  }
  return plan;
}

}  // namespace monet
