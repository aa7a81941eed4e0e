// monet-check --device cuda --reference cpu (check_against_cpu, check.h): the CUDA step (store-all or the
// schedule) against the CPU engine from the same seed. The truth is the CPU engine in double; the CPU engine in
// float32 on the same step shows how much fp32 rounding alone moves the gradients, and the CUDA step passes within
// the tolerance of the truth or within kNoiseFactor times that.
#include <algorithm>
#include <cmath>
#include <set>

#include "check/check.h"
#include "check/compare.h"
#include "core/json_io.h"

namespace monet {

CheckResult check_against_cpu(const CheckOptions& options, std::FILE* out) {
  const SessionOptions& o = options.session;
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  std::fprintf(out, "model %s  input %s  device %s  loss %s\n", g.model_name.c_str(),
               shape_str(g.values[g.data_input].shape).c_str(), s->backend->name().c_str(), loss_name(o.train.loss));
  std::set<int> capture = {s->tg.loss};
  for (const ParamSlot& p : s->tg.params) capture.insert(p.grad);
  auto one_step = [&](Session& session) {
    auto values = session.executor->step(capture);
    Gradients grads;
    grads.loss = values.at(session.tg.loss).at(0);
    for (const ParamSlot& p : session.tg.params) grads.grads.push_back(values.at(p.grad));
    session.executor.reset();
    return grads;
  };
  const Gradients ours = one_step(*s);
  const std::string device_info = s->backend->describe();
  std::vector<Gradients> cpu;
  for (int fb : {8, 4}) {
    SessionOptions c = o;
    c.device = "cpu";
    c.float_bytes = fb;
    c.schedule_path.clear();  // the CPU runs store-all: the same values, whatever the schedule
    c.import.batch = s->schedule.batch;
    c.import.input_shape = Shape(s->schedule.input_shape.begin() + 1, s->schedule.input_shape.end());
    apply_import_mode(c.import, s->schedule.import);
    auto r = open_session(c);
    cpu.push_back(one_step(*r));
  }
  const Gradients& truth = cpu[0];
  std::vector<ParamError> errors = compare(ours, truth), floor_errors = compare(cpu[1], truth);
  for (size_t i = 0; i < errors.size(); ++i) errors[i].name = g.values[s->tg.params[i].param].name;
  const double worst = max_error(errors), cpu32 = max_error(floor_errors);
  const double loss_rel = std::abs(ours.loss - truth.loss) / std::max(1e-12, std::abs(truth.loss));
  const double cpu32_loss_rel = std::abs(cpu[1].loss - truth.loss) / std::max(1e-12, std::abs(truth.loss));
  const std::vector<ParamError> sorted = worst_first(errors);
  std::fprintf(out, "%-48s %14s %14s\n", "parameter (worst first)", "rel error", "max abs diff");
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 8); ++i)
    std::fprintf(out, "%-48s %14.3e %14.3e\n", sorted[i].name.c_str(), sorted[i].rel, sorted[i].max_abs);
  std::fprintf(out, "loss: cuda %.9g  cpu (f64) %.9g  rel %.3e (cpu f32: %.3e)\n", ours.loss, truth.loss, loss_rel,
               cpu32_loss_rel);
  std::fprintf(out, "gradients vs cpu f64: cuda max rel error %.3e; cpu f32 %.3e (noise floor)\n", worst, cpu32);
  const double allowed = std::max(options.tolerance, kNoiseFactor * cpu32);
  const bool pass = worst <= allowed && loss_rel <= std::max(options.tolerance, kNoiseFactor * cpu32_loss_rel);
  std::fprintf(out, "math %s: allowed %.3e: %s\n", o.math.c_str(), allowed, pass ? "PASS" : "FAIL");
  if (!pass && o.math == "default")
    std::fprintf(out,
                 "note: --math default runs cuDNN convolutions in TF32 (10-bit mantissa), which moves ill-conditioned "
                 "gradients (BatchNorm at small batch) far beyond the fp32 noise floor, as PyTorch's own TF32 does "
                 "(scripts/tf32_noise.py); check the kernels with --math fp32\n");
  std::fprintf(out, "device: %s\n", device_info.c_str());
  CheckResult result;
  result.pass = pass;
  result.report = {{"model", g.model_name},
                   {"batch", s->schedule.batch},
                   {"input_shape", s->schedule.input_shape},
                   {"device", s->backend->name()},
                   {"device_info", device_info},
                   {"math", o.math},
                   {"reference", "cpu"},
                   {"schedule", s->schedule.schedule.mode},
                   {"loss", ours.loss},
                   {"reference_loss", truth.loss},
                   {"loss_rel_error", loss_rel},
                   {"max_rel_error", worst},
                   {"cpu_f32_max_rel_error", cpu32},
                   {"tolerance", options.tolerance},
                   {"allowed", allowed},
                   {"pass", pass}};
  for (const ParamError& e : sorted)
    result.report["params"][e.name] = {{"rel_error", e.rel}, {"max_abs_diff", e.max_abs}};
  if (!options.report_path.empty()) write_json_atomic(options.report_path, result.report);
  return result;
}

}  // namespace monet
