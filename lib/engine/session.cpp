#include "engine/session.h"

#include <filesystem>

#include "core/error.h"

namespace monet {

namespace {

// algo (per node, optional): the algorithm each node runs (its workspace is that algorithm's).
PlanGraph plan_on(const TrainingGraph& tg, const Backend& b, const std::vector<int>& algo = {}) {
  return make_plan_graph(tg, workspace_with(b, tg.graph, algo), b.float_bytes());
}

// C,H,W as --input-shape takes it.
std::string dims_str(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out;
}

LossKind other_loss(LossKind k) { return k == LossKind::sum ? LossKind::cross_entropy : LossKind::sum; }
const char* loss_flag(LossKind k) { return k == LossKind::sum ? "sum" : "ce"; }

// Why a schedule's fingerprint differs from the model's, as far as the file's metadata tells.
std::string mismatch_reason(const ScheduleFile& f, const TrainingGraph& tg, const Graph& forward,
                            const TrainOptions& train) {
  const Graph& g = tg.graph;
  const Shape& input = g.values[g.data_input].shape;
  if (f.model != g.model_name)
    return "the schedule is for model '" + f.model + "', this is '" + g.model_name + "' (fingerprint mismatch)";
  if (f.input_shape != input)
    return "the schedule is for input " + shape_str(f.input_shape) + ", the model imports as " + shape_str(input) +
           " (fingerprint mismatch)";
  TrainOptions other = train;
  other.loss = other_loss(train.loss);
  if (fingerprint(build_training_graph(forward, other)) == f.fingerprint)
    return std::string("the schedule was solved with --loss ") + loss_flag(other.loss) + ", this run uses --loss " +
           loss_flag(train.loss);
  return "fingerprint mismatch: the schedule was solved for another graph than " + g.model_name + " at input " +
         shape_str(input) + " with --loss " + loss_flag(train.loss) + " (fingerprint " + f.fingerprint +
         ", this one " + fingerprint(tg) + ")";
}

}  // namespace

ScheduledModel load_scheduled_model(const SessionOptions& o, const Backend& b) {
  ScheduledModel m;
  if (o.schedule_path.empty()) {
    m.tg = build_training_graph(import_onnx(o.model_path, o.import), o.train);
    m.plan = plan_on(m.tg, b);
    const Graph& g = m.tg.graph;
    m.file.fingerprint = m.plan.fingerprint;
    m.file.model = g.model_name;
    m.file.input_shape = g.values[g.data_input].shape;
    m.file.batch = m.file.input_shape[0];
    m.file.schedule = o.default_store_all ? store_all_schedule(m.plan) : lean_store_all_schedule(m.plan);
    m.predicted = simulate(m.plan, m.file.schedule);
    return m;
  }

  const std::string& path = o.schedule_path;
  const nlohmann::json j = read_schedule_json(path);
  const ScheduleFile header = schedule_header_from_json(j, path);
  const Shape chw(header.input_shape.begin() + 1, header.input_shape.end());
  ImportOptions import = o.import;
  if (import.batch && *import.batch != header.batch)
    fail("--batch ", *import.batch, " differs from the schedule's batch ", header.batch, " (", path,
         "); omit --batch to use the schedule's");
  if (import.input_shape && *import.input_shape != chw)
    fail("--input-shape ", dims_str(*import.input_shape), " differs from the schedule's ", dims_str(chw), " (", path,
         "); omit --input-shape to use the schedule's");
  import.batch = header.batch;
  import.input_shape = chw;

  Graph forward;
  try {
    forward = import_onnx(o.model_path, import);
  } catch (const Error& e) {
    // A schedule of another model imposes its input shape, which may not fit this one: say so first.
    const std::string stem = std::filesystem::path(o.model_path).stem().string();
    std::error_code ec;
    if (header.model != stem && std::filesystem::exists(o.model_path, ec))
      fail(path, ": the schedule is for model '", header.model, "', this is '", stem, "' (", e.what(), ")");
    throw;
  }
  m.tg = build_training_graph(forward, o.train);
  m.plan = plan_on(m.tg, b);
  if (m.plan.fingerprint != header.fingerprint) fail(path, ": ", mismatch_reason(header, m.tg, forward, o.train));
  m.file = schedule_from_json(j, m.plan, path);
  try {
    // With algorithms (a schedule solved from a CUDA profile), the plan on this backend takes their workspaces.
    const std::vector<int> algo = algorithms_of(m.tg.graph, m.file.schedule);
    if (std::any_of(algo.begin(), algo.end(), [](int a) { return a >= 0; })) m.plan = plan_on(m.tg, b, algo);
    if (o.store_all_like_schedule) {
      m.file.schedule = store_all_like(m.plan, m.file.schedule);
      m.file.budget_bytes = 0;
    }
    m.predicted = simulate(m.plan, m.file.schedule);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  return m;
}

std::unique_ptr<Session> open_session(const SessionOptions& o) {
  auto s = std::make_unique<Session>();
  s->backend = o.device == "cpu" ? make_cpu_backend(o.float_bytes) : make_backend(o.device, o.math);
  ScheduledModel m = load_scheduled_model(o, *s->backend);
  s->tg = std::move(m.tg);
  s->plan = std::move(m.plan);
  s->schedule = std::move(m.file);
  s->predicted = m.predicted;
  const Graph& g = s->tg.graph;
  s->executor = std::make_unique<Executor>(g, s->schedule.schedule, *s->backend, o.seed);
  s->initial = initial_values(s->tg, o.seed);
  for (int v : resident_values(g)) s->executor->set_value(v, s->initial[v]);
  return s;
}

}  // namespace monet
