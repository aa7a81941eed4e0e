// The checkpointing MILP with offload (docs/planner.md, "Offload") against brute force on tiny graphs: every
// assignment of S, R and the prefetches G (H follows from G) checked procedurally by evaluate() must give CBC's
// optimum, and every schedule extracted must pass the simulator within the budget and the host limit, at the
// program's count.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>
#include <random>

#include "schedule/schedule.h"
#include "schedule/streams.h"
#include "solve/cbc.h"
#include "solve/heuristics.h"
#include "solve/milp.h"
#include "solve/no_clock.h"
#include "solve/solve.h"
#include "solve/tiny_plans.h"

using namespace monet;
using monet::test::activity;
using monet::test::chain_plan;
using monet::test::kNoClock;
using monet::test::solve_exactly;
using monet::test::momentum_chain_plan;
using monet::test::parameter_chain_plan;
using monet::test::random_plan;

namespace {

// A link that moves units_per_ms 256-byte units per millisecond each way (four: copies cost what the tiny graphs' nodes cost
// (1 to 9 ms), so the program trades them against recomputations and waits).
HostLink slow_link(double units_per_ms = 4) {
  HostLink l = host_link_from_flag(units_per_ms * kAlignBytes * 1e-6);
  l.latency_us = 250;  // a quarter of a millisecond per copy
  return l;
}

std::vector<char*> offload_bits(const CheckpointProblem& p, Assignment& a) {
  std::vector<char*> vars;
  for (int t = 0; t < p.num_steps(); ++t) {
    for (size_t f = 0; f < p.fvals.size(); ++f)
      if (p.has_s(t, static_cast<int>(f))) vars.push_back(&a.S[t][f]);
    for (int k : p.candidates[t]) vars.push_back(&a.R[t][k]);
    for (size_t f = 0; f < p.fvals.size(); ++f)
      if (p.has_g(t, static_cast<int>(f))) vars.push_back(&a.G[t][f]);
  }
  for (char& q : a.Q) vars.push_back(&q);
  return vars;
}

// p's offers of the optimizer state alone: brute force over a tiny graph's parameters too would pass its limit.
void drop_parameter_offers(CheckpointProblem& p) {
  std::erase_if(p.states, [](const StateOffer& o) { return o.parameter(); });
  index_state_offers(p);
}

bool offloads(const Assignment& a) {
  return std::any_of(a.H.begin(), a.H.end(), [](char h) { return h != 0; }) ||
         std::any_of(a.Q.begin(), a.Q.end(), [](char q) { return q != 0; });
}

// Calls visit(a) for every assignment of S, R, G and Q, with H[f] = 1 where some G[.][f] is (evaluate() refuses
// two).
void for_each_offload_assignment(const CheckpointProblem& p, const std::function<void(const Assignment&)>& visit) {
  Assignment a = empty_assignment(p);
  const std::vector<char*> vars = offload_bits(p, a);
  REQUIRE(vars.size() <= 22);
  for (uint64_t mask = 0; mask < (uint64_t{1} << vars.size()); ++mask) {
    for (size_t i = 0; i < vars.size(); ++i) *vars[i] = (mask >> i) & 1;
    std::fill(a.H.begin(), a.H.end(), 0);
    for (int t = 0; t < p.num_steps(); ++t)
      for (size_t f = 0; f < p.fvals.size(); ++f) a.H[f] |= a.G[t][f];
    visit(a);
  }
}

struct Brute {
  bool found = false;
  double ms = 1e300;
  bool offloads = false;  // an optimum offloads
};

Brute brute_force(const CheckpointProblem& p, int64_t budget) {
  Brute b;
  for_each_offload_assignment(p, [&](const Assignment& a) {
    const Evaluation e = evaluate(p, a);
    if (!e.feasible || e.peak_bytes > budget) return;
    const bool off = offloads(a);
    if (e.recompute_ms < b.ms - 1e-9) {
      b = {true, e.recompute_ms, off};
    } else if (e.recompute_ms < b.ms + 1e-9) {
      b.offloads |= off;
    }
  });
  return b;
}

// The least peak of any assignment without offload (brute force over S and R only).
int64_t least_peak_without(const CheckpointProblem& p) {
  int64_t least = INT64_MAX;
  for_each_offload_assignment(p, [&](const Assignment& a) {
    if (offloads(a)) return;
    const Evaluation e = evaluate(p, a);
    if (e.feasible) least = std::min(least, e.peak_bytes);
  });
  return least;
}

struct Tally {
  int compared = 0, offloading = 0, exact = 0, limited = 0, states = 0;
  int state_waits = 0;  // optima where a state's copy outlasts the steps it overlaps
  int wide = 0;         // states on the host over a span wider than the steps beside their update
  int wide_prefetch = 0;  // values copied back over more than the step before their use
};

// CBC's optimum of p's program at the budget against brute force; the optimum's columns satisfy every row, and its
// schedule passes the simulator within the budget and the host limit, at the program's count and time.
void compare_with_brute_force(const PlanGraph& plan, const CheckpointProblem& p, int64_t budget, int64_t host_units,
                              Tally& tally) {
  const Brute brute = brute_force(p, budget);
  MilpLayout layout;
  const LinearProgram lp = checkpoint_milp(p, budget, &layout);
  const CbcResult r = solve_exactly(lp);
  if (!brute.found) {
    CHECK((r.status == CbcResult::Status::infeasible || r.status == CbcResult::Status::no_solution));
    return;
  }
  REQUIRE(r.status == CbcResult::Status::optimal);
  CHECK(r.objective == Approx(brute.ms).margin(1e-6));
  const Assignment a = from_columns(p, layout, r.x);
  const Evaluation e = evaluate(p, a);
  REQUIRE(e.feasible);
  CHECK(e.peak_bytes <= budget);
  CHECK(e.recompute_ms == Approx(brute.ms).margin(1e-6));
  if (host_units > 0) CHECK(e.host_bytes <= host_units * kAlignBytes);
  // The warm start's columns satisfy the program: to_columns puts an offloading assignment in its form.
  const std::vector<double> x = to_columns(p, layout, lp, a);
  for (const LinearProgram::Row& row : lp.rows) {
    INFO("row " << row.name);
    CHECK(activity(row, x) >= row.lo - 1e-6);
    CHECK(activity(row, x) <= row.hi + 1e-6);
  }
  const Schedule s = extract_schedule(p, a, "checkpoint");
  const SimResult sim = simulate(plan, s);
  CHECK(sim.peak_bytes <= e.peak_bytes);
  tally.exact += sim.peak_bytes == e.peak_bytes;
  CHECK(sim.host_peak_bytes <= e.host_bytes);
  CHECK(sim.time_ms + e.copy_wait_ms + copy_waits(p, a).preference == Approx(p.base_ms + e.recompute_ms));
  const bool off = offloads(a);
  CHECK(off == (sim.transfers > 0));
  CHECK(s.on_host.size() == static_cast<size_t>(std::count(a.Q.begin(), a.Q.end(), 1)));
  tally.offloading += off;
  tally.limited += host_units > 0 && off;
  tally.states += std::count(a.Q.begin(), a.Q.end(), 1) > 0;
  const CopyWaits waits = copy_waits(p, a);
  bool state_wait = false;
  for (int q = 0; q < p.num_states(); ++q)  // a wait before its update, or for its copy out
    for (int t = std::max(0, p.states[q].step - 1); t <= p.states[q].last; ++t) state_wait |= a.Q[q] && waits.step[t] > 0;
  tally.state_waits += state_wait;
  for (int q = 0; q < p.num_states(); ++q) tally.wide += a.Q[q] && !p.states[q].narrow();
  bool wide_prefetch = false;
  for (int t = 1; t < p.num_steps(); ++t)
    for (int f = 0; f < static_cast<int>(p.fvals.size()); ++f)
      wide_prefetch |= a.prefetched(t, f) && p.prefetch_first(t, f) < t - 1;
  tally.wide_prefetch += wide_prefetch;
  ++tally.compared;
}

// compare_with_brute_force at every unit from p's lower bound to the least peak without offload, two units below
// the bound and halfway to store-all (near the bound the resident values must go to the host; just above it, a
// wide span may fit where the narrow one waits; below it nothing fits, which a credit counted twice would break).
// `compared(budget)` runs after each comparison made. Returns whether the bound is below that least peak.
bool compare_across_budgets(const PlanGraph& plan, const CheckpointProblem& p, int64_t host_units, uint64_t seed,
                            Tally& tally, const std::function<void(int64_t)>& compared = {}) {
  const int64_t store_all = simulate(plan, store_all_schedule(plan)).peak_bytes;
  const int64_t lb = p.lower_bound_bytes();
  const int64_t without = least_peak_without(p);
  std::vector<int64_t> budgets = {(without + store_all) / 2, lb - 2 * kAlignBytes};
  for (int64_t b = lb; b <= without; b += kAlignBytes) budgets.push_back(b);
  for (int64_t budget : budgets) {
    INFO("seed " << seed << " host limit " << host_units << " budget " << budget << " (lower bound " << lb
                 << ", least without offload " << without << ", store-all " << store_all << ")");
    const int before = tally.compared;
    compare_with_brute_force(plan, p, budget, host_units, tally);
    if (tally.compared > before && compared) compared(budget);
  }
  return lb < without;
}

// Every row of lp holds at x (REQUIRE, naming the row).
void require_rows_hold(const LinearProgram& lp, const std::vector<double>& x) {
  for (const LinearProgram::Row& row : lp.rows) {
    INFO("row " << row.name);
    REQUIRE(activity(row, x) >= row.lo - 1e-6);
    REQUIRE(activity(row, x) <= row.hi + 1e-6);
  }
}

// Turns offload on over `link` (no host limit) with the optimizer state's offers alone; whether every assignment of
// the result can be enumerated (for_each_offload_assignment).
bool brute_forceable_offload(CheckpointProblem& p, const HostLink& link) {
  enable_offload(p, link, 0);
  drop_parameter_offers(p);
  Assignment probe = empty_assignment(p);
  return offload_bits(p, probe).size() <= 18;
}

// Some row of lp fails at x.
bool some_row_broken(const LinearProgram& lp, const std::vector<double>& x) {
  bool broken = false;
  for (const LinearProgram::Row& row : lp.rows)
    broken |= activity(row, x) < row.lo - 1e-9 || activity(row, x) > row.hi + 1e-9;
  return broken;
}

}  // namespace

TEST_CASE("offload MILP optimum equals brute force on tiny graphs, and its schedules pass the simulator",
          "[solve][milp][offload]") {
  Tally tally;
  for (uint64_t seed = 1; seed <= 90 && tally.compared < 60; ++seed) {
    // Random graphs, and chains within a window of one level, where a value far from its reader is kept or, with
    // offload, copied out and back: its recomputation chain lies outside the window.
    const bool chain = seed % 3 != 0;
    PlanGraph plan = chain ? chain_plan(seed % 3 == 1 ? 3 : 4, seed) : random_plan(3, seed);
    for (int64_t host_units : {0, 3}) {
      CheckpointProblem p = make_problem(plan, chain ? 1 : 0);
      enable_offload(p, slow_link(), host_units * kAlignBytes);
      Assignment probe = empty_assignment(p);
      if (offload_bits(p, probe).size() > 18) continue;
      const int64_t store_all = simulate(plan, store_all_schedule(plan)).peak_bytes;
      const int64_t lb = p.lower_bound_bytes();
      const int64_t without = least_peak_without(p);
      for (int64_t budget : {lb, (lb + without) / 2, without, (without + store_all) / 2}) {
        INFO("seed " << seed << " host limit " << host_units << " budget " << budget << " (lower bound " << lb
                     << ", least without offload " << without << ", store-all " << store_all << ")");
        compare_with_brute_force(plan, p, budget, host_units, tally);
      }
    }
  }
  INFO(tally.compared << " compared, " << tally.offloading << " optima offload, " << tally.exact
                      << " at the simulated peak exactly");
  CHECK(tally.compared >= 40);
  CHECK(tally.offloading >= tally.compared / 4);  // the case this test is for arises
  CHECK(tally.limited >= 2);                      // optima that offload under a host limit
  CHECK(tally.exact >= tally.compared * 3 / 4);
}

TEST_CASE("optimizer state on the host: MILP optimum equals brute force, schedules pass the simulator",
          "[heavy][solve][milp][offload]") {
  Tally tally;
  int below = 0;  // problems whose least peak with offload is below the least without
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const PlanGraph plan = momentum_chain_plan(3, seed);
    for (int64_t host_units : {0, 4}) {
      // Half the link: a state's copy may outlast the step it overlaps, so the waits both ways count.
      CheckpointProblem p = make_problem(plan, 1);
      enable_offload(p, slow_link(2), host_units * kAlignBytes);
      drop_parameter_offers(p);
      REQUIRE(p.num_states() >= 2);  // m2 and m1 (m0's update is the last step), some over two spans
      Assignment probe = empty_assignment(p);
      if (offload_bits(p, probe).size() > 18) continue;
      below += compare_across_budgets(plan, p, host_units, seed, tally);
    }
  }
  INFO(tally.compared << " compared, " << tally.states << " optima keep optimizer state on the host, "
                      << tally.state_waits << " waiting for a state's copy, " << tally.wide
                      << " states over a wide span, " << tally.wide_prefetch << " prefetching over a wide span");
  CHECK(tally.compared >= 60);
  CHECK(tally.states >= tally.compared / 4);
  CHECK(tally.state_waits >= 3);  // and the waits they cost arise
  CHECK(tally.wide >= 3);         // and optima over a wide span
  CHECK(tally.wide_prefetch >= 3);  // and optima whose copy back starts before the step before its use
  CHECK(below >= 4);
}

// A parameter at home on the host is on the device from the stage-0 positions before its first reader that cover
// its copy in through the step after its update (or a wider span), and away before and after.
TEST_CASE("parameters on the host: MILP optimum equals brute force, schedules pass the simulator",
          "[heavy][solve][milp][offload]") {
  Tally tally;
  int below = 0, params = 0, waits_in = 0, late = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const PlanGraph plan = parameter_chain_plan(3, seed);
    for (int64_t host_units : {0, 5}) {
      CheckpointProblem p = make_problem(plan, 1);
      enable_offload(p, slow_link(2), host_units * kAlignBytes);
      REQUIRE(p.num_states() >= 2);  // w2 and w1 (w0's update is the last step)
      for (const StateOffer& o : p.states) {
        CHECK(o.parameter());
        CHECK(o.reader == (plan.values[o.value].name == "w1" ? 1 : 2));
        CHECK(o.fetch >= 0);
        CHECK(o.fetch <= o.reader);
        late += o.fetch > 0;  // away from the device at stage 0's start
      }
      Assignment probe = empty_assignment(p);
      if (offload_bits(p, probe).size() > 18) continue;
      below += compare_across_budgets(plan, p, host_units, seed, tally, [&](int64_t budget) {
        MilpLayout layout;  // the optimum again, for what it moves
        const CbcResult r = solve_exactly(checkpoint_milp(p, budget, &layout));
        const Assignment a = from_columns(p, layout, r.x);
        params += std::count(a.Q.begin(), a.Q.end(), 1) > 0;
      });
      // At points that wait for a parameter's copy in, the columns satisfy every row and a shorter wait breaks one.
      MilpLayout layout;
      const LinearProgram lp = checkpoint_milp(p, int64_t{1} << 40, &layout);
      int sampled = 0;
      for_each_offload_assignment(p, [&](const Assignment& a) {
        if (sampled >= 20 || !evaluate(p, a).feasible || copy_waits(p, a).parameters_in < 1e-6) return;
        ++sampled;
        std::vector<double> x = to_columns(p, layout, lp, a);
        require_rows_hold(lp, x);
        x[layout.W_pin] -= std::min(x[layout.W_pin], 1e-3);
        CHECK(some_row_broken(lp, x));
      });
      waits_in += sampled;
    }
  }
  INFO(tally.compared << " compared, " << params << " optima keep a parameter on the host, " << waits_in
                      << " points waiting for a parameter's copy in checked, " << tally.wide << " over a wide span");
  CHECK(tally.compared >= 60);
  CHECK(params >= tally.compared / 4);
  CHECK(waits_in >= 40);
  CHECK(late >= 20);
  CHECK(tally.wide >= 2);
  CHECK(below >= 4);
}

// A layer's parameter and its momentum, updated in the same step, are copied out over the same steps on one stream:
// the program counts their copies together, as the engine's streams do.
TEST_CASE("a parameter and its momentum copied out after one update add up on the stream to the host",
          "[solve][milp][offload][streams]") {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const PlanGraph plan = momentum_chain_plan(3, seed);
    CheckpointProblem p = make_problem(plan, 1);
    enable_offload(p, slow_link(1), 0);
    Assignment a = store_all_assignment(p);
    a.H.assign(p.fvals.size(), 0);
    a.G.assign(p.num_steps(), std::vector<char>(p.fvals.size(), 0));
    a.Q.assign(p.num_states(), 0);
    int u = -1, last = -1;
    double out_ms = 0;
    for (int s = 0; s < p.num_states(); ++s) {  // the narrow offers of the layer updated first: w2 and m2
      const StateOffer& o = p.states[s];
      if (!o.narrow() || (u >= 0 && o.step != u)) continue;
      u = o.step;
      last = o.last;
      a.Q[s] = 1;
      out_ms += o.out_ms;
    }
    REQUIRE(std::count(a.Q.begin(), a.Q.end(), 1) == 2);
    REQUIRE(evaluate(p, a).feasible);
    double between = 0;  // the steps the copies out overlap
    for (int t = u + 1; t <= last; ++t) between += p.step_ms[t];
    const CopyWaits w = copy_waits(p, a);
    double after = 0;
    for (int t = u + 1; t <= last; ++t) after += w.step[t];
    INFO("seed " << seed);
    CHECK(after == Approx(std::max(0.0, out_ms - between)));
    // The engine's streams wait as much for them at the offload steps.
    const StreamTimes st = time_streams(plan, extract_schedule(p, a, "checkpoint"), p.link);
    CHECK(st.wait_to_host_ms == Approx(after).margin(1e-9));
    checked += after > 0;
  }
  CHECK(checked >= 10);
}

// An update's resident values go out together (a layer's parameter and its momentum), and the updates' copies
// queue on one stream each way: each value's widest offer (its last) spans its copy when every value on offer is
// copied, in update order (out: each update's copies as early as they can start after it and after the earlier
// updates'; in: as late as they can end before it and before the later updates'), and a step less would not. With
// every value on that offer the program counts no wait for them where the queue fits in the steps, and the
// engine's streams wait no longer than the program counts.
TEST_CASE("resident values are offered the spans of their copies when all are copied", "[solve][offload]") {
  int wider = 0, fits = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const PlanGraph plan = momentum_chain_plan(3, seed);
    CheckpointProblem p = make_problem(plan, 1);
    enable_offload(p, slow_link(seed % 2 ? 2 : 4), 0);
    const int T = p.num_steps(), F = p.num_fwd();
    std::vector<double> begin(T + 1, 0.0);
    for (int t = 0; t < T; ++t) begin[t + 1] = begin[t] + p.step_ms[t];
    // Update step -> its values' copies (in: the optimizer state's, over steps; out: every value's), and first
    // stage-0 reader -> the parameters' copies in.
    std::map<int, double> in_at, out_at, in_at_reader;
    std::map<int, std::set<int>> values_at;
    for (const StateOffer& o : p.states)
      if (values_at[o.step].insert(o.value).second) {
        (o.parameter() ? in_at_reader[o.reader] : in_at[o.step]) += o.in_ms;
        out_at[o.step] += o.out_ms;
      }
    std::map<int, double> out_end, in_start, fetch_start;  // the queues, as the offers should see them
    double end = 0;
    for (const auto& [u, ms] : out_at) out_end[u] = end = std::max(end, begin[u + 1]) + ms;
    double start = begin[T], fetch_from = p.fwd_end_ms[F];
    for (auto it = in_at.rbegin(); it != in_at.rend(); ++it) in_start[it->first] = start = std::min(start, begin[it->first]) - it->second;
    for (auto it = in_at_reader.rbegin(); it != in_at_reader.rend(); ++it)
      fetch_start[it->first] = fetch_from = std::min(fetch_from, p.fwd_begin_ms(it->first)) - it->second;
    Assignment a = store_all_assignment(p);
    a.H.assign(p.fvals.size(), 0);
    a.G.assign(T, std::vector<char>(p.fvals.size(), 0));
    a.Q.assign(p.num_states(), 0);
    for (const auto& [u, values] : values_at) {
      REQUIRE(values.size() >= 2);  // the layer's weight and its momentum
      for (int v : values) {
        int widest = -1;  // a value's offers come narrowest first
        for (int s = 0; s < p.num_states(); ++s)
          if (p.states[s].value == v) widest = s;
        const StateOffer& o = p.states[widest];
        a.Q[widest] = 1;
        INFO("seed " << seed << " update " << u << " value " << v);
        CHECK((begin[o.last + 1] >= out_end[u] || o.last == T - 1));  // it holds the queue's copy out
        CHECK((o.last == u + 1 || begin[o.last] < out_end[u]));       // and a step less would not
        if (o.parameter()) {  // its copy in before its first stage-0 reader
          CHECK((p.fwd_begin_ms(o.fetch) <= fetch_start[o.reader] || o.fetch == 0));
          CHECK((o.fetch == o.reader || p.fwd_begin_ms(o.fetch + 1) > fetch_start[o.reader]));
        } else {
          CHECK((begin[o.first] <= in_start[u] || o.first == 0));
          CHECK((o.first == u - 1 || begin[o.first + 1] > in_start[u]));
        }
        wider += begin[o.last] >= begin[u + 1] + out_at[u];  // wider than its update's copies alone need
      }
    }
    REQUIRE(evaluate(p, a).feasible);
    const CopyWaits w = copy_waits(p, a);
    const bool queue_fits = end <= begin[T] && start >= 0 && fetch_from >= 0;
    if (!queue_fits) continue;
    INFO("seed " << seed);
    CHECK(w.total() == Approx(0).margin(1e-9));
    const StreamTimes st = time_streams(plan, extract_schedule(p, a, "checkpoint"), p.link);
    CHECK(st.wait_ms == Approx(0).margin(1e-9));
    ++fits;
  }
  CHECK(wider >= 10);
  CHECK(fits >= 3);
}

// copies_for_recomputations trades a schedule's recomputations for copies where that is faster: on tiny graphs with
// a fast link, from every segment schedule at its own peak, what it returns is feasible, within that peak (also in
// the simulator), never slower, and faster with copies on some; on some a recomputation gives way to its outputs
// kept on the device (the room made by copies of other values, or already there).
TEST_CASE("copies in place of recomputations: within the budget, never slower, faster on some",
          "[solve][offload][heuristics]") {
  int tried = 0, faster = 0, kept = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const PlanGraph plan = seed % 2 == 0 ? chain_plan(4, seed) : random_plan(3, seed);
    CheckpointProblem p = make_problem(plan, seed % 2 == 0 ? 1 : 0);
    enable_offload(p, host_link_from_flag(1000.0 * kAlignBytes * 1e-6), 0);
    for (int segment = 1; segment <= p.num_fwd(); ++segment) {
      std::optional<Assignment> a = segment_assignment(p, segment);
      if (!a) continue;
      const Assignment from = lift_to(p, *a);
      const Evaluation before = evaluate(p, from);
      if (!before.feasible) continue;
      const Assignment b = copies_for_recomputations(p, from, before.peak_bytes);
      const Evaluation after = evaluate(p, b);
      INFO("seed " << seed << " segment " << segment);
      REQUIRE(after.feasible);
      CHECK(after.peak_bytes <= before.peak_bytes);
      CHECK(after.recompute_ms <= before.recompute_ms + 1e-9);
      CHECK(simulate(plan, extract_schedule(p, b, "checkpoint")).peak_bytes <= before.peak_bytes);
      ++tried;
      faster += after.recompute_ms < before.recompute_ms - 1e-9 && std::count(b.H.begin(), b.H.end(), 1) > 0;
      bool keeps = false;  // a node recomputed before whose outputs its step now holds from the forward pass
      for (int t = 1; t < p.num_steps(); ++t)
        for (int k = 0; k < p.num_fwd(); ++k) {
          if (!from.R[t][k] || b.R[t][k]) continue;
          bool held = false;
          for (size_t f = 0; f < p.fvals.size(); ++f)
            if (p.producer[f] == k) held |= b.S[t][f] && b.S[0][f] && !b.H[f];
          keeps |= held;
        }
      kept += keeps;
    }
  }
  INFO(tried << " schedules, " << faster << " faster with copies, " << kept << " keeping what they recomputed");
  CHECK(tried >= 40);
  CHECK(faster >= 5);
  CHECK(kept >= 5);
}

// The waits copy_waits() counts are the least the program's rows allow: at every feasible assignment that waits for
// a copy from the host, its columns satisfy every row, and shortening any wait (with its step's time) breaks one.
// Catches a copy left out of the rows that optima over tiny graphs never need.
// Lean copy timings (CopyTiming::lean, lean_out, lean_in): the same program over the same variables with the copies
// to the host, the copies back, or both releasing and taking device memory as late as they can. Each one's optimum
// equals brute force, its schedules pass the simulator, and for the same assignment each needs no more memory than
// the hidden timing, and lean no more than the two half-lean ones (only the waits may grow).
TEST_CASE("lean copy timings: MILP optimum equals brute force, never more memory than hidden timing",
          "[solve][milp][offload]") {
  const CopyTiming timings[] = {CopyTiming::lean, CopyTiming::lean_out, CopyTiming::lean_in};
  for (CopyTiming timing : timings) {
    INFO("copy timing " << copy_timing_name(timing));
    Tally tally;
    int assignments = 0, lower = 0, waited = 0;
    for (uint64_t seed = 1; seed <= 60 && tally.compared < 30; ++seed) {
      const bool chain = seed % 3 != 0;
      PlanGraph plan = chain ? chain_plan(seed % 3 == 1 ? 3 : 4, seed) : random_plan(3, seed);
      CheckpointProblem hidden = make_problem(plan, chain ? 1 : 0);
      // Copies back on the default link fit the step before their reader here: lean_in's on a slower one.
      enable_offload(hidden, slow_link(timing == CopyTiming::lean_in ? 1 : 4), 0);
      const CheckpointProblem lean = with_copy_timing(hidden, timing);
      const CheckpointProblem leanest = with_copy_timing(hidden, CopyTiming::lean);
      REQUIRE(lean.copy_timing == timing);
      Assignment probe = empty_assignment(lean);
      if (offload_bits(lean, probe).size() > 18) continue;
      for (size_t f = 0; f < lean.fvals.size(); ++f) {
        if (lean_release(timing)) CHECK(lean.offload_at[f] <= std::max(hidden.offload_at[f], lean.producer[f] + 1));
        else CHECK(lean.offload_at[f] == hidden.offload_at[f]);
        for (int t = 1; t < lean.num_steps(); ++t)
          if (lean.has_g(t, f))
            CHECK(lean.prefetch_first(t, f) == (lean_take(timing) ? t - 1 : hidden.prefetch_first(t, f)));
      }
      for_each_offload_assignment(lean, [&](const Assignment& a) {
        const Evaluation h = evaluate(hidden, a);
        if (!h.feasible) return;
        const Evaluation l = evaluate(lean, a), least = evaluate(leanest, a);
        REQUIRE(l.feasible);
        REQUIRE(least.feasible);
        CHECK(l.peak_bytes <= h.peak_bytes);
        CHECK(least.peak_bytes <= l.peak_bytes);
        CHECK(l.recompute_ms >= h.recompute_ms - 1e-9);
        ++assignments;
        lower += l.peak_bytes < h.peak_bytes;
        waited += l.copy_wait_ms > h.copy_wait_ms + 1e-9;
      });
      const int64_t store_all = simulate(plan, store_all_schedule(plan)).peak_bytes;
      const int64_t lb = lean.lower_bound_bytes();
      const int64_t without = least_peak_without(lean);
      for (int64_t budget : {lb, (lb + without) / 2, without, (without + store_all) / 2}) {
        INFO("seed " << seed << " budget " << budget);
        compare_with_brute_force(plan, lean, budget, 0, tally);
      }
    }
    INFO(tally.compared << " compared, " << tally.offloading << " optima offload; " << assignments
                        << " assignments, " << lower << " with less memory, " << waited << " waiting longer");
    CHECK(tally.compared >= 20);
    CHECK(tally.offloading >= tally.compared / 4);
    CHECK(lower > 0);
    CHECK(waited > 0);
  }
}

TEST_CASE("copy-in rows hold every wait the evaluator counts", "[solve][milp][offload]") {
  int checked = 0, wide = 0;
  for (uint64_t seed = 1; seed <= 240; ++seed) {
    const PlanGraph plan = momentum_chain_plan(3, seed);
    CheckpointProblem p = make_problem(plan, 1);
    if (!brute_forceable_offload(p, slow_link(1))) continue;
    MilpLayout layout;
    const LinearProgram lp = checkpoint_milp(p, int64_t{1} << 40, &layout);
    int here = 0, waiting = 0, wide_here = 0;
    for_each_offload_assignment(p, [&](const Assignment& a) {
      if (here >= 150 || !evaluate(p, a).feasible) return;
      const CopyWaits w = copy_waits(p, a);
      int t = -1;
      for (size_t u = 0; u < w.step.size(); ++u)
        if (w.step[u] > 1e-6) t = static_cast<int>(u);
      if (t < 0) return;
      bool any = false;  // copies a value back over a wide span
      for (int u = 1; u < p.num_steps(); ++u)
        for (int f = 0; f < static_cast<int>(p.fvals.size()); ++f)
          any |= a.prefetched(u, f) && p.prefetch_first(u, f) < u - 1;
      // A sample across the enumeration, and the rarer wide copies (a few per graph) besides.
      if (waiting++ % 29 != 0 && !(any && wide_here < 4)) return;
      ++here;
      wide_here += any;
      std::vector<double> x = to_columns(p, layout, lp, a);
      require_rows_hold(lp, x);
      const double d = std::min(x[layout.W[t]], 1e-3);
      x[layout.W[t]] -= d;
      x[layout.D[t]] -= d;
      CHECK(some_row_broken(lp, x));
      wide += any;
    });
    checked += here;
  }
  INFO(checked << " assignments waiting for a copy, " << wide << " prefetching over a wide span among them");
  CHECK(checked >= 100);
  CHECK(wide >= 10);
}

// The same for stage 0's copies to the host: at every feasible point that waits for them, the columns satisfy
// every row and a shorter wait after any position breaks one. Among them points whose wait is set by copies
// released after stage 0's start (more than copies one after another from its start would wait).
TEST_CASE("stage-0 copy rows hold every wait the evaluator counts", "[solve][milp][offload]") {
  int checked = 0, nested = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const PlanGraph plan = seed % 2 == 0 ? chain_plan(3, seed) : random_plan(3, seed);
    CheckpointProblem p = make_problem(plan, seed % 2 == 0 ? 1 : 0);
    if (!brute_forceable_offload(p, slow_link(0.5))) continue;
    MilpLayout layout;
    const LinearProgram lp = checkpoint_milp(p, int64_t{1} << 40, &layout);
    int here = 0;
    for_each_offload_assignment(p, [&](const Assignment& a) {
      if (here >= 20 || !evaluate(p, a).feasible) return;
      const double fwd = copy_waits(p, a).fwd;
      if (fwd < 1e-6) return;
      double from_start = 0, queued = 0;  // the wait the running sums from stage 0's start alone ask for
      for (int k = 0; k <= p.num_fwd(); ++k)
        for (int f : p.fwd_offloaded[k])
          if (a.H[f]) from_start = std::max(from_start, (queued += p.copy_out_ms[f]) - p.fwd_end_ms[k]);
      ++here;
      nested += fwd > from_start + 1e-6;
      const std::vector<double> x = to_columns(p, layout, lp, a);
      require_rows_hold(lp, x);
      for (int col : layout.Wout) {
        if (col < 0 || x[col] < 1e-6) continue;
        std::vector<double> shorter = x;
        shorter[col] -= std::min(x[col], 1e-3);
        CHECK(some_row_broken(lp, shorter));
      }
    });
    checked += here;
  }
  INFO(checked << " points waiting for stage 0's copies, " << nested << " by copies within a value's span");
  CHECK(checked >= 100);
  CHECK(nested >= 10);
}

// Stage 0's copies to the host wait as long as the program counts (stage0_copies) on the engine's streams when the
// copy plan splits them finely (plan_copies, the earliest deadline first): the program's count is what a stream
// that may interrupt a copy anywhere waits, and pieces of 1/64 of a unit stray from it by at most a piece per
// position. Checked against time_streams, which neither the rows nor the evaluator share.
TEST_CASE("stage 0's copies to the host wait as the program counts on a stream that splits them finely",
          "[solve][milp][offload][streams]") {
  int checked = 0, overlapping = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const PlanGraph plan = seed % 2 == 0 ? chain_plan(3, seed) : random_plan(3, seed);
    CheckpointProblem p = make_problem(plan, seed % 2 == 0 ? 1 : 0);
    const HostLink link = host_link_from_flag(0.5 * kAlignBytes * 1e-6);  // no latency: pieces cost nothing extra
    if (!brute_forceable_offload(p, link)) continue;
    const double piece_ms = link.copy_ms(kAlignBytes / 64, true);
    int here = 0;
    for_each_offload_assignment(p, [&](const Assignment& a) {
      if (here >= 20 || !evaluate(p, a).feasible) return;
      const double fwd = copy_waits(p, a).fwd;
      if (fwd < 1e-6) return;
      ++here;
      // Copies that overlap without one lying within the other (no span of one copy alone holds the wait).
      double own = 0;
      for (size_t f = 0; f < p.fvals.size(); ++f)
        if (a.H[f]) {
          const auto [r, d] = p.out_slots(static_cast<int>(f));
          double within = 0;
          for (size_t g = 0; g < p.fvals.size(); ++g)
            if (a.H[g] && p.out_slots(static_cast<int>(g)).first >= r && p.offload_at[g] <= d) within += p.copy_out_ms[g];
          own = std::max(own, within - (p.fwd_end_ms[d] - (r > 0 ? p.fwd_end_ms[r - 1] : 0.0)));
        }
      overlapping += fwd > own + 1e-6;
      Schedule s = extract_schedule(p, a, "checkpoint");
      s.copy_plan = plan_copies(plan, s, link, kAlignBytes / 64);
      const StreamTimes st = time_streams(plan, s, link);
      INFO("seed " << seed << ": program " << fwd << " ms, streams " << st.wait_to_host_ms << " ms");
      CHECK(st.wait_to_host_ms >= fwd - 1e-9);
      CHECK(st.wait_to_host_ms <= fwd + piece_ms * (p.num_fwd() + 1) + 1e-9);
    });
    checked += here;
  }
  INFO(checked << " points waiting for stage 0's copies, " << overlapping << " by copies that overlap");
  CHECK(checked >= 100);
  CHECK(overlapping >= 10);
}

// With implementation choices, the copies run in the chosen implementations' times: a faster algorithm shortens
// the node times a copy overlaps. Stage 0's waits (the program's count) against time_streams with fine pieces, which
// times each node under its chosen implementation; and the program's rows hold at every such point with its waits,
// a shorter wait breaking one.
TEST_CASE("copies are priced in the chosen implementations' node times", "[solve][milp][offload][streams]") {
  int checked = 0, faster = 0, prefetching = 0;
  for (uint64_t seed = 1; seed <= 60 && checked < 150; ++seed) {
    const PlanGraph plan = random_plan(3, seed, true, false, true, true);
    CheckpointProblem p = make_problem(plan, 0, true);
    const HostLink link = host_link_from_flag(0.5 * kAlignBytes * 1e-6);  // no latency: pieces cost nothing extra
    if (!p.has_choices() || !brute_forceable_offload(p, link)) continue;
    MilpLayout layout;
    const LinearProgram lp = checkpoint_milp(p, int64_t{1} << 40, &layout);
    const double piece_ms = link.copy_ms(kAlignBytes / 64, true);
    std::mt19937_64 rng(seed);
    int here = 0;
    for_each_offload_assignment(p, [&](const Assignment& plain) {
      if (here >= 15 || !offloads(plain) || rng() % 7 != 0) return;
      Assignment a = plain;
      for (int t = 0; t < p.num_steps(); ++t) a.M[t] = static_cast<int>(rng() % p.num_impls(t));
      for (int k = 0; k < p.num_fwd(); ++k) a.P[k] = static_cast<int>(rng() % p.num_fwd_impls(k));
      if (!evaluate(p, a).feasible) return;
      ++here;
      bool quicker = false;  // a chosen implementation faster than the default
      for (int t = 0; t < p.num_steps(); ++t) quicker |= p.impl_ms[t][a.M[t]] < 0;
      for (int k = 0; k < p.num_fwd(); ++k) quicker |= p.fwd_impl_ms[k][a.P[k]] < 0;
      faster += quicker;
      const CopyWaits w = copy_waits(p, a);
      Schedule s = extract_schedule(p, a, "full");
      s.copy_plan = plan_copies(plan, s, link, kAlignBytes / 64);
      const StreamTimes st = time_streams(plan, s, link);
      INFO("seed " << seed << ": program " << w.fwd << " ms, streams " << st.wait_to_host_ms << " ms");
      CHECK(st.wait_to_host_ms >= w.fwd - 1e-9);
      CHECK(st.wait_to_host_ms <= w.fwd + piece_ms * (p.num_fwd() + 1) + 1e-9);
      std::vector<double> x = to_columns(p, layout, lp, a);
      require_rows_hold(lp, x);
      for (size_t t = 0; t < layout.W.size(); ++t) {
        if (layout.W[t] < 0 || x[layout.W[t]] < 1e-6) continue;
        ++prefetching;
        std::vector<double> shorter = x;
        const double d = std::min(x[layout.W[t]], 1e-3);
        shorter[layout.W[t]] -= d;
        shorter[layout.D[t]] -= d;
        CHECK(some_row_broken(lp, shorter));
      }
    });
    checked += here;
  }
  INFO(checked << " points, " << faster << " with an implementation faster than the default, " << prefetching
               << " waits for copies in steps");
  CHECK(checked >= 100);
  CHECK(faster >= checked / 2);
  CHECK(prefetching >= 20);
}

// A value with two offers (the steps around its update, and a wider span) takes at most one: with both, every
// memory row would credit it twice. The program refuses every point that takes both, as evaluate() does, however
// the continuous columns follow (to_columns), so leaving qone out fails here even where optima never need it.
TEST_CASE("no integer point takes two offers of one optimizer state", "[solve][milp][offload]") {
  int tried = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const PlanGraph plan = momentum_chain_plan(3, seed);
    CheckpointProblem p = make_problem(plan, 1);
    enable_offload(p, slow_link(2), 0);
    drop_parameter_offers(p);
    MilpLayout layout;
    const LinearProgram lp = checkpoint_milp(p, int64_t{1} << 40, &layout);
    const Assignment all = store_all_assignment(p);
    REQUIRE(evaluate(p, all).feasible);
    for (int s = 0; s + 1 < p.num_states(); ++s) {
      if (p.states[s].value != p.states[s + 1].value) continue;
      Assignment a = all;
      a.Q[s] = a.Q[s + 1] = 1;
      CHECK_FALSE(evaluate(p, a).feasible);
      CHECK(some_row_broken(lp, to_columns(p, layout, lp, a)));
      a.Q[s + 1] = 0;  // one offer alone is a feasible point of both
      REQUIRE(evaluate(p, a).feasible);
      require_rows_hold(lp, to_columns(p, layout, lp, a));
      ++tried;
    }
  }
  CHECK(tried >= 10);
}

TEST_CASE("offloading idle kept values never raises the peak", "[solve][offload]") {
  int lowered = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    PlanGraph plan = random_plan(6, seed);
    CheckpointProblem p = make_problem(plan, 0);
    enable_offload(p, slow_link(), 0);
    const Assignment all = store_all_assignment(p);
    const Assignment off = offload_idle_kept(p, all);
    const Evaluation e0 = evaluate(p, all), e1 = evaluate(p, off);
    REQUIRE(e0.feasible);
    REQUIRE(e1.feasible);
    CHECK(e1.peak_bytes <= e0.peak_bytes);
    lowered += e1.peak_bytes < e0.peak_bytes;
    const SimResult sim = simulate(plan, extract_schedule(p, off, "checkpoint"));
    CHECK(sim.peak_bytes <= e1.peak_bytes);
    CHECK(sim.transfers == 2 * std::count(off.H.begin(), off.H.end(), 1));
  }
  CHECK(lowered >= 6);
}

TEST_CASE("offloading idle kept values up to a budget: the fewest that fit, those used last first", "[solve][offload]") {
  int fewer = 0, budgets = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    PlanGraph plan = random_plan(8, seed);
    CheckpointProblem p = make_problem(plan, 0);
    enable_offload(p, slow_link(), 0);
    const Assignment all = store_all_assignment(p);
    const Assignment every = offload_idle_kept(p, all);
    const int64_t high = evaluate(p, all).peak_bytes, low = evaluate(p, every).peak_bytes;
    const int every_count = static_cast<int>(std::count(every.H.begin(), every.H.end(), 1));
    CHECK(offload_idle_kept(p, all, high).H == std::vector<char>(p.fvals.size(), 0));  // fits as it is
    for (int64_t budget = low; budget < high; budget += kAlignBytes) {
      INFO("seed " << seed << ", budget " << budget);
      ++budgets;
      const Assignment a = offload_idle_kept(p, all, budget);
      const Evaluation e = evaluate(p, a);
      REQUIRE(e.feasible);
      CHECK(e.peak_bytes <= budget);
      CHECK(a.Q == every.Q);  // the optimizer state goes home either way
      const int count = static_cast<int>(std::count(a.H.begin(), a.H.end(), 1));
      CHECK(count >= 1);
      CHECK(count <= every_count);
      fewer += count < every_count;
      // Those used last first: no value left on the device is first used after one offloaded.
      int earliest = p.num_steps(), last_added = -1;
      for (int f = 0; f < static_cast<int>(p.fvals.size()); ++f)
        for (int t = 0; t < p.num_steps(); ++t)
          if (a.G[t][f] && t <= earliest) earliest = t, last_added = f;
      for (int f = 0; f < static_cast<int>(p.fvals.size()); ++f)
        for (int t = earliest + 1; t < p.num_steps(); ++t)
          if (every.G[t][f]) CHECK(a.G[t][f]);
      // The fewest: without the one added last the peak is over the budget.
      Assignment less = a;
      for (int t = 0; t < p.num_steps(); ++t) {
        less.S[t][last_added] = all.S[t][last_added] && t <= earliest ? 1 : less.S[t][last_added];
        less.G[t][last_added] = 0;
      }
      less.H[last_added] = 0;
      const Evaluation el = evaluate(p, less);
      REQUIRE(el.feasible);
      CHECK(el.peak_bytes > budget);
    }
  }
  CHECK(budgets >= 10);
  CHECK(fewer >= 5);
}

namespace {

// x -> f0 -> a0 (2 units) -> f1 -> a1 (2) -> f2 -> a2 (1) -> f3 -> a3 (8) -> loss; b2, two steps after the loss's
// gradient, reads a2, the other backward nodes only gradients. Within a window of one level a2's recomputation
// needs a0 or a1 kept: at the loss's gradient (a3 live) keeping a2 costs a unit, keeping a0 or a1 two, offloading a2
// nothing (it comes back during the step between). So the least peak with offload is a unit below the least without.
PlanGraph idle_small_value_plan() {
  monet::test::PlanBuilder pb;
  const int x = pb.value("x", 1, true), w = pb.value("w", 1, true);
  const int a0 = pb.value("a0", 2, false), a1 = pb.value("a1", 2, false), a2 = pb.value("a2", 1, false),
            a3 = pb.value("a3", 8, false);
  pb.node("f0", Stage::forward, {x}, {a0}, 2);
  pb.node("f1", Stage::forward, {a0}, {a1}, 2);
  pb.node("f2", Stage::forward, {a1}, {a2}, 2);
  pb.node("f3", Stage::forward, {a2}, {a3}, 2);
  const int loss = pb.value("loss", 1, false);
  pb.node("loss", Stage::loss, {a3}, {loss});
  const int g4 = pb.value("g4", 1, false), gm = pb.value("gm", 1, false), g2 = pb.value("g2", 1, false),
            g1 = pb.value("g1", 1, false), g0 = pb.value("g0", 1, false);
  pb.node("loss_grad", Stage::backward, {a3}, {g4}, 2);
  pb.node("bmid", Stage::backward, {g4}, {gm}, 2);
  pb.node("b2", Stage::backward, {gm, a2}, {g2}, 2);
  pb.node("b1", Stage::backward, {g2}, {g1}, 2);
  pb.node("b0", Stage::backward, {g1}, {g0}, 2);
  pb.node("update", Stage::update, {w, g0}, {});
  return std::move(pb.plan);
}

}  // namespace

TEST_CASE("offload reaches a budget that recomputation cannot: brute force, MILP, solve and simulator agree",
          "[solve][offload]") {
  const PlanGraph plan = idle_small_value_plan();
  CheckpointProblem p = make_problem(plan, 1);
  enable_offload(p, slow_link(), 0);
  int64_t with = INT64_MAX, without = INT64_MAX;
  for_each_offload_assignment(p, [&](const Assignment& a) {
    const Evaluation e = evaluate(p, a);
    if (!e.feasible) return;
    with = std::min(with, e.peak_bytes);
    if (std::none_of(a.H.begin(), a.H.end(), [](char h) { return h != 0; })) without = std::min(without, e.peak_bytes);
  });
  REQUIRE(with == without - kAlignBytes);
  for (const int64_t budget : {with, with - 1}) {
    MilpLayout layout;
    CbcOptions o;
    o.time_limit_s = kNoClock;
    const CbcResult r = solve_with_cbc(checkpoint_milp(p, budget, &layout), o, nullptr);
    if (budget < with) {
      CHECK(r.status == CbcResult::Status::infeasible);
      continue;
    }
    REQUIRE(r.status == CbcResult::Status::optimal);
    const Assignment a = from_columns(p, layout, r.x);
    CHECK(a.on_host(p.fval_of[4]));  // a2 (values: x w a0 a1 a2 ...)
  }
  SolveOptions o;
  o.time_limit_s = kNoClock;
  o.window = 1;
  o.budget_bytes = with;
  const SolveOutcome none = solve(plan, o);
  CHECK_FALSE(none.fits);
  o.offload = slow_link();
  const SolveOutcome off = solve(plan, o);
  REQUIRE(off.fits);
  // No schedule without copies fits: the heuristics plan none, nor does CBC find one in the program without copies.
  CHECK(off.without_copies_status == "no_start");
  CHECK(off.predicted.peak_bytes == with);
  CHECK(off.predicted.transfers == 2);
  CHECK(off.predicted.host_peak_bytes == kAlignBytes);
  CHECK(off.objective_ms == Approx(off.predicted.time_ms + off.copy_wait_ms));
  // A host limit below a1's unit leaves nothing to offload.
  o.host_limit_bytes = kAlignBytes / 2;
  CHECK_FALSE(solve(plan, o).fits);
}

TEST_CASE("chain cuts with prefetch terms hold at every integer point with offload and cut off fractional ones",
          "[solve][milp][offload]") {
  int problems = 0, cuts = 0, with_g = 0;
  for (uint64_t seed = 1; seed <= 60 && problems < 12; ++seed) {
    PlanGraph plan = seed % 2 == 0 ? chain_plan(3, seed) : random_plan(3, seed);
    CheckpointProblem p = make_problem(plan, seed % 2 == 0 ? 1 : 0);
    enable_offload(p, slow_link(), 0);
    Assignment probe = empty_assignment(p);
    if (offload_bits(p, probe).size() > 18) continue;
    INFO("seed " << seed);
    MilpLayout layout;
    const LinearProgram lp = checkpoint_milp(p, simulate(plan, store_all_schedule(plan)).peak_bytes, &layout);
    std::vector<std::vector<double>> points;  // every assignment evaluate() accepts, as columns
    for_each_offload_assignment(p, [&](const Assignment& a) {
      if (evaluate(p, a).feasible) points.push_back(to_columns(p, layout, lp, a));
    });
    REQUIRE(!points.empty());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0, 1);
    for (int draw = 0; draw < 40; ++draw) {
      std::vector<double> x(lp.col_names.size());
      for (size_t j = 0; j < x.size(); ++j) x[j] = lp.integer[j] ? unit(rng) * unit(rng) : 0;
      for (const LinearProgram::Row& r : chain_cuts(p, layout, x.data(), 1000)) {
        CHECK(activity(r, x) < r.lo - 1e-4);
        for (const std::vector<double>& y : points) CHECK(activity(r, y) >= r.lo - 1e-9);
        ++cuts;
        with_g += std::any_of(r.cols.begin(), r.cols.end(),
                              [&](int c) { return lp.col_names[c].rfind("G_", 0) == 0; });
      }
    }
    ++problems;
  }
  INFO(cuts << " cuts on " << problems << " problems, " << with_g << " with prefetch terms");
  CHECK(problems == 12);
  CHECK(cuts > 200);
  CHECK(with_g > 50);
}

// The program's copy rows price the copies apart from the order the engine issues them in (docs/planner.md,
// "Offload"): solve reports the step on the engine's streams (time_streams), and under offload returns the schedule
// without copies where that one is the faster there, so it is never slower than the solve without offload.
TEST_CASE("solve under offload reports the step on the engine's streams and is never slower than without",
          "[solve][offload][streams]") {
  int solved = 0, copying = 0, apart = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const PlanGraph plan = seed % 3 == 0   ? momentum_chain_plan(3, seed)
                           : seed % 3 == 1 ? chain_plan(5, seed)
                                           : random_plan(6, seed);
    const SimResult lean = simulate(plan, lean_store_all_schedule(plan));
    CheckpointProblem p = make_problem(plan, 1);
    enable_offload(p, slow_link(seed % 4 + 1), 0);
    const int64_t floor = p.lower_bound_bytes();
    for (const double share : {0.5, 0.75, 0.9}) {
      const int64_t budget = floor + static_cast<int64_t>(share * static_cast<double>(lean.peak_bytes - floor));
      SolveOptions o;
      o.time_limit_s = kNoClock;
      o.budget_bytes = budget;
      const SolveOutcome without = solve(plan, o);
      o.offload = p.link;
      const SolveOutcome with = solve(plan, o);
      INFO("seed " << seed << ", budget " << budget);
      if (!with.fits) continue;
      ++solved;
      const StreamTimes t = time_streams(plan, with.schedule, p.link);
      CHECK(with.objective_ms == Approx(t.step_ms));
      CHECK(with.copy_wait_ms == Approx(t.wait_ms).margin(1e-9));
      CHECK(with.copy_wait_to_host_ms == Approx(t.wait_to_host_ms).margin(1e-9));
      CHECK(with.copy_wait_to_device_ms == Approx(t.wait_to_device_ms).margin(1e-9));
      CHECK(t.compute_ms == Approx(with.predicted.time_ms));
      if (without.fits) CHECK(with.objective_ms <= without.objective_ms + 1e-9);
      copying += with.predicted.transfers > 0;
      apart += std::abs(with.copy_wait_ms - with.program_wait_ms) > 1e-6;
    }
  }
  INFO(solved << " solved with offload, " << copying << " copying, " << apart
              << " where the program's waits differ from the streams'");
  CHECK(solved >= 60);
  CHECK(copying >= 30);
}

// Below the heuristics' floor with copies timed to hide them, solve() takes the first of the leaner copy timings
// (lean-out, lean-in, lean) whose heuristics reach the budget: the schedule fits, passes the simulator at the
// streams' time, and the report says which.
TEST_CASE("solve takes a leaner copy timing below the hidden timing's heuristic floor", "[solve][offload][streams]") {
  int taken = 0, tried = 0, below_both = 0, half = 0;
  for (uint64_t seed = 1; seed <= 120 && taken < 4; ++seed) {
    const PlanGraph plan = seed % 2 == 0 ? chain_plan(5, seed) : random_plan(6, seed);
    CheckpointProblem hidden = make_problem(plan, 0);
    enable_offload(hidden, slow_link(seed % 3 + 1), 0);
    const CheckpointProblem lean = with_copy_timing(hidden, CopyTiming::lean);
    const int64_t hidden_floor = smallest_heuristic_peak(hidden), lean_floor = smallest_heuristic_peak(lean);
    CHECK(lean_floor <= hidden_floor);
    if (lean_floor >= hidden_floor || lean_floor < hidden.lower_bound_bytes()) continue;
    ++tried;
    SolveOptions o;
    o.time_limit_s = kNoClock;
    o.window = 0;
    o.budget_bytes = lean_floor;
    o.offload = hidden.link;
    // The timing solve() should take at a budget: the first of lean-out, lean-in and lean whose heuristics plan a
    // schedule within it, else the one whose heuristics reach the lowest peak below hidden's.
    const auto expected_timing = [&](int64_t budget) {
      std::string lowest = "hidden";
      int64_t lowest_peak = hidden_floor;
      for (CopyTiming t : {CopyTiming::lean_out, CopyTiming::lean_in, CopyTiming::lean}) {
        std::optional<Assignment> within;
        const int64_t peak = smallest_heuristic_peak(with_copy_timing(hidden, t), kNoDeadline, budget, &within);
        if (within) return std::string(copy_timing_name(t));
        if (peak < lowest_peak) {
          lowest_peak = peak;
          lowest = copy_timing_name(t);
        }
      }
      return lowest;
    };
    const SolveOutcome out = solve(plan, o);
    INFO("seed " << seed << ": floors " << hidden_floor << " hidden, " << lean_floor << " lean");
    const std::string want = expected_timing(o.budget_bytes);
    CHECK(out.copy_timing == want);
    half += want != "lean";
    CHECK(out.smallest_found_bytes <= lean_floor);
    REQUIRE(out.fits);
    const SimResult sim = simulate(plan, out.schedule);
    CHECK(sim.peak_bytes <= lean_floor);
    const StreamTimes t = time_streams(plan, out.schedule, hidden.link);
    CHECK(out.objective_ms == Approx(t.step_ms));
    taken += out.copy_timing != "hidden" && out.fits;
    // Below both floors a leaner program is searched too (it has every schedule of the hidden one, in no more
    // memory); whatever CBC finds there fits.
    o.budget_bytes = (hidden.lower_bound_bytes() + lean_floor) / 2;
    if (o.budget_bytes > hidden.lower_bound_bytes()) {
      const SolveOutcome below = solve(plan, o);
      CHECK(below.copy_timing == expected_timing(o.budget_bytes));
      CHECK(below.copy_timing != "hidden");
      if (below.fits) CHECK(simulate(plan, below.schedule).peak_bytes <= o.budget_bytes);
      below_both += 1;
    }
  }
  INFO(tried << " graphs with a lower floor under lean timing, " << below_both << " solved below both floors, " << half
             << " on a half-lean timing");
  CHECK(taken >= 2);
  CHECK(below_both >= 1);
  CHECK(half >= 1);  // a half-lean timing is taken somewhere: the order matters
}

TEST_CASE("a schedule without copies handed in stands for that program: never slower than it, and only where it is "
          "one of the program's within the budget",
          "[solve][offload]") {
  int given = 0, over = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const PlanGraph plan = seed % 2 == 0 ? chain_plan(5, seed) : random_plan(6, seed);
    const SimResult lean = simulate(plan, lean_store_all_schedule(plan));
    CheckpointProblem p = make_problem(plan, 1);
    enable_offload(p, slow_link(seed % 4 + 1), 0);
    const int64_t floor = make_problem(plan, 1).lower_bound_bytes();
    const int64_t budget = floor + (lean.peak_bytes - floor) / 2;
    SolveOptions o;
    o.time_limit_s = kNoClock;
    o.budget_bytes = budget;
    const SolveOutcome without = solve(plan, o);
    INFO("seed " << seed << ", budget " << budget);
    if (!without.fits) continue;
    REQUIRE(without.assignment);
    o.offload = p.link;
    o.without_copies = without.assignment;
    const SolveOutcome with = solve(plan, o);
    CHECK(with.without_copies_status == "given");
    CHECK(with.without_copies_ms == Approx(without.objective_ms));
    REQUIRE(with.fits);
    CHECK(with.objective_ms <= without.objective_ms + 1e-9);
    ++given;
    // One with a step too many, and store-all's where the program counts it above the budget: solved as without.
    Assignment longer = *without.assignment;
    longer.M.push_back(0);
    o.without_copies = longer;
    CHECK(solve(plan, o).without_copies_status != "given");
    const CheckpointProblem p0 = make_problem(plan, 1);
    const Assignment all = store_all_assignment(p0);
    if (evaluate(p0, all).peak_bytes > budget) {
      o.without_copies = all;
      CHECK(solve(plan, o).without_copies_status != "given");
      ++over;
    }
  }
  CHECK(given >= 8);
  CHECK(over >= 4);
}
