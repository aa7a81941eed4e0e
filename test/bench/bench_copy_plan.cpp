// Benchmark of copy plans (schedule/streams.h): for offloading schedules on their profiles, the step on the
// engine's streams with each copy issued whole, with the copies in pieces by deadline (plan_copies) at several
// piece sizes, and with copies that can be interrupted at any point, the stream always on the copy needed first
// (a reference no plan of pieces beats by more than its pieces' latencies). Prints a markdown table.
// Usage: monet_bench_copy_plan PROFILE.json SCHEDULE.json [PROFILE.json SCHEDULE.json ...]
//        monet_bench_copy_plan --idle PROFILE.json GB/s
// The second form: store-all with every idle kept value offloaded and the optimizer state at home on the host
// (offload_idle_kept, window 10) on a link of GB/s, the program's count of its waits (copy_waits: stage 0's and the
// steps') against the streams' (to the host, to the device), copies whole and in 32 MiB pieces.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "profile/profile.h"
#include "schedule/schedule_io.h"
#include "schedule/streams.h"
#include "solve/heuristics.h"
#include "solve/problem.h"

using namespace monet;

namespace {

// One copy stream whose copies can be interrupted: it always works on the released copy with the earliest
// deadline.
struct Interruptible {
  double at = 0;
  std::map<std::pair<int, int>, double> pending;  // (deadline, copy) -> ms left
  std::map<int, double> ended;
  void run_to(double t) {
    while (!pending.empty() && at < t) {
      auto it = pending.begin();
      const double d = std::min(it->second, t - at);
      at += d;
      it->second -= d;
      if (it->second <= 1e-12) {
        ended[it->first.second] = at;
        pending.erase(it);
      }
    }
    at = std::max(at, t);
  }
  double end_of(double now, int copy) {
    run_to(now);
    while (!ended.count(copy)) {
      auto it = pending.begin();
      at += it->second;
      ended[it->first.second] = at;
      pending.erase(it);
    }
    return ended[copy];
  }
};

double interruptible_step(const PlanGraph& p, const Schedule& s, const HostLink& link) {
  std::vector<char> home(p.values.size(), 0);
  for (int v : s.on_host) home[v] = 1;
  std::vector<std::vector<int>> reads(s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i)
    if (s.steps[i].kind == Step::Kind::compute) {
      const PlanNode& n = p.nodes[s.steps[i].id];
      reads[i] = n.reads(std::max(0, n.impl_for(s.steps[i].impl, s.steps[i].algo)));
    }
  const std::vector<ScheduledCopy> copies = scheduled_copies(s, home, [&](int step, bool outputs) -> const std::vector<int>& {
    return outputs ? p.nodes[s.steps[step].id].outputs : reads[step];
  });
  std::vector<std::vector<int>> released(s.steps.size() + 1);
  std::vector<int> index(s.steps.size(), -1);
  for (size_t k = 0; k < copies.size(); ++k) {
    released[copies[k].earliest].push_back(static_cast<int>(k));
    index[copies[k].step] = static_cast<int>(k);
  }
  Interruptible lane[3];
  double compute = 0;
  std::vector<int> in(p.values.size(), -1);
  auto wait = [&](int k) { compute = std::max(compute, lane[static_cast<int>(copies[k].lane)].end_of(compute, k)); };
  auto wait_in = [&](int v) {
    if (in[v] >= 0) wait(in[v]);
    in[v] = -1;
  };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    for (int k : released[i]) {
      Interruptible& l = lane[static_cast<int>(copies[k].lane)];
      l.run_to(compute);
      l.pending[{copies[k].deadline, k}] =
          link.copy_ms(p.values[copies[k].value].bytes, copies[k].lane == CopyLane::to_host);
    }
    const Step& st = s.steps[i];
    if (st.kind == Step::Kind::compute) {
      for (int v : reads[i]) wait_in(v);
      const PlanNode& n = p.nodes[st.id];
      compute += n.impl_ms(std::max(0, n.impl_for(st.impl, st.algo)));
    } else if (st.kind == Step::Kind::offload) {
      wait_in(st.id);
      wait(index[i]);
    } else if (st.kind == Step::Kind::prefetch) {
      in[st.id] = index[i];
    } else {
      wait_in(st.id);
    }
  }
  double end = compute;
  for (Interruptible& l : lane) {
    l.run_to(end);
    for (auto& [key, left] : l.pending) l.at += left;
    end = std::max(end, l.at);
  }
  return end;
}

}  // namespace

int idle_offloaded(const std::string& profile_path, double gbs) {
  const Profile profile = read_profile(profile_path);
  const HostLink link = host_link_from_flag(gbs);
  CheckpointProblem p = make_problem(profile.plan, 10);
  enable_offload(p, link, 0);
  const Assignment a = offload_idle_kept(p, store_all_assignment(p));
  const CopyWaits w = copy_waits(p, a);
  Schedule s = extract_schedule(p, a, "checkpoint");
  const StreamTimes whole = time_streams(profile.plan, s, link);
  s.copy_plan = plan_copies(profile.plan, s, link, kCopyPieceBytes);
  const StreamTimes pieces = time_streams(profile.plan, s, link);
  std::printf("| %s | %d | %.2f | %.2f | %.2f | %.2f (%.2f, %.2f) | %.2f (%.2f, %.2f) |\n", profile_path.c_str(),
              simulate(profile.plan, s).transfers, pieces.compute_ms, w.fwd, w.total() - w.fwd, whole.wait_ms,
              whole.wait_to_host_ms, whole.wait_to_device_ms, pieces.wait_ms, pieces.wait_to_host_ms,
              pieces.wait_to_device_ms);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--idle") {
    std::printf("| profile | copies | compute (ms) | program: stage 0's waits | program: the steps' | streams, whole: "
                "waits (to host, to device) | streams, pieces |\n|---|---|---|---|---|---|---|\n");
    try {
      return idle_offloaded(argv[2], std::atof(argv[3]));
    } catch (const Error& e) {
      std::fprintf(stderr, "monet_bench_copy_plan: %s\n", e.what());
      return 1;
    }
  }
  if (argc < 3 || argc % 2 == 0) {
    std::fprintf(stderr, "usage: monet_bench_copy_plan PROFILE.json SCHEDULE.json [PROFILE.json SCHEDULE.json ...]\n"
                         "       monet_bench_copy_plan --idle PROFILE.json GB/s\n");
    return 2;
  }
  const std::vector<int64_t> sizes = {int64_t{8} << 20, kCopyPieceBytes, int64_t{128} << 20};
  std::printf("| schedule | copies | whole (ms) | pieces 8 MiB | pieces 32 MiB | pieces 128 MiB | interruptible |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      const Profile profile = read_profile(argv[i]);
      MONET_CHECK(profile.host_link.has_value(), argv[i], ": no host link");
      Schedule s = read_schedule(argv[i + 1], profile.plan).schedule;
      s.copy_plan.clear();
      const SimResult sim = simulate(profile.plan, s);
      std::printf("| %s | %d | %.2f", argv[i + 1], sim.transfers, time_streams(profile.plan, s, *profile.host_link).step_ms);
      for (int64_t size : sizes) {
        Schedule t = s;
        t.copy_plan = plan_copies(profile.plan, s, *profile.host_link, size);
        std::printf(" | %.2f (%zu)", time_streams(profile.plan, t, *profile.host_link).step_ms, t.copy_plan.size());
      }
      std::printf(" | %.2f |\n", interruptible_step(profile.plan, s, *profile.host_link));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "monet_bench_copy_plan: %s\n", e.what());
    return 1;
  }
  return 0;
}
