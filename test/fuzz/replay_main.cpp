// Runs the fuzz target once on each file given, and on each file in each directory given (sorted), without
// libFuzzer: the regression replay in builds without clang's -fsanitize=fuzzer. Arguments starting with '-' are
// libFuzzer flags and ignored, so one command line serves both builds; libFuzzer in turn ignores every argument
// starting with "--", which carries what only this driver checks:
//   --must-import=PATH   every file PATH names (a file, or the files of a directory) is a valid model that must
//                        import (fuzz_import.cpp's verdict), not merely be rejected cleanly; it is replayed too.
// Exits 1 when a file that must import was rejected (naming it and the error), when no input was given, or when a
// path does not exist.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace monet::fuzz {
extern bool last_imported;
extern std::string last_error;
}  // namespace monet::fuzz

namespace {

namespace fs = std::filesystem;

// The files a path names, sorted; false when it names nothing.
bool files_of(const std::string& path, std::vector<fs::path>& out) {
  if (fs::is_directory(path)) {
    std::vector<fs::path> in_dir;
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file()) in_dir.push_back(e.path());
    std::sort(in_dir.begin(), in_dir.end());
    out.insert(out.end(), in_dir.begin(), in_dir.end());
    return true;
  }
  if (fs::is_regular_file(path)) {
    out.emplace_back(path);
    return true;
  }
  std::fprintf(stderr, "replay: %s: no such file or directory\n", path.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string must_flag = "--must-import=";
  std::vector<fs::path> files, must;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(must_flag, 0) == 0) {
      if (!files_of(arg.substr(must_flag.size()), must)) return 1;
    } else if (arg[0] != '-' && !files_of(arg, files)) {
      return 1;
    }
  }
  std::set<fs::path> must_set;
  for (const fs::path& f : must) must_set.insert(fs::weakly_canonical(f));
  std::set<fs::path> seen;
  for (const fs::path& f : must)  // replayed as well, once
    if (std::find_if(files.begin(), files.end(), [&](const fs::path& g) {
          return fs::weakly_canonical(g) == fs::weakly_canonical(f);
        }) == files.end())
      files.push_back(f);
  int imported = 0, must_imported = 0;
  std::vector<std::string> failures;
  for (const fs::path& f : files) {
    if (!seen.insert(fs::weakly_canonical(f)).second) continue;
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::printf("replay %s (%zu bytes): ", f.c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const bool must_import = must_set.count(fs::weakly_canonical(f)) > 0;
    if (monet::fuzz::last_imported) {
      ++imported;
      must_imported += must_import;
      std::printf("imported\n");
    } else {
      std::printf("rejected: %s\n", monet::fuzz::last_error.c_str());
      if (must_import) failures.push_back(f.string() + ": " + monet::fuzz::last_error);
    }
  }
  std::printf("replayed %zu inputs: %d imported (%d of the %zu that must)\n", seen.size(), imported, must_imported,
              must_set.size());
  for (const std::string& why : failures) std::fprintf(stderr, "replay: a valid model was rejected: %s\n", why.c_str());
  return seen.empty() || !failures.empty() ? 1 : 0;
}
