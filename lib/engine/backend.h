// The backend interface: where tensors live and how nodes run. The executor owns scheduling and memory
// placement; a backend only reserves the arena's one block, moves host data in and out, and runs kernels.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"
#include "schedule/streams.h"

namespace monet {

// Device memory a backend leaves free when it caps algorithm workspaces: cuDNN's and cuBLAS's own allocations
// after the backend is made (cuBLAS's workspace on first use, lazily loaded kernels), as profiling's scratch
// leaves (time_conv_algorithms).
inline constexpr int64_t kWorkspaceMarginBytes = int64_t{256} << 20;

// The most workspace one algorithm a backend chooses itself may take: the device's free memory (when the backend
// was made) less kWorkspaceMarginBytes, within budget_bytes when one is known (> 0; else none), less fixed_bytes,
// what stays allocated beside it throughout (the resident values: parameters, momentum, buffers, the batch).
// Never negative. A pure function of its arguments.
inline int64_t workspace_cap_bytes(int64_t free_bytes, int64_t budget_bytes, int64_t fixed_bytes) {
  int64_t room = free_bytes - kWorkspaceMarginBytes;
  if (budget_bytes > 0) room = std::min(room, budget_bytes);
  return std::max<int64_t>(0, room - fixed_bytes);
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual int float_bytes() const = 0;  // sizeof the float type used for DType::f32
  virtual void* reserve(int64_t bytes) = 0;
  virtual void unreserve(void* block) = 0;
  // The host arena of schedules that offload values (Step::Kind::offload and prefetch): host memory the device
  // copies to and from (CUDA: pinned). copy_begin issues one copy between it and the device arena after everything
  // issued so far and, where `ticket`, returns a ticket; copy_wait(ticket) makes everything issued after it wait for
  // that copy (and the ones issued before it on its lane). So a copy may overlap the kernels issued between the two
  // (CUDA: a copy stream per lane, each in issue order). The CPU's host memory is its device memory: aligned_alloc,
  // and memcpy at once (ticket -1, nothing to wait for).
  virtual void* reserve_host(int64_t bytes);
  virtual void unreserve_host(void* block);
  virtual int copy_begin(void* dst, const void* src, int64_t bytes, CopyLane lane, bool ticket);
  virtual void copy_wait(int ticket);
  // Host values (as double) to and from a tensor in host memory the CPU reads and writes (the host arena; the CPU
  // backend's arena), converted to/from its dtype (DType::f32 as float_bytes() wide).
  void write_host(const TensorRef& dst, const std::vector<double>& host) const;
  std::vector<double> read_host(const TensorRef& src) const;
  // algo: a backend algorithm of the node (a cuDNN convolution algorithm, as a schedule step names it); -1: the
  // backend's own choice. The CPU backend has one algorithm per op and ignores it; CUDA refuses an algorithm for a
  // node that is not a convolution, or one cuDNN does not offer for it. impl: the op implementation (OpDef::impls
  // index) the step runs, for the backend's own algorithm; an op whose implementations need different scratch
  // answers for that one (CUDA: MaxPoolGrad and AttentionGrad), every other op the same for all.
  virtual int64_t workspace_bytes(const Graph& g, const Node& n, int algo = -1, int impl = 0) const = 0;
  // Caps the workspace of the algorithms the backend chooses itself (algo -1) at workspace_cap_bytes(its device's
  // free memory, budget_bytes, fixed_bytes); budget_bytes 0: none. Call before the first workspace_bytes() or
  // run(): the choices follow the cap. An algorithm named by a schedule is not capped (the schedule's simulation
  // holds it to its budget). The CPU backend has one algorithm per op and ignores it.
  virtual void limit_workspace(int64_t /*budget_bytes*/, int64_t /*fixed_bytes*/) {}
  // Runs one node with implementation `impl` (index into impls_of(n)) and algorithm `algo`; inputs that
  // implementation does not read have data null. seed: deterministic per (run seed, step, node); recompute: not the
  // node's first run this step.
  virtual void run(const Graph& g, const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out,
                   void* workspace, uint64_t seed, bool recompute, int impl = 0, int algo = -1) = 0;
  // Host values (as double) to and from a tensor, converted to/from its dtype.
  virtual void upload(const TensorRef& dst, const std::vector<double>& host) = 0;
  virtual std::vector<double> download(const TensorRef& src) = 0;
  virtual void synchronize() {}
  // One line about the device for reports (CUDA: GPU, driver, runtime and cuDNN versions, math mode, the workspace
  // cap, and cudaMemGetInfo when the backend was made, before and after the arena's reservation and now).
  virtual std::string describe() const { return name(); }
  // Times a step's nodes for profiles without waiting between them: timer_mark() records a point in the order of
  // the device's work (before each node and once after the last); timer_marks_ms() waits for the last mark and
  // returns each mark's time in ms after the first, then forgets them. A node's time is the span between its mark
  // and the next: on a device that runs ahead of the host, its kernels' time; where the device waits for the host's
  // launches, that wait too, as in a run. Host wall time by default (after synchronize()); CUDA records events on
  // its stream and waits once per step, where waiting after every node would add each node's launch latency.
  virtual void timer_mark() {
    synchronize();
    marks_.push_back(std::chrono::steady_clock::now());
  }
  virtual std::vector<double> timer_marks_ms() {
    std::vector<double> ms;
    for (const auto& t : marks_) ms.push_back(std::chrono::duration<double, std::milli>(t - marks_.front()).count());
    marks_.clear();
    return ms;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

// float_bytes 4: the fp32 engine; 8: double precision (for tests).
std::unique_ptr<Backend> make_cpu_backend(int float_bytes = 4);

// "cpu" or "cuda"; throws a one-line error when the device is unavailable in this build or on this machine.
// math (cuda): "default" (TF32 allowed in cuDNN convolutions, as PyTorch by default) or "fp32" (strict); the CPU
// backend is always strict fp32 and accepts either.
std::unique_ptr<Backend> make_backend(const std::string& device, const std::string& math = "default");

}  // namespace monet
