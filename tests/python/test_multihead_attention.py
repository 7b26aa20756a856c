"""mixprec.nn.MultiheadAttention: against a NumPy float64 loop reference, finite-difference
gradients, and side by side with torch 1.13's (outputs, weights, every gradient, errors,
autocast dtypes); a small model with it trains."""
import math
import warnings

import numpy as np
import pytest

import mixprec
import mixprec.nn as nn
from helpers import as_f64, finite_difference_grad, rng

E, HEADS = 8, 2


# ---- the NumPy float64 reference ---------------------------------------------------------------

def reference(params, query, key, value, num_heads, batch_first=False, key_padding_mask=None, attn_mask=None,
              add_zero_attn=False, average=True):
    """torch 1.13's multi-head attention written out as loops in float64. params: name ->
    array (torch's state_dict names); masks: bool (True = masked) or float (added) arrays."""
    batched = query.ndim == 3
    if not batched:
        query, key, value = query[None], key[None], value[None]
        key_padding_mask = None if key_padding_mask is None else key_padding_mask[None]
    elif not batch_first:
        query, key, value = (np.swapaxes(t, 0, 1) for t in (query, key, value))
    n, tgt_len, e = query.shape
    d = e // num_heads
    if "in_proj_weight" in params:
        wq, wk, wv = np.split(params["in_proj_weight"], 3)
    else:
        wq, wk, wv = params["q_proj_weight"], params["k_proj_weight"], params["v_proj_weight"]
    bq, bk, bv = np.split(params["in_proj_bias"], 3) if "in_proj_bias" in params else (0.0, 0.0, 0.0)
    q, k, v = query @ wq.T + bq, key @ wk.T + bk, value @ wv.T + bv
    if "bias_k" in params:
        k = np.concatenate([k, np.broadcast_to(params["bias_k"], (n, 1, e))], 1)
        v = np.concatenate([v, np.broadcast_to(params["bias_v"], (n, 1, e))], 1)
    if add_zero_attn:
        k, v = (np.concatenate([t, np.zeros((n, 1, e))], 1) for t in (k, v))
    src_len = k.shape[1]

    def added(mask, index):  # the term a mask adds at `index`; positions beyond it (bias, zero key) get 0
        if mask is None or index[-1] >= mask.shape[-1]:
            return 0.0
        m = mask[index]
        return (-np.inf if m else 0.0) if mask.dtype == np.bool_ else float(m)

    out = np.zeros((n, tgt_len, e))
    weights = np.zeros((n, num_heads, tgt_len, src_len))
    for b in range(n):
        for h in range(num_heads):
            cols = slice(h * d, (h + 1) * d)
            for i in range(tgt_len):
                scores = np.zeros(src_len)
                for j in range(src_len):
                    scores[j] = np.dot(q[b, i, cols], k[b, j, cols]) / math.sqrt(d)
                    if attn_mask is not None:
                        scores[j] += added(attn_mask, (i, j) if attn_mask.ndim == 2 else (b * num_heads + h, i, j))
                    scores[j] += added(key_padding_mask, (b, j))
                top = scores.max()
                w = np.exp(scores - top) if top > -np.inf else np.full(src_len, np.nan)
                w /= w.sum()
                weights[b, h, i] = w
                for j in range(src_len):
                    out[b, i, cols] += w[j] * v[b, j, cols]
    out = out @ params["out_proj.weight"].T + params.get("out_proj.bias", 0.0)
    weights = weights.mean(1) if average else weights
    if not batched:
        return out[0], weights[0]
    return (out if batch_first else np.swapaxes(out, 0, 1)), weights


def f64_params(module):
    return {name: as_f64(t) for name, t in module.state_dict().items()}


def randomize(module, g, scale=0.5):
    """Every parameter (torch's zero biases included) random, so each one shows in the output."""
    with mixprec.no_grad():
        for p in module.parameters():
            p.copy_(mixprec.tensor(g.standard_normal(tuple(p.shape)) * scale, dtype=p.dtype))
    return module


def inputs(g, batch_first, n=3, tgt_len=5, src_len=4, kdim=E, vdim=E, unbatched=False):
    def shaped(length, dim):
        if unbatched:
            return g.standard_normal((length, dim))
        return g.standard_normal((n, length, dim) if batch_first else (length, n, dim))
    return shaped(tgt_len, E), shaped(src_len, kdim), shaped(src_len, vdim)


def f64(a):
    return mixprec.tensor(a, dtype=mixprec.float64)


# A key_padding_mask and attn_masks of each kind for n=3 sequences, L=5 queries, S=4 keys.
def masks(g, n=3, tgt_len=5, src_len=4):
    padding = np.zeros((n, src_len), bool)
    padding[0, 1] = padding[2, 0] = padding[2, 3] = True
    bool2 = g.random((tgt_len, src_len)) < 0.3
    bool2[:, 0] = False  # every query keeps a key
    bool3 = g.random((n * HEADS, tgt_len, src_len)) < 0.3
    bool3[..., 2] = False
    float2 = g.standard_normal((tgt_len, src_len))
    float2[1, 3] = -np.inf
    return {"padding": padding, "padding_float": np.where(padding, -3.0, 0.5) + g.standard_normal((n, src_len)),
            "bool2": bool2, "bool3": bool3, "float2": float2,
            "float3": g.standard_normal((n * HEADS, tgt_len, src_len))}


CASES = [  # (constructor kwargs, key_padding_mask, attn_mask)
    (dict(), None, None),
    (dict(batch_first=True), "padding", None),
    (dict(), None, "bool2"),
    (dict(batch_first=True), None, "bool3"),
    (dict(), "padding", "float2"),
    (dict(), None, "float3"),
    (dict(), "padding_float", None),
    (dict(batch_first=True), "padding", "bool2"),
    (dict(kdim=3, vdim=6), "padding", "float2"),
    (dict(add_bias_kv=True), "padding", "bool3"),
    (dict(add_zero_attn=True, batch_first=True), "padding", "float3"),
    (dict(add_bias_kv=True, add_zero_attn=True, bias=False), "padding", "bool2"),
]


@pytest.mark.parametrize("kwargs,padding_name,mask_name", CASES)
@pytest.mark.parametrize("average", [True, False])
def test_matches_numpy_float64_reference(kwargs, padding_name, mask_name, average):
    g = rng(1)
    m = randomize(nn.MultiheadAttention(E, HEADS, dtype=mixprec.float64, **kwargs), g)
    q, k, v = inputs(g, kwargs.get("batch_first", False), kdim=m.kdim, vdim=m.vdim)
    ms = masks(g)
    padding = None if padding_name is None else ms[padding_name]
    mask = None if mask_name is None else ms[mask_name]
    out, weights = m(f64(q), f64(k), f64(v), key_padding_mask=padding, attn_mask=mask,
                     average_attn_weights=average)
    want_out, want_weights = reference(f64_params(m), q, k, v, HEADS, kwargs.get("batch_first", False), padding,
                                       mask, kwargs.get("add_zero_attn", False), average)
    assert out.dtype == weights.dtype == mixprec.float64
    np.testing.assert_allclose(as_f64(out), want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(as_f64(weights), want_weights, rtol=1e-12, atol=1e-12)


def test_unbatched_and_cross_attention_match_reference():
    g = rng(2)
    m = randomize(nn.MultiheadAttention(E, HEADS, kdim=5, vdim=3, batch_first=True, dtype=mixprec.float64), g)
    q, k, v = inputs(g, True, src_len=7, kdim=5, vdim=3, unbatched=True)
    padding = np.array([False, True, False, False, True, False, False])
    mask = g.standard_normal((HEADS, 5, 7))
    out, weights = m(f64(q), f64(k), f64(v), key_padding_mask=padding, attn_mask=mask, average_attn_weights=False)
    assert tuple(out.shape) == (5, E) and tuple(weights.shape) == (HEADS, 5, 7)
    want_out, want_weights = reference(f64_params(m), q, k, v, HEADS, True, padding, mask, average=False)
    np.testing.assert_allclose(as_f64(out), want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(as_f64(weights), want_weights, rtol=1e-12, atol=1e-12)


def test_mask_forms_mixprec_uint8_and_tensor_float_are_the_bool_and_float_masks():
    g = rng(3)
    m = randomize(nn.MultiheadAttention(E, HEADS, dtype=mixprec.float64), g)
    q, k, v = (f64(a) for a in inputs(g, False))
    ms = masks(g)
    want = m(q, k, v, key_padding_mask=ms["padding"], attn_mask=ms["float2"])
    # a comparison's uint8 mask (mixprec's bool) and a float mixprec tensor
    padding = mixprec.tensor(ms["padding"].astype(np.float64)) > 0.5
    assert padding.dtype == mixprec.uint8
    got = m(q, k, v, key_padding_mask=padding, attn_mask=f64(ms["float2"]))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(as_f64(a), as_f64(b))


def test_need_weights_false_and_fully_masked_row():
    g = rng(4)
    m = randomize(nn.MultiheadAttention(E, HEADS, dtype=mixprec.float64), g)
    q, k, v = (f64(a) for a in inputs(g, False))
    out, weights = m(q, k, v, need_weights=False)
    assert weights is None and tuple(out.shape) == (5, 3, E)
    padding = np.zeros((3, 4), bool)
    padding[1] = True  # sequence 1 has no key to attend: NaN, as PyTorch gives
    out, weights = m(q, k, v, key_padding_mask=padding)
    assert np.isnan(as_f64(out)[:, 1]).all() and np.isnan(as_f64(weights)[1]).all()
    assert np.isfinite(as_f64(out)[:, [0, 2]]).all()


# ---- gradients: finite differences in float64 ----------------------------------------------------

@pytest.mark.parametrize("kwargs,mask_name", [
    (dict(), "float2"),
    (dict(kdim=3, vdim=2, add_bias_kv=True, add_zero_attn=True, batch_first=True), "bool3"),
])
def test_gradients_match_finite_differences(kwargs, mask_name):
    """Every input's, parameter's and float mask's gradient of a weighted sum of the output and
    the attention weights, against central differences of the float64 reference."""
    g = rng(5)
    n, tgt_len, src_len = 2, 3, 4
    m = randomize(nn.MultiheadAttention(4, 2, dtype=mixprec.float64, **kwargs), g)
    bf, zero_attn = kwargs.get("batch_first", False), kwargs.get("add_zero_attn", False)
    shape = (lambda length, dim: (n, length, dim)) if bf else (lambda length, dim: (length, n, dim))
    values = {"query": g.standard_normal(shape(tgt_len, 4)), "key": g.standard_normal(shape(src_len, m.kdim)),
              "value": g.standard_normal(shape(src_len, m.vdim))}
    padding = np.array([[False, True, False, False], [False, False, False, True]])
    if mask_name == "float2":
        values["attn_mask"] = g.standard_normal((tgt_len, src_len))
        mask = None
    else:
        mask = g.random((n * 2, tgt_len, src_len)) < 0.3
        mask[..., 0] = False
    values.update(f64_params(m))

    def flat_outputs(vals):  # the reference's output and weights, one vector
        out, weights = reference(vals, vals["query"], vals["key"], vals["value"], 2, bf, padding,
                                 vals.get("attn_mask", mask), zero_attn)
        return np.concatenate([out.ravel(), weights.ravel()])

    leaves = {name: mixprec.tensor(values[name], dtype=mixprec.float64, requires_grad=True)
              for name in ("query", "key", "value", "attn_mask") if name in values}
    out, weights = m(leaves["query"], leaves["key"], leaves["value"], key_padding_mask=padding,
                     attn_mask=leaves.get("attn_mask", mask))
    grads = dict(leaves, **dict(m.named_parameters()))
    assert len(grads) == len(values)
    w = None
    for name in grads:
        expected, w = finite_difference_grad(lambda x, name=name: flat_outputs(dict(values, **{name: x})),
                                             values[name].copy())
        if name == "query":  # the same weighting w for every leaf: back-propagate it once
            size = out.numel()
            ((out.reshape(-1) * f64(w[:size])).sum() + (weights.reshape(-1) * f64(w[size:])).sum()).backward()
        np.testing.assert_allclose(as_f64(grads[name].grad), expected, rtol=1e-6, atol=1e-7, err_msg=name)


# ---- dropout, construction, training ---------------------------------------------------------------

def test_dropout_acts_on_the_weights_in_training_only():
    g = rng(6)
    m = randomize(nn.MultiheadAttention(E, HEADS, dropout=0.5, dtype=mixprec.float64), g)
    q, k, v = (f64(a) for a in inputs(g, False))
    m.eval()
    out_eval, kept = m(q, k, v, average_attn_weights=False)
    out_again, _ = m(q, k, v)
    np.testing.assert_array_equal(as_f64(out_eval), as_f64(out_again))
    m.train()
    mixprec.manual_seed(0)
    _, dropped = m(q, k, v, average_attn_weights=False)
    dropped, kept = as_f64(dropped), as_f64(kept)
    zero = dropped == 0
    assert 0.3 < zero.mean() < 0.7  # p = 0.5 of the weights dropped
    np.testing.assert_allclose(dropped[~zero], 2 * kept[~zero], rtol=1e-12)  # the rest scaled by 1 / (1 - p)
    # the output is the product with the dropped weights
    params = f64_params(m)
    v_proj = as_f64(v) @ np.split(params["in_proj_weight"], 3)[2].T + np.split(params["in_proj_bias"], 3)[2]
    mixprec.manual_seed(0)
    out_train, _ = m(q, k, v, need_weights=False)
    v_heads = np.swapaxes(v_proj, 0, 1).reshape(3, 4, HEADS, E // HEADS).transpose(0, 2, 1, 3)  # [N, H, S, D]
    heads = dropped @ v_heads  # [N, H, L, D]
    concat = heads.transpose(2, 0, 1, 3).reshape(5, 3, E)
    np.testing.assert_allclose(as_f64(out_train), concat @ params["out_proj.weight"].T + params["out_proj.bias"],
                               rtol=1e-10, atol=1e-12)


def test_parameters_names_shapes_and_initialisation():
    mixprec.manual_seed(0)
    m = nn.MultiheadAttention(64, 4)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        ("in_proj_weight", (192, 64)), ("in_proj_bias", (192,)), ("out_proj.weight", (64, 64)),
        ("out_proj.bias", (64,))]
    assert m.q_proj_weight is None and m.bias_k is None and m.head_dim == 16 and m._qkv_same_embed_dim
    w = as_f64(m.in_proj_weight)
    bound = math.sqrt(6.0 / (64 + 192))  # xavier_uniform_ of [3E, E]
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert not as_f64(m.in_proj_bias).any() and not as_f64(m.out_proj.bias).any()
    ow = as_f64(m.out_proj.weight)
    assert np.abs(ow).max() <= 1 / 8 and ow.std() > 0.05  # Linear's own initialisation
    sep = nn.MultiheadAttention(8, 2, bias=False, add_bias_kv=True, kdim=3, vdim=5)
    assert [(n, tuple(p.shape)) for n, p in sep.named_parameters()] == [
        ("q_proj_weight", (8, 8)), ("k_proj_weight", (8, 3)), ("v_proj_weight", (8, 5)), ("bias_k", (1, 1, 8)),
        ("bias_v", (1, 1, 8)), ("out_proj.weight", (8, 8))]
    assert sep.in_proj_weight is None and sep.in_proj_bias is None and sep.out_proj.bias is None
    assert as_f64(sep.bias_k).std() > 0
    assert repr(m) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=64, "
                       "out_features=64, bias=True)\n)")
    assert all(p.dtype == mixprec.bfloat16 for p in nn.MultiheadAttention(8, 2, dtype=mixprec.bfloat16).parameters())


def test_bad_arguments_name_them():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="num_heads"):
        nn.MultiheadAttention(8, 0)
    m = nn.MultiheadAttention(E, HEADS)
    x = mixprec.randn(5, 3, E)
    bad = [
        (dict(key_padding_mask=np.zeros((3, 4), bool)), AssertionError, "key_padding_mask shape"),
        (dict(key_padding_mask=np.zeros(5, bool)), AssertionError, "key_padding_mask"),
        (dict(key_padding_mask=mixprec.zeros(3, 5, dtype=mixprec.int64)), AssertionError, "key_padding_mask"),
        (dict(attn_mask=np.zeros((5, 4), bool)), RuntimeError, "2D attn_mask"),
        (dict(attn_mask=np.zeros((3, 5, 5), bool)), RuntimeError, "3D attn_mask"),
        (dict(attn_mask=np.zeros((1, 6, 5, 5), bool)), AssertionError, "attn_mask"),
        (dict(attn_mask=np.zeros((5, 5), np.int64)), AssertionError, "attn_mask"),
    ]
    for kwargs, error, words in bad:
        with pytest.raises(error, match=words):
            m(x, x, x, **kwargs)
    with pytest.raises(AssertionError, match="embedding dimension of 8"):
        m(x[..., :4], x[..., :4], x[..., :4])
    with pytest.raises(AssertionError, match="key shape"):
        m(x, x[:4], x)
    with pytest.raises(AssertionError, match="`key` and `value`"):
        m(x[0], x, x)
    with pytest.raises(AssertionError, match="query"):
        m(x[0, 0], x[0, 0], x[0, 0])
    with pytest.raises(RuntimeError, match="dtype"):
        m(x.double(), x.double(), x.double())
    with pytest.raises(RuntimeError, match="key's batch size 2"):
        m(x, x[:, :2], x[:, :2])
    with pytest.raises(AssertionError, match="kdim=3"):
        nn.MultiheadAttention(E, HEADS, kdim=3)(x, x, mixprec.randn(5, 3, E))


@pytest.mark.parametrize("amp", [False, True])
def test_a_model_with_it_trains(amp):
    """Self-attention over 6 tokens then a linear read-out learns a fixed target: the mean of
    the tokens' first feature weighted by their second (needs the attention), in 40 Adam steps
    (in f32, and under bf16 autocast)."""
    mixprec.manual_seed(0)
    g = rng(9)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True)
            self.head = nn.Linear(E, 1)

        def forward(self, x):
            out, _ = self.attn(x, x, x, need_weights=False)
            return self.head(out).mean(1)

    x = g.standard_normal((32, 6, E)).astype(np.float32)
    target = (x[..., 0] * np.exp(x[..., 1]) / np.exp(x[..., 1]).sum(1, keepdims=True)).sum(1, keepdims=True)
    x, target = mixprec.tensor(x), mixprec.tensor(target.astype(np.float32))
    model = Model()
    opt = mixprec.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        with mixprec.autocast(dtype=mixprec.bfloat16, enabled=amp):
            loss = nn.functional.mse_loss(model(x).float(), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


# ---- side by side with torch 1.13 ----------------------------------------------------------------

def _torch_pair(torch, kwargs, seed=0):
    """A torch module with every parameter random, and ours with its state_dict (via NumPy)."""
    torch.manual_seed(seed)
    tm = torch.nn.MultiheadAttention(E, HEADS, **kwargs)
    with torch.no_grad():
        for p in tm.parameters():
            p.normal_(0.0, 0.5)
    m = nn.MultiheadAttention(E, HEADS, **kwargs)
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    return tm, m


def _mask_pair(torch, a):
    return None if a is None else (torch.from_numpy(a) if a.dtype == np.bool_ else torch.from_numpy(a).float())


@pytest.mark.parametrize("kwargs,padding_name,mask_name", CASES)
@pytest.mark.parametrize("average", [True, False])
def test_side_by_side_with_torch(kwargs, padding_name, mask_name, average):
    torch = pytest.importorskip("torch")
    g = rng(10)
    tm, m = _torch_pair(torch, kwargs)
    arrays = [a.astype(np.float32) for a in inputs(g, kwargs.get("batch_first", False), kdim=tm.kdim, vdim=tm.vdim)]
    ms = masks(g)
    padding = None if padding_name is None else ms[padding_name]
    mask = None if mask_name is None else ms[mask_name]
    float_mask = mask is not None and mask.dtype != np.bool_
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    t_mask = _mask_pair(torch, mask)
    if float_mask:
        t_mask.requires_grad_(True)
    t_out, t_w = tm(*t_in, key_padding_mask=_mask_pair(torch, padding), attn_mask=t_mask,
                    average_attn_weights=average)
    m_in = [mixprec.tensor(a, requires_grad=True) for a in arrays]
    m_mask = mask if not float_mask else mixprec.tensor(mask.astype(np.float32), requires_grad=True)
    # the bool masks as torch tensors straight away (ours reads them), the float ones as ours
    m_out, m_w = m(*m_in, key_padding_mask=_mask_pair(torch, padding), attn_mask=m_mask, average_attn_weights=average)
    assert m_out.dtype == mixprec.float32 and m_w.dtype == mixprec.float32
    torch.testing.assert_close(torch.from_numpy(m_out.detach().numpy()), t_out.detach())
    torch.testing.assert_close(torch.from_numpy(m_w.detach().numpy()), t_w.detach())
    w_out = g.standard_normal(tuple(t_out.shape)).astype(np.float32)
    w_w = g.standard_normal(tuple(t_w.shape)).astype(np.float32)
    ((t_out * torch.from_numpy(w_out)).sum() + (t_w * torch.from_numpy(w_w)).sum()).backward()
    ((m_out * mixprec.tensor(w_out)).sum() + (m_w * mixprec.tensor(w_w)).sum()).backward()
    ours = dict(m.named_parameters())
    for name, p in tm.named_parameters():
        torch.testing.assert_close(torch.from_numpy(ours[name].grad.numpy()), p.grad, msg=name)
    for mine, theirs in zip(m_in, t_in):
        torch.testing.assert_close(torch.from_numpy(mine.grad.numpy()), theirs.grad)
    if float_mask:
        torch.testing.assert_close(torch.from_numpy(m_mask.grad.numpy()), t_mask.grad)


@pytest.mark.parametrize("batch_first", [False, True])
def test_side_by_side_unbatched_uint8_attn_mask_and_eval_fast_path(batch_first):
    torch = pytest.importorskip("torch")
    g = rng(11)
    tm, m = _torch_pair(torch, dict(batch_first=batch_first, kdim=5, vdim=3))
    q, k, v = (a.astype(np.float32) for a in inputs(g, batch_first, src_len=6, kdim=5, vdim=3, unbatched=True))
    mask = (g.random((5, 6)) < 0.3).astype(np.uint8)  # PyTorch's deprecated byte mask: nonzero = masked
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_out, t_w = tm(*(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask))
    m_out, m_w = m(*(mixprec.tensor(a) for a in (q, k, v)), attn_mask=mixprec.tensor(mask, dtype=mixprec.uint8))
    torch.testing.assert_close(torch.from_numpy(m_out.detach().numpy()), t_out.detach())
    torch.testing.assert_close(torch.from_numpy(m_w.detach().numpy()), t_w.detach())
    # batched self-attention in eval mode without grad: torch's native fast path
    tm2, m2 = _torch_pair(torch, dict(batch_first=True))
    tm2.eval(), m2.eval()
    x = g.standard_normal((3, 5, E)).astype(np.float32)
    padding = np.zeros((3, 5), bool)
    padding[1, 3:] = True
    with torch.no_grad():
        t_out, t_w = tm2(*[torch.from_numpy(x)] * 3, key_padding_mask=torch.from_numpy(padding))
    with mixprec.no_grad():
        mx = mixprec.tensor(x)
        m_out, m_w = m2(mx, mx, mx, key_padding_mask=padding)
    torch.testing.assert_close(torch.from_numpy(m_out.numpy()), t_out)
    torch.testing.assert_close(torch.from_numpy(m_w.numpy()), t_w)


@pytest.mark.parametrize("kwargs,mask_name,need_weights,average", [
    (dict(), None, True, True),
    (dict(batch_first=True), "float2", True, False),
    (dict(add_bias_kv=True, add_zero_attn=True), "bool2", True, True),
    (dict(kdim=3, vdim=6), "float3", False, True),
])
def test_autocast_bfloat16_dtypes_match_torch(kwargs, mask_name, need_weights, average):
    torch = pytest.importorskip("torch")
    g = rng(12)
    tm, m = _torch_pair(torch, kwargs)
    arrays = [a.astype(np.float32) for a in inputs(g, kwargs.get("batch_first", False), kdim=tm.kdim, vdim=tm.vdim)]
    mask = None if mask_name is None else masks(g)[mask_name]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t_out, t_w = tm(*(torch.from_numpy(a) for a in arrays), attn_mask=_mask_pair(torch, mask),
                        need_weights=need_weights, average_attn_weights=average)
    with mixprec.autocast(dtype=mixprec.bfloat16):
        m_out, m_w = m(*(mixprec.tensor(a) for a in arrays), attn_mask=mask, need_weights=need_weights,
                       average_attn_weights=average)
    assert str(m_out.dtype).split(".")[-1] == str(t_out.dtype).split(".")[-1] == "bfloat16"
    # bf16 products: within a few bf16 roundings of torch's
    torch.testing.assert_close(torch.from_numpy(as_f64(m_out)), t_out.double(), rtol=0.05, atol=0.1)
    if need_weights:
        assert str(m_w.dtype).split(".")[-1] == str(t_w.dtype).split(".")[-1]
        torch.testing.assert_close(torch.from_numpy(as_f64(m_w)), t_w.double(), rtol=0.05, atol=0.03)
    else:
        assert m_w is None and t_w is None


def test_errors_are_torchs():
    torch = pytest.importorskip("torch")
    tm, m = _torch_pair(torch, dict())
    x = np.zeros((5, 3, E), np.float32)
    tx, mx = torch.from_numpy(x), mixprec.tensor(x)
    calls = [
        (lambda t: (t, t, t), dict(key_padding_mask=np.zeros((3, 4), bool))),
        (lambda t: (t, t, t), dict(key_padding_mask=np.zeros(5, bool))),
        (lambda t: (t, t, t), dict(key_padding_mask=np.zeros((3, 5), np.int64))),
        (lambda t: (t, t, t), dict(attn_mask=np.zeros((5, 4), bool))),
        (lambda t: (t, t, t), dict(attn_mask=np.zeros((2, 5, 5), np.float32))),
        (lambda t: (t, t, t), dict(attn_mask=np.zeros((1, 6, 5, 5), bool))),
        (lambda t: (t, t, t), dict(attn_mask=np.zeros((5, 5), np.int64))),
        (lambda t: (t[..., :4], t[..., :4], t[..., :4]), {}),
        (lambda t: (t, t[:4], t), {}),
        (lambda t: (t[0], t, t), {}),
        (lambda t: (t[0, 0], t[0, 0], t[0, 0]), {}),
        (lambda t: (t, t, t.double()), {}),
    ]
    for args, kwargs in calls:
        with pytest.raises(Exception) as theirs:
            tm(*args(tx), **{k: torch.from_numpy(a) for k, a in kwargs.items()})
        with pytest.raises(Exception) as ours:
            m(*args(mx), **kwargs)
        assert isinstance(ours.value, type(theirs.value)), (kwargs, ours.value, theirs.value)
    with pytest.raises(AssertionError) as theirs:
        torch.nn.MultiheadAttention(10, 3)
    with pytest.raises(AssertionError) as ours:
        nn.MultiheadAttention(10, 3)
    assert str(ours.value) == str(theirs.value)
