#!/usr/bin/env bash
# Builds the libFuzzer target (test/fuzz/fuzz_import.cpp: ONNX import, shape inference, training graph, estimated
# profile) with clang, ASan and UBSan in build-fuzz/, and fuzzes it for SECONDS (default 60) from the seed corpus
# models/*.onnx, test/data/*.onnx and test/fuzz/regressions/. Exits non-zero on any crash, hang (an input over
# 25 s), memory blow-up (over 4 GB), leak or sanitizer report; the input that did it is written to
# build-fuzz/artifacts/ (add it to test/fuzz/regressions/ with the fix). New interesting inputs accumulate in
# build-fuzz/corpus/ between runs.
# Usage: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags, e.g. -jobs=2 -workers=2]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DMONET_CUDA=OFF -DMONET_SANITIZE=address,undefined -DMONET_FUZZ=ON >/dev/null
ninja -C build-fuzz -j "$(nproc)" fuzz_import
source scripts/sanitizer_env.sh
mkdir -p build-fuzz/corpus build-fuzz/artifacts
build-fuzz/test/fuzz/fuzz_import -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -max_len=100000 \
  -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/ -dict=test/fuzz/onnx.dict "$@" \
  build-fuzz/corpus models test/data test/fuzz/seeds test/fuzz/regressions
