#!/usr/bin/env bash
# Each row solved on the 2026-11-30 H200 profile (base: re-derived by this build) and on the same profile with
# estimated forward / data-gradient slice offers (est: estimate_slices.py, then re-derived), full mode, 60 s,
# 1 thread, two solves side by side. From the repository root: bash schedules/cpu-runs/2026-11-30_conv_slices/run.sh
# (ROWS="model:budget ..." for some rows; SKIP_PREP=1 to reuse /tmp/slx's profiles).
set -u
D=schedules/cpu-runs/2026-11-30_conv_slices
P=schedules/gpu-runs/2026-11-30_h200/call1/schedules
BIN=build/apps
prep() {  # model batch onnx
  local m=$1 b=$2 onnx=$3 src=$P/${1}_${2}/h200/profile.json
  /usr/bin/python3 $D/estimate_slices.py "$src" /tmp/slx/${m}_est_raw.json
  $BIN/monet-profile "$onnx" --batch "$b" --rederive /tmp/slx/${m}_est_raw.json -o /tmp/slx/${m}_est.json | tail -1
  $BIN/monet-profile "$onnx" --batch "$b" --rederive "$src" -o /tmp/slx/${m}_base.json | tail -1
}
mkdir -p /tmp/slx $D/logs
ROWS=${ROWS:-"vgg16:9.71 vgg16:8.66 vgg16:7.88 vgg16:6.82 unet:6.01 unet:5.01 resnet50:6.00 resnet50:4.99 googlenet:4.99 mobilenet_v2:5.01"}
[ -n "${SKIP_PREP:-}" ] || {
prep vgg16 176 models/vgg16.onnx
prep unet 11 models/unet.onnx
prep resnet50 184 models/resnet50.onnx
prep googlenet 320 models/googlenet.onnx
prep mobilenet_v2 272 models/mobilenet_v2.onnx
}
for row in $ROWS; do
  set -- ${row/:/ }
  for kind in base est; do
    $BIN/monet-solve /tmp/slx/${1}_${kind}.json --budget ${2}GB --mode full --time-limit 60 --threads 1 \
      -o /tmp/slx/${1}_${2}_${kind}_schedule.json --report $D/logs/report_${1}_${2}_${kind}.json \
      > $D/logs/solve_${1}_${2}_${kind}.log 2>&1 &
  done
  wait
done
