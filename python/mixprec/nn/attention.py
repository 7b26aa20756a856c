"""torch.nn.MultiheadAttention (PyTorch 1.13) on its own, composed of mixprec's differentiable
ops: linear, matmul, softmax, dropout, reshape/permute and cat, so every parameter, input and
float mask gets its gradient from autograd, and autocast treats each op as it treats it
anywhere else (the projections and products run in the autocast dtype).

Parameter names, shapes, initialisation, argument checks and error messages are PyTorch's, so
a torch state_dict (as NumPy arrays) loads and gives the same outputs. docs/python.md lists
what differs (uint8 masks, the 1.13 quirks with mixed float and bool masks, the dtype of the
attention weights' intermediate softmax under autocast)."""
import math

import numpy as np

from .. import _mixprec as _C
from .._mixprec import Tensor
from .._tensor import _check_device, _to_dtype
from . import functional as F
from . import init
from .layers import Linear
from .modules import Module, Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for MultiheadAttention.out_proj's class (a plain Linear), kept so that the
    module prints as torch's does."""


class MultiheadAttention(Module):
    """Multi-head attention (Vaswani et al.), PyTorch 1.13's arguments, defaults and outputs:
    forward(query, key, value) -> (attn_output, attn_weights or None)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        if embed_dim <= 0 or num_heads <= 0:  # PyTorch 1.13 fails later (ZeroDivisionError); 2.x says this
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")

        # Registration order is torch's: it orders state_dict(), parameters() and so an optimizer's groups.
        def new(*shape):
            return Parameter(_C._empty(list(shape), _C.dtype.float32))
        if self._qkv_same_embed_dim:
            self.in_proj_weight = new(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = new(embed_dim, embed_dim)
            self.k_proj_weight = new(embed_dim, self.kdim)
            self.v_proj_weight = new(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = new(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k, self.bias_v = new(1, 1, embed_dim), new(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()
        if dtype is not None:
            self.to(dtype)

    def _reset_parameters(self):
        """torch's: Glorot-uniform projections, zero biases (out_proj's weight keeps Linear's
        own initialisation), Glorot-normal bias_k and bias_v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True):
        """query [L, N, E] (batch_first: [N, L, E]; unbatched: [L, E]), key [S, N, kdim],
        value [S, N, vdim] -> attn_output shaped as query, and the attention weights [N, L, S]
        averaged over heads (average_attn_weights=False: [N, num_heads, L, S]) when
        need_weights. key_padding_mask [N, S] and attn_mask [L, S] or [N * num_heads, L, S]:
        bool (True = not attended) or float (added to the scores)."""
        padding = _read_mask(key_padding_mask, "key_padding_mask")
        mask = _read_mask(attn_mask, "attn_mask")
        batched = _check_shapes(query, key, value, padding, mask)
        if not batched:  # one sequence: a batch of one, batch-first
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            padding = None if padding is None else padding.reshape(1, -1)
        seq_first = batched and not self.batch_first
        bsz = query.shape[1] if seq_first else query.shape[0]
        tgt_len = query.shape[0] if seq_first else query.shape[1]
        src_len = key.shape[0] if seq_first else key.shape[1]
        e, heads = self.embed_dim, self.num_heads
        self._check_embed_dims(query, key, value, seq_first, bsz)
        _check_mask_shapes(padding, mask, bsz, heads, tgt_len, src_len)

        q, k, v = self._in_projection(query, key, value)
        if self.bias_k is not None and self.bias_v is not None:
            # one more key and value position, the learned ones, for every sequence
            k, v = (_append_position(t, b, seq_first, bsz) for t, b in ((k, self.bias_k), (v, self.bias_v)))
            padding, mask = _pad_last(padding), _pad_last(mask)
        elif self.bias_k is not None or self.bias_v is not None:
            raise AssertionError("bias_k and bias_v must be both set or both None")
        q, k, v = (_split_heads(t, seq_first, heads) for t in (q, k, v))  # [N * heads, len, head_dim]
        if self.add_zero_attn:
            # one more key and value position, all zeros
            k, v = (_C.cat([t, _C._zeros([bsz * heads, 1, self.head_dim], t.dtype)], 1) for t in (k, v))
            padding, mask = _pad_last(padding), _pad_last(mask)
        src_len = k.shape[1]

        # scores [N, heads, L, S]: the scaled products plus the masks (-inf where a bool mask is True)
        scores = _C.matmul(q / math.sqrt(self.head_dim), k.transpose(1, 2))
        score_dtype = scores.dtype
        scores = _add_masks(scores.reshape(bsz, heads, tgt_len, src_len), mask, padding, score_dtype)
        weights = F.softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, True)
        out = _C.matmul(weights.reshape(bsz * heads, tgt_len, src_len), v)  # [N * heads, L, head_dim]
        out = out.reshape(bsz, heads, tgt_len, self.head_dim).permute((2, 0, 1, 3) if seq_first else (0, 2, 1, 3))
        out = F.linear(out.reshape(*out.shape[:2], e), self.out_proj.weight, self.out_proj.bias)
        if not batched:
            out = out.squeeze(0)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.sum(1) / heads
        # The dtype torch's softmax of these scores has (mixprec's autocast keeps softmax in f32).
        weights = _to_dtype(weights, score_dtype)
        return out, (weights if batched else weights.squeeze(0))

    def _check_embed_dims(self, query, key, value, seq_first, bsz):
        if query.shape[-1] != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {query.shape[-1]}")
        if self._qkv_same_embed_dim:
            if tuple(key.shape) != tuple(value.shape):
                raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
        elif tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:-1])} do not match value's "
                                 f"{tuple(value.shape[:-1])}")
        for name, t, dim in (("key", key, self.kdim), ("value", value, self.vdim)):
            if t.shape[-1] != dim:
                raise AssertionError(f"expecting {name} weights shape of {(self.embed_dim, dim)}, but got "
                                     f"{(self.embed_dim, t.shape[-1])}: {name}'s last dim must be "
                                     f"{'kdim' if name == 'key' else 'vdim'}={dim}")
            if (t.shape[1] if seq_first else t.shape[0]) != bsz:
                raise RuntimeError(f"{name}'s batch size {t.shape[1] if seq_first else t.shape[0]} does not "
                                   f"match query's {bsz}")

    def _in_projection(self, query, key, value):
        """q, k, v: each input through its rows of the packed in_proj_weight (or its own
        weight when kdim/vdim differ) and in_proj_bias."""
        e = self.embed_dim
        biases = [None] * 3 if self.in_proj_bias is None else \
            [self.in_proj_bias.narrow(0, i * e, e) for i in range(3)]
        if self._qkv_same_embed_dim:
            weights = [self.in_proj_weight.narrow(0, i * e, e) for i in range(3)]
        else:
            weights = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))


# ---- masks ----------------------------------------------------------------------------------

def _read_mask(mask, name):
    """A mask as a NumPy bool array (a bool mask: True = not attended; mixprec's uint8
    comparison masks, torch's bool and uint8 tensors, NumPy bool or uint8 arrays), or as a
    float mixprec Tensor (added to the scores, with its gradient) or float NumPy array;
    None stays None. Other dtypes: torch's AssertionError."""
    if mask is None:
        return None
    if isinstance(mask, Tensor):
        if mask.dtype == _C.dtype.uint8:
            return mask.detach().numpy() != 0
        if mask.dtype.is_floating_point:
            return mask
        dtype_name = str(mask.dtype)
    else:
        if hasattr(mask, "detach"):  # a torch tensor
            mask = mask.detach().cpu()
            mask = (mask.float() if mask.is_floating_point() else mask).numpy()
        mask = np.asarray(mask)
        if mask.dtype == np.bool_ or mask.dtype == np.uint8:
            return mask != 0
        if np.issubdtype(mask.dtype, np.floating):
            return mask
        dtype_name = str(mask.dtype)
    if name == "attn_mask":
        raise AssertionError(f"Only float, byte, and bool types are supported for attn_mask, not {dtype_name}")
    raise AssertionError(f"only bool and floating types of key_padding_mask are supported, not {dtype_name}")


def _check_shapes(query, key, value, padding, mask):
    """torch's _mha_shape_check (the ranks): True for batched (3-d) inputs."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if padding is not None and padding.ndim != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                                 f"found {padding.ndim}-D tensor instead")
        if mask is not None and mask.ndim not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {mask.ndim}-D tensor instead")
        batched = True
    elif query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if padding is not None and padding.ndim != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
                                 f"found {padding.ndim}-D tensor instead")
        if mask is not None and mask.ndim not in (2, 3):
            raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {mask.ndim}-D tensor instead")
        batched = False
    else:
        raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    return batched


def _check_mask_shapes(padding, mask, bsz, num_heads, tgt_len, src_len):
    """The masks' shapes (before bias_k/v and the zero key add a position), torch's errors."""
    if mask is not None:
        expected = (tgt_len, src_len) if mask.ndim == 2 else (bsz * num_heads, tgt_len, src_len)
        if tuple(mask.shape) != expected:
            raise RuntimeError(f"The shape of the {mask.ndim}D attn_mask is {tuple(mask.shape)}, but should be "
                               f"{expected}.")
    if padding is not None and tuple(padding.shape) != (bsz, src_len):
        raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                             f"{tuple(padding.shape)}")


def _pad_last(mask):
    """A mask with one more key position (False / 0: attended), for bias_k/v and the zero key."""
    if mask is None:
        return None
    if isinstance(mask, Tensor):
        return F.pad(mask, (0, 1))
    return np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, 1)])


def _add_masks(scores, mask, padding, dtype):
    """scores [N, heads, L, S] plus attn_mask ([L, S] or [N * heads, L, S]) and
    key_padding_mask ([N, S]), each as an additive term in the scores' dtype (a bool mask's
    True -> -inf). The constant terms are summed in NumPy first: one add over the scores."""
    bsz, heads = scores.shape[0], scores.shape[1]
    terms = []
    if mask is not None:
        terms.append(mask if mask.ndim == 2 else mask.reshape(bsz, heads, *mask.shape[1:]))
    if padding is not None:
        terms.append(padding.reshape(bsz, 1, 1, padding.shape[-1]))
    constant, tensors = None, []
    for term in terms:
        if isinstance(term, Tensor):
            tensors.append(_to_dtype(term, dtype))
        else:
            add = np.where(term, -np.inf, 0.0) if term.dtype == np.bool_ else term.astype(np.float64)
            constant = add if constant is None else constant + add
    if constant is not None:
        tensors.append(_to_dtype(_C.from_numpy(np.ascontiguousarray(constant, dtype=np.float64)), dtype))
    for term in tensors:
        scores = scores + term
    return scores


# ---- shapes ---------------------------------------------------------------------------------

def _append_position(t, bias, seq_first, bsz):
    """t [S, N, E] (or [N, S, E]) with bias [1, 1, E] appended as position S for every sequence."""
    from .._functions import expand
    shape = [1, bsz, t.shape[-1]] if seq_first else [bsz, 1, t.shape[-1]]
    return _C.cat([t, expand(_to_dtype(bias, t.dtype), *shape)], 0 if seq_first else 1)


def _split_heads(t, seq_first, heads):
    """[len, N, E] (seq_first) or [N, len, E] -> [N * heads, len, head_dim], torch's order
    (sequence n's head h at n * heads + h)."""
    a, b, e = t.shape
    t = t.reshape(a, b, heads, e // heads).permute((1, 2, 0, 3) if seq_first else (0, 2, 1, 3))
    return t.reshape(-1, t.shape[2], e // heads)
