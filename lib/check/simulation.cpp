// monet-check --simulate (check_by_simulation, check.h): the schedule replayed against the model by the simulator,
// on this backend's plan and optionally on a profile's; nothing is placed or run.
#include <optional>

#include "check/check.h"
#include "check/compare.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/units.h"
#include "profile/profile.h"
#include "schedule/timeline.h"

namespace monet {

CheckResult check_by_simulation(const CheckOptions& options, std::FILE* out) {
  const SessionOptions& o = options.session;
  const std::string& schedule_path = o.schedule_path;
  const std::string& profile_path = options.replay_profile_path;
  auto backend = o.device == "cpu" ? make_cpu_backend(o.float_bytes) : make_backend(o.device, o.math);
  const ScheduledModel m = load_scheduled_model(o, *backend);  // throws the simulator's message, naming the step
  const ScheduleFile& sf = m.file;
  const Graph& g = m.tg.graph;
  std::fprintf(out, "model %s  input %s  loss %s; schedule %s: mode %s, %zu steps, %d recomputations\n",
               g.model_name.c_str(), shape_str(g.values[g.data_input].shape).c_str(), loss_name(o.train.loss),
               schedule_path.c_str(), sf.schedule.mode.c_str(), sf.schedule.steps.size(),
               m.predicted.recomputations);
  // The plan graph built here has no times (they come from a profile): the time is the file's prediction.
  const double step_ms = sf.predicted.value("step_ms", 0.0);
  std::fprintf(out, "valid; predicted peak %s bytes (resident %s) at step %d; predicted step %.3f ms (from the file)\n",
               with_commas(m.predicted.peak_bytes).c_str(), with_commas(m.predicted.resident_bytes).c_str(),
               m.predicted.peak_step, step_ms);
  const bool fits = sf.budget_bytes <= 0 || m.predicted.peak_bytes <= sf.budget_bytes;
  if (!fits)
    fail(schedule_path, ": predicted peak ", m.predicted.peak_bytes, " bytes (step ", m.predicted.peak_step,
         ") exceeds the schedule's budget ", sf.budget_bytes, " bytes");
  std::fprintf(out, "budget %s bytes: %s\n", sf.budget_bytes > 0 ? with_commas(sf.budget_bytes).c_str() : "none",
               sf.budget_bytes > 0 ? "fits" : "not set");
  // The same schedule on the profile's plan, with its times and its device's workspaces.
  std::optional<Profile> prof;
  Schedule on_profile_schedule;  // the file's steps resolved against the profile's plan (its algorithm variants)
  SimResult on_profile;
  if (!profile_path.empty()) {
    prof = read_profile(profile_path);
    if (prof->plan.fingerprint != sf.fingerprint)
      fail(profile_path, ": fingerprint ", prof->plan.fingerprint, " differs from the schedule's ", sf.fingerprint,
           " (another model, batch, input shape, loss or training graph)");
    on_profile_schedule = read_schedule(schedule_path, prof->plan).schedule;
    on_profile = simulate(prof->plan, on_profile_schedule);
    std::fprintf(out, "on the profile (%s): predicted peak %s bytes at step %d, step %.3f ms%s\n",
                 prof->device.c_str(), with_commas(on_profile.peak_bytes).c_str(), on_profile.peak_step,
                 on_profile.time_ms,
                 sf.budget_bytes <= 0 || on_profile.peak_bytes <= sf.budget_bytes ? "" : ": over the budget");
    if (sf.budget_bytes > 0 && on_profile.peak_bytes > sf.budget_bytes)
      fail(schedule_path, ": predicted peak ", on_profile.peak_bytes, " bytes on ", profile_path, " (step ",
           on_profile.peak_step, ") exceeds the schedule's budget ", sf.budget_bytes, " bytes");
  }
  if (!options.timeline_path.empty()) {
    // On the profile's plan when given (x: predicted time), else on this backend's (x: compute steps; a plan built
    // here has no times).
    const PlanGraph& plan = prof ? prof->plan : m.plan;
    const Schedule& schedule = prof ? on_profile_schedule : sf.schedule;
    const int64_t peak = prof ? on_profile.peak_bytes : m.predicted.peak_bytes;
    TimelineChart chart;
    chart.title = g.model_name + " batch " + std::to_string(sf.batch) + ", " + sf.schedule.mode + " schedule" +
                  (sf.budget_bytes > 0 ? " within " + format_gb(sf.budget_bytes) : std::string()) + ": peak " +
                  format_gb(peak) + " (" + (prof ? prof->device + " profile" : o.device + " workspaces") + ")";
    chart.budget_bytes = sf.budget_bytes;
    chart.schedule = memory_timeline(plan, schedule);
    chart.store_all = memory_timeline(plan, lean_store_all_schedule(plan));
    write_text_atomic(options.timeline_path, memory_timeline_svg(chart));
    std::fprintf(out, "wrote %s\n", options.timeline_path.c_str());
  }
  CheckResult result;
  result.pass = true;
  result.report = {{"model", g.model_name},
                   {"batch", sf.batch},
                   {"input_shape", sf.input_shape},
                   {"schedule", sf.schedule.mode},
                   {"budget_bytes", sf.budget_bytes},
                   {"predicted_peak_bytes", m.predicted.peak_bytes},
                   {"peak_step", m.predicted.peak_step},
                   {"recomputations", m.predicted.recomputations},
                   {"predicted_step_ms", step_ms},
                   {"pass", true}};
  if (prof)
    result.report["profile"] = {{"path", profile_path}, {"device", prof->device},
                                {"predicted_peak_bytes", on_profile.peak_bytes}, {"peak_step", on_profile.peak_step},
                                {"predicted_step_ms", on_profile.time_ms}};
  if (!options.report_path.empty()) write_json_atomic(options.report_path, result.report);
  return result;
}

}  // namespace monet
