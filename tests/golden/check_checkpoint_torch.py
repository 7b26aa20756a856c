#!/usr/bin/python3
"""check_checkpoint_torch.py: a mixprec checkpoint is a PyTorch state_dict.

Loads a checkpoint with nothing but json + torch.frombuffer (Debian 12 has no safetensors
package; the layout is plain safetensors), builds the same CNN in PyTorch (the definition
is copied from gen_cnn.py), loads the model tensors with load_state_dict(strict=True) and
compares its logits with the ones mixprec computed on the same input batch
(`mixprec eval --checkpoint C --precision fp32 --save-predictions P`).

  check_checkpoint_torch.py check CHECKPOINT PREDICTIONS
      exit 0 when logits agree (fp32: |torch - mixprec| <= 1e-4 + 1e-4 |torch|) and the
      predicted classes are the same; 1 otherwise, with the worst element.
  check_checkpoint_torch.py make CHECKPOINT
      writes a mixprec checkpoint of a freshly initialised PyTorch Cnn(1, 28, 28, 10) (for
      when `mixprec train` cannot save one yet): the other direction of the same contract.

Run with Debian's interpreter (it has torch): /usr/bin/python3.
"""
import json
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}


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


def load(path):
    """Returns (tensors: name -> tensor, metadata: dict), checking the layout as it goes."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors, end = {}, 0
    for name, info in header.items():
        begin, stop = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:stop]), dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"])
        end = max(end, stop)
    assert end == len(body), f"{path}: data buffer is {len(body)} bytes, tensors cover {end}"
    return tensors, metadata


def check(checkpoint, predictions):
    tensors, metadata = load(checkpoint)
    assert metadata.get("format") == "mixprec-checkpoint", metadata.get("format")
    assert metadata.get("model_name") == "cnn", f"only the cnn is mirrored here, got {metadata.get('model_name')}"
    # The model's tensors are exactly those without the optimizer./master. prefixes.
    state = {k: v.float() for k, v in tensors.items() if not k.startswith(("optimizer.", "master."))}
    assert sorted(state) == sorted(json.loads(metadata["model_tensors"]))
    model = Cnn(1, 28, 28, 10)
    model.load_state_dict(state, strict=True)  # names and shapes must match PyTorch's exactly
    model.eval()
    pred, _ = load(predictions)
    with torch.no_grad():
        logits = model(pred["images"].float())
    ours = pred["logits"].float()
    err = (logits - ours).abs()
    # fp32 on both sides; the convolutions sum 288 / 3136 products in different orders.
    limit = 1e-4 + 1e-4 * logits.abs()
    worst = int(torch.argmax(err - limit))
    print(f"{logits.shape[0]} images: max |torch - mixprec| = {err.max().item():.3g} "
          f"(nearest the tolerance at flat index {worst}: torch {logits.flatten()[worst].item():.6g}, "
          f"mixprec {ours.flatten()[worst].item():.6g})")
    same_class = torch.equal(logits.argmax(1), ours.argmax(1))
    if not bool((err <= limit).all()) or not same_class:
        print("FAIL: logits differ" + ("" if same_class else " and so do predicted classes"))
        return 1
    print("ok: PyTorch loads the checkpoint and predicts the same")
    return 0


def make(path):
    torch.manual_seed(0)
    model = Cnn(1, 28, 28, 10)
    names = [n for n, _ in model.named_parameters()]
    state = model.state_dict()
    header, blobs, off = {}, [], 0
    for name in sorted(names):
        raw = state[name].contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(state[name].shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {
        "format": "mixprec-checkpoint", "version": "1", "model_name": "cnn", "precision": "fp32",
        "model_tensors": json.dumps(names), "scaler": "{}", "rng_state": "", "optimizer_steps": "0",
        "epoch": "0", "batch_in_epoch": "0", "global_step": "0",
        "config": json.dumps({"model": "cnn", "dataset": "synthetic", "seed": 0})}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        sys.exit(make(sys.argv[2]))
    print(__doc__)
    sys.exit(2)
