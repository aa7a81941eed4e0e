#!/usr/bin/env bash
# Solver benchmark: estimated profiles of the zoo models at MONeT's batch sizes, solved at 1/3, 1/2 and 2/3 (or
# --budgets) of each store-all peak; writes schedules/<model>_<batch>/ (profile, schedules and reports, named by
# mode, budget and time limit: runs at another limit sit beside, not over, the others) and schedules/SOLVER.md (a
# table per limit).
# Usage: scripts/bench_solver.sh [--time-limit S] [--threads N] [--mode checkpoint] [--budgets 1/3,1/2,2/3]
#                                [models...]        (MODEL:BATCH, from models/, models/transformers/ or models/segmentation/)
set -euo pipefail
cd "$(dirname "$0")/.."
time_limit=600
threads=2
mode=checkpoint
models=()
budgets=1/3,1/2,2/3
while [ $# -gt 0 ]; do
  case "$1" in
    --time-limit) time_limit=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
for frac in ${budgets//,/ }; do
  [[ $frac =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]] && continue
  echo "bench_solver.sh: --budgets '$frac': expected fractions of the store-all peak, such as 1/3,1/2" >&2
  exit 2
done
[ ${#models[@]} -gt 0 ] || models=(resnet50:184 googlenet:320 unet:11 mobilenet_v2:272 vgg16:176)
bin=${MONET_BUILD:-build}/apps  # another build directory: MONET_BUILD=build-merge
[ -x $bin/monet-solve ] || bash scripts/build.sh

for entry in "${models[@]}"; do
  model=${entry%%:*}
  batch=${entry##*:}
  dir=schedules/${model}_${batch}
  mkdir -p "$dir"
  loss=ce
  onnx=models/$model.onnx
  [ -f "$onnx" ] || onnx=models/transformers/$model.onnx  # gpt2, bert, llama
  [ -f "$onnx" ] || onnx=models/segmentation/$model.onnx  # lraspp_mobilenet_v3_large
  profile=$dir/profile_estimate.json
  [ -f "$profile" ] || $bin/monet-profile "$onnx" --batch "$batch" --loss $loss --device estimate -o "$profile" >/dev/null
  peak=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['store_all_peak_bytes'])" "$profile")
  for frac in ${budgets//,/ }; do
    budget=$(/usr/bin/python3 -c "from fractions import Fraction as F; print(int(F('$frac') * $peak))")
    tag=${frac/\//_}_${time_limit}s
    echo "== $model b$batch budget $frac of $peak = $budget bytes ($mode, ${time_limit}s, $threads threads)"
    set +e
    $bin/monet-solve "$profile" --budget "$budget" --mode "$mode" --time-limit "$time_limit" --threads "$threads" \
      -o "$dir/schedule_${mode}_${tag}.json" --report "$dir/report_${mode}_${tag}.json" | tail -3
    set -e
  done
done
/usr/bin/python3 scripts/solver_table.py > schedules/SOLVER.md.tmp
mv schedules/SOLVER.md.tmp schedules/SOLVER.md
echo "wrote schedules/SOLVER.md"
