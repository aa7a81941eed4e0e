// Flag parsing and error mapping shared by the four commands: every error becomes one line on stderr, prefixed
// by the command's name, and a documented exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/units.h"
#include "engine/session.h"
#include "profile/profile.h"
#include "solve/solve.h"

namespace monet::app {

// --input NAME=FILE.npy, repeatable: a graph input's values from a file (ImportOptions::input_files).
// --bn-activation's help (every command that imports a model).
inline constexpr const char* kBnActivationHelp =
    "fused (a batch norm and the ReLU or Clip after it as one node: Y activated as it is normalised, dY gated in "
    "the gradient's passes; default) or separate (two nodes, as exported); a schedule's or profile's applies";

inline void add_input_files_option(CLI::App& app, std::vector<std::string>& inputs) {
  app.add_option("--input", inputs,
                 "NAME=FILE.npy (repeatable): graph input NAME takes the file's values: a data input for every step, "
                 "an integer buffer of static shape as if the file held it")
      ->take_all()
      ->allow_extra_args(false);
}

inline std::map<std::string, std::string> parse_input_files(const std::vector<std::string>& inputs) {
  std::map<std::string, std::string> files;
  for (const std::string& arg : inputs) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      fail("--input '", arg, "': expected NAME=FILE.npy");
    if (!files.emplace(arg.substr(0, eq), arg.substr(eq + 1)).second)
      fail("--input: '", arg.substr(0, eq), "' is given twice");
  }
  return files;
}

// Flags that name a model at a batch: MODEL.onnx --batch N [--input-shape C,H,W] [--seed S] [--loss ce|sum].
struct ModelFlags {
  std::string model;
  std::optional<int64_t> batch;
  std::string input_shape;
  std::vector<std::string> inputs;
  uint64_t seed = 0;
  std::string loss = "ce";
  std::string math = "default";
  std::string attention = "strided";
  CLI::Option* attention_option = nullptr;
  std::string loss_head = "fused";
  CLI::Option* loss_head_option = nullptr;
  std::string concat_conv = "split";
  CLI::Option* concat_conv_option = nullptr;
  std::string bn_activation = "fused";
  CLI::Option* bn_activation_option = nullptr;
  std::string identity_dropout = "dropped";
  CLI::Option* identity_dropout_option = nullptr;

  void add_to(CLI::App& app) {
    app.add_option("model", model, "ONNX model file")->required();
    app.add_option("--batch", batch, "batch size (replaces the data input's first dimension)");
    app.add_option("--input-shape", input_shape, "C,H,W: replaces the data input's other dimensions");
    add_input_files_option(app, inputs);
    app.add_option("--seed", seed, "seed for parameters, data, labels and dropout masks (default 0)");
    app.add_option("--loss", loss, "ce (mean softmax cross-entropy over dim 1, default) or sum");
    attention_option = app.add_option(
        "--attention", attention,
        "strided (one Attention node per scaled dot-product attention, reading its operands where the export "
        "stored them: their Transposes and scalar scales taken in; the planner chooses per layer between keeping "
        "its probabilities and recomputing them; default), fused (the same with the operands' Transposes and "
        "scales left as nodes) or materialized (the exported nodes as they are); a schedule's or profile's applies");
    loss_head_option = app.add_option(
        "--loss-head", loss_head,
        "fused (a token model's output MatMul and its cross-entropy as one node: the planner chooses between "
        "keeping the logits and recomputing them a chunk of rows at a time in the backward; default) or separate "
        "(the MatMul, the logits and the loss as three nodes); a schedule's or profile's applies");
    concat_conv_option = app.add_option(
        "--concat-conv", concat_conv,
        "split (a convolution over a channel concatenation as one convolution per concatenated input, summed: the "
        "concatenation and its gradient are never stored; default) or joined (as exported); a schedule's or "
        "profile's applies");
    bn_activation_option = app.add_option("--bn-activation", bn_activation, kBnActivationHelp);
    identity_dropout_option = app.add_option(
        "--identity-dropout", identity_dropout,
        "dropped (a Dropout that is the identity, in inference mode or of ratio 0, with its mask unread, is no "
        "node; default) or kept (a node that copies its input, as exported); a schedule's or profile's applies");
    app.add_option("--math", math,
                   "cuda: default (TF32 allowed in cuDNN convolutions, cuBLAS full fp32, as PyTorch by default) or "
                   "fp32 (strict fp32 everywhere); the CPU is always strict fp32");
  }

  SessionOptions session_options() const {
    SessionOptions o;
    o.model_path = model;
    o.import.batch = batch;
    if (batch && *batch <= 0) fail("--batch must be a positive integer, got ", *batch);
    if (!input_shape.empty()) o.import.input_shape = parse_input_shape(input_shape);
    o.import.input_files = parse_input_files(inputs);
    o.train.loss = parse_loss(loss);
    o.seed = seed;
    if (math != "default" && math != "fp32") fail("--math '", math, "': expected default or fp32");
    o.math = math;
    if (attention != "strided" && attention != "fused" && attention != "materialized")
      fail("--attention '", attention, "': expected strided, fused or materialized");
    set_attention_mode(o.import, attention);
    o.attention_given = attention_option && attention_option->count() > 0;
    set_loss_head_mode(o.import, loss_head);
    o.loss_head_given = loss_head_option && loss_head_option->count() > 0;
    set_concat_conv_mode(o.import, concat_conv);
    o.concat_conv_given = concat_conv_option && concat_conv_option->count() > 0;
    set_bn_activation_mode(o.import, bn_activation);
    o.bn_activation_given = bn_activation_option && bn_activation_option->count() > 0;
    set_identity_dropout_mode(o.import, identity_dropout);
    o.identity_dropout_given = identity_dropout_option && identity_dropout_option->count() > 0;
    return o;
  }
};

// The solver's effort flags, shared by monet-solve and monet-fit (where each applies per batch tried):
// --time-limit S, --max-nodes N, --max-sub-mips M, --threads T.
struct SolverFlags {
  double time_limit;
  int64_t max_nodes = 0;
  int max_sub_mips = 0;
  int threads = 2;

  explicit SolverFlags(double default_limit) : time_limit(default_limit) {}

  // `per`: what each limit applies to ("" or " per batch tried").
  void add_to(CLI::App& app, const std::string& per = "") {
    app.add_option("--time-limit", time_limit,
                   "solver time limit" + per + " in seconds, elapsed (default " + fmt_number(time_limit) + ")");
    app.add_option("--max-nodes", max_nodes,
                   "CBC's node limit" + per +
                       ", in its search and in each neighbourhood sub-MIP (default: none); with a --time-limit that "
                       "never binds (1e6), the solve ends by work done and gives the same schedule on any machine");
    app.add_option("--max-sub-mips", max_sub_mips,
                   "the neighbourhood search's sub-MIPs at most" + per +
                       " (default: no limit; with --max-nodes, a solve by work done that ends sooner)");
    app.add_option("--threads", threads, "CBC threads (default 2)");
  }

  void check() const {
    if (!(time_limit > 0)) fail("--time-limit must be positive, got ", time_limit);
    if (max_nodes < 0) fail("--max-nodes must be >= 0, got ", max_nodes);
    if (max_sub_mips < 0) fail("--max-sub-mips must be >= 0, got ", max_sub_mips);
    if (threads < 1) fail("--threads must be >= 1, got ", threads);
  }

  void apply(SolveOptions& o) const {
    o.time_limit_s = time_limit;
    o.max_nodes = max_nodes;
    o.max_sub_mips = max_sub_mips;
    o.threads = threads;
  }

 private:
  static std::string fmt_number(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
  }
};

// The machine's available memory (MemAvailable of /proc/meminfo), 0 where it cannot be read.
inline int64_t available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

// --offload, --host-bandwidth, --host-limit (monet-solve, monet-fit; docs/planner.md, "Offload").
struct OffloadFlags {
  bool offload = false;
  std::optional<double> host_bandwidth;  // GB/s; none: the profile's host link
  std::string host_limit;                // a size; empty: half the machine's available memory
  std::string copy_timing = "auto";      // auto, hidden, lean, lean-out or lean-in (SolveOptions::copy_timing: none for auto)

  void add_to(CLI::App& app) {
    app.add_flag("--offload", offload,
                 "plan offload too: a kept activation may be copied to host memory after the forward pass uses it "
                 "and back during the step before its next use, chosen with recomputation and implementations; the "
                 "copies are priced with the profile's host link (or --host-bandwidth)");
    app.add_option("--host-bandwidth", host_bandwidth,
                   "with --offload: the host link in GB/s, each way (overrides the profile's; needed where the "
                   "profile has none)");
    app.add_option("--host-limit", host_limit,
                   "with --offload: the most host memory offloaded values take (6GB, 512MB, ...; default: half the "
                   "machine's available memory)");
    app.add_option("--copy-timing", copy_timing,
                   "with --offload: hidden (each copy releases and takes device memory where the node times hide "
                   "it), lean (as late as it can, the computation waiting for the copy: less memory, slower), "
                   "lean-out (copies to the host lean, copies back hidden), lean-in (the other way round), or auto "
                   "(the default: hidden, and only where its heuristics reach nothing within the budget the first "
                   "of lean-out, lean-in and lean whose heuristics reach the budget, else the one reaching the "
                   "lowest peak below hidden's)");
  }

  // Checks the flags and settles the host limit (read once: a search over batches keeps one limit).
  void check() {
    if (!offload && (host_bandwidth || !host_limit.empty() || copy_timing != "auto"))
      fail("--host-bandwidth, --host-limit and --copy-timing go with --offload");
    if (copy_timing != "auto") timing_ = parse_copy_timing(copy_timing);
    if (host_bandwidth && !(*host_bandwidth > 0)) fail("--host-bandwidth: expected GB/s > 0, got ", *host_bandwidth);
    if (!offload) return;
    if (!host_limit.empty()) {
      limit_bytes_ = parse_bytes(host_limit, "--host-limit");
    } else {
      limit_bytes_ = available_host_bytes() / 2;
      if (limit_bytes_ <= 0) fail("--offload: cannot read the available memory (/proc/meminfo); give --host-limit");
    }
  }

  // Whether `profile` (read from `where`) gives the link, or the flag does; fails naming it otherwise.
  void require_link(const Profile* profile, const std::string& where) const {
    if (!offload || host_bandwidth || (profile && profile->host_link)) return;
    fail(where, ": the profile has no host link (profiled without --device cuda or --host-bandwidth); give "
         "--host-bandwidth GB/s with --offload");
  }

  // The link and the host limit for a solve on `profile` (read from `where`); none without --offload.
  void apply(SolveOptions& o, const Profile& profile, const std::string& where) const {
    if (!offload) return;
    require_link(&profile, where);
    o.offload = host_bandwidth ? host_link_from_flag(*host_bandwidth) : *profile.host_link;
    o.host_limit_bytes = limit_bytes_;
    o.copy_timing = timing_;
  }

 private:
  int64_t limit_bytes_ = 0;
  std::optional<CopyTiming> timing_;  // --copy-timing, settled by check(); none: auto
};

// Runs body() and maps exceptions to one line on stderr and an exit code.
// Progress and notes go to stderr through spdlog (core/log.h); -v adds detail, -q keeps warnings only.
template <class Body>
int guarded_main(const char* command, CLI::App& app, int argc, char** argv, Body body) {
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "log detail on stderr (debug level)");
  app.add_flag("-q,--quiet", quiet, "log only warnings on stderr, no progress");
  try {
    app.parse(argc, argv);
    if (verbose && quiet) throw CLI::ValidationError("-v and -q", "give one of them, not both");
    setup_logging(quiet ? Verbosity::quiet : verbose ? Verbosity::verbose : Verbosity::normal);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << command << ": " << e.what() << " (see --help)\n";
    return kExitError;
  }
  try {
    return body();
  } catch (const OutOfMemory& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return kExitOutOfMemory;
  } catch (const Error& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::cerr << command << ": out of memory: a host allocation failed\n";
    return kExitOutOfMemory;
  } catch (const std::exception& e) {
    std::cerr << command << ": unexpected error: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace monet::app
