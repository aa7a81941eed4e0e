#include "engine/backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/units.h"

namespace monet {

void* Backend::reserve_host(int64_t bytes) {
  void* p = std::aligned_alloc(kAlignBytes, static_cast<size_t>(align_up(std::max<int64_t>(bytes, 1))));
  if (!p)
    throw OutOfMemory("out of memory: the host arena of offloaded values needs " + format_bytes(bytes) +
                      " and the host could not reserve them (a larger budget offloads less)");
  return p;
}

void Backend::unreserve_host(void* block) { std::free(block); }

int Backend::copy_begin(void* dst, const void* src, int64_t bytes, bool) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
  return -1;
}

void Backend::copy_wait(int) {}

}  // namespace monet
