// Test inputs spread over an interval at an irregular phase, so that none lands on a kink (0, +-0.5, +-2.5, +-3).
#pragma once

#include <cstdint>
#include <vector>

namespace monet::test {

// n values spread evenly over (lo, hi) at an irregular phase.
inline std::vector<double> spread(int64_t n, double lo, double hi) {
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * (static_cast<double>(i) + 0.37) / static_cast<double>(n);
  return x;
}

}  // namespace monet::test
