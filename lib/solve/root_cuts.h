// Rounds of root cuts before CBC's search, under monet's own clock (docs/planner.md, "Root cut rounds").
#pragma once

#include <functional>

#include <OsiClpSolverInterface.hpp>

#include "solve/cbc.h"

namespace monet::cbc {

// Root cuts under our own clock. CBC's root cut loop re-solves the LP with its cuts and checks no clock meanwhile
// (googlenet b320 at 1/3: five passes in 25 s, then one re-solve of 54 s; resnet50 b184 earlier: ~90 s), so a 60 s
// limit became 80-126 s. Here each round generates cuts from the optimal LP with CBC's generators and settings
// (Gomory and two-MIR raise the bound most on these problems), adds the most violated as rows, fixes binaries by
// reduced cost against the warm start, and re-solves with dual simplex under a wall-clock limit (with presolve where
// the plain re-solve runs past stall_s). A round counts only when its re-solve is optimal (so the bound is a true LP
// bound); a round cut short by the clock is taken back. Cuts that went slack are dropped after each round. CBC then
// starts from this LP (its own cuts off).
// solver holds the optimal LP relaxation (objective: its value) and ends with the rounds' LP; incumbent is the
// warm start's objective (1e30: none); rounds start until deadline_s on now()'s clock; a re-solve past stall_s is
// redone with presolve (0: always with presolve); on_round is told each round's bound; separate (may be empty) adds
// the program's own cuts.
RootCuts add_root_cuts(OsiClpSolverInterface& solver, double objective, double incumbent, double deadline_s,
                       double stall_s, const std::function<double()>& now,
                       const std::function<void(double)>& on_round, const CbcOptions::Separator& separate);

}  // namespace monet::cbc
