#!/usr/bin/env bash
# The Concat-Conv split end to end on the UNet at a small size (lib/ir/split_concat_conv.h; the default import): the
# profile and the schedule say "concat_conv": "split" and hold the part convolutions; a full-mode schedule below
# store-all runs with the arena's peak equal to the prediction and bitwise as store-all on its implementations;
# --concat-conv joined imports the Concats; a split schedule refuses an explicit --concat-conv joined; the H200
# profile of the joined graph (no concat_conv field) derives a profile of the split graph with the split's nodes
# listed as estimates, and the small split profile derives the joined graph's. Gradients against PyTorch:
# check_unet_f64 and check_unet_f32 (split by default).
# Usage: concat_conv.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
apps=$build/apps
model=$src/models/unet.onnx
small=(--batch 1 --input-shape 3,64,64)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$apps/monet-profile" "$model" "${small[@]}" --device estimate -o "$tmp/p.json" -q >/dev/null
grep -q '"concat_conv": "split"' "$tmp/p.json" || fail "the profile does not say its convolutions are split"
grep -q 'Conv/part1"' "$tmp/p.json" || fail "the profile has no part convolution"
"$apps/monet-profile" "$model" "${small[@]}" --device estimate --concat-conv joined -o "$tmp/pj.json" -q >/dev/null
grep -q '"concat_conv": "joined"' "$tmp/pj.json" || fail "the joined profile does not say joined"
grep -q 'Conv/part1"' "$tmp/pj.json" && fail "the joined profile has part convolutions"
[ "$(grep -c '"op": "Concat"' "$tmp/pj.json")" -gt "$(grep -c '"op": "Concat"' "$tmp/p.json")" ] ||
  fail "the split profile has as many Concats as the joined one"

# A budget a tenth of the way from the smallest schedule the heuristics find to store-all's peak.
out=$("$apps/monet-solve" "$tmp/p.json" --budget 1MB --time-limit 1 --threads 1 -o "$tmp/none.json" 2>&1 || true)
found=$(sed -n 's/.*the schedules found need \([0-9,]*\) B.*/\1/p' <<<"$out" | tr -d ,)
peak=$(sed -n 's/.*store-all: peak \([0-9,]*\) B.*/\1/p' <<<"$out" | head -1 | tr -d ,)
[ -n "$found" ] && [ -n "$peak" ] || fail "no bounds in: $out"
budget=$(( found + (peak - found) / 10 ))
"$apps/monet-solve" "$tmp/p.json" --budget "$budget" --mode full --time-limit 10 --threads 1 -o "$tmp/s.json" -q \
  >/dev/null || fail "no full-mode schedule within $budget B"
grep -q '"concat_conv": "split"' "$tmp/s.json" || fail "the schedule does not say its convolutions are split"
run=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --iters 1 2>&1) || fail "monet-run: $run"
grep -q "(equal)" <<<"$run" || fail "arena peak differs from the prediction: $run"
out=$("$apps/monet-check" "$model" --schedule "$tmp/s.json" --reference store-all 2>&1) || fail "against store-all: $out"
grep -q "bitwise equal, PASS" <<<"$out" || fail "not bitwise equal to store-all: $out"
if out=$("$apps/monet-run" "$model" --schedule "$tmp/s.json" --concat-conv joined --iters 1 2>&1); then
  fail "a split schedule ran with --concat-conv joined"
fi
grep -q "concat-conv joined differs from the schedule's split" <<<"$out" || fail "unexpected message: $out"

h200=$src/schedules/gpu-runs/2026-11-30_h200/call1/schedules/unet_11/h200/profile.json
grep -q '"concat_conv"' "$h200" && fail "the committed H200 UNet profile has a concat_conv field"
out=$("$apps/monet-profile" "$model" --batch 11 --input-shape 3,416,608 --rederive "$h200" --concat-conv split \
  -o "$tmp/d.json" 2>&1) || fail "deriving the split graph's profile: $out"
grep -q '"concat_conv": "split"' "$tmp/d.json" || fail "the derived profile does not say split"
grep -q '"split_conv_estimates"' "$tmp/d.json" || fail "the derived profile does not list its estimates"
# And back: the split profile derived to the joined graph (each joined convolution at its parts' sum).
out=$("$apps/monet-profile" "$model" "${small[@]}" --rederive "$tmp/p.json" --concat-conv joined -o "$tmp/dj.json" 2>&1) ||
  fail "deriving the joined graph's profile from the split one: $out"
grep -q '"concat_conv": "joined"' "$tmp/dj.json" || fail "the profile derived back does not say joined"
grep -q '"split_conv_estimates"' "$tmp/dj.json" || fail "the profile derived back does not list its estimates"
echo "concat_conv: PASS"
