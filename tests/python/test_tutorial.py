"""examples/python/fashion_mnist_cnn.py, the tutorial loop written as for PyTorch with only its
imports changed (autocast bf16, GradScaler, unscale_ + clip_grad_norm_, PrecisionDebugger),
run whole: 2 epochs on Fashion-MNIST must reach the CLI's accuracy for the same model, >= 89%
(issue 32). About 15 s of training on 2 cores (6-7 s an epoch at ~9,000 images/s)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

import mixprec

ROOT = pathlib.Path(__file__).resolve().parents[2]
FASHION = pathlib.Path(mixprec.data.DEFAULT_FASHION_MNIST)


def test_tutorial_reaches_the_clis_accuracy_in_two_epochs():
    if not (FASHION / "train-images-idx3-ubyte.gz").exists():
        pytest.fail(f"{FASHION} is missing: scripts/setup installs dataset-fashion-mnist")
    out = subprocess.run([sys.executable, str(ROOT / "examples/python/fashion_mnist_cnn.py"), "--epochs", "2"],
                         env=dict(os.environ), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    accuracies = [float(a) for a in re.findall(r"epoch \d+: test accuracy ([0-9.]+)%", out.stdout)]
    assert len(accuracies) == 2, out.stdout[-2000:]
    assert accuracies[-1] >= 89.0, out.stdout[-2000:]
    # The PrecisionDebugger's parameters by dtype (the CNN's 8, f32 masters under autocast), and
    # loss and scale every 100 batches, as the tutorial prints them.
    assert "parameters by dtype: {'float32': 8}" in out.stdout, out.stdout[:2000]
    assert re.search(r"epoch 1 step  400  loss [0-9.]+  scale \d+", out.stdout), out.stdout[-2000:]
