#!/bin/bash
B=/work/main/build/apps
M=/work/main/models
for spec in resnet50:184:4.99GB mobilenet_v2:272:5.01GB googlenet:320:4.99GB unet:11:6.01GB; do
  IFS=: read m b budget <<<"$spec"
  for md in fused separate; do
    $B/monet-profile $M/$m.onnx --batch $b --device estimate --bn-activation $md -o p_${m}_$md.json -q > /dev/null 2>&1
    $B/monet-solve p_${m}_$md.json --budget 1GB --time-limit 5 --threads 1 -o none.json --report bound_${m}_$md.json > bound_${m}_$md.log 2>&1
    $B/monet-solve p_${m}_$md.json --budget $budget --mode full --time-limit 30 --threads 1 -o s_${m}_$md.json --report r_${m}_$md.json > solve_${m}_$md.log 2>&1
    echo "$m $md $(tail -2 solve_${m}_$md.log | head -1)"
  done
done
