#!/usr/bin/env bash
# The whole test suite a second time under AddressSanitizer and UndefinedBehaviorSanitizer: clang, -O1 -g,
# CPU only, in build-asan/. Any sanitizer report fails the test that triggered it (-fno-sanitize-recover).
# Usage: scripts/test_sanitized.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DMONET_CUDA=OFF -DMONET_SANITIZE=address,undefined >/dev/null
ninja -C build-asan -j "$(nproc)"
source scripts/sanitizer_env.sh
# -LE python: the tests of the PyTorch reference itself run no monet code, so a sanitizer has nothing to see there.
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE python "$@"
