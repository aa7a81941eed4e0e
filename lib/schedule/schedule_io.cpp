#include "schedule/schedule_io.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/json_io.h"

namespace monet {

nlohmann::json schedule_to_json(const ScheduleFile& f, const PlanGraph& p) {
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : f.schedule.steps) {
    if (s.kind == Step::Kind::free) {
      steps.push_back({"free", p.values.at(s.id).name});
      continue;
    }
    nlohmann::json step = s.in_place >= 0 ? nlohmann::json{"compute_in_place", p.nodes.at(s.id).name,
                                                           p.values.at(s.in_place).name}
                                          : nlohmann::json{"compute", p.nodes.at(s.id).name};
    if (s.impl != 0) step.push_back(p.nodes.at(s.id).impl_name(s.impl));
    steps.push_back(std::move(step));
  }
  return {{"format", "monet-schedule"},
          {"version", kScheduleVersion},
          {"fingerprint", f.fingerprint},
          {"model", f.model},
          {"batch", f.batch},
          {"input_shape", f.input_shape},
          {"mode", f.schedule.mode},
          {"budget_bytes", f.budget_bytes},
          {"solver", f.solver.is_null() ? nlohmann::json::object() : f.solver},
          {"predicted", f.predicted.is_null() ? nlohmann::json::object() : f.predicted},
          {"steps", steps}};
}

ScheduleFile schedule_header_from_json(const nlohmann::json& j, const std::string& path) {
  try {
    if (!j.is_object() || j.value("format", "") != "monet-schedule") fail(path, ": not a monet schedule file");
    const int version = j.at("version").get<int>();
    if (version < kOldestScheduleVersion || version > kScheduleVersion)
      fail(path, ": schedule version ", version, ", this monet reads versions ", kOldestScheduleVersion, " to ",
           kScheduleVersion);
    ScheduleFile f;
    f.fingerprint = j.at("fingerprint").get<std::string>();
    f.model = j.at("model").get<std::string>();
    f.batch = j.at("batch").get<int64_t>();
    f.input_shape = j.at("input_shape").get<Shape>();
    f.budget_bytes = j.at("budget_bytes").get<int64_t>();
    f.solver = j.value("solver", nlohmann::json::object());
    f.predicted = j.value("predicted", nlohmann::json::object());
    f.schedule.mode = j.at("mode").get<std::string>();
    if (f.batch <= 0) fail(path, ": batch must be positive, got ", f.batch);
    if (f.input_shape.empty() || f.input_shape[0] != f.batch)
      fail(path, ": input_shape ", shape_str(f.input_shape), " does not start with the batch ", f.batch);
    for (int64_t d : f.input_shape)
      if (d <= 0) fail(path, ": input_shape ", shape_str(f.input_shape), " has a non-positive dimension");
    if (f.budget_bytes < 0) fail(path, ": budget_bytes must be >= 0, got ", f.budget_bytes);
    if (!j.at("steps").is_array()) fail(path, ": steps is not an array");
    return f;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": malformed schedule: ", e.what());
  }
}

ScheduleFile schedule_from_json(const nlohmann::json& j, const PlanGraph& p, const std::string& path) {
  ScheduleFile f = schedule_header_from_json(j, path);
  try {
    std::unordered_map<std::string, int> nodes, values;
    for (size_t i = 0; i < p.nodes.size(); ++i) nodes[p.nodes[i].name] = static_cast<int>(i);
    for (size_t i = 0; i < p.values.size(); ++i) values[p.values[i].name] = static_cast<int>(i);
    const auto& steps = j.at("steps");
    for (size_t i = 0; i < steps.size(); ++i) {
      const auto& s = steps[i];
      const bool shape_ok = s.is_array() && s.size() >= 2 && s.size() <= 4 &&
                            std::all_of(s.begin(), s.end(), [](const nlohmann::json& e) { return e.is_string(); });
      const std::string kind = shape_ok ? s[0].get<std::string>() : "";
      const size_t most = kind == "compute_in_place" ? 4 : kind == "compute" ? 3 : 2;
      if (!shape_ok || s.size() > most || (kind == "compute_in_place" && s.size() < 3))
        fail(path, ": step ", i, " is not [\"compute\", node(, implementation)], [\"compute_in_place\", node, value(, "
             "implementation)] or [\"free\", value]");
      const std::string name = s[1].get<std::string>();
      auto value_id = [&](const std::string& v) {
        auto it = values.find(v);
        if (it == values.end()) fail(path, ": step ", i, ": unknown value '", v, "'");
        return it->second;
      };
      if (kind == "compute" || kind == "compute_in_place") {
        auto it = nodes.find(name);
        if (it == nodes.end()) fail(path, ": step ", i, ": unknown node '", name, "'");
        const size_t impl_at = kind == "compute" ? 2 : 3;
        int impl = 0;
        if (s.size() > impl_at) {
          const std::string impl_name = s[impl_at].get<std::string>();
          impl = p.nodes[it->second].find_impl(impl_name);
          if (impl < 0) fail(path, ": step ", i, ": node '", name, "' has no implementation '", impl_name, "'");
        }
        Step step{Step::Kind::compute, it->second, impl};
        if (kind == "compute_in_place") step.in_place = value_id(s[2].get<std::string>());
        f.schedule.steps.push_back(step);
      } else if (kind == "free") {
        f.schedule.steps.push_back({Step::Kind::free, value_id(name)});
      } else {
        fail(path, ": step ", i, ": unknown kind '", kind, "'");
      }
    }
    return f;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": malformed schedule: ", e.what());
  }
}

void write_schedule(const std::string& path, const ScheduleFile& f, const PlanGraph& p) {
  write_json_atomic(path, schedule_to_json(f, p));
}

nlohmann::json read_schedule_json(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    fail(path, ": not a monet schedule file (not JSON)");
  }
}

ScheduleFile read_schedule(const std::string& path, const PlanGraph& p) {
  return schedule_from_json(read_schedule_json(path), p, path);
}

}  // namespace monet
