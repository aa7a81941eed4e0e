// The large-neighbourhood search that runs in CBC's process before CBC's own search (CbcOptions::neighborhoods):
// sub-MIPs around the incumbent, each in a process of its own, then CbcOptions::after_search while it improves.
#pragma once

#include <memory>
#include <vector>

#include <OsiClpSolverInterface.hpp>

#include "solve/cbc.h"
#include "solve/cbc_child.h"

namespace monet::cbc {

// From the warm start start_x (the program's columns): passes of sub-MIPs over options.neighborhoods (and the LP's
// neighbourhood, from root_x, when given and options.lp_neighborhood is set) until options.neighborhood_share of the
// time left on shared's clock; then options.after_search when every neighbourhood closed with time left, and the
// search again from what it returned while that improves. Every better solution, after_search's bound and the
// search's counts are sent to the parent through fd (cbc_child.h). have_root: shared's bound is the root's. Returns
// the incumbent.
std::vector<double> search_before_cbc(const OsiClpSolverInterface& solver, const LinearProgram& lp,
                                      const CbcOptions& options, const std::vector<double>& root_x,
                                      std::vector<double> start_x, const std::shared_ptr<Shared>& shared, int fd,
                                      bool have_root);

}  // namespace monet::cbc
