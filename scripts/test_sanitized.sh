#!/usr/bin/env bash
# The test suite a second time under AddressSanitizer and UndefinedBehaviorSanitizer, in build-asan/
# (scripts/asan_build.sh). Any sanitizer report fails the test that triggered it (-fno-sanitize-recover). Left out:
# the tests labelled python (they run no monet code) and those labelled heavy (full-size runs of code that lighter
# tests reach too; the Release run has them all) (docs/testing.md, "The test command").
# Usage: scripts/test_sanitized.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/asan_build.sh
source scripts/sanitizer_env.sh
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE 'python|heavy' "$@"
