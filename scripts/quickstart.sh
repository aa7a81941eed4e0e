#!/usr/bin/env bash
# Quick start on a fresh Debian 12 machine: installs dependencies, builds, trains ResNet-50 for a few steps on the
# CPU engine at a small batch (step time, measured and predicted peak), then plans ResNet-50 at batch 184 for an
# 8 GB budget: an estimated profile (H100 roofline), the checkpoint MILP on CBC, predicted peak and overhead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== train: resnet50, batch 2, 3x64x64, CPU engine, store-all"
./build/apps/monet-run models/resnet50.onnx --batch 2 --input-shape 3,64,64 --device cpu --iters 3 --warmup 1
echo "== plan: resnet50, batch 184, estimated profile, 8GB budget"
./build/apps/monet-profile models/resnet50.onnx --batch 184 --device estimate -o "$out/profile.json"
./build/apps/monet-solve "$out/profile.json" --budget 8GB --time-limit 60 -o "$out/schedule.json"
./build/apps/monet-check models/resnet50.onnx --schedule "$out/schedule.json" --simulate
