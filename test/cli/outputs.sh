#!/usr/bin/env bash
# Outputs are deterministic and atomic: the same inputs and flags give byte-identical profile (estimate) and
# schedule files, and a failed command leaves an existing output untouched and no temporary file behind.
# Usage: outputs.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
profile="$build/apps/monet-profile"
solve="$build/apps/monet-solve"
tiny="$src/models/tiny.onnx"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# run LOG command...: runs quietly, fails the test (showing the log) on a non-zero exit.
run() {
  local log=$1
  shift
  "$@" >"$tmp/$log" 2>&1 || fail "$* exited $?: $(cat "$tmp/$log")"
}
same() {
  if cmp -s "$1" "$2"; then echo "ok: $3: identical ($(wc -c <"$1") bytes)"; else fail "$3: $1 and $2 differ"; diff "$1" "$2" | head -20; fi
}

# Profiles from the roofline estimate are a pure function of model, batch, input shape and loss.
run p1.log $profile "$tiny" --batch 2 --device estimate -o "$tmp/p1.json"
run p2.log $profile "$tiny" --batch 2 --device estimate -o "$tmp/p2.json"
same "$tmp/p1.json" "$tmp/p2.json" "monet-profile --device estimate twice"

# Schedules: the MILP solved to optimality (a time limit that never binds: the result is the same on any machine),
# with 1 and 2 CBC threads (CBC's deterministic parallel mode), and the baselines. No timing may enter the schedule
# file.
for threads in 1 2; do
  for k in a b; do
    run "s$threads$k.log" $solve "$tmp/p1.json" --budget 40000 --time-limit 1e6 --threads $threads \
      -o "$tmp/s$threads$k.json" --report "$tmp/r$threads$k.json"
  done
  grep -q '"status": "optimal"' "$tmp/r${threads}a.json" ||
    fail "tiny at 40000 B with $threads threads did not reach optimality: $(grep status "$tmp/r${threads}a.json")"
  same "$tmp/s${threads}a.json" "$tmp/s${threads}b.json" "monet-solve --mode checkpoint --threads $threads twice"
done
# A solve by work done that stops short of the optimum (CBC at its root node, two sub-MIPs): the same schedule twice,
# whatever the machine's load (ResNet-50 b2 32x32, checkpoint mode, 99% of its store-all peak).
run p50.log $profile "$src/models/resnet50.onnx" --batch 2 --input-shape 3,32,32 --device estimate -o "$tmp/p50.json"
for k in a b; do
  run "w$k.log" $solve "$tmp/p50.json" --mode checkpoint --budget 215500000 --time-limit 1e6 --max-nodes 1 \
    --max-sub-mips 2 --threads 1 -o "$tmp/w$k.json" --report "$tmp/wr$k.json"
done
grep -q '"status": "feasible"' "$tmp/wra.json" || fail "the solve by work was not stopped short: $(grep status "$tmp/wra.json")"
same "$tmp/wa.json" "$tmp/wb.json" "monet-solve --max-nodes 1 --max-sub-mips 2 twice"
for mode in sqrtn store-all; do
  run "$mode-a.log" $solve "$tmp/p1.json" --budget 1MB --mode $mode -o "$tmp/$mode-a.json"
  run "$mode-b.log" $solve "$tmp/p1.json" --budget 1MB --mode $mode -o "$tmp/$mode-b.json"
  same "$tmp/$mode-a.json" "$tmp/$mode-b.json" "monet-solve --mode $mode twice"
done

# A failing command does not touch an existing output: infeasible budget (exit 2), bad budget (exit 1), and a
# profile of a model that does not import (exit 1).
echo "OLD" >"$tmp/keep.json"
$solve "$tmp/p1.json" --budget 1000 -o "$tmp/keep.json" >/dev/null 2>&1
[ $? -eq 2 ] || fail "monet-solve --budget 1000 did not exit 2"
$solve "$tmp/p1.json" --budget abc -o "$tmp/keep.json" >/dev/null 2>&1
[ $? -eq 1 ] || fail "monet-solve --budget abc did not exit 1"
$profile "$src/test/data/truncated.onnx" --batch 2 --device estimate -o "$tmp/keep.json" >/dev/null 2>&1
[ $? -eq 1 ] || fail "monet-profile of a truncated model did not exit 1"
[ "$(cat "$tmp/keep.json")" = "OLD" ] && echo "ok: failed commands left the existing output untouched" ||
  fail "a failed command changed an existing output file"
leftovers=$(find "$tmp" -name '*.tmp')
[ -z "$leftovers" ] || fail "temporary files left behind: $leftovers"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "outputs are deterministic and atomic"
