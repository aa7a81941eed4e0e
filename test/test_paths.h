// Paths of the repository's models and test data, for tests.
#pragma once

#include <string>

namespace monet::test {
inline std::string model_path(const std::string& name) { return std::string(MONET_SOURCE_DIR) + "/models/" + name + ".onnx"; }
inline std::string data_path(const std::string& name) { return std::string(MONET_SOURCE_DIR) + "/test/data/" + name; }
}  // namespace monet::test
