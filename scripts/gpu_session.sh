#!/usr/bin/env bash
# Runs ON a lent GPU machine, from the repository root, with gpu-pack/ (or gpu-bundle/) carried
# (scripts/gpu_bundle.sh built it here). Writes everything under $OUT (the run tool's output folder; ./gpu-out otherwise). Stages, each within the
# run tool's 10 minutes per command (`all` runs them in order; give several to run those):
#   env      nvidia-smi, driver, CUDA, PyTorch's cuDNN, the bundle's cudnnGetVersion (via monet-run's device line)
#   tests    the CUDA test suite (every op vs the CPU, tiny and ResNet-50 steps, arena peak, determinism)
#   check    monet-check --device cuda --reference cpu on every model in models/ at small input, both math modes;
#            a solved schedule against CUDA store-all (bitwise) (MONET_CHECK_QUICK=1: the full-mode schedule only;
#            MONET_CHECK_MATHS="fp32": the model checks in that math mode alone)
#   profile  monet-profile --device cuda for resnet50 b184 (and the other zoo models while time allows), a
#            checkpoint and a full schedule at 1/2 of the CUDA store-all peak, monet-run store-all and both
#            (MONET_PROFILE_ONLY=1: resnet50's and googlenet's profiles alone)
#   tf32     scripts/tf32_noise.py: PyTorch's gradient error in fp32 and TF32 vs float64 on the check's models
#   kernels  Nsight Compute's time of every kernel of one monet-run store-all step (resnet50 b184), grouped by
#            scripts/kernel_table.py: our engine's side of PyTorch's profiler table (bench's --torch-profile)
#   bench    scripts/bench_pytorch.py --model resnet50 --batch 184: PyTorch eager, checkpoint_sequential, monet
#            store-all and the checkpoint and full-mode schedules at 1/2 (this call's, else committed under h100/)
#   transformers  monet-check --device cuda --reference cpu on gpt2_tiny and bert_tiny (fp32), monet-run store-all
#            of gpt2 b8 and bert b32 (models/transformers/)
#   zoo      the schedule zoo compressed into one call (scripts/zoo.py does it at full length): per model of
#            MONeT's table (MONET_ZOO_MODELS, default vgg16 unet resnet50 mobilenet_v2 googlenet) a profile with
#            every cuDNN algorithm timed, full-mode solves at MONeT's budgets on this machine's cores in the
#            background (MONET_ZOO_SOLVE_LIMIT s each, default 60, 2 threads), while the next model profiles;
#            then monet-run store-all and every schedule, and monet-check --reference store-all (fp32) of the
#            tightest. Files as zoo.py names them: schedules/<model>_<batch>/<gpu>/profile.json and zoo/.
#            MONET_ZOO_TORCH=1: the torch stage runs while the last model's solves do
#   zoo-runs the zoo stage's runs and check for the committed zoo (schedules/<model>_<batch>/), each only where
#            its report is missing (MONET_ZOO_CHECK_ALL=1: every schedule's check)
#   torch    scripts/bench_pytorch.py --no-monet (eager, checkpoint_sequential) per zoo model, into zoo/pytorch.json
#            (where $OUT has none); MONET_TORCH_COMPILE=0.5,0.2,...: also torch.compile at those
#            activation_memory_budget fractions, always run (compiling takes minutes: raise MONET_STEP_TIMEOUT)
#   extra    the steps listed in the file MONET_EXTRA, one "NAME COMMAND..." per line
# MONET_PACK=FILE: after every step, everything under $OUT is packed into FILE (.tgz): the run tool returns at most
# 8 files, and a call cut off at its limit still returns what was done.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# A warm machine may still hold the last call's gpu-bundle/: the carried archive wins.
# (Python's tarfile reads the xz archive whether or not the machine has xz.)
if [ -z "${MONET_BUNDLE:-}" ] && [ -f gpu-pack/bundle.txz ]; then
  rm -rf gpu-bundle && python3 -c 'import tarfile; tarfile.open("gpu-pack/bundle.txz").extractall()'
fi
B=${MONET_BUNDLE:-$ROOT/gpu-bundle}/bin
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
# cuDNN and cuBLAS come from PyTorch's pip wheels, ahead of any the machine has elsewhere: both engines of the
# comparison then run the same library versions (and cuDNN the version our headers are: the machine's own was 9.14
# against 9.19 headers and PyTorch's 9.19).
LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
for so in $(ldd "$B/monet-run" | awk '/cudnn|cublas/ {print $1}'); do
  d=$(find "$SP/nvidia" -name "$so" -printf '%h\n' 2>/dev/null | head -1)
  [ -n "$d" ] && case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" ;; esac
done
export LD_LIBRARY_PATH MONET_MODELS_DIR="$ROOT/models"
SMALL=(--batch 2 --input-shape 3,64,64)

log() { echo "== $(date +%T) $*" | tee -a "$OUT/session.log"; }
# step NAME CMD...: runs CMD, output to $OUT/NAME.txt, one line with its exit status in session.log. Each step
# stops after MONET_STEP_TIMEOUT seconds (default 300) and none starts or runs past MONET_DEADLINE seconds after
# the script began (default: none), so a run-tool call returns its logs inside its own limit.
step() {
  local name=$1; shift
  local left=$(( ${MONET_DEADLINE:-1000000} - SECONDS ))
  local limit=${MONET_STEP_TIMEOUT:-300}
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then log "$name: skipped (deadline)"; return 0; fi
  log "$name: $*"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  log "$name: exit $rc after $((SECONDS - t0)) s; $(tail -1 "$OUT/$name.txt")"
  pack
  return 0
}

pack() {  # steps may finish in background jobs at once: each packs to its own file, then renames
  [ -n "${MONET_PACK:-}" ] || return 0
  tar czf "$MONET_PACK.$BASHPID" -C "$OUT" . 2>/dev/null && mv -f "$MONET_PACK.$BASHPID" "$MONET_PACK"
}

stage_env() {
  { nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$B/monet-run"; } > "$OUT/env.txt" 2>&1
  step env_tiny_run "$B/monet-run" models/tiny.onnx --batch 4 --device cuda --iters 2
}

stage_tests() { MONET_STEP_TIMEOUT=${MONET_TESTS_TIMEOUT:-300} step cuda_tests "$B/monet_cuda_tests" --durations yes; }

check_model() {  # check_model MODEL MATH [ARGS...]: monet-check --device cuda --reference cpu
  local m=$1 math=$2; shift 2
  step "check_${m}_$math" "$B/monet-check" "models/$m.onnx" "$@" --device cuda --reference cpu --math "$math" \
    --report "$OUT/check_${m}_$math.json"
}

stage_check() {
  if [ -n "${MONET_CHECK_QUICK:-}" ]; then  # a quick look: a full-mode schedule against CUDA store-all only
    # With every cuDNN algorithm timed: the full-mode schedule may run backward convolutions on other algorithms.
    step profile_resnet50_small "$B/monet-profile" models/resnet50.onnx "${SMALL[@]}" --device cuda \
      -o "$OUT/resnet50_2_64.profile.json"
    local budget
    budget=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['store_all_peak_bytes']*97//100)" \
      "$OUT/resnet50_2_64.profile.json" 2>/dev/null || echo 0)
    step solve_resnet50_small_full "$B/monet-solve" "$OUT/resnet50_2_64.profile.json" --budget "$budget" \
      --time-limit 15 --mode full -o "$OUT/resnet50_2_64.half.full.schedule.json"
    step check_full_schedule_store_all "$B/monet-check" models/resnet50.onnx \
      --schedule "$OUT/resnet50_2_64.half.full.schedule.json" --device cuda --math fp32 --reference store-all \
      --report "$OUT/check_full_schedule_store_all.json"
    return 0
  fi
  check_model tiny fp32 --batch 4
  check_model tiny default --batch 4
  # A checkpoint schedule on the CUDA engine against CUDA store-all: bitwise.
  step profile_resnet50_small "$B/monet-profile" models/resnet50.onnx "${SMALL[@]}" --device cuda \
    --no-conv-algorithms -o "$OUT/resnet50_2_64.profile.json"
  # 97% of store-all: at batch 2 the parameters, gradients and momentum are most of the peak (the smallest
  # feasible budget is ~95% of it), so the schedule recomputes what it can.
  local half
  half=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['store_all_peak_bytes']*97//100)" \
    "$OUT/resnet50_2_64.profile.json" 2>/dev/null || echo 0)
  step solve_resnet50_small "$B/monet-solve" "$OUT/resnet50_2_64.profile.json" --budget "$half" --time-limit 30 \
    --mode checkpoint -o "$OUT/resnet50_2_64.half.schedule.json"
  step check_schedule_store_all "$B/monet-check" models/resnet50.onnx --schedule "$OUT/resnet50_2_64.half.schedule.json" \
    --device cuda --reference store-all --report "$OUT/check_schedule_store_all.json"
  # A full-mode schedule (other implementations: output-activated BatchNormGrad rounds differently): within 1e-3
  # in fp32 math. (With TF32 convolutions a rounding difference upstream moves which inputs round where, and the
  # first BatchNorm's bias gradient at this batch differed by 5.6e-3 of its size on the H100.)
  step solve_resnet50_small_full "$B/monet-solve" "$OUT/resnet50_2_64.profile.json" --budget "$half" --time-limit 30 \
    --mode full -o "$OUT/resnet50_2_64.half.full.schedule.json"
  step check_full_schedule_store_all "$B/monet-check" models/resnet50.onnx \
    --schedule "$OUT/resnet50_2_64.half.full.schedule.json" --device cuda --math fp32 --reference store-all \
    --report "$OUT/check_full_schedule_store_all.json"
  for math in ${MONET_CHECK_MATHS:-fp32 default}; do
    for m in resnet50 googlenet mobilenet_v2; do check_model "$m" "$math" "${SMALL[@]}"; done
    check_model unet "$math" "${SMALL[@]}" --loss sum
  done
  # vgg16 only imports at 224x224, where the CPU reference (double and float) takes minutes: once, in fp32.
  check_model vgg16 fp32 --batch 1
}

stage_profile() {
  local dir="$OUT/schedules/resnet50_184"
  mkdir -p "$dir"
  if [ -n "${MONET_PROFILE_ONLY:-}" ]; then  # a quick look: resnet50's and googlenet's profiles, no solves or runs
    step profile_resnet50_184 "$B/monet-profile" models/resnet50.onnx --batch 184 --device cuda --warmup 2 --repeats 5 \
      --no-conv-algorithms -o "$dir/profile_cuda.json"
    mkdir -p "$OUT/schedules/googlenet_320"
    step profile_googlenet_320 "$B/monet-profile" models/googlenet.onnx --batch 320 --device cuda --no-conv-algorithms \
      -o "$OUT/schedules/googlenet_320/profile_cuda.json"
    return 0
  fi
  step profile_resnet50_184 "$B/monet-profile" models/resnet50.onnx --batch 184 --device cuda --warmup 2 --repeats 5 \
    -o "$dir/profile_cuda.json"
  local half
  half=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['store_all_peak_bytes']//2)" \
    "$dir/profile_cuda.json" 2>/dev/null || echo 0)
  step solve_resnet50_184 "$B/monet-solve" "$dir/profile_cuda.json" --budget "$half" --time-limit "${MONET_SOLVE_LIMIT:-60}" \
    --mode checkpoint -o "$dir/checkpoint_half_cuda.json" --report "$dir/checkpoint_half_cuda.report.json"
  step solve_resnet50_184_full "$B/monet-solve" "$dir/profile_cuda.json" --budget "$half" --time-limit "${MONET_SOLVE_LIMIT:-60}" \
    --mode full -o "$dir/full_half_cuda.json" --report "$dir/full_half_cuda.report.json"
  step run_resnet50_184_store_all "$B/monet-run" models/resnet50.onnx --batch 184 --device cuda --iters 10 --warmup 3 \
    --report "$dir/run_store_all_cuda.json"
  # $OUT is fresh in every run-tool call: keep the schedule on the machine for a later `bench` call too.
  mkdir -p "$ROOT/gpu-work" && cp -f "$dir/checkpoint_half_cuda.json" "$dir/full_half_cuda.json" "$ROOT/gpu-work/" 2>/dev/null
  step run_resnet50_184_scheduled "$B/monet-run" models/resnet50.onnx --schedule "$dir/checkpoint_half_cuda.json" \
    --device cuda --iters 10 --warmup 3 --report "$dir/run_checkpoint_half_cuda.json"
  step run_resnet50_184_full "$B/monet-run" models/resnet50.onnx --schedule "$dir/full_half_cuda.json" \
    --device cuda --iters 10 --warmup 3 --report "$dir/run_full_half_cuda.json"
  # With every convolution's cuDNN algorithms timed: their least-workspace deterministic ones are what lowers the
  # floors of vgg16 and unet (their default backward algorithms take 2.1-2.4 GB of workspace at the binding steps).
  for spec in "googlenet 320" "mobilenet_v2 272" "vgg16 176" "unet 11 --loss sum"; do
    set -- $spec
    mkdir -p "$OUT/schedules/${1}_$2"
    step "profile_${1}_$2" "$B/monet-profile" "models/$1.onnx" --batch "$2" "${@:3}" --device cuda \
      -o "$OUT/schedules/${1}_$2/profile_cuda.json"
  done
}

stage_bench() {
  # The schedules of this call's profile stage, else of an earlier call on this machine, else the committed ones.
  local dir="$OUT/schedules/resnet50_184" sched=() kind f
  for kind in checkpoint full; do
    for f in "$dir/${kind}_half_cuda.json" "$ROOT/gpu-work/${kind}_half_cuda.json" \
             "$ROOT/schedules/resnet50_184/h100/schedule_${kind}_1_2.json"; do
      if [ -f "$f" ]; then sched+=(--schedule "$f"); break; fi
    done
  done
  step bench_resnet50_184 python3 scripts/bench_pytorch.py --model resnet50 --batch 184 --monet-bin "$B" \
    "${sched[@]}" --json "$OUT/bench_resnet50_184.json" --torch-profile "$OUT/torch_profile_resnet50_184.txt"
}

stage_kernels() {
  local ncu
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  if [ -z "$ncu" ]; then log "kernels: skipped (no ncu on this machine)"; return 0; fi
  # One step, no warm-up (the engine picks convolution algorithms by cuDNN's heuristics: the first step runs the
  # kernels of every later one); clocks and caches as in a plain run.
  step ncu_store_all "$ncu" --csv --metrics gpu__time_duration.sum --clock-control none --cache-control none \
    "$B/monet-run" models/resnet50.onnx --batch 184 --device cuda --iters 1 --warmup 0
  python3 scripts/kernel_table.py "$OUT/ncu_store_all.txt" --top 60 > "$OUT/kernels_store_all.txt" 2>&1
  log "kernels: $(tail -1 "$OUT/kernels_store_all.txt")"
}

stage_transformers() {
  local m
  local MONET_STEP_TIMEOUT=${MONET_TRANSFORMERS_TIMEOUT:-${MONET_STEP_TIMEOUT:-300}}
  for m in gpt2_tiny bert_tiny; do
    step "check_$m" "$B/monet-check" "test/data/$m.onnx" --batch 2 --device cuda --reference cpu --math fp32 \
      --report "$OUT/check_$m.json"
  done
  step run_gpt2_8 "$B/monet-run" models/transformers/gpt2.onnx --batch 8 --device cuda --iters 5 --warmup 2 \
    --report "$OUT/run_gpt2_8.json"
  step run_bert_32 "$B/monet-run" models/transformers/bert.onnx --batch 32 --device cuda --iters 5 --warmup 2 \
    --report "$OUT/run_bert_32.json"
}

ZOO_MODELS=(${MONET_ZOO_MODELS:-vgg16 unet resnet50 mobilenet_v2 googlenet})
zoo_row() {  # zoo_row MODEL: "batch budget..." from MONeT's table (one copy of it, in bench_floor.py)
  python3 -c 'import sys; sys.path.insert(0, "scripts"); from bench_floor import MONET
b, _, rows = MONET[sys.argv[1]]; print(b, *(f"{gb:.2f}" for gb, _ in rows))' "$1"
}
zoo_loss() { [ "$1" = unet ] && echo sum || echo ce; }
zoo_gpu() { [ -n "${MONET_GPU:-}" ] && echo "$MONET_GPU" && return; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oi 'h[0-9]\{3\}' | tr A-Z a-z; }
ZOO_GPU=$(zoo_gpu); ZOO_GPU=${ZOO_GPU:-gpu}  # the profiles' folder: schedules/<model>_<batch>/<gpu>/

zoo_solves() {  # zoo_solves MODEL BATCH PROFILE BUDGET...: full mode at each budget, all at once
  local m=$1 b=$2 prof=$3 gb; shift 3
  for gb in "$@"; do
    step "solve_${m}_$gb" "$B/monet-solve" "$prof" --budget "${gb}GB" --mode full \
      --time-limit "${MONET_ZOO_SOLVE_LIMIT:-60}" --threads 2 -q \
      -o "$OUT/schedules/${m}_$b/zoo/schedule_full_${gb}GB.json" \
      --report "$OUT/schedules/${m}_$b/zoo/report_full_${gb}GB.json" &
  done
  wait
}

zoo_runs() {  # zoo_runs MODEL BATCH: store-all and every schedule solved for it, then a check of the tightest;
  # what already has its report under $OUT is not run again
  local m=$1 b=$2 s name tightest=""
  local dir="$OUT/schedules/${m}_$b/zoo" base=("models/$m.onnx" --device cuda --loss "$(zoo_loss "$m")")
  # Store-all is the profile's lean store-all (monet-solve --mode store-all: the implementations and cuDNN
  # algorithms the profile measured fastest among those of the lowest peak), the baseline the solver's overheads
  # are against; monet-run without a schedule has no profile and runs cuDNN's heuristic algorithms.
  [ -f "$dir/schedule_store-all.json" ] ||
    step "solve_${m}_store-all" "$B/monet-solve" "$OUT/schedules/${m}_$b/$ZOO_GPU/profile.json" --mode store-all \
      --budget 1000GB -q -o "$dir/schedule_store-all.json" --report "$dir/report_store-all.json"
  local runs=("$dir/schedule_store-all.json")
  # Largest budget first: the last one run is the tightest.
  runs+=($(ls "$dir"/schedule_full_*GB.json 2>/dev/null | awk -F'schedule_full_' '{print $2 "\t" $0}' | sort -rn |
           cut -f2))
  for s in "${runs[@]}"; do
    [ -f "$s" ] || continue
    name=$(basename "$s" .json); name=${name#schedule_}
    [ -f "$dir/run_$name.json" ] ||
      step "run_${m}_$name" "$B/monet-run" "${base[@]}" --schedule "$s" --iters 10 --warmup 3 \
        --report "$dir/run_$name.json"
    [ "$name" = store-all ] || tightest=$s
  done
  # The tightest schedule's check, or every schedule's with MONET_ZOO_CHECK_ALL=1; a check report without the
  # lean store-all's entry is from before the same-kernel reference and runs again.
  local checks=("$tightest")
  [ -n "${MONET_ZOO_CHECK_ALL:-}" ] && checks=("${runs[@]:1}")
  for s in "${checks[@]}"; do
    [ -n "$s" ] && [ -f "$s" ] || continue
    name=$(basename "$s" .json); name=${name#schedule_}
    grep -q '"lean_store_all"' "$dir/check_$name.json" 2>/dev/null ||
      step "check_${m}_$name" "$B/monet-check" "${base[@]}" --schedule "$s" --reference store-all \
        --math fp32 --report "$dir/check_$name.json"
  done
}

# zoo-runs: zoo_runs on the committed zoo (schedules/<model>_<batch>/{<gpu>,zoo}/ copied under $OUT first): what a
# call of the zoo stage left unrun.
stage_zoo-runs() {
  local m b
  for m in "${ZOO_MODELS[@]}"; do
    b=$(zoo_row "$m" | cut -d' ' -f1)
    [ -d "schedules/${m}_$b/zoo" ] || continue
    mkdir -p "$OUT/schedules" && cp -r "schedules/${m}_$b" "$OUT/schedules/"
    zoo_runs "$m" "$b"
  done
}

stage_zoo() {
  local m row b prev=() pid=""
  for m in "${ZOO_MODELS[@]}"; do
    row=($(zoo_row "$m")) || continue
    b=${row[0]}
    mkdir -p "$OUT/schedules/${m}_$b/$ZOO_GPU" "$OUT/schedules/${m}_$b/zoo"
    step "profile_${m}_$b" "$B/monet-profile" "models/$m.onnx" --batch "$b" --loss "$(zoo_loss "$m")" --device cuda \
      -o "$OUT/schedules/${m}_$b/$ZOO_GPU/profile.json"
    # The last model's solves finish while this one profiled: its runs come next, on an idle GPU.
    [ -n "$pid" ] && wait "$pid"
    [ ${#prev[@]} -gt 0 ] && zoo_runs "${prev[@]}"
    prev=(); pid=""
    if [ -f "$OUT/schedules/${m}_$b/$ZOO_GPU/profile.json" ]; then
      zoo_solves "$m" "$b" "$OUT/schedules/${m}_$b/$ZOO_GPU/profile.json" "${row[@]:1}" &
      pid=$!; prev=("$m" "$b")
    fi
  done
  # PyTorch's rows keep the GPU busy while the last model's solves run.
  [ -n "${MONET_ZOO_TORCH:-}" ] && stage_torch
  [ -n "$pid" ] && wait "$pid"
  [ ${#prev[@]} -gt 0 ] && zoo_runs "${prev[@]}"
  return 0
}

stage_torch() {
  local m b
  for m in "${ZOO_MODELS[@]}"; do
    b=$(zoo_row "$m" | cut -d' ' -f1)
    mkdir -p "$OUT/schedules/${m}_$b/zoo"
    local compile=()
    if [ -n "${MONET_TORCH_COMPILE:-}" ]; then
      compile=(--compile-budgets "$MONET_TORCH_COMPILE")
    elif [ -f "$OUT/schedules/${m}_$b/zoo/pytorch.json" ]; then
      continue
    fi
    step "torch_${m}_$b" python3 scripts/bench_pytorch.py --model "$m" --batch "$b" --no-monet "${compile[@]}" \
      --json "$OUT/schedules/${m}_$b/zoo/pytorch.json"
  done
}

# extra: one step per line of the file MONET_EXTRA, "NAME COMMAND..." (COMMAND run by bash, with B and OUT set):
# a call's own experiments, under the same deadline, logs and packing as the stages.
stage_extra() {
  local name cmd
  export B OUT
  while read -r name cmd; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] || step "$name" bash -c "$cmd"
  done < "${MONET_EXTRA:?extra: set MONET_EXTRA to a file of steps}"
}

# PyTorch's own gradient error in fp32 and TF32 on the models monet-check runs (what --math default can reach).
stage_tf32() { step tf32_noise python3 scripts/tf32_noise.py; }

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(all)
[ "${stages[0]}" = all ] && stages=(env tests check tf32 profile bench)
for s in "${stages[@]}"; do
  case "$s" in
    env|tests|check|tf32|profile|kernels|bench|transformers|zoo|zoo-runs|torch|extra) "stage_$s" ;;
    *) echo "gpu_session.sh: unknown stage '$s' (env tests check tf32 profile kernels bench transformers zoo zoo-runs torch extra all)" >&2
       exit 1 ;;
  esac
done
log "done: ${stages[*]}; results in $OUT"
pack
