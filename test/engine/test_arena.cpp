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

TEST_CASE("arena offsets do not depend on its capacity", "[arena]") {
  // A random sequence of allocations and releases, replayed in a huge arena and in one sized to the high-water.
  auto replay = [](Arena& a) {
    std::vector<int64_t> offsets, live;
    uint64_t state = 12345;
    auto next = [&] { state = state * 6364136223846793005ULL + 1442695040888963407ULL; return state >> 33; };
    for (int i = 0; i < 2000; ++i) {
      if (!live.empty() && next() % 3 == 0) {
        size_t k = next() % live.size();
        a.release(live[k]);
        live.erase(live.begin() + static_cast<long>(k));
      } else {
        live.push_back(a.allocate(static_cast<int64_t>(1 + next() % 50) * kAlignBytes));
        offsets.push_back(live.back());
      }
    }
    return offsets;
  };
  // A case where the free tail of an exactly-sized arena is a tighter fit than an interior hole.
  auto tight = [](Arena& a) {
    const int64_t u = kAlignBytes;
    int64_t x = a.allocate(10 * u);
    a.allocate(1 * u);
    a.release(a.allocate(5 * u));
    a.release(x);
    int64_t d = a.allocate(5 * u);
    int64_t e = a.allocate(4 * u);
    return std::vector<int64_t>{d, e};
  };
  Arena huge(int64_t{1} << 40);
  std::vector<int64_t> want = tight(huge);
  Arena sized(huge.high_water_bytes());
  CHECK(tight(sized) == want);

  Arena big(int64_t{1} << 40);
  std::vector<int64_t> expected = replay(big);
  Arena exact(big.high_water_bytes());
  CHECK(replay(exact) == expected);
  CHECK(exact.peak_bytes() == big.peak_bytes());
}
