// monet-check --reference store-all (check_against_store_all, check.h): the scheduled step against a step of
// store-all on the schedule's implementations and algorithms (a second session from the same seed), bit for bit;
// then, for information, against the lean store-all where that runs other implementations or algorithms.
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <set>

#include "check/check.h"
#include "check/compare.h"
#include "core/json_io.h"

namespace monet {

CheckResult check_against_store_all(const CheckOptions& options, std::FILE* out) {
  const SessionOptions& o = options.session;
  // One session at a time: the scheduled step runs and its arena is released before store-all's is reserved.
  auto s = open_session(o);
  const Graph& g = s->tg.graph;
  const std::string mode = s->schedule.schedule.mode;
  std::fprintf(out, "model %s  input %s  device %s  loss %s\n", g.model_name.c_str(),
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
    Gradients grads;
    grads.loss = values.at(s->tg.loss).at(0);
    for (const ParamSlot& p : s->tg.params) grads.grads.push_back(values.at(p.grad));
    return grads;
  };
  const auto got = one_step(*s);
  const Gradients ours = gradients(got);

  SessionOptions same = o;
  same.store_all_like_schedule = true;
  auto r = open_session(same);
  std::fprintf(out,
               "schedule %s: mode %s, %zu steps, %d recomputations, peak %s bytes; store-all on its implementations: "
               "peak %s bytes\n",
               o.schedule_path.c_str(), mode.c_str(), s->schedule.schedule.steps.size(), s->predicted.recomputations,
               with_commas(s->predicted.peak_bytes).c_str(), with_commas(r->predicted.peak_bytes).c_str());
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

  const std::vector<ParamError> sorted = worst_first(errors);
  std::fprintf(out, "%-48s %14s %14s %14s\n", "parameter (worst first)", "rel diff", "max abs diff",
               "|grad store-all|");
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 8); ++i)
    std::fprintf(out, "%-48s %14.3e %14.3e %14.3e\n", sorted[i].name.c_str(), sorted[i].rel, sorted[i].max_abs,
                 sorted[i].ref_norm);
  std::fprintf(out, "loss: scheduled %.9g  store-all %.9g  abs diff %.3e\n", ours.loss, theirs.loss, loss_abs);
  std::fprintf(out, "%zu parameter gradients: max abs diff %.3e, max rel diff %.3e\n", errors.size(), worst_abs,
               worst_rel);
  std::fprintf(out, "state after the step (%zu values, %d BatchNorm statistics): %s\n", state.size(), buffers,
               state_diffs.empty() ? "bitwise equal" : ("DIFFERENT: " + state_diffs.front()).c_str());
  const bool pass = grads_bitwise && state_diffs.empty();
  std::fprintf(out, "mode %s computes every value with the same kernel as store-all on its implementations: %s\n",
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
    apply_import_mode(lean.import, s->schedule.import);
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
      std::fprintf(out, "the lean store-all runs the same implementations and algorithms\n");
      l->executor.reset();
    } else {
      const Gradients lean_grads = gradients(one_step(*l));
      const double rel = max_error(compare(ours, lean_grads));
      const double labs = std::abs(ours.loss - lean_grads.loss);
      std::fprintf(out,
                   "against the lean store-all (%d nodes on other implementations or algorithms): max rel diff %.3e, "
                   "loss abs diff %.3e (rounding of other kernels; information)\n",
                   differing, rel, labs);
      lean_json = {{"differing_nodes", differing}, {"max_rel_diff", rel}, {"loss_abs_diff", labs}};
    }
  }
  CheckResult result;
  result.pass = pass;
  result.report = {{"model", g.model_name},
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
  for (const ParamError& e : sorted)
    result.report["params"][e.name] = {{"rel_diff", e.rel}, {"max_abs_diff", e.max_abs}};
  if (!options.report_path.empty()) write_json_atomic(options.report_path, result.report);
  return result;
}

}  // namespace monet
