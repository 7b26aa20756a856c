"""`cmake --install build --component python --prefix P` (the package alone) gives a package /usr/bin/python3 imports with
PYTHONPATH=P/lib/python3/dist-packages (docs/python.md), away from the build tree."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import mixprec


def build_dir():
    # build/python/mixprec/__init__.py -> build
    candidate = pathlib.Path(mixprec.__file__).resolve().parents[2]
    if not (candidate / "CMakeCache.txt").exists():
        pytest.skip(f"mixprec was not imported from a build tree ({mixprec.__file__})")
    return candidate


def test_installed_package_imports_and_trains(tmp_path):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    prefix = tmp_path / "prefix"
    subprocess.run([cmake, "--install", str(build_dir()), "--component", "python", "--prefix", str(prefix)], check=True,
                   stdout=subprocess.DEVNULL)
    site = prefix / "lib" / "python3" / "dist-packages"
    assert (site / "mixprec" / "__init__.py").exists()
    script = (
        "import mixprec, mixprec.nn as nn\n"
        "from mixprec.amp import autocast, GradScaler\n"
        "assert mixprec.__file__.startswith(%r), mixprec.__file__\n"
        "model = nn.Linear(4, 2)\n"
        "opt = mixprec.optim.SGD(model.parameters(), lr=0.1)\n"
        "scaler = GradScaler()\n"
        "with autocast():\n"
        "    loss = nn.functional.mse_loss(model(mixprec.ones(3, 4)).float(), mixprec.zeros(3, 2))\n"
        "scaler.scale(loss).backward()\n"
        "scaler.step(opt)\n"
        "scaler.update()\n"
        "print('ok', loss.item())\n" % str(site))
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, check=True,
                         capture_output=True, text=True)
    assert out.stdout.startswith("ok ")
