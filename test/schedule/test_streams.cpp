// The step of an offloading schedule on the engine's three streams (schedule/streams.h), against times worked out
// by hand: the copies to the host start after their value's writer and queue behind each other, the copies back
// start at their prefetch step behind the ones issued before, and the compute stream waits where a copy has not
// ended when its value is read or its device block released.
#include <catch2/catch.hpp>

#include "schedule/schedule.h"
#include "schedule/streams.h"
#include "solve/tiny_plans.h"

using namespace monet;
using Catch::Matchers::Contains;

namespace {

// x, w resident; f0: x -> a (3 units), f1: a -> b (2 units), loss: b -> l, gb: l, b -> db, ga: db, a -> da,
// update: w, da. Node times 2, 2, 1, 1, 3, 1 ms; a unit is kAlignBytes, which the link below moves in 1 ms.
PlanGraph chain() {
  test::PlanBuilder pb;
  const int x = pb.value("x", 1, true), w = pb.value("w", 1, true);
  const int a = pb.value("a", 3, false), b = pb.value("b", 2, false), l = pb.value("l", 1, false);
  const int db = pb.value("db", 2, false), da = pb.value("da", 3, false);
  pb.node("f0", Stage::forward, {x}, {a}, 2);
  pb.node("f1", Stage::forward, {a}, {b}, 2);
  pb.node("loss", Stage::loss, {b}, {l}, 1);
  pb.node("gb", Stage::backward, {l, b}, {db}, 1);
  pb.node("ga", Stage::backward, {db, a}, {da}, 3);
  pb.node("update", Stage::update, {w, da}, {}, 1);
  return pb.plan;
}

Step compute(int node) { return {Step::Kind::compute, node}; }
Step move(Step::Kind kind, int value) { return {kind, value}; }

HostLink unit_per_ms() { return host_link_from_flag(kAlignBytes * 1e-6); }

constexpr int a = 2, b = 3, l = 4, db = 5, da = 6;

}  // namespace

TEST_CASE("one value to the host and back: the compute stream waits where the copies have not ended", "[streams]") {
  const PlanGraph p = chain();
  Schedule s;
  s.mode = "checkpoint";
  // a's copy out runs 2..5 (after f0); its offload step comes at 4 (after f1): a wait of 1. Its copy back is
  // issued after the loss (6) and ends at 9; ga would start at 7: a wait of 2.
  s.steps = {compute(0), compute(1), move(Step::Kind::offload, a), compute(2), move(Step::Kind::prefetch, a),
             compute(3), move(Step::Kind::free, l), move(Step::Kind::free, b), compute(4),
             move(Step::Kind::free, db), move(Step::Kind::free, a), compute(5), move(Step::Kind::free, da)};
  REQUIRE(simulate(p, s).transfers == 2);
  const StreamTimes t = time_streams(p, s, unit_per_ms());
  CHECK(t.compute_ms == Approx(10));
  CHECK(t.step_ms == Approx(13));
  CHECK(t.wait_ms == Approx(3));
  CHECK(t.wait_to_host_ms == Approx(1));
  CHECK(t.wait_to_device_ms == Approx(2));
  CHECK(t.to_host_busy_ms == Approx(3));
  CHECK(t.to_device_busy_ms == Approx(3));
}

namespace {

// a and b out after the forward pass, both back before gb (which reads b; ga reads a), a's copy back issued first.
Schedule both_out_both_in() {
  Schedule s;
  s.mode = "checkpoint";
  s.steps = {compute(0), compute(1), move(Step::Kind::offload, a), compute(2), move(Step::Kind::offload, b),
             move(Step::Kind::prefetch, a), move(Step::Kind::prefetch, b), compute(3), move(Step::Kind::free, l),
             move(Step::Kind::free, b), compute(4), move(Step::Kind::free, db), move(Step::Kind::free, a), compute(5),
             move(Step::Kind::free, da)};
  return s;
}

}  // namespace

TEST_CASE("copies on one stream queue in the order they are issued", "[streams]") {
  const PlanGraph p = chain();
  Schedule s = both_out_both_in();
  // Out: a 2..5, b queued behind it 5..7 (issued at 4). In: a 7..10, then b behind it 10..12, though gb reads b
  // first: gb waits from 7 to 12.
  REQUIRE(simulate(p, s).transfers == 4);
  const StreamTimes t = time_streams(p, s, unit_per_ms());
  CHECK(t.compute_ms == Approx(10));
  CHECK(t.wait_to_host_ms == Approx(2));    // 4 -> 5 for a, 6 -> 7 for b
  CHECK(t.wait_to_device_ms == Approx(5));  // 7 -> 12 for b
  CHECK(t.step_ms == Approx(17));
  // Issued the other way round, b is back at 9 and a at 12, when ga (from 10) needs it: waits of 2 and 2.
  std::swap(s.steps[5], s.steps[6]);
  const StreamTimes u = time_streams(p, s, unit_per_ms());
  CHECK(u.wait_to_device_ms == Approx(4));
  CHECK(u.step_ms == Approx(16));
}

TEST_CASE("copies in pieces by deadline: a copy needed first waits behind one piece, not the whole copy before it",
          "[streams]") {
  const PlanGraph p = chain();
  Schedule s = both_out_both_in();
  // The schedule of the test above (each copy whole: 17 ms), with pieces of one unit (1 ms). Out: a's pieces at
  // steps 1 (two, 2..4: the stream busy to f1's end) and 2 (its offload waits 4 -> 5), b's at 3 (5..6: to the
  // loss's end) and 4 (6..7, its offload waits 6 -> 7). In: one piece of a at step 6 (7..8: the stream idle), b's
  // two at gb's step, which waits 7 -> 10, one more of a (10..11: to gb's end), a's last at ga's step (11..12, a
  // wait 11 -> 12). 16 ms.
  s.copy_plan = plan_copies(p, s, unit_per_ms(), kAlignBytes);
  const std::vector<CopyChunk> want = {{1, 2, 0, 3}, {1, 2, 1, 3}, {2, 2, 2, 3}, {3, 4, 0, 2}, {4, 4, 1, 2},
                                       {6, 5, 0, 3}, {7, 6, 0, 2}, {7, 6, 1, 2}, {7, 5, 1, 3}, {10, 5, 2, 3}};
  CHECK(s.copy_plan == want);
  const StreamTimes t = time_streams(p, s, unit_per_ms());
  CHECK(t.wait_to_host_ms == Approx(2));
  CHECK(t.wait_to_device_ms == Approx(4));
  CHECK(t.step_ms == Approx(16));
  CHECK(t.to_host_busy_ms == Approx(5));
  CHECK(t.to_device_busy_ms == Approx(5));
  // Pieces larger than every value: each copy whole, by deadline: b's copy back at gb's step behind a's (7..10,
  // 10..12), as when issued at the prefetch steps.
  Schedule whole = s;
  whole.copy_plan = plan_copies(p, s, unit_per_ms(), 100 * kAlignBytes);
  for (const CopyChunk& c : whole.copy_plan) CHECK(c.parts == 1);
  CHECK(time_streams(p, whole, unit_per_ms()).step_ms == Approx(17));

  // Plans the engine refuses: a piece before its value is written, one after the step that waits for it, a copy
  // not issued in full, pieces out of order.
  Schedule bad = s;
  bad.copy_plan[0].at = 0;
  CHECK_THROWS_WITH(time_streams(p, bad, unit_per_ms()), Contains("outside steps 1 to 2"));
  bad = s;
  bad.copy_plan.back().at = 11;
  CHECK_THROWS_WITH(time_streams(p, bad, unit_per_ms()), Contains("outside steps 6 to 10"));
  bad = s;
  bad.copy_plan.pop_back();
  CHECK_THROWS_WITH(time_streams(p, bad, unit_per_ms()), Contains("the copy of step 5 is issued in 2 of its 3 parts"));
  bad = s;
  std::swap(bad.copy_plan[0], bad.copy_plan[1]);
  CHECK_THROWS_WITH(time_streams(p, bad, unit_per_ms()), Contains("part 1 of 3 of the copy of step 2, where part 0"));
  bad = s;
  std::swap(bad.copy_plan[2], bad.copy_plan[3]);
  CHECK_THROWS_WITH(time_streams(p, bad, unit_per_ms()), Contains("issued at step 2, after an entry issued at step 3"));
}

TEST_CASE("without copies the streams' step is the simulator's time", "[streams]") {
  const PlanGraph p = chain();
  const Schedule s = lean_store_all_schedule(p);
  const StreamTimes t = time_streams(p, s, unit_per_ms());
  CHECK(t.step_ms == Approx(simulate(p, s).time_ms));
  CHECK(t.wait_ms == 0);
  CHECK(t.to_host_busy_ms == 0);
}

TEST_CASE("the optimizer state's copies to the device do not queue behind the activations'", "[streams]") {
  // f0: x, w0 -> a (3 units); f1: a, w1 -> b; loss; gb: l, b, w1 -> db, dw1; update1: w1, dw1, m1 (m1: momentum,
  // at home on the host); ga: db, a -> dw0; update0: w0, dw0. Times 2, 2, 1, 1, 1, 3, 1 ms.
  test::PlanBuilder pb;
  const int x = pb.value("x", 1, true), w0 = pb.value("w0", 1, true), w1 = pb.value("w1", 1, true);
  const int m1 = pb.value("m1", 1, true);
  const int va = pb.value("a", 3, false), vb = pb.value("b", 2, false), vl = pb.value("l", 1, false);
  const int vdb = pb.value("db", 2, false), dw1 = pb.value("dw1", 1, false), dw0 = pb.value("dw0", 1, false);
  pb.node("f0", Stage::forward, {x, w0}, {va}, 2);
  pb.node("f1", Stage::forward, {va, w1}, {vb}, 2);
  pb.node("loss", Stage::loss, {vb}, {vl}, 1);
  pb.node("gb", Stage::backward, {vl, vb, w1}, {vdb, dw1}, 1);
  pb.node("update1", Stage::update, {w1, dw1, m1}, {}, 1);
  pb.node("ga", Stage::backward, {vdb, va}, {dw0}, 3);
  pb.node("update0", Stage::update, {w0, dw0}, {}, 1);
  const PlanGraph& p = pb.plan;
  Schedule s;
  s.mode = "checkpoint";
  s.on_host = {m1};
  // a out 2..5 (its offload at 4 waits 1); a back 6..9 on the activations' stream, m1 back 6..7 on the state's:
  // update1 runs 7..8 without waiting (behind a's copy it would wait for 9..10), m1 out 8..9 (its offload waits
  // 1); ga 9..12 finds a back; update0 12..13.
  s.steps = {compute(0),
             compute(1),
             move(Step::Kind::offload, va),
             compute(2),
             move(Step::Kind::prefetch, va),
             move(Step::Kind::prefetch, m1),
             compute(3),
             move(Step::Kind::free, vl),
             move(Step::Kind::free, vb),
             compute(4),
             move(Step::Kind::offload, m1),
             move(Step::Kind::free, dw1),
             compute(5),
             move(Step::Kind::free, vdb),
             move(Step::Kind::free, va),
             compute(6),
             move(Step::Kind::free, dw0)};
  REQUIRE(simulate(p, s).transfers == 4);
  const StreamTimes t = time_streams(p, s, unit_per_ms());
  CHECK(t.compute_ms == Approx(11));
  CHECK(t.wait_to_device_ms == Approx(0));
  CHECK(t.wait_to_host_ms == Approx(2));
  CHECK(t.step_ms == Approx(13));
}
