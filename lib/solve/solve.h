// monet-solve's library side: from a plan graph and a budget to a verified schedule and its figures.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "schedule/schedule.h"
#include "solve/cbc.h"
#include "solve/problem.h"

namespace monet {

struct SolveOptions {
  int64_t budget_bytes = 0;
  // full: checkpointing + each backward node's implementation (which saved tensors it reads); checkpoint: keep /
  // recompute only, default implementations; store-all and sqrtn: baselines without a MILP.
  std::string mode = "checkpoint";
  double time_limit_s = 600;
  // CBC's node limit (0: none; CbcOptions::max_nodes). With a time limit that never binds, the solve ends by work
  // done: the heuristics run to their own ends, the root cut rounds to theirs, the neighbourhood search until every
  // neighbourhood is closed, CBC at the optimum or at this many nodes.
  int64_t max_nodes = 0;
  int max_sub_mips = 0;  // the neighbourhood search's sub-MIPs at most (0: no limit; CbcOptions::max_sub_mips)
  int threads = 2;
  int window = kAutoWindow;          // recomputation window in levels, 0 = none (make_problem, problem.h)
  // The auto window's limit on recomputation candidates (tests lower it); solve() widens the window beyond it where
  // the heuristics reach the budget only in a wider one (widen_window, solve.cpp).
  int64_t auto_window_candidates = kAutoWindowCandidates;
  std::function<void(const CbcProgress&)> progress;  // incumbent and bound as predicted step times (ms)
  // Full mode: the least time left of the neighbourhood search's share for solving the program with the
  // incumbent's implementations fixed, once the search has closed every neighbourhood (solve.cpp; tests lower it).
  double fixed_impls_min_s = 30;
  // Offload (docs/planner.md, "Offload"): the link that prices the copies; none: keep or recompute only.
  std::optional<HostLink> offload;
  int64_t host_limit_bytes = 0;  // the most bytes on the host at once (0: no limit)
  // Under offload, the copies' timing (CopyTiming, lib/solve/problem.h); none: hidden, and where the heuristics plan
  // nothing within the budget with hidden the first of lean-out, lean-in and lean whose heuristics plan something,
  // else the one whose heuristics reach the lowest peak below hidden's (--copy-timing auto).
  std::optional<CopyTiming> copy_timing;
  // Under --offload: a schedule without copies already solved for this plan and budget (a SolveOutcome::assignment
  // of a solve without offload). It stands in for the program without copies' phase, and the program with copies
  // gets the whole time limit from it (monet-fit, which solves each batch without offload first).
  std::optional<Assignment> without_copies;
  // The lean store-all's implementations of this plan (lean_store_all_impls), where the caller computed them
  // already (monet-fit, which tests the store-all's peak before it solves); empty: solve() computes them.
  std::vector<int> store_all_impls;
};

struct SolveOutcome {
  std::string status;                // optimal | feasible | infeasible | no solution found
  bool fits = false;                 // a schedule within the budget exists in `schedule`
  Schedule schedule;
  SimResult predicted;               // the simulator on the schedule
  SimResult store_all;               // the simulator on the lean store-all (the baseline of overheads)
  std::vector<int> store_all_impls;  // the lean store-all's implementations (store_all_schedule draws it)
  SimResult fast_store_all;          // the simulator on the fast store-all (its time: no schedule is faster)
  double objective_ms = 0;           // predicted step time (every node once + recomputations)
  double bound_ms = 0;               // proven lower bound on the step time (MILP modes)
  double gap = 0;                    // (objective - bound) / objective
  double first_feasible_s = -1;
  double solve_s = 0;
  double setup_s = 0, lp_s = 0, warm_start_s = 0, cbc_s = 0;  // phases of solve_s (MILP modes), with root_cuts.seconds
  // Under --offload: the solve of the program without copies before the one with them (a phase of solve_s; 0 where
  // it was skipped), and its schedule's step (0 where it found none).
  double without_copies_s = 0, without_copies_ms = 0;
  // How that solve ended: "skipped" (the budget is below what any schedule without copies reaches), "no_start"
  // (the heuristics planned none within the budget, nor did CBC find one in the share it then gets), else its
  // status ("optimal", "feasible", "infeasible", "not_found"); empty without --offload.
  std::string without_copies_status;
  // Under --offload, when the copies take device memory (CopyTiming, lib/solve/problem.h): "hidden", or "lean-out",
  // "lean-in" or "lean" where --copy-timing said so or the solve took it (SolveOptions::copy_timing); empty without.
  std::string copy_timing;
  RootCuts root_cuts;                // the rounds of root cuts before CBC (lib/solve/cbc.h)
  Neighborhoods neighborhoods;       // the neighbourhood search before CBC's (lib/solve/cbc.h)
  int window = 0;                    // the recomputation window used (levels; 0 = none)
  // The auto window that was proven too narrow for the budget before the solve without a window (0: none was).
  int window_infeasible = 0;
  // Steps whose window solve() widened beyond `window` to reach the budget (widen_window, solve.cpp), and the widest
  // of their windows in levels; 0 when none was.
  int widened_steps = 0, widened_levels = 0;
  int64_t columns = 0, rows = 0, nonzeros = 0;
  int64_t lower_bound_bytes = 0;     // no schedule needs less
  // The plan node of the step that sets lower_bound_bytes (what it must hold at least is the most of any step);
  // empty when there is none.
  std::string lower_bound_node;
  // The lowest peak of the heuristic schedules (an achievable budget), or where they reach the budget the first
  // peak found within it.
  int64_t smallest_found_bytes = 0;
  // Why no schedule fits, when none does: "below_lower_bound" (proven for every schedule), "infeasible" (proven
  // for this formulation and window), "not_found" (nothing found within the time limit; not proven).
  std::string why_none;
  bool warm_start = false;
  double warm_start_ms = 0;          // predicted step time of the warm start
  double lp_bound_ms = 0;            // the LP relaxation's step time
  double root_bound_ms = 0;          // after the root cut rounds (0 when the relaxation did not finish)
  // Full mode: no schedule with the schedule's implementations is faster than this (the fixed-implementations
  // phase's bound, when the schedule kept the implementations that phase fixed; at least bound_ms, at most
  // objective_ms); 0 when there is none.
  double impls_bound_ms = 0;
  std::map<std::string, int> implementations;  // "op:implementation" -> compute steps running it (non-default only)
  // Offload: of objective_ms, the compute stream waiting for copies as the engine issues them (time_streams); and
  // what the program counts of them (no bound either way: its rows leave out that copies queue, and count a copy
  // back as needed where its value is first present).
  double copy_wait_ms = 0;
  double copy_wait_to_host_ms = 0, copy_wait_to_device_ms = 0;  // of copy_wait_ms: for copies each way
  double program_wait_ms = 0;
  // The MILP's assignment the schedule came from (checkpoint and full mode, where one fits): what
  // SolveOptions::without_copies takes.
  std::optional<Assignment> assignment;
};

SolveOutcome solve(const PlanGraph& plan, const SolveOptions& options);

// One line of solver progress at info level (core/log.h): elapsed, incumbent, bound and gap; a SolveOptions::progress.
void log_progress(const CbcProgress& p);

// Full mode's phase after the neighbourhood search (SolveOptions::fixed_impls_min_s): the program with a's
// implementations fixed (fix_impls, memory counted as p counts it) solved from a the way checkpoint mode solves its
// own (LP relaxation, root cut rounds, neighbourhood search), without CBC's search after it, within `seconds`. A
// cheaper assignment of p with a's implementations that fits the budget, if found, and the bound it reaches, which
// holds for those implementations alone.
struct FixedImpls {
  std::optional<Assignment> better;
  std::optional<double> bound_ms;  // no schedule with a's implementations is faster (none: no LP finished in time)
};
FixedImpls improve_with_fixed_impls(const CheckpointProblem& p, const Assignment& a, int64_t budget_bytes,
                                    double seconds, int threads, double neighborhood_min_gap,
                                    int64_t max_nodes = 0, int max_sub_mips = 0);

}  // namespace monet
