// monet-check: one training step of monet's engine against a reference. With --reference torch,
// scripts/torch_reference.py executes the same ONNX graph node by node with torch.nn.functional (in double) on the
// same weights, batch, labels and dropout masks, and PyTorch's autograd takes the gradients. With --schedule S
// --reference store-all, the scheduled step is compared with a step of store-all on the schedule's own
// implementations and algorithms from the same initial state: every value from the same kernel, so loss, gradients
// and BatchNorm statistics must be bitwise equal. With --schedule S
// --simulate, nothing runs: the schedule is replayed by the simulator against the model.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common.h"
#include "core/json_io.h"
#include "core/npy.h"
#include "core/units.h"
#include "profile/profile.h"
#include "schedule/schedule_io.h"
#include "schedule/timeline.h"

using namespace monet;
namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The values as the engine holds them (rounded to float for the fp32 engine), written as float64.
void write_values(const std::string& path, const Value& v, const std::vector<double>& x, int float_bytes) {
  if (v.dtype == DType::f32) {
    std::vector<double> rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) rounded[i] = float_bytes == 4 ? static_cast<float>(x[i]) : x[i];
    npy::write(path, "<f8", v.shape, rounded.data(), static_cast<int64_t>(rounded.size() * 8));
  } else if (v.dtype == DType::i64) {
    std::vector<int64_t> ints(x.begin(), x.end());
    npy::write(path, "<i8", v.shape, ints.data(), static_cast<int64_t>(ints.size() * 8));
  } else {
    std::vector<uint8_t> bytes(x.begin(), x.end());
    npy::write(path, "|u1", v.shape, bytes.data(), static_cast<int64_t>(bytes.size()));
  }
}

struct ParamError {
  std::string name;
  double rel = 0, max_abs = 0, ref_norm = 0;
};

struct Gradients {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // in TrainingGraph::params order
};

// An fp32 engine may deviate from the float64 truth this many times more than PyTorch's own float32 run does.
constexpr double kNoiseFactor = 4.0;
// Gradients are compared relative to max(|g_ref|, this fraction of the norm of the whole gradient): some
// parameters' true gradient is exactly zero (a conv bias before BatchNorm), where rounding noise has no scale
// of its own.
constexpr double kZeroFloor = 1e-3;

std::vector<ParamError> compare(const Gradients& ours, const Gradients& ref) {
  double total2 = 0;
  for (const auto& r : ref.grads)
    for (double x : r) total2 += x * x;
  const double floor = kZeroFloor * std::sqrt(total2);
  std::vector<ParamError> out;
  for (size_t p = 0; p < ref.grads.size(); ++p) {
    double diff2 = 0, ref2 = 0, max_abs = 0;
    for (size_t i = 0; i < ref.grads[p].size(); ++i) {
      const double d = ours.grads[p][i] - ref.grads[p][i];
      diff2 += d * d;
      ref2 += ref.grads[p][i] * ref.grads[p][i];
      max_abs = std::max(max_abs, std::abs(d));
    }
    out.push_back({"", std::sqrt(diff2) / std::max({std::sqrt(ref2), floor, 1e-300}), max_abs, std::sqrt(ref2)});
  }
  return out;
}

double max_error(const std::vector<ParamError>& errors) {
  double worst = 0;
  for (const ParamError& e : errors) worst = std::max(worst, e.rel);
  return worst;
}

// Bitwise equality of two host copies (doubles converted exactly from the engine's floats): -0 and +0 differ.
bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(b[i])) return false;
  return true;
}

struct Flags {
  app::ModelFlags model;
  std::string device = "cpu", reference = "torch", report, python = "/usr/bin/python3", work_dir;
  std::string script = std::string(MONET_SOURCE_DIR) + "/scripts/torch_reference.py";
  std::string schedule, timeline, profile;
  double tolerance = 1e-4;
  bool keep = false, simulate = false;
  std::string precision = "f32";
};

// --simulate: the schedule replayed against the model by the simulator; nothing is placed or run.
int check_by_simulation(const Flags& f, const SessionOptions& o) {
  auto backend = o.device == "cpu" ? make_cpu_backend(o.float_bytes) : make_backend(o.device, o.math);
  const ScheduledModel m = load_scheduled_model(o, *backend);  // throws the simulator's message, naming the step
  const ScheduleFile& sf = m.file;
  const Graph& g = m.tg.graph;
  std::printf("model %s  input %s  loss %s; schedule %s: mode %s, %zu steps, %d recomputations\n",
              g.model_name.c_str(), shape_str(g.values[g.data_input].shape).c_str(), loss_name(o.train.loss),
              f.schedule.c_str(), sf.schedule.mode.c_str(), sf.schedule.steps.size(), m.predicted.recomputations);
  // The plan graph built here has no times (they come from a profile): the time is the file's prediction.
  const double step_ms = sf.predicted.value("step_ms", 0.0);
  std::printf("valid; predicted peak %s bytes (resident %s) at step %d; predicted step %.3f ms (from the file)\n",
              app::with_commas(m.predicted.peak_bytes).c_str(), app::with_commas(m.predicted.resident_bytes).c_str(),
              m.predicted.peak_step, step_ms);
  const bool fits = sf.budget_bytes <= 0 || m.predicted.peak_bytes <= sf.budget_bytes;
  if (!fits)
    fail(f.schedule, ": predicted peak ", m.predicted.peak_bytes, " bytes (step ", m.predicted.peak_step,
         ") exceeds the schedule's budget ", sf.budget_bytes, " bytes");
  std::printf("budget %s bytes: %s\n", sf.budget_bytes > 0 ? app::with_commas(sf.budget_bytes).c_str() : "none",
              sf.budget_bytes > 0 ? "fits" : "not set");
  // --profile: the same schedule on the profile's plan, with its times and its device's workspaces.
  std::optional<Profile> prof;
  Schedule on_profile_schedule;  // the file's steps resolved against the profile's plan (its algorithm variants)
  SimResult on_profile;
  if (!f.profile.empty()) {
    prof = read_profile(f.profile);
    if (prof->plan.fingerprint != sf.fingerprint)
      fail(f.profile, ": fingerprint ", prof->plan.fingerprint, " differs from the schedule's ", sf.fingerprint,
           " (another model, batch, input shape, loss or training graph)");
    on_profile_schedule = read_schedule(f.schedule, prof->plan).schedule;
    on_profile = simulate(prof->plan, on_profile_schedule);
    std::printf("on the profile (%s): predicted peak %s bytes at step %d, step %.3f ms%s\n", prof->device.c_str(),
                app::with_commas(on_profile.peak_bytes).c_str(), on_profile.peak_step, on_profile.time_ms,
                sf.budget_bytes <= 0 || on_profile.peak_bytes <= sf.budget_bytes ? "" : ": over the budget");
    if (sf.budget_bytes > 0 && on_profile.peak_bytes > sf.budget_bytes)
      fail(f.schedule, ": predicted peak ", on_profile.peak_bytes, " bytes on ", f.profile, " (step ",
           on_profile.peak_step, ") exceeds the schedule's budget ", sf.budget_bytes, " bytes");
  }
  if (!f.timeline.empty()) {
    // On the profile's plan when given (x: predicted time), else on this backend's (x: compute steps; a plan built
    // here has no times).
    const PlanGraph& plan = prof ? prof->plan : m.plan;
    const Schedule& schedule = prof ? on_profile_schedule : sf.schedule;
    const int64_t peak = prof ? on_profile.peak_bytes : m.predicted.peak_bytes;
    TimelineChart chart;
    chart.title = g.model_name + " batch " + std::to_string(sf.batch) + ", " + sf.schedule.mode + " schedule" +
                  (sf.budget_bytes > 0 ? " within " + format_gb(sf.budget_bytes) : std::string()) + ": peak " +
                  format_gb(peak) + " (" + (prof ? prof->device + " profile" : o.device + " workspaces") + ")";
    chart.budget_bytes = sf.budget_bytes;
    chart.schedule = memory_timeline(plan, schedule);
    chart.store_all = memory_timeline(plan, lean_store_all_schedule(plan));
    write_text_atomic(f.timeline, memory_timeline_svg(chart));
    std::printf("wrote %s\n", f.timeline.c_str());
  }
  if (!f.report.empty()) {
    nlohmann::json j = {{"model", g.model_name},
                        {"batch", sf.batch},
                        {"input_shape", sf.input_shape},
                        {"schedule", sf.schedule.mode},
                        {"budget_bytes", sf.budget_bytes},
                        {"predicted_peak_bytes", m.predicted.peak_bytes},
                        {"peak_step", m.predicted.peak_step},
                        {"recomputations", m.predicted.recomputations},
                        {"predicted_step_ms", step_ms},
                        {"pass", true}};
    if (prof)
      j["profile"] = {{"path", f.profile}, {"device", prof->device}, {"predicted_peak_bytes", on_profile.peak_bytes},
                      {"peak_step", on_profile.peak_step}, {"predicted_step_ms", on_profile.time_ms}};
    write_json_atomic(f.report, j);
  }
  return kExitOk;
}

// --reference store-all: the scheduled step against a step of store-all on the schedule's implementations and
// algorithms (a second session from the same seed): bitwise equal, whatever the mode. Then, for information, the
// scheduled step against the lean store-all where that runs other implementations or algorithms.
int check_against_store_all(const Flags& f, const SessionOptions& o) {
  // One session at a time: the scheduled step runs and its arena is released before store-all's is reserved.
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  const std::string mode = s->schedule.schedule.mode;
  std::printf("model %s  input %s  device %s  loss %s\n", g.model_name.c_str(),
              shape_str(g.values[g.data_input].shape).c_str(), s->backend->name().c_str(), loss_name(o.train.loss));
  std::set<int> capture = {s->tg.loss};
  for (const ParamSlot& p : s->tg.params) capture.insert(p.grad);
  // The state the step leaves behind: BatchNorm running statistics (a recomputation must not update them a second
  // time), and the updated parameters and momentum.
  std::vector<int> state;
  int buffers = 0;
  for (int v : resident_values(g)) {
    const Role role = g.values[v].role;
    if (role != Role::buffer && role != Role::param && role != Role::momentum) continue;
    state.push_back(v);
    if (role == Role::buffer) ++buffers;
  }
  auto one_step = [&](Session& session) {
    auto values = session.executor->step(capture);
    for (int v : state) values[v] = session.executor->get_value(v);
    session.executor.reset();  // gives the arena back
    return values;
  };
  auto gradients = [&](const std::map<int, std::vector<double>>& values) {
    Gradients out;
    out.loss = values.at(s->tg.loss).at(0);
    for (const ParamSlot& p : s->tg.params) out.grads.push_back(values.at(p.grad));
    return out;
  };
  const auto got = one_step(*s);
  const Gradients ours = gradients(got);

  SessionOptions same = o;
  same.store_all_like_schedule = true;
  auto r = open_session(same);
  std::printf("schedule %s: mode %s, %zu steps, %d recomputations, peak %s bytes; store-all on its implementations: "
              "peak %s bytes\n",
              f.schedule.c_str(), mode.c_str(), s->schedule.schedule.steps.size(), s->predicted.recomputations,
              app::with_commas(s->predicted.peak_bytes).c_str(), app::with_commas(r->predicted.peak_bytes).c_str());
  const auto ref = one_step(*r);
  const Gradients theirs = gradients(ref);

  bool grads_bitwise = std::bit_cast<uint64_t>(ours.loss) == std::bit_cast<uint64_t>(theirs.loss);
  for (size_t i = 0; i < ours.grads.size(); ++i)
    grads_bitwise = grads_bitwise && bitwise_equal(ours.grads[i], theirs.grads[i]);
  std::vector<ParamError> errors = compare(ours, theirs);
  for (size_t i = 0; i < errors.size(); ++i) errors[i].name = g.values[s->tg.params[i].param].name;
  const double worst_rel = max_error(errors);
  double worst_abs = 0;
  for (const ParamError& e : errors) worst_abs = std::max(worst_abs, e.max_abs);
  const double loss_abs = std::abs(ours.loss - theirs.loss);
  std::vector<std::string> state_diffs;
  for (int v : state)
    if (!bitwise_equal(got.at(v), ref.at(v))) state_diffs.push_back(g.values[v].name);

  std::vector<ParamError> sorted = errors;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.rel > b.rel; });
  std::printf("%-48s %14s %14s %14s\n", "parameter (worst first)", "rel diff", "max abs diff", "|grad store-all|");
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 8); ++i)
    std::printf("%-48s %14.3e %14.3e %14.3e\n", sorted[i].name.c_str(), sorted[i].rel, sorted[i].max_abs,
                sorted[i].ref_norm);
  std::printf("loss: scheduled %.9g  store-all %.9g  abs diff %.3e\n", ours.loss, theirs.loss, loss_abs);
  std::printf("%zu parameter gradients: max abs diff %.3e, max rel diff %.3e\n", errors.size(), worst_abs, worst_rel);
  std::printf("state after the step (%zu values, %d BatchNorm statistics): %s\n", state.size(), buffers,
              state_diffs.empty() ? "bitwise equal" : ("DIFFERENT: " + state_diffs.front()).c_str());
  const bool pass = grads_bitwise && state_diffs.empty();
  std::printf("mode %s computes every value with the same kernel as store-all on its implementations: %s\n",
              mode.c_str(), pass ? "bitwise equal, PASS" : "NOT bitwise equal, FAIL");

  // The lean store-all (monet-run --store-all lean) where it runs other implementations or algorithms: how far the
  // schedule's choices move the step (rounding: other kernels sum in other orders). Information, not part of the
  // verdict.
  nlohmann::json lean_json = nullptr;
  if (mode != "store-all") {
    SessionOptions lean = o;
    lean.schedule_path.clear();
    lean.store_all = StoreAll::lean;
    lean.import.batch = s->schedule.batch;
    lean.import.input_shape = Shape(s->schedule.input_shape.begin() + 1, s->schedule.input_shape.end());
    lean.import.fuse_attention = s->schedule.attention == "fused";
    auto l = open_session(lean);
    // Both are store-all: every node computed once. Each node's (implementation, algorithm) in either.
    auto choices = [&](const Schedule& sc) {
      std::vector<std::pair<int, int>> c(g.nodes.size());
      for (const Step& st : sc.steps)
        if (st.kind == Step::Kind::compute) c[st.id] = {st.impl, st.algo};
      return c;
    };
    const auto lean_choices = choices(l->schedule.schedule), same_choices = choices(r->schedule.schedule);
    int differing = 0;
    for (size_t n = 0; n < g.nodes.size(); ++n) differing += lean_choices[n] != same_choices[n];
    if (differing == 0) {
      std::printf("the lean store-all runs the same implementations and algorithms\n");
      l->executor.reset();
    } else {
      const Gradients lean_grads = gradients(one_step(*l));
      const double rel = max_error(compare(ours, lean_grads));
      const double labs = std::abs(ours.loss - lean_grads.loss);
      std::printf("against the lean store-all (%d nodes on other implementations or algorithms): max rel diff %.3e, "
                  "loss abs diff %.3e (rounding of other kernels; information)\n", differing, rel, labs);
      lean_json = {{"differing_nodes", differing}, {"max_rel_diff", rel}, {"loss_abs_diff", labs}};
    }
  }
  if (!f.report.empty()) {
    nlohmann::json j = {{"model", g.model_name},
                        {"batch", s->schedule.batch},
                        {"input_shape", s->schedule.input_shape},
                        {"device", s->backend->name()},
                        {"reference", "store-all on the schedule's implementations"},
                        {"schedule", mode},
                        {"budget_bytes", s->schedule.budget_bytes},
                        {"recomputations", s->predicted.recomputations},
                        {"loss", ours.loss},
                        {"reference_loss", theirs.loss},
                        {"loss_abs_diff", loss_abs},
                        {"max_abs_diff", worst_abs},
                        {"max_rel_diff", worst_rel},
                        {"bitwise_equal", pass},
                        {"state_differs", state_diffs},
                        {"lean_store_all", lean_json},
                        {"pass", pass}};
    for (const ParamError& e : sorted) j["params"][e.name] = {{"rel_diff", e.rel}, {"max_abs_diff", e.max_abs}};
    write_json_atomic(f.report, j);
  }
  return pass ? kExitOk : kExitCheckFailed;
}

// --reference cpu: the CUDA step (store-all or the schedule) against the CPU engine from the same seed. The truth
// is the CPU engine in double; the CPU engine in float32 on the same step shows how much fp32 rounding alone moves
// the gradients, and the CUDA step passes within --tolerance of the truth or within kNoiseFactor times that.
int check_against_cpu(const Flags& f, const SessionOptions& o) {
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  std::printf("model %s  input %s  device %s  loss %s\n", g.model_name.c_str(),
              shape_str(g.values[g.data_input].shape).c_str(), s->backend->name().c_str(), loss_name(o.train.loss));
  std::set<int> capture = {s->tg.loss};
  for (const ParamSlot& p : s->tg.params) capture.insert(p.grad);
  auto one_step = [&](Session& session) {
    auto values = session.executor->step(capture);
    Gradients out;
    out.loss = values.at(session.tg.loss).at(0);
    for (const ParamSlot& p : session.tg.params) out.grads.push_back(values.at(p.grad));
    session.executor.reset();
    return out;
  };
  const Gradients ours = one_step(*s);
  const std::string device_info = s->backend->describe();
  std::vector<Gradients> cpu;
  for (int fb : {8, 4}) {
    SessionOptions c = o;
    c.device = "cpu";
    c.float_bytes = fb;
    c.schedule_path.clear();  // the CPU runs store-all: the same values, whatever the schedule
    c.import.batch = s->schedule.batch;
    c.import.input_shape = Shape(s->schedule.input_shape.begin() + 1, s->schedule.input_shape.end());
    c.import.fuse_attention = s->schedule.attention == "fused";
    auto r = open_session(c);
    cpu.push_back(one_step(*r));
  }
  const Gradients& truth = cpu[0];
  std::vector<ParamError> errors = compare(ours, truth), floor_errors = compare(cpu[1], truth);
  for (size_t i = 0; i < errors.size(); ++i) errors[i].name = g.values[s->tg.params[i].param].name;
  const double worst = max_error(errors), cpu32 = max_error(floor_errors);
  const double loss_rel = std::abs(ours.loss - truth.loss) / std::max(1e-12, std::abs(truth.loss));
  const double cpu32_loss_rel = std::abs(cpu[1].loss - truth.loss) / std::max(1e-12, std::abs(truth.loss));
  std::vector<ParamError> sorted = errors;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.rel > b.rel; });
  std::printf("%-48s %14s %14s\n", "parameter (worst first)", "rel error", "max abs diff");
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 8); ++i)
    std::printf("%-48s %14.3e %14.3e\n", sorted[i].name.c_str(), sorted[i].rel, sorted[i].max_abs);
  std::printf("loss: cuda %.9g  cpu (f64) %.9g  rel %.3e (cpu f32: %.3e)\n", ours.loss, truth.loss, loss_rel,
              cpu32_loss_rel);
  std::printf("gradients vs cpu f64: cuda max rel error %.3e; cpu f32 %.3e (noise floor)\n", worst, cpu32);
  const double allowed = std::max(f.tolerance, kNoiseFactor * cpu32);
  const bool pass = worst <= allowed && loss_rel <= std::max(f.tolerance, kNoiseFactor * cpu32_loss_rel);
  std::printf("math %s: allowed %.3e: %s\n", o.math.c_str(), allowed, pass ? "PASS" : "FAIL");
  if (!pass && o.math == "default")
    std::printf("note: --math default runs cuDNN convolutions in TF32 (10-bit mantissa), which moves ill-conditioned "
                "gradients (BatchNorm at small batch) far beyond the fp32 noise floor, as PyTorch's own TF32 does "
                "(scripts/tf32_noise.py); check the kernels with --math fp32\n");
  std::printf("device: %s\n", device_info.c_str());
  if (!f.report.empty()) {
    nlohmann::json j = {{"model", g.model_name},
                        {"batch", s->schedule.batch},
                        {"input_shape", s->schedule.input_shape},
                        {"device", s->backend->name()},
                        {"device_info", device_info},
                        {"math", o.math},
                        {"reference", "cpu"},
                        {"schedule", s->schedule.schedule.mode},
                        {"loss", ours.loss},
                        {"reference_loss", truth.loss},
                        {"loss_rel_error", loss_rel},
                        {"max_rel_error", worst},
                        {"cpu_f32_max_rel_error", cpu32},
                        {"tolerance", f.tolerance},
                        {"allowed", allowed},
                        {"pass", pass}};
    for (const ParamError& e : sorted) j["params"][e.name] = {{"rel_error", e.rel}, {"max_abs_diff", e.max_abs}};
    write_json_atomic(f.report, j);
  }
  return pass ? kExitOk : kExitCheckFailed;
}

// --reference torch: the (scheduled) step against PyTorch autograd on the same ONNX graph.
int check_against_torch(const Flags& f, const SessionOptions& o) {
  if (!fs::exists(f.script)) fail("--reference-script ", f.script, ": no such file");
  if (access(f.python.c_str(), X_OK) != 0) fail("--python ", f.python, ": not an executable (Debian's python3-torch lives under /usr/bin/python3)");
  const double tolerance = f.tolerance;
  const std::string& python = f.python;
  const std::string& script = f.script;
  const std::string& report = f.report;
  const bool keep = f.keep;
  std::string work_dir = f.work_dir;
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  if (!f.schedule.empty())
    std::printf("schedule %s: mode %s, %zu steps, %d recomputations\n", f.schedule.c_str(),
                s->schedule.schedule.mode.c_str(), s->schedule.schedule.steps.size(), s->predicted.recomputations);

  // One step of our engine, capturing the loss, every parameter gradient and every dropout mask.
  std::set<int> capture = {s->tg.loss};
  for (const ParamSlot& p : s->tg.params) capture.insert(p.grad);
  std::vector<std::pair<const Node*, int>> masks;
  for (int n = 0; n < s->tg.forward_end; ++n)
    if (g.nodes[n].op == "Dropout") {
      masks.emplace_back(&g.nodes[n], g.nodes[n].outputs[1]);
      capture.insert(g.nodes[n].outputs[1]);
    }
  auto got = s->executor->step(capture);

  // The exchange directory for the reference.
  bool temp = work_dir.empty();
  if (temp) {
    std::string tmpl = (fs::temp_directory_path() / "monet-check-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) fail("cannot create a temporary directory");
    work_dir = tmpl;
  } else {
    fs::create_directories(work_dir);
  }
  struct Cleanup {
    std::string dir;
    bool remove;
    ~Cleanup() {
      std::error_code ec;
      if (remove) fs::remove_all(dir, ec);
    }
  } cleanup{work_dir, temp && !keep};

  nlohmann::json manifest = {{"model", fs::absolute(o.model_path).string()},
                             {"dtype", "float64"},
                             {"loss", loss_name(o.train.loss)},
                             {"output", g.values[g.outputs[0]].name}};
  int k = 0;
  for (int v : resident_values(g)) {
    const Value& val = g.values[v];
    if (val.role != Role::input && val.role != Role::param && val.role != Role::buffer) continue;
    std::string file = "t" + std::to_string(k++) + ".npy";
    write_values(work_dir + "/" + file, val, s->initial[v], o.float_bytes);
    manifest["tensors"][val.name] = file;
  }
  if (s->tg.labels >= 0) {
    write_values(work_dir + "/labels.npy", g.values[s->tg.labels], s->initial[s->tg.labels], o.float_bytes);
    manifest["labels"] = "labels.npy";
    manifest["class_axis"] = g.nodes[static_cast<size_t>(s->tg.loss_node)].attrs.i("axis", 1);
  }
  manifest["dropout_masks"] = nlohmann::json::object();
  for (size_t i = 0; i < masks.size(); ++i) {
    std::string file = "mask" + std::to_string(i) + ".npy";
    write_values(work_dir + "/" + file, g.values[masks[i].second], got.at(masks[i].second), o.float_bytes);
    manifest["dropout_masks"][masks[i].first->name] = file;
  }
  manifest["grads"] = nlohmann::json::array();
  for (const ParamSlot& p : s->tg.params) manifest["grads"].push_back(g.values[p.param].name);

  // The reference in float64 is the truth; with the fp32 engine it also runs in float32, and PyTorch's own
  // float32 deviation from float64 measures how much rounding this model and input amplify.
  auto run_reference = [&](const char* dtype) {
    manifest["dtype"] = dtype;
    write_json_atomic(work_dir + "/manifest.json", manifest);
    std::string cmd = shell_quote(python) + " " + shell_quote(script) + " " + shell_quote(work_dir);
    std::printf("reference (%s): %s\n", dtype, cmd.c_str());
    std::fflush(stdout);
    const std::string err_path = work_dir + "/reference.stderr";
    int rc = std::system((cmd + " 2> " + shell_quote(err_path)).c_str());
    if (rc != 0) {
      std::ifstream err(err_path);
      std::string line, last;
      while (std::getline(err, line))
        if (!line.empty()) last = line;
      fail("the reference failed (exit status ", WEXITSTATUS(rc), "): ", last);
    }
    nlohmann::json result = read_json(work_dir + "/result.json");
    Gradients out;
    out.loss = result.at("loss").get<double>();
    for (const ParamSlot& p : s->tg.params) {
      const std::string& name = g.values[p.param].name;
      if (!result["grads"].contains(name)) fail("the reference returned no gradient for '", name, "'");
      out.grads.push_back(npy::as_doubles(npy::read(work_dir + "/" + result["grads"][name].get<std::string>())));
      if (out.grads.back().size() != got.at(p.grad).size())
        fail("gradient of '", name, "': reference has ", out.grads.back().size(), " values, monet ", got.at(p.grad).size());
    }
    return out;
  };
  const bool fp32 = o.float_bytes == 4;
  Gradients ref32;
  if (fp32) ref32 = run_reference("float32");
  const Gradients ref = run_reference("float64");
  Gradients ours;
  ours.loss = got.at(s->tg.loss).at(0);
  for (const ParamSlot& p : s->tg.params) ours.grads.push_back(got.at(p.grad));

  const std::vector<ParamError> errors = compare(ours, ref);
  const double worst = max_error(errors);
  const double loss_rel = std::abs(ours.loss - ref.loss) / std::max(1e-12, std::abs(ref.loss));
  double noise = 0, noise_loss = 0;
  if (fp32) {
    noise = max_error(compare(ref32, ref));
    noise_loss = std::abs(ref32.loss - ref.loss) / std::max(1e-12, std::abs(ref.loss));
  }
  const double allowed = std::max(tolerance, kNoiseFactor * noise);
  const double allowed_loss = std::max(tolerance, kNoiseFactor * noise_loss);

  std::vector<ParamError> sorted = errors;
  for (size_t i = 0; i < sorted.size(); ++i) sorted[i].name = g.values[s->tg.params[i].param].name;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.rel > b.rel; });
  std::printf("%-48s %14s %14s %14s\n", "parameter (worst first)", "rel err", "max abs err", "|grad ref|");
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 8); ++i)
    std::printf("%-48s %14.3e %14.3e %14.3e\n", sorted[i].name.c_str(), sorted[i].rel, sorted[i].max_abs,
                sorted[i].ref_norm);
  const bool pass = worst <= allowed && loss_rel <= allowed_loss;
  std::printf("loss: monet %.9g  reference (float64) %.9g  rel diff %.3e\n", ours.loss, ref.loss, loss_rel);
  if (fp32)
    std::printf("PyTorch's own float32 run vs float64: gradient error %.3e, loss %.3e -> allowed %.3e\n", noise,
                noise_loss, allowed);
  std::printf("%zu parameter gradients, max relative error %.3e (allowed %.3e): %s\n", errors.size(), worst, allowed,
              pass ? "PASS" : "FAIL");
  if (!report.empty()) {
    nlohmann::json j = {{"model", g.model_name},
                        {"batch", g.values[g.data_input].shape[0]},
                        {"input_shape", g.values[g.data_input].shape},
                        {"device", s->backend->name()},
                        {"reference", "torch"},
                        {"schedule", s->schedule.schedule.mode},
                        {"budget_bytes", s->schedule.budget_bytes},
                        {"loss", ours.loss},
                        {"reference_loss", ref.loss},
                        {"loss_rel_diff", loss_rel},
                        {"max_rel_error", worst},
                        {"torch_fp32_rel_error", noise},
                        {"tolerance", tolerance},
                        {"allowed", allowed},
                        {"pass", pass}};
    for (const ParamError& e : sorted)
      j["params"][e.name] = {{"rel_error", e.rel}, {"max_abs_error", e.max_abs}, {"ref_norm", e.ref_norm}};
    write_json_atomic(report, j);
  }
  return pass ? kExitOk : kExitCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"monet-check: compare one training step's loss and gradients with a reference"};
  Flags f;
  f.model.add_to(app);
  app.add_option("--device", f.device, "cpu or cuda");
  app.add_option("--reference", f.reference,
                 "torch: PyTorch autograd on the same ONNX graph (default); store-all: the --schedule against a "
                 "store-all step on its implementations and algorithms, bitwise; cpu (with --device cuda): the CUDA "
                 "step against the CPU engine");
  app.add_option("--schedule", f.schedule, "SCHEDULE.json from monet-solve to run (its batch and input shape apply)");
  app.add_flag("--simulate", f.simulate, "with --schedule: replay it in the simulator only (valid, within its budget)");
  app.add_option("--profile", f.profile,
                 "with --simulate: replay the schedule on this PROFILE.json's plan too (its times and device "
                 "workspaces; the fingerprint must match), and draw --timeline from it");
  app.add_option("--timeline", f.timeline,
                 "with --simulate: draw the memory timeline (bytes in use by kind over the step, the budget line, "
                 "store-all's) as SVG here");
  auto* tolerance_opt = app.add_option("--tolerance", f.tolerance,
                 "torch: max norm-wise relative error of every gradient and of the loss (default 1e-4); cpu: the "
                 "same against the CPU engine in double (default 1e-4 with --math fp32, 1e-2 with --math default: "
                 "TF32); store-all is bitwise and takes none");
  app.add_option("--report", f.report, "write a JSON report here");
  app.add_option("--python", f.python, "Python interpreter with torch and onnx (default /usr/bin/python3)");
  app.add_option("--reference-script", f.script, "path of torch_reference.py");
  app.add_option("--work-dir", f.work_dir, "exchange directory (default: a fresh temporary directory, removed after)");
  app.add_flag("--keep", f.keep, "keep the exchange directory");
  app.add_option("--precision", f.precision, "f32 (the engine as it trains, default) or f64 (CPU backend in double)");
  return app::guarded_main("monet-check", app, argc, argv, [&]() -> int {
    if (f.reference != "torch" && f.reference != "store-all" && f.reference != "cpu")
      fail("--reference '", f.reference, "': expected torch, store-all or cpu");
    if (f.reference == "cpu" && f.device != "cuda") fail("--reference cpu checks --device cuda against the CPU engine");
    if (f.reference == "cpu" && !tolerance_opt->count() && f.model.math == "default") f.tolerance = 1e-2;
    if (f.reference == "store-all" && tolerance_opt->count() && !f.simulate)
      fail("--tolerance: --reference store-all requires the step bitwise equal and takes no tolerance");
    if (!(f.tolerance > 0)) fail("--tolerance must be positive");
    if (f.simulate && f.schedule.empty()) fail("--simulate checks a schedule: give --schedule");
    if (!f.timeline.empty() && !f.simulate) fail("--timeline draws the simulator's replay: give --simulate");
    if (!f.profile.empty() && !f.simulate) fail("--profile replays the schedule in the simulator: give --simulate");
    if (f.reference == "store-all" && f.schedule.empty() && !f.simulate)
      fail("--reference store-all compares a schedule with store-all: give --schedule");
    SessionOptions o = f.model.session_options();
    o.device = f.device;
    o.schedule_path = f.schedule;
    if (f.precision != "f32" && f.precision != "f64") fail("--precision '", f.precision, "': expected f32 or f64");
    if (f.precision == "f64" && f.device != "cpu") fail("--precision f64 runs only on --device cpu");
    o.float_bytes = f.precision == "f64" ? 8 : 4;
    if (f.simulate) return check_by_simulation(f, o);
    if (f.reference == "store-all") return check_against_store_all(f, o);
    if (f.reference == "cpu") return check_against_cpu(f, o);
    return check_against_torch(f, o);
  });
}
