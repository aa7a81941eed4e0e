// The host link: how fast values move between host and device memory, the figures an offloading plan prices its
// copies with. Measured by monet-profile --device cuda (pinned host memory, a copy stream of its own, each
// direction alone and while a memory-bound kernel runs on another stream) or given by --host-bandwidth.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace monet {

struct HostLink {
  double h2d_gbs = 0;       // host to device, GB/s (1e9 bytes), the link idle
  double d2h_gbs = 0;       // device to host
  double h2d_busy_gbs = 0;  // the same while a kernel streams through device memory on another stream
  double d2h_busy_gbs = 0;
  double latency_us = 0;    // one small copy's time, start to end
  std::string source;       // "measured" (monet-profile --device cuda) or "flag" (--host-bandwidth)
  std::string detail;       // measured: the copy size and repeats; flag: the value given

  // One copy of `bytes` to the host (to_host) or to the device while kernels run: latency + bytes / busy rate.
  // What an offloading plan prices each copy at.
  double copy_ms(int64_t bytes, bool to_host) const {
    return latency_us * 1e-3 + static_cast<double>(bytes) * 1e-6 / (to_host ? d2h_busy_gbs : h2d_busy_gbs);
  }
};

// The figures of --host-bandwidth GB/s: both directions, idle and busy, at that rate, no latency.
HostLink host_link_from_flag(double gbs);

nlohmann::json to_json(const HostLink& link);
// Throws naming `where` and the field on a missing or non-positive rate, a negative latency or an unknown source.
HostLink host_link_from_json(const nlohmann::json& j, const std::string& where);

// One line for people: "H2D 55.1 GB/s, D2H 53.2 GB/s (52.0 and 50.3 while a kernel runs), latency 9.1 us (measured)".
std::string describe(const HostLink& link);

}  // namespace monet
