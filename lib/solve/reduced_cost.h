// Reduced-cost fixing of the binaries of an optimal LP against an incumbent (used between the root cut rounds).
#pragma once

#include <OsiClpSolverInterface.hpp>

namespace monet::cbc {

// Reduced-cost fixing: a binary at a bound whose reduced cost would lift the LP bound above the incumbent takes
// that bound. No solution better than the incumbent is lost (nor the incumbent itself, whose objective is not
// above its own), so every later bound still bounds the optimum. Returns the number of binaries fixed.
int fix_by_reduced_cost(OsiClpSolverInterface& solver, double incumbent);

}  // namespace monet::cbc
