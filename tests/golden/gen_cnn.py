#!/usr/bin/python3
"""gen_cnn.py: PyTorch reference values for tests/golden/cnn_golden_test.cpp.

Builds the same network as mixprec's nn::Cnn(1, 8, 8, 10) (include/mixprec/nn/models.h) with
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
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import Cnn, record_forward_backward, write_and_verify  # noqa: E402

SEED = 0
BATCH, CHANNELS, HEIGHT, WIDTH, CLASSES = 4, 1, 8, 8, 10
ADAM_LR, ADAM_STEPS = 1e-3, 5
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cnn_golden.safetensors")


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)

    model = Cnn(CHANNELS, HEIGHT, WIDTH, CLASSES)
    x = torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)
    target = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    out, loss = record_forward_backward(model, x, target)

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
    write_and_verify(OUT, out, metadata)
    print("wrote %s (%d bytes, %d tensors), torch %s, losses %s"
          % (OUT, os.path.getsize(OUT), len(out), torch.__version__,
             ", ".join("%.6f" % v for v in losses)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
