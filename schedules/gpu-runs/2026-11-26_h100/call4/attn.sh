#!/usr/bin/env bash
# fused vs materialized attention, fast store-all, same machine and call
set -u
if [ -z "${CPU:-}" ]; then
  python3 -c 'import tarfile; tarfile.open("gpu-pack/bundle.txz").extractall()'
  SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  export LD_LIBRARY_PATH=$(dirname $(find $SP/nvidia -name 'libcudnn.so.9' | head -1)):$(dirname $(find $SP/nvidia -name 'libcublas.so.1*' | head -1))
  B=gpu-bundle/bin; DEV=cuda; IT=(--iters 10 --warmup 3); D=models/transformers
else
  B=build/apps; DEV=cpu; IT=(--iters 1 --warmup 0); D=test/data
fi
O=${OUT:-/tmp/attn}; mkdir -p $O
for mb in bert:32 gpt2:8; do
  m=${mb%:*}; b=${mb#*:}; f=$D/$m.onnx; [ -n "${CPU:-}" ] && { f=$D/${m}_tiny.onnx; b=2; }
  echo "== $m b$b"
  timeout 60 $B/monet-profile $f --batch $b --loss ce --device $DEV --attention materialized -q -o $O/${m}_mat.json
  fp=gpu-pack/prof/${m}_fused.json; [ -n "${CPU:-}" ] && { timeout 60 $B/monet-profile $f --batch $b --loss ce --device $DEV -q -o $O/${m}_fused.json; fp=$O/${m}_fused.json; }
  for a in materialized fused; do
    p=$O/${m}_mat.json; [ $a = fused ] && p=$fp
    timeout 60 $B/monet-run $f --batch $b --loss ce --device $DEV --attention $a --store-all fast --profile $p "${IT[@]}" --report $O/run_${m}_$a.json 2>&1 | grep -i "median\|error" | sed "s/^/$a: /"
  done
done
