#!/usr/bin/env bash
# Heuristics benchmark (no MILP): the best predicted step time each family of primal heuristics finds on the
# estimated profiles in schedules/*/ at 1/3, 1/2 and 2/3 of each store-all peak, the auto window (as monet-solve),
# in checkpoint and full mode (all implementation policies), and the smallest budget they reach. Writes
# schedules/HEURISTICS.md.
# Usage: scripts/bench_heuristics.sh [PROFILE.json...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MONET_BUILD:-build}  # another build directory, e.g. MONET_BUILD=build-asan
[ -x "$build/test/monet_bench_heuristics" ] || bash scripts/build.sh
profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=(schedules/*/profile_estimate.json)
{
  echo "# Primal heuristics (scripts/bench_heuristics.sh)"
  echo
  echo "Predicted step time (ms) of the cheapest schedule each heuristic family finds within the budget, without"
  echo "CBC; '—' = none fits. The auto window (as monet-solve); in full mode the best over the implementation"
  echo "policies. 'smallest found' is the lowest budget any heuristic meets (the figure monet-solve names when a"
  echo "budget is too small)."
  echo
  "$build/test/monet_bench_heuristics" "${profiles[@]}"
} > schedules/HEURISTICS.md.tmp
mv schedules/HEURISTICS.md.tmp schedules/HEURISTICS.md
cat schedules/HEURISTICS.md
