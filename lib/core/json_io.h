// Output files (JSON, SVG) are written atomically (temporary file + rename): a failed command leaves no partial
// output.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace monet {

void write_text_atomic(const std::string& path, const std::string& text);
void write_json_atomic(const std::string& path, const nlohmann::json& j);
nlohmann::json read_json(const std::string& path);

}  // namespace monet
