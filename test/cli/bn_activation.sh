#!/usr/bin/env bash
# The batch norm - activation fusion end to end (lib/ir/fuse_bn_activation.h; the default import) on GoogLeNet
# (ReLU) and MobileNetV2 (ReLU6, a Clip) at a small size: the profile and the schedules say "bn_activation":
# "fused" and hold BatchNormActGrad nodes; the lean store-all (which gates gradients by the 1-bit masks) and a
# full-mode schedule below store-all run with the arena's peak equal to the prediction and bitwise as store-all on
# their implementations; --bn-activation separate imports the activations as nodes; a fused schedule refuses an
# explicit --bn-activation separate. Gradients against PyTorch: the check_* tests of the zoo models (fused by
# default) and test_fuse_bn_activation.cpp (fused against separate).
# Usage: bn_activation.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
apps=$build/apps
small=(--batch 2 --input-shape 3,64,64)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for m in googlenet mobilenet_v2; do
  model=$src/models/$m.onnx
  "$apps/monet-profile" "$model" "${small[@]}" --device estimate -o "$tmp/p.json" -q >/dev/null
  grep -q '"bn_activation": "fused"' "$tmp/p.json" || fail "$m: the profile does not say fused"
  grep -q '"op": "BatchNormActGrad"' "$tmp/p.json" || fail "$m: the profile has no BatchNormActGrad"
  "$apps/monet-profile" "$model" "${small[@]}" --device estimate --bn-activation separate -o "$tmp/ps.json" -q \
    >/dev/null
  grep -q '"bn_activation": "separate"' "$tmp/ps.json" || fail "$m: the separate profile does not say separate"
  grep -q '"op": "BatchNormActGrad"' "$tmp/ps.json" && fail "$m: the separate profile has BatchNormActGrad nodes"

  "$apps/monet-solve" "$tmp/p.json" --mode store-all --budget 1000GB -q -o "$tmp/lean.json" >/dev/null ||
    fail "$m: no lean store-all"
  grep -q '"mask"' "$tmp/lean.json" || fail "$m: the lean store-all gates no gradient by a mask"
  out=$("$apps/monet-solve" "$tmp/p.json" --budget 1MB --time-limit 1 --threads 1 -o "$tmp/none.json" 2>&1 || true)
  found=$(sed -n 's/.*the schedules found need \([0-9,]*\) B.*/\1/p' <<<"$out" | tr -d ,)
  peak=$(sed -n 's/.*store-all: peak \([0-9,]*\) B.*/\1/p' <<<"$out" | head -1 | tr -d ,)
  [ -n "$found" ] && [ -n "$peak" ] || fail "$m: no bounds in: $out"
  budget=$(( found + (peak - found) / 10 ))
  "$apps/monet-solve" "$tmp/p.json" --budget "$budget" --mode full --time-limit 10 --threads 1 -o "$tmp/s.json" -q \
    >/dev/null || fail "$m: no full-mode schedule within $budget B"
  grep -q '"bn_activation": "fused"' "$tmp/s.json" || fail "$m: the schedule does not say fused"
  for s in lean s; do
    run=$("$apps/monet-run" "$model" --schedule "$tmp/$s.json" --iters 1 2>&1) || fail "$m $s: monet-run: $run"
    grep -q "(equal)" <<<"$run" || fail "$m $s: arena peak differs from the prediction: $run"
    out=$("$apps/monet-check" "$model" --schedule "$tmp/$s.json" --reference store-all 2>&1) ||
      fail "$m $s: against store-all: $out"
    grep -q "bitwise equal, PASS" <<<"$out" || fail "$m $s: not bitwise equal to store-all: $out"
  done
  if out=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --bn-activation separate --iters 1 2>&1); then
    fail "$m: a fused schedule ran with --bn-activation separate"
  fi
  grep -q "bn-activation separate differs from the schedule's fused" <<<"$out" || fail "$m: unexpected message: $out"
done
echo "bn_activation: PASS"
