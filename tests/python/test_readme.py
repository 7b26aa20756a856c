"""The Python in the README's "From Python" section and in docs/python.md runs as written: the
README's loop learns, and every other ```python block (in order, one namespace per file, as a
reader would paste them) runs against the package as it is now."""
import os
import pathlib
import subprocess
import sys

import pytest

import mixprec

SOURCE = pathlib.Path(os.environ.get("MIXPREC_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
README = SOURCE / "README.md"
PYTHON_DOC = SOURCE / "docs" / "python.md"

# What a block takes from the reader and does not define: images (ToTensor's [N, 1, 28, 28]
# in [0, 1]), a normalised batch. And whole Fashion-MNIST runs (epochs=1 or 2 on 60,000
# images) cut to a few batches: the same keys and code path, minutes less on a loaded machine.
PRELUDE = """
import numpy as np
import mixprec
images = np.random.default_rng(0).random((4, 1, 28, 28), dtype=np.float32)
normalised_batch = mixprec.randn(4, 1, 28, 28)
_train = mixprec.train
def _short_train(config=None, **settings):
    settings.setdefault("train_subset", 256)
    settings.setdefault("test_subset", 128)
    settings.setdefault("self_check", False)
    return _train(config, **settings)
mixprec.train = _short_train
"""


def python_blocks(text):
    """The ```python blocks of a Markdown text, in order."""
    return [part.split("```", 1)[0] for part in text.split("```python\n")[1:]]


def from_python_section():
    if not README.exists():
        pytest.skip(f"no README at {README}")
    return README.read_text().split("## From Python", 1)[1].split("\n## ", 1)[0]


def test_readme_python_loop_runs_and_learns():
    code = python_blocks(from_python_section())[0]
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loss, scale = (float(v) for v in out.stdout.split())
    assert loss < 0.1 and scale == 65536.0


@pytest.mark.parametrize("source", ["README", "docs/python.md"])
def test_every_python_block_runs(source, tmp_path):
    if source == "README":
        blocks = python_blocks(from_python_section())[1:]  # the loop: the test above
    else:
        if not PYTHON_DOC.exists():
            pytest.skip(f"no {PYTHON_DOC}")
        blocks = python_blocks(PYTHON_DOC.read_text())
    assert blocks, f"no ```python block in {source}"
    if not pathlib.Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("the blocks train on Fashion-MNIST: dataset-fashion-mnist is not installed")
    # Each block in its own exec, so a failure names it; they share one namespace, in a
    # scratch directory (the blocks write runs/...).
    script = PRELUDE + "\nblocks = " + repr(blocks) + """
namespace = dict(globals())
for i, block in enumerate(blocks):
    try:
        exec(compile(block, f"block {i + 1}", "exec"), namespace)
    except Exception as e:
        raise SystemExit(f"block {i + 1} failed: {type(e).__name__}: {e}\\n{block}")
print(len(blocks), "blocks ran")
"""
    # The package this test imported, wherever it came from (a relative PYTHONPATH would not
    # hold in the scratch directory).
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(mixprec.__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{len(blocks)} blocks ran" in out.stdout
