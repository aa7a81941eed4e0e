// CBC's child process and its pipe protocol. solve_with_cbc runs CBC in a process of its own that reports its
// incumbents and bounds to the parent through a pipe, so that the parent holds the time limit: CBC checks its clock
// only between phases, and its root node (heuristics, strong branching, RINS sub-MIPs) ran 50+ s past a 60 s limit
// on resnet50 b184. Here: the messages, the event handler that sends them from CBC's process, and the parent's
// reading of them.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <CbcEventHandler.hpp>

#include "solve/cbc.h"

namespace monet::cbc {

using Clock = std::chrono::steady_clock;

// What the progress thread (until the fork), the event handler (in CBC's child process) and the parent's wait loop
// (from the child's messages) know of the search.
struct Shared {
  Clock::time_point start = Clock::now();
  double time_limit_s = 1e30;
  std::atomic<double> incumbent{kNoValue}, bound{kNoValue}, first_feasible_s{-1};
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

// Messages: a type byte, a count, that many doubles.
enum class Msg : char {
  bound = 'B',     // {bound}
  solution = 'S',  // {objective, seconds since CBC started, x...}: a new incumbent
  done = 'D',      // {status, objective, bound, seconds, time limit reached, x...}: CBC returned
  neighborhoods = 'N',  // {searched, improved, seconds since CBC started, improved by the LP's neighbourhood,
                        // after_search calls, of them better, their seconds}: the neighbourhood search ended
  restricted = 'R',     // {bound, x...}: after_search's bound and the solution it holds for
};

// Writes all bytes (retrying after signals); false when the pipe is closed.
bool write_all(int fd, const void* data, size_t bytes);
void send(int fd, Msg type, const std::vector<double>& head, const double* x = nullptr, int n = 0);

class ProgressHandler : public CbcEventHandler {
 public:
  // fd: the pipe to the parent; n: the program's column count; bounds: whether the model's bounds are the program's
  // (not for a sub-MIP of the neighbourhood search, whose columns are the program's but whose bound is its own).
  ProgressHandler(std::shared_ptr<Shared> s, int fd, int n, bool bounds = true)
      : shared_(std::move(s)), fd_(fd), n_(n), bounds_(bounds) {}
  ProgressHandler(const ProgressHandler& o)
      : CbcEventHandler(o), shared_(o.shared_), fd_(o.fd_), n_(o.n_), bounds_(o.bounds_) {}
  CbcEventHandler* clone() const override { return new ProgressHandler(*this); }

  CbcAction event(CbcEvent e) override;

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
void forget_sent();

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

// Reads whatever the pipe holds, applying every complete message; false at end of file. A solution that does not
// satisfy the program is dropped (counted in rep.rejected): the parent keeps the last one that does.
bool drain(int fd, std::string& buffer, ChildReport& rep, Shared& shared, const LinearProgram& lp);

}  // namespace monet::cbc
