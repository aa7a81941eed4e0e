#include "engine/arena.h"

#include "core/error.h"
#include "ir/graph.h"

namespace monet {

Arena::Arena(int64_t capacity_bytes) : capacity_(capacity_bytes) {
  if (capacity_ > 0) holes_[0] = capacity_;
}

int64_t Arena::allocate(int64_t bytes) {
  bytes = align_up(std::max<int64_t>(bytes, 1));
  // Best fit among the interior holes; the tail hole (which ends at the capacity) only when none fits, so that
  // the placement does not depend on the capacity: a dry run in a huge arena predicts the real one exactly.
  auto best = holes_.end();
  for (auto it = holes_.begin(); it != holes_.end(); ++it) {
    if (it->first + it->second == capacity_) continue;
    if (it->second >= bytes && (best == holes_.end() || it->second < best->second)) best = it;
  }
  if (best == holes_.end() && !holes_.empty()) {
    auto tail = std::prev(holes_.end());
    if (tail->first + tail->second == capacity_ && tail->second >= bytes) best = tail;
  }
  if (best == holes_.end())
    fail("arena: no room for ", bytes, " bytes (", in_use_, " of ", capacity_, " bytes in use)");
  int64_t offset = best->first, hole = best->second;
  holes_.erase(best);
  if (hole > bytes) holes_[offset + bytes] = hole - bytes;
  used_[offset] = bytes;
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  high_water_ = std::max(high_water_, offset + bytes);
  return offset;
}

void Arena::release(int64_t offset) {
  auto it = used_.find(offset);
  MONET_CHECK(it != used_.end(), "arena: release of unknown offset ", offset);
  int64_t size = it->second;
  used_.erase(it);
  in_use_ -= size;
  // Merge with the neighbouring holes.
  auto next = holes_.lower_bound(offset);
  if (next != holes_.end() && next->first == offset + size) {
    size += next->second;
    next = holes_.erase(next);
  }
  if (next != holes_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  holes_[offset] = size;
}

}  // namespace monet
