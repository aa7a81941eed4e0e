#include "engine/session.h"

#include "core/error.h"

namespace monet {

std::unique_ptr<Session> open_session(const SessionOptions& o) {
  auto s = std::make_unique<Session>();
  s->tg = build_training_graph(import_onnx(o.model_path, o.import), o.train);
  s->backend = o.device == "cpu" ? make_cpu_backend(o.float_bytes) : make_backend(o.device);
  const Graph& g = s->tg.graph;
  Schedule schedule = store_all_schedule(g);
  Backend& b = *s->backend;
  s->predicted = simulate(g, schedule, [&](const Node& n) { return b.workspace_bytes(g, n); }, b.float_bytes());
  s->executor = std::make_unique<Executor>(g, std::move(schedule), b, o.seed);
  s->initial = initial_values(s->tg, o.seed);
  for (int v : resident_values(g)) s->executor->set_value(v, s->initial[v]);
  return s;
}

}  // namespace monet
