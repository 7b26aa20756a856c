"""torch_models.py: the PyTorch twins of mixprec's benchmark models, shared by the peer scripts
(torch_step.py, torch_profile.py, tta_torch.py) so that each model is written once.

    from torch_models import make
    model, sample_shape = make("seed-cnn")   # a fresh model (seed torch first) and one sample's shape
    model, sample_shape = make("gpt", context=1024)   # a language model at another context

Names as mixprec's --model: seed-cnn (3x32x32), cnn (1x28x28), mlp, transformer, gpt-tiny, gpt.
Language models take [batch, *sample_shape] byte tokens; the others float images."""
import torch
import torch.nn as nn

NAMES = ("seed-cnn", "cnn", "mlp", "transformer", "gpt-tiny", "gpt")


def cnn(channels, side):
    """mixprec's seed CNN (3x32x32) and cnn (1x28x28): conv-relu-pool twice, fc 256, fc 10."""
    return nn.Sequential(nn.Conv2d(channels, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * (side // 4) ** 2, 256), nn.ReLU(), nn.Linear(256, 10))


class Transformer(nn.Module):
    """mixprec's TransformerClassifier (include/mixprec/nn/models.h): images [B, 1, 128, 256] read
    as 128 tokens of 256 features -> one post-norm encoder layer (GELU, no dropout) ->
    mean over the sequence -> Linear(256, 10)."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, activation="gelu",
                                                  batch_first=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc(self.encoder(x.flatten(1, 2)).mean(dim=1))


class GptBlock(nn.Module):
    """mixprec's GptBlock (models.h): pre-norm, causal self-attention, GELU MLP 4x."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """mixprec's Gpt (models.h): byte tokens, learned positions, weight-tied head."""

    def __init__(self, context, layers, d, heads, vocab=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.h = nn.ModuleList(GptBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1))

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x, self.mask[:t, :t])
        return self.ln_f(x) @ self.wte.weight.t()


def make(name, context=0):
    """A fresh model named as mixprec's --model, and the shape of one sample. `context` (0: the
    model's own, 128 for gpt-tiny and 256 for gpt) sets a language model's sequence length, as
    a mixprec model file's `embedding: {context: T}` does (bench/gpt_context.sh)."""
    if context and name not in ("gpt-tiny", "gpt"):
        raise ValueError(f"torch_models: a context applies to gpt-tiny and gpt, not '{name}'")
    if context < 0:
        raise ValueError(f"torch_models: context must be positive, got {context}")
    if name == "transformer":
        return Transformer(), (1, 128, 256)
    if name == "gpt-tiny":
        return Gpt(context or 128, 4, 128, 4), (context or 128,)
    if name == "gpt":
        return Gpt(context or 256, 6, 384, 6), (context or 256,)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                             nn.Linear(4096, 10)), (1, 28, 28)
    if name == "seed-cnn":
        return cnn(3, 32), (3, 32, 32)
    if name == "cnn":
        return cnn(1, 28), (1, 28, 28)
    raise ValueError(f"torch_models: unknown model '{name}' (expected one of {', '.join(NAMES)})")
