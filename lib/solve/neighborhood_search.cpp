// The neighbourhood search before CBC's (neighborhood_search.h): sub-programs of the incumbent's neighbourhoods,
// solved by CBC in processes of their own, and the passes that schedule them.
#include "solve/neighborhood_search.h"

#include <spdlog/spdlog.h>

#include <CbcModel.hpp>
#include <CoinPackedMatrix.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/error.h"
#include "solve/coin_model.h"

namespace monet::cbc {

namespace {

constexpr double kNeighborhoodS = 5;  // the longest one sub-MIP of the neighbourhood search runs

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
                     int64_t max_nodes, bool test_abort) {
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
    ::signal(SIGABRT, SIG_DFL);  // its abort is reported by the search (see cbc.cpp's child)
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
      const std::string sec = std::to_string(seconds), nodes = std::to_string(max_nodes);
      std::vector<const char*> words = {"monet-solve", "-sec", sec.c_str(), "-timeMode", "elapsed", "-log", "0",
                                        "-slog", "0", "-preprocess", "off"};
      if (max_nodes > 0) words.insert(words.end(), {"-maxNodes", nodes.c_str()});
      words.insert(words.end(), {"-solve", "-quit"});
      run_cbc(model, handler, sub.lp, start, words);
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
    while (left >= 0.5 && static_cast<int>(active.size()) < workers &&
           (options.max_sub_mips <= 0 || stats->searched + static_cast<int>(active.size()) < options.max_sub_mips)) {
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
      // By work (max_nodes): the node limit ends each sub-MIP; else its time cap, doubled after a pass in vain.
      const double seconds = options.max_nodes > 0 ? left : std::min(left, limit_s);
      SubMip s = start_sub_mip(solver, lp, is_free, x, shared, seconds, options.max_nodes,
                               options.test_abort_in_sub_mip);
      s.index = i;
      s.version = version;
      s.free_integers = free_integers;
      s.began_s = shared->elapsed();
      active.push_back(std::move(s));
    }
    if (active.empty()) {
      if (left < 0.5 || std::find(closed.begin(), closed.end(), 0) == closed.end()) break;
      if (options.max_sub_mips > 0 && stats->searched >= options.max_sub_mips) break;
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

std::vector<double> search_before_cbc(const OsiClpSolverInterface& solver, const LinearProgram& lp,
                                      const CbcOptions& options, const std::vector<double>& root_x,
                                      std::vector<double> start_x, const std::shared_ptr<Shared>& shared, int fd,
                                      bool have_root) {
  const int n = static_cast<int>(lp.col_names.size());
  Neighborhoods stats;
  const double until_s = shared->elapsed() + options.neighborhood_share * (shared->time_limit_s - shared->elapsed());
  double from_after = 1e300;  // what after_search returned last
  for (;;) {
    start_x = search_neighborhoods(solver, lp, options,
                                   options.lp_neighborhood ? root_x : std::vector<double>{},
                                   std::move(start_x), shared, fd, until_s, &stats);
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
      send(fd, Msg::restricted, {after.restricted_bound}, (improved ? y : start_x).data(), n);
    }
    if (!improved) break;
    ++stats.after_improved;
    start_x = std::move(y);
    from_after = better;
    ProgressHandler::report(*shared, fd, better, start_x.data(), n);
  }
  std::lock_guard<std::mutex> lock(ProgressHandler::pipe_mutex());
  send(fd, Msg::neighborhoods,
       {double(stats.searched), double(stats.improved), shared->elapsed(), double(stats.lp_improved),
        double(stats.after_runs), double(stats.after_improved), stats.after_s});
  return start_x;
}

}  // namespace monet::cbc
