// The runtime of the CUDA emulation (cuda_runtime.h in this folder): a grid of blocks run on the CPU, one block
// after another, each block's threads as fibers on one OS thread that switch only at barriers (__syncthreads,
// __syncthreads_or, and the two warp barriers of a shuffle). A kernel written for the GPU then runs unchanged, with
// its shared memory, its block-uniform branches and its warp shuffles, so that its logic is tested on a machine
// without a GPU. Nothing of the GPU's timing, memory model or races is emulated: a kernel that reads what another
// thread writes without a barrier between them sees whatever the fiber order gives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace monet_emu {

struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};

Index3 thread_idx();
Index3 block_idx();
Index3 block_dim();
Index3 grid_dim();

void syncthreads();
int syncthreads_or(int predicate);
int syncthreads_and(int predicate);
// The value `bits` of lane (this lane ^ lane_mask) of this warp; every lane of the warp must call it.
uint64_t shuffle_xor(uint64_t bits, int lane_mask);
// Bit l set where lane l of this warp passed a true predicate; every lane of the warp must call it.
unsigned ballot(int predicate);
// The launch's dynamic shared memory (16-byte aligned, filled with 0xff bytes, NaN as floats, at each block's start).
void* dynamic_shared();

// Runs body once per thread of a grid of blocks.x * blocks.y * blocks.z blocks of threads.x * threads.y * threads.z
// threads (x fastest in both; a block's threads a multiple of 32, at most 1024, its warps 32 consecutive ones).
void run_grid(Index3 blocks, Index3 threads, size_t shared_bytes, const std::function<void()>& body);
// cudaSuccess (0) or the configuration error of the last launch; reset by reading it.
int take_last_error();

// Counted over every launch so far (tests read the difference to see what a kernel did).
struct Counters {
  int64_t block_barriers = 0;  // __syncthreads and __syncthreads_or/and calls, by thread 0 of each block
  size_t most_shared = 0;      // the most dynamic shared memory a launch asked for (a test may reset it)
};
Counters& counters();

}  // namespace monet_emu
