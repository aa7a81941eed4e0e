// What the import tests check of a profile made on a graph imported some way: the file records that import mode,
// and a run that chooses its store-all on the profile (monet-run --profile) imports the model the same way, where a
// fresh import would give another graph.
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "engine/session.h"
#include "ir/import_mode.h"
#include "ir/onnx_import.h"
#include "profile/profile.h"
#include "test_paths.h"
#include "train/training_graph.h"

namespace monet::test {

// model: a file of test/data; `as_imported` its batch and rewrites. Returns the session (its graph imported as the
// profile says) for the caller's own checks.
inline std::unique_ptr<Session> session_on_profile_of(const std::string& model, const ImportOptions& as_imported) {
  const TrainingGraph tg = build_training_graph(import_onnx(data_path(model), as_imported), TrainOptions{});
  const Profile p = estimate_profile(tg, Roofline{});
  CHECK(p.import == import_mode_of(tg.graph));
  const std::string path = std::string(MONET_BINARY_DIR) + "/test_profile_import_" + p.plan.fingerprint + ".json";
  write_profile(path, p);
  CHECK(read_profile(path).import == p.import);
  SessionOptions o;
  o.model_path = data_path(model);
  o.import.batch = as_imported.batch;
  o.profile_path = path;
  o.store_all = StoreAll::fast;
  auto s = open_session(o);
  std::remove(path.c_str());
  CHECK(s->plan.fingerprint == p.plan.fingerprint);
  CHECK(s->schedule.import == p.import);
  return s;
}

}  // namespace monet::test
