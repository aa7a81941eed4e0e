#!/usr/bin/env bash
# The test command (CI): installs what is missing (Debian packages), builds, and runs every test with ctest; then
# the suite again under ASan+UBSan and 60 s of fuzzing, both in build-asan/ (docs/testing.md, "The test
# command"). MONET_QUICK=1 stops after the first ctest run.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
stage() { echo "== test.sh: $1 ($(( $(date +%s) - start )) s)"; }
bash scripts/install_deps.sh
stage "build"
bash scripts/build.sh
stage "ctest"
ctest --test-dir build --output-on-failure -j "$(nproc)"
if [ -n "${MONET_QUICK:-}" ]; then
  stage "done (MONET_QUICK: sanitizer and fuzz stages skipped)"
  exit 0
fi
stage "sanitized build and ctest (ASan+UBSan)"
bash scripts/test_sanitized.sh
stage "fuzzing for 60 s"
bash scripts/fuzz.sh 60
stage "done"
