"""torch_reference.py: what the PyTorch-side scripts share: the CNN as mixprec defines it
(nn::Cnn), and a plain safetensors reader and writer (json + struct + torch.frombuffer,
since Debian 12 has no safetensors package). Imported by gen_cnn.py, gen_transformer.py and
check_checkpoint_torch.py; run them with Debian's /usr/bin/python3 (it has torch).
"""
import json
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

# safetensors dtype codes <-> torch dtypes, with element sizes.
CODES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
         torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8"}
DTYPES = {code: dtype for dtype, code in CODES.items()}


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


def write_safetensors(path, tensors, metadata):
    """tensors: dict name -> CPU tensor; metadata: str -> str. Sorted names, 8-byte aligned
    data, written to a temp file, fsynced and renamed (as mixprec writes)."""
    header = {"__metadata__": metadata} if metadata else {}
    chunks, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        # Raw little-endian bytes; bf16 has no numpy type, so go through its int16 bits.
        data = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        assert len(data) == t.numel() * t.element_size()
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape),
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
    """Returns (tensors: name -> tensor, metadata: dict), checking that the tensors cover the
    data buffer exactly."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    body = raw[8 + n:]
    tensors, end = {}, 0
    for name, info in header.items():
        begin, stop = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        buf = bytearray(body[begin:stop])
        tensors[name] = (torch.frombuffer(buf, dtype=dtype).reshape(info["shape"]) if buf
                         else torch.empty(info["shape"], dtype=dtype))
        end = max(end, stop)
    assert end == len(body), f"{path}: data buffer is {len(body)} bytes, tensors cover {end}"
    return tensors, metadata


def write_and_verify(path, tensors, metadata):
    """write_safetensors, then read the file back and check every tensor and the metadata."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_safetensors(path, tensors, metadata)
    back, meta = read_safetensors(path)
    assert meta == metadata
    assert set(back) == set(tensors)
    for name, t in tensors.items():
        assert torch.equal(back[name], t), name


def write_golden(path, tensors, metadata, loss):
    """write_and_verify, then the line every generator prints: the file, its size and tensor
    count, the torch version and the loss the golden recorded."""
    write_and_verify(path, tensors, metadata)
    print("wrote %s (%d bytes, %d tensors), torch %s, loss %.6f"
          % (path, os.path.getsize(path), len(tensors), torch.__version__, loss))


def record_forward_backward(model, x, target, forward=None, input_name="x"):
    """One cross-entropy forward + backward. Returns (tensors, loss): the parameters before,
    the input, target, logits, loss and every parameter's gradient, named as the golden
    tests read them (name, input_name, "target", "logits", "loss", "grad.<name>"). forward:
    forward(model, x) -> logits when the model's own call is not the forward (default model(x))."""
    out = {name: p.detach().clone() for name, p in model.named_parameters()}
    out[input_name] = x.detach().clone()
    out["target"] = target
    logits = forward(model, x) if forward else model(x)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    out["logits"] = logits.detach().clone()
    out["loss"] = loss.detach().clone()
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone()
    return out, loss
