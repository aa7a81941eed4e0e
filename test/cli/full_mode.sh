#!/usr/bin/env bash
# The user's path through --mode full: profile, solve at a budget below the lower bound of checkpoint mode (default
# implementations only), so that every schedule that meets it must choose other implementations; then monet-check
# --reference store-all (bitwise against store-all on the schedule's implementations; the lean store-all's
# difference reported beside) and monet-run (arena peak = predicted
# <= budget). MobileNetV2 at batch 8, 96x96, imported with its batch norms and ReLU6s as separate nodes
# (--bn-activation separate): their output-activated Clip gradients and BatchNorm variants lower the floor below
# what the defaults can reach (a ResNet-50 at 32x32 is weight-bound: both modes reach the same peak).
# Usage: full_mode.sh BUILD_DIR SOURCE_DIR
set -u
bin=$1/apps
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$src/models/mobilenet_v2.onnx"
fail() { echo "FAIL: $*"; exit 1; }
"$bin/monet-profile" "$model" --batch 8 --input-shape 3,96,96 --bn-activation separate --device estimate \
  -o "$tmp/p.json" >/dev/null ||
  fail "monet-profile"
for mode in full checkpoint; do
  "$bin/monet-solve" "$tmp/p.json" --mode $mode --budget 1 --report "$tmp/probe_$mode.json" -o "$tmp/none.json" \
    >/dev/null 2>&1
done
# Halfway between the smallest peak full mode's heuristics reach and checkpoint mode's lower bound.
budget=$(/usr/bin/python3 - "$tmp/probe_full.json" "$tmp/probe_checkpoint.json" <<'PY'
import json, sys
full, checkpoint = (json.load(open(p)) for p in sys.argv[1:3])
found, floor = full["smallest_found_bytes"], checkpoint["lower_bound_bytes"]
assert found < floor, f"full mode's smallest found {found} is not below checkpoint mode's lower bound {floor}"
print((found + floor) // 2)
PY
) || fail "probe reports"
# By work done, not the clock (a sanitized build on a loaded machine reaches the same schedule, later): a time limit
# that never binds, CBC stopped at its root node, the neighbourhood search at 4 sub-MIPs.
"$bin/monet-solve" "$tmp/p.json" --budget "$budget" --time-limit 1e6 --max-nodes 1 --max-sub-mips 4 --threads 1 \
  -o "$tmp/s.json" \
  --report "$tmp/r.json" >"$tmp/solve.log" || { cat "$tmp/solve.log"; fail "monet-solve --mode full at $budget"; }
/usr/bin/python3 - "$tmp/r.json" "$tmp/s.json" <<'PY' || fail "report or schedule"
import json, sys
r, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["mode"] == "full" and s["mode"] == "full", (r["mode"], s["mode"])
assert sum(r["implementations"].values()) > 0, "no non-default implementation chosen below the defaults' lower bound"
named = [st for st in s["steps"] if len(st) == {"compute": 3, "compute_in_place": 4, "free": 0}[st[0]]]
assert len(named) == sum(r["implementations"].values()), (len(named), r["implementations"])
print("implementations:", r["implementations"])
PY
"$bin/monet-check" "$model" --schedule "$tmp/s.json" --reference store-all \
  --report "$tmp/c.json" >"$tmp/check.log" || { cat "$tmp/check.log"; fail "monet-check --reference store-all"; }
grep -q "mode full computes every value with the same kernel as store-all on its implementations: bitwise equal, PASS" \
  "$tmp/check.log" || { cat "$tmp/check.log"; fail "check was not bitwise"; }
grep -q "against the lean store-all ([1-9][0-9]* nodes on other implementations" "$tmp/check.log" ||
  { cat "$tmp/check.log"; fail "check did not compare with the lean store-all"; }
"$bin/monet-run" "$model" --schedule "$tmp/s.json" --iters 1 --warmup 0 --report "$tmp/run.json" >"$tmp/run.log" ||
  { cat "$tmp/run.log"; fail "monet-run"; }
# The predicted step beside the measured one: the schedule file's; without a schedule, the store-all's on --profile's
# times (the lean store-all's is the solve report's baseline), and none without a profile.
"$bin/monet-run" "$model" --batch 8 --input-shape 3,96,96 --store-all lean --profile "$tmp/p.json" --iters 1   --warmup 0 --report "$tmp/run_lean.json" >"$tmp/run_lean.log" || { cat "$tmp/run_lean.log"; fail "monet-run lean"; }
"$bin/monet-run" "$model" --batch 8 --input-shape 3,96,96 --iters 1 --warmup 0 --report "$tmp/run_plain.json"   >/dev/null || fail "monet-run without a profile"
grep -q "^predicted step .* ms (the schedule file's, on its profile); measured / predicted [0-9.]*$" "$tmp/run.log" ||
  { cat "$tmp/run.log"; fail "monet-run did not print the predicted step"; }
/usr/bin/python3 - "$tmp/r.json" "$tmp/s.json" "$tmp/run.json" "$tmp/run_lean.json" "$tmp/run_plain.json" <<'PY' ||
import json, sys
r, s, run, lean, plain = (json.load(open(p)) for p in sys.argv[1:6])
close = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(b))
assert close(run["predicted_step_ms"], s["predicted"]["step_ms"]), (run["predicted_step_ms"], s["predicted"])
assert close(run["predicted_step_ms"], r["predicted_step_ms"]), (run["predicted_step_ms"], r["predicted_step_ms"])
assert close(lean["predicted_step_ms"], r["store_all_step_ms"]), (lean["predicted_step_ms"], r["store_all_step_ms"])
assert plain["predicted_step_ms"] is None, plain["predicted_step_ms"]
PY
  fail "predicted steps in monet-run's reports"
echo "ok: full-mode schedule at $budget bytes checked against store-all and run"
