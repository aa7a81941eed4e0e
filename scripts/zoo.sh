#!/usr/bin/env bash
# The schedule zoo in one command (scripts/zoo.py says what each stage does): on a GPU machine every stage (solve,
# gpu, table); without one the solve and table stages, and the GPU columns of schedules/README.md say "not run".
# Usage: scripts/zoo.sh [--models resnet50,...] [--time-limit 600] [--threads 2] [--build build] [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
/usr/bin/python3 scripts/zoo.py solve "$@"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  python3 scripts/zoo.py gpu "$@"  # the machine's python3: PyTorch with CUDA and torch.compile
else
  echo "zoo: no GPU here: the gpu stage (monet-run, monet-check and PyTorch on CUDA) is left for a GPU machine"
fi
/usr/bin/python3 scripts/zoo.py table "$@"
