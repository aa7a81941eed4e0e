// One tensor against another within a tolerance of the reference's scale, for the tests that compare a kernel with
// a reference (Catch2; header-only, so that executables without monet_lib use it too).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace monet::test {

// |got - want| <= atol + rtol * max|want| over the tensor, and got finite exactly where want is.
inline void check_close(const std::vector<double>& want, const std::vector<double>& got, const std::string& what,
                        double rtol = 1e-4, double atol = 1e-6) {
  REQUIRE(want.size() == got.size());
  double scale = 0, worst = 0;
  bool finite = true;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    worst = std::max(worst, std::abs(got[i] - want[i]));
    finite = finite && std::isfinite(got[i]) == std::isfinite(want[i]);
  }
  INFO(what << ": max abs diff " << worst << ", scale " << scale);
  CHECK(finite);
  CHECK(worst <= atol + rtol * scale);
}

}  // namespace monet::test
