// The one file with COIN-OR headers.
#include "solve/cbc.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <numeric>

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

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
constexpr size_t kChainCutsPerRound = 1000;  // and at most this many of CbcOptions::separate's on top
constexpr double kRoundStall = 1e-4;        // a round that raises the bound by less (relative) is a stall; two end it
constexpr double kRoundTimeFactor = 2;      // a new round starts only if the time left exceeds this many last rounds
constexpr double kResolveStallFactor = 1.5; // a round's dual re-solve past this many LP relaxation times: presolve
constexpr double kCbcReserveS = 10, kCbcReserveShare = 0.2;  // time the cut rounds leave to CBC: the larger
                                                             // (at most half the limit)
constexpr double kCutTimeFactor = 10;  // without rounds, CBC's cuts only if the time left exceeds this many LPs
constexpr double kKillGraceS = 0.5;    // CBC's process is stopped this long after the time limit
constexpr double kNeighborhoodS = 5;   // the longest one sub-MIP of the neighbourhood search runs

// What the progress thread (until the fork), the event handler (in CBC's child process) and the parent's wait loop
// (from the child's messages) know of the search.
struct Shared {
  Clock::time_point start = Clock::now();
  double time_limit_s = 1e30;
  std::atomic<double> incumbent{kNoValue}, bound{kNoValue}, first_feasible_s{-1};
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

// CBC runs in a child process (solve_with_cbc forks it) that reports to the parent through a pipe, so that the parent can
// hold the time limit: CBC checks its clock only between phases, and its root node (heuristics, strong
// branching, RINS sub-MIPs) ran 50+ s past a 60 s limit on resnet50 b184. Messages: a type byte, a count, that
// many doubles.
enum class Msg : char {
  bound = 'B',     // {bound}
  solution = 'S',  // {objective, seconds since CBC started, x...}: a new incumbent
  done = 'D',      // {status, objective, bound, seconds, time limit reached, x...}: CBC returned
  neighborhoods = 'N',  // {searched, improved, seconds since CBC started, improved by the LP's neighbourhood,
                        // after_search calls, of them better, their seconds}: the neighbourhood search ended
  restricted = 'R',     // {bound, x...}: after_search's bound and the solution it holds for
};

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t w = ::write(fd, p, bytes);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    bytes -= static_cast<size_t>(w);
  }
  return true;
}

void send(int fd, Msg type, const std::vector<double>& head, const double* x = nullptr, int n = 0) {
  const uint64_t count = head.size() + static_cast<size_t>(n);
  write_all(fd, &type, 1);
  write_all(fd, &count, sizeof count);
  write_all(fd, head.data(), head.size() * sizeof(double));
  if (n > 0) write_all(fd, x, static_cast<size_t>(n) * sizeof(double));
}

class ProgressHandler : public CbcEventHandler {
 public:
  // fd: the pipe to the parent; n: the program's column count; bounds: whether the model's bounds are the program's
  // (not for a sub-MIP of the neighbourhood search, whose columns are the program's but whose bound is its own).
  ProgressHandler(std::shared_ptr<Shared> s, int fd, int n, bool bounds = true)
      : shared_(std::move(s)), fd_(fd), n_(n), bounds_(bounds) {}
  ProgressHandler(const ProgressHandler& o)
      : CbcEventHandler(o), shared_(o.shared_), fd_(o.fd_), n_(o.n_), bounds_(o.bounds_) {}
  CbcEventHandler* clone() const override { return new ProgressHandler(*this); }

  CbcAction event(CbcEvent e) override {
    if (!model_) return noAction;
    // CBC passes the handler on to the sub-MIPs of its heuristics (RINS and the like), whose columns, solutions and
    // bounds are their own: only the search's own model reports.
    if (model_->parentModel() != nullptr || model_->getNumCols() != n_)
      return shared_->elapsed() > shared_->time_limit_s ? stop : noAction;
    std::lock_guard<std::mutex> lock(pipe_mutex());
    if (model_->bestSolution()) report_locked(*shared_, fd_, model_->getObjValue(), model_->bestSolution(), n_);
    if (bounds_ && (e == node || e == treeStatus || e == endSearch)) {
      const double b = model_->getBestPossibleObjValue();
      if (b != shared_->bound) send(fd_, Msg::bound, {b});
      shared_->bound = b;  // the last one sent
    }
    // CBC checks its own limit only between phases; stop at the first event past it.
    return shared_->elapsed() > shared_->time_limit_s ? stop : noAction;
  }

  // A solution of the whole program (n columns) found outside a model with this handler: sent when better.
  static void report(Shared& shared, int fd, double objective, const double* x, int n) {
    std::lock_guard<std::mutex> lock(pipe_mutex());
    report_locked(shared, fd, objective, x, n);
  }

  // One per (child) process: clones of the handler may run in CBC's threads.
  static std::mutex& pipe_mutex() {
    static std::mutex m;
    return m;
  }

 private:
  static void report_locked(Shared& shared, int fd, double objective, const double* x, int n) {
    if (shared.first_feasible_s < 0) shared.first_feasible_s = shared.elapsed();
    if (!(objective >= sent_objective())) {  // a better incumbent (or the first)
      send(fd, Msg::solution, {objective, shared.first_feasible_s.load()}, x, n);
      sent_objective() = objective;
    }
  }
  static double& sent_objective() {
    static double v = 1e300;
    return v;
  }
  friend void forget_sent();
  std::shared_ptr<Shared> shared_;
  int fd_;
  int n_;
  bool bounds_;
};

// In a new CBC process: nothing sent yet. (A solve nested in after_search forks from a CBC process that has sent
// the joint program's incumbents, whose objective is not the nested program's.)
void forget_sent() { ProgressHandler::sent_objective() = 1e300; }

// The parent's view of the child's messages.
struct ChildReport {
  std::vector<double> x;  // the last complete incumbent
  double objective = 0, bound = kNoValue, first_feasible_s = -1;
  bool done = false;
  double status = -1, seconds = 0;
  bool time_limit_reached = false;
  int rejected = 0;  // solutions that did not satisfy the program
  Neighborhoods neighborhoods;
  double restricted_bound = kNoValue;
  std::vector<double> restricted_x;
};

// Whether x is integral where it must be and satisfies every row and bound of the program (CBC's tolerances,
// relative to the row's size: memory rows count 256-byte units into the tens of millions).
bool satisfies(const LinearProgram& lp, const std::vector<double>& x) {
  constexpr double kTol = 1e-6;
  for (size_t j = 0; j < x.size(); ++j) {
    if (x[j] < lp.col_lo[j] - kTol || x[j] > lp.col_hi[j] + kTol) return false;
    if (lp.integer[j] && std::abs(x[j] - std::round(x[j])) > 1e-5) return false;
  }
  for (const LinearProgram::Row& r : lp.rows) {
    double act = 0, size = 1;
    for (size_t k = 0; k < r.cols.size(); ++k) {
      act += r.coefs[k] * x[r.cols[k]];
      size += std::abs(r.coefs[k] * x[r.cols[k]]);
    }
    if (act < r.lo - kTol * size || act > r.hi + kTol * size) return false;
  }
  return true;
}

// Reads whatever the pipe holds, applying every complete message; false at end of file. A solution that does not
// satisfy the program is dropped (counted in rep.rejected): the parent keeps the last one that does.
bool drain(int fd, std::string& buffer, ChildReport& rep, Shared& shared, const LinearProgram& lp) {
  const int n = static_cast<int>(lp.col_names.size());
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (got <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(got));
    for (;;) {
      constexpr size_t header = 1 + sizeof(uint64_t);
      if (buffer.size() < header) break;
      uint64_t count = 0;
      std::memcpy(&count, buffer.data() + 1, sizeof count);
      if (buffer.size() < header + count * sizeof(double)) break;
      std::vector<double> v(count);
      std::memcpy(v.data(), buffer.data() + header, count * sizeof(double));
      const Msg type = static_cast<Msg>(buffer[0]);
      buffer.erase(0, header + count * sizeof(double));
      if (type == Msg::bound && count == 1) {
        rep.bound = v[0];
        if (v[0] > shared.bound) shared.bound = v[0];  // the progress line shows the best bound known
      } else if (type == Msg::solution && count == 2 + static_cast<uint64_t>(n)) {
        std::vector<double> x(v.begin() + 2, v.end());
        if (!satisfies(lp, x)) {
          ++rep.rejected;
          continue;
        }
        rep.objective = v[0];
        if (rep.first_feasible_s < 0) rep.first_feasible_s = v[1];
        rep.x = std::move(x);
        shared.incumbent = v[0];
      } else if (type == Msg::neighborhoods && count == 7) {
        rep.neighborhoods = {.searched = static_cast<int>(v[0]),
                             .improved = static_cast<int>(v[1]),
                             .seconds = v[2],
                             .lp_improved = static_cast<int>(v[3]),
                             .after_runs = static_cast<int>(v[4]),
                             .after_improved = static_cast<int>(v[5]),
                             .after_s = v[6]};
      } else if (type == Msg::restricted && count == 1 + static_cast<uint64_t>(n)) {
        rep.restricted_bound = v[0];
        rep.restricted_x.assign(v.begin() + 1, v.end());
      } else if (type == Msg::done && count >= 5) {
        rep.done = true;
        rep.status = v[0];
        rep.bound = v[2];
        rep.seconds = v[3];
        rep.time_limit_reached = v[4] != 0;
        if (count == 5 + static_cast<uint64_t>(n)) {
          std::vector<double> x(v.begin() + 5, v.end());
          if (satisfies(lp, x)) {
            rep.objective = v[1];
            rep.x = std::move(x);
          } else {
            ++rep.rejected;
            if (rep.status == 0) rep.status = 1;  // not proven optimal for the solution we keep
          }
        }
      }
    }
  }
}

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

// load, with the integer columns marked and the names (CBC matches a warm start by column name; MONET_WRITE_LP
// writes them) in one bulk copy: setting them one by one through OsiClp took 16 s on resnet50's 60K columns and rows.
void load_mip(const LinearProgram& lp, OsiClpSolverInterface& solver) {
  load(lp, solver);
  for (size_t j = 0; j < lp.integer.size(); ++j)
    if (lp.integer[j]) solver.setInteger(static_cast<int>(j));
  std::vector<std::string> row_names;
  row_names.reserve(lp.rows.size());
  for (const LinearProgram::Row& r : lp.rows) row_names.push_back(r.name);
  solver.getModelPtr()->copyNames(row_names, lp.col_names);
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
// reduced cost against the warm start, and re-solves with dual simplex under a wall-clock limit (with presolve where
// the plain re-solve runs past stall_s). A round counts only when its re-solve is optimal (so the bound is a true LP
// bound); a round cut short by the clock is taken back. Cuts that went slack are dropped after each round. CBC then
// starts from this LP (its own cuts off).
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

double objective_of(const LinearProgram& lp, const double* x) {
  double o = 0;
  for (size_t j = 0; j < lp.objective.size(); ++j) o += lp.objective[j] * x[j];
  return o;
}

// The sub-MIP of a neighbourhood as a program of its own: the integer columns outside the neighbourhood are left
// out, their values (the incumbent's) moved into the rows' bounds, and rows left with no column are dropped (the
// incumbent satisfies them). Every row of `solver` is kept that way, the root rounds' cuts included. CBC's node LPs
// then solve a smaller program than with those columns fixed by their bounds (unet b11: 8.0K columns and 10.7K rows
// instead of 10.3K and 12.8K for the first window). Its LP starts without a basis: the parent's, carried over, made
// the unet windows' sub-MIPs improve the schedule less often (vgg16 b176 proves its windows faster with it).
// cols[c]: the program's column behind column c of lp.
struct SubProgram {
  LinearProgram lp;
  std::vector<int> cols;
};

SubProgram sub_program(const OsiClpSolverInterface& solver, const LinearProgram& lp, const std::vector<char>& is_free,
                       const std::vector<double>& x) {
  const int n = static_cast<int>(lp.col_names.size());
  SubProgram sub;
  std::vector<int> at(n, -1);
  for (int j = 0; j < n; ++j)
    if (!lp.integer[j] || is_free[j]) {
      at[j] = static_cast<int>(sub.cols.size());
      sub.cols.push_back(j);
      sub.lp.add_col(lp.col_names[j], solver.getColLower()[j], solver.getColUpper()[j],
                     solver.getObjCoefficients()[j], lp.integer[j]);
    }
  const CoinPackedMatrix* by_row = solver.getMatrixByRow();
  for (int i = 0; i < solver.getNumRows(); ++i) {
    const CoinShallowPackedVector v = by_row->getVector(i);
    double fixed = 0;
    std::vector<int> idx;
    std::vector<double> val;
    for (int k = 0; k < v.getNumElements(); ++k) {
      const int j = v.getIndices()[k];
      if (at[j] >= 0) {
        idx.push_back(at[j]);
        val.push_back(v.getElements()[k]);
      } else {
        fixed += v.getElements()[k] * std::round(x[j]);
      }
    }
    if (idx.empty()) continue;
    const double lo = solver.getRowLower()[i], hi = solver.getRowUpper()[i];
    sub.lp.add_row(std::to_string(i), std::move(idx), std::move(val), lo > -1e29 ? lo - fixed : lo,
                   hi < 1e29 ? hi - fixed : hi);  // 1e30 and beyond: no bound
  }
  return sub;
}

// CBC's stand-alone solve (CbcMain1 with argv) of `model`, reporting through `handler`, from `start` (the program's
// columns; its integer ones are handed to CBC by name, rounded; none when empty).
void run_cbc(CbcModel& model, ProgressHandler& handler, const LinearProgram& lp, const std::vector<double>& start,
             std::vector<const char*> argv) {
  model.passInEventHandler(&handler);
  CbcSolverUsefulData data;
  CbcMain0(model, data);
  model.messageHandler()->setLogLevel(0);
  if (!start.empty()) {
    std::vector<std::pair<std::string, double>> named;
    for (size_t j = 0; j < start.size(); ++j)
      if (lp.integer[j]) named.emplace_back(lp.col_names[j], std::round(start[j]));
    model.setMIPStart(named);
  }
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, [](CbcModel*, int) { return 0; }, data);
}

// One sub-MIP of the neighbourhood search, run in a process of its own (forked from CBC's: COW memory, no shared
// solver state, and a Clp assertion in a sub-MIP - one aborted on unet b11, full mode at 2/3 - ends only that
// process). It sends the coordinator {found, stopped at its limit, nodes} and, when found, the program's columns
// with the neighbourhood's replaced by the sub-MIP's best solution; then the pipe closes.
struct SubMip {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;      // the neighbourhood (0 is the LP's when there is one)
  uint64_t version = 0;  // the incumbent it started from (search_neighborhoods counts them)
  int free_integers = 0;
  double began_s = 0;
  std::string bytes;     // what it sent so far
  bool ended = false;    // its pipe is at end of file
};

SubMip start_sub_mip(const OsiClpSolverInterface& solver, const LinearProgram& lp, const std::vector<char>& is_free,
                     const std::vector<double>& x, const std::shared_ptr<Shared>& shared, double seconds,
                     bool test_abort) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail("monet-solve: pipe: ", std::strerror(errno));
  const pid_t coordinator = ::getpid();
  SubMip s;
  s.pid = ::fork();
  if (s.pid < 0) fail("monet-solve: fork: ", std::strerror(errno));
  if (s.pid == 0) {  // the sub-MIP: dies with the search's process (killed at the time limit)
    ::close(fds[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != coordinator) ::_exit(1);
    if (test_abort) std::abort();
    int code = 0;
    try {
      const SubProgram sub = sub_program(solver, lp, is_free, x);
      OsiClpSolverInterface sub_solver;
      load_mip(sub.lp, sub_solver);
      std::vector<double> start(sub.cols.size());
      for (size_t c = 0; c < sub.cols.size(); ++c) start[c] = x[sub.cols[c]];
      CbcModel model(sub_solver);
      ProgressHandler handler(shared, -1, static_cast<int>(x.size()), false);  // it only stops CBC at the limit
      const std::string sec = std::to_string(seconds);
      run_cbc(model, handler, sub.lp, start,
              {"monet-solve", "-sec", sec.c_str(), "-timeMode", "elapsed", "-log", "0", "-slog", "0", "-preprocess",
               "off", "-solve", "-quit"});
      std::vector<double> out = {model.bestSolution() ? 1.0 : 0.0, model.isSecondsLimitReached() ? 1.0 : 0.0,
                                 double(model.getNodeCount())};
      if (model.bestSolution()) {
        out.insert(out.end(), x.begin(), x.end());
        for (size_t c = 0; c < sub.cols.size(); ++c) out[3 + sub.cols[c]] = model.bestSolution()[c];
      }
      if (!write_all(fds[1], out.data(), out.size() * sizeof(double))) code = 2;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  s.fd = fds[0];
  return s;
}

// Reads what the sub-MIP's pipe holds; true at end of file (the process has ended or is ending).
bool read_sub_mip(SubMip& s) {
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(s.fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (got <= 0) return true;
    s.bytes.append(chunk, static_cast<size_t>(got));
  }
}

// Ends the sub-MIP's process (SIGKILL when `kill`) and waits for it; the exit status as words when it did not exit
// with 0, else empty.
std::string reap_sub_mip(SubMip& s, bool kill) {
  if (kill) ::kill(s.pid, SIGKILL);
  ::close(s.fd);
  int wstatus = 0;
  while (::waitpid(s.pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(wstatus)) return "signal " + std::to_string(WTERMSIG(wstatus));
  if (WEXITSTATUS(wstatus) != 0) return "exit code " + std::to_string(WEXITSTATUS(wstatus));
  return {};
}

// Large-neighbourhood search, in CBC's process before its search: for a neighbourhood (a list of columns), every
// other integer column keeps the incumbent's value and CBC solves what is left (sub_program: a sub-MIP from the
// incumbent, within a time limit, without preprocessing: it rejects the start, and a run with a cutoff instead found
// less); a better solution becomes the incumbent (sent to the parent). Up to options.threads sub-MIPs run at once,
// each in a process of its own (start_sub_mip), on different neighbourhoods: a result from an incumbent that has
// changed meanwhile is taken only when it is better than the current one. A neighbourhood whose sub-MIP ran to its
// end (not stopped at its time limit) from the current incumbent is closed: solving it again gives the same answer
// while the incumbent's columns outside it stay the same, so only an improvement elsewhere reopens it (the one that
// improved stays closed: only its own columns changed). Passes over the open neighbourhoods repeat, with twice the
// time per sub-MIP after a pass that improved nothing (those left open were stopped at their limit), until every
// neighbourhood is closed or `until_s` on shared's clock. A pass is the neighbourhoods open and not running when it
// begins; the next begins once its last has started. Results are taken in the order their sub-MIPs started (a
// worker whose sub-MIP ended waits for those before it) until one is stopped at its time limit, and from then on in
// the order they end: so the search does not depend on the machine's speed while none is. With `lp_x` (an LP solution; may be empty) each pass begins
// with one more neighbourhood, the integer columns where the incumbent and lp_x differ (RINS: Danna, Rothberg and
// Le Pape, 2005; first, because on unet b11 what it finds lets the windows improve further): it changes with the
// incumbent, is skipped when empty, and is closed like the others. Returns the incumbent; `stats` counts.
std::vector<double> search_neighborhoods(const OsiClpSolverInterface& solver, const LinearProgram& lp,
                                         const CbcOptions& options, const std::vector<double>& lp_x,
                                         std::vector<double> x, const std::shared_ptr<Shared>& shared, int fd,
                                         double until_s, Neighborhoods* stats) {
  const std::vector<std::vector<int>>& neighborhoods = options.neighborhoods;
  const int workers = std::max(1, options.threads);
  const int n = static_cast<int>(lp.col_names.size());
  const bool log = spdlog::should_log(spdlog::level::debug);  // -v: one line per sub-MIP
  double best = objective_of(lp, x.data());
  uint64_t version = 0;  // incumbents so far
  const size_t listed_from = lp_x.empty() ? 0 : 1;  // index 0 is the LP's neighbourhood, when there is one
  const size_t count = listed_from + neighborhoods.size();
  std::vector<char> closed(count, 0);
  std::vector<size_t> pass;  // what is left of the current pass, in order
  bool pass_improved = false, first_pass = true;
  double limit_s = kNeighborhoodS;
  std::vector<SubMip> active;  // in the order they started
  bool in_order = true;
  std::vector<char> is_free(n);
  auto running = [&](size_t i) {
    return std::any_of(active.begin(), active.end(), [&](const SubMip& s) { return s.index == i; });
  };

  // The free columns of neighbourhood i around the incumbent; false when there are none (an empty LP neighbourhood:
  // the incumbent is the LP's solution where it counts).
  auto free_columns = [&](size_t i, int* free_integers) {
    std::fill(is_free.begin(), is_free.end(), 0);
    *free_integers = 0;
    if (i < listed_from) {
      for (int j = 0; j < n; ++j)
        if (lp.integer[j] && std::abs(lp_x[j] - std::round(x[j])) > 1e-6) is_free[j] = 1, ++*free_integers;
    } else {
      for (int j : neighborhoods[i - listed_from]) is_free[j] = 1, *free_integers += lp.integer[j] ? 1 : 0;
    }
    return *free_integers > 0;
  };
  // A finished sub-MIP: its solution taken when better; its neighbourhood closed when it ran to its end from the
  // incumbent that is current now. False when it did not run to its end (its time limit, or its process died).
  auto finish = [&](SubMip& s, const std::string& died) {
    ++stats->searched;
    const bool lp_one = s.index < listed_from;
    bool found = false, at_limit = true;
    double nodes = 0;
    const size_t got = s.bytes.size() / sizeof(double);
    if (died.empty() && s.bytes.size() % sizeof(double) == 0 && (got == 3 || got == 3 + static_cast<size_t>(n))) {
      std::vector<double> v(got);
      std::memcpy(v.data(), s.bytes.data(), s.bytes.size());
      at_limit = v[1] != 0;
      nodes = v[2];
      if (v[0] != 0 && got == 3 + static_cast<size_t>(n)) {
        std::vector<double> y(v.begin() + 3, v.end());
        const double value = objective_of(lp, y.data());
        // Within CBC's tolerances on the sub-program's rows, which may not be the parent's on the program's: the
        // parent would drop such a solution, and the search goes on from one it keeps.
        if (satisfies(lp, y) && value < best - 1e-9 * std::max(1.0, std::abs(best))) {
          x = std::move(y);
          best = value;
          found = true;
          ++version;
          ++stats->improved;
          if (lp_one) ++stats->lp_improved;
          pass_improved = true;
          std::fill(closed.begin(), closed.end(), 0);
          ProgressHandler::report(*shared, fd, best, x.data(), n);
        }
      }
      closed[s.index] = !at_limit && (found || s.version == version);
    } else {  // it died (a Clp assertion): left closed until an improvement elsewhere
      closed[s.index] = 1;
      spdlog::info("note: a sub-MIP of the neighbourhood search stopped ({}); the search goes on",
                   died.empty() ? "incomplete result" : died);
    }
    if (log)
      spdlog::debug("neighbourhood search: sub-MIP {}{}: {} free integer columns, at {:.1f} s for {:.1f} s, {:.0f} "
                    "nodes, {}{}; objective {:.6g}", s.index, lp_one ? " (LP)" : "", s.free_integers, s.began_s,
                    shared->elapsed() - s.began_s, nodes,
                    at_limit ? "stopped at its limit" : closed[s.index] ? "closed" : "ended (stale start)",
                    found ? ", improved" : "", best);
    return died.empty() && !at_limit;
  };

  for (;;) {
    // Start sub-MIPs while there are workers and time.
    const double left = until_s - shared->elapsed();
    while (left >= 0.5 && static_cast<int>(active.size()) < workers) {
      if (pass.empty()) {  // a new pass: the open neighbourhoods not running, in order
        for (size_t k = 0; k < count; ++k)
          if (!closed[k] && !running(k)) pass.push_back(k);
        if (pass.empty()) break;
        if (!first_pass && !pass_improved) limit_s *= 2;
        first_pass = false;
        pass_improved = false;
      }
      const size_t i = pass.front();
      pass.erase(pass.begin());
      if (closed[i] || running(i)) continue;
      int free_integers = 0;
      if (!free_columns(i, &free_integers)) {
        closed[i] = 1;
        continue;
      }
      SubMip s = start_sub_mip(solver, lp, is_free, x, shared, std::min(left, limit_s), options.test_abort_in_sub_mip);
      s.index = i;
      s.version = version;
      s.free_integers = free_integers;
      s.began_s = shared->elapsed();
      active.push_back(std::move(s));
    }
    if (active.empty()) {
      if (left < 0.5 || std::find(closed.begin(), closed.end(), 0) == closed.end()) break;
      continue;  // the pass ran out of open neighbourhoods: the next one starts
    }
    // Wait for one to end; past until_s (and a grace second for CBC's own clock) the rest are stopped.
    const double wait_s = until_s + 1.0 - shared->elapsed();
    if (wait_s <= 0) {
      for (SubMip& s : active) reap_sub_mip(s, true);
      break;
    }
    std::vector<pollfd> fds;  // those still running (an ended one's pipe would wake poll at once)
    for (const SubMip& s : active)
      if (!s.ended) fds.push_back({s.fd, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::min(wait_s, 1.0) * 1000) + 1);
    if (ready < 0 && errno != EINTR) fail("monet-solve: poll: ", std::strerror(errno));
    for (SubMip& s : active)
      if (!s.ended) s.ended = read_sub_mip(s);
    // Results are taken in the order the sub-MIPs started until one is stopped at its time limit: until then each
    // result, and so every later start, is the same whatever the machine's speed (docs/engine.md, "Determinism"); after
    // that, in the order they end (a long sub-MIP at the front would hold up the others' workers).
    for (size_t k = 0; k < active.size();) {
      if (!active[k].ended) {
        if (in_order) break;
        ++k;
        continue;
      }
      const std::string died = reap_sub_mip(active[k], false);
      if (!finish(active[k], died)) in_order = false;
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return x;
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
  load_mip(lp, solver);
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
  struct StopReporter {  // before the fork (see there), and on every path out, including exceptions
    std::mutex& mu;
    std::condition_variable& cv;
    bool& done;
    std::thread& reporter;
    void operator()() {
      if (!reporter.joinable()) return;
      {
        std::lock_guard<std::mutex> lock(mu);
        done = true;
      }
      cv.notify_all();
      reporter.join();
    }
    ~StopReporter() { (*this)(); }
  } stop_reporter{mu, cv, done, reporter};

  // A result that is the warm start (CBC not started, or stopped before it reported one).
  auto take_warm_start = [&](CbcResult& r) {
    r.x = *warm_start;
    r.objective = objective_of(lp, r.x.data());
    r.status = CbcResult::Status::feasible;
    r.first_feasible_s = 0;
  };
  std::vector<double> computed_start;
  RootCuts root;
  bool have_root = false;
  std::vector<double> root_x;  // the LP's solution after the root rounds (the neighbourhood search's guide)
  double relaxation_s = -1;
  if (options.after_relaxation) {
    double objective = 0;
    std::vector<double> relaxed = relax(solver, n, options.time_limit_s, &objective);
    relaxation_s = since_began();
    computed_start = options.after_relaxation(relaxed, objective);
    warm_start = computed_start.empty() ? nullptr : &computed_start;
    if (warm_start) {
      shared->incumbent = objective_of(lp, warm_start->data());
    }
    if (!relaxed.empty()) {
      shared->bound = objective;
      have_root = true;
      // The rounds stop early enough to leave CBC its root (heuristics, ~7 s on googlenet b320) and some nodes.
      const double reserve = std::min(std::max(kCbcReserveS, kCbcReserveShare * options.time_limit_s),
                                      0.5 * options.time_limit_s);
      root = add_root_cuts(solver, objective, warm_start ? shared->incumbent.load() : 1e30,
                           options.time_limit_s - reserve,
                           options.test_presolve_resolves ? 0 : kResolveStallFactor * std::max(relaxation_s, 1.0),
                           since_began,
                           [&](double bound) { shared->bound = bound; }, options.separate);
      if (solver.isProvenOptimal()) root_x.assign(solver.getColSolution(), solver.getColSolution() + n);
    }
    if (options.time_limit_s - since_began() < std::min(kCbcReserveS / 2, 0.25 * options.time_limit_s)) {
      // No time left for CBC (whose root alone takes seconds, checking no clock): the warm start, if any, and the
      // root's bound.
      CbcResult r;
      r.root = root;
      r.time_limit_reached = true;
      r.bound = have_root ? root.bound : kNoValue;
      if (warm_start) take_warm_start(r);
      return r;
    }
  }

  // 100+N: CBC's deterministic parallel mode (the search, and so the schedule, does not depend on thread timing).
  const std::string threads = std::to_string(100 + options.threads), gap = std::to_string(options.relative_gap);
  // argv[2], the time left, is set for each start of CBC's process below.
  std::vector<const char*> argv = {"monet-solve", "-sec", nullptr, "-timeMode", "elapsed", "-ratioGap", gap.c_str(),
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
  // CBC in a child process (see Msg): the parent reads its incumbents and bounds and, at the time limit, stops
  // it, keeping the last incumbent. The fork copies only this thread: the progress thread is stopped first (the
  // parent's wait loop below reports instead), so that no lock - the allocator's included - is held by a thread the
  // child does not have. (With the progress thread still starting up, the child of an ASan build hung in the
  // allocator.) A child that dies (Debian's Clp asserts: one aborted a sub-MIP of the neighbourhood search on unet
  // b11, full mode at 2/3, before each sub-MIP ran in a process of its own) is started once more from the best
  // solution so far, without the neighbourhood search; if that one dies too, or no time is left, the best solution
  // so far is the result.
  stop_reporter();
  const Clock::time_point cbc_began = Clock::now();
  auto since_cbc = [&] { return std::chrono::duration<double>(Clock::now() - cbc_began).count(); };
  shared->start = cbc_began;
  ChildReport rep;
  bool killed = false;
  const std::vector<double>* start_from = warm_start;
  std::vector<double> restart_x;
  const bool close =
      warm_start && have_root && shared->incumbent.load() - shared->bound.load() <= options.neighborhood_min_gap;
  bool with_neighborhoods = !options.neighborhoods.empty() && !close;
  for (int attempt = 0;; ++attempt) {
    const std::string sec_left = std::to_string(std::max(1.0, options.time_limit_s - since_began()));
    argv[2] = sec_left.c_str();
    shared->time_limit_s = since_cbc() + std::max(1.0, options.time_limit_s - since_began());
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("monet-solve: pipe: ", std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) fail("monet-solve: fork: ", std::strerror(errno));
    if (pid == 0) {  // the child: CBC, messages, _exit (no destructors, no atexit handlers of the parent's)
      ::close(fds[0]);
      // It dies with its parent: a solve nested in after_search runs in a CBC process that the time limit kills.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      forget_sent();
      int code = 0;
      try {
        std::vector<double> start_x = start_from ? *start_from : std::vector<double>{};
        const bool searched = !start_x.empty() && with_neighborhoods;
        if (searched) {
          if (options.test_abort_in_search) std::abort();
          Neighborhoods stats;
          const double until_s = since_cbc() + options.neighborhood_share * (shared->time_limit_s - since_cbc());
          double from_after = 1e300;  // what after_search returned last
          for (;;) {
            start_x = search_neighborhoods(solver, lp, options,
                                           options.lp_neighborhood ? root_x : std::vector<double>{},
                                           std::move(start_x), shared, fds[1], until_s, &stats);
            const double found = objective_of(lp, start_x.data());
            // The search found nothing beyond what after_search returned: it would be given the same again.
            if (found >= from_after) break;
            // Ended with time left: every neighbourhood closed (after_search), unless the incumbent is as close to
            // the root's bound as a start that skips the search.
            const double left = until_s - shared->elapsed();
            if (!options.after_search || left < options.after_search_min_s ||
                (have_root && found - shared->bound.load() <= options.neighborhood_min_gap))
              break;
            const double called = shared->elapsed();
            CbcOptions::AfterSearch after = options.after_search(start_x, left);
            ++stats.after_runs;
            stats.after_s += shared->elapsed() - called;
            std::vector<double>& y = after.x;
            const bool valid = y.size() == start_x.size() && satisfies(lp, y);
            const double better = valid ? objective_of(lp, y.data()) : 1e300;
            const bool improved = valid && better < found - 1e-9 * std::max(1.0, std::abs(found));
            if (after.restricted_bound > kNoValue) {  // the bound holds for what is the incumbent now
              std::lock_guard<std::mutex> lock(ProgressHandler::pipe_mutex());
              send(fds[1], Msg::restricted, {after.restricted_bound}, (improved ? y : start_x).data(), n);
            }
            if (!improved) break;
            ++stats.after_improved;
            start_x = std::move(y);
            from_after = better;
            ProgressHandler::report(*shared, fds[1], better, start_x.data(), n);
          }
          std::lock_guard<std::mutex> lock(ProgressHandler::pipe_mutex());
          send(fds[1], Msg::neighborhoods,
               {double(stats.searched), double(stats.improved), shared->elapsed(), double(stats.lp_improved),
                double(stats.after_runs), double(stats.after_improved), stats.after_s});
        }
        if (options.search_only) {  // the search's result, or the start where the search did not run
          const bool has_x = !start_x.empty();
          send(fds[1], Msg::done,
               {has_x ? 1.0 : 3.0, has_x ? objective_of(lp, start_x.data()) : 0.0, kNoValue, shared->elapsed(), 0},
               has_x ? start_x.data() : nullptr, has_x ? n : 0);
        } else {
          CbcModel model(solver);
          ProgressHandler handler(shared, fds[1], n);
          run_cbc(model, handler, lp, start_x, argv);
          const bool has_x = model.bestSolution() != nullptr;
          const double status = has_x ? (model.isProvenOptimal() ? 0 : 1) : (model.isProvenInfeasible() ? 2 : 3);
          send(fds[1], Msg::done,
               {status, has_x ? model.getObjValue() : 0.0, model.getBestPossibleObjValue(), shared->elapsed(),
                model.isSecondsLimitReached() ? 1.0 : 0.0},
               model.bestSolution(), has_x ? n : 0);
        }
      } catch (...) {
        code = 3;
      }
      ::close(fds[1]);
      ::_exit(code);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    std::string buffer;  // a message a dead child left half written is dropped with it
    bool open = true;
    const double every = options.progress_every_s;
    double next_report = (std::floor(since_began() / every) + 1) * every;  // the progress thread's cadence
    while (open && !rep.done) {
      const double left = options.time_limit_s + kKillGraceS - since_began();
      if (left <= 0) {
        ::kill(pid, SIGKILL);
        killed = true;
        break;
      }
      if (since_began() >= next_report) {
        if (options.progress) options.progress({since_began(), shared->incumbent, shared->bound});
        next_report += every;
      }
      pollfd pfd{fds[0], POLLIN, 0};
      const double wait = std::min({left, next_report - since_began(), 1.0});
      const int ready = ::poll(&pfd, 1, static_cast<int>(std::max(wait, 0.0) * 1000) + 1);
      if (ready < 0 && errno != EINTR) break;
      if (ready > 0) open = drain(fds[0], buffer, rep, *shared, lp);
    }
    ::close(fds[0]);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (rep.done || killed) break;
    const std::string how = WIFSIGNALED(wstatus) ? "signal " + std::to_string(WTERMSIG(wstatus))
                                                 : "exit code " + std::to_string(WEXITSTATUS(wstatus));
    if (rep.x.empty() && !warm_start) fail("monet-solve: CBC stopped without a result (", how, ")");
    if (attempt > 0 || options.time_limit_s - since_began() < 1.0) {
      spdlog::info("note: CBC stopped ({}); the best schedule so far is the result", how);
      break;
    }
    spdlog::info("note: CBC stopped ({}){}; CBC again from the best schedule so far", how,
                 with_neighborhoods ? " in the neighbourhood search" : "");
    if (!rep.x.empty()) {
      restart_x = rep.x;
      start_from = &restart_x;
    }
    with_neighborhoods = false;
  }
  if (rep.rejected > 0)
    spdlog::info("note: {} solution(s) from CBC violated the MILP and were ignored", rep.rejected);

  CbcResult r;
  r.root = root;
  r.neighborhoods = rep.neighborhoods;
  r.rejected = rep.rejected;
  r.restricted_bound = rep.restricted_bound;
  r.restricted_x = std::move(rep.restricted_x);
  r.neighborhoods.skipped = !options.neighborhoods.empty() && close;
  r.solve_s = rep.done ? rep.seconds : since_cbc();
  r.time_limit_reached = killed || rep.time_limit_reached;
  // Both are valid lower bounds; CBC's may be its root LP's (the same) or less when it stopped early.
  r.bound = std::max(rep.bound, have_root ? root.bound : kNoValue);
  if (!rep.x.empty()) {
    r.x = std::move(rep.x);
    r.objective = rep.objective;
    r.status = rep.done && rep.status == 0 ? CbcResult::Status::optimal : CbcResult::Status::feasible;
    r.first_feasible_s = rep.first_feasible_s >= 0 ? rep.first_feasible_s : warm_start ? 0 : r.solve_s;
  } else if (warm_start && !(rep.done && rep.status == 2)) {  // stopped before CBC reported the start
    take_warm_start(r);
  } else {
    r.status = rep.done && rep.status == 2 ? CbcResult::Status::infeasible : CbcResult::Status::no_solution;
  }
  return r;
}

}  // namespace monet
