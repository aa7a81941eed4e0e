#!/usr/bin/env bash
# The user's path through --offload: a profile with a host link (--host-bandwidth), a budget below the lower bound
# without offload, solved with offload; the schedule keeps momentum (and parameters) on the host, copies values there
# and back, passes monet-check --reference store-all bitwise and runs with the arena's peak equal to the prediction
# and the host arena equal to the simulator's; then the same with lean copy timing (--copy-timing lean). ResNet-50 at
# batch 4, 64x64 (CPU).
# Usage: offload.sh BUILD_DIR SOURCE_DIR
set -u
bin=$1/apps
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$src/models/resnet50.onnx"
shape="--batch 4 --input-shape 3,64,64"
fail() { echo "FAIL: $*"; exit 1; }
# The schedule $tmp/$1.json checked bitwise against store-all and run: arena and host arena as predicted.
check_and_run() {
  local name=$1
  "$bin/monet-check" "$model" --schedule "$tmp/$name.json" --reference store-all >"$tmp/${name}_check.log" 2>&1 ||
    { cat "$tmp/${name}_check.log"; fail "monet-check ($name)"; }
  grep -q "bitwise equal, PASS" "$tmp/${name}_check.log" || { cat "$tmp/${name}_check.log"; fail "$name: not bitwise equal"; }
  "$bin/monet-run" "$model" --schedule "$tmp/$name.json" --iters 1 --warmup 0 >"$tmp/${name}_run.log" 2>&1 ||
    { cat "$tmp/${name}_run.log"; fail "monet-run ($name)"; }
  grep -q "predicted [0-9,]* bytes (equal)" "$tmp/${name}_run.log" ||
    { cat "$tmp/${name}_run.log"; fail "$name: arena peak != predicted"; }
  grep -qE "offloaded: host arena ([0-9,]+) bytes \(predicted \1\)" "$tmp/${name}_run.log" ||
    { cat "$tmp/${name}_run.log"; fail "$name: host arena != predicted"; }
}
"$bin/monet-profile" "$model" $shape --device estimate --host-bandwidth 25 -o "$tmp/p.json" >/dev/null ||
  fail "monet-profile"
"$bin/monet-solve" "$tmp/p.json" --mode checkpoint --budget 1 --report "$tmp/probe.json" -o "$tmp/none.json" \
  >/dev/null 2>&1
# 2% below the lower bound without offload (its momentum resident): only with momentum at home on the host.
budget=$(/usr/bin/python3 - "$tmp/probe.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
lb, found = r["lower_bound_bytes"], r["smallest_found_bytes"]
assert lb < found, (lb, found)
print(lb - lb // 50)
PY
) || fail "probe report"
# By work done, not the clock: a time limit that never binds, CBC at its root node, one sub-MIP.
"$bin/monet-solve" "$tmp/p.json" --mode checkpoint --offload --host-limit 1GB --budget "$budget" --time-limit 1e6 \
  --max-nodes 1 --max-sub-mips 1 --threads 1 -o "$tmp/s.json" --report "$tmp/r.json" >"$tmp/solve.log" ||
  { cat "$tmp/solve.log"; fail "monet-solve --offload at $budget"; }
grep -q "^offload: host link H2D 25.0 GB/s" "$tmp/solve.log" || { cat "$tmp/solve.log"; fail "no link line"; }
/usr/bin/python3 - "$tmp/r.json" "$tmp/s.json" "$budget" <<'PY' || fail "report or schedule"
import json, sys
r, s, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
o = r["offload"]
assert r["fits"] and r["predicted_peak_bytes"] <= budget, (r["fits"], r["predicted_peak_bytes"], budget)
assert o["transfers"] > 0 and o["transfers"] % 2 == 0, o
assert 0 < o["host_peak_bytes"] <= o["host_limit_bytes"] == 10**9, o
kinds = [step[0] for step in s["steps"]]
assert kinds.count("offload") == kinds.count("prefetch") == o["transfers"] // 2, (kinds.count("offload"), o)
assert o["states_on_host"] > 0 and len(s["on_host"]) == o["states_on_host"], (s.get("on_host"), o)
# momentum, and parameters (read in the forward pass, away after their update)
params = [name for name in s["on_host"] if not name.endswith("/momentum")]
assert len(params) == o["parameters_on_host"], (params, o)
assert o["parameter_bytes_on_host"] <= o["state_bytes_on_host"], o
assert o["state_bytes_on_host"] <= o["host_peak_bytes"], o
PY
check_and_run s
# Lean copy timing (--copy-timing lean: each copy releases and takes device memory as late as it can, the
# computation waiting for it): the same budget, the same checks.
"$bin/monet-solve" "$tmp/p.json" --mode checkpoint --offload --host-limit 1GB --copy-timing lean --budget "$budget" \
  --time-limit 1e6 --max-nodes 1 --max-sub-mips 1 --threads 1 -o "$tmp/lean.json" --report "$tmp/lean_r.json" \
  >"$tmp/lean.log" 2>&1 || { cat "$tmp/lean.log"; fail "monet-solve --copy-timing lean at $budget"; }
/usr/bin/python3 - "$tmp/lean_r.json" "$budget" <<'PY' || fail "lean report"
import json, sys
r, budget = json.load(open(sys.argv[1])), int(sys.argv[2])
assert r["fits"] and r["predicted_peak_bytes"] <= budget, (r["fits"], r["predicted_peak_bytes"], budget)
assert r["offload"]["copy_timing"] == "lean" and r["offload"]["transfers"] > 0, r["offload"]
PY
check_and_run lean
echo "ok: offloading schedules at $budget bytes (copy timing hidden and lean): bitwise equal to store-all, arena and host arena as predicted"
