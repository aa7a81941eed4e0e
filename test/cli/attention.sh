#!/usr/bin/env bash
# The fused attention end to end on gpt2_tiny: the lean store-all (the smallest store-all peak: a schedule of
# monet-solve --mode store-all, chosen without a clock) picks AttentionGrad's recompute implementation, runs with the arena's peak equal to the prediction, matches PyTorch in double and
# store-all on its implementations bitwise; --attention materialized imports without the fusion and matches
# PyTorch too; a schedule of the fused graph refuses an explicit --attention materialized.
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
grep -q '"attention": "fused"' "$tmp/p.json" || fail "the profile does not say the attention is fused"
"$apps/monet-solve" "$tmp/p.json" --budget 2000000 --mode store-all -o "$tmp/s.json" -q >/dev/null
grep -q '"attention": "fused"' "$tmp/s.json" || fail "the schedule does not say the attention is fused"
tr -d ' \n' <"$tmp/s.json" | grep -q 'AttentionGrad[^"]*","recompute"' || fail "the lean store-all runs no AttentionGrad with recompute"

run=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --iters 1 2>&1) || fail "monet-run: $run"
grep -q "(equal)" <<<"$run" || fail "arena peak differs from the prediction: $run"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference torch --precision f64 --tolerance 1e-9 2>&1) ||
  fail "against PyTorch: $out"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference store-all 2>&1) || fail "against store-all: $out"
grep -q "bitwise equal, PASS" <<<"$out" || fail "not bitwise equal to store-all: $out"

out=$("$apps/monet-check" "$model" --batch 2 --attention materialized --precision f64 --tolerance 1e-9 2>&1) ||
  fail "materialized against PyTorch: $out"
if out=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --attention materialized --iters 1 2>&1); then
  fail "a fused schedule ran with --attention materialized"
fi
grep -q "differs from the schedule's fused" <<<"$out" || fail "unexpected message: $out"
echo "attention: PASS"
