#!/usr/bin/python3
"""gen_gpt.py: PyTorch reference values for tests/golden/gpt_golden_test.cpp.

Builds mixprec's nn::Gpt(context=8, layers=2, d_model=16, heads=2, vocab=256) (models.h) in
PyTorch: token and position embeddings wte/wpe, two pre-norm GPT-2 blocks (x + attn(ln_1(x)),
then x + mlp(ln_2(x)); attn is nn.MultiheadAttention(16, 2, batch_first=True) with a causal
mask, mlp = c_proj(GELU(c_fc(.))) 4x wide, exact erf GELU), ln_f, and logits = x wte^T (the
head tied to the token embedding). One forward / cross-entropy over every position /
backward in float32 on 3 sequences of 8 bytes; everything the C++ test compares goes to
data/gpt_golden.safetensors.

Every parameter gets 0.1 * randn added after PyTorch's default init, so that biases and the
layer norms' affine parts are not the 0 / 1 a forward that dropped them would still match.

Tensors in the file (float32 unless noted):
  wte.weight ... ln_f.bias        parameters, mixprec's (and this module's) names
  tokens [3,8], target [3,8]      int64: the input bytes and the next byte at each position
  logits [3,8,256], loss []       forward output and mean cross-entropy over the 24 positions
  grad.<param>                    gradient of the loss (wte's holds embedding + head parts)

Run with Debian's interpreter (it has torch): /usr/bin/python3 tests/golden/gen_gpt.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import write_golden  # noqa: E402

SEED = 0
BATCH, CONTEXT, LAYERS, D, HEADS, VOCAB = 3, 8, 2, 16, 2, 256
PERTURB = 0.1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpt_golden.safetensors")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(D, 4 * D)
        self.c_proj = nn.Linear(4 * D, D)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.ln_2 = nn.LayerNorm(D)
        self.mlp = Mlp()

    def forward(self, x):
        t = x.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # True: hidden
        a = self.ln_1(x)
        x = x + self.attn(a, a, a, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(CONTEXT, D)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    model = Gpt()
    model.train()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(PERTURB * torch.randn_like(p))
    seq = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1), dtype=torch.int64)
    tokens, target = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    out = {name: p.detach().clone() for name, p in model.named_parameters()}
    logits = model(tokens)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))
    loss.backward()
    out.update({"tokens": tokens, "target": target, "logits": logits.detach().clone(),
                "loss": loss.detach().clone()})
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone()
    metadata = {
        "generator": "tests/golden/gen_gpt.py",
        "torch_version": torch.__version__,
        "seed": str(SEED),
        "model": "Gpt(context=%d, layers=%d, d_model=%d, heads=%d, vocab=%d): pre-norm blocks, causal "
                 "MultiheadAttention, exact GELU, head tied to wte" % (CONTEXT, LAYERS, D, HEADS, VOCAB),
        "init": "PyTorch default, then every parameter += %g * randn" % PERTURB,
        "loss": "cross_entropy over every position, mean reduction",
        "num_threads": "1",
    }
    write_golden(OUT, out, metadata, loss.item())
    return 0


if __name__ == "__main__":
    sys.exit(main())
