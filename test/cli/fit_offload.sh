#!/usr/bin/env bash
# monet-fit --offload never gives a smaller batch than without it, and gives a larger one where copies lower the
# floor: gpt2_tiny (its parameters and momentum a large share of its memory at small batches) at 2% below batch 4's
# lower bound without offload. The search without offload runs first; the batches tried with offload start at the
# smallest that did not fit without it, and the report says which attempt used --offload.
# Usage: fit_offload.sh BUILD_DIR SOURCE_DIR
set -u
bin=$1/apps
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$src/test/data/gpt2_tiny.onnx"
fail() { echo "FAIL: $*"; exit 1; }
"$bin/monet-profile" "$model" --batch 4 --device estimate --host-bandwidth 25 -o "$tmp/p.json" >/dev/null ||
  fail "monet-profile"
"$bin/monet-solve" "$tmp/p.json" --mode checkpoint --budget 1 --report "$tmp/probe.json" -o "$tmp/none.json" \
  >/dev/null 2>&1
budget=$(/usr/bin/python3 -c "import json, sys; lb = json.load(open(sys.argv[1]))['lower_bound_bytes']; print(lb - lb // 50)" \
  "$tmp/probe.json") || fail "probe report"
# By work done, not the clock: a time limit that never binds, CBC at its root node, one sub-MIP.
solver="--mode checkpoint --time-limit 1e6 --max-nodes 1 --max-sub-mips 1 --threads 1 --max-batch 16"
"$bin/monet-fit" "$model" --budget "$budget" $solver --report "$tmp/plain.json" -q >"$tmp/plain.log" ||
  { cat "$tmp/plain.log"; fail "monet-fit without --offload"; }
"$bin/monet-fit" "$model" --budget "$budget" $solver --offload --host-bandwidth 25 --host-limit 1GB \
  -o "$tmp/s.json" --report "$tmp/offload.json" -q >"$tmp/offload.log" ||
  { cat "$tmp/offload.log"; fail "monet-fit --offload"; }
grep -q "^without offload: batch " "$tmp/offload.log" || { cat "$tmp/offload.log"; fail "no 'without offload' line"; }
/usr/bin/python3 - "$tmp/plain.json" "$tmp/offload.json" "$tmp/s.json" <<'PY' || { cat "$tmp/offload.log"; fail "reports"; }
import json, sys
plain, off, s = (json.load(open(p)) for p in sys.argv[1:4])
without = plain["largest_batch"]
assert without >= 1 and not plain["offload"], plain
assert off["offload"] and off["largest_batch_without_offload"] == without, (off["largest_batch_without_offload"], without)
# The same search without offload first, attempt for attempt.
first = [t for t in off["tried"] if not t["offload"]]
assert [(t["batch"], t["fits"]) for t in first] == [(t["batch"], t["fits"]) for t in plain["tried"]], (first, plain)
later = [t for t in off["tried"] if t["offload"]]
smallest_failed = min(t["batch"] for t in plain["tried"] if not t["fits"])
assert later and later[0]["batch"] == smallest_failed, (later, smallest_failed)
assert all(t["batch"] > without for t in later), later
# Offload lowers the floor here: a larger batch fits, and its schedule copies.
assert off["largest_batch"] > without, (off["largest_batch"], without)
assert s["batch"] == off["largest_batch"] and s.get("on_host"), (s["batch"], s.get("on_host"))
PY
echo "ok: monet-fit --offload: batch $(grep "^largest batch" "$tmp/offload.log" | cut -d" " -f3 | tr -d :)"; grep "^without" "$tmp/offload.log"
