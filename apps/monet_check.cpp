// monet-check: one training step of monet's engine against a reference that monet did not write. With
// --reference torch, scripts/torch_reference.py executes the same ONNX graph node by node with
// torch.nn.functional (in double) on the same weights, batch, labels and dropout masks, and PyTorch's autograd
// takes the gradients. Reports the loss difference and each parameter's norm-wise relative gradient error.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common.h"
#include "core/json_io.h"
#include "core/npy.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"monet-check: compare one training step's loss and gradients with a reference"};
  app::ModelFlags flags;
  flags.add_to(app);
  std::string device = "cpu", reference = "torch", report, python = "/usr/bin/python3", work_dir;
  std::string script = std::string(MONET_SOURCE_DIR) + "/scripts/torch_reference.py";
  double tolerance = 1e-4;
  bool keep = false;
  std::string precision = "f32";
  app.add_option("--device", device, "cpu (cuda: not yet implemented)");
  app.add_option("--reference", reference, "torch: PyTorch autograd on the same ONNX graph (default)");
  app.add_option("--tolerance", tolerance, "max norm-wise relative error of every gradient and of the loss (default 1e-4)");
  app.add_option("--report", report, "write a JSON report here");
  app.add_option("--python", python, "Python interpreter with torch and onnx (default /usr/bin/python3)");
  app.add_option("--reference-script", script, "path of torch_reference.py");
  app.add_option("--work-dir", work_dir, "exchange directory (default: a fresh temporary directory, removed after)");
  app.add_flag("--keep", keep, "keep the exchange directory");
  app.add_option("--precision", precision, "f32 (the engine as it trains, default) or f64 (CPU backend in double)");
  return app::guarded_main("monet-check", app, argc, argv, [&]() -> int {
    if (reference != "torch") fail("--reference '", reference, "': only 'torch' is available (store-all needs --schedule, not yet implemented)");
    if (!(tolerance > 0)) fail("--tolerance must be positive");
    if (!fs::exists(script)) fail("--reference-script ", script, ": no such file");
    if (access(python.c_str(), X_OK) != 0) fail("--python ", python, ": not an executable (Debian's python3-torch lives under /usr/bin/python3)");
    SessionOptions o = flags.session_options();
    o.device = device;
    if (precision != "f32" && precision != "f64") fail("--precision '", precision, "': expected f32 or f64");
    if (precision == "f64" && device != "cpu") fail("--precision f64 runs only on --device cpu");
    o.float_bytes = precision == "f64" ? 8 : 4;
    auto s = open_session(o);
    const Graph& g = s->tg.graph;

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
  });
}
