// The op test harness: one node built from a description, run on the CPU backend's kernels in double (or float),
// its forward compared with hand values and its backward (as emitted by autodiff) with central finite differences.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace monet::test {

struct OpCase {
  std::string op;
  Attrs attrs;
  std::vector<Shape> shapes;                      // input shapes
  std::vector<DType> dtypes = {};                 // default: all f32
  std::vector<std::vector<double>> data = {};     // input values; missing/empty entries: uniform(-1, 1) from seed
  std::vector<bool> grad = {};                    // which inputs to differentiate; default: every f32 input
  int num_outputs = 1;
  std::vector<bool> loss_outputs = {};            // gradient_error: outputs the loss weighs (default: every float
                                                  // output); an op whose extra outputs take no gradient names its own
  uint64_t seed = 1;
  int impl = 0;                                   // run_forward: the implementation (unread inputs get no data)
  int backward_impl = 0;                          // gradient_error: the backward nodes' implementation, where
                                                  // they have that many (else their default)
};

struct OpResult {
  std::vector<Shape> shapes;                      // output shapes
  std::vector<std::vector<double>> values;        // output values
};

// Builds the one-node graph, runs shape inference and the forward kernel. float_bytes: 8 = double, 4 = float.
OpResult run_forward(const OpCase& c, int float_bytes = 8);

// uniform(-1, 1) values for a tensor of this shape, from the seed (for reference computations in tests).
std::vector<double> random_values(const Shape& s, uint64_t seed);

// max_i |a[i] - b[i]|; the sizes must agree.
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);

// Kernel outputs against wanted values, element by element, a failure naming its element. Each says what it allows
// (Catch's Approx(want).margin(tol) alone also allows a relative error of 100 float epsilons, 1.2e-5).
// Bit for bit: values the kernel must reproduce exactly (hand values exact in double, a recomputation's outputs).
void check_exact(const std::vector<double>& got, const std::vector<double>& want);
// |got - want| <= rel |want| for each element (a wanted 0 exactly): rounding of values that are not exact in double.
void check_relative(const std::vector<double>& got, const std::vector<double>& want, double rel);
// |got - want| <= rel max_j |want_j|: relative to the wanted tensor's scale, for a float kernel against the double
// one, where an element much smaller than the tensor carries the rounding of the larger values it was computed from.
void check_to_scale(const std::vector<double>& got, const std::vector<double>& want, double rel);

// Max over differentiated inputs of |analytic - numeric| / max(1, |numeric|), element-wise, in double.
// The loss is sum_o <y_o, w_o> with random w_o over the float outputs.
double gradient_error(const OpCase& c, double eps = 1e-6);

}  // namespace monet::test
