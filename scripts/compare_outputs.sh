#!/usr/bin/env bash
# Compares what two builds of the five commands write, for a change that must not alter behaviour (a refactoring):
# profiles of every model (estimate), the simulator's replay of every committed schedule, the baselines and
# small MILPs solved to optimality in both modes, monet-fit, and monet-check against store-all and PyTorch.
# Stdout, stderr, exit codes and output files must be identical, except for seconds (wall-clock times), which are
# masked: "*_s" fields of JSON reports; in text, progress lines, the phase times and "N s".
# Usage: compare_outputs.sh BEFORE_APPS_DIR AFTER_APPS_DIR [SOURCE_DIR]
#   e.g. compare_outputs.sh /tmp/before build/apps   (BEFORE_APPS_DIR holds monet-profile, monet-solve, ...)
# Exit 0 when every output is the same.
set -u
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
src=${3:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compared=0
differ=0

# Masks wall-clock seconds in text and drops "*_s" keys (and "phases_s") from JSON.
normalize() {
  local f=$1
  if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null; then
    python3 - "$f" <<'EOF'
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not (k.endswith("_s") or k in ("seconds", "elapsed"))}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
d = json.load(open(sys.argv[1]))
open(sys.argv[1], "w").write(json.dumps(strip(d), indent=1, sort_keys=True))
EOF
  else
    # Progress lines come at wall-clock times; the phase times and exchange folders vary from run to run.
    sed -E -i '/^ +[0-9.]+ s  incumbent /d; s/\((setup [^)]*)\)/(phases)/; s#/monet-check-[A-Za-z0-9]+#/monet-check-X#g;
      s/[0-9]+(\.[0-9]+)? ?s\b/N s/g' "$f"
  fi
}

# run NAME ARGS...: runs the command (its binary name first) with both builds, each in its own folder, and compares
# stdout, stderr, the exit code and every file written there. Paths in ARGS may use @OUT@ for that folder.
run() {
  local name=$1
  shift
  local bin=$1
  shift
  for side in before after; do
    local dir="$tmp/$side/$name"
    mkdir -p "$dir"
    local exe
    if [ $side = before ]; then exe="$before/$bin"; else exe="$after/$bin"; fi
    local args=()
    for a in "$@"; do args+=("${a//@OUT@/$dir}"); done
    (cd "$dir" && "$exe" "${args[@]}" >"$dir/.stdout" 2>"$dir/.stderr"; echo $? >"$dir/.rc")
    for f in "$dir"/.stdout "$dir"/.stderr "$dir"/*; do
      [ -f "$f" ] || continue
      sed -i "s#$dir#OUT#g; s#$before#BIN#g; s#$after#BIN#g" "$f" 2>/dev/null
      normalize "$f"
    done
  done
  compared=$((compared + 1))
  if ! diff -r "$tmp/before/$name" "$tmp/after/$name" >"$tmp/diff.txt"; then
    differ=$((differ + 1))
    echo "DIFFERS: $name ($bin $*)"
    head -20 "$tmp/diff.txt"
  fi
}

# Profiles (estimate) of every model, the malformed ones' errors included.
models=$(find "$src/models" "$src/test/data" -name '*.onnx' | sort)
for m in $models; do
  name=profile_$(basename "$(dirname "$m")")_$(basename "$m" .onnx)
  run "$name" monet-profile "$m" --batch 2 --device estimate -o @OUT@/profile.json
done

# Every committed schedule replayed by the simulator against its model (as test/cli/zoo_schedules.sh does).
for s in "$src"/schedules/*/schedule_*.json; do
  dir=${s#"$src"/schedules/}
  dir=${dir%%/*}
  model=${dir%_*}
  loss=ce
  onnx=$src/models/$model.onnx
  [ -f "$onnx" ] || onnx=$src/models/transformers/$model.onnx
  if [ "$model" = unet ] && grep -q '"fingerprint": "6ba423682ede9327"' "$s"; then
    onnx=$src/test/data/unet_1class/unet.onnx
    loss=sum
  fi
  run "simulate_${dir}_$(basename "$s" .json)" monet-check "$onnx" --schedule "$s" --simulate --loss $loss
done

# Baselines and MILPs solved to optimality on small models, with reports.
for m in models/tiny.onnx test/data/gpt2_tiny.onnx test/data/bert_tiny.onnx test/data/conv_relu.onnx; do
  base=$(basename "$m" .onnx)
  "$after/monet-profile" "$src/$m" --batch 2 --device estimate -o "$tmp/$base.json" >/dev/null 2>&1 || continue
  for mode in store-all sqrtn checkpoint full; do
    for budget in 1GB 40000; do
      run "solve_${base}_${mode}_$budget" monet-solve "$tmp/$base.json" --budget $budget --mode $mode \
        --time-limit 120 --threads 1 -o @OUT@/schedule.json --report @OUT@/report.json
    done
  done
  # monet-fit bisects over batches with timed solves: only where every solve is proven well within its limit.
  case $base in tiny | conv_relu) run "fit_$base" monet-fit "$src/$m" --budget 1MB --time-limit 20 --threads 1 --report @OUT@/fit.json ;; esac
  for mode in checkpoint full; do
    s="$tmp/after/solve_${base}_${mode}_40000/schedule.json"
    [ -f "$s" ] || continue
    cp "$s" "$tmp/$base-$mode.json"
    run "check_store_all_${base}_$mode" monet-check "$src/$m" --schedule "$tmp/$base-$mode.json" \
      --reference store-all --report @OUT@/check.json
  done
  run "check_torch_$base" monet-check "$src/$m" --batch 2 --precision f64 --report @OUT@/check.json
done

echo "$compared outputs compared, $differ differ"
[ "$differ" -eq 0 ]
