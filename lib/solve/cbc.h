// The CBC adapter: solves a LinearProgram with COIN-OR CBC's stand-alone defaults (cuts and heuristics on),
// an elapsed-time limit, threads and an optional warm start, reporting progress while it runs.
#pragma once

#include <functional>
#include <vector>

#include "solve/milp.h"

namespace monet {

// "None yet" for an objective or bound (objectives may be negative: implementations faster than the defaults).
constexpr double kNoValue = -1e300;

struct CbcProgress {
  double elapsed_s = 0;
  double incumbent = kNoValue;  // objective of the best solution so far, kNoValue when none
  double bound = kNoValue;      // best proven lower bound, kNoValue when not known yet
};

struct CbcOptions {
  double time_limit_s = 600;
  // CBC's node limit (0: none), in its search and in each sub-MIP of the neighbourhood search: with a time limit
  // that never binds, a solve that ends by work done, the same on any machine (SolveOptions::max_nodes).
  int64_t max_nodes = 0;
  // With max_nodes: each sub-MIP runs until its node limit or its end (no time cap of its own that doubles per pass,
  // which a slow machine would reach), and the search starts at most this many sub-MIPs (0: no limit).
  int max_sub_mips = 0;
  int threads = 1;
  double relative_gap = 1e-4;  // stop when (incumbent - bound) / incumbent falls below this
  bool preprocess = false;     // CBC 2.10's preprocessing rejects warm starts (NOTES-solver.md)
  double progress_every_s = 10;
  std::function<void(const CbcProgress&)> progress;  // called at least every progress_every_s
  // When set: CBC's own solver first solves the LP relaxation (dual simplex with presolve, within the time
  // limit) and this is called with its solution and objective (an empty solution when it did not finish); it
  // returns the warm start (columns, or empty). Then rounds of root cuts tighten the relaxation under this
  // call's clock, and CBC's root node starts from that LP (with the cuts, from its basis; CBC's own cuts off).
  // time_limit_s covers the relaxation, the callback, the cut rounds and the search.
  std::function<std::vector<double>(const std::vector<double>& relaxed, double objective)> after_relaxation;
  // When set, each root round also adds what this returns for the round's LP solution x (rows in >= form that x
  // violates, at most the given number): the program's own valid inequalities (solve(): chain_cuts, milp.h).
  using Separator = std::function<std::vector<LinearProgram::Row>(const double* x, size_t max_cuts)>;
  Separator separate;
  // The root rounds end by this share of time_limit_s (and in any case early enough to leave CBC its reserve).
  double root_cuts_share = 1.0;
  // Large-neighbourhood search before CBC's search, from the warm start: each entry lists the columns a sub-MIP may
  // change (every other integer column stays at the incumbent's value); it runs until neighborhood_share of the
  // time CBC is given (after the relaxation and the root cuts) and CBC's search starts from what it found. Up to
  // `threads` sub-MIPs run at once, each in a process of its own (serial CBC in each).
  std::vector<std::vector<int>> neighborhoods;
  // One more neighbourhood, first in each pass, when after_relaxation is set and its LP was solved: the integer
  // columns where the incumbent differs from the LP's solution after the root cuts (RINS).
  bool lp_neighborhood = true;
  double neighborhood_share = 0.95;
  // When set, called in CBC's process each time the neighbourhood search has ended with every neighbourhood closed
  // and at least after_search_min_s of its share left, the incumbent more than neighborhood_min_gap above the
  // root's bound: with the incumbent and those seconds (which it must keep to). It returns a better solution
  // (columns), or empty. A better one is sent to the caller as an incumbent and the search starts again from it
  // (every neighbourhood open); it is called again only if that search improves on it. Else CBC's search follows.
  // solve() sets it in full mode: the program with the incumbent's implementations fixed (improve_with_fixed_impls).
  // Besides the columns it may return a bound (objective units) on every solution of a restriction of the program
  // that holds both the solution it was given and the one it returns (solve(): the implementations fixed); CBC does
  // not use it, the result carries it (CbcResult::restricted_bound).
  struct AfterSearch {
    std::vector<double> x;  // a better solution, or empty
    double restricted_bound = kNoValue;
  };
  std::function<AfterSearch(const std::vector<double>& x, double seconds)> after_search;
  double after_search_min_s = 30;
  // The search's result (or the start, where the search did not run) is the result, status feasible with the root's
  // bound, without CBC's search.
  bool search_only = false;
  // The search runs only when the warm start is more than this above the bound after the root cuts (objective
  // units): closer, CBC's proof is all that is left, and a search would only delay it.
  double neighborhood_min_gap = 0;
  bool test_abort_in_search = false;  // tests only: CBC's process aborts where the neighbourhood search starts
  bool test_abort_in_sub_mip = false;  // tests only: every sub-MIP's process of the search aborts
  bool test_presolve_resolves = false;  // tests only: every root-cut re-solve takes the path of a stalled one
};

// Rounds of root cuts run before CBC (root_cuts.h, add_root_cuts).
struct RootCuts {
  int rounds = 0;        // rounds whose re-solve finished
  int cuts = 0;          // cuts added over those rounds
  int chain = 0;         // of them, those CbcOptions::separate returned (chain cuts)
  int kept = 0;          // still tight after the last round (the rows CBC starts with beyond the model's)
  int fixed = 0;         // binaries fixed by reduced cost against the warm start
  double seconds = 0;
  double bound = 0;      // the LP bound after the last round (the relaxation's when no round ran)
  bool abandoned = false;  // the last round was cut short by the clock and taken back
  int presolved = 0;     // re-solves whose dual simplex stalled and that were finished with presolve
};

// The neighbourhood search before CBC's (CbcOptions::neighborhoods).
struct Neighborhoods {
  int searched = 0;      // sub-MIPs solved (or stopped at their time limit)
  int improved = 0;      // of them, those that found a better solution
  double seconds = 0;    // when the search ended, from CBC's start (0: it did not run)
  int lp_improved = 0;   // of the improvements, those of the LP's neighbourhood (CbcOptions::lp_neighborhood)
  bool skipped = false;  // not run: the warm start was within CbcOptions::neighborhood_min_gap of the bound
  int after_runs = 0;      // calls of CbcOptions::after_search
  int after_improved = 0;  // of them, those that returned a better solution
  double after_s = 0;      // the seconds they took
};

struct CbcResult {
  enum class Status { optimal, feasible, infeasible, no_solution };
  Status status = Status::no_solution;
  std::vector<double> x;
  double objective = 0;
  double bound = kNoValue;
  double first_feasible_s = -1;  // elapsed time of the first solution (0 for an accepted warm start)
  double solve_s = 0;
  bool time_limit_reached = false;
  RootCuts root;  // when after_relaxation was set
  Neighborhoods neighborhoods;
  int rejected = 0;  // solutions from CBC's process that violated the program (dropped, with a note on stderr)
  // The last bound after_search returned (kNoValue: none) and the solution it holds for: the better one it returned,
  // else the one it was given.
  double restricted_bound = kNoValue;
  std::vector<double> restricted_x;
};

const char* status_name(CbcResult::Status s);

// The LP relaxation (Clp): column values, or empty if it has no solution.
std::vector<double> solve_lp_relaxation(const LinearProgram& lp, double* objective);

// warm_start (may be null) is used when options.after_relaxation is not set.
CbcResult solve_with_cbc(const LinearProgram& lp, const CbcOptions& options, const std::vector<double>* warm_start);

}  // namespace monet
