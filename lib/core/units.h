// Byte quantities on the command line: "6GB" (1e9), "5.5GB", "4GiB" (2^30), "512MB", "512MiB", "64KB", "64KiB",
// or plain bytes "123456789". Anything else (negative, zero, "abc", "1e9", trailing text) is rejected.
#pragma once

#include <cstdint>
#include <string>

namespace monet {

int64_t parse_bytes(const std::string& text, const std::string& flag);
std::string format_bytes(int64_t bytes);  // "12,345,678 B (12.35 GB)"
std::string format_gb(int64_t bytes);     // "12.35 GB", "435.7 MB", "114.4 KB": 1e9, 1e6, 1e3 bytes
std::string with_commas(int64_t n);       // "-12,345,678"

}  // namespace monet
