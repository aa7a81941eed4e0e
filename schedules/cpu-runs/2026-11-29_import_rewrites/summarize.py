# Summarises the estimated profiles <model>_<tag>.json (or .json.gz, as committed) in DIR (README.md): node counts by op, the sum of the node
# times, the lean store-all's peak.  usage: python3 summarize.py DIR > summary.txt
import collections
import gzip
import json
import os
import sys

d = sys.argv[1]
print("model  graph                                   nodes  Transpose  Div  Add  MatMul(bias)  step_ms(estimate)  store-all peak GB")
for m in ['bert', 'gpt2', 'llama']:
    for tag, label in [('fused', 'attention fused, biases separate'), ('strided', 'attention strided, biases separate'),
                       ('all', 'attention strided, biases in MatMul'), ('t', 'and weights read as stored'),
                       ('rows', 'and inputs read as stored'), ('out', 'and outputs written as stored')]:
        path = f'{d}/{m}_{tag}.json'
        if not os.path.exists(path) and not os.path.exists(path + '.gz'):
            continue  # rows, out: BERT's alone (GPT-2 and LLaMA have no MatMul input to take in)
        p = json.load(open(path) if os.path.exists(path) else gzip.open(path + '.gz', 'rt'))
        ns = p['nodes']
        c = collections.Counter(n['op'] for n in ns)
        t = sum(n['time_ms'] for n in ns)
        print(f"{m:6} {label:38} {len(ns):6} {c['Transpose']:10} {c['Div']:4} {c['Add']:4} "
              f"{p.get('matmul_bias', 'separate'):>12} {t:18.2f} {p['totals']['store_all_peak_bytes'] / 1e9:18.3f}")
