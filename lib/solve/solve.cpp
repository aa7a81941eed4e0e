// The solve pipeline (docs/planner.md, "The solve pipeline"): solve() runs its phases, one function each; the
// MILP phases hand CBC (cbc.h) the warm start, the chain cuts, the neighbourhoods and the fixed-implementations phase.
#include "solve/solve.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "core/units.h"
#include "schedule/streams.h"
#include "solve/heuristics.h"
#include "solve/milp.h"

namespace monet {

namespace {

// Forward positions per neighbourhood of the search before CBC's: 20 improved unet b11 at 1/2 (checkpoint, 60 s)
// from +8.32% to +7.39%; 40 made each sub-MIP run to its time limit without improving.
constexpr int kWindowLayers = 20;
// The search is skipped when the warm start is within this share of store-all's step time of the bound after the
// root cuts: mobilenet_v2 b272 checkpoint at 2/3 was proven optimal in 8.7 s without the search, 23.2 s with it.
constexpr double kSearchMinGapShare = 1e-3;

void finish(SolveOutcome& out, const PlanGraph& plan, const CheckpointProblem& p, const Assignment& a,
            const std::string& mode, int64_t budget) {
  Evaluation e = evaluate(p, a);
  MONET_CHECK(e.feasible, "solution violates: ", e.violation);
  out.schedule = extract_schedule(p, a, mode);
  out.predicted = simulate(plan, out.schedule);
  MONET_CHECK(out.predicted.peak_bytes <= e.peak_bytes, "simulated peak above the formulation's bound");
  MONET_CHECK(out.predicted.host_peak_bytes <= e.host_bytes, "simulated host bytes above the formulation's");
  // The step as the engine runs it: its copies on their streams in the order it issues them (which the program's
  // rows leave out: the copies of ResNet-50 b184 at 2.95 GB on the H200 waited 89.6 ms on the streams, 62.6 ms in
  // the program, and 89.6 matched the measured step within 1%, schedules/gpu-runs/2026-11-27_h200).
  // Its copies are issued in pieces by deadline where that is the faster on the streams (plan_copies): on the
  // H200 profiles, ResNet-50 b184 at 2.95 GB 197.9 -> 175.0 ms, UNet b11 at 5.01 GB 224.2 -> 204.1 ms, as against
  // each copy whole when its value is written or its prefetch step comes. Of the piece sizes, the fastest on the
  // streams: a smaller piece costs a latency more per piece, a larger one holds up a copy due sooner longer.
  out.program_wait_ms = e.copy_wait_ms;
  if (p.offload() && out.predicted.transfers > 0) {
    StreamTimes st = time_streams(plan, out.schedule, p.link);
    const Schedule whole = out.schedule;
    for (const int64_t piece_bytes : kCopyPieceSizes) {
      Schedule pieces = whole;
      pieces.copy_plan = plan_copies(plan, whole, p.link, piece_bytes);
      const StreamTimes in_pieces = time_streams(plan, pieces, p.link);
      if (in_pieces.step_ms < st.step_ms) {
        out.schedule = std::move(pieces);
        st = in_pieces;
      }
    }
    out.copy_wait_ms = st.wait_ms;
    out.copy_wait_to_host_ms = st.wait_to_host_ms;
    out.copy_wait_to_device_ms = st.wait_to_device_ms;
    out.objective_ms = st.step_ms;
  } else {
    out.copy_wait_ms = out.copy_wait_to_host_ms = out.copy_wait_to_device_ms = 0;
    out.objective_ms = out.predicted.time_ms;
  }
  for (const Step& st : out.schedule.steps)
    if (st.kind == Step::Kind::compute && (st.impl != 0 || st.algo >= 0))
      ++out.implementations[plan.nodes[st.id].op + ":" +
                            plan.nodes[st.id].impl_name(plan.nodes[st.id].impl_for(st.impl, st.algo))];
  out.fits = budget <= 0 || out.predicted.peak_bytes <= budget;
  out.assignment = a;
}

// The neighbourhoods of the search before CBC's: windows of kWindowLayers consecutive forward positions (half
// overlapping), each with every column about them: their recomputations, the keeps of their outputs, the K and Y
// columns of those outputs and recomputations, the implementation of every step that reads one of them and the
// implementations of the window's forward nodes; with `copies`, also the offload columns about them (H, G, and Q of
// the optimizer state counted in the steps that read them).
// (Windows of consecutive steps instead never improved a warm start on resnet50, googlenet or unet: what a
// schedule trades is a layer's outputs kept against recomputations over every step that uses them.)
std::vector<std::vector<int>> layer_windows(const CheckpointProblem& p, const MilpLayout& m, bool copies) {
  std::vector<std::vector<int>> out;
  const int F = p.num_fwd(), T = p.num_steps();
  for (int a = 0; a < F; a += kWindowLayers / 2) {
    const int b = std::min(F, a + kWindowLayers);
    auto in = [&](int k) { return k >= a && k < b; };
    std::vector<int> cols;
    for (int t = 0; t < T; ++t) {
      bool touches = false;
      for (int k = a; k < b; ++k)
        if (m.R[t][k] >= 0) cols.push_back(m.R[t][k]);
      for (size_t f = 0; f < p.fvals.size(); ++f)
        if (in(p.producer[f])) {
          if (m.S[t][f] >= 0) cols.push_back(m.S[t][f]);
          if (p.read[t][f]) touches = true;
        }
      if (touches)
        for (int c : m.M[t]) if (c >= 0) cols.push_back(c);
      // The optimizer state counted there, the parameters away there.
      for (int q = 0; q < static_cast<int>(m.Q.size()) && touches && copies; ++q)
        if (p.states[q].covers(t) != p.states[q].parameter()) cols.push_back(m.Q[q]);
      for (auto [f, c] : m.K[t]) if (in(p.producer[f])) cols.push_back(c);
      for (auto [i, c] : m.Y[t]) if (in(p.candidates[t][i])) cols.push_back(c);
      for (size_t f = 0; f < p.fvals.size() && !m.G.empty() && copies; ++f)
        if (in(p.producer[f]) && m.G[t][f] >= 0) cols.push_back(m.G[t][f]);
      for (const auto& [i, zs] : m.Z[t])
        if (in(p.candidates[t][i])) cols.insert(cols.end(), zs.begin(), zs.end());
    }
    for (int k = a; k < b; ++k) cols.insert(cols.end(), m.P[k].begin(), m.P[k].end());
    for (size_t f = 0; f < m.H.size() && copies; ++f)
      if (in(p.producer[f]) && m.H[f] >= 0) cols.push_back(m.H[f]);
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    out.push_back(std::move(cols));
    if (b >= F) break;
  }
  return out;
}

// The search's neighbourhoods: the windows with the incumbent's copies held, and under offload then the same windows
// with their copies free. The sub-programs of the first kind are as quick as without offload (their copy columns
// fixed, the copy rows fall away); on resnet50 b184 at 4.99 GB those with copies free got through 0 to 4 nodes in
// 5 s and never improved the warm start, the ones without them improved it (schedules/cpu-runs/
// 2026-11-27_wide_prefetch/lp_speed).
std::vector<std::vector<int>> search_windows(const CheckpointProblem& p, const MilpLayout& m) {
  std::vector<std::vector<int>> out = layer_windows(p, m, false);
  if (p.offload())
    for (std::vector<int>& w : layer_windows(p, m, true)) out.push_back(std::move(w));
  return out;
}

// make_problem with the solve's offload, if any.
CheckpointProblem problem_for(const PlanGraph& plan, const std::vector<int>& store_all_impls, int window, bool impls,
                              const SolveOptions& o, const std::vector<int>& step_windows = {}) {
  CheckpointProblem p = make_problem(plan, window, impls, step_windows);
  p.store_all_impls = store_all_impls;
  if (o.offload) enable_offload(p, *o.offload, o.host_limit_bytes, o.copy_timing.value_or(CopyTiming::hidden));
  return p;
}

struct Widened {
  CheckpointProblem problem;
  Assignment start;  // the heuristic's schedule within the budget, an assignment of `problem`
  int64_t peak_bytes;
};

// The auto window widened to the budget. A window chosen by size alone can exclude every schedule of a tight
// budget: a transformer layer spans tens of levels, and GPT-2 b8 at 1/3 of its store-all has a heuristic schedule
// only without a window. The window doubles from `from` levels, up to none, until the pressure heuristic plans a
// schedule within the budget; then each step gets the window that schedule needs there, at least `from`
// (windows_needed): on GPT-2 at 1/3, 12 of 441 steps recompute from further back, and the program has 23.6K columns
// instead of the 139K of no window. The problem and the schedule, or nullopt when no window gets one before the
// deadline.
std::optional<Widened> widen_window(const PlanGraph& plan, const CheckpointProblem& unwindowed, bool impls, int from,
                                    int64_t budget_bytes, Deadline deadline, const SolveOptions& o) {
  if (from <= 0) return std::nullopt;
  const int64_t every = window_candidates(unwindowed, 0);
  for (int w = 2 * from; !past(deadline); w *= 2) {
    const bool all = window_candidates(unwindowed, w) >= every;
    std::optional<Assignment> a = pressure_fits(
        all ? unwindowed : problem_for(plan, unwindowed.store_all_impls, w, impls, o), budget_bytes, deadline);
    if (a) {
      const std::vector<int> windows = windows_needed(unwindowed, *a, from);
      CheckpointProblem q = problem_for(plan, unwindowed.store_all_impls, from, impls, o, windows);
      trim(q, *a);  // keeps past a value's last use in q (its candidates are fewer) dropped
      const Evaluation e = evaluate(q, *a);
      if (!e.feasible || e.peak_bytes > budget_bytes) return std::nullopt;  // cannot happen: q offers what a does
      int widened = 0, widest = from;
      for (int x : windows) {
        widened += x > from;
        widest = std::max(widest, x);
      }
      spdlog::info("window widened at {} steps (up to {} levels; {} elsewhere): the heuristics plan no schedule within "
                   "the budget in {} levels", widened, widest, from, from);
      return Widened{std::move(q), std::move(*a), e.peak_bytes};
    }
    if (all) return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

// Its root cuts reach a bound the joint program's do not (resnet50 b184 at 1/3: 117.9 against 117.0 ms), and its
// search finds schedules the joint search does not (schedules/SOLVER-notes.md, 2026-11-24, "the implementations fixed after the search").
FixedImpls improve_with_fixed_impls(const CheckpointProblem& p, const Assignment& a, int64_t budget_bytes,
                                    double seconds, int threads, double neighborhood_min_gap, int64_t max_nodes,
                                    int max_sub_mips) {
  using Clock = std::chrono::steady_clock;
  const auto called = Clock::now();
  // Memory counted as the joint program counts it: what fits q's budget fits p's rows.
  const CheckpointProblem q = fix_impls(p, a.M, a.P, true);
  MilpLayout layout;
  const LinearProgram lp = checkpoint_milp(q, budget_bytes, &layout);
  Assignment start = a;  // q's assignments have one implementation everywhere
  std::fill(start.M.begin(), start.M.end(), 0);
  std::fill(start.P.begin(), start.P.end(), 0);
  CbcOptions o;
  // Within `seconds` with what building q took: CBC's process is stopped just after its limit.
  o.time_limit_s = std::max(0.5, seconds - 1 - std::chrono::duration<double>(Clock::now() - called).count());
  o.threads = threads;
  o.max_nodes = max_nodes;
  o.max_sub_mips = max_sub_mips;
  o.after_relaxation = [&](const std::vector<double>&, double) { return to_columns(q, layout, lp, start); };
  o.neighborhoods = search_windows(q, layout);
  o.separate = [&](const double* x, size_t max_cuts) { return chain_cuts(q, layout, x, max_cuts); };
  o.neighborhood_min_gap = neighborhood_min_gap;
  o.search_only = true;
  const CbcResult r = solve_with_cbc(lp, o, nullptr);
  FixedImpls out;
  // q's program is p's with a's implementations fixed (its objective counts from q.base_ms, which includes them).
  if (r.bound > kNoValue) out.bound_ms = q.base_ms + r.bound;
  if (r.x.empty()) return out;
  Assignment b = from_columns(q, layout, r.x);
  b.M = a.M;
  b.P = a.P;
  const Evaluation e = evaluate(p, b);
  if (e.feasible && e.peak_bytes <= budget_bytes && e.recompute_ms < evaluate(p, a).recompute_ms - 1e-9)
    out.better = std::move(b);
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// The solve's clock: seconds since it began, and the deadlines of the heuristics' shares of the time limit. The
// heuristics run before CBC, outside its clock: they get shares of the time limit and then return what they have
// (the smallest-peak search a fifth of it, the warm start up to half, what the LP relaxation adds to it up to four
// fifths), so the limit holds for short limits too. Building the program (the setup) is not interrupted.
struct SolveClock {
  Clock::time_point start = Clock::now();
  double limit_s = 0;
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
  Deadline share(double fraction) const {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_s * fraction));
  }
};

// 1. Setup: the problem, with the auto window (or the one asked for); `unwindowed` keeps the problem without a
// window when the auto window was chosen (its widening starts from it).
CheckpointProblem set_up(const PlanGraph& plan, const std::vector<int>& store_all_impls, const SolveOptions& o,
                         bool milp, bool impls, std::optional<CheckpointProblem>& unwindowed) {
  if (!milp || o.window != kAutoWindow) return problem_for(plan, store_all_impls, milp ? o.window : 0, impls, o);
  unwindowed = problem_for(plan, store_all_impls, 0, impls, o);
  const int w = auto_window(*unwindowed, o.auto_window_candidates);
  return w == 0 ? *unwindowed : problem_for(plan, store_all_impls, w, impls, o);
}

// 2. Smallest feasible budget: the lowest peak the heuristics reach (or the first within the budget), and where the
// budget is below it the window widened until they reach the budget (widen_window). The schedule that reached the
// budget, or the one the window was widened for: a warm-start candidate.
std::optional<Assignment> bracket_budget(const PlanGraph& plan, const SolveOptions& o, const SolveClock& clock,
                                         bool milp, bool impls, const std::optional<CheckpointProblem>& unwindowed,
                                         CheckpointProblem& p, SolveOutcome& out) {
  std::optional<Assignment> widened_start;
  out.smallest_found_bytes = smallest_heuristic_peak(p, clock.share(0.2), o.budget_bytes, &widened_start);
  if (milp && o.window == kAutoWindow && o.budget_bytes < out.smallest_found_bytes &&
      o.budget_bytes >= out.lower_bound_bytes)
    if (std::optional<Widened> w =
            widen_window(plan, *unwindowed, impls, p.window, o.budget_bytes, clock.share(0.3), o)) {
      p = std::move(w->problem);
      out.smallest_found_bytes = std::min(out.smallest_found_bytes, w->peak_bytes);
      widened_start = std::move(w->start);
    }
  out.window = p.window;
  for (int w : p.step_windows)
    if (w != p.window) {
      ++out.widened_steps;
      out.widened_levels = std::max(out.widened_levels, w);
    }
  return widened_start;
}

// Under offload, a budget at or above the lower bound that the heuristics plan nothing within with copies timed to
// hide them: a leaner copy timing (CopyTiming), tried from the fewest waits to the least memory - lean_out (copies
// to the host release their memory at the value's last stage-0 reader), lean_in (copies back take it from the step
// before their reader), lean (both) - is taken at the first whose heuristics plan a schedule within the budget, with
// that schedule as the warm start; where none does, the one whose heuristics reach the lowest peak below hidden
// timing's (no warm start then). Their waits make them slower wherever the hidden timing has a schedule, so they are
// taken only below that one's floor; the MILP may then still find one with hidden timing that the heuristics did
// not, which this leaves out.
void lean_copies_below_floor(const SolveOptions& o, const SolveClock& clock, CheckpointProblem& p,
                             std::optional<Assignment>& start, SolveOutcome& out) {
  if (o.budget_bytes < out.lower_bound_bytes || out.smallest_found_bytes <= o.budget_bytes) return;
  const int64_t hidden_smallest = out.smallest_found_bytes;
  std::optional<CheckpointProblem> best;
  std::optional<Assignment> best_start;
  int64_t best_smallest = hidden_smallest;
  // Each timing's heuristics until a share of the limit: lean-out's 0.3, lean-in's 0.33, lean's (the likeliest to
  // reach a low peak) 0.4; each stops at its first schedule within the budget. Below the hidden floor the program
  // without copies (until kWithoutCopiesShare) rarely finds a schedule: its share is what these take.
  const std::pair<CopyTiming, double> leaner[] = {
      {CopyTiming::lean_out, 0.3}, {CopyTiming::lean_in, 0.33}, {CopyTiming::lean, 0.4}};
  for (const auto& [timing, until] : leaner) {
    CheckpointProblem q = with_copy_timing(p, timing);
    std::optional<Assignment> q_start;
    const int64_t smallest = smallest_heuristic_peak(q, clock.share(until), o.budget_bytes, &q_start);
    spdlog::info("offload: the heuristics' smallest peak with copies timed to hide them {}, with {} copy timing {}{}",
                 format_bytes(hidden_smallest), copy_timing_name(timing), format_bytes(smallest),
                 q_start ? ": within the budget, the program takes it" : "");
    out.smallest_found_bytes = std::min(out.smallest_found_bytes, smallest);  // a budget some schedule meets
    if (q_start) {
      best = std::move(q);
      best_start = std::move(q_start);
      break;
    }
    // Below both floors a leaner program still has every schedule of the hidden one, in no more memory: where its
    // heuristics reach lower, CBC looks there.
    if (smallest < best_smallest) {
      best_smallest = smallest;
      best = std::move(q);
    }
  }
  if (!best) return;
  if (!best_start)
    spdlog::info("offload: the program takes {} copy timing, whose heuristics reached the lowest peak",
                 copy_timing_name(best->copy_timing));
  p = std::move(*best);
  start = std::move(best_start);
  out.copy_timing = copy_timing_name(p.copy_timing);
}

// The baselines without a MILP: store-all, and sqrt(n) segments.
void choose_store_all(SolveOutcome& out, const Schedule& store_all, int64_t budget_bytes) {
  out.schedule = store_all;
  out.predicted = out.store_all;
  out.objective_ms = out.bound_ms = out.predicted.time_ms;
  out.fits = budget_bytes <= 0 || out.predicted.peak_bytes <= budget_bytes;
  out.status = out.fits ? "optimal" : "infeasible";
  if (!out.fits) out.why_none = "mode";
}

void choose_sqrtn(SolveOutcome& out, const PlanGraph& plan, const CheckpointProblem& p, int64_t budget_bytes) {
  std::optional<Assignment> a = sqrtn_assignment(p);
  MONET_CHECK(a.has_value(), "sqrt(n) without a window cannot fail");
  finish(out, plan, p, *a, "sqrtn", budget_bytes);
  out.bound_ms = out.objective_ms;
  out.status = out.fits ? "feasible" : "infeasible";
  if (!out.fits) out.why_none = "mode";
}

// What the LP relaxation says about each decision LP-guided rounding takes: a score per forward value (its S[0],
// ties broken by cost per byte), and each step's and forward node's implementation shares (M, P).
struct LpGuide {
  std::vector<double> scores;
  std::vector<std::vector<double>> impl, fwd;
};

LpGuide lp_guide(const CheckpointProblem& p, const MilpLayout& layout, const std::vector<double>& relaxed) {
  LpGuide g;
  g.scores = cost_per_byte_scores(p);
  double top = *std::max_element(g.scores.begin(), g.scores.end());
  for (size_t f = 0; f < p.fvals.size(); ++f)
    g.scores[f] = (layout.S[0][f] >= 0 ? relaxed[layout.S[0][f]] : 0) + 1e-3 * g.scores[f] / std::max(top, 1e-30);
  g.impl.resize(p.num_steps());
  for (int t = 0; t < p.num_steps(); ++t) {
    g.impl[t].assign(p.num_impls(t), 0.0);
    for (size_t i = 0; i < layout.M[t].size(); ++i) g.impl[t][i] = relaxed[layout.M[t][i]];
  }
  g.fwd.resize(p.num_fwd());
  for (int k = 0; k < p.num_fwd(); ++k) {
    g.fwd[k].assign(p.num_fwd_impls(k), 0.0);
    for (size_t i = 0; i < layout.P[k].size(); ++i) g.fwd[k][i] = relaxed[layout.P[k][i]];
  }
  return g;
}

// The MILP's lower bound on the step time where CBC and the root rounds gave none: every node on its fastest
// implementation and no recomputation (the objective, recomputations + implementation deltas, is negative where
// the chosen implementations are faster than the defaults, so the bound may be too).
double fastest_impls_floor_ms(const CheckpointProblem& p) {
  double floor_ms = 0;
  for (const auto* impl_ms : {&p.impl_ms, &p.fwd_impl_ms})
    for (const std::vector<double>& ms : *impl_ms) floor_ms += *std::min_element(ms.begin(), ms.end());
  return floor_ms;
}

// The share of the time limit the program without copies gets first under --offload (solve_offload), and the
// most its schedule's recomputations may take to be traded for copies after it (copies_for_recomputations).
constexpr double kWithoutCopiesShare = 0.5, kCopiesForRecomputationsShare = 0.05;
// Where the heuristics plan no schedule without copies within the budget, the program without copies still gets
// this share: CBC may find one on its own soon (VGG-16 b176 at 7.88 GB: at 0.3 s), and a schedule without copies
// is what keeps --offload never slower than without it; where it finds none (UNet b11 at 5.01 GB: none in 60 s),
// the program with copies, a superset that starts from the heuristics' schedules that copy, gets the rest.
constexpr double kWithoutCopiesNoStartShare = 0.15;
// The program with copies' root cut rounds end by this share of its time: its LPs are slow (on UNet b11 at
// 5.01 GB its rounds took 45.6 s of 60, and the neighbourhood search improved the schedule only in the rest).
constexpr double kCopiesRootCutsShare = 0.4;

// Phases 3-9 for checkpoint and full mode, a budget at or above the lower bound.
// `chosen_out`, when given, receives the schedule's assignment. no_start_limit_s >= 0: where the heuristics plan no
// schedule within the budget, the rest (the LP relaxation, what it adds, CBC) ends by then (seconds from the
// clock's start) instead of by the clock's limit. lp_heuristics = false: what
// the relaxation adds to the warm start (improve_with_lp) stops once something fits, the start handed in included.
void solve_milp(const PlanGraph& plan, const CheckpointProblem& p, const SolveOptions& o, const SolveClock& clock,
                std::optional<Assignment> widened_start, SolveOutcome& out,
                std::optional<Assignment>* chosen_out = nullptr, double no_start_limit_s = -1,
                bool lp_heuristics = true) {
  auto seconds = [&] { return clock.seconds(); };
  MilpLayout layout;
  LinearProgram lp = checkpoint_milp(p, o.budget_bytes, &layout);
  out.columns = static_cast<int64_t>(lp.col_names.size());
  out.rows = static_cast<int64_t>(lp.rows.size());
  out.nonzeros = lp.nonzeros();
  out.setup_s = seconds();

  // 3. Heuristic warm start: a first schedule from the heuristics alone before the LP relaxation (which takes ~15 s
  // on resnet50 b184), the bracket's (the one that reached the budget or the window was widened for) among them.
  std::optional<Assignment> warm = best_heuristic(p, o.budget_bytes, clock.share(0.5), widened_start);
  const SolveClock run{clock.start, !warm && no_start_limit_s >= 0 ? std::min(clock.limit_s, no_start_limit_s)
                                                                    : clock.limit_s};
  if (run.limit_s < clock.limit_s)
    spdlog::info("the heuristics plan no schedule within the budget; CBC looks for one until {:.0f} s", run.limit_s);
  double warm_at = warm ? seconds() : -1;
  // Progress before CBC's own: the warm start, then the relaxation's bound (step times, as CBC's).
  auto warm_ms = [&] { return warm ? p.base_ms + evaluate(p, *warm).recompute_ms : -1.0; };
  double shown_ms = warm_ms();  // the best schedule known before CBC reports one (progress lines)
  if (o.progress) o.progress({seconds(), shown_ms, -1.0});
  const double early_s = seconds() - out.setup_s;

  CbcOptions cbc;
  cbc.time_limit_s = std::max(0.5, run.limit_s - seconds());
  cbc.max_nodes = o.max_nodes;
  cbc.max_sub_mips = o.max_sub_mips;
  cbc.threads = o.threads;
  // 4. LP relaxation (CBC's own solver, which then starts its root from that basis): what LP-guided rounding (S[0]
  // and M of the relaxation) and the LP's implementations add to the warm start, never worse than the first.
  cbc.after_relaxation = [&](const std::vector<double>& relaxed, double lp_obj) {
    out.lp_s = seconds() - out.setup_s - early_s;
    if (!relaxed.empty()) {
      out.lp_bound_ms = p.base_ms + lp_obj;
      const LpGuide g = lp_guide(p, layout, relaxed);
      const bool had = warm.has_value();
      warm = improve_with_lp(p, o.budget_bytes, warm, g.scores, g.impl, g.fwd,
                             lp_heuristics ? run.share(0.8) : run.start);
      if (!had && warm) warm_at = seconds();
    }
    out.warm_start_s = seconds() - out.setup_s - out.lp_s;
    out.warm_start = warm.has_value();
    shown_ms = warm_ms();
    if (o.progress) o.progress({seconds(), shown_ms, relaxed.empty() ? -1.0 : out.lp_bound_ms});
    if (!warm) return std::vector<double>{};
    out.warm_start_ms = p.base_ms + evaluate(p, *warm).recompute_ms;
    return to_columns(p, layout, lp, *warm);
  };
  // Progress in step-time terms (the MILP's objective is the recomputation time alone), timed from the solve's
  // start like the lines before it (CBC's elapsed time starts with solve_with_cbc).
  const double cbc_start_s = seconds();
  if (o.progress)
    cbc.progress = [&](const CbcProgress& pr) {
      o.progress({cbc_start_s + pr.elapsed_s, pr.incumbent > kNoValue ? pr.incumbent + p.base_ms : shown_ms,
                  pr.bound > kNoValue ? pr.bound + p.base_ms : -1.0});
    };
  // 5. Root cut rounds, with the chain cuts.
  cbc.separate = [&](const double* x, size_t max_cuts) { return chain_cuts(p, layout, x, max_cuts); };
  if (p.offload()) cbc.root_cuts_share = kCopiesRootCutsShare;
  // 7. The neighbourhood search's windows, skipped when the warm start is that close to the bound.
  cbc.neighborhoods = search_windows(p, layout);
  cbc.neighborhood_min_gap = kSearchMinGapShare * out.store_all.time_ms;
  // 8. Full mode, once the search has closed every neighbourhood: the program with the incumbent's implementations
  // fixed, in CBC's process (CbcOptions::after_search; improve_with_fixed_impls).
  if (p.has_choices())
    cbc.after_search = [&](const std::vector<double>& x, double seconds) {
      const FixedImpls f = improve_with_fixed_impls(p, from_columns(p, layout, x), o.budget_bytes, seconds,
                                                    o.threads, cbc.neighborhood_min_gap, o.max_nodes, o.max_sub_mips);
      return CbcOptions::AfterSearch{f.better ? to_columns(p, layout, lp, *f.better) : std::vector<double>{},
                                     f.bound_ms ? *f.bound_ms - p.base_ms : kNoValue};
    };
  cbc.after_search_min_s = o.fixed_impls_min_s;
  // 4-8 run in solve_with_cbc; 6 is CBC's own search.
  CbcResult r = solve_with_cbc(lp, cbc, nullptr);
  out.cbc_s = r.solve_s;
  out.root_cuts = r.root;
  out.neighborhoods = r.neighborhoods;
  if (out.lp_bound_ms > 0) out.root_bound_ms = p.base_ms + r.root.bound;
  // CBC's clock starts after the setup, the LP relaxation and the heuristics: report from the solve's start.
  out.first_feasible_s = r.first_feasible_s < 0 ? -1 : r.first_feasible_s + (seconds() - r.solve_s);
  if (warm) out.first_feasible_s = out.first_feasible_s < 0 ? warm_at : std::min(out.first_feasible_s, warm_at);

  // 9. Verification of the better of CBC's solution and the warm start (CBC may stop before accepting it; never
  // return worse than what we handed it).
  std::optional<Assignment> chosen;
  if (!r.x.empty()) chosen = from_columns(p, layout, r.x);
  if (warm && (!chosen || evaluate(p, *warm).recompute_ms < evaluate(p, *chosen).recompute_ms - 1e-9)) {
    chosen = warm;
  }
  if (!chosen) {
    out.status = status_name(r.status);
    out.why_none = r.status == CbcResult::Status::infeasible ? "infeasible" : "not_found";
    return;
  }
  finish(out, plan, p, *chosen, o.mode, o.budget_bytes);
  if (chosen_out) *chosen_out = chosen;
  out.bound_ms = p.base_ms + std::max(fastest_impls_floor_ms(p), r.bound);
  out.status = r.status == CbcResult::Status::optimal ? "optimal" : "feasible";
  // The fixed-implementations phase's bound holds for the implementations it fixed: reported when the schedule still
  // has them.
  if (r.restricted_bound > kNoValue) {
    const Assignment held = from_columns(p, layout, r.restricted_x);
    if (held.M == chosen->M && held.P == chosen->P)
      out.impls_bound_ms = std::min(out.objective_ms, std::max(out.bound_ms, p.base_ms + r.restricted_bound));
  }
}

// Whether a has p's variables: as many steps, values and forward positions, implementations p offers, and no
// offload where p has none (what evaluate() takes for granted).
bool fits_shape(const CheckpointProblem& p, const Assignment& a) {
  const Assignment e = empty_assignment(p);
  if (a.S.size() != e.S.size() || a.R.size() != e.R.size() || a.M.size() != e.M.size() || a.P.size() != e.P.size() ||
      a.H.size() != e.H.size() || a.G.size() != e.G.size() || a.Q.size() != e.Q.size())
    return false;
  for (size_t t = 0; t < e.S.size(); ++t)
    if (a.S[t].size() != e.S[t].size() || a.R[t].size() != e.R[t].size() || a.M[t] < 0 ||
        a.M[t] >= static_cast<int>(p.impl_ms[t].size()))
      return false;
  for (size_t k = 0; k < e.P.size(); ++k)
    if (a.P[k] < 0 || a.P[k] >= static_cast<int>(p.fwd_impl_ms[k].size())) return false;
  return true;
}

// Phases 3-9 under --offload: the program without copies (without_offload, the same window) for
// kWithoutCopiesShare of the time limit, then the program with them, from that schedule when it is the better start,
// for the rest. The program with copies is larger and its LPs slower (its root rounds took 23-30 s of 60 where the
// same rows without copies took 2.5-9.5 s, schedules/cpu-runs/2026-11-27_wide_prefetch): this way its search starts
// where a solve without offload would be, and what it returns is never worse than that start. Skipped where the
// budget is below what any schedule without copies reaches, and cut short where the heuristics plan none without
// copies within it: CBC then has to find a first schedule without copies in its share (UNet b11 at 5.01 GB: none
// in 30 s, nor in 60 s without offload), while the program with copies, a superset, starts from the heuristics'
// schedules that copy.
void solve_offload(const PlanGraph& plan, const CheckpointProblem& p, const SolveOptions& o, const SolveClock& clock,
                   std::optional<Assignment> widened_start, SolveOutcome& out) {
  const CheckpointProblem p0 = without_offload(p);
  SolveOutcome first;  // the program without copies' schedule, if it found one
  const double began_s = clock.seconds();
  double first_feasible_s = -1;  // the program without copies' first schedule
  const bool skipped = o.budget_bytes < p0.lower_bound_bytes();
  // A schedule without copies handed in (SolveOptions::without_copies), where it is one of this program's.
  bool given = false;
  if (!skipped && o.without_copies && fits_shape(p0, *o.without_copies)) {
    const Evaluation e = evaluate(p0, *o.without_copies);
    given = e.feasible && e.peak_bytes <= o.budget_bytes;
  }
  if (o.without_copies && !given)
    spdlog::info("offload: the schedule without copies handed in is not one of this program's within the budget");
  if (!skipped) {
    SolveOptions o0 = o;
    o0.offload.reset();
    o0.time_limit_s = kWithoutCopiesShare * o.time_limit_s;
    const SolveClock clock0{clock.start, o0.time_limit_s};
    first.store_all = out.store_all;
    first.fast_store_all = out.fast_store_all;
    std::optional<Assignment> a0;
    if (given) {
      a0 = *o.without_copies;
      finish(first, plan, p0, *a0, o.mode, o.budget_bytes);
      first.status = "given";
      first.first_feasible_s = 0;
      spdlog::info("offload: the schedule without copies handed in ({:.3f} ms) stands for that program",
                   first.objective_ms);
    } else {
      spdlog::info("offload: the program without copies first, until {:.0f} s", o0.time_limit_s);
      solve_milp(plan, p0, o0, clock0, std::nullopt, first, &a0, kWithoutCopiesNoStartShare * o.time_limit_s);
    }
    if (!a0) {  // the heuristics planned none (else their schedule would be there), nor did CBC find one
      first.why_none = "no_start";
      spdlog::info("offload: no schedule without copies; the program with copies gets the rest of the time limit");
    } else {
      const Assignment without = lift_to(p, std::move(*a0));
      const Evaluation e0 = evaluate(p, without);
      MONET_CHECK(e0.feasible, "a schedule without copies violates the program with them: ", e0.violation);
      // Its recomputations traded for copies where that is faster (the heuristics' deadline has passed by now).
      const Assignment lifted = copies_for_recomputations(
          p, without, o.budget_bytes, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(kCopiesForRecomputationsShare *
                                                                                      o.time_limit_s)));
      const Evaluation e = evaluate(p, lifted);
      if (e.recompute_ms < e0.recompute_ms - 1e-9)
        spdlog::info("offload: copies in place of recomputations in it: {:.3f} ms in the program with copies",
                     p.base_ms + e.recompute_ms);
      spdlog::info("offload: without copies {:.3f} ms; the program with copies starts from the better of it and the "
                   "heuristics' schedules", first.objective_ms);
      out.without_copies_ms = first.objective_ms;
      first_feasible_s = first.first_feasible_s;
      if (!widened_start || evaluate(p, *widened_start).recompute_ms > e.recompute_ms) widened_start = lifted;
    }
  }
  const double first_s = clock.seconds() - began_s;
  const std::string first_status = skipped ? "skipped" : first.why_none == "no_start" ? "no_start" : first.status;
  // Where the program without copies handed over its schedule, the relaxation's rounding (8 s of the 30 left on
  // ResNet-50 b184) never bettered it: the neighbourhood search gets that time.
  const bool handed = first.fits;
  solve_milp(plan, p, o, clock, std::move(widened_start), out, nullptr, -1, !handed);
  out.without_copies_status = first_status;
  out.without_copies_s = first_s;
  out.setup_s -= first_s;  // timed from the solve's start
  if (first_feasible_s >= 0 && (out.first_feasible_s < 0 || first_feasible_s < out.first_feasible_s))
    out.first_feasible_s = first_feasible_s;
  // The program prices the copies below what the engine's streams take (finish): a schedule with copies it found
  // better than the one without may run slower. The faster of the two on the streams is the answer.
  if (first.fits && (!out.fits || first.objective_ms < out.objective_ms - 1e-9)) {
    if (out.fits)
      spdlog::info("offload: the schedule without copies is the faster on the engine's streams ({:.3f} ms against "
                   "{:.3f} ms, of which {:.3f} waiting for copies to the host and {:.3f} for copies back; the "
                   "program counted {:.3f} ms of waits)",
                   first.objective_ms, out.objective_ms, out.copy_wait_to_host_ms, out.copy_wait_to_device_ms,
                   out.program_wait_ms);
    else
      spdlog::info("offload: the schedule without copies is the answer ({:.3f} ms)", first.objective_ms);
    out.schedule = std::move(first.schedule);
    out.predicted = first.predicted;
    out.objective_ms = first.objective_ms;
    out.copy_wait_ms = out.copy_wait_to_host_ms = out.copy_wait_to_device_ms = out.program_wait_ms = 0;
    out.implementations = std::move(first.implementations);
    out.impls_bound_ms = first.impls_bound_ms;
    out.fits = true;
    out.status = "feasible";  // the program's optimum (if proven) is one with copies
    out.why_none.clear();
  }
}

}  // namespace

// The least time left for the retry without a window (step 10): its relaxation alone takes tens of seconds on a
// transformer.
constexpr double kUnwindowedRetryMinS = 20;

// The pipeline of docs/planner.md, "The solve pipeline".
SolveOutcome solve(const PlanGraph& plan, const SolveOptions& o) {
  const SolveClock clock{Clock::now(), o.time_limit_s};
  if (o.mode != "checkpoint" && o.mode != "full" && o.mode != "store-all" && o.mode != "sqrtn")
    fail("--mode '", o.mode, "': expected full, checkpoint, store-all or sqrtn");
  SolveOutcome out;
  // The baselines every report carries.
  // Once: the descent simulates the store-all a few thousand times, and every heuristic pass starts from it.
  MONET_CHECK(o.store_all_impls.empty() || o.store_all_impls.size() == plan.nodes.size(),
              "SolveOptions::store_all_impls: ", o.store_all_impls.size(), " implementations for ", plan.nodes.size(),
              " nodes");
  out.store_all_impls = o.store_all_impls.empty() ? lean_store_all_impls(plan) : o.store_all_impls;
  const std::vector<int>& lean_impls = out.store_all_impls;
  const Schedule store_all = store_all_schedule(plan, lean_impls);
  out.store_all = simulate(plan, store_all);
  out.fast_store_all = simulate(plan, fast_store_all_schedule(plan));
  const bool milp = o.mode == "checkpoint" || o.mode == "full";
  const bool impls = o.mode == "full";

  std::optional<CheckpointProblem> unwindowed;
  CheckpointProblem p = set_up(plan, lean_impls, o, milp, impls, unwindowed);
  const CheckpointProblem::LowerBound lower_bound = p.lower_bound();
  out.lower_bound_bytes = lower_bound.bytes;
  if (lower_bound.node >= 0) out.lower_bound_node = plan.nodes[lower_bound.node].name;
  std::optional<Assignment> widened_start = bracket_budget(plan, o, clock, milp, impls, unwindowed, p, out);
  if (p.offload()) {
    out.copy_timing = copy_timing_name(p.copy_timing);
    if (milp && !o.copy_timing) lean_copies_below_floor(o, clock, p, widened_start, out);
  }

  if (o.mode == "store-all") {
    choose_store_all(out, store_all, o.budget_bytes);
  } else if (o.mode == "sqrtn") {
    choose_sqrtn(out, plan, p, o.budget_bytes);
  } else if (o.budget_bytes < out.lower_bound_bytes) {
    out.status = "infeasible";
    out.why_none = "below_lower_bound";
  } else {
    if (p.offload()) solve_offload(plan, p, o, clock, std::move(widened_start), out);
    else solve_milp(plan, p, o, clock, std::move(widened_start), out);
    // 10. The auto window proven too narrow for the budget (it was not widened: the heuristics reached the budget
    // in no window), with time left: the program without a window, in that time. A transformer at a tight budget
    // recomputes from further back than a window sized for the program's size lets it.
    if (!out.fits && out.why_none == "infeasible" && unwindowed && p.window > 0 &&
        o.time_limit_s - clock.seconds() >= kUnwindowedRetryMinS) {
      spdlog::info("no schedule within the {}-level window (proven): solving without a window in the {:.0f} s left",
                   p.window, o.time_limit_s - clock.seconds());
      SolveOutcome retry;
      retry.store_all = out.store_all;
      retry.store_all_impls = out.store_all_impls;
      retry.fast_store_all = out.fast_store_all;
      retry.lower_bound_bytes = out.lower_bound_bytes;
      retry.lower_bound_node = out.lower_bound_node;
      retry.smallest_found_bytes = out.smallest_found_bytes;
      retry.window_infeasible = p.window;
      retry.copy_timing = out.copy_timing;
      if (p.offload()) {
        // Under the copy timing the solve took (set_up built the unwindowed problem with the one asked for).
        if (unwindowed->copy_timing != p.copy_timing) *unwindowed = with_copy_timing(*unwindowed, p.copy_timing);
        solve_offload(plan, *unwindowed, o, clock, std::nullopt, retry);
      } else {
        solve_milp(plan, *unwindowed, o, clock, std::nullopt, retry);
      }
      retry.window = 0;
      out = std::move(retry);
    }
  }
  if (out.fits && out.objective_ms > 0) {
    out.bound_ms = std::min(out.bound_ms, out.objective_ms);
    out.gap = (out.objective_ms - out.bound_ms) / out.objective_ms;
  }
  out.solve_s = clock.seconds();
  return out;
}

void log_progress(const CbcProgress& p) {
  if (p.incumbent >= 0 && p.bound >= 0)
    spdlog::info("  {:6.1f} s  incumbent {:.3f} ms  bound {:.3f} ms  gap {:.2f}%", p.elapsed_s, p.incumbent, p.bound,
                 100.0 * (p.incumbent - p.bound) / std::max(p.incumbent, 1e-12));
  else
    spdlog::info("  {:6.1f} s  incumbent {}  bound {}", p.elapsed_s,
                 p.incumbent >= 0 ? fmt::format("{:.3f} ms", p.incumbent) : "none",
                 p.bound >= 0 ? fmt::format("{:.3f} ms", p.bound) : "pending (root node)");
}

}  // namespace monet
