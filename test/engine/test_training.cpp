#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "engine/session.h"
#include "test_paths.h"

using namespace monet;
using namespace monet::test;
using Catch::Matchers::Contains;

namespace {
SessionOptions tiny_options(int float_bytes = 4) {
  SessionOptions o;
  o.model_path = model_path("tiny");
  o.import.batch = 4;
  o.seed = 7;
  o.float_bytes = float_bytes;
  return o;
}
}  // namespace

TEST_CASE("store-all schedule: the arena's measured peak equals the simulator's", "[engine][memory]") {
  for (const char* name : {"tiny", "resnet50", "unet"}) {
    INFO(name);
    SessionOptions o = tiny_options();
    o.model_path = model_path(name);
    o.import.batch = 2;
    if (std::string(name) != "tiny") o.import.input_shape = Shape{3, 32, 32};
    auto s = open_session(o);
    s->executor->step({});
    CHECK(s->executor->arena().peak_bytes() == s->predicted.peak_bytes);
    CHECK(s->executor->reserved_bytes() >= s->predicted.peak_bytes);
    CHECK(s->executor->arena().in_use_bytes() == s->predicted.resident_bytes);  // every transient freed
  }
}

TEST_CASE("training steps reduce the loss on a fixed batch", "[engine]") {
  SessionOptions o = tiny_options();
  o.train.lr = 0.05;
  auto s = open_session(o);
  double first = s->executor->step({s->tg.loss}).at(s->tg.loss)[0];
  double last = first;
  for (int i = 0; i < 20; ++i) last = s->executor->step({s->tg.loss}).at(s->tg.loss)[0];
  CHECK(std::isfinite(last));
  CHECK(last < first);
}

TEST_CASE("float and double engines agree on the gradients", "[engine]") {
  auto f = open_session(tiny_options(4));
  auto d = open_session(tiny_options(8));
  std::set<int> grads;
  for (const ParamSlot& p : f->tg.params) grads.insert(p.grad);
  auto gf = f->executor->step(grads);
  auto gd = d->executor->step(grads);
  for (int v : grads) {
    double diff = 0, ref = 0;
    for (size_t i = 0; i < gd[v].size(); ++i) {
      diff += (gf[v][i] - gd[v][i]) * (gf[v][i] - gd[v][i]);
      ref += gd[v][i] * gd[v][i];
    }
    INFO(f->tg.graph.values[v].name);
    CHECK(std::sqrt(diff) <= 1e-4 * std::sqrt(ref) + 1e-12);
  }
}

TEST_CASE("a schedule that uses a freed value is rejected with its step", "[schedule][errors]") {
  auto s = open_session(tiny_options());
  const Graph& g = s->tg.graph;
  Schedule bad = store_all_schedule(g);
  // Move the first free to the very front: the value is freed before it is computed.
  for (size_t i = 0; i < bad.steps.size(); ++i)
    if (bad.steps[i].kind == Step::Kind::free) {
      Step f = bad.steps[i];
      bad.steps.erase(bad.steps.begin() + static_cast<long>(i));
      bad.steps.insert(bad.steps.begin() + 1, f);
      break;
    }
  auto ws = [](const Node&) { return int64_t{0}; };
  CHECK_THROWS_WITH(simulate(g, bad, ws), Contains("schedule step 1: frees"));
  Schedule late = store_all_schedule(g);
  // Free the data-derived first activation right after it is computed: its reader then fails.
  int first_out = g.nodes[0].outputs[0];
  late.steps.insert(late.steps.begin() + 1, Step{Step::Kind::free, first_out});
  CHECK_THROWS_WITH(simulate(g, late, ws), Contains("already freed"));
}

TEST_CASE("in place: output 0 takes the input's bytes; the input cannot be read or freed afterwards",
          "[schedule][in_place]") {
  auto s = open_session(tiny_options());
  const Graph& g = s->tg.graph;
  auto ws = [](const Node&) { return int64_t{0}; };
  const PlanGraph plan = plan_of(g, ws, 4);
  const Schedule good = store_all_schedule(g);
  // The first in-place step: its input ends there, so store-all frees nothing for it.
  size_t at = 0;
  while (at < good.steps.size() && (good.steps[at].kind != Step::Kind::compute || good.steps[at].in_place < 0)) ++at;
  REQUIRE(at < good.steps.size());
  const Step step = good.steps[at];
  const int x = step.in_place;
  INFO("node " << g.nodes[step.id].name << " over " << g.values[x].name);
  // Out of place instead: the same schedule with x freed after the node needs x's bytes more at that step.
  Schedule plain = good;
  plain.steps[at].in_place = -1;
  plain.steps.insert(plain.steps.begin() + static_cast<long>(at) + 1, Step{Step::Kind::free, x});
  SimResult a = simulate(g, good, ws), b = simulate(g, plain, ws);
  CHECK(a.peak_bytes <= b.peak_bytes);
  CHECK(a.time_ms == b.time_ms);
  // Reading or freeing x afterwards, running in place over a value that is not live or that the node may not
  // overwrite: refused with the step.
  Schedule reread = good;
  reread.steps.insert(reread.steps.begin() + static_cast<long>(at) + 1, Step{Step::Kind::compute, step.id});
  CHECK_THROWS_WITH(simulate(g, reread, ws), Contains("overwritten in place"));
  Schedule refree = good;
  refree.steps.insert(refree.steps.begin() + static_cast<long>(at) + 1, Step{Step::Kind::free, x});
  CHECK_THROWS_WITH(simulate(g, refree, ws), Contains("frees") && Contains("overwritten in place"));
  Schedule twice = good;
  twice.steps.insert(twice.steps.begin() + static_cast<long>(at) + 1, step);
  CHECK_THROWS_WITH(simulate(g, twice, ws), Contains("overwritten in place"));
  Schedule wrong = good;
  wrong.steps[0].in_place = plan.nodes[0].outputs[0];  // the first node over its own output
  CHECK_THROWS_WITH(simulate(g, wrong, ws), Contains("schedule step 0") && Contains("cannot run in place"));
}
