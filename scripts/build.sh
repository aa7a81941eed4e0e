#!/usr/bin/env bash
# Configures and builds monet in build/ (Release). CUDA parts are built when nvcc and cuDNN are found.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j "$(nproc)"
