// What the import tests check of two imports of one model that compute the same function: one training step each
// from the file's parameters gives the same loss and parameter gradients to float rounding.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "engine/session.h"

namespace monet::test {

// Loss within 1e-6 of b's (relative), every gradient within 1e-5 of the larger of its scale and 1e-3; the
// parameters of the two graphs in the same order under the same names.
inline void check_same_step(Session& a, Session& b) {
  auto capture = [](const Session& s) {
    std::set<int> c = {s.tg.loss};
    for (const ParamSlot& p : s.tg.params) c.insert(p.grad);
    return c;
  };
  const auto got_a = a.executor->step(capture(a));
  const auto got_b = b.executor->step(capture(b));
  const double loss = got_b.at(b.tg.loss).at(0);
  CHECK(std::abs(got_a.at(a.tg.loss).at(0) - loss) <= 1e-6 * std::abs(loss));
  REQUIRE(a.tg.params.size() == b.tg.params.size());
  for (size_t i = 0; i < a.tg.params.size(); ++i) {
    const std::string& name = a.tg.graph.values[a.tg.params[i].param].name;
    INFO("gradient of " << name);
    REQUIRE(b.tg.graph.values[b.tg.params[i].param].name == name);
    const std::vector<double>&ga = got_a.at(a.tg.params[i].grad), &gb = got_b.at(b.tg.params[i].grad);
    REQUIRE(ga.size() == gb.size());
    double worst = 0, scale = 0;
    for (size_t j = 0; j < ga.size(); ++j) {
      worst = std::max(worst, std::abs(ga[j] - gb[j]));
      scale = std::max(scale, std::abs(gb[j]));
    }
    CHECK(worst <= 1e-5 * std::max(scale, 1e-3));
  }
}

}  // namespace monet::test
