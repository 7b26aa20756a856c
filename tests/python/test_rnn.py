"""mixprec.nn's RNN, LSTM, GRU and their cells: against NumPy float64 references of the
cells' equations, finite differences, and PyTorch 1.13 side by side (skipped without torch)."""
import collections

import numpy as np
import pytest

import mixprec
import mixprec.nn as nn
from helpers import as_f64, finite_difference_grad, rng

# ---- NumPy float64 references (PyTorch's documented equations, written independently) ----


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh, relu=False):
    """x [B, I], h [B, H] -> h' [B, H]."""
    pre = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    return np.maximum(pre, 0.0) if relu else np.tanh(pre)


def np_lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    H = c.shape[-1]
    gates = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f = sigmoid(gates[:, :H]), sigmoid(gates[:, H:2 * H])
    g, o = np.tanh(gates[:, 2 * H:3 * H]), sigmoid(gates[:, 3 * H:])
    c = f * c + i * g
    h = o * np.tanh(c)
    return (h if w_hr is None else h @ w_hr.T), c


def np_gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    H = h.shape[-1]
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    r = sigmoid(gi[:, :H] + gh[:, :H])
    z = sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    return (1.0 - z) * n + z * h


def np_sequence_model(mode, params, x, h0, c0=None, num_layers=1, bidirectional=False, relu=False):
    """x [T, B, I]; params by PyTorch's names (no bias: zeros); h0/c0 [L * D, B, H].
    Returns output [T, B, D * H], h_n (and c_n)."""
    D = 2 if bidirectional else 1
    seq, hs, cs = x, [], []
    for layer in range(num_layers):
        outs = []
        for d in range(D):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_ih, w_hh = params["weight_ih" + sfx], params["weight_hh" + sfx]
            b_ih = params.get("bias_ih" + sfx, np.zeros(w_ih.shape[0]))
            b_hh = params.get("bias_hh" + sfx, np.zeros(w_ih.shape[0]))
            k = layer * D + d
            h = h0[k]
            c = None if c0 is None else c0[k]
            out = [None] * len(seq)
            for t in (reversed(range(len(seq))) if d else range(len(seq))):
                if mode == "LSTM":
                    h, c = np_lstm_cell(seq[t], h, c, w_ih, w_hh, b_ih, b_hh, params.get("weight_hr" + sfx))
                elif mode == "GRU":
                    h = np_gru_cell(seq[t], h, w_ih, w_hh, b_ih, b_hh)
                else:
                    h = np_rnn_cell(seq[t], h, w_ih, w_hh, b_ih, b_hh, relu)
                out[t] = h
            outs.append(np.stack(out))
            hs.append(h)
            cs.append(c)
        seq = np.concatenate(outs, axis=-1)
    return seq, np.stack(hs), (np.stack(cs) if c0 is not None else None)


def params_f64(module):
    return {name: as_f64(p) for name, p in module.named_parameters()}


# ---- parameters, names, init ----


@pytest.mark.parametrize("cls,gates", [(nn.RNN, 1), (nn.LSTM, 4), (nn.GRU, 3)])
def test_parameter_names_shapes_and_init(cls, gates):
    m = cls(6, 10, num_layers=2, bidirectional=True)
    names = [n for n, _ in m.named_parameters()]
    expected = []
    for layer in range(2):
        for sfx in ("", "_reverse"):
            expected += [f"{w}_l{layer}{sfx}" for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert names == expected
    assert m.weight_ih_l0.shape == (gates * 10, 6)
    assert m.weight_ih_l1_reverse.shape == (gates * 10, 20)  # both directions' outputs feed layer 1
    assert m.weight_hh_l1.shape == (gates * 10, 10) and m.bias_hh_l0_reverse.shape == (gates * 10,)
    bound = 1.0 / np.sqrt(10)
    values = np.concatenate([as_f64(p).ravel() for p in m.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert abs(values.std() - bound / np.sqrt(3)) < 0.1 * bound  # spread as uniform(-b, b)
    assert list(m.state_dict()) == expected
    assert [len(w) for w in m.all_weights] == [4, 4, 4, 4]


def test_no_bias_proj_and_dtype_arguments():
    m = nn.LSTM(3, 6, bias=False, proj_size=2, dtype=mixprec.float64)
    assert [n for n, _ in m.named_parameters()] == ["weight_ih_l0", "weight_hh_l0", "weight_hr_l0"]
    assert m.weight_hh_l0.shape == (24, 2) and m.weight_hr_l0.shape == (2, 6)
    assert all(p.dtype == mixprec.float64 for p in m.parameters())
    cell = nn.GRUCell(3, 4, bias=False)
    assert [n for n, _ in cell.named_parameters()] == ["weight_ih", "weight_hh"]
    assert cell.bias_ih is None


def test_constructor_errors():
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        nn.LSTM(3, 4, num_layers=0)
    with pytest.raises(TypeError, match="hidden_size should be of type int"):
        nn.GRU(3, 4.0)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.5)
    with pytest.raises(RuntimeError, match="CPUs only"):
        nn.LSTM(3, 4, device="cuda")


def test_repr():
    assert repr(nn.LSTM(4, 5, num_layers=2)) == "LSTM(4, 5, num_layers=2)"
    assert repr(nn.GRU(4, 5, bias=False, batch_first=True, bidirectional=True)) == \
        "GRU(4, 5, bias=False, batch_first=True, bidirectional=True)"
    assert repr(nn.RNNCell(4, 5, nonlinearity="relu")) == "RNNCell(4, 5, nonlinearity=relu)"


# ---- cells against NumPy, and their finite-difference gradients ----

CELLS = ["RNNCell", "RNNCell-relu", "LSTMCell", "GRUCell"]


def make_cell(kind, I=3, H=4):
    if kind == "RNNCell-relu":
        return nn.RNNCell(I, H, nonlinearity="relu").double()
    return getattr(nn, kind)(I, H).double()


def np_cell(kind, p, x, h, c=None):
    args = (p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    if kind == "LSTMCell":
        return np_lstm_cell(x, h, c, *args)
    if kind == "GRUCell":
        return np_gru_cell(x, h, *args)
    return np_rnn_cell(x, h, *args, relu=kind == "RNNCell-relu")


@pytest.mark.parametrize("kind", CELLS)
def test_cell_matches_numpy(kind):
    g = rng(1)
    cell = make_cell(kind)
    p = params_f64(cell)
    x, h, c = g.standard_normal((5, 3)), g.standard_normal((5, 4)), g.standard_normal((5, 4))
    X, Hx, C = (mixprec.tensor(a, dtype=mixprec.float64) for a in (x, h, c))
    if kind == "LSTMCell":
        out_h, out_c = cell(X, (Hx, C))
        ref_h, ref_c = np_cell(kind, p, x, h, c)
        np.testing.assert_allclose(as_f64(out_c), ref_c, rtol=1e-12, atol=1e-12)
        zeros_h, _ = cell(X)  # hx None: zeros
        np.testing.assert_allclose(as_f64(zeros_h), np_cell(kind, p, x, 0 * h, 0 * c)[0], rtol=1e-12, atol=1e-12)
        unbatched_h, unbatched_c = cell(X[1], (Hx[1], C[1]))
        assert unbatched_h.shape == (4,) and unbatched_c.shape == (4,)
        np.testing.assert_allclose(as_f64(unbatched_h), ref_h[1], rtol=1e-12, atol=1e-12)
    else:
        out_h = cell(X, Hx)
        ref_h = np_cell(kind, p, x, h)
        np.testing.assert_allclose(as_f64(cell(X)), np_cell(kind, p, x, 0 * h), rtol=1e-12, atol=1e-12)
        unbatched = cell(X[2], Hx[2])
        assert unbatched.shape == (4,)
        np.testing.assert_allclose(as_f64(unbatched), ref_h[2], rtol=1e-12, atol=1e-12)
    assert out_h.shape == (5, 4)
    np.testing.assert_allclose(as_f64(out_h), ref_h, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", CELLS)
def test_cell_gradients_match_finite_differences(kind):
    g = rng(2)
    cell = make_cell(kind, I=2, H=3)
    p = params_f64(cell)
    arrays = {"x": g.standard_normal((2, 2)), "h": g.standard_normal((2, 3)), "c": g.standard_normal((2, 3))}
    arrays.update(p)
    if kind == "RNNCell-relu":  # keep every pre-activation away from relu's kink
        arrays["h"] = np.abs(arrays["h"]) + 0.5

    def reference(values):
        q = {k: values[k] for k in p}
        out = np_cell(kind, q, values["x"], values["h"], values["c"])
        return np.concatenate([o.ravel() for o in out]) if isinstance(out, tuple) else out.ravel()

    leaves = {k: mixprec.tensor(arrays[k], dtype=mixprec.float64, requires_grad=True) for k in ("x", "h", "c")}
    if kind == "LSTMCell":
        h, c = cell(leaves["x"], (leaves["h"], leaves["c"]))
        out = mixprec.cat([h.reshape(-1), c.reshape(-1)])
    else:
        out = cell(leaves["x"], leaves["h"]).reshape(-1)
    checked = ["x", "h"] + (["c"] if kind == "LSTMCell" else []) + list(p)
    weights = None
    for name in checked:
        def partial(v, name=name):
            values = dict(arrays)
            values[name] = v
            return reference(values)
        expected, w = finite_difference_grad(partial, np.array(arrays[name]))
        if weights is None:
            weights = w
            out.backward(mixprec.tensor(w, dtype=mixprec.float64))
        got = leaves[name].grad if name in leaves else dict(cell.named_parameters())[name].grad
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-8, err_msg=f"{kind}: d/d{name}")


# ---- whole layers against NumPy (float64) ----

LAYERS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {}), ("LSTM", {"proj_size": 2})]


def layer_id(case):
    return case[0] + "".join(f"-{k}={v}" for k, v in case[1].items())


def make_layer(mode, kwargs, **extra):
    return getattr(nn, mode)(3, 4, **kwargs, **extra)


def real_hidden(kwargs):
    return kwargs.get("proj_size") or 4


@pytest.mark.parametrize("case", LAYERS, ids=layer_id)
def test_layer_matches_numpy_two_layers_bidirectional(case):
    mode, kwargs = case
    g = rng(3)
    m = make_layer(mode, kwargs, num_layers=2, bidirectional=True).double()
    x = g.standard_normal((5, 2, 3))
    h0 = g.standard_normal((4, 2, real_hidden(kwargs)))
    c0 = g.standard_normal((4, 2, 4)) if mode == "LSTM" else None
    to = lambda a: mixprec.tensor(a, dtype=mixprec.float64)  # noqa: E731
    out, state = m(to(x), (to(h0), to(c0)) if mode == "LSTM" else to(h0))
    ref_out, ref_h, ref_c = np_sequence_model(mode, params_f64(m), x, h0, c0, num_layers=2, bidirectional=True,
                                              relu=kwargs.get("nonlinearity") == "relu")
    np.testing.assert_allclose(as_f64(out), ref_out, rtol=1e-12, atol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(as_f64(state[0]), ref_h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(as_f64(state[1]), ref_c, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(as_f64(state), ref_h, rtol=1e-12, atol=1e-12)


def test_layer_gradient_through_time_matches_finite_differences():
    """d(output, h_n, c_n)/d(input, h0, weights) of a 2-layer bidirectional LSTM over 4 steps."""
    g = rng(4)
    m = nn.LSTM(2, 3, num_layers=2, bidirectional=True).double()
    arrays = {"x": g.standard_normal((4, 2, 2)), "h0": g.standard_normal((4, 2, 3)),
              "c0": g.standard_normal((4, 2, 3))}
    p = params_f64(m)

    def reference(values):
        q = dict(p)
        q.update({k: v for k, v in values.items() if k in p})
        out, h, c = np_sequence_model("LSTM", q, values["x"], values["h0"], values["c0"], 2, True)
        return np.concatenate([out.ravel(), h.ravel(), c.ravel()])

    leaves = {k: mixprec.tensor(v, dtype=mixprec.float64, requires_grad=True) for k, v in arrays.items()}
    out, (h, c) = m(leaves["x"], (leaves["h0"], leaves["c0"]))
    flat = mixprec.cat([out.reshape(-1), h.reshape(-1), c.reshape(-1)])
    weights = None
    for name in ["x", "h0", "c0", "weight_hh_l0", "bias_ih_l1_reverse", "weight_ih_l1"]:
        base = dict(arrays)
        base.update(p)

        def partial(v, name=name):
            values = dict(base)
            values[name] = v
            return reference(values)
        expected, w = finite_difference_grad(partial, np.array(base[name]))
        if weights is None:
            weights = w
            flat.backward(mixprec.tensor(w, dtype=mixprec.float64))
        got = leaves[name].grad if name in leaves else dict(m.named_parameters())[name].grad
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-8, err_msg=f"d/d{name}")


def test_no_grad_forward_equals_graph_forward():
    m = nn.GRU(3, 4, num_layers=2, bidirectional=True)
    x = mixprec.tensor(rng(5).standard_normal((6, 2, 3)), dtype=mixprec.float32)
    out, h = m(x)
    with mixprec.no_grad():
        out2, h2 = m(x)
    np.testing.assert_array_equal(as_f64(out), as_f64(out2))
    np.testing.assert_array_equal(as_f64(h), as_f64(h2))


# ---- dropout between layers ----


def test_dropout_only_between_layers_and_only_in_training():
    g = rng(6)
    m = nn.LSTM(3, 4, num_layers=2, dropout=1.0).double()
    x = mixprec.tensor(g.standard_normal((5, 2, 3)), dtype=mixprec.float64)
    out, (h, c) = m(x)
    # dropout 1 zeroes layer 0's output: layer 1 sees zeros; its own output is not dropped.
    p = params_f64(m)
    q = {k.replace("_l1", "_l0"): v for k, v in p.items() if k.endswith("_l1")}
    ref_out, ref_h, _ = np_sequence_model("LSTM", q, np.zeros((5, 2, 4)), np.zeros((1, 2, 4)), np.zeros((1, 2, 4)))
    np.testing.assert_allclose(as_f64(out), ref_out, rtol=1e-12, atol=1e-12)
    assert np.abs(as_f64(out)).min() > 0
    np.testing.assert_allclose(as_f64(h)[1], ref_h[0], rtol=1e-12, atol=1e-12)
    m.eval()
    eval_out, _ = m(x)
    ref_eval, _, _ = np_sequence_model("LSTM", p, as_f64(x), np.zeros((2, 2, 4)), np.zeros((2, 2, 4)), 2)
    np.testing.assert_allclose(as_f64(eval_out), ref_eval, rtol=1e-12, atol=1e-12)


def test_dropout_half_is_random_in_training():
    m = nn.GRU(3, 8, num_layers=2, dropout=0.5)
    x = mixprec.tensor(rng(7).standard_normal((4, 3, 3)), dtype=mixprec.float32)
    a, b = as_f64(m(x)[0]), as_f64(m(x)[0])
    assert not np.allclose(a, b)
    m.eval()
    np.testing.assert_array_equal(as_f64(m(x)[0]), as_f64(m(x)[0]))


# ---- errors ----


def test_input_and_state_errors_are_pytorchs():
    lstm, gru = nn.LSTM(4, 5, 2), nn.GRU(4, 5)
    x = mixprec.zeros(3, 2, 4)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size. Expected 4, got 6"):
        lstm(mixprec.zeros(3, 2, 6))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 5\), got \[2, 3, 5\]"):
        lstm(x, (mixprec.zeros(2, 3, 5), mixprec.zeros(2, 2, 5)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(2, 2, 5\), got \[2, 2, 6\]"):
        lstm(x, (mixprec.zeros(2, 2, 5), mixprec.zeros(2, 2, 6)))
    with pytest.raises(RuntimeError, match=r"hx and cx should also be 3-D but got \(2-D, 3-D\) tensors"):
        lstm(x, (mixprec.zeros(2, 5), mixprec.zeros(2, 2, 5)))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 5\), got \[1, 3, 5\]"):
        gru(x, mixprec.zeros(1, 3, 5))
    with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"):
        gru(mixprec.zeros(3, 4), mixprec.zeros(1, 1, 5))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx should also be 3-D but got 2-D tensor"):
        gru(x, mixprec.zeros(2, 5))
    with pytest.raises(RuntimeError, match="input must have 3 dimensions, got 5"):  # unsqueezed first, as torch
        gru(mixprec.zeros(2, 3, 2, 4))
    with pytest.raises(RuntimeError, match="Expected sequence length to be larger than 0"):
        gru(mixprec.zeros(0, 2, 4))


def test_cell_errors_are_pytorchs():
    lstm, gru, rnn = nn.LSTMCell(4, 5), nn.GRUCell(4, 5), nn.RNNCell(4, 5)
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 3 expected 4"):
        lstm(mixprec.zeros(2, 3))
    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch size 3"):
        lstm(mixprec.zeros(2, 4), (mixprec.zeros(3, 5), mixprec.zeros(2, 5)))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 6, expected 5"):
        gru(mixprec.zeros(2, 4), mixprec.zeros(2, 6))
    with pytest.raises(AssertionError, match="RNNCell: Expected input to be 1-D or 2-D but received 3-D tensor"):
        rnn(mixprec.zeros(3, 2, 4))
    rnn.nonlinearity = "gelu"
    with pytest.raises(RuntimeError, match="Unknown nonlinearity: gelu"):
        rnn(mixprec.zeros(2, 4))


def test_packed_sequence_is_refused_clearly():
    PackedSequence = collections.namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices",
                                                               "unsorted_indices"])
    packed = PackedSequence(mixprec.zeros(5, 4), mixprec.tensor([2, 2, 1]), None, None)
    for m in (nn.LSTM(4, 5), nn.GRU(4, 5), nn.RNN(4, 5)):
        with pytest.raises(NotImplementedError, match="PackedSequence"):
            m(packed)


# ---- PyTorch 1.13 side by side ----

CONFIGS = {
    "two_layers_bidirectional": dict(kwargs=dict(num_layers=2, bidirectional=True), batched=True, hx=False),
    "batch_first_given_hx": dict(kwargs=dict(batch_first=True), batched=True, hx=True),
    "unbatched_given_hx": dict(kwargs=dict(num_layers=2), batched=False, hx=True),
    "unbatched_batch_first_zeros": dict(kwargs=dict(batch_first=True, bidirectional=True), batched=False, hx=False),
    "two_layers_bidirectional_batch_first_hx": dict(kwargs=dict(num_layers=2, bidirectional=True, batch_first=True,
                                                                bias=False), batched=True, hx=True),
}


def assert_close(torch, ours, theirs, msg):
    torch.testing.assert_close(torch.from_numpy(ours.detach().numpy()), theirs.detach(), msg=msg)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("case", LAYERS, ids=layer_id)
def test_layer_against_torch(case, config):
    torch = pytest.importorskip("torch")
    mode, kwargs = case
    cfg = CONFIGS[config]
    torch.manual_seed(0)
    theirs = getattr(torch.nn, mode)(3, 4, **kwargs, **cfg["kwargs"])
    ours = getattr(nn, mode)(3, 4, **kwargs, **cfg["kwargs"])
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    g = rng(8)
    T, B = 6, 3
    D, L = (2 if cfg["kwargs"].get("bidirectional") else 1), cfg["kwargs"].get("num_layers", 1)
    shape = (T, 3) if not cfg["batched"] else ((B, T, 3) if cfg["kwargs"].get("batch_first") else (T, B, 3))
    state_shape = lambda size: (L * D, B, size) if cfg["batched"] else (L * D, size)  # noqa: E731
    arrays = [g.standard_normal(shape).astype(np.float32)]
    if cfg["hx"]:
        arrays.append(g.standard_normal(state_shape(real_hidden(kwargs))).astype(np.float32))
        if mode == "LSTM":
            arrays.append(g.standard_normal(state_shape(4)).astype(np.float32))
    mine = [mixprec.tensor(a, requires_grad=True) for a in arrays]
    ref = [torch.tensor(a, requires_grad=True) for a in arrays]

    def run(model, tensors):
        if len(tensors) == 1:
            return model(tensors[0])
        return model(tensors[0], tuple(tensors[1:]) if mode == "LSTM" else tensors[1])

    (out_m, state_m), (out_t, state_t) = run(ours, mine), run(theirs, ref)
    states_m = list(state_m) if mode == "LSTM" else [state_m]
    states_t = list(state_t) if mode == "LSTM" else [state_t]
    assert tuple(out_m.shape) == tuple(out_t.shape)
    assert_close(torch, out_m, out_t, lambda m: f"output: {m}")
    for k, (sm, st) in enumerate(zip(states_m, states_t)):
        assert tuple(sm.shape) == tuple(st.shape)
        assert_close(torch, sm, st, lambda m, k=k: f"final state {k}: {m}")
    # Backward of a weighted sum of everything the layer returns.
    weights = [g.standard_normal(tuple(o.shape)).astype(np.float32) for o in [out_t] + states_t]
    loss_m = sum((o * mixprec.tensor(w)).sum() for o, w in zip([out_m] + states_m, weights))
    loss_t = sum((o * torch.tensor(w)).sum() for o, w in zip([out_t] + states_t, weights))
    loss_m.backward()
    loss_t.backward()
    for k, (a, b) in enumerate(zip(mine, ref)):
        assert_close(torch, a.grad, b.grad, lambda m, k=k: f"gradient of input {k}: {m}")
    grads_t = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(torch, p.grad, grads_t[name].grad, lambda m, name=name: f"gradient of {name}: {m}")


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched,given", [(True, True), (True, False), (False, True), (False, False)])
def test_cell_against_torch(kind, batched, given):
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    theirs, ours = getattr(torch.nn, kind)(3, 5), getattr(nn, kind)(3, 5)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    g = rng(9)
    lead = (4,) if batched else ()
    arrays = [g.standard_normal(lead + (3,)).astype(np.float32)]
    if given:
        arrays += [g.standard_normal(lead + (5,)).astype(np.float32) for _ in range(2 if kind == "LSTMCell" else 1)]
    mine = [mixprec.tensor(a, requires_grad=True) for a in arrays]
    ref = [torch.tensor(a, requires_grad=True) for a in arrays]
    hx_m = None if not given else (tuple(mine[1:]) if kind == "LSTMCell" else mine[1])
    hx_t = None if not given else (tuple(ref[1:]) if kind == "LSTMCell" else ref[1])
    out_m, out_t = ours(mine[0], hx_m), theirs(ref[0], hx_t)
    outs_m = list(out_m) if kind == "LSTMCell" else [out_m]
    outs_t = list(out_t) if kind == "LSTMCell" else [out_t]
    weights = [g.standard_normal(tuple(o.shape)).astype(np.float32) for o in outs_t]
    for a, b in zip(outs_m, outs_t):
        assert tuple(a.shape) == tuple(b.shape)
        assert_close(torch, a, b, lambda m: f"{kind} output: {m}")
    sum((o * mixprec.tensor(w)).sum() for o, w in zip(outs_m, weights)).backward()
    sum((o * torch.tensor(w)).sum() for o, w in zip(outs_t, weights)).backward()
    for k, (a, b) in enumerate(zip(mine, ref)):
        assert_close(torch, a.grad, b.grad, lambda m, k=k: f"gradient of input {k}: {m}")
    grads_t = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(torch, p.grad, grads_t[name].grad, lambda m, name=name: f"gradient of {name}: {m}")


AUTOCAST_CASES = [("RNN", (5, 2, 3)), ("LSTM", (5, 2, 3)), ("GRU", (5, 2, 3)),
                  ("RNNCell", (2, 3)), ("LSTMCell", (2, 3)), ("GRUCell", (2, 3))]


@pytest.mark.parametrize("kind,shape", AUTOCAST_CASES)
@pytest.mark.parametrize("input_dtype", ["float32", "bfloat16"])
def test_autocast_dtypes_match_torch(kind, shape, input_dtype):
    """PyTorch 1.13's CPU autocast: RNN in bf16; LSTM and GRU with an f32 input end in f32
    (their f32 initial states promote the gate arithmetic), with a bf16 input in bf16."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    kwargs = {"num_layers": 2} if not kind.endswith("Cell") else {}
    theirs, ours = getattr(torch.nn, kind)(3, 4, **kwargs), getattr(nn, kind)(3, 4, **kwargs)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = rng(10).standard_normal(shape).astype(np.float32)
    xt, xm = torch.tensor(x), mixprec.tensor(x)
    if input_dtype == "bfloat16":
        xt, xm = xt.bfloat16(), xm.bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_t = theirs(xt)
    with mixprec.autocast("cpu", dtype=mixprec.bfloat16):
        out_m = ours(xm)

    def flat(out):
        if isinstance(out, tuple):
            return [t for o in out for t in (flat(o) if isinstance(o, tuple) else [o])]
        return [out]
    for a, b in zip(flat(out_m), flat(out_t)):
        assert str(a.dtype).replace("mixprec.", "") == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(as_f64(a), b.detach().float().double().numpy(), atol=3e-2)


# ---- training ----


def test_lstm_learns_to_remember_the_first_step():
    """Target: the first input of a random sequence, read from the last output; an LSTM
    carries it across 8 steps within a few dozen Adam steps."""
    mixprec.manual_seed(0)
    g = rng(11)
    lstm, head = nn.LSTM(1, 16, batch_first=True), nn.Linear(16, 1)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = mixprec.optim.Adam(params, lr=0.03)
    x = g.uniform(-1, 1, (64, 8, 1)).astype(np.float32)
    X, Y = mixprec.tensor(x), mixprec.tensor(x[:, 0, :].copy())
    losses = []
    for _ in range(40):
        opt.zero_grad()
        out, _ = lstm(X)
        pred = head(out[:, -1, :])
        loss = nn.functional.mse_loss(pred, Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses
