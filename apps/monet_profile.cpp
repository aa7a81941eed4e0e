// monet-profile: writes the profile the planner reads - every value's bytes and every node's time and workspace
// for a model at a batch - either estimated from the op formulas on a roofline (--device estimate, no hardware)
// or measured on the CPU engine (--device cpu) or the CUDA engine (--device cuda: CUDA events, and every cuDNN
// algorithm of every convolution timed with its workspace, recorded under device_info.conv_algorithms), or
// re-derives a CUDA profile's algorithm choices from those timings (--rederive, no GPU).
#include <chrono>
#include <cstdio>
#include <optional>

#include <spdlog/spdlog.h>

#include "common.h"
#include "profile/profile.h"
#ifdef MONET_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

using namespace monet;

int main(int argc, char** argv) {
  CLI::App app{"monet-profile: estimate or measure per-node time and memory of a model's training step"};
  app::ModelFlags flags;
  flags.add_to(app);
  std::string device, output;
  Roofline roofline;
  int warmup = 1, repeats = 3;
  app.add_option("--device", device, "estimate (roofline, no hardware), cpu (measured) or cuda");
  std::string rederive;
  app.add_option("--rederive", rederive,
                 "instead of measuring: re-derive the convolution algorithm choices of this CUDA profile (same model, "
                 "batch and input shape) from the cuDNN timings it recorded; no GPU needed");
  app.add_option("-o,--output", output, "profile file to write (JSON)")->required();
  auto* tflops = app.add_option("--gpu-tflops", roofline.fp32_tflops, "estimate: peak TFLOPS (default 60, H100 fp32)");
  auto* bandwidth =
      app.add_option("--gpu-bandwidth-gbs", roofline.bandwidth_gbs, "estimate: memory bandwidth in GB/s (default 3350)");
  auto* overhead = app.add_option("--gpu-overhead-us", roofline.kernel_overhead_us,
                                  "estimate: fixed cost per kernel in microseconds (default 5)");
  auto* gpu_name = app.add_option("--gpu-name", roofline.name, "estimate: device name recorded (default H100-SXM)");
  auto* warmup_opt = app.add_option("--warmup", warmup, "cpu, cuda: untimed steps first (default 1)");
  auto* repeats_opt =
      app.add_option("--repeats", repeats, "cpu, cuda: timed steps; each node's time is the median (default 3)");
  bool no_algorithms = false;
  app.add_flag("--no-conv-algorithms", no_algorithms, "cuda: do not time the algorithms of each convolution (every cuDNN one) and batch norm (cuDNN's and ours)");
  std::optional<double> host_bandwidth;
  app.add_option("--host-bandwidth", host_bandwidth,
                 "GB/s between host and device memory, each direction (an offloading plan's copies): recorded as the "
                 "profile's host_link; cuda measures it when not given");
  bool nondeterministic = false;
  app.add_flag("--nondeterministic-algorithms", nondeterministic,
               "cuda: also offer the solver cuDNN algorithms that accumulate with atomics (often the ones without "
               "workspace); runs of a schedule that picks one are not bitwise reproducible");
  return app::guarded_main("monet-profile", app, argc, argv, [&] {
    std::optional<HostLink> given_link;
    if (host_bandwidth) given_link = host_link_from_flag(*host_bandwidth);
    if (!rederive.empty()) {
      for (auto* o : {tflops, bandwidth, overhead, gpu_name, warmup_opt, repeats_opt})
        if (o->count()) fail(o->get_name(), " does not apply to --rederive (nothing is measured)");
      if (!device.empty() || no_algorithms) fail("--rederive takes neither --device nor --no-conv-algorithms");
      SessionOptions o = flags.session_options();
      Profile p = read_profile(rederive);
      // A Split has no measured twin among Slices, nor they among it, nor a bias's gradient made by a MatMul among
      // one made by an Add: the rewrites as the profile says; the attention as --attention says (its measured twin
      // is found), and the convolutions over concatenations as an explicit --concat-conv says (split ones from
      // joined ones: estimated from their twins' share, profile.h derive_profile).
      ImportMode mode = p.import;
      mode.attention = import_attention_mode(o.import);
      if (o.concat_conv_given) mode.concat_conv = import_concat_conv_mode(o.import);
      apply_import_mode(o.import, mode);
      const TrainingGraph tg = build_training_graph(import_onnx(o.model_path, o.import), o.train);
      if (p.plan.fingerprint != fingerprint(tg)) {
        // Same model on an earlier training graph: carry the measurements over to this one.
        p = derive_profile(tg, p, rederive, nondeterministic);
        std::printf("derived from %s (training graph %s, now %s): every node's times and workspaces carried by its key\n",
                    rederive.c_str(), p.device_info["derived"]["from_fingerprint"].get<std::string>().c_str(),
                    p.plan.fingerprint.c_str());
        if (given_link) p.host_link = given_link;
        write_profile(output, p);
        std::printf("wrote %s (fingerprint %s)\n", output.c_str(), p.plan.fingerprint.c_str());
        return kExitOk;
      }
      const int refreshed = refresh_in_place(p, tg, rederive);
      const int added = rederive_algorithm_variants(p, nondeterministic, rederive);
      if (given_link) p.host_link = given_link;
      std::printf("in place: options changed on %d of %zu nodes (as the ops allow now)\n", refreshed, p.plan.nodes.size());
      std::printf("algorithms: %d implementations from %s's timings (%s, not beaten in both time and workspace)\n",
                  added, rederive.c_str(), nondeterministic ? "deterministic or not" : "deterministic");
      write_profile(output, p);
      std::printf("wrote %s (fingerprint %s)\n", output.c_str(), p.plan.fingerprint.c_str());
      return kExitOk;
    }
    if (device.empty()) fail("--device is required (estimate, cpu or cuda), or --rederive PROFILE");
    if (device != "estimate" && device != "cpu" && device != "cuda")
      fail("--device '", device, "': expected estimate, cpu or cuda");
    std::unique_ptr<Backend> backend;
    if (device == "cuda") backend = make_backend("cuda", flags.math);  // throws the reason when there is no GPU
    if (device != "estimate")
      for (auto* o : {tflops, bandwidth, overhead, gpu_name})
        if (o->count()) fail(o->get_name(), " applies to --device estimate only");
    if (device == "estimate")
      for (auto* o : {warmup_opt, repeats_opt})
        if (o->count()) fail(o->get_name(), " applies to --device cpu or cuda only");
    if (!(roofline.fp32_tflops > 0)) fail("--gpu-tflops must be positive, got ", roofline.fp32_tflops);
    if (!(roofline.bandwidth_gbs > 0)) fail("--gpu-bandwidth-gbs must be positive, got ", roofline.bandwidth_gbs);
    if (!(roofline.kernel_overhead_us >= 0)) fail("--gpu-overhead-us must be >= 0, got ", roofline.kernel_overhead_us);
    if (warmup < 0) fail("--warmup must be >= 0, got ", warmup);
    if (repeats <= 0) fail("--repeats must be positive, got ", repeats);
    if (nondeterministic && (device != "cuda" || no_algorithms))
      fail("--nondeterministic-algorithms applies to --device cuda with its algorithms timed (not with --no-conv-algorithms)");

    const SessionOptions o = flags.session_options();
    const TrainingGraph tg = build_training_graph(import_onnx(o.model_path, o.import), o.train);
    const Graph& g = tg.graph;
    // The cuDNN algorithms the engine chooses itself fit the device's free memory beside the resident values.
    if (backend) backend->limit_workspace(0, make_plan_graph(tg, nullptr, 4).resident_bytes());
    std::printf("model %s  input %s  loss %s  device %s\n", g.model_name.c_str(),
                shape_str(g.values[g.data_input].shape).c_str(), loss_name(o.train.loss), device.c_str());
    std::fflush(stdout);

    Profile p;
    if (device == "estimate") {
      p = estimate_profile(tg, roofline);
    } else {
      using clock = std::chrono::steady_clock;
      auto last_print = clock::now();
      if (!backend) backend = make_cpu_backend(4);
      p = measure_profile(
          tg, *backend, warmup, repeats,
          [&](const ProfileProgress& at) {
            const auto now = clock::now();
            if (!at.step_done && now - last_print < std::chrono::seconds(2)) return;
            last_print = now;
            spdlog::info("profile: step {}/{}{}, node {}/{}{}", at.step, at.steps, at.warmup ? " (warm-up)" : "",
                         at.node, at.nodes, at.step_done ? fmt::format(", step done in {:.1f} ms", at.step_ms) : "");
          },
          o.seed);
    }
    p.model_path = o.model_path;
#ifdef MONET_HAVE_CUDA
    if (device == "cuda" && !no_algorithms) {
      // Every algorithm cuDNN offers for each convolution node, and cuDNN's and ours for each batch norm node, with
      // its workspace and time; failures recorded.
      nlohmann::json algos = nlohmann::json::object();
      int done = 0, offering = 0, variants = 0;
      for (const Node& n : g.nodes) offering += cuda::offers_algorithms(n.op);
      for (const Node& n : g.nodes) {
        nlohmann::json list = cuda::time_algorithms(*backend, g, n, warmup, repeats);
        if (list.empty()) continue;
        algos[n.name] = {{"op", n.op}, {"algorithms", list}};
        // A node's algorithms become implementations the solver may pick.
        const int added = add_algorithm_variants(p.plan.nodes.at(static_cast<size_t>(p.plan.find_node(n.name))), list,
                                                 nondeterministic);
        variants += added;
        spdlog::info("algorithms: node {}/{} {} ({}): {} algorithms, {} as implementations", ++done, offering, n.name,
                     n.op, list.size(), added);
      }
      p.device_info["conv_algorithms"] = algos;
      p.device_info["nondeterministic_algorithms_offered"] = nondeterministic;
      std::printf("algorithms: %d implementations added (%s, not beaten in both time and workspace)\n", variants,
                  nondeterministic ? "deterministic or not" : "deterministic");
    }
#endif

    if (given_link) {
      p.host_link = given_link;
    }
#ifdef MONET_HAVE_CUDA
    else if (device == "cuda") {
      constexpr int64_t kLinkBytes = int64_t{256} << 20;
      constexpr int kLinkRepeats = 5;
      const cuda::LinkFigures f = cuda::measure_host_link(kLinkBytes, kLinkRepeats);
      HostLink l;
      l.h2d_gbs = f.h2d_gbs;
      l.d2h_gbs = f.d2h_gbs;
      l.h2d_busy_gbs = f.h2d_busy_gbs;
      l.d2h_busy_gbs = f.d2h_busy_gbs;
      l.latency_us = f.latency_us;
      l.source = "measured";
      l.detail = "pinned, 256 MiB copies, median of 5";
      p.host_link = l;
    }
#endif
    if (p.host_link) std::printf("host link: %s\n", describe(*p.host_link).c_str());
    const ProfileTotals t = profile_totals(p);
    int counts[4] = {0, 0, 0, 0};
    for (const PlanNode& n : p.plan.nodes) ++counts[static_cast<int>(n.stage)];
    if (device == "estimate")
      std::printf("roofline %s: %g TFLOPS, %g GB/s, %g us per kernel\n", roofline.name.c_str(), roofline.fp32_tflops,
                  roofline.bandwidth_gbs, roofline.kernel_overhead_us);
    std::printf("nodes: %zu (%d forward, %d loss, %d backward, %d update)\n", p.plan.nodes.size(), counts[0],
                counts[1], counts[2], counts[3]);
    std::printf("time: forward %.3f ms (with the loss), backward %.3f ms, update %.3f ms, step %.3f ms\n", t.forward_ms,
                t.backward_ms, t.update_ms, t.step_ms);
    std::printf("store-all peak %s bytes (resident %s bytes)\n", with_commas(t.store_all_peak_bytes).c_str(),
                with_commas(t.resident_bytes).c_str());
    write_profile(output, p);
    std::printf("wrote %s (fingerprint %s)\n", output.c_str(), p.plan.fingerprint.c_str());
    return kExitOk;
  });
}
