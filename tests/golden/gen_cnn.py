#!/usr/bin/python3
"""gen_cnn.py: PyTorch reference values for tests/golden/cnn_golden_test.cpp.

Builds the same network as mixprec's nn::Cnn(1, 8, 8, 10) (include/mixprec/models.h) with
PyTorch's default initialisation, runs one forward/cross-entropy/backward on a batch of 4
and then 5 Adam steps on that batch, and writes everything the C++ test compares into
data/cnn_golden.safetensors. The file is written by hand (json + struct) because Debian 12
has no safetensors package; the layout is the one mixprec's reader accepts: u64 LE header
length, JSON header padded with spaces to a multiple of 8, tensors sorted by name.

Tensors in the file (all float32 unless noted):
  conv1.weight ... fc2.bias          initial parameters, PyTorch names
  x [4,1,8,8], target [4] (int64)    the batch
  logits [4,10], loss []             forward output and mean cross-entropy
  grad.<param>                        gradient of loss w.r.t. each parameter
  adam_losses [5]                     loss before each of 5 Adam steps (lr 1e-3, defaults);
                                      adam_losses[0] == loss
  final.<param>                       parameters after the 5 steps

Run with Debian's interpreter (it has torch): /usr/bin/python3 tests/golden/gen_cnn.py
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 0
BATCH, CHANNELS, HEIGHT, WIDTH, CLASSES = 4, 1, 8, 8, 10
ADAM_LR, ADAM_STEPS = 1e-3, 5
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cnn_golden.safetensors")


class Cnn(nn.Module):
    """conv(C->32,3x3,p1) ReLU pool2 conv(32->64,3x3,p1) ReLU pool2 flatten fc1(->256) ReLU fc2."""

    def __init__(self, in_channels, height, width, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * (height // 4) * (width // 4), 256)
        self.fc2 = nn.Linear(256, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


DTYPES = {torch.float32: ("F32", 4), torch.int64: ("I64", 8)}


def write_safetensors(path, tensors, metadata):
    """tensors: dict name -> contiguous CPU tensor (float32 or int64); metadata: str -> str."""
    header = {"__metadata__": metadata} if metadata else {}
    chunks, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        code, size = DTYPES[t.dtype]
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
        assert len(data) == t.numel() * size
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_safetensors(path):
    """Minimal reader used to check the file just written round-trips."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dtype = {"F32": torch.float32, "I64": torch.int64}[e["dtype"]]
        buf = bytearray(raw[8 + n + b : 8 + n + end])
        if buf:
            out[name] = torch.frombuffer(buf, dtype=dtype).reshape(e["shape"])
        else:
            out[name] = torch.empty(e["shape"], dtype=dtype)
    return out, meta


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)

    model = Cnn(CHANNELS, HEIGHT, WIDTH, CLASSES)
    x = torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)
    target = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    out = {name: p.detach().clone() for name, p in model.named_parameters()}
    out["x"] = x
    out["target"] = target

    logits = model(x)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    out["logits"] = logits.detach().clone()
    out["loss"] = loss.detach().clone()
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone()

    # Adam from the initial parameters; each step recomputes the loss on the same batch.
    opt = torch.optim.Adam(model.parameters(), lr=ADAM_LR, foreach=False)
    losses = []
    for _ in range(ADAM_STEPS):
        opt.zero_grad(set_to_none=True)
        step_loss = F.cross_entropy(model(x), target)
        step_loss.backward()
        opt.step()
        losses.append(step_loss.item())
    out["adam_losses"] = torch.tensor(losses, dtype=torch.float32)
    for name, p in model.named_parameters():
        out["final." + name] = p.detach().clone()
    assert losses[0] == loss.item()

    metadata = {
        "generator": "tests/golden/gen_cnn.py",
        "torch_version": torch.__version__,
        "seed": str(SEED),
        "model": "Cnn(in_channels=%d, height=%d, width=%d, classes=%d)"
                 % (CHANNELS, HEIGHT, WIDTH, CLASSES),
        "batch": str(BATCH),
        "loss": "cross_entropy, mean reduction",
        "optimizer": "Adam(lr=%g, betas=(0.9, 0.999), eps=1e-08, weight_decay=0, foreach=False)"
                     % ADAM_LR,
        "adam_losses": "loss before each of %d steps on the same batch" % ADAM_STEPS,
        "num_threads": "1",
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, out, metadata)

    back, meta = read_safetensors(OUT)
    assert meta == metadata
    assert set(back) == set(out)
    for name, t in out.items():
        assert torch.equal(back[name], t), name
    print("wrote %s (%d bytes, %d tensors), torch %s, losses %s"
          % (OUT, os.path.getsize(OUT), len(out), torch.__version__,
             ", ".join("%.6f" % v for v in losses)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
