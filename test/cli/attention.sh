#!/usr/bin/env bash
# The fused attention end to end on gpt2_tiny, imported strided (the default: the Attention reads Q, K, V and writes O
# where the export stores them, the heads' Transposes taken in): the lean store-all (the smallest store-all peak: a
# schedule of monet-solve --mode store-all, chosen without a clock) picks AttentionGrad's recompute implementation,
# runs with the arena's peak equal to the prediction, matches PyTorch in double and store-all on its
# implementations bitwise; the strided graph has fewer Transposes than --attention fused's, which matches PyTorch
# too, as does --attention materialized (no fusion); a schedule of the strided graph refuses an explicit
# --attention materialized.
# Usage: attention.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
apps=$build/apps
model=$src/test/data/gpt2_tiny.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$apps/monet-profile" "$model" --batch 4 --device estimate -o "$tmp/p.json" -q >/dev/null
grep -q '"attention": "strided"' "$tmp/p.json" || fail "the profile does not say the attention is strided"
"$apps/monet-profile" "$model" --batch 4 --device estimate --attention fused -o "$tmp/pf.json" -q >/dev/null
grep -q '"attention": "fused"' "$tmp/pf.json" || fail "the profile of --attention fused does not say fused"
transposes() { grep -o '"op": "Transpose"' "$1" | wc -l; }
[ "$(transposes "$tmp/p.json")" -lt "$(transposes "$tmp/pf.json")" ] ||
  fail "strided keeps $(transposes "$tmp/p.json") Transposes, fused $(transposes "$tmp/pf.json")"
"$apps/monet-solve" "$tmp/p.json" --budget 2000000 --mode store-all -o "$tmp/s.json" -q >/dev/null
grep -q '"attention": "strided"' "$tmp/s.json" || fail "the schedule does not say the attention is strided"
tr -d ' \n' <"$tmp/s.json" | grep -q 'AttentionGrad[^"]*","recompute"' || fail "the lean store-all runs no AttentionGrad with recompute"

run=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --iters 1 2>&1) || fail "monet-run: $run"
grep -q "(equal)" <<<"$run" || fail "arena peak differs from the prediction: $run"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference torch --precision f64 --tolerance 1e-9 2>&1) ||
  fail "against PyTorch: $out"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference store-all 2>&1) || fail "against store-all: $out"
grep -q "bitwise equal, PASS" <<<"$out" || fail "not bitwise equal to store-all: $out"

for mode in fused materialized; do
  out=$("$apps/monet-check" "$model" --batch 2 --attention $mode --precision f64 --tolerance 1e-9 2>&1) ||
    fail "$mode against PyTorch: $out"
done
if out=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --attention materialized --iters 1 2>&1); then
  fail "a strided schedule ran with --attention materialized"
fi
grep -q "differs from the schedule's strided" <<<"$out" || fail "unexpected message: $out"
echo "attention: PASS"
