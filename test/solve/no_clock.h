// Solver tests decide on work done, never on the clock: a slow or loaded machine (a sanitized build beside other
// tests) takes longer and reaches the same verdict. A solve gets kNoClock, a time limit no test reaches, and ends by
// proving its program optimal (the programs of these tests are small enough) or at a node limit
// (SolveOptions::max_nodes): the heuristics then run to their own ends, the root cut rounds until they stall, the
// neighbourhood search until every neighbourhood is closed. ctest's timeout catches a solve that would not end.
#pragma once

#include "solve/cbc.h"

namespace monet::test {

inline constexpr double kNoClock = 1e6;  // seconds

// CBC's options for a program solved to proven optimality (no gap, no clock).
inline CbcOptions exact_options() {
  CbcOptions o;
  o.time_limit_s = kNoClock;
  o.relative_gap = 0;
  return o;
}

// The program solved to proven optimality.
inline CbcResult solve_exactly(const LinearProgram& lp) { return solve_with_cbc(lp, exact_options(), nullptr); }

}  // namespace monet::test
