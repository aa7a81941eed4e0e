// libFuzzer target: the front of the pipeline on arbitrary bytes - ONNX parse and checker, constant folding of
// shape subgraphs, our shape rules (import), autodiff with loss and SGD (training graph), and every value's bytes
// with the estimated profile (what monet-profile writes). A bad model must end in monet::Error, which is the
// expected answer and is caught here; any other exception, a crash, a hang or a sanitizer report is a bug.
//
// Built by -DMONET_FUZZ=ON with clang (libFuzzer's main); otherwise linked with replay_main.cpp, which runs the
// files it is given once (the ctest fuzz_import_replay over the seed corpus and test/fuzz/regressions/) and reads
// the verdict below: the valid seeds must still import, not merely fail without crashing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "ir/onnx_import.h"
#include "profile/profile.h"
#include "schedule/plan.h"
#include "train/training_graph.h"

namespace monet::fuzz {
// The last input's verdict: imported (training graph and profile built), else the monet::Error it was rejected with.
bool last_imported = false;
std::string last_error;
}  // namespace monet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  monet::fuzz::last_imported = false;
  monet::fuzz::last_error.clear();
  try {
    monet::ImportOptions import;
    import.batch = 2;  // models/ have a dynamic batch; a file with a fixed one gets it replaced
    monet::TrainOptions train;
    train.loss = size % 2 ? monet::LossKind::sum : monet::LossKind::cross_entropy;  // both losses, by input
    monet::TrainingGraph tg = monet::build_training_graph(monet::import_onnx_bytes(bytes, "fuzz.onnx", import), train);
    monet::estimate_profile(tg, monet::Roofline{});
    monet::fuzz::last_imported = true;
  } catch (const monet::Error& e) {
    monet::fuzz::last_error = e.what();
  }
  return 0;
}
