// Root cut rounds (root_cuts.h): CBC's cut generators and the program's own separator, each round re-solved under a
// wall-clock limit.
#include "solve/root_cuts.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <CglFlowCover.hpp>
#include <CglGomory.hpp>
#include <CglKnapsackCover.hpp>
#include <CglMixedIntegerRounding2.hpp>
#include <CglProbing.hpp>
#include <CglTwomir.hpp>
#include <OsiCuts.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "solve/reduced_cost.h"

namespace monet::cbc {

namespace {

constexpr int kMaxRootRounds = 40;          // rounds of root cuts at most
constexpr int kCutsPerRound = 200;          // the most violated cuts added per round
constexpr size_t kChainCutsPerRound = 1000;  // and at most this many of CbcOptions::separate's on top
constexpr double kRoundStall = 1e-4;        // a round that raises the bound by less (relative) is a stall; two end it
constexpr double kRoundTimeFactor = 2;      // a new round starts only if the time left exceeds this many last rounds

}  // namespace

RootCuts add_root_cuts(OsiClpSolverInterface& solver, double objective, double incumbent, double deadline_s,
                       double stall_s, const std::function<double()>& now,
                       const std::function<void(double)>& on_round, const CbcOptions::Separator& separate) {
  RootCuts rc;
  rc.bound = objective;
  const double began = now();
  const int base_rows = solver.getNumRows();
  // CBC's stand-alone settings for each generator.
  CglGomory gomory;
  gomory.setLimitAtRoot(1000);
  CglTwomir twomir;
  twomir.setMaxElementsRoot(250);
  CglProbing probing;
  probing.setUsingObjective(1);
  probing.setMaxPass(1);
  probing.setMaxPassRoot(1);
  probing.setMaxProbe(10);
  probing.setMaxProbeRoot(50);
  probing.setMaxLook(10);
  probing.setMaxLookRoot(50);
  probing.setRowCuts(3);
  CglKnapsackCover knapsack;
  CglMixedIntegerRounding2 mir;
  CglFlowCover flow;
  const std::vector<CglCutGenerator*> generators = {&probing, &gomory, &knapsack, &mir, &flow, &twomir};
  rc.fixed = fix_by_reduced_cost(solver, incumbent);
  const bool log = spdlog::should_log(spdlog::level::debug);  // -v: one line per round
  double last_round_s = 0;
  int stalls = 0;
  for (int round = 0; round < kMaxRootRounds; ++round) {
    const double start = now();
    if (deadline_s - start <= kRoundTimeFactor * last_round_s) break;
    OsiCuts cuts;
    CglTreeInfo info;
    info.level = 0;
    info.pass = round;
    info.inTree = false;
    std::vector<double> gen_s;
    for (CglCutGenerator* g : generators) {
      const double t0 = now();
      g->generateCuts(solver, cuts, info);
      gen_s.push_back(now() - t0);
    }
    // The most violated cuts by distance (violation / norm) only: a round of all ~2,500 made the re-solve slow.
    const double* x = solver.getColSolution();
    std::vector<std::pair<double, int>> efficacy;
    for (int i = 0; i < cuts.sizeRowCuts(); ++i) {
      const OsiRowCut& c = cuts.rowCut(i);
      const double ax = c.row().dotProduct(x), norm = c.row().twoNorm();
      const double violation = std::max(c.lb() - ax, ax - c.ub());
      if (norm > 0 && violation > 1e-6 * std::max(1.0, std::abs(ax))) efficacy.push_back({violation / norm, i});
    }
    std::vector<LinearProgram::Row> own;
    if (separate) {
      const double t0 = now();
      own = separate(x, kChainCutsPerRound);
      gen_s.push_back(now() - t0);
    }
    if (efficacy.empty() && own.empty() && cuts.sizeColCuts() == 0) break;
    std::sort(efficacy.begin(), efficacy.end(), std::greater<>());
    if (efficacy.size() > static_cast<size_t>(kCutsPerRound)) efficacy.resize(kCutsPerRound);
    OsiCuts chosen;
    for (auto [e, i] : efficacy) chosen.insert(cuts.rowCut(i));
    for (const LinearProgram::Row& r : own) {
      OsiRowCut cut;
      cut.setRow(static_cast<int>(r.cols.size()), r.cols.data(), r.coefs.data());
      cut.setLb(r.lo);
      cut.setUb(r.hi >= 1e29 ? COIN_DBL_MAX : r.hi);
      chosen.insert(cut);
    }
    for (int i = 0; i < cuts.sizeColCuts(); ++i) chosen.insert(cuts.colCut(i));  // probing's bound tightenings
    const int before = solver.getNumRows();
    std::unique_ptr<CoinWarmStart> basis(solver.getWarmStart());
    solver.applyCuts(chosen);
    std::unique_ptr<CoinWarmStart> with_cuts(solver.getWarmStart());
    // Dual simplex from the last basis, and where that stalls the same re-solve with presolve: on resnet50 b184's
    // H100 profile (full, 1/3) the first round's dual re-solve ran past 40 s where the relaxation took 1.9 s, and
    // with presolve took 2 s; on the estimated profiles the plain re-solves are the faster ones.
    solver.getModelPtr()->setMaximumWallSeconds(std::max(0.0, std::min(stall_s, deadline_s - now())));
    if (stall_s > 0) solver.resolve();
    if ((stall_s <= 0 || !solver.isProvenOptimal()) && deadline_s > now()) {
      solver.setWarmStart(with_cuts.get());  // from where the stalled one started
      solver.setHintParam(OsiDoPresolveInResolve, true, OsiHintDo);
      solver.getModelPtr()->setMaximumWallSeconds(std::max(0.0, deadline_s - now()));
      solver.resolve();
      solver.setHintParam(OsiDoPresolveInResolve, false, OsiHintDo);
      ++rc.presolved;
    }
    solver.getModelPtr()->setMaximumWallSeconds(-1);
    if (!solver.isProvenOptimal()) {  // out of time (or numerically lost): take the round back
      if (log) {
        spdlog::debug("root cuts: round {} taken back at {:.1f} s: {} cuts added; generators {:.2f} s, re-solve cut "
                      "short after {:.2f} s", round, now() - began, efficacy.size(), fmt::join(gen_s, " "),
                      now() - start - std::accumulate(gen_s.begin(), gen_s.end(), 0.0));
      }
      std::vector<int> added;
      for (int i = before; i < solver.getNumRows(); ++i) added.push_back(i);
      solver.deleteRows(static_cast<int>(added.size()), added.data());
      solver.setWarmStart(basis.get());
      solver.resolve();
      rc.abandoned = true;
      break;
    }
    ++rc.rounds;
    rc.cuts += solver.getNumRows() - before;
    rc.chain += static_cast<int>(own.size());
    const double obj = solver.getObjValue();
    stalls = obj - rc.bound <= kRoundStall * std::max(1.0, std::abs(obj)) ? stalls + 1 : 0;
    rc.bound = std::max(rc.bound, obj);
    // Cuts no longer tight leave (the optimum stays optimal without them); the next round needs a fresh
    // factorization, which resolve() gives in no iterations.
    const double* activity = solver.getRowActivity();
    const double *lo = solver.getRowLower(), *hi = solver.getRowUpper();
    std::vector<int> slack;
    for (int i = base_rows; i < solver.getNumRows(); ++i) {
      const double tol = 1e-7 * std::max(1.0, std::abs(activity[i]));
      if (activity[i] > lo[i] + tol && activity[i] < hi[i] - tol) slack.push_back(i);
    }
    if (!slack.empty()) solver.deleteRows(static_cast<int>(slack.size()), slack.data());
    rc.fixed += fix_by_reduced_cost(solver, incumbent);
    solver.resolve();
    rc.kept = solver.getNumRows() - base_rows;
    on_round(rc.bound);
    if (log)
      spdlog::debug("root cuts: round {} at {:.1f} s: {} row + {} column cuts, {} added, {} chain cuts, bound {:.6g}, "
                    "{} kept, {} fixed; generators {:.2f} s, round {:.2f} s", round, now() - began,
                    cuts.sizeRowCuts(), cuts.sizeColCuts(), efficacy.size(), own.size(), rc.bound, rc.kept, rc.fixed,
                    fmt::join(gen_s, " "), now() - start);
    last_round_s = now() - start;
    if (stalls >= 2) break;
  }
  rc.seconds = now() - began;
  return rc;
}

}  // namespace monet::cbc
