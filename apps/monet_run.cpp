// monet-run: trains K steps of a model on a device with a schedule (store-all, or --schedule S from monet-solve)
// (on the CPU or CUDA engine) and reports median step time, the arena's measured peak and the simulator's predicted peak, which must be equal
// and within the schedule's budget. A non-finite loss stops it, naming the step and the first non-finite value.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "common.h"
#include "core/json_io.h"

using namespace monet;

namespace {

// After step `failed` (1-based) gave a non-finite loss: the same run again from the seed in a fresh session (runs
// are bitwise reproducible), steps 1 .. failed-1 as they ran, then step `failed` checking every value on the host
// as it is computed. What it found, as the end of the error line.
std::string first_nonfinite(const SessionOptions& o, int failed) {
  auto s = open_session(o);
  for (int i = 1; i < failed; ++i) s->executor->step();
  const int v = s->executor->step_first_nonfinite();
  const Graph& g = s->tg.graph;
  const std::string again = " (found by running the " + std::to_string(failed) +
                            " steps again from the seed, checking every value on the host)";
  if (v < 0) return "; running the steps again from the seed did not reproduce it (nondeterministic algorithms?)";
  const Value& val = g.values[v];
  if (val.producer < 0)
    return "; the step starts from a non-finite " +
           std::string(val.role == Role::param ? "parameter" : role_name(val.role)) + " '" + val.name + "'" + again;
  const Node& n = g.nodes[val.producer];
  const char* stage = val.producer < s->tg.forward_end ? "forward"
                      : val.producer == s->tg.loss_node ? "loss"
                                                         : "backward";
  return "; the first non-finite value is '" + val.name + "', output of node '" + n.name + "' (" + n.op + ", " + stage +
         ")" + again;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"monet-run: train a model for a few steps and measure step time and peak memory"};
  app::ModelFlags flags;
  flags.add_to(app);
  std::string device = "cpu", report, schedule;
  int iters = 5, warmup = 1;
  double lr = 0.01;
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--iters", iters, "measured training steps (default 5)");
  app.add_option("--warmup", warmup, "steps run before measuring (default 1)");
  app.add_option("--lr", lr, "SGD learning rate (default 0.01; momentum 0.9)");
  app.add_option("--report", report, "write a JSON report here");
  app.add_option("--schedule", schedule, "SCHEDULE.json from monet-solve (default: store-all); its batch and input shape apply");
  std::string store_all = "fast", profile;
  auto* store_all_opt = app.add_option(
      "--store-all", store_all,
      "without --schedule: fast (the default: every node on its fastest implementation on --profile's times; "
      "without --profile the engine's defaults), lean (the smallest store-all peak) or default (every node's "
      "default implementation and the engine's own algorithm)");
  app.add_option("--profile", profile,
                 "without --schedule: PROFILE.json of this model, batch, input shape and loss whose times (and cuDNN "
                 "algorithms) choose the fast or lean store-all's implementations");
  return app::guarded_main("monet-run", app, argc, argv, [&] {
    if (iters <= 0) fail("--iters must be positive, got ", iters);
    if (warmup < 0) fail("--warmup must be >= 0, got ", warmup);
    SessionOptions o = flags.session_options();
    o.device = device;
    o.train.lr = lr;
    o.schedule_path = schedule;
    o.store_all = parse_store_all(store_all);
    o.profile_path = profile;
    if (!schedule.empty() && store_all_opt->count())
      fail("--store-all chooses the store-all run without a schedule: not with --schedule");
    auto s = open_session(o);
    const Graph& g = s->tg.graph;
    std::printf("model %s  input %s  device %s  loss %s\n", g.model_name.c_str(),
                shape_str(g.values[g.data_input].shape).c_str(), s->backend->name().c_str(), loss_name(o.train.loss));
    std::printf("training graph: %d forward nodes, %zu nodes in all, %zu params\n", s->tg.forward_end, g.nodes.size(),
                s->tg.params.size());
    const ScheduleFile& sf = s->schedule;
    const std::string& mode = sf.schedule.mode;
    if (!schedule.empty())
      std::printf("schedule %s: mode %s, budget %s bytes, %zu steps, %d recomputations\n", schedule.c_str(),
                  mode.c_str(), sf.budget_bytes > 0 ? with_commas(sf.budget_bytes).c_str() : "none",
                  sf.schedule.steps.size(), s->predicted.recomputations);
    else
      std::printf("store-all: %s%s\n", store_all_name(o.store_all),
                  profile.empty() ? "" : (", implementations chosen on " + profile).c_str());
    std::printf("predicted peak (%s): %s bytes\n", mode.c_str(), with_commas(s->predicted.peak_bytes).c_str());

    std::vector<double> ms, losses;
    for (int i = 0; i < warmup + iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto captured = s->executor->step({s->tg.loss});
      double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      double loss = captured.at(s->tg.loss).at(0);
      bool measured = i >= warmup;
      std::printf("step %d/%d%s: loss %.6f  %.1f ms\n", i + 1, warmup + iters, measured ? "" : " (warm-up)", loss, t);
      std::fflush(stdout);
      if (!std::isfinite(loss)) {
        s.reset();  // the device's memory, for the run again
        fail("step ", i + 1, "/", warmup + iters, ": the loss is ",
             std::isnan(loss) ? "NaN" : loss > 0 ? "+inf" : "-inf", first_nonfinite(o, i + 1));
      }
      if (measured) {
        ms.push_back(t);
        losses.push_back(loss);
      }
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                      : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
    const int64_t peak = s->executor->arena().peak_bytes();
    std::printf("median step %.1f ms; arena peak %s bytes; predicted %s bytes (%s); reserved %s bytes\n", median,
                with_commas(peak).c_str(), with_commas(s->predicted.peak_bytes).c_str(),
                peak == s->predicted.peak_bytes ? "equal" : "DIFFERENT",
                with_commas(s->executor->reserved_bytes()).c_str());
    if (s->predicted.transfers > 0)
      std::printf("offloaded: host arena %s bytes (predicted %s), %d copies of %s bytes in all\n",
                  with_commas(s->executor->host_reserved_bytes()).c_str(),
                  with_commas(s->predicted.host_peak_bytes).c_str(), s->predicted.transfers,
                  with_commas(s->predicted.transfer_bytes).c_str());
    // The step the schedule file predicts (its solve's, on its profile), or with --profile the store-all's on the
    // profile's times: meaningful on the device the profile measured.
    const nlohmann::json& pred = sf.predicted;
    const bool has_predicted = pred.is_object() && pred.contains("step_ms") && pred["step_ms"].is_number();
    const double predicted_ms = has_predicted ? pred["step_ms"].get<double>() : 0.0;
    if (has_predicted && predicted_ms > 0)
      std::printf("predicted step %.1f ms (%s); measured / predicted %.3f\n", predicted_ms,
                  schedule.empty() ? "the store-all on the profile's times" : "the schedule file's, on its profile",
                  median / predicted_ms);
    if (peak != s->predicted.peak_bytes) fail("arena peak ", peak, " differs from the predicted peak ", s->predicted.peak_bytes);
    if (sf.budget_bytes > 0 && peak > sf.budget_bytes)
      fail("arena peak ", peak, " bytes exceeds the schedule's budget ", sf.budget_bytes, " bytes (", schedule, ")");
    const std::string device_info = s->backend->describe();
    if (device != "cpu") std::printf("device: %s\n", device_info.c_str());
    if (!report.empty()) {
      nlohmann::json j = {{"model", g.model_name},
                          {"device_info", device_info},
                          {"batch", g.values[g.data_input].shape[0]},
                          {"input_shape", g.values[g.data_input].shape},
                          {"device", s->backend->name()},
                          {"schedule", mode},
                          {"store_all", schedule.empty() ? nlohmann::json(store_all_name(o.store_all))
                                                         : nlohmann::json(nullptr)},
                          {"budget_bytes", sf.budget_bytes},
                          {"peak_bytes", peak},
                          {"predicted_peak_bytes", s->predicted.peak_bytes},
                          {"reserved_bytes", s->executor->reserved_bytes()},
                          {"host_reserved_bytes", s->executor->host_reserved_bytes()},
                          {"predicted_host_peak_bytes", s->predicted.host_peak_bytes},
                          {"transfers", s->predicted.transfers},
                          {"transfer_bytes", s->predicted.transfer_bytes},
                          {"step_ms_median", median},
                          {"predicted_step_ms", has_predicted ? nlohmann::json(predicted_ms) : nlohmann::json(nullptr)},
                          {"step_ms", ms},
                          {"losses", losses}};
      write_json_atomic(report, j);
    }
    return kExitOk;
  });
}
