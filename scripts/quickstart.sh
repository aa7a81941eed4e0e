#!/usr/bin/env bash
# Quick start on a fresh Debian 12 machine: installs dependencies, builds, and trains ResNet-50 for a few steps on
# the CPU engine at a small batch, printing step time, the arena's measured peak and the predicted peak.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
./build/apps/monet-run models/resnet50.onnx --batch 2 --input-shape 3,64,64 --device cpu --iters 3 --warmup 1
