// What the checks share: one step's loss and parameter gradients, compared norm-wise against a reference or bit for
// bit, the tolerance rules (docs/testing.md, "Gradient checks"), and how byte counts print.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"

namespace monet {

// An fp32 engine may deviate from the float64 truth this many times more than the reference's own float32 run does.
inline constexpr double kNoiseFactor = 4.0;
// The same against PyTorch's float32 run, whose kernels are not ours: its convolutions (oneDNN) and ours (im2col and
// OpenBLAS's sgemm) round differently, by an amount that depends on the CPU's BLAS kernels. UNet at batch 2, 64x64:
// our float32 gradients deviate 5.9x PyTorch's own deviation with OpenBLAS's AVX-512 kernels (an AMD EPYC), 3.0x
// with its AVX2 kernels on the same machine (OPENBLAS_CORETYPE=Haswell; 2026-11-29,
// schedules/cpu-runs/2026-11-29_f32_check).
inline constexpr double kTorchNoiseFactor = 8.0;
// Gradients are compared relative to max(|g_ref|, this fraction of the norm of the whole gradient): some
// parameters' true gradient is exactly zero (a conv bias before BatchNorm), where rounding noise has no scale of its
// own.
inline constexpr double kZeroFloor = 1e-3;

struct Gradients {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // in TrainingGraph::params order
};

struct ParamError {
  std::string name;   // filled in by the caller, which knows the graph
  double rel = 0;      // ||g - g_ref|| / max(||g_ref||, kZeroFloor x the norm of the whole reference gradient)
  double max_abs = 0;  // max |g - g_ref|
  double ref_norm = 0; // ||g_ref||
};

// Per parameter, in ref's order; ours must hold as many values per parameter.
std::vector<ParamError> compare(const Gradients& ours, const Gradients& ref);
double max_error(const std::vector<ParamError>& errors);  // the largest rel
// The errors sorted by rel, largest first (the order the checks print and report them).
std::vector<ParamError> worst_first(std::vector<ParamError> errors);

// Bitwise equality of two host copies (doubles converted exactly from the engine's floats): -0 and +0 differ.
bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace monet
