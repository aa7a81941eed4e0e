// monet-check --reference torch (check_against_torch, check.h): scripts/torch_reference.py executes the same ONNX
// graph node by node with torch.nn.functional on the same weights, batch, labels and dropout masks, exchanged as
// .npy files and a manifest in a directory, and PyTorch's autograd takes the gradients.
#include <spdlog/fmt/fmt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "check/check.h"
#include "check/compare.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/npy.h"

namespace monet {

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
  } else {  // u8: a dropout mask, or a bool graph input (both 0/1)
    std::vector<uint8_t> bytes(x.begin(), x.end());
    npy::write(path, v.role == Role::input ? "|b1" : "|u1", v.shape, bytes.data(), static_cast<int64_t>(bytes.size()));
  }
}

}  // namespace

CheckResult check_against_torch(const CheckOptions& options, std::FILE* out) {
  const SessionOptions& o = options.session;
  const double tolerance = options.tolerance;
  const std::string& python = options.python;
  const std::string& script = options.reference_script;
  std::string work_dir = options.work_dir;
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  if (!o.schedule_path.empty())
    std::fprintf(out, "schedule %s: mode %s, %zu steps, %d recomputations\n", o.schedule_path.c_str(),
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
  } cleanup{work_dir, temp && !options.keep_work_dir};

  nlohmann::json manifest = {{"model", fs::absolute(o.model_path).string()},
                             {"dtype", "float64"},
                             {"loss", loss_name(o.train.loss)},
                             {"output", g.values[g.outputs[0]].name}};
  int k = 0;
  for (int v : resident_values(g)) {
    const Value& val = g.values[v];
    if (val.role != Role::input && val.role != Role::param && val.role != Role::buffer) continue;
    const std::string file = fmt::format("t{}.npy", k++);
    write_values(work_dir + "/" + file, val, s->initial[v], o.float_bytes);
    manifest["tensors"][val.name] = file;
  }
  // A buffer given by --input became a constant at import: the reference reads the user's file itself.
  for (const auto& [name, file] : o.import.input_files)
    if (!manifest["tensors"].contains(name)) manifest["tensors"][name] = fs::absolute(file).string();
  if (s->tg.labels >= 0) {
    write_values(work_dir + "/labels.npy", g.values[s->tg.labels], s->initial[s->tg.labels], o.float_bytes);
    manifest["labels"] = "labels.npy";
    manifest["class_axis"] = s->tg.class_axis;
  }
  manifest["dropout_masks"] = nlohmann::json::object();
  for (size_t i = 0; i < masks.size(); ++i) {
    const std::string file = fmt::format("mask{}.npy", i);
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
    std::fprintf(out, "reference (%s): %s\n", dtype, cmd.c_str());
    std::fflush(out);  // before the reference's own output, which goes to our stdout
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
    Gradients grads;
    grads.loss = result.at("loss").get<double>();
    for (const ParamSlot& p : s->tg.params) {
      const std::string& name = g.values[p.param].name;
      if (!result["grads"].contains(name)) fail("the reference returned no gradient for '", name, "'");
      grads.grads.push_back(npy::as_doubles(npy::read(work_dir + "/" + result["grads"][name].get<std::string>())));
      if (grads.grads.back().size() != got.at(p.grad).size())
        fail("gradient of '", name, "': reference has ", grads.grads.back().size(), " values, monet ",
             got.at(p.grad).size());
    }
    return grads;
  };
  const bool fp32 = o.float_bytes == 4;
  Gradients ref32;
  if (fp32) ref32 = run_reference("float32");
  const Gradients ref = run_reference("float64");
  Gradients ours;
  ours.loss = got.at(s->tg.loss).at(0);
  for (const ParamSlot& p : s->tg.params) ours.grads.push_back(got.at(p.grad));

  std::vector<ParamError> errors = compare(ours, ref);
  const double worst = max_error(errors);
  const double loss_rel = std::abs(ours.loss - ref.loss) / std::max(1e-12, std::abs(ref.loss));
  double noise = 0, noise_loss = 0;
  if (fp32) {
    noise = max_error(compare(ref32, ref));
    noise_loss = std::abs(ref32.loss - ref.loss) / std::max(1e-12, std::abs(ref.loss));
  }
  const double allowed = std::max(tolerance, kTorchNoiseFactor * noise);
  const double allowed_loss = std::max(tolerance, kTorchNoiseFactor * noise_loss);

  for (size_t i = 0; i < errors.size(); ++i) errors[i].name = g.values[s->tg.params[i].param].name;
  const std::vector<ParamError> sorted = worst_first(errors);
  std::fprintf(out, "%-48s %14s %14s %14s\n", "parameter (worst first)", "rel err", "max abs err", "|grad ref|");
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 8); ++i)
    std::fprintf(out, "%-48s %14.3e %14.3e %14.3e\n", sorted[i].name.c_str(), sorted[i].rel, sorted[i].max_abs,
                 sorted[i].ref_norm);
  const bool pass = worst <= allowed && loss_rel <= allowed_loss;
  std::fprintf(out, "loss: monet %.9g  reference (float64) %.9g  rel diff %.3e\n", ours.loss, ref.loss, loss_rel);
  if (fp32)
    std::fprintf(out, "PyTorch's own float32 run vs float64: gradient error %.3e, loss %.3e -> allowed %.3e\n", noise,
                 noise_loss, allowed);
  std::fprintf(out, "%zu parameter gradients, max relative error %.3e (allowed %.3e): %s\n", errors.size(), worst,
               allowed, pass ? "PASS" : "FAIL");
  CheckResult result;
  result.pass = pass;
  result.report = {{"model", g.model_name},
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
    result.report["params"][e.name] = {{"rel_error", e.rel}, {"max_abs_error", e.max_abs}, {"ref_norm", e.ref_norm}};
  if (!options.report_path.empty()) write_json_atomic(options.report_path, result.report);
  return result;
}

}  // namespace monet
