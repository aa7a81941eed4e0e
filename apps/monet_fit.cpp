// monet-fit: the largest batch of a model that trains within a memory budget, optionally within an overhead over
// store-all. Each batch tried gets an estimated profile (or a measured one rescaled to it) and a solve; the search
// doubles the batch until it no longer fits, then bisects, assuming that a batch that does not fit is followed by
// none that does. With --offload the search without offload runs first, then the same search with offload above
// its answer, so that offload never gives a smaller batch.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <optional>
#include <string>

#include "common.h"
#include "core/json_io.h"
#include "core/units.h"
#include "ir/onnx_import.h"
#include "profile/profile.h"
#include "schedule/schedule_io.h"
#include "solve/schedule_file.h"
#include "solve/solve.h"
#include "train/training_graph.h"

using namespace monet;

namespace {

struct Try {
  int64_t batch = 0;
  bool fits = false;        // a schedule within the budget and the overhead
  std::string why;          // the reason it does not, or how it does
  SolveOutcome outcome;     // when a solve ran
  int64_t peak_bytes = 0;   // of the schedule found (store-all's when store-all fits)
  double overhead = 0;      // against store-all at this batch
  int64_t store_all_peak_bytes = 0;
  bool offload = false;     // solved with --offload
  Profile profile;
};

// A search's state: the largest batch that fits so far and the smallest that does not.
struct Search {
  std::optional<Try> best;
  std::optional<int64_t> too_large;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"monet-fit: the largest batch of a model that trains within a memory budget (and an overhead)"};
  std::string model, input_shape, loss = "ce", budget_text, measured_path, mode = "full", out_path, report;
  std::string loss_head = "fused", concat_conv = "split", bn_activation = "fused";
  std::optional<double> max_overhead_pct;
  app::SolverFlags solver(20);
  app::OffloadFlags offload;
  int64_t max_batch = 65536;
  app.add_option("model", model, "ONNX model file")->required();
  app.add_option("--budget", budget_text, "memory budget: 6GB (1e9 bytes), 5.5GB, 4GiB (2^30), 512MB, or bytes")
      ->required();
  app.add_option("--max-overhead", max_overhead_pct,
                 "at most this predicted step time over store-all's at the same batch, in percent (default: any)");
  app.add_option("--input-shape", input_shape, "C,H,W: replaces the data input's other dimensions");
  std::vector<std::string> inputs;
  app::add_input_files_option(app, inputs);
  app.add_option("--loss", loss, "ce (mean softmax cross-entropy over dim 1, default) or sum");
  CLI::Option* loss_head_option = app.add_option(
      "--loss-head", loss_head,
      "fused (a token model's output MatMul and its cross-entropy as one node, default) or separate; a --profile's "
      "applies");
  CLI::Option* concat_conv_option = app.add_option(
      "--concat-conv", concat_conv,
      "split (a convolution over a channel concatenation as one convolution per input, summed; default) or joined; "
      "a --profile's applies");
  CLI::Option* bn_activation_option = app.add_option("--bn-activation", bn_activation, app::kBnActivationHelp);
  app.add_option("--profile", measured_path,
                 "a measured PROFILE.json of the model (any batch): rescaled to each batch tried instead of the "
                 "roofline estimate");
  app.add_option("--mode", mode, "full (default) or checkpoint: the MILP each batch is solved with");
  solver.add_to(app, " per batch tried");
  offload.add_to(app);
  app.add_option("--max-batch", max_batch, "the largest batch tried (default 65536)");
  app.add_option("-o,--output", out_path, "write the largest batch's SCHEDULE.json here");
  app.add_option("--report", report, "write every batch tried and the answer as JSON here");
  return app::guarded_main("monet-fit", app, argc, argv, [&]() -> int {
    const int64_t budget = parse_bytes(budget_text, "--budget");
    if (max_overhead_pct && !(*max_overhead_pct >= 0)) fail("--max-overhead must be >= 0 percent, got ", *max_overhead_pct);
    if (mode != "full" && mode != "checkpoint") fail("--mode '", mode, "': expected full or checkpoint");
    solver.check();
    offload.check();
    if (max_batch < 1) fail("--max-batch must be >= 1, got ", max_batch);
    ImportOptions import;
    if (!input_shape.empty()) import.input_shape = parse_input_shape(input_shape);
    import.input_files = app::parse_input_files(inputs);
    set_loss_head_mode(import, loss_head);
    set_concat_conv_mode(import, concat_conv);
    set_bn_activation_mode(import, bn_activation);
    TrainOptions train;
    train.loss = parse_loss(loss);
    std::optional<Profile> measured;
    if (!measured_path.empty()) {
      measured = read_profile(measured_path);
      // Each batch's graph imports as the measured one did, so that its nodes find their measured twins.
      if (loss_head_option->count())
        require_recorded_mode("loss-head", loss_head, measured->import.loss_head, "profile", measured_path);
      if (concat_conv_option->count())
        require_recorded_mode("concat-conv", concat_conv, measured->import.concat_conv, "profile", measured_path);
      if (bn_activation_option->count())
        require_recorded_mode("bn-activation", bn_activation, measured->import.bn_activation, "profile",
                              measured_path);
      apply_import_mode(import, measured->import);
    }
    offload.require_link(measured ? &*measured : nullptr,
                         measured ? measured_path : std::string("the estimated profiles (no --profile)"));
    const double max_overhead = max_overhead_pct ? *max_overhead_pct / 100 : 1e300;

    std::printf("model %s, budget %s, overhead %s, %s profiles, %s mode, %.0f s per batch\n", model.c_str(),
                format_bytes(budget).c_str(),
                max_overhead_pct ? fmt::format("at most {:g}%", *max_overhead_pct).c_str() : "any",
                measured ? ("measured (" + measured_path + ", batch " + std::to_string(measured->batch) +
                            ") rescaled").c_str()
                         : "estimated",
                mode.c_str(), solver.time_limit);
    std::printf("%8s  %12s  %12s  %10s  %s\n", "batch", "store-all", "peak", "overhead", "result");
    std::fflush(stdout);

    std::vector<Try> tried;
    auto attempt = [&](int64_t batch, bool with_offload) {
      Try t;
      t.batch = batch;
      t.offload = with_offload;
      import.batch = batch;
      const TrainingGraph tg = build_training_graph(import_onnx(model, import), train);
      t.profile = measured ? rescale_profile(tg, *measured, measured_path) : estimate_profile(tg, Roofline{});
      const std::vector<int> lean_impls = lean_store_all_impls(t.profile.plan);
      const Schedule store_all = store_all_schedule(t.profile.plan, lean_impls);
      const SimResult sa = simulate(t.profile.plan, store_all);
      t.store_all_peak_bytes = sa.peak_bytes;
      if (sa.peak_bytes <= budget) {
        t.fits = true, t.peak_bytes = sa.peak_bytes, t.why = "fits: store-all";
        t.outcome.schedule = store_all, t.outcome.predicted = sa, t.outcome.store_all = sa;
        t.outcome.objective_ms = sa.time_ms, t.outcome.fits = true, t.outcome.status = "store-all";
      } else {
        spdlog::info("batch {}: solving ({} mode{}, {:.0f} s)", batch, mode, with_offload ? ", --offload" : "",
                     solver.time_limit);
        SolveOptions o;
        o.budget_bytes = budget;
        o.mode = mode;
        o.store_all_impls = lean_impls;
        solver.apply(o);
        if (with_offload) {
          offload.apply(o, t.profile, measured ? measured_path : "the estimated profile");
          // The search without offload solved this batch already: its schedule stands for the program without
          // copies, and the program with them gets the whole time limit.
          for (const Try& before : tried)
            if (before.batch == batch && !before.offload && before.outcome.assignment)
              o.without_copies = before.outcome.assignment;
        }
        o.progress = log_progress;
        t.outcome = solve(t.profile.plan, o);
        const SolveOutcome& r = t.outcome;
        if (r.fits) {
          t.peak_bytes = r.predicted.peak_bytes;
          t.overhead = r.store_all.time_ms > 0 ? r.objective_ms / r.store_all.time_ms - 1 : 0;
          t.fits = t.overhead <= max_overhead;
          t.why = t.fits ? "fits" : "over the overhead";
        } else {
          t.why = r.why_none == "below_lower_bound" ? "too big: below the lower bound " + format_gb(r.lower_bound_bytes)
                  : r.why_none == "infeasible"      ? "too big: no schedule (proven)"
                                                    : "no schedule found in the time limit";
        }
      }
      std::printf("%8lld  %12s  %12s  %10s  %s\n", static_cast<long long>(batch),
                  format_gb(t.store_all_peak_bytes).c_str(), t.peak_bytes ? format_gb(t.peak_bytes).c_str() : "-",
                  t.peak_bytes ? fmt::format("{:+.2f}%", 100 * t.overhead).c_str() : "-",
                  (t.why + (with_offload ? " (--offload)" : "")).c_str());
      std::fflush(stdout);
      return t;
    };

    // From batch `start`: doubling while batches fit (from the largest that fits, where s has one), halving while
    // none does, then bisection between the largest that fits and the smallest that does not.
    auto run = [&](Search& s, bool with_offload, int64_t start) {
      auto record = [&](Try t) {
        if (t.fits) {
          if (!s.best || t.batch > s.best->batch) s.best = t;
        } else if (!s.too_large || t.batch < *s.too_large) {
          s.too_large = t.batch;
        }
        t.profile = Profile{};  // the report keeps the figures, not the plans
        tried.push_back(std::move(t));
      };
      int64_t b = start;
      record(attempt(b, with_offload));
      if (s.best && !s.too_large) {
        b = s.best->batch;
        while (!s.too_large && b < max_batch) {
          b = std::min(2 * b, max_batch);
          record(attempt(b, with_offload));
        }
      } else if (!s.best) {
        while (!s.best && b > 1) {
          b /= 2;
          record(attempt(b, with_offload));
        }
      }
      while (s.best && s.too_large && *s.too_large - s.best->batch > 1)
        record(attempt(s.best->batch + (*s.too_large - s.best->batch) / 2, with_offload));
    };
    // Without offload first (from the measured profile's batch with --profile, else 1). With --offload, the same
    // search with offload from the smallest batch that did not fit (from the start where none did): offload adds
    // copies to what the program without them may choose, but a time-limited solve with them need not find as
    // good a schedule in its half of the time (solve_offload), so the batches that fit without it stand.
    const int64_t start = measured ? std::clamp<int64_t>(measured->batch, 1, max_batch) : 1;
    Search plain;
    run(plain, false, start);
    const std::optional<int64_t> largest_without =
        plain.best ? std::optional<int64_t>(plain.best->batch) : std::nullopt;
    Search with = plain;
    if (offload.offload && !(plain.best && !plain.too_large)) {
      with.too_large.reset();
      run(with, true, plain.best ? *plain.too_large : start);
    }
    const std::optional<Try>& best = with.best;
    const std::optional<int64_t>& too_large = with.too_large;

    nlohmann::json rows = nlohmann::json::array();
    for (const Try& t : tried)
      rows.push_back({{"batch", t.batch},
                      {"offload", t.offload},
                      {"fits", t.fits},
                      {"result", t.why},
                      {"store_all_peak_bytes", t.store_all_peak_bytes},
                      {"predicted_peak_bytes", t.peak_bytes},
                      {"overhead", t.overhead},
                      {"lower_bound_bytes", t.outcome.lower_bound_bytes},
                      {"lower_bound_node", t.outcome.lower_bound_node}});
    nlohmann::json j = {{"model", model},
                        {"budget_bytes", budget},
                        {"max_overhead", max_overhead_pct ? nlohmann::json(*max_overhead_pct / 100) : nlohmann::json(nullptr)},
                        {"profile", measured ? measured_path : "estimate"},
                        {"mode", mode},
                        {"time_limit_s", solver.time_limit},
                        {"max_nodes", solver.max_nodes},
                        {"max_sub_mips", solver.max_sub_mips},
                        {"largest_batch", best ? best->batch : 0},
                        {"offload", offload.offload},
                        {"largest_batch_without_offload", largest_without ? *largest_without : 0},
                        {"tried", rows}};
    if (!best) {
      if (!report.empty()) write_json_atomic(report, j);
      std::fprintf(stderr, "monet-fit: no batch of %s fits %s%s (batch 1: %s)\n", model.c_str(),
                   format_bytes(budget).c_str(),
                   max_overhead_pct ? fmt::format(" within {:g}% overhead", *max_overhead_pct).c_str() : "",
                   tried.back().why.c_str());
      return tried.back().outcome.why_none == "not_found" ? kExitNotFound : kExitInfeasible;
    }
    if (!out_path.empty())
      write_schedule(out_path, solved_schedule_file(best->profile, budget, best->outcome), best->profile.plan);
    if (!report.empty()) write_json_atomic(report, j);
    std::printf("largest batch: %lld (peak %s, overhead %+.2f%% against store-all at that batch)%s\n",
                static_cast<long long>(best->batch), format_gb(best->peak_bytes).c_str(), 100 * best->overhead,
                too_large ? fmt::format("; batch {} does not fit", *too_large).c_str()
                          : fmt::format("; --max-batch {} reached", max_batch).c_str());
    if (offload.offload)
      std::printf("without offload: %s\n", largest_without ? fmt::format("batch {}", *largest_without).c_str()
                                                              : "no batch fits");
    if (!out_path.empty()) std::printf("wrote %s\n", out_path.c_str());
    return kExitOk;
  });
}
