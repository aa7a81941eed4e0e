#!/usr/bin/env bash
# The user's path through --mode full: profile, solve at the tightest budget the heuristics reach (where saved-tensor
# choices pay), then monet-check --reference store-all (not bitwise for other implementations: within 1e-3) and
# monet-run (arena peak = predicted <= budget).
# Usage: full_mode.sh BUILD_DIR SOURCE_DIR
set -u
bin=$1/apps
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$src/models/resnet50.onnx"
fail() { echo "FAIL: $*"; exit 1; }
"$bin/monet-profile" "$model" --batch 2 --input-shape 3,32,32 --device estimate -o "$tmp/p.json" >/dev/null ||
  fail "monet-profile"
"$bin/monet-solve" "$tmp/p.json" --budget 1 --report "$tmp/probe.json" -o "$tmp/none.json" >/dev/null 2>&1
budget=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['smallest_found_bytes'])" "$tmp/probe.json") ||
  fail "no smallest_found_bytes in the report"
# 20 s: the warm start's heuristics stop at shares of the limit, and in a sanitized build under ctest -j2 a 10 s limit
# once left time only for a schedule with default implementations (none of the LP's implementation policy).
"$bin/monet-solve" "$tmp/p.json" --budget "$budget" --time-limit 20 --threads 1 -o "$tmp/s.json" \
  --report "$tmp/r.json" >"$tmp/solve.log" || { cat "$tmp/solve.log"; fail "monet-solve --mode full at $budget"; }
/usr/bin/python3 - "$tmp/r.json" "$tmp/s.json" <<'PY' || fail "report or schedule"
import json, sys
r, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["mode"] == "full" and s["mode"] == "full", (r["mode"], s["mode"])
assert sum(r["implementations"].values()) > 0, "no non-default implementation chosen at the tightest budget"
named = [st for st in s["steps"] if len(st) == {"compute": 3, "compute_in_place": 4, "free": 0}[st[0]]]
assert len(named) == sum(r["implementations"].values()), (len(named), r["implementations"])
print("implementations:", r["implementations"])
PY
"$bin/monet-check" "$model" --schedule "$tmp/s.json" --reference store-all --tolerance 1e-3 \
  --report "$tmp/c.json" >"$tmp/check.log" || { cat "$tmp/check.log"; fail "monet-check --reference store-all"; }
grep -q "mode full: .*within the tolerance" "$tmp/check.log" || { cat "$tmp/check.log"; fail "check did not compare within the tolerance"; }
"$bin/monet-run" "$model" --schedule "$tmp/s.json" --iters 1 --warmup 0 >"$tmp/run.log" ||
  { cat "$tmp/run.log"; fail "monet-run"; }
echo "ok: full-mode schedule at $budget bytes checked against store-all and run"
