#!/usr/bin/python3
"""gen_text_classifier.py: PyTorch reference values for tests/golden/text_classifier_golden_test.cpp.

A text classifier over byte ids with its padding masked, as a mixprec model file with
`embedding: {dim: 16, context: 8, mask_padding: true}`, one `encoder: {heads: 2, ffn: 32,
dropout: 0}`, `global_avgpool` and `linear: {out: classes}` builds it:
  token embedding nn.Embedding(256, 16) + learned positions nn.Embedding(8, 16)
  -> nn.TransformerEncoderLayer(16, 2, 32, dropout=0, activation='gelu', batch_first=True)
     called with src_key_padding_mask = (ids == 0)
  -> the mean over each text's own positions (padding excluded) -> nn.Linear(16, 5).
Parameters are named as mixprec names them ("0.tokens.weight", "1.self_attn.in_proj_weight",
"3.weight", ...). One forward / cross-entropy / backward in float32 on 3 texts of 8, 5 and 2
bytes (the rest 0-padding); every parameter gets 0.1 * randn after PyTorch's default init, so
that a dropped bias or affine part cannot match. Written to
data/text_classifier_golden.safetensors (torch_reference.py's layout).

Tensors (float32 unless noted): the parameters; ids [3, 8] and target [3] (int64); logits
[3, 5]; loss []; grad.<param>.

Run with Debian's interpreter (it has torch): /usr/bin/python3 tests/golden/gen_text_classifier.py
"""
import os
import sys

import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the committed scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import record_forward_backward, write_golden  # noqa: E402

SEED = 0
CONTEXT, DIM, HEADS, FFN, CLASSES = 8, 16, 2, 32, 5
LENGTHS = [8, 5, 2]
PERTURB = 0.1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "text_classifier_golden.safetensors")


class Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(256, DIM)
        self.positions = nn.Embedding(CONTEXT, DIM)

    def forward(self, ids):
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))


class Pool(nn.Module):  # no parameters: its index is the model file's global_avgpool
    pass


def forward(model, ids):
    padding = ids == 0
    x = model[0](ids)
    x = model[1](x, src_key_padding_mask=padding)
    keep = (~padding).to(x.dtype).unsqueeze(-1)
    pooled = (x * keep).sum(dim=1) / keep.sum(dim=1)
    return model[3](pooled)


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    model = nn.Sequential(
        Embedding(),
        nn.TransformerEncoderLayer(DIM, HEADS, FFN, dropout=0.0, activation="gelu", batch_first=True),
        Pool(),
        nn.Linear(DIM, CLASSES))
    model.train()  # the autograd path (the fused fast path runs only without grad)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(PERTURB * torch.randn_like(p))
    ids = torch.zeros(len(LENGTHS), CONTEXT, dtype=torch.int64)
    for i, n in enumerate(LENGTHS):
        ids[i, :n] = torch.randint(1, 256, (n,))
    target = torch.randint(0, CLASSES, (len(LENGTHS),), dtype=torch.int64)

    out, loss = record_forward_backward(model, ids, target, forward=forward, input_name="ids")

    metadata = {
        "generator": "tests/golden/gen_text_classifier.py",
        "torch_version": torch.__version__,
        "seed": str(SEED),
        "model": "Embedding(256, %d) + positions(%d) -> TransformerEncoderLayer(%d, %d, %d, dropout=0, gelu, "
                 "batch_first) with src_key_padding_mask = ids == 0 -> mean over the unpadded positions -> "
                 "Linear(%d, %d)" % (DIM, CONTEXT, DIM, HEADS, FFN, DIM, CLASSES),
        "init": "PyTorch default, then every parameter += %g * randn" % PERTURB,
        "lengths": ",".join(map(str, LENGTHS)),
        "loss": "cross_entropy, mean reduction",
        "num_threads": "1",
    }
    write_golden(OUT, out, metadata, loss.item())
    return 0


if __name__ == "__main__":
    sys.exit(main())
