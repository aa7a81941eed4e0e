#!/usr/bin/env bash
# The fused loss head end to end on gpt2_tiny (LinearCrossEntropy: the output MatMul and the cross-entropy as one
# node, the default): profiles and schedules say "loss_head": "fused"; the lean store-all (monet-solve --mode
# store-all, chosen without a clock) recomputes the logits in the backward, runs with the arena's peak equal to the
# prediction, matches PyTorch in double and store-all on its implementations bitwise; --loss-head separate imports
# the three nodes and matches PyTorch too; a fused schedule refuses an explicit --loss-head separate, and monet-fit a
# --loss-head that differs from its profile's.
# Usage: loss_head.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
apps=$build/apps
model=$src/test/data/gpt2_tiny.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$apps/monet-profile" "$model" --batch 4 --device estimate -o "$tmp/p.json" -q >/dev/null
grep -q '"loss_head": "fused"' "$tmp/p.json" || fail "the profile does not say the loss head is fused"
grep -q '"op": "LinearCrossEntropy"' "$tmp/p.json" || fail "the profile has no LinearCrossEntropy node"
"$apps/monet-profile" "$model" --batch 4 --device estimate --loss-head separate -o "$tmp/ps.json" -q >/dev/null
grep -q '"loss_head": "separate"' "$tmp/ps.json" || fail "the profile of --loss-head separate does not say separate"
grep -q '"op": "SoftmaxCrossEntropy"' "$tmp/ps.json" || fail "the separate profile has no SoftmaxCrossEntropy"
grep -q '"op": "LinearCrossEntropy"' "$tmp/ps.json" && fail "the separate profile has a LinearCrossEntropy node"

"$apps/monet-solve" "$tmp/p.json" --budget 2000000 --mode store-all -o "$tmp/s.json" -q >/dev/null
grep -q '"loss_head": "fused"' "$tmp/s.json" || fail "the schedule does not say the loss head is fused"
tr -d ' \n' <"$tmp/s.json" | grep -q 'LinearCrossEntropyGrad0","recompute"' ||
  fail "the lean store-all does not recompute the logits"
run=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --iters 1 2>&1) || fail "monet-run: $run"
grep -q "(equal)" <<<"$run" || fail "arena peak differs from the prediction: $run"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference torch --precision f64 --tolerance 1e-9 2>&1) ||
  fail "against PyTorch: $out"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference store-all 2>&1) || fail "against store-all: $out"
grep -q "bitwise equal, PASS" <<<"$out" || fail "not bitwise equal to store-all: $out"

out=$("$apps/monet-check" "$model" --batch 2 --loss-head separate --precision f64 --tolerance 1e-9 2>&1) ||
  fail "separate against PyTorch: $out"
if out=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --loss-head separate --iters 1 2>&1); then
  fail "a fused schedule ran with --loss-head separate"
fi
grep -q "loss-head separate differs from the schedule's fused" <<<"$out" || fail "unexpected message: $out"
if out=$("$apps/monet-fit" "$model" --budget 1GB --profile "$tmp/p.json" --loss-head separate 2>&1); then
  fail "monet-fit took --loss-head separate with a fused profile"
fi
grep -q "loss-head separate differs from the profile's fused" <<<"$out" || fail "unexpected message: $out"
echo "loss_head: PASS"
