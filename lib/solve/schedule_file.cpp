// The schedule file of a solve's outcome (schedule_file.h).
#include "solve/schedule_file.h"

namespace monet {

ScheduleFile solved_schedule_file(const Profile& profile, int64_t budget_bytes, const SolveOutcome& outcome) {
  ScheduleFile f;
  f.fingerprint = profile.plan.fingerprint;
  f.model = profile.model;
  f.batch = profile.batch;
  f.input_shape = profile.input_shape;
  f.import = profile.import;
  f.budget_bytes = budget_bytes;
  f.schedule = outcome.schedule;
  const double overhead = outcome.store_all.time_ms > 0 ? outcome.objective_ms / outcome.store_all.time_ms - 1 : 0;
  f.solver = {{"status", outcome.status}, {"gap", outcome.gap}, {"bound_ms", outcome.bound_ms}};
  f.predicted = {{"peak_bytes", outcome.predicted.peak_bytes}, {"step_ms", outcome.objective_ms},
                 {"store_all_peak_bytes", outcome.store_all.peak_bytes},
                 {"store_all_step_ms", outcome.store_all.time_ms}, {"overhead", overhead},
                 {"recomputations", outcome.predicted.recomputations}};
  return f;
}

}  // namespace monet
