// Reduced-cost fixing (reduced_cost.h).
#include "solve/reduced_cost.h"

#include <algorithm>
#include <cmath>

namespace monet::cbc {

int fix_by_reduced_cost(OsiClpSolverInterface& solver, double incumbent) {
  if (incumbent >= 1e29) return 0;
  const double obj = solver.getObjValue(), tol = 1e-6 * std::max(1.0, std::abs(incumbent));
  const double *d = solver.getReducedCost(), *x = solver.getColSolution();
  const double *lo = solver.getColLower(), *hi = solver.getColUpper();
  int fixed = 0;
  for (int j = 0; j < solver.getNumCols(); ++j) {
    if (!solver.isInteger(j) || lo[j] == hi[j]) continue;
    if (x[j] <= lo[j] + 1e-9 && obj + d[j] > incumbent + tol) {
      solver.setColUpper(j, lo[j]);
      ++fixed;
    } else if (x[j] >= hi[j] - 1e-9 && obj - d[j] > incumbent + tol) {
      solver.setColLower(j, hi[j]);
      ++fixed;
    }
  }
  return fixed;
}

}  // namespace monet::cbc
