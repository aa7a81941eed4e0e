// Schedules without a MILP: store-all, checkpoints with on-demand recomputation (Chen et al. 2016's sqrt(n)
// segments and other segment lengths). They are baselines, and the MILP's warm start.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "solve/problem.h"

namespace monet {

// When a search gives up and returns the best it has (the solve's time limit; none by default).
using Deadline = std::chrono::steady_clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();
inline bool past(Deadline d) { return d != kNoDeadline && std::chrono::steady_clock::now() >= d; }

// The assignment builders below (store-all, checkpoints, segments, rankings) need a problem without
// implementation choices (each step's reads fixed; see fix_impls); best_heuristic and smallest_heuristic_peak
// take any problem and try several implementation policies.

// Every value kept from its production to its last backward reader; nothing recomputed.
Assignment store_all_assignment(const CheckpointProblem& p);

// Keeps the forward values in `checkpoints` after the forward pass (until their last use); every other value a
// step reads is recomputed on demand from what is present, then kept until its last backward reader.
// nullopt when a needed recomputation falls outside the problem's window.
// keep_recomputed = false: a recomputed value is dropped when its step ends (recomputed again if read again).
// On failure, *missing (if given) names the forward value whose recomputation fell outside the window.
std::optional<Assignment> checkpoint_assignment(const CheckpointProblem& p, const std::vector<char>& checkpoints,
                                                bool keep_recomputed = true, int* missing = nullptr);

// checkpoint_assignment, repaired: every value that falls outside the window becomes a checkpoint too, until
// the policy succeeds (it always does once enough is kept).
Assignment repaired_assignment(const CheckpointProblem& p, std::vector<char> checkpoints, bool keep_recomputed);

// Ranks the forward values by a score (higher = keep first) and tries checkpoint sets made of the best-ranked
// prefixes: returns the cheapest assignment that fits the budget. With LP scores (S[0][v] of the relaxation)
// this is LP-guided rounding; with recompute-time-per-byte scores a greedy that drops cheap, large values first.
// The largest fitting prefix is found first; past the deadline, once one fits, the other prefixes are left out.
std::optional<Assignment> ranked_assignment(const CheckpointProblem& p, int64_t budget_bytes,
                                            const std::vector<double>& score, Deadline deadline = kNoDeadline);
std::vector<double> cost_per_byte_scores(const CheckpointProblem& p);

// Greedy drop order: starting from every value backward reads, repeatedly drop the one whose recomputation
// chain (its producer plus every dropped ancestor back to kept or resident values) costs least per byte freed.
// Returns scores for ranked_assignment (kept first = dropped last).
std::vector<double> greedy_chain_scores(const CheckpointProblem& p);

// What pressure_assignment evicts first when memory runs short (lowest score first). cost = time to recompute the
// value from what is present now (its producer and every missing ancestor), dist = steps until its next read.
enum class Eviction {
  cost_per_byte_distance,  // cost / (bytes * dist): DTR's rule with the next read for staleness
  cost_per_byte,           // cost / bytes
  farthest_read,           // Belady: the value read last (ties: the larger)
};
constexpr Eviction kEvictions[] = {Eviction::cost_per_byte_distance, Eviction::cost_per_byte, Eviction::farthest_read};

// Keeps every value while memory allows and evicts under pressure (in the manner of Kirisame et al.'s Dynamic
// Tensor Rematerialization, but planned ahead on exact bytes): stage 0 keeps each value after its last forward
// reader unless the budget is reached, when `rule` picks what to drop; each backward step recomputes what it
// reads and is missing (from what is present), then evicts, by `rule`, values it does not use until its
// conservative peak fits. When a step fails (a recomputation outside the window, or over budget with only what it
// uses), one value is pinned (not evicted up to that step: the missing value, or the recomputed value whose
// presence shrinks the step most) and the pass starts again. nullopt when no pin helps.
// pressure_assignment, then a local search over pins: keep a value some step recomputes until that step (the steps
// that recompute most first) and run again; the first move that lowers the time is taken, until no move does or
// max_runs runs have been made, or the deadline has passed.
std::optional<Assignment> pressure_search(const CheckpointProblem& p, int64_t budget_bytes, Eviction rule,
                                          int max_runs, Deadline deadline = kNoDeadline);

std::optional<Assignment> pressure_assignment(const CheckpointProblem& p, int64_t budget_bytes, Eviction rule);

// Checkpoints = the outputs of every `segment`-th forward node (positions segment-1, 2*segment-1, ...).
std::optional<Assignment> segment_assignment(const CheckpointProblem& p, int segment);

// Chen et al.'s sqrt(n) baseline: segments of round(sqrt(F)) forward nodes.
std::optional<Assignment> sqrtn_assignment(const CheckpointProblem& p);

// An implementation for every step (M) and every forward node (P).
struct ImplPolicy {
  std::vector<int> M, P;
  auto operator<=>(const ImplPolicy&) const = default;
};

// Implementation policies for a problem with choices: every node's default; a greedy that gives each step the
// implementation whose reads other steps share (fewest bytes read by it alone), with the forward nodes' defaults
// and, where forward nodes have choices, with each forward node's least-workspace implementation (ties: the
// faster); and, when lp_impl ([t][i], the relaxation's M) and lp_fwd ([k][i], its P) are given, the relaxation's
// largest M per step and P per forward node.
std::vector<ImplPolicy> impl_policies(const CheckpointProblem& p, const std::vector<std::vector<double>>& lp_impl = {},
                                      const std::vector<std::vector<double>>& lp_fwd = {});

// Under offload: a's recomputations in the backward pass replaced by copies, one node at a time (the costliest
// first): a node's first recomputation, in step t, is dropped and its outputs are kept from the forward pass, either
// offloaded when their stage-0 life ends and prefetched into t (where each may be), or held on the device, with the
// fewest idle kept values offloaded that bring the schedule within the budget where it is over (offload_idle_kept);
// either way each other recomputation of step t that only fed it is dropped. The faster of the two is kept where
// the schedule stays within the budget and gets faster, its copies' waits counted (evaluate); passes over the
// nodes repeat until none changes. a must fit the budget (else it is returned as it is); the deadline stops the
// search where it is.
Assignment copies_for_recomputations(const CheckpointProblem& p, Assignment a, int64_t budget_bytes,
                                     Deadline deadline = kNoDeadline);

// The cheapest of store-all, every segment length, the rankings and pressure_search under each eviction rule
// that fits the budget (conservative peak), if any, under each implementation policy: every policy's quick ones
// (store-all, segments, rankings) first, then the pressure searches. Past the deadline the quick ones run only until
// something fits and the pressure searches stop where they are. `known` (a schedule found before, such as the budget
// bracket's) is a candidate too: with it, past the deadline everything stops.
// Under offload, the cheapest is then tried with copies in place of recomputations (copies_for_recomputations).
std::optional<Assignment> best_heuristic(const CheckpointProblem& p, int64_t budget_bytes,
                                         Deadline deadline = kNoDeadline,
                                         const std::optional<Assignment>& known = std::nullopt);

// What an LP relaxation adds to known = best_heuristic(p, budget_bytes) (nullopt when nothing fit): LP-guided
// rounding with lp_scores under every policy, and every heuristic under the relaxation's implementation policy
// (lp_impl, lp_fwd) when it is new. Returns the cheapest, known on ties. Past the deadline it stops once something
// fits (known included).
std::optional<Assignment> improve_with_lp(const CheckpointProblem& p, int64_t budget_bytes,
                                          const std::optional<Assignment>& known, const std::vector<double>& lp_scores,
                                          const std::vector<std::vector<double>>& lp_impl,
                                          const std::vector<std::vector<double>>& lp_fwd,
                                          Deadline deadline = kNoDeadline);

// The lowest conservative peak among store-all, every segment length and pressure_assignment (bisected over the
// budget, each eviction rule), under each implementation policy, under offload each also with its idle kept values
// offloaded (offload_idle_kept): a budget that is certainly feasible. Past the
// deadline the bisections stop (the result stays feasible, possibly higher). With `enough_bytes`, the search stops
// at the first peak within it: a budget the heuristics reach needs no smaller one (solve() asks this way; on
// swin_t b16 the full bisection took a fifth of every time limit).
// `within`, when given, receives that schedule (a warm-start candidate).
int64_t smallest_heuristic_peak(const CheckpointProblem& p, Deadline deadline = kNoDeadline, int64_t enough_bytes = 0,
                                std::optional<Assignment>* within = nullptr);

// Whether the pressure heuristic plans a schedule within budget_bytes: one pressure_assignment per eviction rule and
// implementation policy (no search, no bisection: under a second on GPT-2's 1000-node graph), the fastest of those
// that fit (with its implementations), or nullopt when none does (or the deadline passed first).
std::optional<Assignment> pressure_fits(const CheckpointProblem& p, int64_t budget_bytes,
                                        Deadline deadline = kNoDeadline);

}  // namespace monet
