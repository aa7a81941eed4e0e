#!/usr/bin/env bash
# Bad inputs to the commands: each must print exactly one line on stderr naming the problem, exit with the
# documented code, and leave no report file behind.
# Usage: cli_errors.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
run="$build/apps/monet-run"
check="$build/apps/monet-check"
profile="$build/apps/monet-profile"
solve="$build/apps/monet-solve"
data="$src/test/data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect CODE PATTERN -- command...
expect() {
  local code=$1 pattern=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  # ASan's own note when it returns null for an allocation it cannot make (the out-of-memory row) is not ours.
  if [ -n "${MONET_SANITIZED:-}" ]; then
    sed -i '/^==[0-9]*==WARNING: AddressSanitizer failed to allocate 0x[0-9a-f]* bytes$/d' "$tmp/err"
  fi
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne "$code" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$pattern" "$tmp/err"; then
    echo "FAIL: $* -> exit $rc (want $code), $lines stderr lines, want /$pattern/:"
    cat "$tmp/err"
    failures=$((failures + 1))
  else
    echo "ok: $(basename "$1") ${*:2} -> $rc: $(cat "$tmp/err")"
  fi
  if [ -e "$tmp/r.json" ] || [ -e "$tmp/r.json.tmp" ]; then
    echo "FAIL: $* left a report file"
    failures=$((failures + 1))
    rm -f "$tmp/r.json" "$tmp/r.json.tmp"
  fi
}

r="--report $tmp/r.json"
expect 1 "no such file" -- $run "$data/missing.onnx" --batch 2 $r
expect 1 "empty file" -- $run "$data/empty.onnx" --batch 2 $r
expect 1 "not an ONNX model" -- $run "$data/random_bytes.onnx" --batch 2 $r
expect 1 "truncated.onnx" -- $run "$data/truncated.onnx" --batch 2 $r
expect 1 "unsupported op type 'Hardmax'" -- $run "$data/unsupported_op.onnx" --batch 2 $r
expect 1 "graph input 'rel_idx' (int64 \[4,4\]) is an integer buffer without values .*: pass them with --input rel_idx=FILE.npy" -- \
  $run "$data/int_buffer_input.onnx" --batch 2 $r
expect 1 "--input 'rel_idx': expected NAME=FILE.npy" -- $run "$data/int_buffer_input.onnx" --batch 2 --input rel_idx $r
expect 1 "--input: 'rel_idx' is given twice" -- \
  $run "$data/int_buffer_input.onnx" --batch 2 --input rel_idx="$data/rel_idx.npy" --input rel_idx=x.npy $r
expect 1 "int_buffer_input.onnx: --input rel=.*: the model has no graph input 'rel'" -- \
  $run "$data/int_buffer_input.onnx" --batch 2 --input rel="$data/rel_idx.npy" $r
expect 1 "--input rel_idx=.*missing.npy: .*missing.npy: cannot open" -- \
  $run "$data/int_buffer_input.onnx" --batch 2 --input rel_idx="$data/missing.npy" $r
expect 1 "--input rel_idx=.*: truncated .npy data" -- \
  $run "$data/int_buffer_input.onnx" --batch 2 --input rel_idx="$data/truncated.npy" $r
expect 1 "--input rel_idx=.*: the file holds \[16\], the input is \[4,4\]" -- \
  $run "$data/int_buffer_input.onnx" --batch 2 --input rel_idx="$data/rel_idx_shape.npy" $r
expect 1 "--input rel_idx=.*: the file holds <f4 values, the input is int64 (save it as int64, int32 or bool)" -- \
  $run "$data/int_buffer_input.onnx" --batch 2 --input rel_idx="$data/rel_idx_float.npy" $r
expect 1 "--input attention_mask=.*: the file holds \[2,64\], the input is \[3,64\]" -- \
  $run "$data/bert_inputs_tiny.onnx" --batch 3 --input attention_mask="$data/bert_inputs_mask.npy" $r
expect 1 "data input 'input' (its --input file) element 70 is 101, outside the embedding table it indexes (ids 0 to 100)" -- \
  $run "$data/bert_inputs_tiny.onnx" --batch 2 --input input="$data/bert_inputs_bad_ids.npy" $r
expect 1 "node 'ellipsis' (Einsum): equation '...ij,jk->...ik': an ellipsis (...) is not supported" -- \
  $run "$data/einsum_ellipsis.onnx" --batch 2 $r
expect 1 "data input 'z' dimension 1 ('T') is dynamic and not one of the first data input's dimensions" -- \
  $run "$data/unknown_symbol_input.onnx" --batch 2 $r
expect 1 "node 'act' (Crop): unsupported op type 'Crop'" -- $run "$data/experimental_op.onnx" --batch 2 $r
expect 1 "node 'ln' (LayerNorm): input Scale has shape \[3\], expected \[4\]" -- $run "$data/bad_layer_norm.onnx" --batch 2 $r
expect 1 "give --batch" -- $run "$data/conv_relu.onnx" $r
expect 1 "data input 'x' dimension 2 is dynamic: give --input-shape" -- $run "$data/dynamic_hw.onnx" --batch 2 $r
expect 1 "batch must be a positive integer" -- $run "$data/conv_relu.onnx" --batch 0 $r
expect 1 "batch must be a positive integer" -- $run "$data/conv_relu.onnx" --batch -4 $r
expect 1 "--batch" -- $run "$data/conv_relu.onnx" --batch two $r
# Without a usable GPU (CI), --device cuda must fail with one line; on a lent GPU machine those rows do not apply.
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then have_gpu=1; fi
expect 1 "input-shape '3,x,8'" -- $run "$data/conv_relu.onnx" --batch 2 --input-shape 3,x,8 $r
expect 1 "node 'conv' (Conv)" -- $run "$data/conv_relu.onnx" --batch 2 --input-shape 5,8,8 $r
expect 1 "data input 'x' \[999999999,999999999,999999999,9\] is too large (over 2199023255552 elements)" -- $run "$data/conv_relu.onnx" --batch 999999999 --input-shape 999999999,999999999,9 $r
expect 1 "input 'w' \[4000000000000000000,3,3,3\] is too large" -- $run "$data/huge_weight.onnx" --batch 2 $r
expect 1 "device 'tpu'" -- $run "$data/conv_relu.onnx" --batch 2 --device tpu $r
[ "$have_gpu" = 1 ] || expect 1 "device cuda" -- $run "$data/conv_relu.onnx" --batch 2 --device cuda $r
expect 1 "iters must be positive" -- $run "$data/conv_relu.onnx" --batch 2 --iters 0 $r
# Out of memory: the arena of a 2.2 TB step cannot be reserved. Under ulimit -v where that is possible; a
# sanitized build reserves terabytes of shadow address space itself and cannot run under ulimit -v, but ASan
# refuses any allocation over 1 TiB (returning null with allocator_may_return_null=1).
oom="$data/conv_relu.onnx --batch 4096 --input-shape 3,4096,4096"
if [ -n "${MONET_SANITIZED:-}" ]; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" \
    expect 5 "out of memory: the cpu arena needs .* GB) and the host could not reserve them" -- $run $oom $r
else
  expect 5 "out of memory: the cpu arena needs .* GB) and the host could not reserve them" -- \
    bash -c 'ulimit -v 8000000 && exec "$@"' - $run $oom $r
fi
expect 1 "loss 'hinge'" -- $run "$data/conv_relu.onnx" --batch 2 --loss hinge $r
expect 1 "no such file" -- $check "$data/missing.onnx" --batch 2 $r
expect 1 "reference 'tensorflow'" -- $check "$data/conv_relu.onnx" --batch 2 --reference tensorflow $r
expect 1 "reference" -- $check "$data/conv_relu.onnx" --batch 2 --loss sum --reference-script "$data/missing.py" $r
o="-o $tmp/r.json"
expect 1 "output is required" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate
expect 1 "device 'bogus'" -- $profile "$data/conv_relu.onnx" --batch 2 --device bogus $o
[ "$have_gpu" = 1 ] || expect 1 "device cuda" -- $profile "$data/conv_relu.onnx" --batch 2 --device cuda $o
expect 1 "batch must be a positive integer" -- $profile "$data/conv_relu.onnx" --batch 0 --device estimate $o
expect 1 "no such file" -- $profile "$data/missing.onnx" --batch 2 --device estimate $o
expect 1 "--host-bandwidth must be a positive number of GB/s, got 0" -- \
  $profile "$data/conv_relu.onnx" --batch 2 --device estimate --host-bandwidth 0 $o
expect 1 "--host-bandwidth" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate --host-bandwidth fast $o
expect 1 "repeats must be positive" -- $profile "$data/conv_relu.onnx" --batch 2 --device cpu --repeats 0 $o
expect 1 "gpu-tflops applies to --device estimate only" -- $profile "$data/conv_relu.onnx" --batch 2 --device cpu --gpu-tflops 100 $o
expect 1 "gpu-tflops must be positive" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate --gpu-tflops 0 $o
expect 1 "nondeterministic-algorithms applies to --device cuda" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate --nondeterministic-algorithms $o
expect 1 "cannot open for writing" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate -o "$tmp/no/such/dir/p.json"

# Schedules: fixtures made here from tiny (batch 2) with monet-profile and monet-solve, then edited.
py=/usr/bin/python3
tiny="$src/models/tiny.onnx"
# edit IN OUT PYTHON-STATEMENTS: loads IN as j, runs the statements, writes OUT.
edit() {
  $py -c "import json, sys; j = json.load(open(sys.argv[1])); $3; json.dump(j, open(sys.argv[2], 'w'))" "$1" "$2"
}
s="$tmp/s.json"
if ! { $profile "$tiny" --batch 2 --device estimate -o "$tmp/p.json" &&
       $solve "$tmp/p.json" --budget 1MB --mode sqrtn -o "$s" &&
       $profile "$tiny" --batch 2 --loss sum --device estimate -o "$tmp/p_sum.json" &&
       $solve "$tmp/p_sum.json" --budget 1MB --mode sqrtn -o "$tmp/s_sum.json" &&
       $profile "$data/conv_relu.onnx" --batch 2 --device estimate -o "$tmp/p_conv.json" &&
       $solve "$tmp/p_conv.json" --budget 1MB --mode store-all -o "$tmp/s_conv.json" &&
       $profile "$data/tiny_transformer.onnx" --batch 2 --device estimate -o "$tmp/p_tt.json"; } >"$tmp/fixtures.log" 2>&1; then
  echo "FAIL: could not make the schedule fixtures:"
  cat "$tmp/fixtures.log"
  exit 1
fi
edit "$s" "$tmp/s_relabel.json" "j['batch'] = 4; j['input_shape'][0] = 4"
edit "$s" "$tmp/s_early_free.json" "i = next(i for i, st in enumerate(j['steps']) if st[0] == 'free'); j['steps'].insert(0, j['steps'].pop(i))"
edit "$s" "$tmp/s_small_budget.json" "j['budget_bytes'] = 1000"
edit "$s" "$tmp/s_use_freed.json" "j['steps'].insert(1, ['free', '/conv1/Conv_output_0'])"  # before the BatchNorm reads it
edit "$s" "$tmp/s_unknown.json" "j['steps'][next(i for i, st in enumerate(j['steps']) if st == ['compute', '/conv1/Conv'])][1] = '/conv9/Conv'"
edit "$s" "$tmp/s_bad_impl.json" "next(st for st in j['steps'] if st[0] in ('compute', 'compute_in_place') and 'ReluGrad' in st[1]).append('bogus')"
# Re-deriving a profile's algorithm choices: only from a profile with recorded cuDNN timings, of this model.
edit "$tmp/p.json" "$tmp/p_algos.json" "j['device_info']['conv_algorithms'] = {'/nope': {'op': 'Conv', 'algorithms': []}}"
expect 1 "p.json: no algorithm timings recorded" -- $profile "$tiny" --batch 2 --rederive "$tmp/p.json" $o
expect 1 "p.json: a profile of another model, batch or input shape" -- $profile "$tiny" --batch 4 --rederive "$tmp/p.json" $o
expect 1 "conv_algorithms names node '/nope', which the profile does not have" -- $profile "$tiny" --batch 2 --rederive "$tmp/p_algos.json" $o
expect 1 "rederive takes neither --device nor" -- $profile "$tiny" --batch 2 --rederive "$tmp/p.json" --device cuda $o
expect 1 "repeats does not apply to --rederive" -- $profile "$tiny" --batch 2 --rederive "$tmp/p.json" --repeats 2 $o
expect 1 "device is required" -- $profile "$tiny" --batch 2 $o
expect 1 "batch 4 differs from the schedule's batch 2" -- $run "$tiny" --batch 4 --schedule "$s" $r
expect 1 "input-shape 3,32,32 differs from the schedule's 3,16,16" -- $run "$tiny" --input-shape 3,32,32 --schedule "$s" $r
expect 1 "fingerprint mismatch" -- $run "$tiny" --schedule "$tmp/s_relabel.json" $r
expect 1 "solved with --loss sum, this run uses --loss ce" -- $run "$tiny" --schedule "$tmp/s_sum.json" $r
expect 1 "schedule is for model 'conv_relu', this is 'tiny'" -- $run "$tiny" --schedule "$tmp/s_conv.json" $r
expect 1 "schedule step 0: frees '.*', which is not computed" -- $run "$tiny" --schedule "$tmp/s_early_free.json" $r
expect 1 "unknown node '/conv9/Conv'" -- $run "$tiny" --schedule "$tmp/s_unknown.json" $r
expect 1 "schedule step 2: node '/bn1/BatchNormalization' reads '/conv1/Conv_output_0', which is already freed" -- $run "$tiny" --schedule "$tmp/s_use_freed.json" $r
expect 1 "not a monet schedule file" -- $run "$tiny" --schedule "$tmp/p.json" $r
expect 1 "not a monet schedule file (not JSON)" -- $run "$tiny" --schedule "$tiny" $r
expect 1 "missing.json: no such file" -- $run "$tiny" --schedule "$tmp/missing.json" $r
expect 1 "exceeds the schedule's budget 1000 bytes" -- $run "$tiny" --schedule "$tmp/s_small_budget.json" $r
expect 1 "schedule step 0: frees" -- $check "$tiny" --schedule "$tmp/s_early_free.json" --simulate $r
expect 1 "which is already freed" -- $check "$tiny" --schedule "$tmp/s_use_freed.json" --simulate $r
expect 1 "unknown node '/conv9/Conv'" -- $check "$tiny" --schedule "$tmp/s_unknown.json" --simulate $r
expect 1 "has no implementation 'bogus'" -- $check "$tiny" --schedule "$tmp/s_bad_impl.json" --simulate $r
expect 1 "--math 'tf16': expected default or fp32" -- $run "$tiny" --batch 2 --math tf16 $r
# The store-all without a schedule (--store-all, --profile), and a run whose loss turns non-finite: an lr of 1e20
# makes step 1's update overflow step 2's forward pass; 1e39 (inf as a float) makes the parameters themselves NaN.
expect 1 "--store-all 'quick': expected fast, lean or default" -- $run "$tiny" --batch 2 --store-all quick $r
expect 1 "--store-all chooses the store-all run without a schedule: not with --schedule" -- $run "$tiny" --schedule "$s" --store-all lean $r
expect 1 "--profile chooses a store-all's implementations: not with --schedule" -- $run "$tiny" --schedule "$s" --profile "$tmp/p.json" $r
expect 1 "p.json: a profile of another model, batch, input shape, loss or training graph" -- $run "$tiny" --batch 4 --profile "$tmp/p.json" $r
expect 1 "step 2/3: the loss is NaN; the first non-finite value is '.*', output of node '.*' (.*, forward) (found by running the 2 steps again from the seed" -- $run "$tiny" --batch 4 --lr 1e20 --iters 3 --warmup 0 $r
expect 1 "step 2/3: the loss is NaN; the step starts from a non-finite parameter 'conv1.weight'" -- $run "$tiny" --batch 4 --lr 1e39 --iters 3 --warmup 0 $r
expect 1 "schedule is for model 'conv_relu', this is 'tiny'" -- $check "$tiny" --schedule "$tmp/s_conv.json" --simulate $r
expect 1 "fingerprint mismatch" -- $check "$tiny" --schedule "$tmp/s_relabel.json" --reference store-all $r
expect 1 "exceeds the schedule's budget 1000 bytes" -- $check "$tiny" --schedule "$tmp/s_small_budget.json" --simulate $r
expect 1 "batch 4 differs from the schedule's batch 2" -- $check "$tiny" --batch 4 --schedule "$s" --reference store-all $r
expect 1 "give --schedule" -- $check "$tiny" --batch 2 --reference store-all $r
expect 1 "--reference store-all requires the step bitwise equal and takes no tolerance" -- $check "$tiny" --schedule "$s" --reference store-all --tolerance 1e-3 $r
expect 1 "give --schedule" -- $check "$tiny" --batch 2 --simulate $r

# monet-solve: budgets, modes, limits, profiles.
so="-o $tmp/out.json --report $tmp/r.json"
expect 1 "budget 'abc': expected a number" -- $solve "$tmp/p.json" --budget abc $so
expect 1 "budget '-1GB': must be positive" -- $solve "$tmp/p.json" --budget -1GB $so
expect 1 "budget '0': must be positive" -- $solve "$tmp/p.json" --budget 0 $so
expect 1 "budget '5.5XB': unknown unit" -- $solve "$tmp/p.json" --budget 5.5XB $so
expect 1 "budget '1.5': plain bytes must be a whole number" -- $solve "$tmp/p.json" --budget 1.5 $so
expect 1 "time-limit must be positive" -- $solve "$tmp/p.json" --budget 1MB --time-limit 0 $so
expect 1 "time-limit must be positive" -- $solve "$tmp/p.json" --budget 1MB --time-limit -5 $so
expect 1 "threads must be >= 1" -- $solve "$tmp/p.json" --budget 1MB --threads 0 $so
expect 1 "max-nodes must be >= 0, got -1" -- $solve "$tmp/p.json" --budget 1MB --max-nodes -1 $so
expect 1 "max-sub-mips must be >= 0, got -1" -- $solve "$tmp/p.json" --budget 1MB --max-sub-mips -1 $so
expect 1 "mode 'fast'" -- $solve "$tmp/p.json" --budget 1MB --mode fast $so
expect 1 "--window: expected auto or a number of levels >= 0, got '-1'" -- $solve "$tmp/p.json" --budget 1MB --window -1 $so
expect 1 "--window: expected auto or a number of levels >= 0, got '10x'" -- $solve "$tmp/p.json" --budget 1MB --window 10x $so
expect 1 "missing.json: no such file" -- $solve "$tmp/missing.json" --budget 1MB $so
expect 1 "not a monet profile" -- $solve "$s" --budget 1MB $so
edit "$tmp/p.json" "$tmp/p_huge.json" "j['values'][0]['bytes'] = 9000000000000000000"
expect 1 "values\[0\].bytes: must be <= 17592186044416, got 9000000000000000000" -- $solve "$tmp/p_huge.json" --budget 1MB $so
edit "$tmp/p.json" "$tmp/p_neg.json" "j['nodes'][0]['time_ms'] = -1"
expect 1 "nodes\[0\].time_ms: must be >= 0, got -1" -- $solve "$tmp/p_neg.json" --budget 1MB $so
# Offload: a profile without a host link, flags without --offload, bad rates and limits.
expect 1 "p.json: the profile has no host link" -- $solve "$tmp/p.json" --budget 1MB --offload $so
expect 1 "--host-bandwidth, --host-limit and --copy-timing go with --offload" -- $solve "$tmp/p.json" --budget 1MB --host-limit 1GB $so
expect 1 "--host-bandwidth, --host-limit and --copy-timing go with --offload" -- $solve "$tmp/p.json" --budget 1MB --copy-timing lean $so
expect 1 "--copy-timing 'late': expected auto, hidden, lean, lean-out or lean-in" -- $solve "$tmp/p.json" --budget 1MB --offload --host-bandwidth 10 --copy-timing late $so
expect 1 "--host-bandwidth: expected GB/s > 0, got -3" -- $solve "$tmp/p.json" --budget 1MB --offload --host-bandwidth -3 $so
expect 1 "host-limit 'abc': expected a number" -- $solve "$tmp/p.json" --budget 1MB --offload --host-bandwidth 10 --host-limit abc $so
expect 2 "below what any schedule reaches: the smallest feasible budget is at least [0-9,]* B ([0-9.]* GB), at node '[^'][^']*'" -- $solve "$tmp/p.json" --budget 1000 -o "$tmp/out.json"
# Between the lower bound (2.38 GB) and the smallest heuristic schedule (4.01 GB) of resnet50 b184: its LP relaxation
# alone takes ~15 s, so no schedule can be found in 2 s (and monet-solve stops at the limit, CBC not started).
# -q: the solver's progress (on stderr) would precede the error line.
expect 4 "no schedule within 3,000,000,000 B (3.00 GB) found in 2 s (not proven infeasible)" -- $solve "$src/schedules/resnet50_184/profile_estimate.json" --budget 3GB --time-limit 2 -o "$tmp/out.json" -q
# The frontier, the timeline and the logging flags.
expect 1 "--frontier: expected a number of budgets >= 2, got 1" -- $solve "$tmp/p.json" --frontier 1 $r
expect 1 "--frontier solves at its own budgets and writes no schedule: drop --budget, -o and --timeline" -- $solve "$tmp/p.json" --frontier 3 --budget 1MB $r
expect 1 "--budget is required (or --frontier N)" -- $solve "$tmp/p.json" -o "$tmp/out.json" $r
expect 1 "-o SCHEDULE.json is required (or --frontier N)" -- $solve "$tmp/p.json" --budget 1MB $r
expect 1 "--plot draws the frontier: give --frontier N" -- $solve "$tmp/p.json" --budget 1MB -o "$tmp/out.json" --plot "$tmp/f.svg" $r
expect 1 "nodir/t.svg: cannot open for writing" -- $solve "$tmp/p.json" --budget 1GB --mode store-all -o "$tmp/out.json" --timeline "$tmp/nodir/t.svg" $r
expect 1 "give one of them, not both" -- $solve "$tmp/p.json" --budget 1GB -o "$tmp/out.json" -v -q $r
expect 1 "--profile replays the schedule in the simulator: give --simulate" -- $check "$tiny" --schedule "$s" --reference store-all --profile "$tmp/p.json" $r
expect 1 "--timeline draws the simulator's replay: give --simulate" -- $check "$tiny" --schedule "$s" --reference store-all --timeline "$tmp/t.svg" $r
# monet-fit: the largest batch.
fit="$build/apps/monet-fit"
expect 1 "missing.onnx: no such file" -- $fit "$data/missing.onnx" --budget 1GB $r
expect 1 "budget 'abc': expected a number" -- $fit "$tiny" --budget abc $r
expect 1 "--max-overhead must be >= 0 percent, got -1" -- $fit "$tiny" --budget 1GB --max-overhead -1 $r
expect 1 "the estimated profiles (no --profile): the profile has no host link" -- $fit "$tiny" --budget 1GB --offload $r
expect 1 "--host-bandwidth: expected GB/s > 0, got 0" -- $fit "$tiny" --budget 1GB --offload --host-bandwidth 0 $r
expect 1 "--mode 'sqrtn': expected full or checkpoint" -- $fit "$tiny" --budget 1GB --mode sqrtn $r
expect 1 "--max-nodes must be >= 0, got -1" -- $fit "$tiny" --budget 1GB --max-nodes -1 $r
expect 1 "--max-batch must be >= 1, got 0" -- $fit "$tiny" --budget 1GB --max-batch 0 $r
expect 1 "a profile of another model, input shape" -- $fit "$tiny" --budget 1GB --profile "$src/schedules/resnet50_184/profile_estimate.json" $r
expect 2 "no batch of .*tiny.onnx fits 1,000 B (0.00 GB) (batch 1: too big: below the lower bound" -- $fit "$tiny" --budget 1000 -q
if [ -e "$tmp/out.json" ]; then
  echo "FAIL: monet-solve left a schedule for an infeasible budget"
  failures=$((failures + 1))
fi
# A failed command leaves neither its output nor a temporary file: -o of a failing monet-profile and
# monet-solve above are $tmp/r.json and $tmp/out.json; no *.tmp may remain anywhere.
leftovers=$(find "$tmp" -name '*.tmp')
if [ -n "$leftovers" ]; then
  echo "FAIL: temporary files left behind: $leftovers"
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all CLI error cases pass"
