// Schedules without a MILP: store-all, checkpoints with on-demand recomputation (Chen et al. 2016's sqrt(n)
// segments and other segment lengths). They are baselines, and the MILP's warm start.
#pragma once

#include <optional>
#include <vector>

#include "solve/problem.h"

namespace monet {

// Every value kept from its production to its last backward reader; nothing recomputed.
Assignment store_all_assignment(const CheckpointProblem& p);

// Keeps the forward values in `checkpoints` after the forward pass (until their last use); every other value a
// step reads is recomputed on demand from what is present, then kept until its last backward reader.
// nullopt when a needed recomputation falls outside the problem's window.
std::optional<Assignment> checkpoint_assignment(const CheckpointProblem& p, const std::vector<char>& checkpoints);

// Checkpoints = the outputs of every `segment`-th forward node (positions segment-1, 2*segment-1, ...).
std::optional<Assignment> segment_assignment(const CheckpointProblem& p, int segment);

// Chen et al.'s sqrt(n) baseline: segments of round(sqrt(F)) forward nodes.
std::optional<Assignment> sqrtn_assignment(const CheckpointProblem& p);

// The cheapest of store-all and every segment length that fits the budget (conservative peak), if any.
std::optional<Assignment> best_heuristic(const CheckpointProblem& p, int64_t budget_bytes);

}  // namespace monet
