"""F.interpolate and nn.Upsample in mode 'nearest' (any size or factor, PyTorch 1.13's index
rule) and 'bilinear' (align_corners False and True, size or scale_factor,
recompute_scale_factor): against float64 loops written here from PyTorch's definitions,
finite-difference gradients, and PyTorch 1.13 side by side (skipped without torch)."""
import math

import numpy as np
import pytest

import mixprec
import mixprec.nn as nn
import mixprec.nn.functional as F
from helpers import check_grad, rng


# ---- references -----------------------------------------------------------------------------

def out_sizes(shape, size, scale_factor):
    if size is not None:
        return (size, size) if isinstance(size, int) else tuple(size)
    f = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor, scale_factor)
    return tuple(int(math.floor(n * s)) for n, s in zip(shape[2:], f))


def given_scales(size, scale_factor, recompute):
    if size is not None or recompute:
        return (None, None)
    return tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor, scale_factor)


def nearest_ref(x, size=None, scale_factor=None, recompute=None):
    """out[i, j] = x[src(i), src(j)], src(d) = min(floor(d s), in - 1) with s = 1 / the given
    scale factor, else in / out, the product in float32 (PyTorch 1.13's CPU nearest_idx)."""
    oh, ow = out_sizes(x.shape, size, scale_factor)
    scales = given_scales(size, scale_factor, recompute)

    def src(d, n_in, n_out, scale):
        if n_out == n_in:
            return d
        if n_out == 2 * n_in:
            return d // 2
        s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
        return min(int(math.floor(np.float32(d) * s)), n_in - 1)
    rows = [src(i, x.shape[2], oh, scales[0]) for i in range(oh)]
    cols = [src(j, x.shape[3], ow, scales[1]) for j in range(ow)]
    return x[:, :, rows][:, :, :, cols]


def bilinear_ref(x, size=None, scale_factor=None, align_corners=False, recompute=None):
    """Each output pixel from its source point (y, x): align_corners maps the corner pixels'
    centres onto each other (src = d (in - 1) / (out - 1)), else the pixels' areas
    (src = (d + 0.5) / scale - 0.5, clamped at 0; scale the given factor, else out / in); the
    value is the bilinear blend of the 4 pixels around it (the last row / column repeated)."""
    oh, ow = out_sizes(x.shape, size, scale_factor)
    scales = given_scales(size, scale_factor, recompute)
    h, w = x.shape[2:]
    out = np.zeros(x.shape[:2] + (oh, ow))

    def source(d, n_in, n_out, scale):
        if n_in == n_out:
            return float(d)
        if align_corners:
            return d * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        ratio = 1.0 / scale if scale else n_in / n_out
        return max((d + 0.5) * ratio - 0.5, 0.0)
    for i in range(oh):
        sy = source(i, h, oh, scales[0])
        y0 = int(math.floor(sy))
        y1, ly = min(y0 + 1, h - 1), sy - y0
        for j in range(ow):
            sx = source(j, w, ow, scales[1])
            x0 = int(math.floor(sx))
            x1, lx = min(x0 + 1, w - 1), sx - x0
            out[:, :, i, j] = ((1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1])
                               + ly * ((1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]))
    return out


def f64(a, grad=False):
    return mixprec.tensor(np.asarray(a, dtype=np.float64), dtype=mixprec.float64, requires_grad=grad)


NEAREST_CASES = [  # (input H, W, size, scale_factor, recompute_scale_factor)
    (3, 4, None, 2, None), (3, 4, (6, 12), None, None), (5, 3, (7, 4), None, None), (4, 6, (3, 4), None, None),
    (4, 5, None, 1.5, None), (5, 4, None, (0.7, 2.5), None), (3, 7, None, 1.7, True), (2, 3, 5, None, None),
    (7, 9, None, 0.5, None), (6, 5, (6, 11), None, None),
    # where float32's dst * s floors differently from the exact product (PyTorch's float32)
    (3, 2, (123, 82), None, None), (16, 20, None, 2.6, None),
]


@pytest.mark.parametrize("h, w, size, scale, recompute", NEAREST_CASES)
def test_nearest_against_the_index_rule(h, w, size, scale, recompute):
    x = rng(1).standard_normal((2, 3, h, w))
    got = F.interpolate(f64(x), size=size, scale_factor=scale, recompute_scale_factor=recompute)
    want = nearest_ref(x, size, scale, recompute)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    check_grad(lambda t: F.interpolate(t, size=size, scale_factor=scale, recompute_scale_factor=recompute),
               lambda a: nearest_ref(a, size, scale, recompute), x[:1, :2])


BILINEAR_CASES = [  # (input H, W, size, scale_factor, recompute_scale_factor)
    (3, 4, None, 2, None), (4, 4, (7, 9), None, None), (5, 6, (3, 4), None, None), (4, 5, None, 1.5, None),
    (5, 4, None, (0.6, 2.5), None), (3, 7, None, 1.7, True), (2, 3, (1, 5), None, None), (6, 5, (6, 8), None, None),
    (1, 3, (4, 1), None, None),
]


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("h, w, size, scale, recompute", BILINEAR_CASES)
def test_bilinear_against_numpy(h, w, size, scale, recompute, align_corners):
    x = rng(2).standard_normal((2, 3, h, w))
    got = F.interpolate(f64(x), size=size, scale_factor=scale, mode="bilinear", align_corners=align_corners,
                        recompute_scale_factor=recompute)
    want = bilinear_ref(x, size, scale, align_corners, recompute)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    check_grad(lambda t: F.interpolate(t, size=size, scale_factor=scale, mode="bilinear",
                                       align_corners=align_corners, recompute_scale_factor=recompute),
               lambda a: bilinear_ref(a, size, scale, align_corners, recompute), x[:1, :2])


def test_upsample_is_interpolate():
    x = f64(rng(3).standard_normal((1, 2, 3, 4)))
    for kwargs in (dict(scale_factor=2), dict(size=(5, 7), mode="bilinear"),
                   dict(scale_factor=(1.5, 2.0), mode="bilinear", align_corners=True),
                   dict(scale_factor=1.7, recompute_scale_factor=True)):
        np.testing.assert_array_equal(nn.Upsample(**kwargs)(x).numpy(), F.interpolate(x, **kwargs).numpy())


def test_bad_arguments_are_torch_like_errors():
    x = mixprec.zeros(1, 1, 3, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(3, 4, 5))
    with pytest.raises(RuntimeError, match=r"output sizes should be greater than 0, but got input \(H: 3, W: 4\) "
                                           r"output \(H: 0, W: 0\)"):
        F.interpolate(x, scale_factor=0.1)
    with pytest.raises(NotImplementedError, match="mode 'nearest' or 'bilinear'"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4D input"):
        F.interpolate(mixprec.zeros(1, 3, 4), scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful with an explicit size"):
        F.interpolate(x, size=4, recompute_scale_factor=True)


# ---- PyTorch 1.13 side by side ------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


SIDE_BY_SIDE = (
    [dict(mode="nearest", size=size, scale_factor=scale, recompute_scale_factor=rec, shape=(2, 3, h, w))
     for h, w, size, scale, rec in NEAREST_CASES]
    + [dict(mode="bilinear", align_corners=ac, size=size, scale_factor=scale, recompute_scale_factor=rec,
            shape=(2, 3, h, w)) for h, w, size, scale, rec in BILINEAR_CASES for ac in (False, True)]
    + [dict(mode="nearest", size=(n, m), shape=(1, 2, h, w)) for h, w in ((7, 3), (13, 9), (10, 17))
       for n in (3, 5, 11, 16, 29) for m in (2, 6, 13, 31)]
    + [dict(mode="nearest", scale_factor=s, shape=(1, 2, 7, 10)) for s in (0.3, 0.75, 1.3, 1.9, 2.2, 3.0, 3.7)]
    + [dict(mode="bilinear", scale_factor=s, align_corners=ac, shape=(1, 2, 7, 10))
       for s in (0.3, 0.75, 1.3, 2.2, 3.7) for ac in (False, True)]
)


@pytest.mark.parametrize("case", SIDE_BY_SIDE, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_matches_torch(case):
    torch = _torch()
    case = dict(case)
    shape = case.pop("shape")
    x = rng(4).standard_normal(shape).astype(np.float32)
    xm, xt = mixprec.tensor(x, requires_grad=True), torch.from_numpy(x.copy()).requires_grad_(True)
    ym, yt = F.interpolate(xm, **case), torch.nn.functional.interpolate(xt, **case)
    assert tuple(ym.shape) == tuple(yt.shape)
    ours = torch.from_numpy(ym.detach().numpy().copy())
    if case["mode"] == "nearest":
        assert torch.equal(ours, yt.detach())  # the same source pixels, copied
    torch.testing.assert_close(ours, yt.detach())
    g = rng(5).standard_normal(tuple(yt.shape)).astype(np.float32)
    ym.backward(mixprec.tensor(g))
    yt.backward(torch.from_numpy(g))
    ours_grad = torch.from_numpy(xm.grad.numpy().copy())
    try:
        torch.testing.assert_close(ours_grad, xt.grad)
    except AssertionError:
        # An input pixel copied to many outputs (3 -> 123 rows, 2 -> 82 columns: 1681 copies)
        # sums that many gradients in float32, each library in its own order: then mixprec's
        # sum must be as close to the float64 sum as PyTorch's is.
        x64 = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
        torch.nn.functional.interpolate(x64, **case).backward(torch.from_numpy(g.astype(np.float64)))
        err_ours = (ours_grad.double() - x64.grad).abs().max().item()
        err_torch = (xt.grad.double() - x64.grad).abs().max().item()
        assert err_ours <= 2 * err_torch, (err_ours, err_torch)


def test_upsample_layer_matches_torch():
    torch = _torch()
    x = rng(6).standard_normal((1, 2, 5, 3)).astype(np.float32)
    for kwargs in (dict(scale_factor=2, mode="bilinear"), dict(size=(4, 7)), dict(scale_factor=(1.5, 2), mode="bilinear",
                                                                                  align_corners=True)):
        ours, theirs = nn.Upsample(**kwargs), torch.nn.Upsample(**kwargs)
        assert repr(ours) == repr(theirs)
        torch.testing.assert_close(torch.from_numpy(ours(mixprec.tensor(x)).numpy().copy()),
                                   theirs(torch.from_numpy(x)))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_bf16_and_autocast_dtypes_match_torch(mode):
    torch = _torch()
    x = rng(7).standard_normal((1, 2, 5, 6)).astype(np.float32)
    for autocast in (False, True):
        for dt, tdt in ((mixprec.float32, torch.float32), (mixprec.bfloat16, torch.bfloat16)):
            xm, xt = mixprec.tensor(x).to(dt), torch.from_numpy(x).to(tdt)
            with mixprec.autocast(device_type="cpu", dtype=mixprec.bfloat16, enabled=autocast), \
                    torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                ym = F.interpolate(xm, scale_factor=1.5, mode=mode)
                yt = torch.nn.functional.interpolate(xt, scale_factor=1.5, mode=mode)
            assert str(ym.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1]
            ours = torch.from_numpy(ym.float().numpy().copy()).double()
            # The exact result on the input's (bf16-rounded) values: mixprec's is it rounded
            # once (float32 taps and sums, like PyTorch's float32 kernel); PyTorch 1.13's bf16
            # bilinear kernel rounds its weights and partial sums to bf16 (about 7x the error
            # here), so against it only its own error is asked.
            exact = torch.nn.functional.interpolate(xt.double(), scale_factor=1.5, mode=mode)
            if dt == mixprec.bfloat16:
                torch.testing.assert_close(ours, exact, rtol=2 ** -8, atol=1e-6)
                torch.testing.assert_close(ours, yt.double(), rtol=0, atol=3e-2)
            else:
                torch.testing.assert_close(ours.float(), yt)
