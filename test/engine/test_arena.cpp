#include <catch2/catch.hpp>

#include "core/error.h"
#include "engine/arena.h"
#include "ir/graph.h"

using namespace monet;

TEST_CASE("arena places, frees, coalesces and counts the peak", "[arena]") {
  Arena a(10 * kAlignBytes);
  int64_t x = a.allocate(1);                 // rounds up to one unit
  int64_t y = a.allocate(3 * kAlignBytes);
  int64_t z = a.allocate(2 * kAlignBytes);
  CHECK(a.in_use_bytes() == 6 * kAlignBytes);
  a.release(y);
  CHECK(a.in_use_bytes() == 3 * kAlignBytes);
  CHECK(a.allocate(2 * kAlignBytes) == y);   // best fit: the 3-unit hole, not the 4-unit tail
  a.release(x);
  a.release(z);
  CHECK(a.peak_bytes() == 6 * kAlignBytes);
  CHECK_THROWS_AS(a.allocate(9 * kAlignBytes), Error);
  CHECK(a.allocate(7 * kAlignBytes) >= 0);   // holes merged around the 2-unit block
  CHECK(a.high_water_bytes() <= 10 * kAlignBytes);
}
