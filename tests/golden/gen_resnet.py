#!/usr/bin/python3
"""gen_resnet.py: PyTorch reference values for tests/golden/resnet_golden_test.cpp.

Builds mixprec's nn::ResNet(in_channels=1, classes=3, blocks_per_stage=1, width=4) (models.h)
in PyTorch with torchvision's BasicBlock layout and names: conv1/bn1, then three stages of one
BasicBlock (conv3x3-bn-relu-conv3x3-bn, + shortcut, relu; a 1x1 conv + bn "downsample" where
the stride or width changes), global average pooling, fc. Batch norm in training mode (batch
statistics, running statistics updated with momentum 0.1). One forward / cross-entropy /
backward in float32 on a batch of 4 images of 1x8x8; everything the C++ test compares goes to
data/resnet_golden.safetensors.

Every parameter gets 0.1 * randn added after the default init (batch norm's weight 1 and
bias 0 would hide a dropped affine part).

Tensors (float32 unless noted): the parameters (torchvision names), x [4,1,8,8], target [4]
(int64), logits [4,3], loss [], grad.<param>, grad.x, and running.<bn>.running_mean /
running_var after the forward (num_batches_tracked is not compared).

Run with Debian's interpreter (it has torch): /usr/bin/python3 tests/golden/gen_resnet.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import record_forward_backward, write_golden  # noqa: E402

SEED = 0
BATCH, CHANNELS, SIZE, CLASSES, WIDTH = 4, 1, 8, 3, 4
PERTURB = 0.1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "resnet_golden.safetensors")


def conv3x3(i, o, stride):
    return nn.Conv2d(i, o, 3, stride, 1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, i, o, stride):
        super().__init__()
        self.conv1 = conv3x3(i, o, stride)
        self.bn1 = nn.BatchNorm2d(o)
        self.conv2 = conv3x3(o, o, 1)
        self.bn2 = nn.BatchNorm2d(o)
        self.downsample = None
        if stride != 1 or i != o:
            self.downsample = nn.Sequential(nn.Conv2d(i, o, 1, stride, 0, bias=False), nn.BatchNorm2d(o))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        w = WIDTH
        self.conv1 = conv3x3(CHANNELS, w, 1)
        self.bn1 = nn.BatchNorm2d(w)
        self.layer1 = nn.Sequential(BasicBlock(w, w, 1))
        self.layer2 = nn.Sequential(BasicBlock(w, 2 * w, 2))
        self.layer3 = nn.Sequential(BasicBlock(2 * w, 4 * w, 2))
        self.fc = nn.Linear(4 * w, CLASSES)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(x.mean(dim=(2, 3)))


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    model = ResNet()
    model.train()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(PERTURB * torch.randn_like(p))
    x = torch.randn(BATCH, CHANNELS, SIZE, SIZE, requires_grad=True)
    target = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    out, loss = record_forward_backward(model, x, target)
    out["grad.x"] = x.grad.detach().clone()
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            out["running." + name] = b.detach().clone()
    metadata = {
        "generator": "tests/golden/gen_resnet.py",
        "torch_version": torch.__version__,
        "seed": str(SEED),
        "model": "ResNet(in_channels=%d, classes=%d, blocks_per_stage=1, width=%d), torchvision BasicBlock names, "
                 "batch norm in training mode" % (CHANNELS, CLASSES, WIDTH),
        "init": "PyTorch default, then every parameter += %g * randn" % PERTURB,
        "loss": "cross_entropy, mean reduction",
        "num_threads": "1",
    }
    write_golden(OUT, out, metadata, loss.item())
    return 0


if __name__ == "__main__":
    sys.exit(main())
