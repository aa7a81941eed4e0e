// The CBC/Clp adapter (coin_model.h).
#include "solve/coin_model.h"

#include <CbcSolver.hpp>
#include <CoinPackedMatrix.hpp>

#include <cmath>

namespace monet::cbc {

void load(const LinearProgram& lp, OsiClpSolverInterface& solver) {
  const int n = static_cast<int>(lp.col_names.size());
  // Row-ordered arrays built in one pass (appending rows one by one to a CoinPackedMatrix reallocates each time:
  // about 16 s for resnet50's 60K rows).
  std::vector<CoinBigIndex> start;
  std::vector<int> length;
  std::vector<int> index;
  std::vector<double> value, row_lo, row_hi;
  for (const LinearProgram::Row& r : lp.rows) {
    start.push_back(static_cast<CoinBigIndex>(index.size()));
    length.push_back(static_cast<int>(r.cols.size()));
    index.insert(index.end(), r.cols.begin(), r.cols.end());
    value.insert(value.end(), r.coefs.begin(), r.coefs.end());
    row_lo.push_back(r.lo <= -1e29 ? -COIN_DBL_MAX : r.lo);
    row_hi.push_back(r.hi >= 1e29 ? COIN_DBL_MAX : r.hi);
  }
  const CoinPackedMatrix matrix(false, n, static_cast<int>(lp.rows.size()), static_cast<CoinBigIndex>(index.size()),
                                value.data(), index.data(), start.data(), length.data());
  std::vector<double> col_lo(lp.col_lo), col_hi(lp.col_hi);
  for (double& lo : col_lo)
    if (lo <= -1e29) lo = -COIN_DBL_MAX;
  for (double& hi : col_hi)
    if (hi >= 1e29) hi = COIN_DBL_MAX;
  solver.loadProblem(matrix, col_lo.data(), col_hi.data(), lp.objective.data(), row_lo.data(), row_hi.data());
  solver.messageHandler()->setLogLevel(0);
}

void load_mip(const LinearProgram& lp, OsiClpSolverInterface& solver) {
  load(lp, solver);
  for (size_t j = 0; j < lp.integer.size(); ++j)
    if (lp.integer[j]) solver.setInteger(static_cast<int>(j));
  std::vector<std::string> row_names;
  row_names.reserve(lp.rows.size());
  for (const LinearProgram::Row& r : lp.rows) row_names.push_back(r.name);
  solver.getModelPtr()->copyNames(row_names, lp.col_names);
}

std::vector<double> relax(OsiClpSolverInterface& solver, int columns, double max_seconds, double* objective) {
  solver.setHintParam(OsiDoPresolveInInitial, true, OsiHintDo);
  solver.setHintParam(OsiDoDualInInitial, true, OsiHintDo);
  solver.getModelPtr()->setMaximumSeconds(max_seconds);
  solver.initialSolve();
  solver.getModelPtr()->setMaximumSeconds(-1);
  if (!solver.isProvenOptimal()) return {};
  if (objective) *objective = solver.getObjValue();
  const double* x = solver.getColSolution();
  return {x, x + columns};
}

void run_cbc(CbcModel& model, CbcEventHandler& handler, const LinearProgram& lp, const std::vector<double>& start,
             std::vector<const char*> argv) {
  model.passInEventHandler(&handler);
  CbcSolverUsefulData data;
  CbcMain0(model, data);
  model.messageHandler()->setLogLevel(0);
  if (!start.empty()) {
    std::vector<std::pair<std::string, double>> named;
    for (size_t j = 0; j < start.size(); ++j)
      if (lp.integer[j]) named.emplace_back(lp.col_names[j], std::round(start[j]));
    model.setMIPStart(named);
  }
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, [](CbcModel*, int) { return 0; }, data);
}

double objective_of(const LinearProgram& lp, const double* x) {
  double o = 0;
  for (size_t j = 0; j < lp.objective.size(); ++j) o += lp.objective[j] * x[j];
  return o;
}

bool satisfies(const LinearProgram& lp, const std::vector<double>& x) {
  constexpr double kTol = 1e-6;
  for (size_t j = 0; j < x.size(); ++j) {
    if (x[j] < lp.col_lo[j] - kTol || x[j] > lp.col_hi[j] + kTol) return false;
    if (lp.integer[j] && std::abs(x[j] - std::round(x[j])) > 1e-5) return false;
  }
  for (const LinearProgram::Row& r : lp.rows) {
    double act = 0, size = 1;
    for (size_t k = 0; k < r.cols.size(); ++k) {
      act += r.coefs[k] * x[r.cols[k]];
      size += std::abs(r.coefs[k] * x[r.cols[k]]);
    }
    if (act < r.lo - kTol * size || act > r.hi + kTol * size) return false;
  }
  return true;
}

}  // namespace monet::cbc
