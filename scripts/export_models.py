#!/usr/bin/python3
"""Writes the weight-free ONNX models of models/ (opset 13, training mode) from Debian's torch/torchvision.

Usage: /usr/bin/python3 scripts/export_models.py [--out models] [--opset 13] [names...]
(names default to the files of models/; the transformers are written only when named.)
Parameters and BatchNorm running statistics become shaped graph inputs (export_params=False); monet initialises
them from a seed. The UNet is defined here: milesial's Pytorch-UNet layout with a halved bottleneck, as measured
in the MONeT paper, with 2 output classes (milesial's default; trained with --loss ce, per pixel).

The language models are defined here too, in plain torch.nn: gpt2 (GPT-2 small: 12 layers, 12 heads, width 768,
vocabulary 50257, context 1024, tied LM head) and bert (a BERT-base-like encoder: 12 post-LN layers of
nn.TransformerEncoderLayer, width 768, vocabulary 30522, 512 positions, a token-classification head), and their
small variants gpt2_tiny and bert_tiny (2 layers, 2 heads, width 32, sequence 64; test/data/ holds them:
`--out test/data gpt2_tiny bert_tiny llama_tiny`; test/data/gpt2_tiny_opset17.onnx is gpt2_tiny written with
`--opset 17` into another folder and renamed); llama (a LLaMA-style decoder of GPT-2 small's size: 12 layers,
12 heads, width 768, RMSNorm, rotary position embeddings, SwiGLU MLP 2048 wide, causal mask by masked_fill,
vocabulary 32000, context 1024, untied LM head) and llama_tiny (2 layers, 2 heads, width 32, MLP 64, sequence
64); bert_inputs and bert_inputs_tiny (BERT-base's and bert_tiny's sizes) take the integer inputs Hugging Face's
BertModel takes: token ids, an attention mask, token types and position ids. Their data input is int64 token ids
(N, T); their output is logits (N, T, vocabulary) or (N, T, classes),
classes on the last axis.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torchvision


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.block(x)


class Up(nn.Module):
    """Nearest 2x upsampling of the deeper map, concat with the skip, double conv."""

    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = DoubleConv(cin, cout)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class UNet(nn.Module):
    """Channels 64-128-256-512-512 (bottleneck halved), 4 downs by 2x2 max-pool, 4 ups, 1x1 conv to 2 classes
    (milesial's default): a segmentation network trained with per-pixel cross-entropy (labels N x H x W)."""

    def __init__(self, in_channels=3, classes=2):
        super().__init__()
        self.inc = DoubleConv(in_channels, 64)
        self.down = nn.ModuleList([DoubleConv(64, 128), DoubleConv(128, 256), DoubleConv(256, 512),
                                   DoubleConv(512, 512)])
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ModuleList([Up(1024, 256), Up(512, 128), Up(256, 64), Up(128, 64)])
        self.outc = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.down:
            skips.append(down(self.pool(skips[-1])))
        x = skips.pop()
        for up in self.up:
            x = up(x, skips.pop())
        return self.outc(x)


class TinyNet(nn.Module):
    """A few of every common op kind, small enough for unit tests."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.conv2 = nn.Conv2d(8, 8, 1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.fc = nn.Linear(8, 5)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        y = nn.functional.relu6(self.dw(x))
        x = x + torch.sigmoid(self.conv2(y)) * y
        x = self.pool(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(self.drop(x))


class CausalSelfAttention(nn.Module):
    """GPT-2's attention as nanoGPT writes it: q, k, v from one Linear, heads split by view and transpose,
    softmax(q k^T / sqrt(head width) + causal mask) v, heads merged, output Linear. The mask is nn.Transformer's
    additive square subsequent mask (-inf above the diagonal) in a non-persistent buffer: export_params=False leaves
    parameters and persistent buffers out of the file, but a non-persistent buffer is exported as a Constant.
    sdpa = True (set on an instance; scripts/bench_pytorch.py does) computes the same attention with
    F.scaled_dot_product_attention(is_causal=True), as a PyTorch user would run it; the export keeps the default."""

    sdpa = False

    def __init__(self, d, heads, context):
        super().__init__()
        self.heads, self.scale = heads, 1.0 / math.sqrt(d // heads)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(context),
                             persistent=False)

    def forward(self, x):
        n, t, d = x.size()
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (y.view(n, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))  # (N, H, T, D)
        if self.sdpa:
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * self.scale + self.causal_mask[:t, :t]
            y = att.softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(n, t, d))


class GPT2Block(nn.Module):
    """Pre-LN: x + attn(ln_1(x)), then x + mlp(ln_2(x)), the MLP 4x wide with exact (erf) GELU."""

    def __init__(self, d, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, context)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """Token and position embeddings, pre-LN blocks, final LayerNorm, LM head tied to the token embedding
    (one graph input serves both). Token ids (N, T), T <= context -> next-token logits (N, T, vocab). No dropout."""

    def __init__(self, vocab=50257, context=1024, layers=12, heads=12, d=768):
        super().__init__()
        self.vocab_size = vocab
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.h = nn.ModuleList([GPT2Block(d, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class Bert(nn.Module):
    """BERT-like token classifier: LayerNorm(token + position embeddings) (no token types), post-LN
    nn.TransformerEncoderLayer blocks (nn.MultiheadAttention without a mask, exact GELU; dropout 0, which torch
    still exports as Dropout nodes of ratio 0), a Linear head. Token ids (N, T) -> logits (N, T, classes)."""

    def __init__(self, vocab=30522, context=512, layers=12, heads=12, d=768, ff=3072, classes=9):
        super().__init__()
        self.vocab_size = vocab
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(context, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", layer_norm_eps=1e-12,
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(d, classes)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.norm(self.word_embeddings(idx) + self.position_embeddings(pos))
        return self.classifier(self.encoder(x))


class BertInputsLayer(nn.Module):
    """A post-LN encoder layer as Hugging Face's BertLayer writes it: q, k, v Linears, softmax(q k^T / sqrt(head
    width) + mask) v with the additive mask computed from the attention mask input, output Linear, then
    LayerNorm(x + attention) and LayerNorm(x + MLP) (exact GELU)."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads, self.scale = heads, 1.0 / math.sqrt(d // heads)
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        self.ln_1 = nn.LayerNorm(d, eps=1e-12)
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))
        self.ln_2 = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x, additive_mask):
        n, t, d = x.size()
        q, k, v = (f(x).view(n, t, self.heads, d // self.heads).transpose(1, 2)
                   for f in (self.query, self.key, self.value))
        att = (q @ k.transpose(-2, -1)) * self.scale + additive_mask
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).contiguous().view(n, t, d)
        x = self.ln_1(x + self.out(y))
        return self.ln_2(x + self.mlp(x))


class BertInputs(nn.Module):
    """BERT with the integer inputs Hugging Face's BertModel takes: token ids, attention mask (1 = attend, 0 =
    padding; expanded to (N, 1, T, T) as an integer, then (1 - mask) * -10000 added to every head's scores), token
    types (a 2-row embedding) and position ids, all (N, T).
    Word + position + token-type embeddings, LayerNorm, post-LN layers (BertInputsLayer), a token-classification
    head. No dropout."""

    inputs = ("input", "attention_mask", "token_type_ids", "position_ids")

    def __init__(self, vocab=30522, context=512, layers=12, heads=12, d=768, ff=3072, classes=9):
        super().__init__()
        self.vocab_size = vocab
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(context, d)
        self.token_type_embeddings = nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList([BertInputsLayer(d, heads, ff) for _ in range(layers)])
        self.classifier = nn.Linear(d, classes)

    def forward(self, idx, attention_mask, token_type_ids, position_ids):
        x = self.norm(self.word_embeddings(idx) + self.position_embeddings(position_ids) +
                      self.token_type_embeddings(token_type_ids))
        n, t = idx.shape
        # Hugging Face's _expand_mask: the integer mask expanded to (N, 1, T, T) before its cast.
        additive = (1.0 - attention_mask[:, None, None, :].expand(n, 1, t, t).to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive)
        return self.classifier(x)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2 over the last axis) + eps) * weight, as LLaMA writes it (no mean subtracted, no bias)."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    """Multi-head attention with rotary position embeddings (cos and sin tables as non-persistent buffers, exported
    as constants) on q and k, a causal mask by masked_fill, no biases."""

    def __init__(self, d, heads, context, base=10000.0):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        inv_freq = 1.0 / base ** (torch.arange(0, self.hd, 2).float() / self.hd)
        freqs = torch.outer(torch.arange(context).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1), persistent=False)

    def forward(self, x):
        n, t, d = x.size()
        q, k, v = (p(x).view(n, t, self.heads, self.hd).transpose(1, 2) for p in (self.q_proj, self.k_proj,
                                                                                  self.v_proj))
        cos, sin = self.cos[:t], self.sin[:t]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        att = att.masked_fill(self.mask[:t, :t], float("-inf"))
        y = att.softmax(dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).contiguous().view(n, t, d))


class LlamaBlock(nn.Module):
    """Pre-RMSNorm: x + attn(norm(x)), then x + down(silu(gate(norm(x))) * up(norm(x))) (SwiGLU)."""

    def __init__(self, d, heads, context, ff):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = LlamaAttention(d, heads, context)
        self.post_attention_layernorm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    """A LLaMA-style decoder: token embedding, pre-RMSNorm blocks with rotary attention and SwiGLU, final RMSNorm,
    an untied LM head. Token ids (N, T), T <= context -> next-token logits (N, T, vocab). No dropout."""

    def __init__(self, vocab=32000, context=1024, layers=12, heads=12, d=768, ff=2048):
        super().__init__()
        self.vocab_size = vocab
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaBlock(d, heads, context, ff) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def without_stochastic_depth(module):
    """Stochastic depth off (p = 0 is the identity in training too; torch 1.13 cannot export its Bernoulli draw)."""
    for m in module.modules():
        if isinstance(m, torchvision.ops.StochasticDepth):
            m.p = 0.0
    return module


def buffers_as_constants(module):
    """Every buffer but BatchNorm's running statistics made non-persistent, so that export_params=False still writes
    its values (as Constants): swin's and maxvit's relative-position indices, which the model cannot run without."""
    for m in module.modules():
        for name, _ in m.named_buffers(recurse=False):
            if not name.startswith("running_") and name != "num_batches_tracked":
                m._non_persistent_buffers_set.add(name)
    return module


class SegmentationOut(nn.Module):
    """torchvision's segmentation models return {"out": logits}; the export needs the tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


class SwinBlockTiny(nn.Module):
    """torchvision's shifted-window attention at test size: 8x8 tokens of width 16, 4x4 windows shifted by 2, 2
    heads, a learned relative-position bias indexed by its relative_position_index buffer; then a Linear head
    over the mean token. Input (N, 8, 8, 16) channels last."""

    def __init__(self):
        super().__init__()
        from torchvision.models.swin_transformer import ShiftedWindowAttention
        self.norm = nn.LayerNorm(16)
        self.attn = ShiftedWindowAttention(16, [4, 4], [2, 2], 2)
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return self.head(x.mean(dim=(1, 2)))


def build(name):
    """Returns (module, input shape C,H,W, or T for the language models) for a model name."""
    tv = torchvision.models
    if name == "resnet50":
        return tv.resnet50(), (3, 224, 224)
    if name == "googlenet":
        return tv.googlenet(aux_logits=False, init_weights=False), (3, 224, 224)
    if name == "mobilenet_v2":
        return tv.mobilenet_v2(), (3, 224, 224)
    if name == "vgg16":
        return tv.vgg16(), (3, 224, 224)
    if name == "unet":
        return UNet(), (3, 416, 608)
    if name == "tiny":
        return TinyNet(), (3, 16, 16)
    # Transformers, exported on request only (not in models/: too big for the tests; see docs/models.md, "Models").
    if name == "vit_b_16":
        return tv.vit_b_16(), (3, 224, 224)
    if name == "swin_t":
        return buffers_as_constants(without_stochastic_depth(tv.swin_t())), (3, 224, 224)
    if name == "maxvit_t":
        return buffers_as_constants(without_stochastic_depth(tv.maxvit_t())), (3, 224, 224)
    if name == "swin_block_tiny":
        return buffers_as_constants(SwinBlockTiny()), (8, 8, 16)
    # Segmentation (models/segmentation/): MobileNetV3-Large backbones, 21 classes (Pascal VOC's), per-pixel
    # cross-entropy (--loss ce, classes on dim 1, labels N x H x W).
    if name == "lraspp_mobilenet_v3_large":
        return SegmentationOut(tv.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                          num_classes=21)), (3, 520, 520)
    if name == "deeplabv3_mobilenet_v3_large":
        return SegmentationOut(tv.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=21, aux_loss=False)), (3, 520, 520)
    if name == "convnext_tiny":
        return tv.convnext_tiny(stochastic_depth_prob=0.0), (3, 224, 224)
    # Further CNNs, on request (scripts/bench_floor.py --others checks their memory floors).
    if name in ("densenet121", "resnext50_32x4d", "mobilenet_v3_large"):
        return getattr(tv, name)(), (3, 224, 224)
    if name == "efficientnet_b0":
        return tv.efficientnet_b0(stochastic_depth_prob=0.0), (3, 224, 224)
    # Language models, on request (int64 token ids in; logits with the classes last out).
    if name == "gpt2":
        return GPT2(), (1024,)
    if name == "gpt2_tiny":
        return GPT2(vocab=97, context=64, layers=2, heads=2, d=32), (64,)
    if name == "bert":
        return Bert(), (512,)
    if name == "bert_tiny":
        return Bert(vocab=101, context=64, layers=2, heads=2, d=32, ff=128, classes=7), (64,)
    if name == "bert_inputs":
        return BertInputs(), (512,)
    if name == "bert_inputs_tiny":
        return BertInputs(vocab=101, context=64, layers=2, heads=2, d=32, ff=128, classes=7), (64,)
    if name == "llama":
        return Llama(), (1024,)
    if name == "llama_tiny":
        return Llama(vocab=97, context=64, layers=2, heads=2, d=32, ff=64), (64,)
    raise SystemExit(f"export_models.py: unknown model '{name}'")


ALL = ["resnet50", "googlenet", "mobilenet_v2", "vgg16", "unet", "tiny"]


def example_input(module, shape, batch=2):
    """A batch for the module: token ids below its vocabulary for the language models (and, for a model of several
    inputs, an attention mask and token types of the same shape), else normal floats."""
    vocab = getattr(module, "vocab_size", None)
    if not vocab:
        return torch.randn(batch, *shape)
    ids = torch.randint(0, vocab, (batch, *shape))
    if len(getattr(module, "inputs", ("input",))) == 1:
        return ids
    extra = (torch.ones_like(ids), torch.zeros_like(ids), torch.arange(shape[0]).expand(batch, -1))
    return (ids,) + extra[:len(module.inputs) - 1]


def export(module, chw, path, opset=13):
    module.train()
    x = example_input(module, chw)
    names = list(getattr(module, "inputs", ("input",)))
    axes = {name: {0: "batch"} for name in names + ["output"]}
    tmp = path + ".tmp"
    torch.onnx.export(module, x, tmp, training=torch.onnx.TrainingMode.TRAINING, opset_version=opset,
                      do_constant_folding=False, export_params=False, input_names=names,
                      output_names=["output"], dynamic_axes=axes)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    ap.add_argument("--opset", type=int, default=13, help="ONNX opset (monet reads 7-17)")
    ap.add_argument("names", nargs="*", default=ALL)
    args = ap.parse_args()
    torch.manual_seed(0)
    for name in args.names:
        module, chw = build(name)
        path = os.path.join(args.out, f"{name}.onnx")
        export(module, chw, path, args.opset)
        print(f"{path}: {os.path.getsize(path)} bytes, input {chw}")


if __name__ == "__main__":
    sys.exit(main())
