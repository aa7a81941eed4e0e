#!/usr/bin/env bash
# scripts/sweep_schedules.py on bert_tiny at one budget: a solve without and one with --offload, each schedule
# checked bitwise against store-all and run with its measured peaks equal to the prediction, two rows that say so
# in the table and in --json; a model it does not know stops it with one error naming the model.
# Usage: schedule_sweep.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
/usr/bin/python3 "$src/scripts/sweep_schedules.py" --models bert_tiny --fractions 0.5 --time-limit 10 \
  --build "$build" --work "$tmp/w" --json "$tmp/rows.json" >"$tmp/out.md" 2>&1 || { cat "$tmp/out.md"; fail "sweep"; }
/usr/bin/python3 - "$tmp/rows.json" <<'PY' || { cat "$tmp/out.md"; fail "rows"; }
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["mode"] for r in rows] == ["plain", "offload"], rows
for r in rows:
    assert r["check"] == "PASS", r
    assert r["lower_bound"] <= r["budget"] < r["store_all"], r
assert rows[1]["copies"] > 0, rows[1]
PY
grep -q "^2 of 2 schedules check and run as predicted" "$tmp/out.md" || { cat "$tmp/out.md"; fail "summary line"; }
/usr/bin/python3 "$src/scripts/sweep_schedules.py" --models no_such_model --build "$build" --work "$tmp/w2" \
  >"$tmp/bad.md" 2>&1 && fail "an unknown model should stop the sweep with an error"
grep -q "unknown model 'no_such_model'" "$tmp/bad.md" || { cat "$tmp/bad.md"; fail "unknown model message"; }
echo "ok: bert_tiny planned with and without offload, both schedules checked and run as predicted"
