// monet-check: one training step of monet's engine against a reference (PyTorch autograd on the same ONNX graph,
// store-all on the schedule's implementations bit for bit, or the CPU engine), or a schedule replayed by the
// simulator. Here: the flags and which of them go together; the checks themselves, which print their account on
// stdout, are lib/check/check.h's. The verdict becomes the exit code (3: FAIL).
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "check/check.h"
#include "common.h"

using namespace monet;

int main(int argc, char** argv) {
  CLI::App app{"monet-check: compare one training step's loss and gradients with a reference"};
  app::ModelFlags model;
  std::string device = "cpu", reference = "torch", schedule, precision = "f32";
  bool simulate = false;
  CheckOptions c;  // the flags below fill in the rest; c.session comes from the model flags
  c.reference_script = std::string(MONET_SOURCE_DIR) + "/scripts/torch_reference.py";
  model.add_to(app);
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--reference", reference,
                 "torch: PyTorch autograd on the same ONNX graph (default); store-all: the --schedule against a "
                 "store-all step on its implementations and algorithms, bitwise; cpu (with --device cuda): the CUDA "
                 "step against the CPU engine");
  app.add_option("--schedule", schedule, "SCHEDULE.json from monet-solve to run (its batch and input shape apply)");
  app.add_flag("--simulate", simulate, "with --schedule: replay it in the simulator only (valid, within its budget)");
  app.add_option("--profile", c.replay_profile_path,
                 "with --simulate: replay the schedule on this PROFILE.json's plan too (its times and device "
                 "workspaces; the fingerprint must match), and draw --timeline from it");
  app.add_option("--timeline", c.timeline_path,
                 "with --simulate: draw the memory timeline (bytes in use by kind over the step, the budget line, "
                 "store-all's) as SVG here");
  auto* tolerance_opt = app.add_option("--tolerance", c.tolerance,
                 "torch: max norm-wise relative error of every gradient and of the loss (default 1e-4); cpu: the "
                 "same against the CPU engine in double (default 1e-4 with --math fp32, 1e-2 with --math default: "
                 "TF32); store-all is bitwise and takes none");
  app.add_option("--report", c.report_path, "write a JSON report here");
  app.add_option("--python", c.python, "Python interpreter with torch and onnx (default /usr/bin/python3)");
  app.add_option("--reference-script", c.reference_script, "path of torch_reference.py");
  app.add_option("--work-dir", c.work_dir, "exchange directory (default: a fresh temporary directory, removed after)");
  app.add_flag("--keep", c.keep_work_dir, "keep the exchange directory");
  app.add_option("--precision", precision, "f32 (the engine as it trains, default) or f64 (CPU backend in double)");
  return app::guarded_main("monet-check", app, argc, argv, [&]() -> int {
    if (reference != "torch" && reference != "store-all" && reference != "cpu")
      fail("--reference '", reference, "': expected torch, store-all or cpu");
    if (reference == "cpu" && device != "cuda") fail("--reference cpu checks --device cuda against the CPU engine");
    if (reference == "cpu" && !tolerance_opt->count() && model.math == "default") c.tolerance = 1e-2;
    if (reference == "store-all" && tolerance_opt->count() && !simulate)
      fail("--tolerance: --reference store-all requires the step bitwise equal and takes no tolerance");
    if (!(c.tolerance > 0)) fail("--tolerance must be positive");
    if (simulate && schedule.empty()) fail("--simulate checks a schedule: give --schedule");
    if (!c.timeline_path.empty() && !simulate) fail("--timeline draws the simulator's replay: give --simulate");
    if (!c.replay_profile_path.empty() && !simulate)
      fail("--profile replays the schedule in the simulator: give --simulate");
    if (reference == "store-all" && schedule.empty() && !simulate)
      fail("--reference store-all compares a schedule with store-all: give --schedule");
    c.session = model.session_options();
    c.session.device = device;
    c.session.schedule_path = schedule;
    if (precision != "f32" && precision != "f64") fail("--precision '", precision, "': expected f32 or f64");
    if (precision == "f64" && device != "cpu") fail("--precision f64 runs only on --device cpu");
    c.session.float_bytes = precision == "f64" ? 8 : 4;
    CheckResult r;
    if (simulate) {
      r = check_by_simulation(c, stdout);
    } else if (reference == "store-all") {
      r = check_against_store_all(c, stdout);
    } else if (reference == "cpu") {
      r = check_against_cpu(c, stdout);
    } else {
      if (!std::filesystem::exists(c.reference_script))
        fail("--reference-script ", c.reference_script, ": no such file");
      if (access(c.python.c_str(), X_OK) != 0)
        fail("--python ", c.python, ": not an executable (Debian's python3-torch lives under /usr/bin/python3)");
      r = check_against_torch(c, stdout);
    }
    return r.pass ? kExitOk : kExitCheckFailed;
  });
}
