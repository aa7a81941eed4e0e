// The CUDA emulation's runtime (emu.h): one block at a time, its threads as ucontext fibers. The scheduler runs
// every fiber that is not waiting until it waits at a barrier or ends, then releases each barrier whose threads
// have all arrived (a block barrier: every thread of the block not yet ended; a warp barrier: every such thread of
// the warp), and repeats. Where nothing can be released the block is stuck (threads at different barriers, which
// on a GPU is a hang or undefined): the run stops with a message.
#include "emu.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace monet_emu {
namespace {

constexpr size_t kStackBytes = size_t{256} << 10;

enum class Wait { none, block, warp };

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  bool done = false;
  Wait wait = Wait::none;
};

struct Grid {
  Index3 blocks, shape;  // the grid's blocks, a block's threads
  unsigned threads = 0;  // shape.x * shape.y * shape.z
  Index3 block;  // the block running
  unsigned current = 0;  // the fiber running
  const std::function<void()>* body = nullptr;
  ucontext_t scheduler;
  int block_arrived = 0;
  std::vector<int> warp_arrived;
  std::vector<uint64_t> lanes;  // one shuffle slot per thread
  int vote = 0;
  std::vector<unsigned char> shared;
};

Grid* running = nullptr;
std::vector<Fiber> pool;  // kept between launches: a launch of n threads uses the first n
int last_error = 0;
Counters totals;

Grid& grid() {
  if (!running) {
    std::fprintf(stderr, "cuda emulation: a device built-in was called outside a kernel\n");
    std::abort();
  }
  return *running;
}

void fiber_main() {
  (*running->body)();
  pool[running->current].done = true;
}  // returns to uc_link, the scheduler

void wait_at(Wait kind) {
  Grid& g = grid();
  Fiber& f = pool[g.current];
  f.wait = kind;
  swapcontext(&f.context, &g.scheduler);
}

void block_barrier() {
  ++grid().block_arrived;
  wait_at(Wait::block);
}

void warp_barrier() {
  Grid& g = grid();
  ++g.warp_arrived[g.current / 32];
  wait_at(Wait::warp);
}

void count_barrier() {
  if (grid().current == 0) ++totals.block_barriers;
}

void run_block(Grid& g) {
  for (unsigned t = 0; t < g.threads; ++t) {
    Fiber& f = pool[t];
    f.done = false;
    f.wait = Wait::none;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = &g.scheduler;
    makecontext(&f.context, fiber_main, 0);
  }
  // Shared memory is not initialised on a GPU: 0xff bytes (NaN as floats) make reads of what no thread wrote show.
  std::memset(g.shared.data(), 0xff, g.shared.size());
  g.block_arrived = 0;
  g.warp_arrived.assign(g.threads / 32, 0);
  g.vote = 0;
  for (;;) {
    for (unsigned t = 0; t < g.threads; ++t) {
      if (pool[t].done || pool[t].wait != Wait::none) continue;
      g.current = t;
      swapcontext(&g.scheduler, &pool[t].context);
    }
    int done = 0;
    std::vector<int> warp_done(g.threads / 32, 0);
    for (unsigned t = 0; t < g.threads; ++t)
      if (pool[t].done) ++done, ++warp_done[t / 32];
    if (done == static_cast<int>(g.threads)) return;
    bool released = false;
    if (g.block_arrived > 0 && g.block_arrived + done == static_cast<int>(g.threads)) {
      for (unsigned t = 0; t < g.threads; ++t)
        if (pool[t].wait == Wait::block) pool[t].wait = Wait::none;
      g.block_arrived = 0;
      released = true;
    }
    for (unsigned w = 0; w < g.threads / 32; ++w) {
      if (g.warp_arrived[w] == 0 || g.warp_arrived[w] + warp_done[w] != 32) continue;
      for (unsigned t = 32 * w; t < 32 * w + 32; ++t)
        if (pool[t].wait == Wait::warp) pool[t].wait = Wait::none;
      g.warp_arrived[w] = 0;
      released = true;
    }
    if (!released) {
      std::fprintf(stderr, "cuda emulation: block (%u, %u, %u) is stuck: its threads wait at different barriers\n",
                   g.block.x, g.block.y, g.block.z);
      std::abort();
    }
  }
}

}  // namespace

Index3 thread_idx() {
  const Grid& g = grid();
  return {g.current % g.shape.x, g.current / g.shape.x % g.shape.y, g.current / (g.shape.x * g.shape.y)};
}
Index3 block_idx() { return grid().block; }
Index3 block_dim() { return grid().shape; }
Index3 grid_dim() { return grid().blocks; }

void syncthreads() {
  count_barrier();
  block_barrier();
}

int syncthreads_or(int predicate) {
  count_barrier();
  Grid& g = grid();
  if (predicate) g.vote = 1;
  block_barrier();
  const int result = g.vote;
  block_barrier();  // every thread has read the vote
  if (g.current == 0) g.vote = 0;
  block_barrier();  // the reset is done before anyone votes again
  return result;
}

int syncthreads_and(int predicate) { return !syncthreads_or(!predicate); }

uint64_t shuffle_xor(uint64_t bits, int lane_mask) {
  Grid& g = grid();
  const unsigned t = g.current;
  g.lanes[t] = bits;
  warp_barrier();
  const uint64_t r = g.lanes[(t & ~31u) | ((t & 31u) ^ (static_cast<unsigned>(lane_mask) & 31u))];
  warp_barrier();  // every lane has read before any writes its next value
  return r;
}

unsigned ballot(int predicate) {
  Grid& g = grid();
  const unsigned t = g.current;
  g.lanes[t] = predicate != 0;
  warp_barrier();
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l) bits |= static_cast<unsigned>(g.lanes[(t & ~31u) | l] != 0) << l;
  warp_barrier();
  return bits;
}

void* dynamic_shared() { return grid().shared.data(); }

void run_grid(Index3 blocks, Index3 shape, size_t shared_bytes, const std::function<void()>& body) {
  const unsigned threads = shape.x * shape.y * shape.z;
  if (running) {
    std::fprintf(stderr, "cuda emulation: a kernel launched another\n");
    std::abort();
  }
  if (blocks.x == 0 || blocks.y == 0 || blocks.z == 0 || threads == 0 || threads > 1024 || threads % 32 != 0) {
    last_error = 9;  // cudaErrorInvalidConfiguration (a partial warp is legal on a GPU, not here)
    return;
  }
  while (pool.size() < threads) {
    pool.emplace_back();
    pool.back().stack.reset(new char[kStackBytes]);
  }
  Grid g;
  g.blocks = blocks;
  g.shape = shape;
  g.threads = threads;
  g.body = &body;
  g.lanes.assign(threads, 0);
  g.shared.assign((shared_bytes + 15) / 16 * 16, 0);
  totals.most_shared = std::max(totals.most_shared, shared_bytes);
  running = &g;
  for (unsigned z = 0; z < blocks.z; ++z)
    for (unsigned y = 0; y < blocks.y; ++y)
      for (unsigned x = 0; x < blocks.x; ++x) {
        g.block = {x, y, z};
        run_block(g);
      }
  running = nullptr;
}

int take_last_error() {
  const int e = last_error;
  last_error = 0;
  return e;
}

Counters& counters() { return totals; }

}  // namespace monet_emu
