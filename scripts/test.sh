#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages), builds, and runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
