// monet-solve: reads a profile, decides what to keep and what to recompute within a memory budget (the MONeT
// MILP on CBC, or a baseline), verifies the schedule with the simulator and writes it; or, with --frontier N, solves
// at N budgets from the smallest the heuristics reach to store-all's peak and prints the memory/time trade-off.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>

#include "common.h"
#include "core/json_io.h"
#include "core/units.h"
#include "profile/profile.h"
#include "schedule/schedule_io.h"
#include "schedule/timeline.h"
#include "solve/frontier.h"
#include "solve/schedule_file.h"
#include "solve/solve.h"

using namespace monet;

namespace {

// --frontier N: the table on stdout as each budget is done, the curve as SVG (--plot), every row in --report.
int run_frontier(const Profile& profile, const SolveOptions& o, int points, const std::string& plot_path,
                 const std::string& report) {
  std::printf("%10s  %-17s  %10s  %10s  %10s  %10s  %9s  %8s\n", "budget", "status", "peak", "step ms", "overhead",
              "vs fast", "bound", "gap");
  std::fflush(stdout);
  SolveOptions quiet = o;
  quiet.progress = nullptr;  // one line per budget, not the solver's own
  const Frontier f = solve_frontier(profile.plan, quiet, points, [](const FrontierPoint& p) {
    const SolveOutcome& r = p.outcome;
    if (r.fits)
      std::printf("%10s  %-17s  %10s  %10.3f  %+9.2f%%  %+9.2f%%  %+8.2f%%  %7.2f%%\n",
                  format_gb(p.budget_bytes).c_str(), r.status.c_str(), format_gb(r.predicted.peak_bytes).c_str(),
                  r.objective_ms, 100 * p.overhead, 100 * p.overhead_vs_fast, 100 * p.bound_overhead, 100 * r.gap);
    else
      std::printf("%10s  %-17s  %10s  %10s  %10s  %10s  %9s  %8s\n", format_gb(p.budget_bytes).c_str(),
                  r.status.c_str(), "-", "-", "-", "-", "-", "-");
    std::fflush(stdout);
  });
  std::printf("lower bound on the peak %s; store-all: peak %s, step %.3f ms; fast store-all: peak %s, step %.3f ms\n",
              format_bytes(f.lower_bound_bytes).c_str(), format_bytes(f.store_all_peak_bytes).c_str(), f.store_all_ms,
              format_bytes(f.fast_store_all_peak_bytes).c_str(), f.fast_store_all_ms);
  if (!plot_path.empty()) {
    const std::string title = profile.model + " batch " + std::to_string(profile.batch) + ": overhead against budget (" +
                              o.mode + " mode, " + profile.device + " profile)";
    write_text_atomic(plot_path, frontier_svg(f, title));
    std::printf("wrote %s\n", plot_path.c_str());
  }
  if (!report.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const FrontierPoint& p : f.points)
      rows.push_back({{"budget_bytes", p.budget_bytes},
                      {"status", p.outcome.status},
                      {"fits", p.outcome.fits},
                      {"predicted_peak_bytes", p.outcome.fits ? p.outcome.predicted.peak_bytes : 0},
                      {"predicted_step_ms", p.outcome.fits ? p.outcome.objective_ms : 0},
                      {"overhead", p.overhead},
                      {"overhead_vs_fast", p.overhead_vs_fast},
                      {"bound_ms", p.outcome.bound_ms},
                      {"bound_overhead", p.bound_overhead},
                      {"gap", p.outcome.gap},
                      {"solve_s", p.outcome.solve_s}});
    write_json_atomic(report, {{"model", profile.model},
                               {"batch", profile.batch},
                               {"mode", f.mode},
                               {"time_limit_s", o.time_limit_s},
                               {"max_nodes", o.max_nodes},
                               {"max_sub_mips", o.max_sub_mips},
                               {"threads", o.threads},
                               {"lower_bound_bytes", f.lower_bound_bytes},
                               {"smallest_found_bytes", f.smallest_found_bytes},
                               {"store_all_peak_bytes", f.store_all_peak_bytes},
                               {"store_all_step_ms", f.store_all_ms},
                               {"fast_store_all_peak_bytes", f.fast_store_all_peak_bytes},
                               {"fast_store_all_step_ms", f.fast_store_all_ms},
                               {"frontier", rows}});
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"monet-solve: the fastest schedule of a profiled model that fits a memory budget"};
  std::string profile_path, budget_text, out_path, report, mode = "full", timeline_path, plot_path;
  int frontier = 0;
  app::SolverFlags solver(600);
  app::OffloadFlags offload;
  std::string window_text = "auto";
  app.add_option("profile", profile_path, "PROFILE.json from monet-profile")->required();
  app.add_option("--budget", budget_text, "memory budget: 6GB (1e9 bytes), 5.5GB, 4GiB (2^30), 512MB, or bytes");
  app.add_option("-o,--output", out_path, "SCHEDULE.json to write");
  app.add_option("--timeline", timeline_path,
                 "draw the schedule's memory timeline (bytes in use by kind over the step, the budget, store-all) "
                 "as SVG here");
  app.add_option("--frontier", frontier,
                 "instead of one budget: solve at N >= 2 budgets from the smallest peak the heuristics reach to "
                 "store-all's, each with --time-limit, and print budget, overhead and bound");
  app.add_option("--plot", plot_path, "with --frontier: draw overhead against budget as SVG here");
  app.add_option("--mode", mode,
                 "full (MILP: keep/recompute + each backward node's implementation, default), checkpoint (MILP: "
                 "keep/recompute only), store-all, sqrtn (baselines)");
  solver.add_to(app);
  offload.add_to(app);
  app.add_option("--window", window_text,
                 "recomputation window in levels of the forward graph (longest path from the inputs): N, 0 = none, "
                 "or auto (default: the widest window with at most " + std::to_string(kAutoWindowCandidates) +
                 " recomputation candidates, widened at the steps that need it where only a wider one reaches the "
                 "budget)");
  app.add_option("--report", report, "write a JSON report here");
  return app::guarded_main("monet-solve", app, argc, argv, [&]() -> int {
    if (frontier != 0) {
      if (frontier < 2) fail("--frontier: expected a number of budgets >= 2, got ", frontier);
      if (!budget_text.empty() || !out_path.empty() || !timeline_path.empty())
        fail("--frontier solves at its own budgets and writes no schedule: drop --budget, -o and --timeline");
    } else {
      if (budget_text.empty()) fail("--budget is required (or --frontier N)");
      if (out_path.empty()) fail("-o SCHEDULE.json is required (or --frontier N)");
      if (!plot_path.empty()) fail("--plot draws the frontier: give --frontier N");
    }
    const int64_t budget = frontier ? 0 : parse_bytes(budget_text, "--budget");
    solver.check();
    offload.check();
    int window = -1;
    if (window_text != "auto") {
      size_t used = 0;
      try {
        window = std::stoi(window_text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != window_text.size() || window < 0)
        fail("--window: expected auto or a number of levels >= 0, got '", window_text, "'");
    }
    Profile profile = read_profile(profile_path);
    const PlanGraph& plan = profile.plan;
    std::printf("profile %s: %s batch %lld, %zu nodes, device %s\n", profile_path.c_str(), profile.model.c_str(),
                static_cast<long long>(profile.batch), plan.nodes.size(), profile.device.c_str());
    if (frontier == 0)
      std::printf("budget %s, mode %s, time limit %.0f s, %d threads\n", format_bytes(budget).c_str(), mode.c_str(),
                  solver.time_limit, solver.threads);
    else
      std::printf("frontier: %d budgets, mode %s, time limit %.0f s each, %d threads\n", frontier, mode.c_str(),
                  solver.time_limit, solver.threads);
    std::fflush(stdout);

    SolveOptions o;
    o.budget_bytes = budget;
    o.mode = mode;
    solver.apply(o);
    offload.apply(o, profile, profile_path);
    if (o.offload)
      std::printf("offload: host link %s; host limit %s\n", describe(*o.offload).c_str(),
                  format_bytes(o.host_limit_bytes).c_str());
    o.window = window;
    o.progress = log_progress;
    if (frontier != 0) return run_frontier(profile, o, frontier, plot_path, report);
    SolveOutcome r = solve(plan, o);

    const double overhead = r.store_all.time_ms > 0 ? r.objective_ms / r.store_all.time_ms - 1 : 0;
    // Against the fastest step of any schedule: the fast store-all's.
    const double overhead_vs_fast = r.fast_store_all.time_ms > 0 ? r.objective_ms / r.fast_store_all.time_ms - 1 : 0;
    // The resident values at home on the host (offload), and of them the parameters (read in the forward pass).
    std::vector<char> forward_read(plan.values.size(), 0);
    for (const PlanNode& n : plan.nodes)
      if (n.stage == Stage::forward)
        for (int v : n.inputs) forward_read[v] = 1;
    int64_t state_bytes = 0, parameter_bytes = 0;
    int parameters = 0;
    for (int v : r.schedule.on_host) {
      state_bytes += plan.values[v].bytes;
      if (!forward_read[v]) continue;
      ++parameters;
      parameter_bytes += plan.values[v].bytes;
    }
    // The bound for the schedule's implementations (full mode, when the fixed-implementations phase ran on them).
    const bool impls_bound = r.fits && r.impls_bound_ms > 0 && r.objective_ms > 0;
    const double impls_gap = impls_bound ? (r.objective_ms - r.impls_bound_ms) / r.objective_ms : 0;
    nlohmann::json j = {{"model", profile.model},
                        {"batch", profile.batch},
                        {"mode", mode},
                        {"budget_bytes", budget},
                        {"status", r.status},
                        {"why_none", r.why_none},
                        {"fits", r.fits},
                        {"gap", r.gap},
                        {"bound_ms", r.bound_ms},
                        {"predicted_peak_bytes", r.fits ? r.predicted.peak_bytes : 0},
                        {"predicted_step_ms", r.fits ? r.objective_ms : 0},
                        {"overhead", r.fits ? overhead : 0},
                        {"overhead_vs_fast", r.fits ? overhead_vs_fast : 0},
                        {"recomputations", r.predicted.recomputations},
                        {"store_all_peak_bytes", r.store_all.peak_bytes},
                        {"store_all_step_ms", r.store_all.time_ms},
                        {"fast_store_all_peak_bytes", r.fast_store_all.peak_bytes},
                        {"fast_store_all_step_ms", r.fast_store_all.time_ms},
                        {"lower_bound_bytes", r.lower_bound_bytes},
                        {"lower_bound_node", r.lower_bound_node},
                        {"smallest_found_bytes", r.smallest_found_bytes},
                        {"time_to_first_feasible_s", r.first_feasible_s},
                        {"solve_s", r.solve_s},
                        {"phases_s", {{"without_copies", r.without_copies_s}, {"setup", r.setup_s},
                                      {"lp_relaxation", r.lp_s}, {"heuristics", r.warm_start_s},
                                      {"root_cuts", r.root_cuts.seconds}, {"cbc", r.cbc_s}}},
                        {"without_copies_step_ms", r.without_copies_ms > 0 ? nlohmann::json(r.without_copies_ms)
                                                                           : nlohmann::json()},
                        {"without_copies_status", r.without_copies_status.empty()
                                                      ? nlohmann::json()
                                                      : nlohmann::json(r.without_copies_status)},
                        {"root_cuts", {{"rounds", r.root_cuts.rounds},
                                       {"cuts", r.root_cuts.cuts},
                                       {"kept", r.root_cuts.kept},
                                       {"seconds", r.root_cuts.seconds},
                                       {"bound_ms", r.root_bound_ms},
                                       {"abandoned", r.root_cuts.abandoned},
                                       {"presolved", r.root_cuts.presolved}}},
                        {"neighborhoods", {{"searched", r.neighborhoods.searched},
                                           {"improved", r.neighborhoods.improved},
                                           {"lp_improved", r.neighborhoods.lp_improved},
                                           {"ended_s", r.neighborhoods.seconds},
                                           {"skipped", r.neighborhoods.skipped},
                                           {"fixed_impls", {{"runs", r.neighborhoods.after_runs},
                                                            {"improved", r.neighborhoods.after_improved},
                                                            {"seconds", r.neighborhoods.after_s},
                                                            {"bound_ms", impls_bound ? nlohmann::json(r.impls_bound_ms)
                                                                                     : nlohmann::json(nullptr)},
                                                            {"gap", impls_bound ? nlohmann::json(impls_gap)
                                                                                : nlohmann::json(nullptr)}}}}},
                        {"warm_start", r.warm_start},
                        {"warm_start_ms", r.warm_start_ms},
                        {"lp_bound_ms", r.lp_bound_ms},
                        {"columns", r.columns},
                        {"rows", r.rows},
                        {"nonzeros", r.nonzeros},
                        {"implementations", r.implementations},
                        {"window", r.window},
                        {"widened_steps", r.widened_steps},
                        {"widened_levels", r.widened_levels},
                        {"window_infeasible", r.window_infeasible},
                        {"offload", o.offload ? nlohmann::json{{"host_link", to_json(*o.offload)},
                                                               {"host_limit_bytes", o.host_limit_bytes},
                                                               {"host_peak_bytes", r.predicted.host_peak_bytes},
                                                               {"transfers", r.predicted.transfers},
                                                               {"transfer_bytes", r.predicted.transfer_bytes},
                                                               {"copy_wait_ms", r.copy_wait_ms},
                                                               {"program_wait_ms", r.program_wait_ms},
                                                               {"states_on_host", r.schedule.on_host.size()},
                                                               {"state_bytes_on_host", state_bytes},
                                                               {"copy_wait_to_host_ms", r.copy_wait_to_host_ms},
                                                               {"copy_wait_to_device_ms", r.copy_wait_to_device_ms},
                                                               {"parameters_on_host", parameters},
                                                               {"parameter_bytes_on_host", parameter_bytes},
                                                               {"copy_timing", r.copy_timing}}
                                              : nlohmann::json(nullptr)},
                        {"time_limit_s", solver.time_limit},
                        {"max_nodes", solver.max_nodes},
                        {"max_sub_mips", solver.max_sub_mips},
                        {"threads", solver.threads}};
    std::printf("status %s; store-all: peak %s, step %.3f ms; fast store-all: peak %s, step %.3f ms\n",
                r.status.c_str(), format_bytes(r.store_all.peak_bytes).c_str(), r.store_all.time_ms,
                format_bytes(r.fast_store_all.peak_bytes).c_str(), r.fast_store_all.time_ms);
    if (!r.fits) {
      if (!report.empty()) write_json_atomic(report, j);
      const std::string lb = format_bytes(r.lower_bound_bytes), found = format_bytes(r.smallest_found_bytes);
      if (r.why_none == "below_lower_bound") {
        std::fprintf(stderr, "monet-solve: budget %s is below what any schedule reaches: the smallest feasible budget is "
                     "at least %s, at node '%s' (the schedules found need %s)\n", format_bytes(budget).c_str(), lb.c_str(),
                     r.lower_bound_node.c_str(), found.c_str());
        return kExitInfeasible;
      }
      if (r.why_none == "mode") {
        std::fprintf(stderr, "monet-solve: the %s schedule needs %s, above the budget %s\n", mode.c_str(),
                     format_bytes(r.predicted.peak_bytes).c_str(), format_bytes(budget).c_str());
        return kExitInfeasible;
      }
      if (r.why_none == "infeasible") {
        if (r.window > 0)
          std::fprintf(stderr, "monet-solve: no schedule with recomputation windows of %d levels fits %s (proven); "
                       "the smallest feasible budget is between %s and %s; try --window 0\n", r.window,
                       format_bytes(budget).c_str(), lb.c_str(), found.c_str());
        else
          std::fprintf(stderr, "monet-solve: no schedule fits %s (proven); the smallest feasible budget is between "
                       "%s and %s\n", format_bytes(budget).c_str(), lb.c_str(), found.c_str());
        return kExitInfeasible;
      }
      std::fprintf(stderr, "monet-solve: no schedule within %s found in %.0f s (not proven infeasible); the smallest "
                   "feasible budget is between %s and %s; give more --time-limit or a larger budget\n",
                   format_bytes(budget).c_str(), solver.time_limit, lb.c_str(), found.c_str());
      return kExitNotFound;
    }
    std::printf("predicted: peak %s, step %.3f ms (overhead %+.2f%% vs store-all, %+.2f%% vs the fast store-all), "
                "%d recomputations; bound %.3f ms, gap %.3f%%\n",
                format_bytes(r.predicted.peak_bytes).c_str(), r.objective_ms, 100 * overhead, 100 * overhead_vs_fast,
                r.predicted.recomputations, r.bound_ms, 100 * r.gap);
    if (o.offload)
      std::printf("offload: %d copies (%s), host peak %s (%zu resident values at home there, %s, %d of them "
                  "parameters, %s), the step waiting %.3f ms for them on the engine's streams (%.3f for copies to the "
                  "host, %.3f for copies back; %.3f ms in the program)\n",
                  r.predicted.transfers, format_bytes(r.predicted.transfer_bytes).c_str(),
                  format_bytes(r.predicted.host_peak_bytes).c_str(), r.schedule.on_host.size(),
                  format_bytes(state_bytes).c_str(), parameters, format_bytes(parameter_bytes).c_str(),
                  r.copy_wait_ms, r.copy_wait_to_host_ms, r.copy_wait_to_device_ms, r.program_wait_ms);
    if (!r.implementations.empty()) {
      std::printf("implementations other than the default:");
      for (const auto& [name, count] : r.implementations) std::printf(" %s x%d", name.c_str(), count);
      std::printf("\n");
    }
    std::string window_name = r.window > 0 ? std::to_string(r.window) + " levels" : "none";
    if (r.widened_steps > 0)
      window_name += " (up to " + std::to_string(r.widened_levels) + " at " + std::to_string(r.widened_steps) +
                     " steps, to reach the budget)";
    if (r.window_infeasible > 0)
      window_name += " (the auto window of " + std::to_string(r.window_infeasible) + " levels has none: proven)";
    if (r.columns > 0)
      std::printf("MILP: %lld columns, %lld rows, %lld nonzeros, window %s; first feasible %.1f s, solved in %.1f s "
                  "(%ssetup %.1f, LP relaxation %.1f, heuristics %.1f, root cuts %.1f, CBC %.1f)\n",
                  static_cast<long long>(r.columns), static_cast<long long>(r.rows), static_cast<long long>(r.nonzeros),
                  window_name.c_str(), r.first_feasible_s, r.solve_s,
                  r.without_copies_s > 0 ? fmt::format("without copies {:.1f}, ", r.without_copies_s).c_str() : "",
                  r.setup_s, r.lp_s, r.warm_start_s, r.root_cuts.seconds, r.cbc_s);
      if (r.root_cuts.rounds > 0)
        std::printf("root cuts: %d rounds, %d cuts (%d chain cuts; %d kept), bound %.3f -> %.3f ms%s\n",
                    r.root_cuts.rounds, r.root_cuts.cuts, r.root_cuts.chain, r.root_cuts.kept, r.lp_bound_ms,
                    r.root_bound_ms,
                    r.root_cuts.abandoned ? " (the last round ran out of time and was taken back)" : "");
      if (r.neighborhoods.skipped)
        std::printf("neighbourhood search: skipped (the warm start is within 0.1%% of store-all's step of the bound)\n");
      if (r.neighborhoods.searched > 0)
        std::printf("neighbourhood search: %d sub-MIPs, %d improved the schedule (%d of them the LP's neighbourhood;"
                    " warm start %.3f ms), %.1f s of CBC's\n",
                    r.neighborhoods.searched, r.neighborhoods.improved, r.neighborhoods.lp_improved, r.warm_start_ms,
                    r.neighborhoods.seconds);
      if (r.neighborhoods.after_runs > 0) {
        std::printf("implementations fixed: %d solve(s) of the schedule's implementations alone, %d improved it, "
                    "%.1f s",
                    r.neighborhoods.after_runs, r.neighborhoods.after_improved, r.neighborhoods.after_s);
        if (impls_bound)
          std::printf("; with these implementations no schedule is faster than %.3f ms (gap %.2f%%)", r.impls_bound_ms,
                      100 * impls_gap);
        std::printf("\n");
      }
    ScheduleFile f = solved_schedule_file(profile, budget, r);
    // The program's size too (deterministic, like the rest of the file; monet-fit's files leave it out).
    f.solver.update({{"columns", r.columns}, {"rows", r.rows}, {"nonzeros", r.nonzeros}, {"window", r.window}});
    if (!timeline_path.empty()) {
      // Drawn before the schedule is written, so that a failure leaves neither file.
      TimelineChart chart;
      chart.title = profile.model + " batch " + std::to_string(profile.batch) + ", " + mode + " schedule within " +
                    format_gb(budget) + ": peak " + format_gb(r.predicted.peak_bytes) + ", overhead " +
                    fmt::format("{:+.2f}%", 100 * overhead);
      chart.budget_bytes = budget;
      chart.schedule = memory_timeline(plan, r.schedule);
      chart.store_all = memory_timeline(plan, store_all_schedule(plan, r.store_all_impls));
      write_text_atomic(timeline_path, memory_timeline_svg(chart));
    }
    write_schedule(out_path, f, plan);
    if (!report.empty()) write_json_atomic(report, j);
    if (!timeline_path.empty()) std::printf("wrote %s\n", timeline_path.c_str());
    std::printf("wrote %s (%zu steps)\n", out_path.c_str(), r.schedule.steps.size());
    return kExitOk;
  });
}
