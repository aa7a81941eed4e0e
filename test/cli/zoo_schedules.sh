#!/usr/bin/env bash
# Every schedule committed under schedules/ must still replay against its model (fingerprint, names, simulator,
# budget): a change to import or training-graph construction that alters a fingerprint shows up here. The UNet's
# committed schedules are of its 1-class graph trained with --loss sum:
# test/data/unet_1class/unet.onnx is that file, until a GPU session solves the 2-class graph's again.
# Usage: zoo_schedules.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
failures=0
count=0
for s in "$src"/schedules/*/schedule_*.json "$src"/schedules/*/zoo/schedule_*.json; do
  [ -e "$s" ] || continue
  dir=${s#"$src"/schedules/}
  dir=${dir%%/*}
  model=${dir%_*}
  loss=ce
  count=$((count + 1))
  onnx=$src/models/$model.onnx
  [ -f "$onnx" ] || onnx=$src/models/transformers/$model.onnx
  [ -f "$onnx" ] || onnx=$src/models/segmentation/$model.onnx
  if [ "$model" = unet ] && grep -q '"fingerprint": "6ba423682ede9327"' "$s"; then
    onnx=$src/test/data/unet_1class/unet.onnx
    loss=sum
  fi
  if ! out=$("$build/apps/monet-check" "$onnx" --schedule "$s" --simulate --loss $loss 2>&1); then
    echo "FAIL: $s: $out"
    failures=$((failures + 1))
  fi
done
echo "$count schedules checked, $failures failed"
[ "$count" -gt 0 ] && [ "$failures" -eq 0 ]
