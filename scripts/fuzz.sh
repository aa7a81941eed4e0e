#!/usr/bin/env bash
# Builds the libFuzzer target (test/fuzz/fuzz_import.cpp: ONNX import, shape inference, training graph, estimated
# profile) with clang, ASan and UBSan in build-asan/ (scripts/asan_build.sh, the sanitized tests' tree), and fuzzes
# it for SECONDS (default 60) from the seed corpus models/*.onnx, test/data/*.onnx and test/fuzz/regressions/.
# Exits non-zero on any crash, hang (an input over 25 s), memory blow-up (over 4 GB), leak or sanitizer report; the
# input that did it is written to build-asan/fuzz/artifacts/ (add it to test/fuzz/regressions/ with the fix). New
# interesting inputs accumulate in build-asan/fuzz/corpus/ between runs.
# Usage: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags, e.g. -jobs=2 -workers=2]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
bash scripts/asan_build.sh fuzz_import
source scripts/sanitizer_env.sh
mkdir -p build-asan/fuzz/corpus build-asan/fuzz/artifacts
build-asan/test/fuzz/fuzz_import -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -max_len=100000 \
  -print_final_stats=1 -artifact_prefix=build-asan/fuzz/artifacts/ -dict=test/fuzz/onnx.dict "$@" \
  build-asan/fuzz/corpus models test/data test/fuzz/seeds test/fuzz/regressions
