"""Whole engine modules as mixprec.nn Modules: TransformerEncoderLayer, the CLI's built-in
models and model files. Their forward() is the engine's (fused ops included); their
parameters are the engine's own tensors, registered under the engine's (PyTorch's) names, so
freezing, gradients, optimizers and state dicts reach them directly. Replacing a parameter
object does not (the engine keeps its own): load values with load_state_dict or copy_."""
import numpy as np

from .. import _mixprec as _C
from .._tensor import from_numpy
from .modules import Module, Parameter


class EngineModule(Module):
    def __init__(self, engine):
        super().__init__()
        object.__setattr__(self, "_engine", engine)
        self._adopt_engine_tensors()

    def _adopt_engine_tensors(self):
        self._parameters.clear()
        self._buffers.clear()
        for name, t in self._engine.named_parameters():
            self._parameters[name] = Parameter._share(t)
        for name, t in self._engine.named_buffers():
            self._buffers[name] = t

    def forward(self, input):
        return self._engine.forward(input)

    def _set_training(self, mode):
        super()._set_training(mode)
        self._engine.train(mode)

    def _convert(self, target):
        self._engine.to(target)
        self._adopt_engine_tensors()

    def __setattr__(self, name, value):
        if name in self._parameters and value is not self._parameters[name]:
            raise AttributeError(f"'{name}' is the engine's own tensor: load new values with "
                                 f"load_state_dict() or {name}.copy_(...) instead of assigning")
        super().__setattr__(name, value)

    def extra_repr(self):
        return self._engine.type_name()


class TransformerEncoder(Module):
    """torch.nn.TransformerEncoder: num_layers copies of encoder_layer (each its own weights,
    all starting from the given layer's), then norm if given; the masks go to every layer."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        from .layers import ModuleList
        self.layers = ModuleList([encoder_layer.clone() for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=bool(is_causal))
        return self.norm(output) if self.norm is not None else output


class TransformerEncoderLayer(EngineModule):
    """torch.nn.TransformerEncoderLayer: post-norm (norm_first=False), its parameter names
    (self_attn.in_proj_weight, linear1.weight, norm1.weight, ...). batch_first=False (the
    default, [S, B, E]) transposes around the engine's batch-first layer."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, device=None, dtype=None):
        if norm_first:
            raise NotImplementedError("mixprec's TransformerEncoderLayer is post-norm (norm_first=False)")
        if callable(activation):
            activation = getattr(activation, "__name__", "").lower()
        super().__init__(_C.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                       activation, layer_norm_eps))
        object.__setattr__(self, "batch_first", batch_first)
        object.__setattr__(self, "nhead", nhead)
        object.__setattr__(self, "_args", (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                           batch_first))
        if dtype is not None:
            self.to(dtype)

    def clone(self):
        """A new layer with this one's settings, weights (a copy) and mode: what
        torch.nn.TransformerEncoder makes of its layer (copy.deepcopy there)."""
        twin = TransformerEncoderLayer(*self._args)
        twin.to(next(iter(self.parameters())).dtype)
        twin.load_state_dict(self.state_dict())
        return twin.train(self.training)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src if self.batch_first else src.transpose(0, 1)  # the engine's [B, S, E]
        batch, length = x.shape[0], x.shape[1]
        causal, attn_mask = bool(is_causal), None
        if src_mask is not None:
            m = _as_array(src_mask)
            if _is_causal_mask(m, length):
                causal = True  # the attention's causal mode: later positions never computed
            else:  # [S, S], or PyTorch's per-head [B * nhead, S, S]
                attn_mask = _additive_mask(m, "src_mask", (batch * self.nhead, length, length) if m.ndim == 3 else
                                           (length, length))
        if src_key_padding_mask is None and not causal and attn_mask is None:
            out = self._engine.forward(x)
        else:
            padding = None if src_key_padding_mask is None else \
                _additive_mask(_as_array(src_key_padding_mask), "src_key_padding_mask", (batch, length))
            out = self._engine.forward_masked(x, padding, causal, attn_mask)
        return out if self.batch_first else out.transpose(0, 1)


def _as_array(mask):
    """A mask given as a mixprec or torch tensor, or anything NumPy takes, as a NumPy array."""
    return mask.detach().numpy() if hasattr(mask, "detach") else np.asarray(mask)


def _is_causal_mask(m, length):
    """The array m is PyTorch's square subsequent mask for `length` positions: above the
    diagonal -inf (or any value at or below PADDING_SCORE) or True, on and below it 0 or False.
    (Any other shape is not: _additive_mask then says what it expected.)"""
    if m.shape != (length, length):
        return False
    above = np.triu(np.ones((length, length), dtype=bool), k=1)
    if m.dtype == np.bool_:
        return bool(np.array_equal(m, above))
    m = m.astype(np.float32)
    return bool((m[above] <= _C.nn.PADDING_SCORE).all() and (m[~above] == 0).all())


def _additive_mask(m, name, shape):
    """PyTorch's src_key_padding_mask [B, S] or src_mask [S, S] as the engine's additive f32
    mask: a bool (or 0/1 integer) mask's True entries get PADDING_SCORE, a float mask is added
    as it is with -inf (and anything below) raised to PADDING_SCORE. A masked key's weight is
    then 0 as with PyTorch's -inf; a row with every key masked attends uniformly instead of
    giving NaN (docs/python.md). m: the mask as a NumPy array (_as_array)."""
    if m.shape != tuple(shape):
        what = ("(batch, source length)" if name == "src_key_padding_mask" else
                "(batch * nhead, source length, source length)" if len(shape) == 3 else
                "(source length, source length)")
        raise ValueError(f"{name}: expected shape {tuple(shape)} {what}, got {tuple(m.shape)}")
    if m.dtype == np.bool_ or np.issubdtype(m.dtype, np.integer):
        if np.issubdtype(m.dtype, np.integer) and not np.isin(m, (0, 1)).all():
            raise ValueError(f"{name}: an integer mask must hold 0 and 1 only")
        add = np.where(m.astype(bool), _C.nn.PADDING_SCORE, 0.0)
    elif np.issubdtype(m.dtype, np.floating) or m.dtype.name == "bfloat16":
        add = np.maximum(m.astype(np.float32), _C.nn.PADDING_SCORE)
        if np.isnan(add).any():
            raise ValueError(f"{name}: a float mask holds NaN")
    else:
        raise TypeError(f"{name}: expected a bool or float mask, got {m.dtype}")
    return from_numpy(np.ascontiguousarray(add, dtype=np.float32))


def from_file(path, input_shape, classes):
    """The network a model file describes (YAML or JSON, docs/models.md), for inputs of
    input_shape (C, H, W) and `classes` outputs; errors name file:line:column."""
    c, h, w = (int(v) for v in input_shape)
    return EngineModule(_C.nn.build_model_file(str(path), c, h, w, int(classes)))


def model(name):
    """A model `mixprec train --model NAME` trains ("cnn", "mlp", "resnet20", ...), with the
    same initialisation for the same seed; .input_shape and .num_classes say what it takes."""
    engine, input_shape, classes = _C.nn.make_model(name)
    m = EngineModule(engine)
    object.__setattr__(m, "input_shape", tuple(input_shape))
    object.__setattr__(m, "num_classes", classes)
    return m


model_names = _C.nn.model_names
