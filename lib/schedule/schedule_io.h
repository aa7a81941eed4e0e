// Schedule files (versioned JSON): fingerprint, budget, solver summary, predicted figures and the ordered steps,
// each naming its node or value, so a file reads on its own and survives re-import of the model.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ir/import_mode.h"
#include "schedule/schedule.h"

namespace monet {

// 2: compute steps may name an implementation; 3: compute_in_place; 4: a compute step may end with
// {"algorithm": k} (a cuDNN convolution algorithm); 5: "on_host", the resident values whose home is the host
// (Schedule::on_host; a schedule without it is written as version 4); 6: "copy_plan", when each copy between host
// and device is issued, as [at, copy, part, parts] entries (Schedule::copy_plan; a schedule without one is written
// as version 5 or 4).
inline constexpr int kScheduleVersion = 6;
inline constexpr int kOldestScheduleVersion = 2;  // read as well (an older file is a version 6 one)

struct ScheduleFile {
  std::string fingerprint;
  std::string model;
  int64_t batch = 0;
  Shape input_shape;
  ImportMode import;             // how the model imports (lib/ir/import_mode.h)
  int64_t budget_bytes = 0;      // 0: none (store-all without a budget)
  nlohmann::json solver;         // status, gap, bound, times, sizes (free-form; what monet-solve reports)
  nlohmann::json predicted;      // peak_bytes, step_ms, store-all figures, overhead
  Schedule schedule;
};

nlohmann::json schedule_to_json(const ScheduleFile& f, const PlanGraph& p);
// Everything but the steps (format and version checked): what a caller needs before it has a plan graph - the
// model, batch and input shape to import at, and the fingerprint to compare.
ScheduleFile schedule_header_from_json(const nlohmann::json& j, const std::string& path);
// Resolves step names against the plan graph; throws naming the file and the step on an unknown node or value.
// Does not check the fingerprint (callers compare it with the model's to say which of model/batch differs).
ScheduleFile schedule_from_json(const nlohmann::json& j, const PlanGraph& p, const std::string& path);

void write_schedule(const std::string& path, const ScheduleFile& f, const PlanGraph& p);
// The file's JSON; a file that is not JSON is "not a monet schedule file".
nlohmann::json read_schedule_json(const std::string& path);
ScheduleFile read_schedule(const std::string& path, const PlanGraph& p);

}  // namespace monet
