// The checkpointing problem of a plan graph, in MONeT's structure: stage 0 runs the whole forward pass (and the
// loss); then every backward (and update) node runs once, in order, as step t = 0..T-1. Decisions:
//   S[t][v] = 1  forward value v is kept in memory entering step t (S[0][v]: kept when the forward pass ends),
//   R[t][k] = 1  forward node k is recomputed during step t, before the step's node runs.
// Memory is counted from exact bytes, within a step at every recomputation and at the step's node (step_peak):
// a recomputed value counts until the last recomputation of the step that may read it, then only if the step's
// node reads it or it is kept into the next step; a kept value the step cannot use counts only if it is kept on.
// In stage 0 a node that may run in place does so over an input that ends there unless that input is kept; a
// recomputation does so over an input recomputed in the same step that no later recomputation of the step, nor the
// step's node, reads and that is not kept on (in_place_at).
// The extracted schedule frees at those points, so its simulated peak never exceeds this count. Variables exist only where they can matter:
// S[t][v] up to v's last possible use, R[t][k] only for ancestors of what step t reads, within a window of W
// levels (longest path of forward nodes from the inputs) below the lowest level among them. Levels rather than
// positions: an inception module's parallel branches sit side by side in levels but one after another in order.
// With implementation choices (monet-solve --mode full), M[t] = the implementation step t's node runs: each
// implementation reads its own forward values (MONeT's input-/output-activated backward) and has its own time and
// workspace; and P[k] = the implementation of forward node k, where a CUDA profile offers a convolution's other
// cuDNN algorithms (same reads, own time and workspace). The engine runs a node with one algorithm, so P[k] holds
// for the forward pass and every recomputation of k alike.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "profile/host_link.h"
#include "schedule/schedule.h"

namespace monet {

// One offer of a resident value's home on the host (CheckpointProblem::states): an optimizer state (read only by
// its update), or a parameter (read in stage 0, last by its update, first = -1).
struct StateOffer {
  int value = -1;                // plan value id
  int step = 0;                  // its update's step u
  int first = 0, last = 0;       // its span: on the device in steps first..last (first = -1: from stage 0's start)
  double in_ms = 0, out_ms = 0;  // its copy from / to the host
  int reader = -1;               // a parameter's first stage-0 reader (its position; F: the loss), else -1
  // A parameter's: the stage-0 position at whose start its copy in is issued (it counts on the device from there):
  // the fewest positions before its reader whose times cover the copy, or earlier in its widest offer; else -1.
  int fetch = -1;
  // Whether the value is on the device in step t (-1: stage 0) when offloaded.
  bool covers(int t) const { return t >= first && t <= last; }
  bool parameter() const { return first < 0; }
  // The offer with the least span: the steps around the update (a parameter: from stage 0 to the step after it).
  bool narrow() const { return (parameter() || first == step - 1) && last == step + 1; }
};

// A span [first, last] of a copy's window (its start, its end) and the copies whose own windows lie within it:
// a stream that carries them all must do so within the span (CheckpointProblem's fetch_spans, state_in_spans,
// state_out_spans).
struct NestedSpan {
  int first = 0, last = 0;
  std::vector<int> within;
};

// When an offloaded value's copies take device memory. hidden: each copy to the host releases the value where the
// node times since its production cover the copy, and each copy back holds it from where the node times before its
// reader cover the copy, so a lone copy costs no wait. lean: released at the value's last stage-0 reader and held
// from the step before its reader, the compute stream waiting for what the node times do not cover - less memory
// (on ResNet-50 b184 everything offloaded from store-all peaks at 2.77 GB against 7.06 GB, where the values in
// flight in stage 0 hold their memory: schedules/cpu-runs/2026-11-29_floor), more waits. The solve takes lean only
// where the heuristics plan nothing within the budget with hidden (docs/planner.md, "Offload"). lean_out: the
// copies to the host lean, the copies back hidden; lean_in: the other way round. Per assignment each needs no more
// memory than hidden and no less than lean.
enum class CopyTiming { hidden, lean, lean_out, lean_in };
const char* copy_timing_name(CopyTiming t);  // "hidden", "lean", "lean-out", "lean-in"
// A --copy-timing value (copy_timing_name's); fails naming the value otherwise.
CopyTiming parse_copy_timing(const std::string& name);
// Whether copies to the host release device memory at the value's last stage-0 reader (lean, lean_out), and whether
// copies back take it from the step before the reader (lean, lean_in).
inline bool lean_release(CopyTiming t) { return t == CopyTiming::lean || t == CopyTiming::lean_out; }
inline bool lean_take(CopyTiming t) { return t == CopyTiming::lean || t == CopyTiming::lean_in; }

struct CheckpointProblem {
  const PlanGraph* plan = nullptr;
  // lean_store_all_impls(*plan) where the caller has it (solve() computes it once for all its problems; the
  // heuristics' policies start from it); empty: computed where needed.
  std::vector<int> store_all_impls;
  int window = 0;                 // the recomputation window in levels (0: none)
  std::vector<int> step_windows;  // [t]: step t's window where it differs from `window` (empty: none does)
  std::vector<int> fwd_nodes;     // plan node ids of the forward nodes, in order (position k = 0..F-1)
  std::vector<int> level;         // forward position -> its level: 0 when it reads no forward value, else 1 + the
                                  // highest level among the producers of what it reads
  int loss_node = -1;             // plan node id, run after the forward nodes in stage 0 (position F)
  std::vector<int> steps;         // plan node ids of the backward and update nodes (t = 0..T-1)

  std::vector<int> fvals;         // transient outputs of forward nodes (plan value ids)
  std::vector<int64_t> fval_bytes;  // fval -> its bytes (0: an optional output nothing can read, never allocated)
  std::vector<char> fval_optional;  // fval -> an optional output of its producer (PlanNode::optional_outputs)
  std::vector<int> fval_of;       // plan value id -> index into fvals, or -1
  std::vector<int> producer;      // fval -> forward position of its producer
  std::vector<int> last_fwd;      // fval -> last stage-0 position reading it (its producer's if none)
  std::vector<int> last_use;      // fval -> last step that may use it (read, or input of a candidate), -1 if none
  std::vector<std::vector<int>> needs;       // t -> fvals read by step t
  std::vector<std::vector<int>> candidates;  // t -> forward positions that may be recomputed in step t (ascending)
  std::vector<std::vector<int>> fwd_inputs;  // forward position -> fvals it reads
  std::vector<int64_t> out_bytes;            // forward position -> bytes of its outputs
  // Implementations of each step's node (one, the default, unless choices are on). needs[t] holds what every
  // implementation reads; impl_extra[t][i] what implementation i reads beyond it; impl_ms[t][i] and impl_ws[t][i]
  // its time and its memory at the node relative to the default's (which bwd_fixed and base_ms count): workspace,
  // less the gradient it overwrites when it runs in place (bwd_in_place).
  std::vector<std::vector<std::vector<int>>> impl_extra;
  std::vector<std::vector<double>> impl_ms;
  std::vector<std::vector<int64_t>> impl_ws;
  // bwd_in_place[t][i]: the value (plan value id) whose memory output 0 of step t's node takes over when it runs
  // implementation i, or -1: a gradient, or a forward value that no later step may use (last_use; the logits at
  // SoftmaxCrossEntropyGrad). Gradients live from their producer to their last reader whatever the decisions, and
  // such a forward value is present at its last step whatever they are, so a node runs in place whenever its
  // implementation may (PlanNode::impl_in_place) and one of its in_place inputs ends there: its output then costs
  // nothing at the node (the first such input, as store_all_schedule picks).
  std::vector<std::vector<int>> bwd_in_place;

  // Memory that no decision changes. fwd_fixed[k]: at stage-0 position k (k = F is the loss node): resident +
  // values still needed by later stage-0 nodes + outputs and workspace of k. bwd_fixed[t]: at step t's node:
  // resident + live gradients + its outputs and workspace. bwd_base[t]: resident + live gradients (recomputation).
  std::vector<int64_t> fwd_fixed, bwd_fixed, bwd_base;
  // Within step t: read[t][f] = some implementation of the step's node reads f; used[t][f] = read, or an input of
  // one of the step's candidates; freed_after[t][i] = values no candidate after candidates[t][i] reads (outputs of
  // candidates the node does not read): a recomputed one is freed then unless it is kept into step t+1.
  std::vector<std::vector<char>> read, used;
  std::vector<std::vector<std::vector<int>>> freed_after;
  std::vector<std::vector<int>> fwd_released;  // position k -> fvals whose last stage-0 reader is k
  // fwd_in_place[k]: the fval whose memory forward position k's output 0 takes over in stage 0 when it is not
  // kept into step 0 (one of its PlanNode::in_place inputs, released at k), or -1. fwd_fixed[k] does not count it:
  // it counts only when kept (S[0][f] = 1).
  std::vector<int> fwd_in_place;
  // rec_in_place[t][i]: the fval that candidate i of step t may overwrite when recomputed (one of its node's
  // in_place inputs, in freed_after[t][i]), or -1; whether it does depends on the assignment (in_place_at).
  std::vector<std::vector<int>> rec_in_place;
  std::vector<int64_t> fwd_ws;                 // forward position -> workspace bytes (default implementation)
  std::vector<double> fwd_ms;                  // forward position -> time (default implementation)
  // Implementations of each forward node (one, the default, unless choices are on): fwd_impl_ms[k][i] and
  // fwd_impl_ws[k][i] are implementation i's time and workspace relative to the default's (which fwd_ms, fwd_ws,
  // fwd_fixed and base_ms count). They read and write what the default does.
  std::vector<std::vector<double>> fwd_impl_ms;
  std::vector<std::vector<int64_t>> fwd_impl_ws;
  // Lean runs (PlanNode::lean_ms, with choices on): fwd_lean[k] is forward node k's implementation that is its lean
  // run (its optional outputs not written: Attention's fused forward), or -1. It is taken exactly when no step's
  // implementation reads those outputs; lean_readers[k] lists the (step, implementation) pairs that do. A node whose
  // optional outputs no implementation can read always runs lean (fwd_ms is its lean time); one whose outputs a
  // step or a forward node must read never does (fwd_ms is its time).
  std::vector<int> fwd_lean;
  std::vector<std::vector<std::pair<int, int>>> lean_readers;
  double base_ms = 0;                          // every node once

  // Offload (enable_offload; monet-solve --offload). A forward value f used by a step t >= 1 may be copied to the
  // host when its stage-0 life ends (H[f]) and copied back once, from the start of step prefetch_first(t, f) for a
  // step t that uses it (G[t][f]: present entering step t; its device memory counts from that start through step
  // t-1). All empty when off.
  std::vector<char> offloadable;               // fval -> some step t >= 1 uses it
  std::vector<double> copy_out_ms, copy_in_ms;  // fval -> its copy to / from the host (latency + bytes / rate)
  // fval -> the stage-0 position after which an offloaded value's device memory is released: the first position
  // at or after its last stage-0 reader by whose end its copy, started when it was produced, has ended (at most
  // the loss, F); under lean_release timing its last stage-0 reader (the one after its producer where none reads it).
  // Until then it counts as a kept value does.
  std::vector<int> offload_at;
  CopyTiming copy_timing = CopyTiming::hidden;  // when copies release and take device memory (enable_offload)
  std::vector<std::vector<int>> fwd_offloaded;  // position k -> fvals whose offload_at is k
  std::vector<double> fwd_end_ms;               // position k (0..F) -> when k ends in stage 0 (defaults)
  std::vector<double> step_ms;                  // t -> step t's node time (its default implementation)
  int64_t host_limit_bytes = 0;                 // the most bytes offloaded at once (0: no limit)
  HostLink link;                                // what the copies are priced with
  // The optimizer state on the host: resident values that only one node reads, an update (which writes them in
  // place: SGD's momentum), run as step u with 1 <= u <= T-2. Each is offered as one to three spans [first, last]
  // around u (Q[s] = 1 for offer s: the value's home is the host, copied in from the start of step `first` and
  // out after its update, ended by the end of step `last`; on the device only in steps first..last): [u-1, u+1];
  // where a copy outlasts the step beside the update, the fewest steps before and after u whose nodes' times
  // cover each copy; and the span of its copies with every value on offer copied (the widest, where wider still):
  // the copies of all the updates queued on their stream in update order, in as late as they can end before their
  // update and the later updates' copies, out as early as they can start after their update and the earlier
  // updates' copies (which covers the copies of all the resident values u reads: a layer's parameter and its
  // momentum go out together). Narrowest first, widest last. At most one offer per value.
  // And the parameters: resident values that stage-0 nodes read and whose last reader is their update, step u <=
  // T-2 (no recomputation candidate of a later step reads them). Home on the host, a parameter is copied in from
  // the start of stage-0 position `fetch` (ended by the start of its first reader, `reader`) and out after its
  // update, ended by the end of step `last` (u+1, or wider as above): on the device from position `fetch` through
  // step `last`, away before and after. Its widest offer's `fetch` is its copy in's with every parameter copied,
  // queued by first reader, each as late as it can end. Offers of parameters have first = -1.
  std::vector<StateOffer> states;
  std::vector<int> parameter_offers;  // the parameters' offers (indices into states), by fetch, then reader
  // The spans [fetch, reader] of the parameters' copies in (stage-0 positions), each with the offers whose own span
  // lies within it: the copies of those must end within it (one stream, the optimizer state's).
  std::vector<NestedSpan> fetch_spans;
  // The spans [first, need] of every prefetch on offer (from the start of step `first`, ended by the start of step
  // `need`), and [copy_in_from, need] for each such need (copy_in_from: the earliest first), each pair once, by
  // need: the copy-in rows. (The optimizer state's copies in run on a stream of their own, CopyLane: each over its
  // offer's own span.)
  std::vector<std::pair<int, int>> copy_in_spans;
  int copy_in_from = -1;
  // The rows of the resident values' copies: over steps first..last-1 (`last`: the step that needs them), the
  // copies of the offers within on one stream: their copies in (the optimizer state's stream, spans [first, u]:
  // state_in_spans) and out (the stream to the host, spans [u+1, last+1]: state_out_spans).
  std::vector<NestedSpan> state_in_spans, state_out_spans;

  int num_fwd() const { return static_cast<int>(fwd_nodes.size()); }
  int num_steps() const { return static_cast<int>(steps.size()); }
  int num_impls(int t) const { return static_cast<int>(impl_extra[t].size()); }
  int num_fwd_impls(int k) const { return static_cast<int>(fwd_impl_ms[k].size()); }
  // The plan implementation (PlanNode::impls index) that forward implementation i of position k runs: a lean run
  // is its default's.
  int fwd_plan_impl(int k, int i) const { return !fwd_lean.empty() && fwd_lean[k] >= 0 && i == fwd_lean[k] ? 0 : i; }
  // Forward position k's implementation under the steps' implementations M where it has a lean run: the lean run
  // when no (step, implementation) of lean_readers[k] is chosen, else the default; -1 where it has none.
  int lean_choice(int k, const std::vector<int>& M) const;
  // Whether value f is written under the forward implementations P: not an optional output that nothing can read,
  // nor one of a node that P runs lean.
  bool written(int f, const std::vector<int>& P) const;
  bool has_choices() const;  // some step or forward node has more than one implementation
  bool read_by_all(int t, int f) const;        // every implementation of step t's node reads f (f in needs[t])
  bool read_by(int t, int impl, int f) const;  // implementation impl of step t's node reads f
  int64_t bytes(int fval) const { return fval_bytes[fval]; }
  double time_ms(int pos) const { return fwd_ms[pos]; }
  bool has_s(int t, int f) const { return t <= last_use[f]; }
  bool offload() const { return !offloadable.empty(); }
  bool has_h(int f) const { return offload() && offloadable[f]; }
  bool has_g(int t, int f) const { return offload() && t >= 1 && used[t][f]; }
  // The step from whose start f's copy back into step t runs (has_g(t, f)): t-1, or where the node of step t-1 is
  // shorter than the copy, the fewest steps before t whose nodes' times cover it (at most kCopySpanSteps); always
  // t-1 under lean_take timing.
  int prefetch_first(int t, int f) const;
  // The stage-0 positions whose node times an offloaded f's copy to the host may run in (out_slots): from the one
  // after its producer, where the copy is released, through offload_at f, where it must have ended (that position
  // alone where the two coincide).
  std::pair<int, int> out_slots(int f) const { return {std::min(producer[f] + 1, offload_at[f]), offload_at[f]}; }
  // When stage-0 position k starts, and its node's time (fwd_end_ms, defaults).
  double fwd_begin_ms(int k) const { return k > 0 ? fwd_end_ms[k - 1] : 0.0; }
  double fwd_position_ms(int k) const { return fwd_end_ms[k] - fwd_begin_ms(k); }
  int num_states() const { return static_cast<int>(states.size()); }
  int64_t state_bytes(int s) const { return plan->values[states[s].value].bytes; }
  // Forward position -> the fvals it produces (the inverse of `producer`).
  std::vector<std::vector<int>> values_by_producer() const;
  // The smallest budget any schedule could meet: what each step must hold at least (a lower bound), and the plan
  // node of the step that holds the most (-1 when there is none).
  struct LowerBound {
    int64_t bytes = 0;
    int node = -1;
  };
  LowerBound lower_bound() const;
  int64_t lower_bound_bytes() const { return lower_bound().bytes; }
};

// Turns offload on (the copies priced with the link's figures while a kernel runs; host_limit_bytes: 0 = none).
// timing: where each copy of a value releases its device memory in stage 0 (offload_at) and from where a copy back
// takes it (prefetch_first) - CopyTiming.
void enable_offload(CheckpointProblem& p, const HostLink& link, int64_t host_limit_bytes,
                    CopyTiming timing = CopyTiming::hidden);
// p's offload (link, host limit, window) with copy timing `timing`.
CheckpointProblem with_copy_timing(const CheckpointProblem& p, CopyTiming timing);
// p.parameter_offers, p.fetch_spans and the state spans from p.states (enable_offload calls it; call it again after
// changing them).
void index_state_offers(CheckpointProblem& p);
// The distinct spans of n items (span(i): {first, last}, or nullopt where item i has none), each with the items
// whose spans lie within it, by span.
std::vector<NestedSpan> nested_spans(int n, const std::function<std::optional<std::pair<int, int>>(int)>& span);
// A copy from the host on offer: fval f prefetched into step `need`, from the start of step `first`, taking `ms`.
struct CopyIn {
  int need = 0, first = 0, f = -1;
  double ms = 0;
};
// Every prefetch p offers (from prefetch_first), by need. (The resident values' copies: state_in_spans.)
std::vector<CopyIn> copy_in_offers(const CheckpointProblem& p);
// p without offload: the same steps, values and window, no copies to offer. Its assignments are p's without copies
// (lift_to with p gives them p's form).
CheckpointProblem without_offload(const CheckpointProblem& p);

struct Assignment;
// Bytes of the offloaded optimizer state away from the device in step t (t = -1: stage 0, at its start): a's Q, less
// the offers whose span [first, last] holds t (a parameter's holds stage 0 from position `fetch`).
int64_t states_away(const CheckpointProblem& p, const Assignment& a, int t);

// The auto window's limit on recomputation candidates (R variables), fitted on the zoo's estimated profiles:
// ResNet-50 b184 gets 10 levels, GoogLeNet b320 5, MobileNetV2 b272 11, UNet b11 52, VGG-16 b176 none (what that
// gains and costs within 60 s: schedules/SOLVER-notes.md, 2026-11-23, "the window in levels").
constexpr int64_t kAutoWindowCandidates = 1800;
constexpr int kAutoWindow = -1;

// window: W levels (see above); 0: none (every ancestor may be recomputed); kAutoWindow: the largest window whose
// problem offers at most kAutoWindowCandidates recomputation candidates (auto_window). impls: offer every
// implementation of every node (else each runs its default). step_windows (one per step, 0 = none; empty: every step
// has `window`): step t's own window, as make_problem(plan, step_windows[t]) would give it.
CheckpointProblem make_problem(const PlanGraph& plan, int window, bool impls = false,
                               const std::vector<int>& step_windows = {});

// The recomputation candidates (R variables) in all that make_problem(plan, window) offers, counted on the
// problem without a window (unwindowed: make_problem(plan, 0)).
int64_t window_candidates(const CheckpointProblem& unwindowed, int window);
// The largest window whose problem offers at most max_candidates recomputation candidates: 0 (none) when the
// problem without a window does, else the most levels that do (at least 1).
int auto_window(const CheckpointProblem& unwindowed, int64_t max_candidates);

// The problem with every step's implementation fixed to impl[t] and every forward node's to fwd[k] (empty: the
// defaults): a single-implementation problem whose variables (S, R) are a subset of p's, so its assignments are
// p's assignments with M = impl and P = fwd. Within a step it counts what the fixed implementation reads; with
// as_counted_by_p, as p counts it (p's read, used and freed_after: a value recomputed in a step whose node another
// implementation reads stays counted until the node), so that its peak of an assignment is p's and what fits its
// budget fits p's (its memory rows are p's with M and P fixed).
CheckpointProblem fix_impls(const CheckpointProblem& p, const std::vector<int>& impl, const std::vector<int>& fwd = {},
                            bool as_counted_by_p = false);
// Sets fwd[k] of every forward node with a lean run to p.lean_choice(k, impl) (fwd empty: the defaults first), so
// that the forward implementations agree with the steps' (what evaluate() requires and the MILP's rows `lean_`).
std::vector<int> settle_lean(const CheckpointProblem& p, const std::vector<int>& impl, std::vector<int> fwd);

struct Assignment {
  std::vector<std::vector<char>> S;  // [t][fval]
  std::vector<std::vector<char>> R;  // [t][forward position]
  std::vector<int> M;                // [t]: implementation of step t's node
  std::vector<int> P;                // [forward position]: implementation of the forward node (every run of it)
  // Offload (empty when the problem has none): H[f] = f copied to the host when its stage-0 life ends; G[t][f] = f
  // copied back during step t-1, present entering step t.
  std::vector<char> H;               // [fval]
  std::vector<std::vector<char>> G;  // [t][fval]
  std::vector<char> Q;               // [state]: its home is the host (CheckpointProblem::states)
  bool on_host(int f) const { return !H.empty() && H[f]; }
  bool prefetched(int t, int f) const { return !G.empty() && G[t][f]; }
};
Assignment empty_assignment(const CheckpointProblem& p);
// An assignment of without_offload(p) as an assignment of p: nothing copied.
Assignment lift_to(const CheckpointProblem& p, Assignment a);

// The window each step of an assignment needs: the levels between the lowest level step t reads (under any
// implementation) and the lowest it recomputes, at least `base` (> 0). Counted on the problem without a window.
std::vector<int> windows_needed(const CheckpointProblem& unwindowed, const Assignment& a, int base);

// Drops kept values after their last actual use (read by a step, or input of a recomputation): never changes
// feasibility or time, only lowers memory.
void trim(const CheckpointProblem& p, Assignment& a);

// The fval that candidate i of step t overwrites, or -1: rec_in_place[t][i] = f when the candidate and f's producer
// are recomputed in the step (R = R[t]) and f is not kept on (next = S[t+1], null for the last step).
int in_place_at(const CheckpointProblem& p, int t, size_t i, const std::vector<char>& R, const std::vector<char>* next);

// The peak of step t as the MILP counts it: S = S[t] (with the values prefetched into step t), R = R[t], next =
// S[t+1] (null for the last step), impl = M[t], fwd = P (null: the forward nodes' defaults), incoming = the bytes
// being prefetched during step t for later steps (counted at every point of the step).
int64_t step_peak(const CheckpointProblem& p, int t, const std::vector<char>& S, const std::vector<char>& R,
                  const std::vector<char>* next, int impl, const std::vector<int>* fwd = nullptr,
                  int64_t incoming = 0);

// Stage 0's copies to the host on their stream, in pieces, the earliest deadline first (as plan_copies issues
// them, a piece at a time): each copy runs in the node times of its out_slots, and where the copies due at
// position k have not ended by its end, the compute stream waits for them there (wait[k]; the stream runs them
// meanwhile). run[k]: how long each copy (fval, ms) runs in position k, its wait included. This schedule waits
// the least of any that splits the copies anywhere: the earliest deadline first ends every copy due by a
// position as early as any order can. A position's time is its node's under the implementation P gives it (null:
// the defaults).
struct Stage0Copies {
  std::vector<double> wait;                               // [k], k = 0..F
  std::vector<std::vector<std::pair<int, double>>> run;   // [k]: (fval, ms)
  double total = 0;                                       // sum of wait
};
// H: fval -> offloaded; P: forward position -> implementation.
Stage0Copies stage0_copies(const CheckpointProblem& p, const std::vector<char>& H,
                           const std::vector<int>* P = nullptr);

// The time the compute stream waits for copies, as the MILP prices them (its W columns):
// Every node's time is its chosen implementation's (a step's M, a forward node's P, also where it is recomputed).
// - Stage 0's copies to the host: fwd = stage0_copies(p, a.H, &a.P).total (its waits, position by position).
// - The prefetches share one stream: for each span [a, b] of copy_in_spans, the copies chosen within it (from a
//   start at or after a, into a step at or before b) take no longer than steps a..b-1 (their nodes, recomputations
//   and waits). The resident values at home on the host share two more, each over its spans: on
//   the optimizer state's stream, the copies in whose offers lie within [first, u] take no longer than steps
//   first..u-1 (state_in_spans); on the stream to the host, the copies out whose offers lie within [u+1, last] no
//   longer than steps u+1..last (state_out_spans).
//   Step t starts at begin_ms[t] = max(begin_ms[t-1] + its node's and recomputations' time, max over the spans
//   ending at t of begin_ms[a] + their copies' time), and step[t-1] is what that adds (begin_ms[T]: the end of the
//   last step, step[T-1] the wait there for copies out).
// Not a bound on the engine's waits (time_streams) either way. A copy to the host may wait behind a piece of one
// due later that is already on the stream (at most one piece; pieces are not split); each copy from
// the host is issued at the start of its first step, so one may wait behind a copy started earlier over a span not
// within its own; and the spans of the resident values' copies add up only where they nest. But a value copied back
// counts as needed from the step it is first present in, where the engine waits only at its first reader.
// Hidden copies cost no step time, but they take the link and host memory: each offload costs this share of its
// copies' time in the objective (`preference`, not a wait), so that of two schedules equal in time the one with
// fewer copies is the optimum.
constexpr double kCopyPreference = 1e-3;
// The longest span of a prefetch before its use, in steps. (The resident values' spans follow their copies' times
// alone: each of a few hundred values adds a term to the rows of the steps its span holds, where a copy back adds
// one to each step's rows for every step of its span.)
constexpr int kCopySpanSteps = 16;
struct CopyWaits {
  double fwd = 0;
  std::vector<double> step;      // [t]: after step t
  std::vector<double> begin_ms;  // [t]: when step t starts, from the start of step 0 ([T]: the last one ends)
  // The parameters' copies in (fetch_spans): max(0, max over the spans [fetch, reader] of the copies within - the
  // time from the start of position fetch to the start of the reader). A wait of stage 0 (before its start).
  double parameters_in = 0;
  double preference = 0;     // kCopyPreference x the offloaded values' copy times
  double total() const;      // the waits (fwd + steps)
};
CopyWaits copy_waits(const CheckpointProblem& p, const Assignment& a);

// A kept value idle from the forward pass's end to its first use at step u >= 1 offloaded instead: copied to the
// host when its stage-0 life ends and back over the steps prefetch_first(u, f)..u-1. Memory never rises (the value
// counts in those steps as it did kept into step u, and no longer before); the copies may add waits. The optimizer state goes to the host too
// (Q = 1 for each value's widest offer: it counts only in that span). Both within the host limit. For warm starts
// under offload.
Assignment offload_idle_kept(const CheckpointProblem& p, Assignment a);
// The same with only as many of those values offloaded as bring the peak within budget_bytes: the ones used last
// first (those with the most time for their copies each way), the fewest that fit (a bisection: each offload never
// raises memory). The optimizer state goes to the host as above. Where even all of them do not fit, all of them.
Assignment offload_idle_kept(const CheckpointProblem& p, Assignment a, int64_t budget_bytes);

struct Evaluation {
  bool feasible = false;
  std::string violation;     // the first constraint broken, when infeasible
  int64_t peak_bytes = 0;    // the conservative peak the MILP counts
  // Time beyond every node once by default: recomputations + implementation deltas + waits for copies (the MILP's
  // objective).
  double recompute_ms = 0;
  double copy_wait_ms = 0;   // of which waits for copies (offload)
  int64_t host_bytes = 0;    // bytes offloaded, optimizer state included (the host limit's count)
};

// Checks every constraint procedurally (independently of the MILP's rows) and counts the conservative peak.
Evaluation evaluate(const CheckpointProblem& p, const Assignment& a);

// The schedule of an assignment: stage 0, then per step the recomputations, the step's node and the frees.
Schedule extract_schedule(const CheckpointProblem& p, const Assignment& a, const std::string& mode);

}  // namespace monet
