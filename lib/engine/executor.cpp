#include "engine/executor.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "schedule/streams.h"

namespace monet {

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {

int64_t value_bytes(const Graph& g, int v, int float_bytes) {
  return tensor_bytes(g.values[v].shape, g.values[v].dtype, float_bytes);
}

// Replays the schedule's allocations on the arenas (the device's and the host's, for offloaded values): the same
// calls in the dry run and the real run. In place, output 0 takes the input's block (the simulator checked their
// bytes are equal); the input's offset is dropped after the node ran. An offload gives the value a host block of its
// own for the rest of the step (host blocks are not reused within a step: a copy to the host may start before its
// offload step, as soon as the value is computed) and releases its device block after on_move(i, v); a prefetch
// allocates a device block and calls on_move(i, v); a free of a device value calls on_move(i, v) before releasing
// it. i is the step's index. The host blocks are released when the step ends. A resident value whose home is the
// host (home[v]: Schedule::on_host) keeps its host block for the whole run: its offloads copy back into it.
// An optional output that no step reads (unwritten[v]) gets no block: its producer runs without it, and a free of
// it does nothing.
template <class OnCompute, class OnMove>
void replay(const Graph& g, const Schedule& s, const std::vector<char>& home, const std::vector<char>& unwritten,
            Arena& arena, std::vector<int64_t>& offset, Arena& host_arena, std::vector<int64_t>& host_offset,
            Backend& backend, OnCompute on_compute, OnMove on_move) {
  const int fb = backend.float_bytes();
  std::vector<int64_t> host_blocks;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind == Step::Kind::compute) {
      const Node& n = g.nodes[st.id];
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        const int v = n.outputs[o];
        if (unwritten[v]) continue;
        offset[v] = o == 0 && st.in_place >= 0 ? offset[st.in_place] : arena.allocate(value_bytes(g, v, fb));
      }
      int64_t ws_bytes = backend.workspace_bytes(g, n, st.algo, st.impl);
      int64_t ws = ws_bytes > 0 ? arena.allocate(ws_bytes) : -1;
      on_compute(i, st, ws);
      if (ws >= 0) arena.release(ws);
      if (st.in_place >= 0) offset[st.in_place] = -1;
      continue;
    }
    const int v = st.id;
    if (unwritten[v]) continue;  // a free of it (the simulator refuses moves)
    if (st.kind == Step::Kind::offload) {
      if (!home[v]) {
        host_offset[v] = host_arena.allocate(value_bytes(g, v, fb));
        host_blocks.push_back(host_offset[v]);
      }
      on_move(i, v);
      arena.release(offset[v]);
      offset[v] = -1;
    } else if (st.kind == Step::Kind::prefetch) {
      offset[v] = arena.allocate(value_bytes(g, v, fb));
      on_move(i, v);
      if (!home[v]) host_offset[v] = -1;
    } else if (offset[v] >= 0) {
      on_move(i, v);
      arena.release(offset[v]);
      offset[v] = -1;
    } else {  // freed where it was offloaded
      host_offset[v] = -1;
    }
  }
  for (int64_t b : host_blocks) host_arena.release(b);
}

}  // namespace

std::vector<int> algorithms_of(const Graph& g, const Schedule& s) {
  std::vector<int> algo(g.nodes.size(), -1);
  std::vector<char> seen(g.nodes.size(), 0);
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kind != Step::Kind::compute || st.id < 0 || st.id >= static_cast<int>(g.nodes.size())) continue;
    if (seen[st.id] && algo[st.id] != st.algo)
      fail("schedule step ", i, ": node '", g.nodes[st.id].name, "' runs with algorithm ", st.algo, " here and ",
           algo[st.id], " at an earlier step (one algorithm per node)");
    seen[st.id] = 1;
    algo[st.id] = st.algo;
  }
  return algo;
}

WorkspaceFn workspace_with(const Backend& backend, const Graph& g, std::vector<int> algo) {
  return [&backend, &g, algo = std::move(algo)](const Node& n, int impl) {
    const size_t k = static_cast<size_t>(&n - g.nodes.data());  // the planner and the simulator walk g.nodes
    return backend.workspace_bytes(g, n, k < algo.size() ? algo[k] : -1, impl);
  };
}

Executor::Executor(const Graph& g, Schedule schedule, Backend& backend, uint64_t seed)
    : g_(g), schedule_(std::move(schedule)), backend_(backend), seed_(seed), offset_(g.values.size(), -1) {
  std::unordered_map<std::string, uint64_t> seen;
  for (const Node& n : g.nodes) {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the name
    for (unsigned char c : n.name) h = (h ^ c) * 0x100000001b3ULL;
    node_key_.push_back(mix_seed(h, seen[n.name]++));
  }
  const int fb = backend.float_bytes();
  // Validates the schedule (throws naming the step) before anything runs; each node's workspace is its
  // algorithm's.
  const PlanGraph plan = plan_of(g, workspace_with(backend, g, algorithms_of(g, schedule_)), fb);
  simulate(plan, schedule_);

  const std::vector<int> resident = resident_values(g);
  home_.assign(g.values.size(), 0);
  for (int v : schedule_.on_host) home_[v] = 1;
  Arena dry(INT64_MAX / 4), dry_host(INT64_MAX / 4);
  std::vector<int64_t> dry_offset(g.values.size(), -1), dry_host_offset(g.values.size(), -1);
  for (int v : resident) {
    if (home_[v]) dry_host_offset[v] = dry_host.allocate(value_bytes(g, v, fb));
    else dry_offset[v] = dry.allocate(value_bytes(g, v, fb));
  }
  // Optional outputs (OpDef::optional_outputs) that no step's implementation reads: never allocated, and run() passes
  // them without data (the simulator's rule).
  unread_optional_ = unwritten_values(plan, schedule_);

  move_host_.assign(schedule_.steps.size(), -1);
  replay(g, schedule_, home_, unread_optional_, dry, dry_offset, dry_host, dry_host_offset, backend,
         [](size_t, const Step&, int64_t) {},
         [&](size_t i, int v) {
           if (schedule_.steps[i].kind != Step::Kind::free) move_host_[i] = dry_host_offset[v];
         });
  // When each copy (or piece of one) is issued: the schedule's copy plan (streams.h), checked against the steps.
  step_reads_.assign(schedule_.steps.size(), {});
  for (size_t i = 0; i < schedule_.steps.size(); ++i) {
    const Step& st = schedule_.steps[i];
    if (st.kind != Step::Kind::compute) continue;
    const PlanNode& n = plan.nodes[st.id];
    step_reads_[i] = n.reads(n.impl_for(st.impl, st.algo));
  }
  copies_ = scheduled_copies(schedule_, home_, [&](int step, bool outputs) -> const std::vector<int>& {
    return outputs ? g.nodes[schedule_.steps[step].id].outputs : step_reads_[step];
  });
  copy_index_ = copy_index(copies_, schedule_.steps.size());
  copy_plan_ = copy_plan_of(schedule_, copies_);


  reserved_ = dry.high_water_bytes();
  block_ = static_cast<char*>(backend.reserve(reserved_));
  arena_ = std::make_unique<Arena>(reserved_);
  host_reserved_ = dry_host.high_water_bytes();
  host_arena_ = std::make_unique<Arena>(host_reserved_);
  host_offset_.assign(g.values.size(), -1);
  for (int v : resident) {
    if (home_[v]) host_offset_[v] = host_arena_->allocate(value_bytes(g, v, fb));
    else offset_[v] = arena_->allocate(value_bytes(g, v, fb));
  }
  if (host_reserved_ > 0) {
    try {
      host_block_ = static_cast<char*>(backend.reserve_host(host_reserved_));
    } catch (...) {  // the destructor does not run for a constructor that throws
      backend.unreserve(block_);
      block_ = nullptr;
      throw;
    }
  }
}

Executor::~Executor() {
  if (host_block_) backend_.unreserve_host(host_block_);
  if (block_) backend_.unreserve(block_);
}

TensorRef Executor::ref(int v) {
  MONET_CHECK(offset_[v] >= 0, "value ", g_.values[v].name, " is not placed");
  return {block_ + offset_[v], &g_.values[v].shape, g_.values[v].dtype};
}

TensorRef Executor::host_ref(int v) {
  MONET_CHECK(host_offset_[v] >= 0, "value ", g_.values[v].name, " has no host block");
  return {host_block_ + host_offset_[v], &g_.values[v].shape, g_.values[v].dtype};
}

// Between steps a resident value is in the device arena, or in its host block where its home is the host.
void Executor::set_value(int v, const std::vector<double>& host) {
  if (!is_persistent(g_.values[v].role) || (offset_[v] < 0 && !home_[v]))
    fail("set_value: '", g_.values[v].name, "' is not resident");
  if (home_[v]) {
    backend_.synchronize();  // no copy of the last step still reads the block
    backend_.write_host(host_ref(v), host);
  } else {
    backend_.upload(ref(v), host);
  }
}

std::vector<double> Executor::get_value(int v) {
  if (!is_persistent(g_.values[v].role) || (offset_[v] < 0 && !home_[v]))
    fail("get_value: '", g_.values[v].name, "' is not resident");
  backend_.synchronize();
  return home_[v] ? backend_.read_host(host_ref(v)) : backend_.download(ref(v));
}

std::map<int, std::vector<double>> Executor::step(const std::set<int>& capture, std::vector<double>* node_ms,
                                                  const std::function<void(int)>& on_node) {
  for (int v : capture)
    if (v >= 0 && v < static_cast<int>(g_.values.size()) && unread_optional_[v])
      fail("cannot capture '", g_.values[v].name, "': an optional output that no step of the schedule reads is never "
           "written");
  std::map<int, std::vector<double>> captured;
  std::vector<char> computed(g_.nodes.size(), 0);
  std::vector<int> timed;  // with node_ms: the node after each timer mark
  if (node_ms) backend_.timer_marks_ms();  // drops marks a step that threw left behind
  const uint64_t step_seed = mix_seed(seed_, static_cast<uint64_t>(step_index_++));
  const int fb = backend_.float_bytes();
  // Copies in flight (Backend::copy_begin's tickets, each copy's last piece's): to the host from their first piece
  // until the offload step, where the value's device block is released; to the device from their first piece until
  // the value's first reader (or its free). Pieces are issued as the copy plan says, at the start of their step (a
  // step replay does not call back for, the free of a value on the host, at the next one's: the same point).
  std::vector<int> ticket(copies_.size(), -2);  // -2: not issued in full
  std::vector<int> in_copy(g_.values.size(), -1);  // value -> its copy back, until waited for
  size_t next_piece = 0;
  auto issue = [&](size_t at) {
    for (; next_piece < copy_plan_.size() && copy_plan_[next_piece].at <= static_cast<int>(at); ++next_piece) {
      const CopyChunk& c = copy_plan_[next_piece];
      const int k = copy_index_[c.copy];
      const ScheduledCopy& sc = copies_[k];
      const int v = sc.value;
      const int64_t count = numel(g_.values[v].shape), size = element_bytes(g_.values[v].dtype, fb);
      const int64_t begin = part_begin(count, c.part, c.parts) * size;
      const int64_t bytes = part_begin(count, c.part + 1, c.parts) * size - begin;
      char* device = block_ + offset_[v] + begin;
      char* host = host_block_ + move_host_[c.copy] + begin;
      const bool last = c.part == c.parts - 1;
      const int t = bytes == 0 ? -1
                    : sc.lane == CopyLane::to_host ? backend_.copy_begin(host, device, bytes, sc.lane, last)
                                                   : backend_.copy_begin(device, host, bytes, sc.lane, last);
      if (last) ticket[k] = t;
    }
  };
  auto wait_in = [&](int v) {
    if (in_copy[v] < 0) return;
    MONET_CHECK(ticket[in_copy[v]] != -2, "copy of '", g_.values[v].name, "' to the device not issued in full");
    backend_.copy_wait(ticket[in_copy[v]]);
    in_copy[v] = -1;
  };
  auto move = [&](size_t i, int v) {
    const Step& st = schedule_.steps[i];
    if (st.kind == Step::Kind::offload) {
      MONET_CHECK(host_offset_[v] == move_host_[i], "offload of '", g_.values[v].name, "': host block moved");
      issue(i);
      wait_in(v);  // prefetched before: its bytes have landed
      const int k = copy_index_[i];
      MONET_CHECK(ticket[k] != -2, "copy of '", g_.values[v].name, "' to the host not issued in full");
      backend_.copy_wait(ticket[k]);
    } else if (st.kind == Step::Kind::prefetch) {
      issue(i);
      in_copy[v] = copy_index_[i];
    } else {
      issue(i);
      wait_in(v);  // its block may be reused at once
    }
  };
  replay(g_, schedule_, home_, unread_optional_, *arena_, offset_, *host_arena_, host_offset_, backend_, [&](size_t index, const Step& st, int64_t ws) {
    issue(index);
    const int node = st.id;
    const Node& n = g_.nodes[node];
    for (int v : step_reads_[index]) wait_in(v);
    const ImplDef impl = impls_of(n).at(st.impl);
    std::vector<TensorRef> in, out;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int v = n.inputs[i];
      // An input the implementation does not read may not be live: it is passed without data.
      in.push_back(impl.reads_input(static_cast<int>(i)) ? ref(v) : TensorRef{nullptr, &g_.values[v].shape, g_.values[v].dtype});
    }
    for (int v : n.outputs) {
      // An optional output nothing reads has no block and is not written.
      out.push_back(unread_optional_[v] ? TensorRef{nullptr, &g_.values[v].shape, g_.values[v].dtype} : ref(v));
    }
    if (node_ms) {  // host wall time on the CPU, CUDA events on the GPU
      backend_.timer_mark();
      timed.push_back(node);
    }
    backend_.run(g_, n, in, out, ws >= 0 ? block_ + ws : nullptr, mix_seed(step_seed, node_key_[node]),
                 computed[node] != 0, st.impl, st.algo);
    if (on_node) on_node(node);
    for (int v : n.outputs)
      if (capture.count(v) && !captured.count(v)) {
        backend_.synchronize();
        captured[v] = backend_.download(ref(v));
      }
    computed[node] = 1;
  }, move);
  issue(schedule_.steps.size());
  if (node_ms && !timed.empty()) {
    backend_.timer_mark();
    const std::vector<double> at = backend_.timer_marks_ms();
    MONET_CHECK(at.size() == timed.size() + 1, "timer marks: ", at.size(), " for ", timed.size(), " nodes");
    for (size_t i = 0; i < timed.size(); ++i) (*node_ms)[timed[i]] += at[i + 1] - at[i];
  }
  backend_.synchronize();
  return captured;
}

int Executor::step_first_nonfinite() {
  auto finite = [&](int v) {
    if (g_.values[v].dtype != DType::f32) return true;
    backend_.synchronize();
    for (double x : home_[v] && offset_[v] < 0 ? backend_.read_host(host_ref(v)) : backend_.download(ref(v)))
      if (!std::isfinite(x)) return false;
    return true;
  };
  for (int v : resident_values(g_))
    if (!finite(v)) return v;
  int found = -1;
  step({}, nullptr, [&](int node) {
    for (int v : g_.nodes[node].outputs)
      if (found < 0 && !unread_optional_[v] && !finite(v)) found = v;  // an unread optional output is not written
  });
  return found;
}

}  // namespace monet
