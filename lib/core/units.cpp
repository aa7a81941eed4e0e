#include "core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace monet {

int64_t parse_bytes(const std::string& text, const std::string& flag) {
  auto bad = [&](const char* why) -> int64_t {
    fail(flag, " '", text, "': ", why, " (examples: 6GB, 5.5GB, 4GiB, 512MB, 1000000)");
  };
  size_t i = 0, digits = 0, dots = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    if (text[i] == '.') ++dots; else ++digits;
    ++i;
  }
  if (!text.empty() && text[0] == '-') return bad("must be positive");
  if (digits == 0 || dots > 1) return bad("expected a number of bytes with an optional unit");
  const std::string number = text.substr(0, i), unit = text.substr(i);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "TB") scale = 1e12;
  else if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1048576.0;
  else if (unit == "GiB") scale = 1073741824.0;
  else if (unit == "TiB") scale = 1099511627776.0;
  else return bad("unknown unit");
  if (scale == 1 && dots) return bad("plain bytes must be a whole number");
  const double bytes = std::stod(number) * scale;
  if (!(bytes >= 1)) return bad("must be positive");
  if (bytes > 9.0e18) return bad("too large");
  return static_cast<int64_t>(std::floor(bytes));
}

std::string format_bytes(int64_t bytes) {
  char gb[32];
  std::snprintf(gb, sizeof gb, " B (%.2f GB)", static_cast<double>(bytes) / 1e9);
  return with_commas(bytes) + gb;
}

std::string format_gb(int64_t bytes) {
  char out[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) std::snprintf(out, sizeof out, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(out, sizeof out, "%.1f MB", b / 1e6);
  else std::snprintf(out, sizeof out, "%.1f KB", b / 1e3);
  return out;
}

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (n < 0 ? "-" : "") + out;
}

}  // namespace monet
