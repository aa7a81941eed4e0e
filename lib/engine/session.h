// A training session: model imported at a batch, training graph built, persistent tensors initialised from the
// seed, a schedule (store-all, or one read from a schedule file) placed in the arena of a backend. What monet-run
// and monet-check share.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/executor.h"
#include "ir/onnx_import.h"
#include "schedule/schedule_io.h"
#include "train/training_graph.h"

namespace monet {

// The store-all a session runs without a schedule (monet-run --store-all): fast, every node on its fastest
// implementation (fast_store_all_schedule; without a profile, the defaults); lean, the smallest peak
// (lean_store_all_schedule); defaults, every node on its default implementation and the backend's own algorithm.
enum class StoreAll { fast, lean, defaults };
StoreAll parse_store_all(const std::string& text);  // "fast", "lean", "default"; throws naming the flag
const char* store_all_name(StoreAll s);             // as parse_store_all reads it

struct SessionOptions {
  std::string model_path;
  ImportOptions import;
  TrainOptions train;
  std::string device = "cpu";
  uint64_t seed = 0;
  int float_bytes = 4;        // cpu only: 8 runs the CPU backend in double
  std::string math = "default";  // cuda: "default" (TF32 in cuDNN convolutions, as PyTorch) or "fp32" (strict)
  std::string schedule_path;  // a SCHEDULE.json to run instead of store-all; its batch and input shape apply
  // import.fuse_attention was given on the command line (--attention): with a schedule, it must agree with the
  // schedule's attention (which applies otherwise).
  bool attention_given = false;
  bool loss_head_given = false;  // the same for import.fuse_loss_head (--loss-head)
  bool concat_conv_given = false;  // the same for import.split_concat_conv (--concat-conv)
  bool bn_activation_given = false;  // the same for import.fuse_bn_activation (--bn-activation)
  bool identity_dropout_given = false;  // the same for import.drop_identity_dropout (--identity-dropout)
  // Without a schedule: which store-all. `defaults` is the bitwise reference of schedules that run the defaults.
  StoreAll store_all = StoreAll::fast;
  // Without a schedule: a PROFILE.json of the same training graph (fingerprint) whose times and implementations
  // (cuDNN algorithms of a CUDA profile) choose the fast or lean store-all's; without one they are chosen on the
  // backend's plan, which has no times.
  std::string profile_path;
  // With a schedule: run store-all on the schedule's implementations and algorithms instead (store_all_like), the
  // bitwise reference of the schedule.
  bool store_all_like_schedule = false;
};

// A model with the schedule it will run, checked without running anything.
struct ScheduledModel {
  TrainingGraph tg;
  PlanGraph plan;      // on the backend: its workspace and float bytes
  ScheduleFile file;   // without a schedule path: SessionOptions::store_all's, budget 0, the model's fingerprint
  SimResult predicted; // the simulator on file.schedule
};

// Imports the model (at the schedule's batch and input shape when there is a schedule), builds the training and
// plan graphs, reads and resolves the schedule and simulates it. Before planning it caps the backend's algorithm
// workspaces (Backend::limit_workspace) at the schedule's budget (none without a schedule) less the resident bytes.
// Throws one monet::Error line: --batch or --input-shape that differ from the schedule's, a fingerprint mismatch
// (saying what differs - model, input shape, loss - when it can tell; a profile's too), an unknown node or value, or
// the simulator's complaint naming the step.
ScheduledModel load_scheduled_model(const SessionOptions& options, Backend& backend);

struct Session {
  TrainingGraph tg;
  PlanGraph plan;
  ScheduleFile schedule;                     // what runs: mode, budget (0: none), the file's predicted figures
  std::vector<std::vector<double>> initial;  // per value id, persistent values only
  std::unique_ptr<Backend> backend;
  SimResult predicted;                       // the simulator's figures for the schedule on this backend
  std::unique_ptr<Executor> executor;
};

// Imports, builds, initialises and places everything for the schedule (store-all without one). Throws
// monet::Error.
std::unique_ptr<Session> open_session(const SessionOptions& options);

}  // namespace monet
