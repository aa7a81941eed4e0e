// The row pieces shared by the cross-entropy ops' CPU kernels (SoftmaxCrossEntropy and LinearCrossEntropy, forward
// and gradient): a row's log-sum-exp terms and its checked label.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace monet::ops {

// A row of `classes` logits at `stride` elements apart: its maximum and the sum of exp(x - max), in double, each
// in index order (the same sums wherever a kernel takes them).
template <class T>
void softmax_row_stats(const T* row, int64_t classes, int64_t stride, double& mx, double& sum) {
  mx = row[0];
  for (int64_t k = 1; k < classes; ++k) mx = std::max<double>(mx, row[k * stride]);
  sum = 0;
  for (int64_t k = 0; k < classes; ++k) sum += std::exp(row[k * stride] - mx);
}

// labels[i], failing with one line that names the op where it is not a class in [0, classes).
inline int64_t checked_label(const char* op, const int64_t* labels, int64_t i, int64_t classes) {
  const int64_t k = labels[i];
  if (k < 0 || k >= classes) fail(op, ": label ", k, " out of range [0, ", classes, ")");
  return k;
}

}  // namespace monet::ops
