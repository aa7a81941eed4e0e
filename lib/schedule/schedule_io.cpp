#include "schedule/schedule_io.h"

#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/json_io.h"

namespace monet {

nlohmann::json schedule_to_json(const ScheduleFile& f, const PlanGraph& p) {
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : f.schedule.steps) {
    if (s.kind == Step::Kind::compute && s.impl != 0)
      steps.push_back({"compute", p.nodes.at(s.id).name, p.nodes.at(s.id).impl_name(s.impl)});
    else if (s.kind == Step::Kind::compute)
      steps.push_back({"compute", p.nodes.at(s.id).name});
    else
      steps.push_back({"free", p.values.at(s.id).name});
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
    if (j.at("version").get<int>() != kScheduleVersion)
      fail(path, ": schedule version ", j.at("version").get<int>(), ", this monet reads version ", kScheduleVersion);
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
      if (!s.is_array() || s.size() < 2 || s.size() > 3 || !s[0].is_string() || !s[1].is_string() ||
          (s.size() == 3 && (!s[2].is_string() || s[0] != "compute")))
        fail(path, ": step ", i, " is not [\"compute\", node(, implementation)] or [\"free\", value]");
      const std::string kind = s[0].get<std::string>(), name = s[1].get<std::string>();
      if (kind == "compute") {
        auto it = nodes.find(name);
        if (it == nodes.end()) fail(path, ": step ", i, ": unknown node '", name, "'");
        int impl = 0;
        if (s.size() == 3) {
          const std::string impl_name = s[2].get<std::string>();
          impl = p.nodes[it->second].find_impl(impl_name);
          if (impl < 0) fail(path, ": step ", i, ": node '", name, "' has no implementation '", impl_name, "'");
        }
        f.schedule.steps.push_back({Step::Kind::compute, it->second, impl});
      } else if (kind == "free") {
        auto it = values.find(name);
        if (it == values.end()) fail(path, ": step ", i, ": unknown value '", name, "'");
        f.schedule.steps.push_back({Step::Kind::free, it->second});
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
