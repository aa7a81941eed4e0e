#!/usr/bin/env bash
# Runs ON a lent GPU machine, from the repository root, with gpu-pack/ carried (scripts/gpu_bundle.sh built it on the
# development machine: the binaries and every library they need but CUDA's, cuDNN's and cuBLAS's, which come from
# PyTorch's wheels there). Writes everything under $OUT (./gpu-out otherwise), or under MONET_WORK (below).
#
#   bash scripts/gpu_session.sh [--cpu] [STAGE...]      (no stage: the default call, below)
#
# Stages, in the order of the default call (each step time-limited; times on an H100/H200, the whole zoo):
#   build    the carried bundle unpacked (gpu-pack/bundle.txz -> gpu-bundle/) and checked: every binary starts, no
#            library unresolved, which flags monet-run has (--store-all, --profile)                     ~10 s
#   env      nvidia-smi, driver, CUDA, PyTorch's cuDNN; monet-run of tiny (the bundle's cuDNN in its device line) ~10 s
#   tests    monet_cuda_tests: every op vs the CPU, tiny and ResNet-50 steps, arena peak, determinism     30-120 s
#   profile  monet-profile --device cuda of the current graphs of the zoo's seven models at its batches, every cuDNN
#            algorithm timed: gpt2 b8 (1024 tokens), bert b32 (512), resnet50 b184, unet b11 (3x416x608),
#            vgg16 b176, mobilenet_v2 b272, googlenet b320 (224x224); loss ce (the UNet's per pixel over its 2
#            classes). Files: schedules/<model>_<batch>/<gpu>/profile.json (the zoo's layout)            ~150 s
#   roofline scripts/bench_roofline.py on each profile: per op type time, bytes, FLOPs against the GPU's roofline;
#            our kernels moving >= 64 MB per call at < 50% of the bandwidth flagged. roofline_<m>_<b>.txt (markdown),
#            roofline/<m>_<b>.json                                                                       ~10 s
#   bench    scripts/bench_pytorch.py per model: PyTorch eager (GPT-2 and BERT also with SDPA) and monet-run's fast
#            store-all (--store-all fast, chosen on this call's profile) on the same GPU, median of 10 steps after 3,
#            peaks. bench/<m>_<b>.json, bench_<m>_<b>.txt                                               ~240 s
#   summary  SUMMARY.md: the bench rows of every model in one table, each roofline's flagged line      ~2 s
# Stages of later calls:
#   zoo-runs every schedule of the committed zoo (schedules/<model>_<batch>/zoo/schedule_full_*.json, re-solved on
#            the development machine from the profile stage's profiles; MONET_ZOO_FROM="DIR..." : per model the first
#            DIR with DIR/<model>_<batch>/zoo/ instead, with the profiles beside it, such as a profiling call's
#            schedules/ folder with zoo.py solve's schedules added) run by monet-run and checked by monet-check
#            --reference store-all --math fp32, with the lean store-all (the overheads' baseline) and the fast
#            store-all run beside them; what has a report under $OUT already is skipped         ~6-8 min (27 schedules)
#   torch    PyTorch's memory options per model: eager with checkpoint_sequential in sqrt(n) segments (the UNet: each
#            of its 9 blocks checkpointed) or, for GPT-2 and BERT, SDPA; then torch.compile in its default mode and
#            with activation_memory_budget at 1/2 and 1/3 (MONET_TORCH_COMPILE), one step each, merged into
#            schedules/<m>_<b>/zoo/pytorch.json (what scripts/zoo.py table reads)   1-3 min per compile row: resume
# Other stages: check (monet-check --device cuda --reference cpu at small sizes), tf32 (scripts/tf32_noise.py),
# attention (GPT-2 and BERT, strided, fused and materialized attention, each on its own profile, fast store-all side by side),
# kernels (Nsight Compute's kernel times of a store-all step), transformers (gpt2_tiny/bert_tiny CUDA vs CPU, GPT-2 and
# BERT store-all steps), zoo (profiles, full-mode solves at MONeT's budgets on this machine's cores, runs and the
# tightest check, in one call; MONET_ZOO_MODELS="gpt2 bert" solves those at MONET_ZOO_FRACTIONS of store-all,
# default "1/2 1/3"), offload (below), extra (the steps listed in the file MONET_EXTRA, one "NAME COMMAND..." per line).
#   offload  issue 39 on the GPU: per model of MONET_OFFLOAD_MODELS (default "resnet50 vgg16"; --cpu: resnet50), on
#            the profile stage's profile (its measured host link; --cpu: --host-bandwidth 25), budgets a third of the
#            way from the lower bound to the smallest peak the heuristics reach without offload and (GPU) the
#            model's tightest MONeT budget: solved with and without --offload (MONET_OFFLOAD_SOLVE_LIMIT s, default
#            60; --cpu 10), the offloading schedule run (peak and median step against the prediction) and checked
#            --reference store-all --math fp32; OFFLOAD.md tabulates them                         ~2-4 min per model
#
# --cpu (or dry): the same stages on this (GPU-less) machine at tiny sizes, to test the script before a GPU call:
# device cpu, binaries of build/ (MONET_BIN; read only), /usr/bin/python3 (MONET_PYTHON), CNNs at batch 2 and 64x64
# (vgg16 batch 1 at 224x224, unet batch 1), gpt2_tiny and bert_tiny (test/data) at batch 2, one warm-up and one
# measured step, PyTorch on the CPU; tests exits 77 (no GPU: SKIP); zoo-runs and zoo solve their own stand-in schedules at
# 97% and 99% of store-all (MONET_CPU_FRACTIONS, 8 s solves) where the GPU call runs the committed zoo or MONeT's budgets. OUT defaults to
# /tmp/monet-gpu-session-cpu.
#
# In a run-tool call: MONET_WORK=/tmp/g MONET_DEADLINE=560 bash scripts/gpu_session.sh [STAGE...] (OUT: the tool's
# folder, which then gets results.tgz, session.log and SUMMARY.md alone: the tool returns at most 8 files).
# Settings: MONET_WORK (the work folder; default: $OUT itself),
# MONET_MODELS (the models of profile, roofline, bench, torch, zoo-runs; default all seven), MONET_BENCH_MODELS (bench's
# alone), MONET_ZOO_MODELS (zoo's and zoo-runs'), MONET_ZOO_SOLVE_LIMIT (their solves' seconds; zoo: 60),
# MONET_DEADLINE (seconds after start past which no step starts or runs), MONET_STEP_TIMEOUT (per step, default 300),
# MONET_PACK=FILE (default results.tgz in $OUT; "none": off): after every step everything under the work folder is
# packed into FILE (tar.gz: a call cut off at its limit still returns what was done), MONET_RESUME=FILE: a previous
# call's pack unpacked into the work folder first, so that the steps it finished (exit 0) are not run again,
# MONET_REDO=1: run them anyway; MONET_ZOO_CHECK=all|tightest (zoo-runs: all; zoo: tightest),
# MONET_TORCH_COMPILE ("default 1/2 1/3"; "none": no compile rows), MONET_TORCH_PROFILE=1 (bench: PyTorch's kernel
# table too).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CPU=""
case "${1:-}" in --cpu|dry) CPU=1; shift ;; esac
# MONET_WORK=DIR: work in DIR and leave in $OUT (the run tool's folder, whose files come back) only the pack,
# session.log and SUMMARY.md.
RESULTS=""
if [ -n "${MONET_WORK:-}" ]; then
  RESULTS=${OUT:?gpu_session.sh: MONET_WORK needs OUT, the folder the results go to}
  mkdir -p "$RESULTS" && RESULTS=$(cd "$RESULTS" && pwd)
  OUT=$MONET_WORK
fi

if [ -n "$CPU" ]; then
  DEV=cpu
  PY=${MONET_PYTHON:-/usr/bin/python3}
  B=${MONET_BIN:-$ROOT/build/apps}
  TESTS_BIN=${MONET_TESTS_BIN:-$(dirname "$B")/test/monet_cuda_tests}
  OUT=${OUT:-/tmp/monet-gpu-session-cpu}
  ZOO_GPU=cpu
else
  DEV=cuda
  PY=${MONET_PYTHON:-python3}
  # A warm machine may still hold the last call's gpu-bundle/: the carried archive wins.
  # (Python's tarfile reads the xz archive whether or not the machine has xz.)
  if [ -z "${MONET_BUNDLE:-}" ] && [ -f gpu-pack/bundle.txz ]; then
    rm -rf gpu-bundle && "$PY" -c 'import tarfile; tarfile.open("gpu-pack/bundle.txz").extractall()'
  fi
  B=${MONET_BUNDLE:-$ROOT/gpu-bundle}/bin
  TESTS_BIN=$B/monet_cuda_tests
  OUT=${OUT:-$ROOT/gpu-out}
  SP=$("$PY" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
  # cuDNN and cuBLAS come from PyTorch's pip wheels, ahead of any the machine has elsewhere: both engines of the
  # comparison then run the same library versions (and cuDNN the version our headers are).
  LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
  if [ -x "$B/monet-run" ] && [ -n "$SP" ]; then
    for so in $(ldd "$B/monet-run" | awk '/cudnn|cublas/ {print $1}'); do
      d=$(find "$SP/nvidia" -name "$so" -printf '%h\n' 2>/dev/null | head -1)
      [ -n "$d" ] && case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" ;; esac
    done
  fi
  export LD_LIBRARY_PATH
  zoo_gpu() { [ -n "${MONET_GPU:-}" ] && echo "$MONET_GPU" && return; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oi 'h[0-9]\{3\}' | tr A-Z a-z; }
  ZOO_GPU=$(zoo_gpu); ZOO_GPU=${ZOO_GPU:-gpu}  # the profiles' folder: schedules/<model>_<batch>/<gpu>/
fi
export MONET_MODELS_DIR="$ROOT/models" PYTHONUNBUFFERED=1
mkdir -p "$OUT/.done"
OUT=$(cd "$OUT" && pwd)
PACK=${MONET_PACK:-${RESULTS:-$OUT}/results.tgz}
[ "$PACK" = none ] && PACK=""
if [ -n "${MONET_RESUME:-}" ]; then
  tar xzf "$MONET_RESUME" -C "$OUT" || { echo "gpu_session.sh: MONET_RESUME=$MONET_RESUME: cannot unpack" >&2; exit 1; }
fi
SMALL=(--batch 2 --input-shape 3,64,64)
if [ -n "$CPU" ]; then RUN_ITERS=(--iters 1 --warmup 0); else RUN_ITERS=(--iters 10 --warmup 3); fi

log() { echo "== $(date +%T) $*" | tee -a "$OUT/session.log"; }
# step NAME CMD...: runs CMD, output to $OUT/NAME.txt, one line with its exit status in session.log. Each step
# stops after MONET_STEP_TIMEOUT seconds (default 300) and none starts or runs past MONET_DEADLINE seconds after
# the script began (default: none), so a run-tool call returns its logs inside its own limit. A step that exited 0
# leaves $OUT/.done/NAME and is not run again in this $OUT (MONET_RESUME carries it over; MONET_REDO=1 reruns).
step() {
  local name=$1; shift
  if [ -z "${MONET_REDO:-}" ] && [ -f "$OUT/.done/$name" ]; then log "$name: done before (MONET_REDO=1 reruns)"; return 0; fi
  local left=$(( ${MONET_DEADLINE:-1000000} - SECONDS ))
  local limit=${MONET_STEP_TIMEOUT:-300}
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then log "$name: skipped (deadline)"; return 0; fi
  log "$name: $*"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] && : > "$OUT/.done/$name"
  log "$name: exit $rc after $((SECONDS - t0)) s; $(tail -1 "$OUT/$name.txt")"
  pack
  return 0
}

pack() {  # steps may finish in background jobs at once: each packs to its own file, then renames
  if [ -n "$RESULTS" ]; then
    cp -f "$OUT/session.log" "$RESULTS/" 2>/dev/null
    [ -f "$OUT/SUMMARY.md" ] && cp -f "$OUT/SUMMARY.md" "$RESULTS/"
  fi
  [ -n "$PACK" ] || return 0
  local base; base=$(basename "$PACK")
  tar czf "$PACK.$BASHPID" --exclude="./$base" --exclude="./$base.*" -C "$OUT" . 2>/dev/null &&
    mv -f "$PACK.$BASHPID" "$PACK"
}

gpu_only() {  # stages that need a GPU: refused in --cpu mode
  if [ -n "$CPU" ]; then log "$1: skipped (--cpu: this stage needs a GPU)"; return 1; fi
}

# ------------------------------------------------------------------------------------------------ the zoo's models
# The seven models of profile, roofline, bench, torch and zoo-runs, the transformers first (the engine's slowest).
MODELS=(${MONET_MODELS:-gpt2 bert resnet50 unet vgg16 mobilenet_v2 googlenet})
util() { "$PY" scripts/gpu_session_util.py "$@"; }
gb_of() { awk -v b="$1" 'BEGIN {printf "%.6f", b / 1e9}'; }  # bytes as the zoo's file names write them, in GB
declare -A BATCH
model_batch() {  # the zoo's batch (MONeT's table; gpt2 8, bert 32), or the --cpu mode's
  if [ -z "${BATCH[$1]:-}" ]; then
    if [ -n "$CPU" ]; then
      case "$1" in vgg16|unet) BATCH[$1]=1 ;; *) BATCH[$1]=2 ;; esac
    else
      BATCH[$1]=$(util batch "$1") || return 1
    fi
  fi
  echo "${BATCH[$1]}"
}
model_onnx() {
  case "$1" in
    gpt2|bert) if [ -n "$CPU" ]; then echo "test/data/${1}_tiny.onnx"; else echo "models/transformers/$1.onnx"; fi ;;
    *) echo "models/$1.onnx" ;;
  esac
}
model_shape() {  # --input-shape where the mode's size is not the model's own
  [ -n "$CPU" ] && case "$1" in gpt2|bert|vgg16) ;; *) echo "--input-shape 3,64,64" ;; esac
}
for m in "${MODELS[@]}"; do model_batch "$m" >/dev/null || { echo "gpu_session.sh: unknown model $m" >&2; exit 1; }; done
model_dir() { echo "$OUT/schedules/${1}_$(model_batch "$1")"; }
model_profile() { echo "$(model_dir "$1")/$ZOO_GPU/profile.json"; }
MONET_RUN_HELP=""
monet_run_has() {  # monet_run_has FLAG: whether this monet-run takes FLAG (its --help read once)
  [ -n "$MONET_RUN_HELP" ] || MONET_RUN_HELP=$("$B/monet-run" --help 2>/dev/null) || true
  [[ $MONET_RUN_HELP == *" $1"* ]]
}

# --------------------------------------------------------------------------------------------------------- stages
check_binaries() {  # the bundle's binaries start and find every library; the flags this monet-run has
  local x rc=0
  echo "binaries: $B"
  for x in monet-run monet-check monet-profile monet-solve; do
    if "$B/$x" --help >/dev/null 2>&1; then echo "$x: starts"; else echo "$x: DOES NOT START"; rc=1; fi
  done
  if [ -x "$TESTS_BIN" ]; then echo "monet_cuda_tests: $TESTS_BIN"; else echo "monet_cuda_tests: MISSING"; rc=1; fi
  ldd "$B/monet-run" "$TESTS_BIN" 2>/dev/null | grep 'not found' && rc=1
  for x in --store-all --profile; do
    if monet_run_has "$x"; then echo "monet-run $x: yes"; else echo "monet-run $x: no"; fi
  done
  echo "binaries: $([ $rc -eq 0 ] && echo ok || echo FAILED)"
  return $rc
}

stage_build() {
  # The binaries come from the carried bundle (scripts/gpu_bundle.sh; this machine lacks our Debian libraries, so
  # nothing is compiled here), or with --cpu from build/.
  if [ ! -x "$B/monet-run" ]; then
    log "build: no monet-run under $B: run scripts/gpu_bundle.sh on the development machine and carry gpu-pack"
    return 1
  fi
  check_binaries > "$OUT/build_check.txt" 2>&1
  log "build_check: exit $?; $(grep -v ': starts$' "$OUT/build_check.txt" | tr '\n' ' ')"
  pack
}

stage_env() {
  if [ -n "$CPU" ]; then
    { uname -a; "$PY" -c 'import torch; print("torch", torch.__version__)'; } > "$OUT/env.txt" 2>&1
  else
    { nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
      "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
      echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$B/monet-run"; } > "$OUT/env.txt" 2>&1
  fi
  step env_tiny_run "$B/monet-run" models/tiny.onnx --batch 4 --device "$DEV" --iters 2
}

# Exit 77: no usable GPU (ctest's SKIP); the --cpu mode gets it.
stage_tests() { MONET_STEP_TIMEOUT=${MONET_TESTS_TIMEOUT:-300} step cuda_tests "$TESTS_BIN" --durations yes; }

stage_profile() {
  local m b extra=()
  [ -n "$CPU" ] && extra=(--warmup 0 --repeats 1)
  for m in "${MODELS[@]}"; do
    b=$(model_batch "$m") || continue
    mkdir -p "$(model_dir "$m")/$ZOO_GPU"
    step "profile_${m}_$b" "$B/monet-profile" "$(model_onnx "$m")" --batch "$b" $(model_shape "$m") --loss ce \
      --device "$DEV" "${extra[@]}" -o "$(model_profile "$m")"
  done
}

stage_roofline() {
  local m b p device=()
  # The CPU has no roofline of its own: nominal figures, the mode tests the plumbing.
  [ -n "$CPU" ] && device=(--bandwidth 20 --tflops 0.2)
  mkdir -p "$OUT/roofline"
  for m in "${MODELS[@]}"; do
    b=$(model_batch "$m") || continue
    p=$(model_profile "$m")
    [ -f "$p" ] || { log "roofline_${m}_$b: no profile ($p)"; continue; }
    step "roofline_${m}_$b" "$PY" scripts/bench_roofline.py "$p" "${device[@]}" --json "$OUT/roofline/${m}_$b.json"
  done
}

stage_bench() {
  local m b p args
  mkdir -p "$OUT/bench"
  for m in ${MONET_BENCH_MODELS:-${MODELS[@]}}; do
    b=$(model_batch "$m") || continue
    p=$(model_profile "$m")
    args=(--model "$m" --batch "$b" --device "$DEV" --rows sdpa,monet --monet-bin "$B" --monet-store-all fast
          --json "$OUT/bench/${m}_$b.json")
    [ -f "$p" ] && args+=(--monet-profile "$p")
    if [ -n "$CPU" ]; then
      args+=(--small --iters 1 --warmup 1)
    else
      args+=(--iters 10 --warmup 3)
      [ -n "${MONET_TORCH_PROFILE:-}" ] && args+=(--torch-profile "$OUT/bench/torch_profile_${m}_$b.txt")
    fi
    step "bench_${m}_$b" "$PY" scripts/bench_pytorch.py "${args[@]}"
  done
}

stage_summary() {
  MONET_REDO=1 step summary "$PY" scripts/gpu_session_util.py summary "$OUT" "$OUT/SUMMARY.md"
}

stage_torch() {
  local m b d parts tag budget args small=()
  local MONET_STEP_TIMEOUT=${MONET_TORCH_TIMEOUT:-${MONET_STEP_TIMEOUT:-420}}  # compiling takes minutes
  [ -n "$CPU" ] && small=(--small --iters 1 --warmup 1)
  for m in "${MODELS[@]}"; do
    b=$(model_batch "$m") || continue
    d=$(model_dir "$m")/zoo
    mkdir -p "$d" "$OUT/torch"
    # Eager with its memory option (checkpointing for the CNNs, SDPA for the transformers), then one step per
    # torch.compile row (a compile that hangs costs its own step only), merged into zoo/pytorch.json.
    parts=("$OUT/torch/${m}_${b}_eager.json")
    step "torch_${m}_${b}_eager" "$PY" scripts/bench_pytorch.py --model "$m" --batch "$b" --device "$DEV" \
      --rows checkpoint,sdpa "${small[@]}" --json "${parts[0]}"
    for budget in ${MONET_TORCH_COMPILE:-default 1/2 1/3}; do
      [ "$budget" = none ] && break
      tag=${budget/\//_}
      parts+=("$OUT/torch/${m}_${b}_compile_$tag.json")
      step "torch_${m}_${b}_compile_$tag" "$PY" scripts/bench_pytorch.py --model "$m" --batch "$b" --device "$DEV" \
        --no-eager --rows compile --compile-budgets "$budget" "${small[@]}" --json "${parts[-1]}"
    done
    MONET_REDO=1 step "torch_${m}_${b}_merge" "$PY" scripts/gpu_session_util.py merge "$d/pytorch.json" "${parts[@]}"
  done
}

ZOO_MODELS=(${MONET_ZOO_MODELS:-vgg16 unet resnet50 mobilenet_v2 googlenet})
ZOO_CHECK=${MONET_ZOO_CHECK:-tightest}  # the zoo stage's checks (MONET_ZOO_CHECK_ALL=1 as all)
[ -n "${MONET_ZOO_CHECK_ALL:-}" ] && ZOO_CHECK=all

zoo_solves() {  # zoo_solves MODEL BATCH PROFILE BUDGET...: full mode at each budget, all at once
  local m=$1 b=$2 prof=$3 gb; shift 3
  for gb in "$@"; do
    step "solve_${m}_$gb" "$B/monet-solve" "$prof" --budget "${gb}GB" --mode full \
      --time-limit "${MONET_ZOO_SOLVE_LIMIT:-$([ -n "$CPU" ] && echo 8 || echo 60)}" --threads "$([ -n "$CPU" ] && echo 1 || echo 2)" -q \
      -o "$OUT/schedules/${m}_$b/zoo/schedule_full_${gb}GB.json" \
      --report "$OUT/schedules/${m}_$b/zoo/report_full_${gb}GB.json" &
  done
  wait
}

zoo_runs() {  # zoo_runs MODEL BATCH CHECKS: the lean and the fast store-all and every schedule of zoo/ run, then
  # monet-check --reference store-all of every schedule (CHECKS=all) or of the tightest; what already has its
  # report under $OUT is not run again
  local m=$1 b=$2 checks_of=$3 s name tightest="" prof
  local dir="$OUT/schedules/${m}_$b/zoo" base=("$(model_onnx "$m")" --device "$DEV" --loss ce)
  local first
  first=$(ls "$dir"/schedule_full_*GB.json 2>/dev/null | head -1)
  # The profile of the schedules' training graph (the fingerprint decides), else this machine's.
  prof=""
  [ -n "$first" ] && prof=$(util profile-for "$first" 2>/dev/null)
  [ -n "$prof" ] || prof="$OUT/schedules/${m}_$b/$ZOO_GPU/profile.json"
  # Store-all is the profile's lean store-all (monet-solve --mode store-all), the baseline the solver's overheads
  # are against; the fast store-all (monet-run --store-all fast on the same profile) is the fastest step.
  [ -f "$dir/schedule_store-all.json" ] ||
    step "solve_${m}_store-all" "$B/monet-solve" "$prof" --mode store-all \
      --budget 1000GB -q -o "$dir/schedule_store-all.json" --report "$dir/report_store-all.json"
  if monet_run_has --store-all && [ -f "$prof" ] && [ ! -f "$dir/run_store-all-fast.json" ]; then
    local fast=(--store-all fast)
    monet_run_has --profile && fast+=(--profile "$prof")
    step "run_${m}_store-all-fast" "$B/monet-run" "${base[@]}" $(util shape-args "$prof") "${fast[@]}" \
      "${RUN_ITERS[@]}" --report "$dir/run_store-all-fast.json"
  fi
  local runs=("$dir/schedule_store-all.json")
  # Largest budget first: the last one run is the tightest.
  runs+=($(ls "$dir"/schedule_full_*GB.json 2>/dev/null | awk -F'schedule_full_' '{print $2 "\t" $0}' | sort -rn |
           cut -f2))
  for s in "${runs[@]}"; do
    [ -f "$s" ] || continue
    name=$(basename "$s" .json); name=${name#schedule_}
    [ -f "$dir/run_$name.json" ] ||
      step "run_${m}_$name" "$B/monet-run" "${base[@]}" --schedule "$s" "${RUN_ITERS[@]}" \
        --report "$dir/run_$name.json"
    [ "$name" = store-all ] || tightest=$s
  done
  # A check report without the lean store-all's entry is from before the same-kernel reference and runs again.
  local checks=("$tightest")
  [ "$checks_of" = all ] && checks=("${runs[@]:1}")
  for s in "${checks[@]}"; do
    [ -n "$s" ] && [ -f "$s" ] || continue
    name=$(basename "$s" .json); name=${name#schedule_}
    grep -q '"lean_store_all"' "$dir/check_$name.json" 2>/dev/null ||
      step "check_${m}_$name" "$B/monet-check" "${base[@]}" --schedule "$s" --reference store-all \
        --math fp32 --report "$dir/check_$name.json"
  done
}

# zoo-runs: zoo_runs on the committed zoo (schedules/<model>_<batch>/, its profiles and zoo/ copied under $OUT
# first, where this $OUT has none). --cpu: on stand-in schedules solved here from the profile stage's profiles.
stage_zoo-runs() {
  local m b d f gb bytes
  local models=(${MONET_ZOO_MODELS:-${MODELS[@]}})
  for m in "${models[@]}"; do
    b=$(model_batch "$m") || continue
    d="$OUT/schedules/${m}_$b"
    if [ -n "$CPU" ]; then
      [ -f "$d/$ZOO_GPU/profile.json" ] || { log "zoo-runs $m: no profile (run the profile stage first)"; continue; }
      mkdir -p "$d/zoo"
      for f in ${MONET_CPU_FRACTIONS:-0.97 0.99}; do
        bytes=$(util budget "$d/$ZOO_GPU/profile.json" "$f")
        gb=$(gb_of "$bytes")  # the zoo's file names, in GB
        [ -f "$d/zoo/schedule_full_${gb}GB.json" ] ||
          step "solve_${m}_$f" "$B/monet-solve" "$d/$ZOO_GPU/profile.json" --budget "$bytes" --mode full \
            --time-limit "${MONET_ZOO_SOLVE_LIMIT:-8}" --threads 1 -q -o "$d/zoo/schedule_full_${gb}GB.json" \
            --report "$d/zoo/report_full_${gb}GB.json"
      done
    else
      # The schedules alone: their runs and checks are this build's (the committed reports are an earlier one's),
      # the baseline is solved again on the profile of their fingerprint (profile-for: one copied from beside them,
      # else the repository's).
      local from
      from=$(util zoo-from "${m}_$b" ${MONET_ZOO_FROM:-schedules}) ||
        { log "zoo-runs $m: no ${m}_$b/zoo/schedule_full_*GB.json in ${MONET_ZOO_FROM:-schedules}"; continue; }
      log "zoo-runs $m: the schedules of $from/${m}_$b/zoo/"
      mkdir -p "$d/zoo"
      for f in "$from/${m}_$b/zoo/"schedule_full_*GB.json; do
        [ -f "$d/zoo/$(basename "$f")" ] || cp "$f" "$d/zoo/"
      done
      for f in "$from/${m}_$b/"*/profile*.json; do
        [ -f "$f" ] || continue
        local to="$d/$(basename "$(dirname "$f")")/$(basename "$f")"
        mkdir -p "$(dirname "$to")"
        if [ ! -f "$to" ]; then cp "$f" "$to"
        elif ! cmp -s "$f" "$to"; then log "zoo-runs $m: $f not copied: this call's $to is there (profile-for picks by fingerprint)"
        fi
      done
    fi
    zoo_runs "$m" "$b" "${MONET_ZOO_CHECK:-all}"
  done
}

stage_zoo() {
  local m b prof budgets f prev=() pid="" extra=()
  [ -n "$CPU" ] && extra=(--warmup 0 --repeats 1)
  for m in "${ZOO_MODELS[@]}"; do
    b=$(model_batch "$m") || continue
    prof=$(model_profile "$m")
    mkdir -p "$(model_dir "$m")/$ZOO_GPU" "$(model_dir "$m")/zoo"
    [ -f "$prof" ] ||
      step "profile_${m}_$b" "$B/monet-profile" "$(model_onnx "$m")" --batch "$b" $(model_shape "$m") --loss ce \
        --device "$DEV" "${extra[@]}" -o "$prof"
    # The last model's solves ran while this one profiled; its schedules run next with the CPU idle (runs overlapped
    # with solves measured MobileNetV2's step 4.8% slower, H100 2026-11-27), then this model's solves start.
    [ -n "$pid" ] && wait "$pid"
    [ ${#prev[@]} -gt 0 ] && zoo_runs "${prev[@]}" "$ZOO_CHECK"
    prev=(); pid=""
    # MONeT's budgets, or fractions of store-all for the models MONeT did not measure (GPT-2, BERT); --cpu: the
    # fractions MONET_CPU_FRACTIONS of every model's store-all (MONeT's budgets are for the full sizes).
    if [ -n "$CPU" ] && [ -f "$prof" ]; then
      budgets=$(for f in ${MONET_CPU_FRACTIONS:-0.97 0.99}; do gb_of "$(util budget "$prof" "$f")"; echo; done)
    fi
    if [ -f "$prof" ] && { [ -n "$CPU" ] || budgets=$(util budgets-of "$m" "$prof"); }; then
      zoo_solves "$m" "$b" "$prof" $budgets &
      pid=$!; prev=("$m" "$b")
    fi
  done
  # PyTorch's rows keep the GPU busy while the last model's solves run.
  if [ -n "${MONET_ZOO_TORCH:-}" ] && [ -z "$CPU" ]; then
    local models=("${MODELS[@]}")
    MODELS=("${ZOO_MODELS[@]}"); stage_torch; MODELS=("${models[@]}")
  fi
  [ -n "$pid" ] && wait "$pid"
  [ ${#prev[@]} -gt 0 ] && zoo_runs "${prev[@]}" "$ZOO_CHECK"
  return 0
}

check_model() {  # check_model MODEL MATH [ARGS...]: monet-check --device cuda --reference cpu
  local m=$1 math=$2; shift 2
  step "check_${m}_$math" "$B/monet-check" "models/$m.onnx" "$@" --device cuda --reference cpu --math "$math" \
    --report "$OUT/check_${m}_$math.json"
}

stage_check() {
  gpu_only check || return 0
  if [ -n "${MONET_CHECK_QUICK:-}" ]; then  # a quick look: a full-mode schedule against CUDA store-all only
    # With every cuDNN algorithm timed: the full-mode schedule may run backward convolutions on other algorithms.
    step profile_resnet50_small "$B/monet-profile" models/resnet50.onnx "${SMALL[@]}" --device cuda \
      -o "$OUT/resnet50_2_64.profile.json"
    local budget
    budget=$(util budget "$OUT/resnet50_2_64.profile.json" 0.97 2>/dev/null || echo 0)
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
  half=$(util budget "$OUT/resnet50_2_64.profile.json" 0.97 2>/dev/null || echo 0)
  step solve_resnet50_small "$B/monet-solve" "$OUT/resnet50_2_64.profile.json" --budget "$half" --time-limit 30 \
    --mode checkpoint -o "$OUT/resnet50_2_64.half.schedule.json"
  step check_schedule_store_all "$B/monet-check" models/resnet50.onnx --schedule "$OUT/resnet50_2_64.half.schedule.json" \
    --device cuda --reference store-all --report "$OUT/check_schedule_store_all.json"
  # A full-mode schedule (other implementations: output-activated BatchNormGrad rounds differently): against
  # store-all on its own implementations, bitwise, in fp32 math.
  step solve_resnet50_small_full "$B/monet-solve" "$OUT/resnet50_2_64.profile.json" --budget "$half" --time-limit 30 \
    --mode full -o "$OUT/resnet50_2_64.half.full.schedule.json"
  step check_full_schedule_store_all "$B/monet-check" models/resnet50.onnx \
    --schedule "$OUT/resnet50_2_64.half.full.schedule.json" --device cuda --math fp32 --reference store-all \
    --report "$OUT/check_full_schedule_store_all.json"
  for math in ${MONET_CHECK_MATHS:-fp32 default}; do
    for m in resnet50 googlenet mobilenet_v2 unet; do check_model "$m" "$math" "${SMALL[@]}"; done
  done
  # vgg16 only imports at 224x224, where the CPU reference (double and float) takes minutes: once, in fp32.
  check_model vgg16 fp32 --batch 1
}

stage_kernels() {
  gpu_only kernels || return 0
  local ncu
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  if [ -z "$ncu" ]; then log "kernels: skipped (no ncu on this machine)"; return 0; fi
  # One step, no warm-up (the engine picks convolution algorithms by cuDNN's heuristics: the first step runs the
  # kernels of every later one); clocks and caches as in a plain run.
  step ncu_store_all "$ncu" --csv --metrics gpu__time_duration.sum --clock-control none --cache-control none \
    "$B/monet-run" models/resnet50.onnx --batch 184 --device cuda --iters 1 --warmup 0
  "$PY" scripts/kernel_table.py "$OUT/ncu_store_all.txt" --top 60 > "$OUT/kernels_store_all.txt" 2>&1
  log "kernels: $(tail -1 "$OUT/kernels_store_all.txt")"
}

stage_transformers() {
  gpu_only transformers || return 0
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

# attention: GPT-2 and BERT with the strided Attention node (the default: the heads' Transposes and Q's scale taken
# in), the fused one (--attention fused: those left as nodes) and the exported nodes (--attention materialized), each
# graph profiled and its fast store-all run on its own profile, side by side. The strided graph's profile is the
# profile stage's where this folder has one.
stage_attention() {
  local m b f p a prof extra=()
  [ -n "$CPU" ] && extra=(--warmup 0 --repeats 1)
  for m in gpt2 bert; do
    b=$(model_batch "$m") || continue
    f=$(model_onnx "$m")
    mkdir -p "$(model_dir "$m")/$ZOO_GPU"
    for a in strided fused materialized; do
      p=$(model_dir "$m")/$ZOO_GPU/profile_$a.json
      [ "$a" = strided ] && [ -f "$(model_profile "$m")" ] && p=$(model_profile "$m")
      [ -f "$p" ] || step "profile_${m}_${b}_$a" "$B/monet-profile" "$f" --batch "$b" --loss ce --device "$DEV" \
        --attention "$a" "${extra[@]}" -o "$p"
      [ -f "$p" ] && prof=(--profile "$p") || prof=()
      step "run_${m}_${b}_$a" "$B/monet-run" "$f" --batch "$b" --loss ce --device "$DEV" --attention "$a" \
        --store-all fast "${prof[@]}" "${RUN_ITERS[@]}" --report "$(model_dir "$m")/run_store-all-fast_$a.json"
    done
  done
}

stage_offload() {
  local m b p dir tag budget budgets limit=${MONET_OFFLOAD_SOLVE_LIMIT:-60} link=() mathargs=(--math fp32)
  local models=(${MONET_OFFLOAD_MODELS:-resnet50 vgg16})
  if [ -n "$CPU" ]; then
    models=(${MONET_OFFLOAD_MODELS:-resnet50}); limit=${MONET_OFFLOAD_SOLVE_LIMIT:-10}; link=(--host-bandwidth 25)
    mathargs=()
  fi
  for m in "${models[@]}"; do
    b=$(model_batch "$m") || continue
    p=$(model_profile "$m")
    if [ ! -f "$p" ]; then log "offload: no profile of $m at $p (run the profile stage first)"; continue; fi
    step "offload_probe_$m" "$B/monet-solve" "$p" --budget 1 --report "$OUT/offload_probe_$m.json" \
      -o "$OUT/offload_probe_$m.schedule.json"
    budgets=$(util between "$OUT/offload_probe_$m.json" 0.33 2>/dev/null)
    [ -z "$CPU" ] && budgets="$budgets $(util budgets "$m" 2>/dev/null | awk '{printf "%.0f", $NF * 1e9}')"
    for budget in $budgets; do
      tag="${m}_$(gb_of "$budget")"
      dir="$OUT/offload/$tag"
      mkdir -p "$dir"
      step "offload_solve_none_$tag" "$B/monet-solve" "$p" --budget "$budget" --time-limit "$limit" \
        -o "$dir/schedule_none.json" --report "$dir/solve_none.json"
      step "offload_solve_$tag" "$B/monet-solve" "$p" --budget "$budget" --time-limit "$limit" --offload "${link[@]}" \
        -o "$dir/schedule_offload.json" --report "$dir/solve_offload.json" --timeline "$dir/timeline_offload.svg"
      [ -f "$dir/schedule_offload.json" ] || continue
      step "offload_run_$tag" "$B/monet-run" "$(model_onnx "$m")" --schedule "$dir/schedule_offload.json" \
        --device "$DEV" "${RUN_ITERS[@]}" --report "$dir/run.json"
      step "offload_check_$tag" "$B/monet-check" "$(model_onnx "$m")" --schedule "$dir/schedule_offload.json" \
        --device "$DEV" "${mathargs[@]}" --reference store-all
    done
  done
  util offload-table "$OUT" "$OUT/OFFLOAD.md" && log "offload: $(tail -n +3 "$OUT/OFFLOAD.md" | tr '\n' ' ')"
  pack
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
stage_tf32() { gpu_only tf32 || return 0; step tf32_noise "$PY" scripts/tf32_noise.py; }

STAGES="build env tests check tf32 profile roofline kernels bench summary transformers attention zoo zoo-runs torch offload extra"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(all)
[ "${stages[0]}" = all ] && stages=(build env tests profile roofline bench summary)
log "gpu_session.sh ${CPU:+--cpu }${stages[*]}: binaries $B, device $DEV, out $OUT"
for s in "${stages[@]}"; do
  case " $STAGES " in
    *" $s "*) "stage_$s" ;;
    *) echo "gpu_session.sh: unknown stage '$s' ($STAGES all)" >&2; exit 1 ;;
  esac
done
log "done: ${stages[*]}; results in $OUT${PACK:+, packed in $PACK}"
pack
