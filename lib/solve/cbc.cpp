// The one file with COIN-OR headers.
#include "solve/cbc.h"

#include <algorithm>

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
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
constexpr double kCutTimeFactor = 10;  // cuts on only if the time left exceeds this many LP relaxation times

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
  std::vector<double> computed_start;
  double relaxation_s = -1;
  if (options.after_relaxation) {
    double objective = 0;
    std::vector<double> relaxed = relax(solver, n, options.time_limit_s, &objective);
    relaxation_s = since_began();
    computed_start = options.after_relaxation(relaxed, objective);
    warm_start = computed_start.empty() ? nullptr : &computed_start;
    if (since_began() >= options.time_limit_s) {
      // No time left for CBC (whose root would solve the LP again, checking no clock): the warm start, if any.
      CbcResult r;
      r.solve_s = since_began() - relaxation_s;
      r.time_limit_reached = true;
      r.cuts = false;
      r.bound = relaxed.empty() ? 0 : objective;
      if (warm_start) {
        r.x = *warm_start;
        for (int j = 0; j < n; ++j) r.objective += lp.objective[j] * r.x[j];
        r.status = CbcResult::Status::feasible;
        r.first_feasible_s = 0;
      }
      return r;
    }
  }

  CbcModel model(solver);
  auto shared = std::make_shared<Shared>();
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

  // Progress lines from a thread of our own: CBC's root node can run for minutes without an event.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread reporter([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::duration<double>(options.progress_every_s), [&] { return done; }))
      if (options.progress) options.progress({shared->elapsed(), shared->incumbent, shared->bound});
  });

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
  // CBC's root cut loop re-solves the LP with its cuts added and checks no clock meanwhile: on resnet50 that
  // re-solve took ~6x the relaxation (90 s). When the time left cannot pay for it, cuts stay off, so the time
  // limit holds (the bound is then the LP relaxation's, plus what branching proves).
  const bool cuts = relaxation_s < 0 || options.time_limit_s - since_began() > kCutTimeFactor * relaxation_s;
  if (!cuts) {
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
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  reporter.join();

  CbcResult r;
  r.cuts = cuts;
  r.solve_s = shared->elapsed();
  r.time_limit_reached = model.isSecondsLimitReached();
  r.bound = model.getBestPossibleObjValue();
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
