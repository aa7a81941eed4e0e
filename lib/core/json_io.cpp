#include "core/json_io.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace monet {

void write_json_atomic(const std::string& path, const nlohmann::json& j) { write_text_atomic(path, j.dump(2) + "\n"); }

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) fail(path, ": cannot open for writing");
    out << text;
    if (!out) {
      std::remove(tmp.c_str());
      fail(path, ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(path, ": cannot rename into place: ", ec.message());
  }
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

}  // namespace monet
