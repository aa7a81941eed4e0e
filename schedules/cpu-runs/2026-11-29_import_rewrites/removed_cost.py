# The time the nodes each import rewrite removes took on the H200 profiles of 2026-11-27 (measured, the graph as
# imported then), and GatherIdxGrad's, whose kernel was rewritten.  usage: python3 removed_cost.py > removed_cost.txt
import json
import re

RUN = '../../gpu-runs/2026-11-27_h200/call1/schedules'
ROWS = {
    'bert_32': [
        ('heads\' Transposes and Q\'s Div, with gradients', ('Transpose', 'Div', 'DivGradA'),
         r'self_attn/(Transpose_[2345]|Div_2)(/|$)'),
        ('bias Adds of the layers\' Linears', ('Add',), r'(self_attn/Add|linear1/Add|linear2/Add)$'),
        ('weight Transposes, with gradients', ('Transpose',), r'(self_attn/Transpose_1|linear1/Transpose|linear2/Transpose)(/|$)'),
        ('in-projections\' input Transposes, with gradients', ('Transpose',), r'self_attn/Transpose(/|$)'),
        ('out-projections\' output Transposes, with gradients', ('Transpose',), r'self_attn/Transpose_6(/|$)'),
        ('GatherIdxGrad (kernel rewritten)', ('GatherIdxGrad',), r'.'),
    ],
    'gpt2_8': [
        ('heads\' Transposes, with gradients', ('Transpose',), r'/h\.\d+/attn/Transpose(_[123])?(/|$)'),
        ('bias Adds after MatMuls', ('Add',), None),
        ('weight Transposes, with gradients', ('Transpose',), r'(c_attn|c_proj|mlp\.0|mlp\.2|lm_head)/Transpose(/|$)'),
        ('GatherIdxGrad (kernel rewritten)', ('GatherIdxGrad',), r'.'),
    ],
}
for model, rows in ROWS.items():
    p = json.load(open(f'{RUN}/{model}/h200/profile.json'))
    nodes = p['nodes']
    producer = {o: n for n in nodes for o in n['outputs']}
    step = sum(n['time_ms'] for n in nodes)
    print(f'{model}: step {step:.1f} ms (sum of node times)')
    for label, ops, pattern in rows:
        if pattern is None:  # an Add one of whose operands a MatMul made, in the forward
            chosen = [n for n in nodes if n['op'] == 'Add' and n['stage'] == 'forward' and
                      any(i in producer and producer[i]['op'] == 'MatMul' for i in n['inputs'])]
        else:
            chosen = [n for n in nodes if n['op'] in ops and re.search(pattern, n['name'])]
        print(f'  {label}: {len(chosen)} nodes, {sum(n["time_ms"] for n in chosen):.2f} ms')
