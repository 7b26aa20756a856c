"""mixprec.amp: autocast regions and the GradScaler against PyTorch's documented rules."""
import threading

import numpy as np
import pytest

import mixprec
import mixprec.nn.functional as F
from mixprec.amp import GradScaler, autocast
from helpers import as_f64, rng


def bf16_round(x):
    """float64 -> nearest-even bfloat16, as float64 (via float32, exact for these inputs)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def test_autocast_output_dtypes_follow_the_policy():
    x, w = mixprec.randn(4, 8), mixprec.randn(3, 8, requires_grad=True)
    with autocast("cpu", dtype=mixprec.bfloat16):
        assert mixprec.amp.is_autocast_enabled()
        y = F.linear(x, w)
        assert y.dtype == mixprec.bfloat16           # lower-precision op
        assert y.relu().dtype == mixprec.bfloat16    # runs in its input's dtype
        assert F.softmax(y, dim=1).dtype == mixprec.float32  # precision-sensitive: f32
        assert F.cross_entropy(y, mixprec.tensor([0, 1, 2, 0])).dtype == mixprec.float32
    assert not mixprec.amp.is_autocast_enabled()
    assert F.linear(x, w).dtype == mixprec.float32


def test_autocast_linear_rounds_inputs_to_bfloat16():
    g = rng(1)
    x = g.standard_normal((5, 16)).astype(np.float32)
    w = g.standard_normal((4, 16)).astype(np.float32)
    with autocast():
        y = F.linear(mixprec.tensor(x), mixprec.tensor(w))
    assert y.dtype == mixprec.bfloat16
    exact = bf16_round(x) @ bf16_round(w).T   # bf16 inputs, wide accumulation
    # one rounding of the output to bf16 (8 significant bits: relative error <= 2^-8), plus
    # the f32 accumulation's error
    np.testing.assert_allclose(as_f64(y), exact, rtol=2 ** -8, atol=1e-5)
    # float64 tensors are not autocast (as PyTorch: only float32 is eligible)
    with autocast():
        assert F.linear(mixprec.tensor(x.astype(np.float64)), mixprec.tensor(w.astype(np.float64))).dtype == mixprec.float64


def test_autocast_nests_disables_and_decorates():
    x, w = mixprec.randn(2, 4), mixprec.randn(3, 4)
    with autocast(dtype=mixprec.bfloat16):
        with autocast(enabled=False):
            assert F.linear(x, w).dtype == mixprec.float32
        with autocast(dtype=mixprec.float16):
            assert F.linear(x, w).dtype == mixprec.float16
        assert F.linear(x, w).dtype == mixprec.bfloat16

    @autocast()
    def forward(a):
        return F.linear(a, w)
    assert forward(x).dtype == mixprec.bfloat16
    assert F.linear(x, w).dtype == mixprec.float32


def test_autocast_is_thread_local():
    seen = []
    with autocast():
        t = threading.Thread(target=lambda: seen.append(mixprec.amp.is_autocast_enabled()))
        t.start()
        t.join()
    assert seen == [False]


def test_one_autocast_object_serves_two_threads_at_once():
    shared = autocast()
    entered, leave, left = threading.Event(), threading.Event(), threading.Event()

    def other():
        with shared:
            entered.set()
            assert leave.wait(60)
        left.set()

    t = threading.Thread(target=other)
    with shared:
        t.start()
        assert entered.wait(60)
        leave.set()   # the other thread leaves its region while ours is open
        assert left.wait(60)
        assert mixprec.amp.is_autocast_enabled()  # ours is untouched
    t.join()
    assert not mixprec.amp.is_autocast_enabled()


def test_autocast_cuda_says_what_to_write():
    with pytest.raises(RuntimeError, match='device_type="cpu"'):
        autocast("cuda")
    with pytest.raises(ValueError, match="bfloat16 or mixprec.float16"):
        with autocast(dtype=mixprec.float32):
            pass


def run_schedule(scaler, factors, lr=0.25):
    """One parameter p, loss = p * factor; SGD(lr). Returns (scale, p) after each update."""
    p = mixprec.nn.Parameter(mixprec.tensor([1.0]))
    opt = mixprec.optim.SGD([p], lr=lr)
    trace = []
    for factor in factors:
        opt.zero_grad(set_to_none=True)
        scaler.scale((p * factor).sum()).backward()
        scaler.step(opt)
        scaler.update()
        trace.append((scaler.get_scale(), p.item()))
    return trace


def test_grad_scaler_trajectory_over_inf_and_nan():
    inf, nan = float("inf"), float("nan")
    scaler = GradScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    trace = run_schedule(scaler, [0.5, 0.5, inf, nan, 0.5, 0.5, 0.5])
    # By hand from PyTorch's rule: grow x2 after 2 clean steps in a row, halve on inf/NaN and
    # skip that step (p unchanged), restart the count after either.
    expected_scales = [8, 16, 8, 4, 4, 8, 8]
    expected_p = [0.875, 0.75, 0.75, 0.75, 0.625, 0.5, 0.375]
    assert [s for s, _ in trace] == expected_scales
    assert [v for _, v in trace] == expected_p
    state = scaler.state_dict()
    assert state["scale"] == 8.0 and state["_growth_tracker"] == 1
    assert state["growth_interval"] == 2 and state["backoff_factor"] == 0.5
    assert scaler.skipped_steps() == 2


def test_grad_scaler_rounds_the_scale_to_float32_once_per_update():
    scaler = GradScaler(init_scale=3.0, growth_factor=1.1, backoff_factor=0.3, growth_interval=1)
    trace = run_schedule(scaler, [1.0, 1.0, float("inf"), 1.0])
    scale, expected = np.float32(3.0), []
    for grow in [True, True, False, True]:
        scale = np.float32(np.float64(scale) * (1.1 if grow else 0.3))
        expected.append(float(scale))
    assert [s for s, _ in trace] == expected


def test_grad_scaler_state_dict_round_trip():
    a = GradScaler(init_scale=16.0, growth_interval=3)
    run_schedule(a, [1.0, 1.0])
    b = GradScaler()
    b.load_state_dict(a.state_dict())
    assert b.get_scale() == 16.0 and b.get_growth_interval() == 3
    assert b.state_dict()["_growth_tracker"] == 2
    with pytest.raises(RuntimeError, match="empty"):
        GradScaler().load_state_dict({})
    assert GradScaler(enabled=False).state_dict() == {}


def test_unscale_divides_gradients_by_the_scale():
    p = mixprec.nn.Parameter(mixprec.tensor([1.0, 2.0]))
    opt = mixprec.optim.SGD([p], lr=0.1)
    scaler = GradScaler(init_scale=1024.0)
    scaler.scale((p * p).sum()).backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2048.0, 4096.0])
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0])


def test_grad_scaler_errors_are_pytorchs():
    p = mixprec.nn.Parameter(mixprec.tensor([1.0]))
    opt = mixprec.optim.SGD([p], lr=0.1)
    scaler = GradScaler()
    with pytest.raises(RuntimeError, match="No inf checks were recorded prior to update"):
        scaler.update()
    with pytest.raises(RuntimeError, match="No inf checks were recorded for this optimizer"):
        scaler.step(opt)  # no backward yet: no gradient
    scaler.scale((p * 2).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer since the last update\(\)"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update\(\)"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure"):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(ValueError):
        GradScaler(growth_factor=0.5)
    with pytest.raises(ValueError):
        scaler.update(new_scale=float("inf"))


def test_disabled_scaler_passes_through():
    p = mixprec.nn.Parameter(mixprec.tensor([1.0]))
    opt = mixprec.optim.SGD([p], lr=0.5)
    scaler = GradScaler(enabled=False)
    loss = (p * 2).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.step(opt)
    scaler.update()
    assert p.item() == 0.0 and scaler.get_scale() == 1.0 and not scaler.is_enabled()


def test_grad_scaler_names_the_parameter_that_overflowed():
    model = mixprec.nn.Sequential(mixprec.nn.Linear(2, 2), mixprec.nn.Linear(2, 1))
    opt = mixprec.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler()
    scaler.name_parameters(model.named_parameters())
    out = model(mixprec.tensor([[1.0, float("inf")]]))
    scaler.scale(out.sum()).backward()
    scaler.step(opt)
    scaler.update()
    names = [g.name for g in scaler.last_nonfinite()]
    assert "0.weight" in names
