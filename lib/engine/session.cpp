#include "engine/session.h"

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "ir/import_mode.h"
#include "profile/profile.h"

namespace monet {

StoreAll parse_store_all(const std::string& text) {
  if (text == "fast") return StoreAll::fast;
  if (text == "lean") return StoreAll::lean;
  if (text == "default") return StoreAll::defaults;
  fail("--store-all '", text, "': expected fast, lean or default");
}

const char* store_all_name(StoreAll s) {
  return s == StoreAll::fast ? "fast" : s == StoreAll::lean ? "lean" : "default";
}

namespace {

// What stays allocated for the whole run beside any workspace: the resident values (Backend::limit_workspace).
int64_t resident_bytes_of(const Graph& g, int float_bytes) {
  int64_t total = 0;
  for (int v : resident_values(g)) total += tensor_bytes(g.values[v].shape, g.values[v].dtype, float_bytes);
  return total;
}

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

// The store-all of options.store_all on m's plan, or, with a profile (o.profile_path, read), on the profile's plan
// (its times, and a CUDA profile's algorithms, choose), run on the backend: steps name op implementations and
// algorithms, so the plan on the backend is remade with their workspaces.
Schedule store_all_of(const SessionOptions& o, const std::optional<Profile>& read, ScheduledModel& m,
                      const Backend& b) {
  if (o.store_all == StoreAll::defaults) {
    if (read) fail("--profile chooses the fast or the lean store-all's implementations: not with --store-all default");
    return store_all_schedule(m.plan);
  }
  if (!read) return o.store_all == StoreAll::fast ? fast_store_all_schedule(m.plan) : lean_store_all_schedule(m.plan);
  const Profile& profile = *read;
  if (profile.plan.fingerprint != m.plan.fingerprint)
    fail(o.profile_path, ": a profile of another model, batch, input shape, loss or training graph (", profile.model,
         " ", shape_str(profile.input_shape), ", loss ", profile.loss, ", fingerprint ", profile.plan.fingerprint,
         "; this run: ", m.tg.graph.model_name, " ", shape_str(m.tg.graph.values[m.tg.graph.data_input].shape),
         ", loss ", loss_name(m.tg.options.loss), ", fingerprint ", m.plan.fingerprint, ")");
  // One fingerprint, one graph: the profile's node and value ids are the model's.
  const Schedule s = o.store_all == StoreAll::fast ? fast_store_all_schedule(profile.plan)
                                                   : lean_store_all_schedule(profile.plan);
  const std::vector<int> algo = algorithms_of(m.tg.graph, s);
  if (std::any_of(algo.begin(), algo.end(), [](int a) { return a >= 0; })) m.plan = plan_on(m.tg, b, algo);
  return s;
}

// The import a profile's or schedule's file (`what`, at `path`) records; an explicit --attention, --loss-head,
// --concat-conv, --bn-activation or --identity-dropout must agree.
void import_as_file(ImportOptions& import, const ImportMode& mode, const SessionOptions& o, const char* what,
                    const std::string& path) {
  if (o.attention_given) require_recorded_mode("attention", import_attention_mode(import), mode.attention, what, path);
  if (o.loss_head_given) require_recorded_mode("loss-head", import_loss_head_mode(import), mode.loss_head, what, path);
  if (o.concat_conv_given)
    require_recorded_mode("concat-conv", import_concat_conv_mode(import), mode.concat_conv, what, path);
  if (o.bn_activation_given)
    require_recorded_mode("bn-activation", import_bn_activation_mode(import), mode.bn_activation, what, path);
  if (o.identity_dropout_given)
    require_recorded_mode("identity-dropout", import_identity_dropout_mode(import), mode.identity_dropout, what,
                          path);
  apply_import_mode(import, mode);
}

}  // namespace

ScheduledModel load_scheduled_model(const SessionOptions& o, Backend& b) {
  ScheduledModel m;
  if (o.schedule_path.empty()) {
    // A profile that chooses the store-all's implementations names the graph: import as it was imported.
    ImportOptions import = o.import;
    std::optional<Profile> profile;
    if (!o.profile_path.empty()) {
      profile = read_profile(o.profile_path);
      import_as_file(import, profile->import, o, "profile", o.profile_path);
    }
    m.tg = build_training_graph(import_onnx(o.model_path, import), o.train);
    b.limit_workspace(0, resident_bytes_of(m.tg.graph, b.float_bytes()));
    m.plan = plan_on(m.tg, b);
    const Graph& g = m.tg.graph;
    m.file.fingerprint = m.plan.fingerprint;
    m.file.model = g.model_name;
    m.file.input_shape = g.values[g.data_input].shape;
    m.file.import = import_mode_of(g);
    m.file.batch = m.file.input_shape[0];
    m.file.schedule = store_all_of(o, profile, m, b);
    m.predicted = simulate(m.plan, m.file.schedule);
    // On the profile's times, the step a schedule file of this store-all would predict (monet-run reports it).
    if (profile) m.file.predicted = {{"step_ms", simulate(profile->plan, m.file.schedule).time_ms}};
    return m;
  }
  if (!o.profile_path.empty()) fail("--profile chooses a store-all's implementations: not with --schedule");

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
  import_as_file(import, header.import, o, "schedule", path);

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
  // The algorithms the backend chooses itself fit what the budget leaves beside the resident values.
  b.limit_workspace(header.budget_bytes, resident_bytes_of(m.tg.graph, b.float_bytes()));
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
