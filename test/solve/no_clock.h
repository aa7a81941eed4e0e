// Solver tests decide on work done, never on the clock: a slow or loaded machine (a sanitized build beside other
// tests) takes longer and reaches the same verdict. A solve gets kNoClock, a time limit no test reaches, and ends by
// proving its program optimal (the programs of these tests are small enough) or at a node limit
// (SolveOptions::max_nodes): the heuristics then run to their own ends, the root cut rounds until they stall, the
// neighbourhood search until every neighbourhood is closed. ctest's timeout catches a solve that would not end.
#pragma once

namespace monet::test {

inline constexpr double kNoClock = 1e6;  // seconds

}  // namespace monet::test
