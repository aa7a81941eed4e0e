#include "schedule/schedule_io.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/json_io.h"
#include "schedule/streams.h"

namespace monet {

nlohmann::json schedule_to_json(const ScheduleFile& f, const PlanGraph& p) {
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : f.schedule.steps) {
    if (s.kind != Step::Kind::compute) {
      const char* kind = s.kind == Step::Kind::free ? "free" : s.kind == Step::Kind::offload ? "offload" : "prefetch";
      steps.push_back({kind, p.values.at(s.id).name});
      continue;
    }
    nlohmann::json step = s.in_place >= 0 ? nlohmann::json{"compute_in_place", p.nodes.at(s.id).name,
                                                           p.values.at(s.in_place).name}
                                          : nlohmann::json{"compute", p.nodes.at(s.id).name};
    if (s.impl != 0 || s.algo >= 0) step.push_back(p.nodes.at(s.id).impl_name(s.impl));
    if (s.algo >= 0) step.push_back({{"algorithm", s.algo}});
    steps.push_back(std::move(step));
  }
  nlohmann::json j = {{"format", "monet-schedule"},
          // a file without a copy plan, or without on_host too, reads as before
          {"version", !f.schedule.copy_plan.empty() ? kScheduleVersion : f.schedule.on_host.empty() ? 4 : 5},
          {"fingerprint", f.fingerprint},
          {"model", f.model},
          {"batch", f.batch},
          {"input_shape", f.input_shape},
          {"mode", f.schedule.mode},
          {"budget_bytes", f.budget_bytes},
          {"solver", f.solver.is_null() ? nlohmann::json::object() : f.solver},
          {"predicted", f.predicted.is_null() ? nlohmann::json::object() : f.predicted},
          {"steps", steps}};
  write_import_mode(j, f.import);
  if (!f.schedule.on_host.empty()) {
    nlohmann::json names = nlohmann::json::array();
    for (int v : f.schedule.on_host) names.push_back(p.values.at(v).name);
    j["on_host"] = std::move(names);
  }
  if (!f.schedule.copy_plan.empty()) {
    nlohmann::json plan = nlohmann::json::array();
    for (const CopyChunk& c : f.schedule.copy_plan) plan.push_back({c.at, c.copy, c.part, c.parts});
    j["copy_plan"] = std::move(plan);
  }
  return j;
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
    f.import = read_import_mode(j, path);
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
      // An algorithm object may close a compute step after its implementation: {"algorithm": k}.
      const bool with_algo = s.is_array() && s.size() >= 4 && s.back().is_object();
      const size_t strings = s.is_array() ? s.size() - (with_algo ? 1 : 0) : 0;
      const bool shape_ok = s.is_array() && s.size() >= 2 && s.size() <= 5 &&
                            std::all_of(s.begin(), s.begin() + static_cast<long>(strings),
                                        [](const nlohmann::json& e) { return e.is_string(); });
      const std::string kind = shape_ok ? s[0].get<std::string>() : "";
      const size_t most = kind == "compute_in_place" ? 4 : kind == "compute" ? 3 : 2;
      const size_t impl_at = kind == "compute" ? 2 : 3;
      if (!shape_ok || strings > most || (kind == "compute_in_place" && strings < 3) ||
          (with_algo && strings != impl_at + 1))
        fail(path, ": step ", i, " is not [\"compute\", node(, implementation(, {\"algorithm\": k}))], "
             "[\"compute_in_place\", node, value(, implementation(, {\"algorithm\": k}))], [\"free\", value], "
             "[\"offload\", value] or [\"prefetch\", value]");
      const std::string name = s[1].get<std::string>();
      auto value_id = [&](const std::string& v) {
        auto it = values.find(v);
        if (it == values.end()) fail(path, ": step ", i, ": unknown value '", v, "'");
        return it->second;
      };
      if (kind == "compute" || kind == "compute_in_place") {
        auto it = nodes.find(name);
        if (it == nodes.end()) fail(path, ": step ", i, ": unknown node '", name, "'");
        const PlanNode& node = p.nodes[it->second];
        int impl = 0;
        if (strings > impl_at) {
          const std::string impl_name = s[impl_at].get<std::string>();
          impl = node.find_impl(impl_name);
          if (impl < 0) fail(path, ": step ", i, ": node '", name, "' has no implementation '", impl_name, "'");
        }
        // A profile's algorithm variant named as the implementation stands for its op implementation and algorithm.
        Step step = compute_step(p, it->second, impl);
        if (with_algo) {
          const auto& a = s.back();
          if (a.size() != 1 || !a.contains("algorithm") || !a["algorithm"].is_number_integer() ||
              a["algorithm"].get<int64_t>() < 0 || a["algorithm"].get<int64_t>() > 1000000 || step.algo >= 0)
            fail(path, ": step ", i, ": node '", name, "': expected {\"algorithm\": k} with k >= 0 after an "
                 "implementation of the op, got ", a.dump());
          step.algo = a["algorithm"].get<int>();
          if (node.impl_for(step.impl, step.algo) < 0)
            fail(path, ": step ", i, ": node '", name, "' has no implementation '", node.impl_name(step.impl),
                 "' with algorithm ", step.algo, " in this plan");
        }
        if (kind == "compute_in_place") step.in_place = value_id(s[2].get<std::string>());
        f.schedule.steps.push_back(step);
      } else if (kind == "free") {
        f.schedule.steps.push_back({Step::Kind::free, value_id(name)});
      } else if (kind == "offload") {
        f.schedule.steps.push_back({Step::Kind::offload, value_id(name)});
      } else if (kind == "prefetch") {
        f.schedule.steps.push_back({Step::Kind::prefetch, value_id(name)});
      } else {
        fail(path, ": step ", i, ": unknown kind '", kind, "'");
      }
    }
    if (j.contains("on_host") && j.at("version").get<int>() < 5)
      fail(path, ": on_host needs schedule version 5, the file says ", j.at("version").get<int>());
    if (j.contains("on_host")) {
      const auto& names = j["on_host"];
      if (!names.is_array()) fail(path, ": on_host is not an array of value names");
      for (const auto& n : names) {
        if (!n.is_string()) fail(path, ": on_host is not an array of value names");
        auto it = values.find(n.get<std::string>());
        if (it == values.end()) fail(path, ": on_host: unknown value '", n.get<std::string>(), "'");
        f.schedule.on_host.push_back(it->second);
      }
    }
    if (j.contains("copy_plan")) {
      if (j.at("version").get<int>() < 6)
        fail(path, ": copy_plan needs schedule version 6, the file says ", j.at("version").get<int>());
      const auto& plan = j["copy_plan"];
      if (!plan.is_array()) fail(path, ": copy_plan is not an array of [at, copy, part, parts] entries");
      for (size_t e = 0; e < plan.size(); ++e) {
        const auto& c = plan[e];
        if (!c.is_array() || c.size() != 4 ||
            !std::all_of(c.begin(), c.end(), [](const nlohmann::json& x) {
              return x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= 1000000000;
            }))
          fail(path, ": copy_plan entry ", e, " is not [at, copy, part, parts] (integers >= 0): ", c.dump());
        f.schedule.copy_plan.push_back({c[0].get<int>(), c[1].get<int>(), c[2].get<int>(), c[3].get<int>()});
      }
      try {
        copy_plan_of(p, f.schedule);  // each copy issued in full, in order, within its steps
      } catch (const Error& e) {
        fail(path, ": ", e.what());
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
