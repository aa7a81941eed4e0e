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
expect 1 "unsupported op type 'Elu'" -- $run "$data/unsupported_op.onnx" --batch 2 $r
expect 1 "give --batch" -- $run "$data/conv_relu.onnx" $r
expect 1 "batch must be a positive integer" -- $run "$data/conv_relu.onnx" --batch 0 $r
expect 1 "batch must be a positive integer" -- $run "$data/conv_relu.onnx" --batch -4 $r
expect 1 "--batch" -- $run "$data/conv_relu.onnx" --batch two $r
expect 1 "input-shape '3,x,8'" -- $run "$data/conv_relu.onnx" --batch 2 --input-shape 3,x,8 $r
expect 1 "node 'conv' (Conv)" -- $run "$data/conv_relu.onnx" --batch 2 --input-shape 5,8,8 $r
expect 1 "device 'tpu'" -- $run "$data/conv_relu.onnx" --batch 2 --device tpu $r
expect 1 "device cuda" -- $run "$data/conv_relu.onnx" --batch 2 --device cuda $r
expect 1 "iters must be positive" -- $run "$data/conv_relu.onnx" --batch 2 --iters 0 $r
expect 1 "loss 'hinge'" -- $run "$data/conv_relu.onnx" --batch 2 --loss hinge $r
expect 1 "no such file" -- $check "$data/missing.onnx" --batch 2 $r
expect 1 "reference 'tensorflow'" -- $check "$data/conv_relu.onnx" --batch 2 --reference tensorflow $r
expect 1 "reference" -- $check "$data/conv_relu.onnx" --batch 2 --loss sum --reference-script "$data/missing.py" $r
o="-o $tmp/r.json"
expect 1 "output is required" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate
expect 1 "device 'bogus'" -- $profile "$data/conv_relu.onnx" --batch 2 --device bogus $o
expect 1 "device cuda" -- $profile "$data/conv_relu.onnx" --batch 2 --device cuda $o
expect 1 "batch must be a positive integer" -- $profile "$data/conv_relu.onnx" --batch 0 --device estimate $o
expect 1 "no such file" -- $profile "$data/missing.onnx" --batch 2 --device estimate $o
expect 1 "repeats must be positive" -- $profile "$data/conv_relu.onnx" --batch 2 --device cpu --repeats 0 $o
expect 1 "gpu-tflops applies to --device estimate only" -- $profile "$data/conv_relu.onnx" --batch 2 --device cpu --gpu-tflops 100 $o
expect 1 "gpu-tflops must be positive" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate --gpu-tflops 0 $o
expect 1 "cannot open for writing" -- $profile "$data/conv_relu.onnx" --batch 2 --device estimate -o "$tmp/no/such/dir/p.json"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all CLI error cases pass"
