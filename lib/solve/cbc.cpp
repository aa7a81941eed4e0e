// The one file with COIN-OR headers.
#include "solve/cbc.h"

#include <algorithm>

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CglFlowCover.hpp>
#include <CglGomory.hpp>
#include <CglKnapsackCover.hpp>
#include <CglMixedIntegerRounding2.hpp>
#include <CglProbing.hpp>
#include <CglTwomir.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <OsiCuts.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"

namespace monet {

const char* status_name(CbcResult::Status s) {
  switch (s) {
    case CbcResult::Status::optimal: return "optimal";
    case CbcResult::Status::feasible: return "feasible";
    case CbcResult::Status::infeasible: return "infeasible";
    case CbcResult::Status::no_solution: return "no solution found";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxRootRounds = 40;          // rounds of root cuts at most
constexpr int kCutsPerRound = 200;          // the most violated cuts added per round
constexpr double kRoundStall = 1e-4;        // a round that raises the bound by less (relative) is a stall; two end it
constexpr double kRoundTimeFactor = 2;      // a new round starts only if the time left exceeds this many last rounds
constexpr double kCbcReserveS = 10, kCbcReserveShare = 0.2;  // time the cut rounds leave to CBC: the larger
                                                             // (at most half the limit)
constexpr double kCutTimeFactor = 10;  // without rounds, CBC's cuts only if the time left exceeds this many LPs

// What the event handler (running inside CBC, possibly in a clone) shares with the progress thread.
struct Shared {
  Clock::time_point start = Clock::now();
  double time_limit_s = 1e30;
  std::atomic<double> incumbent{-1}, bound{-1}, first_feasible_s{-1};
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

class ProgressHandler : public CbcEventHandler {
 public:
  explicit ProgressHandler(std::shared_ptr<Shared> s) : shared_(std::move(s)) {}
  ProgressHandler(const ProgressHandler& o) : CbcEventHandler(o), shared_(o.shared_) {}
  CbcEventHandler* clone() const override { return new ProgressHandler(*this); }

  CbcAction event(CbcEvent e) override {
    if (!model_) return noAction;
    if (model_->bestSolution()) {
      shared_->incumbent = model_->getObjValue();
      if (shared_->first_feasible_s < 0) shared_->first_feasible_s = shared_->elapsed();
    }
    if (e == node || e == treeStatus || e == endSearch) shared_->bound = model_->getBestPossibleObjValue();
    // CBC checks its own limit only between phases; stop at the first event past it.
    return shared_->elapsed() > shared_->time_limit_s ? stop : noAction;
  }

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace

namespace {

void load(const LinearProgram& lp, OsiClpSolverInterface& solver) {
  const int n = static_cast<int>(lp.col_names.size());
  // Row-ordered arrays built in one pass (appending rows one by one to a CoinPackedMatrix reallocates each time:
  // about 16 s for resnet50's 60K rows).
  std::vector<CoinBigIndex> start;
  std::vector<int> length;
  std::vector<int> index;
  std::vector<double> value, row_lo, row_hi;
  for (const LinearProgram::Row& r : lp.rows) {
    start.push_back(static_cast<CoinBigIndex>(index.size()));
    length.push_back(static_cast<int>(r.cols.size()));
    index.insert(index.end(), r.cols.begin(), r.cols.end());
    value.insert(value.end(), r.coefs.begin(), r.coefs.end());
    row_lo.push_back(r.lo <= -1e29 ? -COIN_DBL_MAX : r.lo);
    row_hi.push_back(r.hi >= 1e29 ? COIN_DBL_MAX : r.hi);
  }
  const CoinPackedMatrix matrix(false, n, static_cast<int>(lp.rows.size()), static_cast<CoinBigIndex>(index.size()),
                                value.data(), index.data(), start.data(), length.data());
  solver.loadProblem(matrix, lp.col_lo.data(), lp.col_hi.data(), lp.objective.data(), row_lo.data(), row_hi.data());
  solver.messageHandler()->setLogLevel(0);
}

}  // namespace

namespace {

// Dual simplex with presolve (2x faster than without on resnet50's relaxation), stopped after max_seconds.
std::vector<double> relax(OsiClpSolverInterface& solver, int columns, double max_seconds, double* objective) {
  solver.setHintParam(OsiDoPresolveInInitial, true, OsiHintDo);
  solver.setHintParam(OsiDoDualInInitial, true, OsiHintDo);
  solver.getModelPtr()->setMaximumSeconds(max_seconds);
  solver.initialSolve();
  solver.getModelPtr()->setMaximumSeconds(-1);
  if (!solver.isProvenOptimal()) return {};
  if (objective) *objective = solver.getObjValue();
  const double* x = solver.getColSolution();
  return {x, x + columns};
}

}  // namespace

namespace {

// Reduced-cost fixing: a binary at a bound whose reduced cost would lift the LP bound above the incumbent takes
// that bound. No solution better than the incumbent is lost (nor the incumbent itself, whose objective is not
// above its own), so every later bound still bounds the optimum. Returns the number of binaries fixed.
int fix_by_reduced_cost(OsiClpSolverInterface& solver, double incumbent) {
  if (incumbent >= 1e29) return 0;
  const double obj = solver.getObjValue(), tol = 1e-6 * std::max(1.0, std::abs(incumbent));
  const double *d = solver.getReducedCost(), *x = solver.getColSolution();
  const double *lo = solver.getColLower(), *hi = solver.getColUpper();
  int fixed = 0;
  for (int j = 0; j < solver.getNumCols(); ++j) {
    if (!solver.isInteger(j) || lo[j] == hi[j]) continue;
    if (x[j] <= lo[j] + 1e-9 && obj + d[j] > incumbent + tol) {
      solver.setColUpper(j, lo[j]);
      ++fixed;
    } else if (x[j] >= hi[j] - 1e-9 && obj - d[j] > incumbent + tol) {
      solver.setColLower(j, hi[j]);
      ++fixed;
    }
  }
  return fixed;
}

// Root cuts under our own clock. CBC's root cut loop re-solves the LP with its cuts and checks no clock meanwhile
// (googlenet b320 at 1/3: five passes in 25 s, then one re-solve of 54 s; resnet50 b184 earlier: ~90 s), so a 60 s
// limit became 80-126 s. Here each round generates cuts from the optimal LP with CBC's generators and settings
// (Gomory and two-MIR raise the bound most on these problems), adds the most violated as rows, fixes binaries by
// reduced cost against the warm start, and re-solves with dual simplex under a wall-clock limit. A round counts
// only when its re-solve is optimal (so the bound is a true LP bound); a round cut short by the clock is taken
// back. Cuts that went slack are dropped after each round. CBC then starts from this LP (its own cuts off).
RootCuts add_root_cuts(OsiClpSolverInterface& solver, double objective, double incumbent, double deadline_s,
                       const std::function<double()>& now, const std::function<void(double)>& on_round) {
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
  const bool log = std::getenv("MONET_CUTS_LOG") != nullptr;
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
    if (efficacy.empty() && cuts.sizeColCuts() == 0) break;
    std::sort(efficacy.begin(), efficacy.end(), std::greater<>());
    if (efficacy.size() > static_cast<size_t>(kCutsPerRound)) efficacy.resize(kCutsPerRound);
    OsiCuts chosen;
    for (auto [e, i] : efficacy) chosen.insert(cuts.rowCut(i));
    for (int i = 0; i < cuts.sizeColCuts(); ++i) chosen.insert(cuts.colCut(i));  // probing's bound tightenings
    const int before = solver.getNumRows();
    std::unique_ptr<CoinWarmStart> basis(solver.getWarmStart());
    solver.applyCuts(chosen);
    solver.getModelPtr()->setMaximumWallSeconds(std::max(0.0, deadline_s - now()));
    solver.resolve();
    solver.getModelPtr()->setMaximumWallSeconds(-1);
    if (!solver.isProvenOptimal()) {  // out of time (or numerically lost): take the round back
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
    if (log) {  // MONET_CUTS_LOG: one line per round (a developer's diagnostic)
      std::fprintf(stderr, "round %d at %.1f s: %d row + %d column cuts, %zu added, bound %.6g, %d kept, %d fixed;"
                   " generators", round, now() - began, cuts.sizeRowCuts(), cuts.sizeColCuts(), efficacy.size(),
                   rc.bound, rc.kept, rc.fixed);
      for (double g : gen_s) std::fprintf(stderr, " %.2f", g);
      std::fprintf(stderr, " s, round %.2f s\n", now() - start);
    }
    last_round_s = now() - start;
    if (stalls >= 2) break;
  }
  rc.seconds = now() - began;
  return rc;
}

}  // namespace

std::vector<double> solve_lp_relaxation(const LinearProgram& lp, double* objective) {
  OsiClpSolverInterface solver;
  load(lp, solver);
  return relax(solver, static_cast<int>(lp.col_names.size()), 1e30, objective);
}

CbcResult solve_with_cbc(const LinearProgram& lp, const CbcOptions& options, const std::vector<double>* warm_start) {
  const int n = static_cast<int>(lp.col_names.size());
  OsiClpSolverInterface solver;
  load(lp, solver);
  for (int j = 0; j < n; ++j)
    if (lp.integer[j]) solver.setInteger(j);
  // Names (CBC matches the warm start by column name; MONET_WRITE_LP writes them) in one bulk copy: setting them
  // one by one through OsiClp took 16 s on resnet50's 60K columns and rows.
  std::vector<std::string> row_names;
  row_names.reserve(lp.rows.size());
  for (const LinearProgram::Row& r : lp.rows) row_names.push_back(r.name);
  solver.getModelPtr()->copyNames(row_names, lp.col_names);
  if (const char* dump = std::getenv("MONET_WRITE_LP")) solver.writeLp(dump);

  const Clock::time_point began = Clock::now();
  auto since_began = [&] { return std::chrono::duration<double>(Clock::now() - began).count(); };
  auto shared = std::make_shared<Shared>();
  // Progress lines from a thread of our own (elapsed since this call began): the root cut rounds and CBC's root
  // node can run for a long time without an event.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread reporter([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::duration<double>(options.progress_every_s), [&] { return done; }))
      if (options.progress) options.progress({since_began(), shared->incumbent, shared->bound});
  });
  struct StopReporter {  // on every path out, including exceptions
    std::mutex& mu;
    std::condition_variable& cv;
    bool& done;
    std::thread& reporter;
    ~StopReporter() {
      {
        std::lock_guard<std::mutex> lock(mu);
        done = true;
      }
      cv.notify_all();
      reporter.join();
    }
  } stop_reporter{mu, cv, done, reporter};

  std::vector<double> computed_start;
  RootCuts root;
  bool have_root = false;
  double relaxation_s = -1;
  if (options.after_relaxation) {
    double objective = 0;
    std::vector<double> relaxed = relax(solver, n, options.time_limit_s, &objective);
    relaxation_s = since_began();
    computed_start = options.after_relaxation(relaxed, objective);
    warm_start = computed_start.empty() ? nullptr : &computed_start;
    if (warm_start) {
      double obj = 0;
      for (int j = 0; j < n; ++j) obj += lp.objective[j] * (*warm_start)[j];
      shared->incumbent = obj;
    }
    if (!relaxed.empty()) {
      shared->bound = objective;
      have_root = true;
      // The rounds stop early enough to leave CBC its root (heuristics, ~7 s on googlenet b320) and some nodes.
      const double reserve = std::min(std::max(kCbcReserveS, kCbcReserveShare * options.time_limit_s),
                                      0.5 * options.time_limit_s);
      root = add_root_cuts(solver, objective, warm_start ? shared->incumbent.load() : 1e30,
                           options.time_limit_s - reserve, since_began,
                           [&](double bound) { shared->bound = bound; });
    }
    if (options.time_limit_s - since_began() < std::min(kCbcReserveS / 2, 0.25 * options.time_limit_s)) {
      // No time left for CBC (whose root alone takes seconds, checking no clock): the warm start, if any, and the
      // root's bound.
      CbcResult r;
      r.root = root;
      r.time_limit_reached = true;
      r.bound = have_root ? root.bound : 0;
      if (warm_start) {
        r.x = *warm_start;
        r.objective = shared->incumbent;
        r.status = CbcResult::Status::feasible;
        r.first_feasible_s = 0;
      }
      return r;
    }
  }

  CbcModel model(solver);
  ProgressHandler handler(shared);
  model.passInEventHandler(&handler);
  CbcSolverUsefulData data;
  CbcMain0(model, data);
  model.messageHandler()->setLogLevel(0);
  if (warm_start) {
    std::vector<std::pair<std::string, double>> start;
    for (int j = 0; j < n; ++j)
      if (lp.integer[j]) start.emplace_back(lp.col_names[j], (*warm_start)[j]);
    model.setMIPStart(start);
  }

  // 100+N: CBC's deterministic parallel mode (the search, and so the schedule, does not depend on thread timing).
  const std::string sec = std::to_string(std::max(1.0, options.time_limit_s - since_began())),
                    threads = std::to_string(100 + options.threads),
                    gap = std::to_string(options.relative_gap);
  std::vector<const char*> argv = {"monet-solve", "-sec", sec.c_str(), "-timeMode", "elapsed", "-ratioGap", gap.c_str(),
                                   "-log", "0", "-slog", "0"};
  if (options.threads > 1) {
    argv.push_back("-threads");
    argv.push_back(threads.c_str());
  }
  if (!options.preprocess) {
    argv.push_back("-preprocess");
    argv.push_back("off");
  }
  // After our root cut rounds CBC's own cut loop stays off: it checks no clock (see add_root_cuts). Without
  // rounds (a short limit) CBC's cuts run only when the time left pays for them (~6 LP re-solves a pass).
  const bool cbc_cuts = !have_root || (root.rounds == 0 && options.time_limit_s - since_began() >
                                                                kCutTimeFactor * relaxation_s);
  if (!cbc_cuts) {
    argv.push_back("-cuts");
    argv.push_back("off");
  }
  // Extra CBC options for experiments (space-separated), e.g. MONET_CBC_ARGS="-proximity on".
  std::vector<std::string> extra;
  if (const char* env = std::getenv("MONET_CBC_ARGS")) {
    std::string word;
    for (const char* c = env;; ++c) {
      if (*c == ' ' || *c == '\0') {
        if (!word.empty()) extra.push_back(word);
        word.clear();
        if (*c == '\0') break;
      } else {
        word += *c;
      }
    }
  }
  for (const std::string& w : extra) argv.push_back(w.c_str());
  argv.push_back("-solve");
  argv.push_back("-quit");
  shared->start = Clock::now();
  shared->time_limit_s = std::max(1.0, options.time_limit_s - since_began());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, [](CbcModel*, int) { return 0; }, data);

  CbcResult r;
  r.root = root;
  r.solve_s = shared->elapsed();
  r.time_limit_reached = model.isSecondsLimitReached();
  // Both are valid lower bounds; CBC's may be its root LP's (the same) or less when it stopped early.
  r.bound = std::max(model.getBestPossibleObjValue(), have_root ? root.bound : -1e300);
  if (model.bestSolution()) {
    r.x.assign(model.bestSolution(), model.bestSolution() + n);
    r.objective = model.getObjValue();
    r.status = model.isProvenOptimal() ? CbcResult::Status::optimal : CbcResult::Status::feasible;
    r.first_feasible_s = shared->first_feasible_s >= 0 ? shared->first_feasible_s.load() : r.solve_s;
    if (warm_start && r.first_feasible_s > 0 && shared->first_feasible_s < 0) r.first_feasible_s = 0;
  } else {
    r.status = model.isProvenInfeasible() ? CbcResult::Status::infeasible : CbcResult::Status::no_solution;
  }
  return r;
}

}  // namespace monet
