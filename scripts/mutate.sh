#!/usr/bin/env bash
# Mutation audit of the test suite: small, named, plausible bugs, each applied alone to a scratch copy of the
# working tree, rebuilt and run against the tests that should catch it. Prints a table (mutation, file, caught by)
# and exits 0 only when every mutation is caught by a failing test.
#
# Usage: scripts/mutate.sh [--list] [--keep] [NAME...]
#   NAME...   run only these mutations (default: all, in the order listed)
#   --list    print the mutations (name, file, tests, bug) and exit
#   --keep    keep the scratch directory (its path is printed) instead of removing it
# Environment: MONET_MUTATE_JOBS (ninja -j, default nproc), MONET_MUTATE_TIMEOUT (seconds per test run, default
# 300; a run that times out counts as caught, and says so), TMPDIR (where the scratch copy goes).
#
# The scratch copy is the working tree as it is (tracked files and untracked ones git does not ignore, so
# uncommitted work is included; no build*/ directory), with the test sources that no mutation's tests come from
# left out. One CPU-only Release build is configured there once and `ninja monet_tests` builds only what the tests
# need. Before any mutation every filter must match at least one test case and pass on the unmutated build.
# Each mutation is a file, an exact snippet of it and its replacement: a snippet that is not found exactly once
# stops the script before anything is built (exit 2), so the list stays in step with the code. A mutation whose
# build fails is reported as ERROR, never as caught. Exit: 0 all caught, 1 some not caught or an error, 2 setup.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
START=$(date +%s)

# ------------------------------------------------------------------------------------------------ the mutations
# mutation NAME FILE TESTS BUG ORIGINAL REPLACEMENT; TESTS is a Catch2 test spec (',' = or; '\,' a comma in a name).
NAMES=() FILES=() TESTS=() BUGS=() ORIGS=() REPLS=()
mutation() {
  NAMES+=("$1") FILES+=("$2") TESTS+=("$3") BUGS+=("$4") ORIGS+=("$5") REPLS+=("$6")
}

ARENA_TESTS='[arena],[engine][memory]'
PEAK_TESTS='profile totals: the store-all peak of a small plan is its bytes summed by hand,[engine][memory]'
MILP_TESTS="[milp]*brute force*,memory within a step*,every mode's schedule passes the simulator*"

mutation arena-unaligned lib/engine/arena.cpp "$ARENA_TESTS" \
  "allocations are not rounded up to kAlignBytes" \
  'bytes = align_up(std::max<int64_t>(bytes, 1));' \
  'bytes = std::max<int64_t>(bytes, 1);'
mutation arena-split-off-by-one lib/engine/arena.cpp "$ARENA_TESTS" \
  "a hole one unit larger than the request is taken whole (its last unit is lost)" \
  'if (hole > bytes) holes_[offset + bytes] = hole - bytes;' \
  'if (hole > bytes + kAlignBytes) holes_[offset + bytes] = hole - bytes;'
mutation sim-no-workspace lib/schedule/schedule.cpp \
  "$PEAK_TESTS,checkpoint MILP optimum equals brute force on tiny graphs,checkpoint MILP equals brute force at every frontier budget*" \
  "the simulator leaves the step's workspace out of the peak" \
  'const int64_t step_peak = live_bytes + workspace;' \
  'const int64_t step_peak = live_bytes;'
mutation store-all-frees-early lib/schedule/schedule.cpp "$PEAK_TESTS" \
  "store-all frees a value one node before its last reader" \
  'for (int v : p.nodes[n].reads(impl_of(n))) last_use[v] = static_cast<int>(n);' \
  'for (int v : p.nodes[n].reads(impl_of(n))) last_use[v] = static_cast<int>(n) - 1;'
mutation profile-peak-defaults lib/profile/profile.cpp \
  'estimated profiles: every node timed\, formulas applied\, stages in order,profile totals: the store-all peak of a small plan is its bytes summed by hand' \
  "the profile's store-all peak is the default implementations' instead of the lean store-all's" \
  'const SimResult sim = simulate(p.plan, lean_store_all_schedule(p.plan));' \
  'const SimResult sim = simulate(p.plan, store_all_schedule(p.plan));'
mutation milp-recompute-output-dropped lib/solve/milp.cpp "$MILP_TESTS" \
  "the memory rows of a step leave out the output bytes of a node recomputed in it" \
  $'        append(cols, coefs, m.R[t][k], -units(p.out_bytes[k]));\n' \
  ''
mutation milp-recompute-freed-early lib/solve/milp.cpp "$MILP_TESTS" \
  "the memory rows release a recomputed value one recomputation early (before its last reader)" \
  'for (int f : p.freed_after[t][i - 1]) {' \
  'for (int f : p.freed_after[t][i]) {'
mutation matmul-grad-a-no-batch-sum lib/ops/matmul/matmul.cpp \
  'MatMul matches a direct loop and finite differences' \
  "MatMulGradA keeps the last batch entry's product instead of summing over a broadcast A" \
  'b + ib[i] * k * m, m, T(1), da + ia[i] * n * k, k);' \
  'b + ib[i] * k * m, m, T(0), da + ia[i] * n * k, k);'
mutation gemm-grad-b-no-alpha lib/ops/gemm/gemm.cpp \
  'Gemm matches a direct loop and finite differences' \
  "GemmGradB (transB = 0) ignores alpha" \
  'blas_gemm(!ta, false, K, N, M, alpha, a, lda, dy, N, T(0), db, N);' \
  'blas_gemm(!ta, false, K, N, M, T(1), a, lda, dy, N, T(0), db, N);'
mutation batchnorm-grad-xhat-factor lib/ops/batch_norm/batch_norm.cpp \
  'BatchNormalization backward matches finite differences,BatchNormGrad alone matches finite differences of Y' \
  "BatchNormGrad's xhat term is missing a factor invstd" \
  'const double k = dot * mul * mul / M;' \
  'const double k = dot * mul / M;'
mutation maxpool-grad-overwrites lib/ops/max_pool/max_pool.cpp \
  'MaxPool backward matches finite differences,MaxPoolGrad sends tied gradients to the first maximum*' \
  "MaxPoolGrad assigns instead of adding where overlapping windows share a maximum" \
  'dxp[tap_index(p, oh, ow, tap)] += dy[o];' \
  'dxp[tap_index(p, oh, ow, tap)] = dy[o];'
mutation div-grad-b-sign lib/ops/div/div.cpp \
  'Binary ops backward match finite differences*' \
  "DivGradB has the wrong sign" \
  'return -dc * ((a / b) / b);' \
  'return dc * ((a / b) / b);'
mutation softmax-grad-sign lib/ops/softmax/softmax.cpp \
  'Softmax backward matches finite differences' \
  "SoftmaxGrad adds the dot product instead of subtracting it" \
  'dx[k] = y[k] * (dy[k] - static_cast<T>(dot));' \
  'dx[k] = y[k] * (dy[k] + static_cast<T>(dot));'
# A header that a dozen op files include: last, so that no later mutation has to rebuild them again.
mutation conv-grad-weight-one-sample lib/ops/common/im2col.h '[conv]' \
  "ConvGradWeight overwrites dW for each sample instead of summing over the batch" \
  'n == 0 ? T(0) : T(1), dwg, K);' \
  'T(0), dwg, K);'

# The test sources the filters above draw from (with the shared harness); the others are left out of the build.
KEEP_TESTS=(test/op_harness.cpp test/ops/test_conv.cpp test/ops/test_linear.cpp test/ops/test_norm_pool.cpp
            test/ops/test_elementwise.cpp test/engine/test_arena.cpp test/engine/test_training.cpp
            test/profile/test_profile.cpp test/solve/test_milp.cpp)

# ------------------------------------------------------------------------------------------------ arguments
KEEP=0
SELECTED=()
for arg in "$@"; do
  case "$arg" in
    --list)
      for i in "${!NAMES[@]}"; do
        printf '%-32s %-30s %s\n    tests: %s\n' "${NAMES[$i]}" "${FILES[$i]}" "${BUGS[$i]}" "${TESTS[$i]}"
      done
      exit 0 ;;
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutate.sh: unknown option '$arg'" >&2; exit 2 ;;
    *)
      found=-1
      for i in "${!NAMES[@]}"; do [[ "${NAMES[$i]}" == "$arg" ]] && found=$i; done
      if (( found < 0 )); then echo "mutate.sh: no mutation named '$arg' (see --list)" >&2; exit 2; fi
      SELECTED+=("$found") ;;
  esac
done
if (( ${#SELECTED[@]} == 0 )); then SELECTED=("${!NAMES[@]}"); fi

JOBS=${MONET_MUTATE_JOBS:-$(nproc)}
TIMEOUT=${MONET_MUTATE_TIMEOUT:-300}
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/monet-mutate.XXXXXX")
cleanup() {
  if (( KEEP )); then echo "scratch directory kept: $SCRATCH"; else rm -rf "$SCRATCH"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
SRC=$SCRATCH/src LOGS=$SCRATCH/logs
mkdir -p "$SRC" "$LOGS"
elapsed() { echo $(( $(date +%s) - START )); }
say() { printf '[%4ss] %s\n' "$(elapsed)" "$*"; }

# ------------------------------------------------------------------------------------------------ the scratch copy
say "copying the working tree of $ROOT to $SRC"
git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    [[ "$f" == build*/* ]] && continue
    if [[ -e "$ROOT/$f" || -L "$ROOT/$f" ]]; then printf '%s\0' "$f"; fi  # deleted, not yet committed: left out
  done | tar -C "$ROOT" --null -T - -cf - | tar -C "$SRC" -xf -
while IFS= read -r -d '' f; do
  rel=${f#"$SRC"/}
  case "$rel" in test/cuda/*|test/fuzz/*|test/bench/*) continue ;; esac
  keep=0
  for k in "${KEEP_TESTS[@]}"; do [[ "$rel" == "$k" ]] && keep=1; done
  (( keep )) || rm -f "$f"
done < <(find "$SRC/test" -name '*.cpp' -print0)

# Apply (or check) one mutation on a file: the snippet must occur exactly once.
apply() {  # apply FILE ORIGINAL REPLACEMENT [--check]
  python3 - "$@" <<'EOF'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"{path}: the snippet {old!r} occurs {n} times, not once")
if len(sys.argv) < 5:
    open(path, "w").write(text.replace(old, new))
EOF
}
for i in "${SELECTED[@]}"; do
  if [[ ! -f "$SRC/${FILES[$i]}" ]]; then echo "mutate.sh: ${NAMES[$i]}: no file ${FILES[$i]}" >&2; exit 2; fi
  apply "$SRC/${FILES[$i]}" "${ORIGS[$i]}" "${REPLS[$i]}" --check || { echo "mutate.sh: ${NAMES[$i]}: update the list" >&2; exit 2; }
done

# ------------------------------------------------------------------------------------------------ the build
say "configuring (Release, CPU only) and building monet_tests with $JOBS jobs"
cd "$SRC"
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMONET_CUDA=OFF >"$LOGS/configure.log" 2>&1; then
  tail -30 "$LOGS/configure.log"; echo "mutate.sh: configure failed" >&2; exit 2
fi
build() { ninja -C build -j "$JOBS" monet_tests >"$1" 2>&1; }
if ! build "$LOGS/build.log"; then
  grep -E "error|FAILED" "$LOGS/build.log" | head -20; echo "mutate.sh: the unmutated tree does not build" >&2; exit 2
fi
say "built"
BIN=$SRC/build/test/monet_tests

# Runs the tests of spec $1 with the XML reporter into $2; prints the failed test cases, one a line (a case cut off
# by a crash or the timeout included), and returns the run's status.
run_tests() {
  local spec=$1 xml=$2 rc=0
  timeout "$TIMEOUT" "$BIN" "$spec" -r xml -o "$xml" >"$xml.out" 2>&1 || rc=$?
  python3 - "$xml" "$rc" <<'EOF'
import html, re, sys
path, rc = sys.argv[1], int(sys.argv[2])
try:
    text = open(path, errors="replace").read()
except OSError:
    text = ""
cases = [(m.start(), html.unescape(m.group(1))) for m in re.finditer(r'<TestCase name="([^"]*)"', text)]
for j, (pos, name) in enumerate(cases):
    end = cases[j + 1][0] if j + 1 < len(cases) else len(text)
    result = re.findall(r'<OverallResult success="(true|false)"', text[pos:end])
    if not result:
        print(name + (" (timed out)" if rc == 124 else " (crashed)"))
    elif result[-1] == "false":
        print(name)
if rc != 0 and not cases:
    print("(the test binary failed before any test case: exit %d)" % rc)
EOF
  return "$rc"
}

# ------------------------------------------------------------------------------------------------ the baseline
say "baseline: every filter matches tests and passes on the unmutated build"
declare -A SEEN=()
ALL_SPECS=()
for i in "${SELECTED[@]}"; do
  spec=${TESTS[$i]}
  [[ -n "${SEEN[$spec]:-}" ]] && continue
  SEEN[$spec]=1
  ALL_SPECS+=("$spec")
  if [[ -z "$("$BIN" "$spec" --list-test-names-only 2>/dev/null | grep -v '^$' || true)" ]]; then
    echo "mutate.sh: ${NAMES[$i]}: the test spec '$spec' matches no test case" >&2; exit 2
  fi
done
joined=$(IFS=,; echo "${ALL_SPECS[*]}")
if ! failed=$(run_tests "$joined" "$LOGS/baseline.xml"); then
  echo "mutate.sh: the tests fail without any mutation:" >&2; printf '  %s\n' "$failed" >&2; exit 2
fi
say "baseline passed"

# ------------------------------------------------------------------------------------------------ the mutations
RESULTS=()
status=0
n=0
for i in "${SELECTED[@]}"; do
  n=$((n + 1))
  name=${NAMES[$i]} file=${FILES[$i]}
  cp "$SRC/$file" "$LOGS/original"
  apply "$SRC/$file" "${ORIGS[$i]}" "${REPLS[$i]}"
  t0=$(date +%s)
  if ! build "$LOGS/$name.build.log"; then
    verdict="ERROR: does not build"
    status=1
    grep -m3 "error" "$LOGS/$name.build.log" | sed 's/^/    /' || true
    t1=$(date +%s) t2=$t1
  else
    t1=$(date +%s)
    rc=0
    failed=$(run_tests "${TESTS[$i]}" "$LOGS/$name.xml") || rc=$?
    t2=$(date +%s)
    if (( rc == 0 )); then
      verdict="NOT CAUGHT"
      status=1
    elif [[ -z "$failed" ]]; then
      verdict="ERROR: tests exited $rc without a failed test case"
      status=1
    else
      verdict=$(printf '%s\n' "$failed" | awk 'NR > 1 { printf "; " } { printf "%s", $0 }')
    fi
  fi
  cp "$LOGS/original" "$SRC/$file"  # a new mtime: the next build compiles the original again
  say "[$n/${#SELECTED[@]}] $name: build $((t1 - t0)) s, tests $((t2 - t1)) s: $verdict"
  RESULTS+=("| \`$name\` | \`$file\` | ${BUGS[$i]} | $verdict |")
done

echo
echo "| mutation | file | bug | caught by |"
echo "|---|---|---|---|"
printf '%s\n' "${RESULTS[@]}"
echo
caught=0
for r in "${RESULTS[@]}"; do [[ "$r" == *"| NOT CAUGHT |" || "$r" == *"| ERROR: "* ]] || caught=$((caught + 1)); done
times >"$LOGS/times"  # this shell's children: the build, the tests
cpu=$(tail -1 "$LOGS/times" | awk '{ split($1, u, "m"); split($2, s, "m"); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
echo "$caught of ${#RESULTS[@]} mutations caught; wall time $(elapsed) s, CPU time $cpu s ($(nproc) cores, $JOBS build jobs)"
exit "$status"
