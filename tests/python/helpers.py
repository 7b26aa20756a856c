"""Independent references for the Python tests: NumPy in float64, finite differences, and the
CLI to compare with."""
import numpy as np

import mixprec


def rng(seed=0):
    return np.random.default_rng(seed)


def as_f64(t):
    """A tensor's values as a float64 NumPy array (16-bit widened exactly)."""
    t = t.detach()
    if t.dtype == mixprec.bfloat16:
        t = t.float()
    return t.numpy().astype(np.float64)


def finite_difference_grad(f, x, eps=1e-6):
    """d sum(f(x) * w) / dx for a fixed random weighting w, central differences in float64;
    returns (grad, w) so the caller can back-propagate the same w."""
    w = rng(99).standard_normal(np.shape(f(x)))
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        plus = np.sum(f(x) * w)
        flat[i] = old - eps
        minus = np.sum(f(x) * w)
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * eps)
    return grad, w


def check_grad(mixprec_fn, numpy_fn, *inputs, rtol=1e-5, atol=1e-7):
    """Backward of mixprec_fn on float64 leaves against numpy_fn's finite differences, input by
    input."""
    leaves = [mixprec.tensor(x, dtype=mixprec.float64, requires_grad=True) for x in inputs]
    out = mixprec_fn(*leaves)
    for k, x in enumerate(inputs):
        def partial(v, k=k):
            args = [np.array(a, dtype=np.float64) for a in inputs]
            args[k] = v
            return numpy_fn(*args)
        expected, w = finite_difference_grad(partial, np.array(x, dtype=np.float64))
        if k == 0:
            out.backward(mixprec.tensor(w, dtype=mixprec.float64))
        np.testing.assert_allclose(leaves[k].grad.numpy(), expected, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k}")


def cli_path():
    """The `mixprec` CLI of the build the package comes from (build/mixprec beside
    build/python/mixprec); skips the test where only the package was built."""
    import pathlib

    import pytest

    candidate = pathlib.Path(mixprec.__file__).resolve().parents[2] / "mixprec"
    if not candidate.exists():
        pytest.skip(f"the CLI is not built ({candidate}): build the whole project")
    return candidate


def cli_env():
    """The environment to run the CLI in: 2 OpenMP threads, and under run_sanitized.py the
    CLI's own LeakSanitizer options (MIXPREC_CLI_LSAN_OPTIONS: its thread-local storage is
    scanned, which only the interpreter cannot afford)."""
    import os

    env = dict(os.environ, OMP_NUM_THREADS="2")
    if "MIXPREC_CLI_LSAN_OPTIONS" in env:
        env["LSAN_OPTIONS"] = env["MIXPREC_CLI_LSAN_OPTIONS"]
    return env
