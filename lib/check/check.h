// monet-check's library side: one training step of monet's engine (or, with --simulate, a schedule's replay)
// judged against a reference, one function per reference. Each writes its account line by line to `out` as it goes
// (a failure part-way, or the PyTorch reference's own output, then follows what was already said), throws
// monet::Error where the check cannot be made, writes the JSON report when asked, and returns the verdict.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/session.h"

namespace monet {

struct CheckOptions {
  // The model, device, precision and math, and the schedule checked (schedule_path; empty: store-all).
  SessionOptions session;
  std::string report_path;  // write the JSON report here (empty: none)

  // check_by_simulation: also replay the schedule on this PROFILE.json's plan (its times and device workspaces),
  // and draw the memory timeline as SVG at timeline_path (on the profile's plan when there is one).
  std::string replay_profile_path;
  std::string timeline_path;

  // check_against_cpu, check_against_torch: the largest norm-wise relative error of a gradient and of the loss
  // that passes, unless kNoiseFactor (the CPU engine) or kTorchNoiseFactor (PyTorch) times the reference's own
  // float32 error allows more (check/compare.h).
  double tolerance = 1e-4;

  // check_against_torch: the interpreter (with torch and onnx) running scripts/torch_reference.py, and the
  // directory the two exchange tensors through (empty: a fresh temporary one, removed after unless kept).
  std::string python = "/usr/bin/python3";
  std::string reference_script;
  std::string work_dir;
  bool keep_work_dir = false;
};

struct CheckResult {
  bool pass = false;
  nlohmann::json report;  // what report_path receives
};

// The schedule replayed against the model by the simulator; nothing is placed or run. Throws when the schedule is
// invalid or its predicted peak (on the profile's plan too) exceeds its budget, so a result always passes.
CheckResult check_by_simulation(const CheckOptions& options, std::FILE* out);

// The scheduled step against a step of store-all on the schedule's implementations and algorithms from the same
// seed: loss, gradients and the state the step leaves must be bitwise equal, whatever the mode. The lean
// store-all, where it runs other implementations or algorithms, is compared too, for information.
CheckResult check_against_store_all(const CheckOptions& options, std::FILE* out);

// The CUDA step (store-all or the schedule) against the CPU engine from the same seed: the truth is the CPU engine
// in double, and the CPU engine in float32 shows how far fp32 rounding alone moves the gradients.
CheckResult check_against_cpu(const CheckOptions& options, std::FILE* out);

// The (scheduled) step against PyTorch autograd on the same ONNX graph, weights, batch, labels and dropout masks:
// the truth is the reference in float64; with the fp32 engine it runs in float32 too, to measure the rounding this
// model and input amplify.
CheckResult check_against_torch(const CheckOptions& options, std::FILE* out);

}  // namespace monet
