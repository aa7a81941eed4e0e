#!/usr/bin/env bash
# Configures and builds the sanitized tree build-asan/: clang at -O1 -g, CPU only, AddressSanitizer and
# UndefinedBehaviorSanitizer (every report fatal), and every file compiled for libFuzzer's coverage feedback
# (-DMONET_FUZZ=ON), so one build serves both the sanitized ctest (scripts/test_sanitized.sh) and the fuzz target
# (scripts/fuzz.sh). Arguments are ninja targets (default: all).
# Usage: scripts/asan_build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DMONET_CUDA=OFF -DMONET_SANITIZE=address,undefined -DMONET_FUZZ=ON >/dev/null
ninja -C build-asan -j "$(nproc)" "$@"
