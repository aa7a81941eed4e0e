// The MILP as plain data (columns, rows, names after the paper's symbols), and the checkpointing formulation.
#pragma once

#include <string>
#include <vector>

#include "solve/problem.h"

namespace monet {

struct LinearProgram {
  struct Row {
    std::string name;
    std::vector<int> cols;
    std::vector<double> coefs;
    double lo, hi;
  };
  std::vector<std::string> col_names;
  std::vector<double> col_lo, col_hi, objective;
  std::vector<char> integer;
  std::vector<Row> rows;

  int add_col(std::string name, double lo, double hi, double obj, bool is_integer);
  void add_row(std::string name, std::vector<int> cols, std::vector<double> coefs, double lo, double hi);
  int64_t nonzeros() const;
};

// Where each decision lives in the LinearProgram (-1 where the variable does not exist).
struct MilpLayout {
  std::vector<std::vector<int>> S;  // [t][fval]
  std::vector<std::vector<int>> R;  // [t][forward position]
  std::vector<std::vector<int>> M;  // [t][implementation], only for steps with a choice (else empty)
  std::vector<std::vector<int>> P;  // [forward position][implementation], only for nodes with a choice
  // [t]: (candidate index, columns) of "recomputed with implementation i" (Z[t][k][i] = R[t][k] P[k][i]), for
  // candidates with a choice
  std::vector<std::vector<std::pair<int, std::vector<int>>>> Z;
  std::vector<std::vector<std::pair<int, int>>> K;  // [t]: (fval, column) of "recomputed in step t and kept on"
  std::vector<std::vector<std::pair<int, int>>> Y;  // [t]: (candidate index, column) of "recomputed in place"
  std::vector<std::vector<std::pair<int, int>>> U;  // [t]: (fval, column) of "read by the node or kept on"
  // Offload (empty without it): H [fval], G [t][fval], and the waits for copies: Wout [k] (after stage-0 position
  // k, -1 where no copy is due), W [t] (after step t); X: (fval, position, column) of "copy f runs for X ms in
  // position k" (copies with more than one slot).
  std::vector<int> H;
  std::vector<std::vector<int>> G;
  std::vector<int> Wout;
  struct CopySlot {
    int f, k, col;
  };
  std::vector<CopySlot> X;
  std::vector<int> W;
  // The optimizer state on the host: Q [state], and Qtot, their bytes (in units) on the host (-1 without states).
  std::vector<int> Q;
  int Qtot = -1;            // the optimizer state's bytes on the host (parameters' offers not among them)
  std::vector<int> Pz;      // [t]: the parameters' bytes away from the device in step t (-1: none can be)
  int W_pin = -1;           // the wait for the parameters' copies in before stage 0 (-1: no parameter offers)
  std::vector<int> D;      // [t]: what step t takes beyond its node (its recomputations and its wait)
};

// Memory is counted in units of kAlignBytes (every size is a multiple): integer coefficients, exact budgets.
// With implementation choices in the problem this is MONeT's joint problem (checkpointing + implementations).
LinearProgram checkpoint_milp(const CheckpointProblem& p, int64_t budget_bytes, MilpLayout* layout);

// The keep segments of forward value f: maximal runs of steps [first, last] (within S[.][f]'s range) such that no
// step before `last` in the run uses f (reads it, or recomputes from it) or may recompute it. Within a segment S
// can only fall (nothing recomputes f) and nothing reads f before its last step, so dropping f at the segment's
// start is never worse than dropping it later: the MILP takes S[.][f] constant on each segment (one column),
// which removes most S columns and keep rows without excluding an optimal schedule.
std::vector<std::pair<int, int>> keep_segments(const CheckpointProblem& p, int f);

// An assignment in that form: a value dropped anywhere in a segment is dropped for the whole segment (memory only
// falls; every use sees what it saw).
void canonical_keeps(const CheckpointProblem& p, Assignment& a);

// Column values of an assignment (for a warm start; canonical_keeps applied first), and back (rounding binaries
// at 0.5).
std::vector<double> to_columns(const CheckpointProblem& p, const MilpLayout& layout, const LinearProgram& lp,
                               const Assignment& a);
Assignment from_columns(const CheckpointProblem& p, const MilpLayout& layout, const std::vector<double>& x);

// Chain cuts: valid inequalities the rows imply for integer points but not for the relaxation, which can keep a
// value at a fraction and recompute from it, at that fraction, in several steps (a softmax built up over five steps
// from one fifth of its input). For a value f_0 that step t needs (rhs 1; M[t][i] where only implementation i reads
// it; R[t][k] where it is an input of candidate k), a chain f_0, f_1, ..., f_m (f_{j+1} an input of f_j's producer)
// and a step s <= t:
//   sum_j S[s][f_j] + sum_{s <= u <= t} R[u][producer(f_m)] >= rhs
// (with offload each f_j also brings sum_{s <= u <= t} G[u][f_j]: prefetched into a step of [s, t])
// If no f_j is kept at s, f_0 is recomputed in some step of [s, t], so f_1 is present there and, not kept at s,
// was recomputed in [s, t] too, and so down the chain. Separation (chain_cuts): for each t and s, the cheapest
// chain of every value is a shortest path over the forward graph (its own S at s, then either its producer's
// recomputations in [s, t] or the cheapest chain of one of its producer's inputs). Returns up to max_cuts rows
// (>= form) that x violates, the most violated per (t, f_0) pair, most efficacious first.
std::vector<LinearProgram::Row> chain_cuts(const CheckpointProblem& p, const MilpLayout& layout, const double* x,
                                           size_t max_cuts);

}  // namespace monet
