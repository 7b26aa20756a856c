"""The README's "From Python" loop runs as written, and learns."""
import os
import pathlib
import subprocess
import sys

import pytest

README = pathlib.Path(os.environ.get("MIXPREC_SOURCE_DIR", pathlib.Path(__file__).parents[2])) / "README.md"


def test_readme_python_loop_runs_and_learns():
    if not README.exists():
        pytest.skip(f"no README at {README}")
    section = README.read_text().split("## From Python", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loss, scale = (float(v) for v in out.stdout.split())
    assert loss < 0.1 and scale == 65536.0
