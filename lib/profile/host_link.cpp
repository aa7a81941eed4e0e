#include "profile/host_link.h"

#include <cmath>

#include "core/error.h"

namespace monet {

HostLink host_link_from_flag(double gbs) {
  if (!(gbs > 0) || !std::isfinite(gbs)) fail("--host-bandwidth must be a positive number of GB/s, got ", gbs);
  HostLink l;
  l.h2d_gbs = l.d2h_gbs = l.h2d_busy_gbs = l.d2h_busy_gbs = gbs;
  l.source = "flag";
  l.detail = "--host-bandwidth " + nlohmann::json(gbs).dump();
  return l;
}

nlohmann::json to_json(const HostLink& l) {
  return {{"h2d_gbs", l.h2d_gbs},           {"d2h_gbs", l.d2h_gbs},           {"h2d_busy_gbs", l.h2d_busy_gbs},
          {"d2h_busy_gbs", l.d2h_busy_gbs}, {"latency_us", l.latency_us},   {"source", l.source},
          {"detail", l.detail}};
}

HostLink host_link_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail(where, ": host_link: expected an object");
  auto number = [&](const char* key, bool positive) {
    if (!j.contains(key) || !j[key].is_number()) fail(where, ": host_link.", key, ": expected a number");
    const double x = j[key].get<double>();
    if (!std::isfinite(x) || (positive ? !(x > 0) : x < 0))
      fail(where, ": host_link.", key, ": expected a ", positive ? "positive" : "non-negative", " number, got ", x);
    return x;
  };
  HostLink l;
  l.h2d_gbs = number("h2d_gbs", true);
  l.d2h_gbs = number("d2h_gbs", true);
  l.h2d_busy_gbs = number("h2d_busy_gbs", true);
  l.d2h_busy_gbs = number("d2h_busy_gbs", true);
  l.latency_us = number("latency_us", false);
  if (!j.contains("source") || !j["source"].is_string()) fail(where, ": host_link.source: expected a string");
  l.source = j["source"].get<std::string>();
  if (l.source != "measured" && l.source != "flag")
    fail(where, ": host_link.source: expected measured or flag, got '", l.source, "'");
  if (j.contains("detail") && j["detail"].is_string()) l.detail = j["detail"].get<std::string>();
  return l;
}

std::string describe(const HostLink& l) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "H2D %.1f GB/s, D2H %.1f GB/s (%.1f and %.1f while a kernel runs), latency %.1f us (%s%s%s)",
                l.h2d_gbs, l.d2h_gbs, l.h2d_busy_gbs, l.d2h_busy_gbs, l.latency_us, l.source.c_str(),
                l.detail.empty() ? "" : ": ", l.detail.c_str());
  return buf;
}

}  // namespace monet
