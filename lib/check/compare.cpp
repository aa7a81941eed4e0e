#include "check/compare.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace monet {

std::vector<ParamError> compare(const Gradients& ours, const Gradients& ref) {
  double total2 = 0;
  for (const auto& r : ref.grads)
    for (double x : r) total2 += x * x;
  const double floor = kZeroFloor * std::sqrt(total2);
  std::vector<ParamError> out;
  for (size_t p = 0; p < ref.grads.size(); ++p) {
    double diff2 = 0, ref2 = 0, max_abs = 0;
    for (size_t i = 0; i < ref.grads[p].size(); ++i) {
      const double d = ours.grads[p][i] - ref.grads[p][i];
      diff2 += d * d;
      ref2 += ref.grads[p][i] * ref.grads[p][i];
      max_abs = std::max(max_abs, std::abs(d));
    }
    out.push_back({"", std::sqrt(diff2) / std::max({std::sqrt(ref2), floor, 1e-300}), max_abs, std::sqrt(ref2)});
  }
  return out;
}

double max_error(const std::vector<ParamError>& errors) {
  double worst = 0;
  for (const ParamError& e : errors) worst = std::max(worst, e.rel);
  return worst;
}

std::vector<ParamError> worst_first(std::vector<ParamError> errors) {
  std::sort(errors.begin(), errors.end(), [](const auto& a, const auto& b) { return a.rel > b.rel; });
  return errors;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(b[i])) return false;
  return true;
}

}  // namespace monet
