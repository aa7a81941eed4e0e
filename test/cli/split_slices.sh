#!/usr/bin/env bash
# The Slices-to-Split rewrite end to end on bert_tiny (its in_proj's Q, K and V are Slices): the profile and the
# schedule say "split", the schedule matches PyTorch in double and store-all on its implementations bitwise; a
# profile made before the rewrite (no "slices" field: the committed BERT estimate) still rescales in monet-fit,
# which imports each batch as that profile's graph was imported.
# Usage: split_slices.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
apps=$build/apps
model=$src/test/data/bert_tiny.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$apps/monet-profile" "$model" --batch 2 --device estimate -o "$tmp/p.json" -q >/dev/null
grep -q '"slices": "split"' "$tmp/p.json" || fail "the profile does not say its Slices are split"
grep -q '"op": "Split"' "$tmp/p.json" || fail "the profile has no Split"
if grep -q '"op": "SliceGrad"' "$tmp/p.json"; then fail "the profile still has SliceGrads"; fi
"$apps/monet-solve" "$tmp/p.json" --budget 1GB --mode store-all -o "$tmp/s.json" -q >/dev/null
grep -q '"slices": "split"' "$tmp/s.json" || fail "the schedule does not say its Slices are split"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference torch --precision f64 --tolerance 1e-9 2>&1) ||
  fail "against PyTorch: $out"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference store-all 2>&1) || fail "against store-all: $out"
grep -q "bitwise equal, PASS" <<<"$out" || fail "not bitwise equal to store-all: $out"

grep -q '"slices"' "$src/schedules/bert_32/profile_estimate.json" && fail "the committed BERT profile has a slices field"
out=$("$apps/monet-fit" "$src/models/transformers/bert.onnx" --budget 100GB \
  --profile "$src/schedules/bert_32/profile_estimate.json" --max-batch 2 --time-limit 1 2>&1) ||
  fail "monet-fit on a profile of the graph as written: $out"
grep -q "largest batch: 2" <<<"$out" || fail "unexpected monet-fit output: $out"
echo "split_slices: PASS"
