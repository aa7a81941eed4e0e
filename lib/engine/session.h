// A training session: model imported at a batch, training graph built, persistent tensors initialised from the
// seed, a schedule placed in the arena of a backend. What monet-run and monet-check share.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/executor.h"
#include "ir/onnx_import.h"
#include "train/training_graph.h"

namespace monet {

struct SessionOptions {
  std::string model_path;
  ImportOptions import;
  TrainOptions train;
  std::string device = "cpu";
  uint64_t seed = 0;
  int float_bytes = 4;  // cpu only: 8 runs the CPU backend in double
};

struct Session {
  TrainingGraph tg;
  std::vector<std::vector<double>> initial;  // per value id, persistent values only
  std::unique_ptr<Backend> backend;
  SimResult predicted;                       // the simulator's figures for the schedule
  std::unique_ptr<Executor> executor;
};

// Imports, builds, initialises and places everything for the store-all schedule. Throws monet::Error.
std::unique_ptr<Session> open_session(const SessionOptions& options);

}  // namespace monet
