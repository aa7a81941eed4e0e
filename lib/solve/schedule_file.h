// The schedule file of a solve's outcome on a profile: what monet-solve and monet-fit write with -o.
#pragma once

#include <cstdint>

#include "profile/profile.h"
#include "schedule/schedule_io.h"
#include "solve/solve.h"

namespace monet {

// The schedule file of a solve's schedule within budget_bytes on a profile's plan (monet-solve -o, monet-fit -o):
// the profile's model, batch, input shape and attention; the solver's status, gap and bound; the predicted peak,
// step time, store-all's peak and step time, the overhead against it and the recomputations. Nothing measured in
// seconds, so the same profile, budget, limit and threads give the same bytes (docs/engine.md, "Determinism").
ScheduleFile solved_schedule_file(const Profile& profile, int64_t budget_bytes, const SolveOutcome& outcome);

}  // namespace monet
