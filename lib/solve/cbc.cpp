// The CBC adapter's entry points (cbc.h). solve_with_cbc runs one solve in phases and holds its time limit: the LP
// relaxation and the caller's warm start (after_relaxation), rounds of root cuts (root_cuts.h), then CBC in a child
// process (cbc_child.h) that first runs the neighbourhood search (neighborhood_search.h), restarted once from the
// best solution if it dies. The COIN-OR headers are included only by lib/solve's CBC files: this one,
// coin_model.h, cbc_child.h, root_cuts.h, reduced_cost.h and neighborhood_search.h.
#include "solve/cbc.h"

#include <spdlog/spdlog.h>

#include <CbcModel.hpp>
#include <OsiClpSolverInterface.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "solve/cbc_child.h"
#include "solve/coin_model.h"
#include "solve/neighborhood_search.h"
#include "solve/root_cuts.h"

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

using namespace cbc;

constexpr double kResolveStallFactor = 1.5; // a round's dual re-solve past this many LP relaxation times: presolve
constexpr double kCbcReserveS = 10, kCbcReserveShare = 0.2;  // time the cut rounds leave to CBC: the larger
                                                             // (at most half the limit)
constexpr double kCutTimeFactor = 10;  // without rounds, CBC's cuts only if the time left exceeds this many LPs
constexpr double kKillGraceS = 0.5;    // CBC's process is stopped this long after the time limit

// Progress lines from a thread of our own (elapsed since the solve began) until stop(): the root cut rounds and
// CBC's root node can run for a long time without an event. Stopped before the fork (see run_cbc_process), and on
// every path out, including exceptions.
class ProgressThread {
 public:
  template <class Elapsed>
  ProgressThread(const CbcOptions& options, const Shared& shared, Elapsed since_began)
      : thread_([this, &options, &shared, since_began] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, std::chrono::duration<double>(options.progress_every_s), [&] { return done_; }))
            if (options.progress) options.progress({since_began(), shared.incumbent, shared.bound});
        }) {}
  ~ProgressThread() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members it uses exist
};

// What the phases before CBC's process leave it.
struct Root {
  std::vector<double> start;  // after_relaxation's warm start (empty: none)
  RootCuts cuts;
  bool solved = false;        // the relaxation was solved (cuts.bound is a bound)
  std::vector<double> x;      // the LP's solution after the root rounds (the neighbourhood search's guide)
  double relaxation_s = -1;
};

// The LP relaxation, after_relaxation's warm start, and the rounds of root cuts: they stop early enough to leave CBC
// its root (heuristics, ~7 s on googlenet b320) and some nodes.
template <class Elapsed>
Root solve_root(OsiClpSolverInterface& solver, const LinearProgram& lp, const CbcOptions& options, Shared& shared,
                Elapsed since_began) {
  const int n = static_cast<int>(lp.col_names.size());
  Root root;
  double objective = 0;
  std::vector<double> relaxed = relax(solver, n, options.time_limit_s, &objective);
  root.relaxation_s = since_began();
  root.start = options.after_relaxation(relaxed, objective);
  if (!root.start.empty()) shared.incumbent = objective_of(lp, root.start.data());
  if (relaxed.empty()) return root;
  shared.bound = objective;
  root.solved = true;
  const double reserve =
      std::min(std::max(kCbcReserveS, kCbcReserveShare * options.time_limit_s), 0.5 * options.time_limit_s);
  root.cuts = add_root_cuts(solver, objective, root.start.empty() ? 1e30 : shared.incumbent.load(),
                            std::min(options.time_limit_s - reserve, options.root_cuts_share * options.time_limit_s),
                            options.test_presolve_resolves ? 0 : kResolveStallFactor * std::max(root.relaxation_s, 1.0),
                            since_began, [&](double bound) { shared.bound = bound; }, options.separate);
  if (solver.isProvenOptimal()) root.x.assign(solver.getColSolution(), solver.getColSolution() + n);
  return root;
}

// CBC's command line; word 2, the time left, is set for each start of CBC's process. cuts: whether CBC's own cut
// loop runs.
std::vector<std::string> cbc_arguments(const CbcOptions& options, bool cuts) {
  std::vector<std::string> words = {"monet-solve", "-sec", "", "-timeMode", "elapsed", "-ratioGap",
                                    std::to_string(options.relative_gap), "-log", "0", "-slog", "0"};
  // 100+N: CBC's deterministic parallel mode (the search, and so the schedule, does not depend on thread timing).
  if (options.threads > 1) words.insert(words.end(), {"-threads", std::to_string(100 + options.threads)});
  if (!options.preprocess) words.insert(words.end(), {"-preprocess", "off"});
  if (!cuts) words.insert(words.end(), {"-cuts", "off"});
  if (options.max_nodes > 0) words.insert(words.end(), {"-maxNodes", std::to_string(options.max_nodes)});
  // Extra CBC options for experiments (space-separated), e.g. MONET_CBC_ARGS="-proximity on".
  if (const char* env = std::getenv("MONET_CBC_ARGS")) {
    std::string word;
    for (const char* c = env;; ++c) {
      if (*c == ' ' || *c == '\0') {
        if (!word.empty()) words.push_back(word);
        word.clear();
        if (*c == '\0') break;
      } else {
        word += *c;
      }
    }
  }
  words.insert(words.end(), {"-solve", "-quit"});
  return words;
}

// The body of CBC's process: the neighbourhood search from start_x (when with_neighborhoods and there is a start),
// then CBC's search from its result (or, with options.search_only, that result), every message sent through fd. The
// process's exit code.
int cbc_process_main(OsiClpSolverInterface& solver, const LinearProgram& lp, const CbcOptions& options,
                     std::vector<double> start_x, bool with_neighborhoods, const Root& root,
                     const std::shared_ptr<Shared>& shared, int fd, const std::vector<const char*>& argv) {
  const int n = static_cast<int>(lp.col_names.size());
  forget_sent();
  try {
    if (!start_x.empty() && with_neighborhoods) {
      if (options.test_abort_in_search) std::abort();
      start_x = search_before_cbc(solver, lp, options, root.x, std::move(start_x), shared, fd, root.solved);
    }
    if (options.search_only) {  // the search's result, or the start where the search did not run
      const bool has_x = !start_x.empty();
      send(fd, Msg::done,
           {has_x ? 1.0 : 3.0, has_x ? objective_of(lp, start_x.data()) : 0.0, kNoValue, shared->elapsed(), 0},
           has_x ? start_x.data() : nullptr, has_x ? n : 0);
    } else {
      CbcModel model(solver);
      ProgressHandler handler(shared, fd, n);
      run_cbc(model, handler, lp, start_x, argv);
      const bool has_x = model.bestSolution() != nullptr;
      const double status = has_x ? (model.isProvenOptimal() ? 0 : 1) : (model.isProvenInfeasible() ? 2 : 3);
      send(fd, Msg::done,
           {status, has_x ? model.getObjValue() : 0.0, model.getBestPossibleObjValue(), shared->elapsed(),
            model.isSecondsLimitReached() ? 1.0 : 0.0},
           model.bestSolution(), has_x ? n : 0);
    }
  } catch (...) {
    return 3;
  }
  return 0;
}

}  // namespace

std::vector<double> solve_lp_relaxation(const LinearProgram& lp, double* objective) {
  OsiClpSolverInterface solver;
  load(lp, solver);
  return relax(solver, static_cast<int>(lp.col_names.size()), 1e30, objective);
}

CbcResult solve_with_cbc(const LinearProgram& lp, const CbcOptions& options, const std::vector<double>* warm_start) {
  OsiClpSolverInterface solver;
  load_mip(lp, solver);
  if (const char* dump = std::getenv("MONET_WRITE_LP")) solver.writeLp(dump);

  const Clock::time_point began = Clock::now();
  auto since_began = [&] { return std::chrono::duration<double>(Clock::now() - began).count(); };
  auto shared = std::make_shared<Shared>();
  ProgressThread progress(options, *shared, since_began);

  // A result that is the warm start (CBC not started, or stopped before it reported one).
  auto take_warm_start = [&](CbcResult& r) {
    r.x = *warm_start;
    r.objective = objective_of(lp, r.x.data());
    r.status = CbcResult::Status::feasible;
    r.first_feasible_s = 0;
  };

  // 1. The relaxation, the warm start and the root cuts.
  Root root;
  if (options.after_relaxation) {
    root = solve_root(solver, lp, options, *shared, since_began);
    warm_start = root.start.empty() ? nullptr : &root.start;
    if (options.time_limit_s - since_began() < std::min(kCbcReserveS / 2, 0.25 * options.time_limit_s)) {
      // No time left for CBC (whose root alone takes seconds, checking no clock): the warm start, if any, and the
      // root's bound.
      CbcResult r;
      r.root = root.cuts;
      r.time_limit_reached = true;
      r.bound = root.solved ? root.cuts.bound : kNoValue;
      if (warm_start) take_warm_start(r);
      return r;
    }
  }

  // 2. CBC's command line. After our root cut rounds CBC's own cut loop stays off: it checks no clock (see
  // add_root_cuts). Without rounds (a short limit) CBC's cuts run only when the time left pays for them (~6 LP
  // re-solves a pass).
  const bool cbc_cuts = !root.solved || (root.cuts.rounds == 0 && options.time_limit_s - since_began() >
                                                                      kCutTimeFactor * root.relaxation_s);
  std::vector<std::string> words = cbc_arguments(options, cbc_cuts);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());

  // 3. CBC in a child process (cbc_child.h): the parent reads its incumbents and bounds and, at the time limit,
  // stops it, keeping the last incumbent. The fork copies only this thread: the progress thread is stopped first
  // (the parent's wait loop below reports instead), so that no lock - the allocator's included - is held by a thread
  // the child does not have. (With the progress thread still starting up, the child of an ASan build hung in the
  // allocator.) A child that dies (Debian's Clp asserts: one aborted a sub-MIP of the neighbourhood search on unet
  // b11, full mode at 2/3, before each sub-MIP ran in a process of its own) is started once more from the best
  // solution so far, without the neighbourhood search; if that one dies too, or no time is left, the best solution
  // so far is the result.
  progress.stop();
  const Clock::time_point cbc_began = Clock::now();
  auto since_cbc = [&] { return std::chrono::duration<double>(Clock::now() - cbc_began).count(); };
  shared->start = cbc_began;
  ChildReport rep;
  bool killed = false;
  const std::vector<double>* start_from = warm_start;
  std::vector<double> restart_x;
  const bool close =
      warm_start && root.solved && shared->incumbent.load() - shared->bound.load() <= options.neighborhood_min_gap;
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
      // An abort (a Clp assertion) ends this process alone, silently: the parent reports it. A handler the parent
      // installed (a test framework's) would print a failure for a process whose death the parent expects.
      ::signal(SIGABRT, SIG_DFL);
      const int code = cbc_process_main(solver, lp, options, start_from ? *start_from : std::vector<double>{},
                                        with_neighborhoods, root, shared, fds[1], argv);
      ::close(fds[1]);
      ::_exit(code);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    // The parent: the child's messages until it is done, its pipe closes or the time limit (and a grace) passes.
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

  // 4. The result: the last solution the parent kept, else the warm start.
  CbcResult r;
  r.root = root.cuts;
  r.neighborhoods = rep.neighborhoods;
  r.rejected = rep.rejected;
  r.restricted_bound = rep.restricted_bound;
  r.restricted_x = std::move(rep.restricted_x);
  r.neighborhoods.skipped = !options.neighborhoods.empty() && close;
  r.solve_s = rep.done ? rep.seconds : since_cbc();
  r.time_limit_reached = killed || rep.time_limit_reached;
  // Both are valid lower bounds; CBC's may be its root LP's (the same) or less when it stopped early.
  r.bound = std::max(rep.bound, root.solved ? root.cuts.bound : kNoValue);
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
