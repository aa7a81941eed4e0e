// The arena: one reservation, every tensor and workspace at an explicit offset inside it. It counts the exact
// bytes in use, so its peak can be compared byte for byte with the simulator's prediction.
#pragma once

#include <cstdint>
#include <map>

namespace monet {

class Arena {
 public:
  explicit Arena(int64_t capacity_bytes);
  // Best-fit placement (smallest interior hole that fits, lowest offset on ties; the free tail last). The offsets
  // depend only on the sequence of calls, not on the capacity: a dry run in a large arena gives the high-water
  // mark and the same offsets as the real run. Sizes are rounded up to kAlignBytes. Throws if nothing fits.
  int64_t allocate(int64_t bytes);
  void release(int64_t offset);

  int64_t capacity_bytes() const { return capacity_; }
  int64_t in_use_bytes() const { return in_use_; }
  int64_t peak_bytes() const { return peak_; }              // max of in_use_bytes over the arena's life
  int64_t high_water_bytes() const { return high_water_; }  // max offset + size (>= peak when fragmented)
  void reset_peak() { peak_ = in_use_; }

 private:
  int64_t capacity_;
  std::map<int64_t, int64_t> holes_;  // offset -> size
  std::map<int64_t, int64_t> used_;   // offset -> size
  int64_t in_use_ = 0, peak_ = 0, high_water_ = 0;
};

}  // namespace monet
