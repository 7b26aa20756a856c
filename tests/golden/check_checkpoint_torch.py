#!/usr/bin/python3
"""check_checkpoint_torch.py: a mixprec checkpoint is a PyTorch state_dict.

Loads a checkpoint with nothing but json + torch.frombuffer (Debian 12 has no safetensors
package; the layout is plain safetensors), builds the same CNN in PyTorch (tests/golden/torch_reference.py), loads the model tensors with load_state_dict(strict=True) and
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
import sys

import torch

from torch_reference import Cnn, read_safetensors, write_safetensors


def check(checkpoint, predictions):
    tensors, metadata = read_safetensors(checkpoint)
    assert metadata.get("format") == "mixprec-checkpoint", metadata.get("format")
    assert metadata.get("model_name") == "cnn", f"only the cnn is mirrored here, got {metadata.get('model_name')}"
    # The model's tensors are exactly those without the optimizer./master. prefixes.
    state = {k: v.float() for k, v in tensors.items() if not k.startswith(("optimizer.", "master."))}
    assert sorted(state) == sorted(json.loads(metadata["model_tensors"]))
    model = Cnn(1, 28, 28, 10)
    model.load_state_dict(state, strict=True)  # names and shapes must match PyTorch's exactly
    model.eval()
    pred, _ = read_safetensors(predictions)
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
    write_safetensors(path, {n: state[n] for n in names}, {
        "format": "mixprec-checkpoint", "version": "1", "model_name": "cnn", "precision": "fp32",
        "model_tensors": json.dumps(names), "scaler": "{}", "rng_state": "", "optimizer_steps": "0",
        "epoch": "0", "batch_in_epoch": "0", "global_step": "0",
        "config": json.dumps({"model": "cnn", "dataset": "synthetic", "seed": 0})})
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        sys.exit(make(sys.argv[2]))
    print(__doc__)
    sys.exit(2)
