// The CBC/Clp adapter: a LinearProgram loaded into Clp (as an LP or a MIP), its LP relaxation, CBC's stand-alone
// solve of a model, and the program's own checks of a solution. Included only by lib/solve's CBC files: with
// cbc_child.h, the only headers that include COIN-OR's.
#pragma once

#include <string>
#include <vector>

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <OsiClpSolverInterface.hpp>

#include "solve/milp.h"

namespace monet::cbc {

void load(const LinearProgram& lp, OsiClpSolverInterface& solver);

// load, with the integer columns marked and the names (CBC matches a warm start by column name; MONET_WRITE_LP
// writes them) in one bulk copy: setting them one by one through OsiClp took 16 s on resnet50's 60K columns and rows.
void load_mip(const LinearProgram& lp, OsiClpSolverInterface& solver);

// Dual simplex with presolve (2x faster than without on resnet50's relaxation), stopped after max_seconds: the
// columns' values and *objective, or empty when it did not reach optimality.
std::vector<double> relax(OsiClpSolverInterface& solver, int columns, double max_seconds, double* objective);

// CBC's stand-alone solve (CbcMain1 with argv) of `model`, reporting through `handler`, from `start` (the program's
// columns; its integer ones are handed to CBC by name, rounded; none when empty).
void run_cbc(CbcModel& model, CbcEventHandler& handler, const LinearProgram& lp, const std::vector<double>& start,
             std::vector<const char*> argv);

double objective_of(const LinearProgram& lp, const double* x);

// Whether x is integral where it must be and satisfies every row and bound of the program (CBC's tolerances,
// relative to the row's size: memory rows count 256-byte units into the tens of millions).
bool satisfies(const LinearProgram& lp, const std::vector<double>& x);

}  // namespace monet::cbc
