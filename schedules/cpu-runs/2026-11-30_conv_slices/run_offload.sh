#!/usr/bin/env bash
# VGG-16 b176's two rows that need --offload (5.90 and 5.51 GB), on the profiles run.sh prepared (/tmp/slx), with
# the profile's measured host link, --host-limit 64GB, full mode, 60 s, 1 thread, base and est side by side.
set -u
D=schedules/cpu-runs/2026-11-30_conv_slices
BIN=build/apps
for b in 5.90 5.51; do
  for kind in base est; do
    $BIN/monet-solve /tmp/slx/vgg16_${kind}.json --budget ${b}GB --mode full --time-limit 60 --threads 1 --offload \
      --host-limit 64GB -o /tmp/slx/vgg16_${b}_${kind}_offload_schedule.json \
      --report $D/logs/report_vgg16_${b}_${kind}_offload.json > $D/logs/solve_vgg16_${b}_${kind}_offload.log 2>&1 &
  done
  wait
done
