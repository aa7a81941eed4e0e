#!/usr/bin/env bash
# A two-layer torchvision VisionTransformer (image 32, patch 8, width 16, 2 heads, no dropout), exported weight-free
# in training mode at opsets 13 and 17 as scripts/export_models.py exports, then checked against PyTorch in double.
# Usage (repository root): bash schedules/cpu-runs/2026-11-29_sweep/vit_tiny_check.sh WORK_DIR > vit_tiny_check.txt
set -eu
work=$1
mkdir -p "$work"
/usr/bin/python3 - "$work" <<'PY' 2>/dev/null
import sys
sys.path.insert(0, "scripts")
import torch
from torchvision.models.vision_transformer import VisionTransformer
from export_models import export
for opset in (13, 17):
    torch.manual_seed(0)
    m = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
                          num_classes=10, dropout=0.0, attention_dropout=0.0)
    export(m, (3, 32, 32), f"{sys.argv[1]}/vit_tiny_{opset}.onnx", opset=opset)
PY
for opset in 13 17; do
  echo "== opset $opset"
  build/apps/monet-profile "$work/vit_tiny_$opset.onnx" --device estimate --batch 2 -o "$work/p$opset.json" -q
  /usr/bin/python3 -c "import json, sys; p = json.load(open(sys.argv[1])); \
f = [n['op'] for n in p['nodes'] if n['stage'] == 'forward']; \
print('matmul_rows', p['matmul_rows'], '| forward MatMuls', f.count('MatMul'), '| forward Transposes', f.count('Transpose'))" \
    "$work/p$opset.json"
  build/apps/monet-check "$work/vit_tiny_$opset.onnx" --batch 2 --precision f64 --tolerance 1e-6 | tail -2
done
