#!/usr/bin/python3
"""gen_transformer.py: PyTorch reference values for tests/golden/transformer_golden_test.cpp.

Builds the same network as mixprec's nn::TransformerClassifier(seq=6, features=16, classes=5,
d_model=16, heads=2, ffn=32) (include/mixprec/nn/models.h): one
nn.TransformerEncoderLayer(16, 2, 32, dropout=0, activation='gelu', batch_first=True)
(post-norm), mean over the sequence, Linear(16, 5). Runs one forward / cross-entropy /
backward in float32 on a batch of 3 and writes everything the C++ test compares into
data/transformer_golden.safetensors (torch_reference.py writes the safetensors layout by hand).

PyTorch initialises in_proj_bias, out_proj.bias and the LayerNorm bias to 0 and the LayerNorm
weight to 1; a forward that dropped a bias or a norm's affine part would still match those.
So every parameter gets 0.1 * randn added after the default init (documented in metadata).

Tensors in the file (all float32 unless noted):
  encoder.self_attn.in_proj_weight ... fc.bias   parameters, mixprec names (PyTorch's own
                                                 names with the submodule prefix)
  x [3,6,16], target [3] (int64)                 the batch
  logits [3,5], loss []                          forward output and mean cross-entropy
  grad.<param>                                   gradient of loss w.r.t. each parameter
  grad.x [3,6,16]                                gradient of loss w.r.t. the input

Run with Debian's interpreter (it has torch): /usr/bin/python3 tests/golden/gen_transformer.py
"""
import os
import sys

import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the committed scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import record_forward_backward, write_golden  # noqa: E402

SEED = 0
BATCH, SEQ, D_MODEL, HEADS, FFN, CLASSES = 3, 6, 16, 2, 32, 5
PERTURB = 0.1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "transformer_golden.safetensors")


class TransformerClassifier(nn.Module):
    """encoder layer (post-norm, GELU, no dropout) -> mean over the sequence -> fc."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.0, activation="gelu",
                                                  batch_first=True)
        self.fc = nn.Linear(D_MODEL, CLASSES)

    def forward(self, x):
        return self.fc(self.encoder(x).mean(dim=1))


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)

    model = TransformerClassifier()
    model.train()  # the autograd path (the fused fast path runs only without grad)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(PERTURB * torch.randn_like(p))
    x = torch.randn(BATCH, SEQ, D_MODEL, requires_grad=True)
    target = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    out, loss = record_forward_backward(model, x, target)
    out["grad.x"] = x.grad.detach().clone()

    metadata = {
        "generator": "tests/golden/gen_transformer.py",
        "torch_version": torch.__version__,
        "seed": str(SEED),
        "model": "TransformerEncoderLayer(d_model=%d, nhead=%d, dim_feedforward=%d, dropout=0, "
                 "activation='gelu', batch_first=True, norm_first=False) -> mean(dim=1) -> Linear(%d, %d)"
                 % (D_MODEL, HEADS, FFN, D_MODEL, CLASSES),
        "init": "PyTorch default, then every parameter += %g * randn" % PERTURB,
        "batch": str(BATCH),
        "seq": str(SEQ),
        "loss": "cross_entropy, mean reduction",
        "num_threads": "1",
    }
    write_golden(OUT, out, metadata, loss.item())
    return 0


if __name__ == "__main__":
    sys.exit(main())
