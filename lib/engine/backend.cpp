#include "engine/backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

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

int Backend::copy_begin(void* dst, const void* src, int64_t bytes, CopyLane, bool) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
  return -1;
}

void Backend::copy_wait(int) {}

namespace {
template <class F>
void convert(const TensorRef& t, int float_bytes, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) switch (t.dtype) {
      case DType::f32:
        if (float_bytes == 4) f(t.as<float>()[i], i);
        else f(t.as<double>()[i], i);
        break;
      case DType::i64: f(t.as<int64_t>()[i], i); break;
      case DType::u8: f(t.as<uint8_t>()[i], i); break;
    }
}
}  // namespace

void Backend::write_host(const TensorRef& dst, const std::vector<double>& host) const {
  MONET_CHECK(static_cast<int64_t>(host.size()) == dst.numel());
  convert(dst, float_bytes(), host.size(), [&](auto& x, size_t i) { x = static_cast<std::remove_reference_t<decltype(x)>>(host[i]); });
}

std::vector<double> Backend::read_host(const TensorRef& src) const {
  std::vector<double> host(static_cast<size_t>(src.numel()));
  convert(src, float_bytes(), host.size(), [&](auto& x, size_t i) { host[i] = static_cast<double>(x); });
  return host;
}

}  // namespace monet
